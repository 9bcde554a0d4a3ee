//! The key log (docs/PROTOCOL.md §14): `keys [AGENT_ID]`, `keys init`,
//! `rotate`. Key material is never printed: only public keys and digests.

use crate::cli::print::{emit, note, print_json};
use crate::cli::{agent_arg, client, reader_client, Global, JsonOut};
use crate::client::keys::{KeyLogView, PinStatus, RecoverOptions, RotateOptions, Rotated};
use crate::client::Error;
use crate::core::key_log::Digest;
use crate::core::key_log::PinCheck;
use clap::{Args, Subcommand};
use std::path::PathBuf;

pub(crate) const KEYS_AFTER_HELP: &str = "\
Reads keys.json, verifies it offline against the service's keyring (GET /api/v1/self/keys),
prints the summary and every event, and pins the log per agent (key_pins.json in the state
directory). A log shorter than the pinned one (rollback) or another event at a pinned index
(fork) is reported and exits 10; a log that does not verify exits 8.

`selfcap keys init`: for an identity that published before it had a key log, creates
next.key if missing and submits the inception alone (a new identity's first publish carries
it by itself).";

pub(crate) const ROTATE_AFTER_HELP: &str = "\
Reveals next.key (it becomes the current key) and commits a freshly generated next key.
Crash-safe: the new next key is written and synced to next.key.new, and the signed request
to rotation.json, before anything is sent; a rerun resends exactly those bytes first and
finishes the swap (key <- next.key, next.key <- next.key.new, identity.json).

--compromised --last-good SEQ: the current key was stolen. The rotation disputes the
outgoing key's writes above SEQ (its cursor is taken from published.json or history.json)
and re-publishes the desired capsule (capsule.json; else the last write recorded here) at
SEQ+1, signed by the new key, even if the thief burnt seq to its maximum.";

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct KeysArgs {
    #[command(subcommand)]
    command: Option<KeysCommand>,
    /// Another agent (default: this identity).
    agent_id: Option<String>,
    #[command(flatten)]
    out: JsonOut,
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Submit an inception alone (an identity that published without a key log).
    Init {
        #[command(flatten)]
        recovery: RecoveryDigest,
        #[command(flatten)]
        out: JsonOut,
    },
}

/// `--recovery-digest HEX`: the operator's recovery key, by digest.
#[derive(Args, Clone)]
pub(crate) struct RecoveryDigest {
    /// Commit this recovery key: the SHA-256 (64 lowercase hex) of the operator's
    /// recovery public key's 32 bytes (the key itself stays with the operator).
    #[arg(long, value_name = "HEX")]
    recovery_digest: Option<String>,
}

impl RecoveryDigest {
    pub(crate) fn parse(&self) -> Result<Option<Digest>, Error> {
        self.recovery_digest
            .as_deref()
            .map(|d| {
                Digest::from_hex(d).ok_or_else(|| {
                    Error::Local(format!(
                        "--recovery-digest {d:?}: expected 64 lowercase hex characters"
                    ))
                })
            })
            .transpose()
    }
}

#[derive(Args)]
pub(crate) struct RotateArgs {
    /// The current key was stolen: dispute its writes after --last-good.
    #[arg(long, requires = "last_good")]
    compromised: bool,
    /// The owner's last good write's seq (with --compromised).
    #[arg(long, value_name = "SEQ", requires = "compromised")]
    last_good: Option<u64>,
    #[command(flatten)]
    recovery: RecoveryDigest,
    #[command(flatten)]
    out: JsonOut,
}

#[derive(Args)]
pub(crate) struct RecommitArgs {
    #[command(flatten)]
    recovery: RecoveryDigest,
    #[command(flatten)]
    out: JsonOut,
}

#[derive(Args)]
pub(crate) struct RecoverArgs {
    /// The operator's recovery key: a seed file (64 hex, mode 0600), as `key` is.
    #[arg(long, value_name = "FILE")]
    recovery_key: PathBuf,
    /// Void this next-key rotation (its index in the key log), within its window.
    #[arg(long, value_name = "INDEX")]
    supersedes: Option<u64>,
    #[command(flatten)]
    recovery: RecoveryDigest,
    #[command(flatten)]
    out: JsonOut,
}

pub(crate) const RECOMMIT_AFTER_HELP: &str = "\
For an owner who lost next.key: the current key commits a fresh next key (written and
synced to next.key.recommit before anything is sent). It takes effect only after the
agent's recovery window (72 h by default) and only if no rotation lands first: until then
the previous commitment stands, so a thief holding the current key cannot use a recommit to
rotate. Keep next.key.recommit; `selfcap rotate` uses it once the recommit has matured.";

pub(crate) const RECOVER_AFTER_HELP: &str = "\
The operator's recovery: a rotation revealing the recovery key (committed by digest, e.g.
with `keygen --recovery-digest`), signed by it and by a new current key generated here.
The new current key (key.new) and next key (next.key.new) are written and synced, and the
signed request to rotation.json, before anything is sent; a rerun resends the same bytes.
--supersedes INDEX voids that next-key rotation while its window is open: every key made
current from it on is void and what those keys signed is disputed. The revealed recovery
key is spent: --recovery-digest commits a new one.";

