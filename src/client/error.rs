//! Client errors and the CLI's exit codes: one code per kind of outcome, so a
//! script can branch on `$?` without parsing text.
//!
//! [`ExitCode`] is the one table of exit codes: every `selfcap` command
//! exits through it ([`Error::exit_code`] for a failure), `--help` prints
//! [`ExitCode::help`], and docs/CLI.md's table is checked against it
//! (tests/cli.rs).

use super::wire::Rejected;
use crate::core::reason::Class;
use std::fmt;

/// The process exit code for each kind of outcome. Stable: scripts rely on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExitCode {
    /// Success (including `head` answering "unchanged" and `publish` with
    /// nothing to send).
    Ok = 0,
    /// A local problem: unreadable or malformed file, bad key file, no
    /// identity, no service URL, state directory trouble.
    Local = 1,
    /// Bad command-line usage (unknown flag, missing argument).
    Usage = 2,
    /// The service could not be reached, or kept failing (5xx), after the
    /// retries; or it answered something outside the protocol.
    Unavailable = 3,
    /// Write rejected, class `fix_payload`: fix the capsule or the request,
    /// then retry once (also local pre-check failures: nothing was sent).
    FixPayload = 4,
    /// Write rejected, class `back_off` (429): wait until `next_write_at`.
    BackOff = 5,
    /// Write rejected, class `signature`: stop; check the key and signing.
    /// Also a signed read refused (`401 read_signature_*`), and the
    /// operator's token refused (`admin_auth_*`): a credential problem
    /// either way, which retrying unchanged cannot fix.
    Signature = 6,
    /// Nothing there: no capsule published for the agent (or another
    /// read-side request error).
    NotFound = 7,
    /// `verify`: the chain or export does not verify.
    Unverified = 8,
    /// `upgrade` / `upgrade claim`: the payment could not be verified on-chain
    /// by the service within `--provider-timeout` (`payment_provider_unavailable`).
    /// Nothing was credited, the payment is safe, and the message names the
    /// exact command that claims it later.
    ClaimLater = 9,
    /// `keys` (and the key commands): the service served a key log shorter
    /// than the one pinned here (rollback) or another event at a pinned
    /// index (fork). Evidence against the service: nothing was changed.
    KeyLogConflict = 10,
}

impl ExitCode {
    /// Every code, in numeric order.
    pub const ALL: [ExitCode; 11] = [
        ExitCode::Ok,
        ExitCode::Local,
        ExitCode::Usage,
        ExitCode::Unavailable,
        ExitCode::FixPayload,
        ExitCode::BackOff,
        ExitCode::Signature,
        ExitCode::NotFound,
        ExitCode::Unverified,
        ExitCode::ClaimLater,
        ExitCode::KeyLogConflict,
    ];

    /// The number the process exits with.
    pub const fn code(self) -> i32 {
        self as i32
    }

    /// One line for error output: the last line of a rejection's report
    /// (`exit 5: rejected, back off ...`).
    pub const fn describe(self) -> &'static str {
        match self {
            ExitCode::Ok => "success (also: head unchanged, publish with nothing to send)",
            ExitCode::Local => {
                "local error: bad file or JSON, bad key file, no identity, no service URL"
            }
            ExitCode::Usage => "usage error",
            ExitCode::Unavailable => {
                "service unreachable or failing after retries (network, 5xx, protocol)"
            }
            ExitCode::FixPayload => "rejected, fix the payload (class fix_payload)",
            ExitCode::BackOff => "rejected, back off until next_write_at (class back_off)",
            ExitCode::Signature => {
                "rejected, signature problem (a write, or a signed read): check key and signing"
            }
            ExitCode::NotFound => {
                "not found: no capsule published for that agent (or private, not granted to us)"
            }
            ExitCode::Unverified => "verification failed",
            ExitCode::ClaimLater => {
                "payment not verifiable now (provider outage): safe, claim it later as printed"
            }
            ExitCode::KeyLogConflict => {
                "key log rollback or fork: the service contradicts the log pinned here"
            }
        }
    }

    /// What the code means for someone scripting `selfcap`, as `--help`
    /// prints it: the kinds of failure it covers and what to do. A long one
    /// is broken into lines for the help (see [`ExitCode::help`]); docs/CLI.md
    /// joins them into one table cell.
    pub const fn explain(self) -> &'static str {
        match self {
            ExitCode::Ok => "success (also: head \"unchanged\", publish with nothing to send)",
            ExitCode::Local => {
                "local error: bad file or JSON, bad key file, no identity, no service URL"
            }
            ExitCode::Usage => "usage error",
            ExitCode::Unavailable => {
                "service unreachable or failing after retries (network, 5xx, protocol)"
            }
            ExitCode::FixPayload => {
                "write rejected: fix the payload (class fix_payload: schema, unsafe_content,
replay_seq, capsule_too_large, ...; also the local pre-check, nothing sent)"
            }
            ExitCode::BackOff => {
                "write rejected: back off until next_write_at (class back_off: quota, cooldown)"
            }
            ExitCode::Signature => {
                "write rejected: signature problem (class signature): check key and signing;
also a signed read refused (read_signature_*: check the key and the clock), or
the operator token refused (admin_auth_*: check SELFCAP_ADMIN_TOKEN)"
            }
            ExitCode::NotFound => {
                "not found: no capsule published for that agent (or it is private and this
identity is not granted that read)"
            }
            ExitCode::Unverified => "verification failed",
            ExitCode::ClaimLater => {
                "upgrade: the service could not verify the payment on-chain within
--provider-timeout (payment_provider_unavailable); nothing was credited, the
payment is safe, and the message gives the command that claims it later"
            }
            ExitCode::KeyLogConflict => {
                "key log rollback or fork: the service served a shorter key log than the one
pinned here, or another event at a pinned index (evidence against the
service; nothing was changed)"
            }
        }
    }

    /// The `Exit codes:` block of `selfcap --help` (and of `put` and
    /// `publish`): every code with its [`ExitCode::explain`], continuation
    /// lines indented under the text.
    pub fn help() -> String {
        let mut out = String::from("Exit codes:");
        for c in ExitCode::ALL {
            let mut lines = c.explain().lines();
            out.push_str(&format!("\n  {}  {}", c.code(), lines.next().unwrap_or("")));
            for more in lines {
                out.push_str("\n     ");
                out.push_str(more);
            }
        }
        out
    }

    /// The exit code for a rejection of the given class.
    pub const fn for_class(class: Class) -> ExitCode {
        match class {
            Class::FixPayload => ExitCode::FixPayload,
            Class::BackOff => ExitCode::BackOff,
            Class::Signature => ExitCode::Signature,
            Class::Request => ExitCode::NotFound,
            Class::Server => ExitCode::Unavailable,
        }
    }
}

