//! Who may read this agent's capsule (docs/PROTOCOL.md §12): `grant`,
//! `revoke`, `visibility`. Each edits `access_control` in the desired
//! capsule (capsule.json) with `self_capsule::client::access`, then runs
//! `publish`: an ordinary signed write, with the same output and exit codes.
//! What was edited goes to stderr, so stdout is `publish`'s alone.

use crate::cli::print::{emit, print_json};
use crate::cli::publish;
use crate::cli::{agent_arg, client, Global, JsonOut, WriteOpts};
use crate::client::access::{self, Grant};
use crate::client::{now_ms, Error};
use crate::core::model::ReadScope;
use crate::core::time;
use clap::ValueEnum;

pub(crate) const GRANT_AFTER_HELP: &str = "\
Scopes: head (head.json), capsule (capsule.json), history (history.json, snapshots,
export.json), verify (verify.json); all four is the default. A grant of every scope
without --expires is written as the bare agent id; any other as
{agent_id, scopes, expires_at, granted_at}. Granting again replaces that reader's grant.

The grant only matters while the capsule is private (--private, or
`selfcap visibility private`). It is published with capsule.json as it stands (any
other unpublished edits in it go too), as `selfcap publish` would: same output, same
exit codes. The reader reads with its own identity: `selfcap get OWNER_ID` signs the
read when the capsule turns out to be private.";

pub(crate) const REVOKE_AFTER_HELP: &str = "\
Publishes capsule.json without that reader, as `selfcap publish` would. A reader not
in the list: nothing is written (exit 0). Revoking stops later reads; what the reader
already fetched is not recalled.";

pub(crate) const VISIBILITY_AFTER_HELP: &str = "\
private: only this agent and the readers in access_control.authorized_readers (see
`selfcap grant`) may read; every other read gets 404, as for an agent that never
published. Reads by this identity are signed from then on. Switching to private hides
what comes after, not what was already read while public. Published like
`selfcap publish` (same output, same exit codes).";

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Visibility {
    Public,
    Private,
}

/// `grant AGENT_ID [--scope LIST] [--expires RFC3339] [--private]`.
pub(crate) fn grant(
    g: &Global,
    agent_id: &str,
    scope: &str,
    expires: Option<&str>,
    private: bool,
    write: &WriteOpts,
    out: JsonOut,
) -> Result<(), Error> {
    let reader = agent_arg(Some(agent_id))?.expect("an argument was given");
    let grant = Grant {
        reader,
        scopes: access::parse_scopes(scope)?,
        expires_ms: expires.map(access::parse_time).transpose()?,
    };
    let c = client(g, write.wait)?;
    let now = now_ms();
    let next = c.edit_desired(
        |d| access::grant(d, &grant, now, private),
        write.no_precheck,
    )?;
    let scopes: Vec<&str> = ReadScope::ALL
        .into_iter()
        .filter(|&s| grant.scopes.allows(s))
        .map(ReadScope::as_str)
        .collect();
    eprintln!(
        "selfcap: granted {} {}{}",
        grant.reader,
        scopes.join(","),
        grant
            .expires_ms
            .map(|e| format!(" until {}", time::rfc3339(e)))
            .unwrap_or_default()
    );
    if !access::is_private(&next) {
        eprintln!(
            "selfcap: note: the capsule is public, so anyone can read it; the grant matters \
             once it is private (`selfcap visibility private`)"
        );
    }
    publish::publish(g, false, write, out)
}

/// `revoke AGENT_ID`.
pub(crate) fn revoke(
    g: &Global,
    agent_id: &str,
    write: &WriteOpts,
    out: JsonOut,
) -> Result<(), Error> {
    let reader = agent_arg(Some(agent_id))?.expect("an argument was given");
    let c = client(g, write.wait)?;
    let mut listed = false;
    c.edit_desired(
        |d| {
            let (next, removed) = access::revoke(d, &reader)?;
            listed = removed;
            Ok(next)
        },
        write.no_precheck,
    )?;
    if !listed {
        if out.json {
            print_json(&serde_json::json!({"published": false, "revoked": false}));
        } else {
            emit(&format!(
                "not a reader: {reader} is not in access_control.authorized_readers; nothing to \
                 publish\n"
            ));
        }
        return Ok(());
    }
    eprintln!("selfcap: revoked {reader}");
    publish::publish(g, false, write, out)
}

/// `visibility public|private`.
pub(crate) fn visibility(
    g: &Global,
    v: Visibility,
    write: &WriteOpts,
    out: JsonOut,
) -> Result<(), Error> {
    let public = matches!(v, Visibility::Public);
    let c = client(g, write.wait)?;
    c.edit_desired(|d| access::set_visibility(d, public), write.no_precheck)?;
    eprintln!(
        "selfcap: visibility {}",
        if public { "public" } else { "private" }
    );
    publish::publish(g, false, write, out)
}