/// `keys [AGENT_ID] [--json]` and `keys init`.
pub(crate) fn keys(g: &Global, args: KeysArgs) -> Result<(), Error> {
    if let Some(KeysCommand::Init { recovery, out }) = args.command {
        let c = client(g, 0)?;
        let a = c.keys_init(recovery.parse()?)?;
        if out.json {
            print_json(&a);
        } else {
            emit(&format!(
                "key log started: inception accepted ({}), next key committed\n",
                a.applied
            ));
        }
        return Ok(());
    }
    let agent = agent_arg(args.agent_id.as_deref())?;
    let c = reader_client(g, agent.as_ref())?;
    let view = c.key_log(agent.as_ref())?;
    if args.out.json {
        print_json(&view.to_json());
    } else {
        print_view(&view);
    }
    if let Some(e) = view.pin.conflict(&view.agent_id) {
        return Err(e);
    }
    if !view.report.valid {
        return Err(Error::Unverified(format!(
            "the key log of {} does not verify",
            view.agent_id
        )));
    }
    Ok(())
}

/// `rotate [--compromised --last-good SEQ] [--json]`.
pub(crate) fn rotate(g: &Global, args: RotateArgs) -> Result<(), Error> {
    let c = client(g, 0)?;
    let opts = RotateOptions {
        last_good: args.last_good.filter(|_| args.compromised),
        recovery_digest: args.recovery.parse()?,
    };
    note_pending(&c)?;
    let r = c.rotate(&opts)?;
    print_rotated(&r, args.out);
    Ok(())
}

/// `recommit [--recovery-digest HEX] [--json]`.
pub(crate) fn recommit(g: &Global, args: RecommitArgs) -> Result<(), Error> {
    let c = client(g, 0)?;
    note_pending(&c)?;
    let r = c.recommit(args.recovery.parse()?)?;
    print_rotated(&r, args.out);
    if !args.out.json {
        if let Some(p) = r.keys.as_ref().and_then(|k| k.pending_recommit.as_ref()) {
            note(&format!(
                "the new next key (next.key.recommit) takes effect at {} unless a rotation lands first; keep it",
                p.matures_at
            ));
        }
    }
    Ok(())
}

/// `recover --recovery-key FILE [--supersedes INDEX] [--json]`.
pub(crate) fn recover(g: &Global, args: RecoverArgs) -> Result<(), Error> {
    let c = client(g, 0)?;
    note_pending(&c)?;
    let r = c.recover(&RecoverOptions {
        recovery_key: args.recovery_key,
        supersedes: args.supersedes,
        recovery_digest: args.recovery.parse()?,
    })?;
    print_rotated(&r, args.out);
    Ok(())
}

fn note_pending(c: &crate::client::Client) -> Result<(), Error> {
    if let Some(p) = c.pending_event()? {
        note(&format!(
            "an earlier run left a {} in rotation.json: resending the same bytes first",
            p.kind
        ));
    }
    Ok(())
}

fn print_rotated(r: &Rotated, out: JsonOut) {
    if out.json {
        print_json(r);
        return;
    }
    emit(&format!(
        "{} accepted ({}{}): event {}, current key {}\n",
        r.kind,
        r.applied,
        if r.resumed { ", resumed" } else { "" },
        r.index,
        r.public_key
    ));
    if let Some(w) = &r.write {
        emit(&format!("re-published seq {} {}\n", w.seq, w.cursor));
    }
}

fn print_view(v: &KeyLogView) {
    let mut out = String::new();
    out.push_str(&format!(
        "{}: key log of {} ({} event(s))\n",
        if v.report.valid { "valid" } else { "NOT VALID" },
        v.agent_id,
        v.report.length
    ));
    match &v.report.keys {
        None => out.push_str("  no key log: the genesis key is the agent's key\n"),
        Some(k) => {
            out.push_str(&format!(
                "  current key {} (index {}), next committed: {}, recovery committed: {}\n",
                k.public_key, k.index, k.next_committed, k.recovery_committed
            ));
            if let Some(f) = &k.final_at {
                out.push_str(&format!("  provisional until {f}\n"));
            }
            if let Some(p) = &k.pending_recommit {
                out.push_str(&format!(
                    "  recommit pending, matures at {}\n",
                    p.matures_at
                ));
            }
            if k.disputed > 0 {
                out.push_str(&format!("  disputed keys: {}\n", k.disputed));
            }
        }
    }
    for r in &v.records {
        let j = crate::client::keys::event_line_json(r);
        let s = |k: &str| j[k].as_str().unwrap_or("-").to_owned();
        out.push_str(&format!(
            "  event {} {} ({}) key {} accepted {}\n",
            j["index"],
            s("type"),
            s("authority"),
            s("public_key"),
            s("accepted_at")
        ));
    }
    for f in &v.report.failures {
        out.push_str(&format!(
            "  FAILED event {}: {} ({})\n",
            f.index.map_or("-".into(), |i| i.to_string()),
            f.check,
            f.detail
        ));
    }
    out.push_str(&match &v.pin {
        PinStatus::Unpinned => "  pin: none (no state directory to keep one in)\n".to_owned(),
        PinStatus::New => "  pin: first sight, pinned\n".to_owned(),
        PinStatus::Checked(PinCheck::Consistent) => {
            "  pin: consistent with the log seen before\n".to_owned()
        }
        PinStatus::Checked(PinCheck::Rollback { pinned, served }) => {
            format!("  pin: ROLLBACK: {served} event(s) served, {pinned} pinned\n")
        }
        PinStatus::Checked(PinCheck::Fork { index, .. }) => {
            format!("  pin: FORK at event {index}\n")
        }
    });
    emit(&out);
}