/// Everything a client operation can fail with. `Display` is one line.
#[derive(Debug)]
pub enum Error {
    /// Bad input or local state (see [`ExitCode::Local`]).
    Local(String),
    /// Network failure or 5xx after the retry policy gave up.
    Unavailable(String),
    /// The service answered outside the protocol (unexpected status or body).
    Protocol(String),
    /// A write was refused, by the service or by the local pre-check.
    Rejected(Box<Rejected>),
    /// A read found nothing (404 `capsule_not_found`) or was refused as a
    /// request error.
    NotFound(String),
    /// A verification did not pass.
    Unverified(String),
    /// The service refused a signed read's signature (`401
    /// read_signature_*`, docs/PROTOCOL.md §12).
    ReadSignature(String),
    /// The operator API refused the token (`401 admin_auth_required`, `403
    /// admin_auth_invalid`, docs/PROTOCOL.md §17).
    AdminAuth(String),
    /// A claim gave up waiting through a payment-provider outage: nothing was
    /// credited and the payment is safe; the message says how to claim later.
    ClaimLater(String),
    /// A served key log contradicts the pin kept here (rollback or fork).
    KeyLogConflict(String),
}

impl Error {
    /// The exit code this failure ends a command with: the kind of error,
    /// or for a rejection its reason codes' class.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::Local(_) => ExitCode::Local,
            Error::Unavailable(_) | Error::Protocol(_) => ExitCode::Unavailable,
            Error::Rejected(r) => ExitCode::for_class(r.class()),
            Error::ReadSignature(_) | Error::AdminAuth(_) => ExitCode::Signature,
            Error::NotFound(_) => ExitCode::NotFound,
            Error::Unverified(_) => ExitCode::Unverified,
            Error::ClaimLater(_) => ExitCode::ClaimLater,
            Error::KeyLogConflict(_) => ExitCode::KeyLogConflict,
        }
    }

    pub(crate) fn local(msg: impl Into<String>) -> Error {
        Error::Local(msg.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Local(m)
            | Error::Unavailable(m)
            | Error::NotFound(m)
            | Error::ReadSignature(m)
            | Error::AdminAuth(m)
            | Error::ClaimLater(m)
            | Error::KeyLogConflict(m) => f.write_str(m),
            Error::Protocol(m) => write!(f, "unexpected answer from the service: {m}"),
            Error::Rejected(r) => f.write_str(&r.summary()),
            Error::Unverified(m) => write!(f, "verification failed: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<Rejected> for Error {
    fn from(r: Rejected) -> Self {
        Error::Rejected(Box::new(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_in_order() {
        for (i, c) in ExitCode::ALL.iter().enumerate() {
            assert_eq!(c.code(), i as i32);
        }
    }

    #[test]
    fn the_help_block_lists_every_code_in_order() {
        let help = ExitCode::help();
        let numbered: Vec<i32> = help
            .lines()
            .filter_map(|l| l.strip_prefix("  ")?.split("  ").next()?.parse().ok())
            .collect();
        let all: Vec<i32> = ExitCode::ALL.iter().map(|c| c.code()).collect();
        assert_eq!(numbered, all, "{help}");
    }

    #[test]
    fn each_write_class_has_its_own_code() {
        let fix = ExitCode::for_class(Class::FixPayload);
        let back = ExitCode::for_class(Class::BackOff);
        let sig = ExitCode::for_class(Class::Signature);
        assert_eq!((fix.code(), back.code(), sig.code()), (4, 5, 6));
    }
}
