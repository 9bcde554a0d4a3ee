//! The key log (docs/PROTOCOL.md §14): `keys [AGENT_ID]`, `keys init`,
//! `rotate`. Key material is never printed: only public keys and digests.

use crate::cli::print::{emit, note, print_json};
use crate::cli::{agent_arg, client, reader_client, Global, JsonOut};
use crate::client::keys::{KeyLogView, PinStatus, RotateOptions};
use crate::client::Error;
use crate::core::json::Json;
use clap::{Args, Subcommand};

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
        out: JsonOut,
    },
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
    out: JsonOut,
}

/// `keys [AGENT_ID] [--json]` and `keys init`.
pub(crate) fn keys(g: &Global, args: KeysArgs) -> Result<(), Error> {
    if let Some(KeysCommand::Init { out }) = args.command {
        let c = client(g, 0)?;
        let a = c.keys_init()?;
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
        print_json(&view_json(&view));
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
    };
    if c.pending_event()?.is_some() {
        note("finishing the rotation an earlier run left in rotation.json (resending the same bytes)");
    }
    let r = c.rotate(&opts)?;
    if args.out.json {
        print_json(&r);
    } else {
        emit(&format!(
            "rotated ({}{}): event {}, current key {}\n",
            r.applied,
            if r.resumed { ", resumed" } else { "" },
            r.index,
            r.public_key
        ));
        if let Some(w) = &r.write {
            emit(&format!("re-published seq {} {}\n", w.seq, w.cursor));
        }
    }
    Ok(())
}

/// The view as JSON: the summary, the pin status, the verification and
/// the events (public members only: events carry no secrets).
pub(crate) fn view_json(v: &KeyLogView) -> serde_json::Value {
    serde_json::json!({
        "agent_id": v.agent_id.as_str(),
        "valid": v.report.valid,
        "length": v.report.length,
        "keys": v.report.keys,
        "pin": v.pin,
        "failures": v.report.failures,
        "events": v.records.iter().map(event_line_json).collect::<Vec<_>>(),
    })
}

/// One record as a line of `keys` and `verify`: public members only.
pub(crate) fn event_line_json(r: &Json) -> serde_json::Value {
    let e = r.get("event");
    let s = |k: &str| {
        e.and_then(|e| e.get(k))
            .and_then(Json::as_str)
            .map(str::to_owned)
    };
    serde_json::json!({
        "index": e.and_then(|e| e.get("index")).and_then(Json::as_safe_u64),
        "type": s("type"),
        "authority": s("authority"),
        "public_key": s("public_key"),
        "history_sequence": r.get("history_sequence").and_then(Json::as_safe_u64),
        "accepted_at": r.get("accepted_at").and_then(Json::as_str),
        "hash": r.get("hash").and_then(Json::as_str),
    })
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
        let j = event_line_json(r);
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
        PinStatus::New => "  pin: first sight, pinned\n".to_owned(),
        PinStatus::Consistent => "  pin: consistent with the log seen before\n".to_owned(),
        PinStatus::Rollback { pinned, served } => {
            format!("  pin: ROLLBACK: {served} event(s) served, {pinned} pinned\n")
        }
        PinStatus::Fork { index, .. } => format!("  pin: FORK at event {index}\n"),
    });
    emit(&out);
}
