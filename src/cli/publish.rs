//! The write side: `template`, `set`, `sign`, `put`, `publish`. Every one of
//! them runs the local pre-check first unless told not to, so a capsule the
//! service would refuse never costs a cooldown count.

use crate::cli::print::{emit, print_json};
use crate::cli::{client, location, read_json, Global, JsonOut, WriteOpts};
use crate::client::{self, Error, ExitCode, PublishOutcome, PutOptions, PutResult};
use crate::core::jcs;
use std::path::PathBuf;

/// `template`: a minimal valid capsule for this identity.
pub(crate) fn template(g: &Global) -> Result<(), Error> {
    let state = location(g).find()?;
    let agent = state.load_key()?.agent_id();
    print_json(&client::template(&agent));
    Ok(())
}

/// `set FILE`: replaces the desired capsule (capsule.json in the state dir).
pub(crate) fn set(
    g: &Global,
    file: &PathBuf,
    no_precheck: bool,
    out: JsonOut,
) -> Result<(), Error> {
    let capsule = read_json(Some(file))?;
    let c = client(g, 0)?;
    c.set_desired(&capsule, no_precheck)?;
    let s = c.status()?;
    if out.json {
        print_json(&s);
    } else if s.dirty {
        emit("dirty: differs from the last accepted write; `selfcap publish` sends it\n");
    } else {
        emit("clean: same as the last accepted write\n");
    }
    Ok(())
}

/// `sign FILE`: the signed envelope on stdout; nothing is sent.
pub(crate) fn sign(
    g: &Global,
    file: &PathBuf,
    seq: Option<u64>,
    no_precheck: bool,
) -> Result<(), Error> {
    let capsule = read_json(Some(file))?;
    let c = client(g, 0)?;
    if !no_precheck {
        c.precheck(&capsule)?;
    }
    let (_, env) = c.sign(&capsule, seq)?;
    emit(&format!("{}\n", jcs::canonicalize(&env)));
    Ok(())
}

/// `put FILE`: signs with the next seq and PUTs it.
pub(crate) fn put(
    g: &Global,
    file: &PathBuf,
    write: &WriteOpts,
    out: JsonOut,
) -> Result<(), Error> {
    let capsule = read_json(Some(file))?;
    let c = client(g, write.wait)?;
    let r = c.put(&capsule, &put_options(write));
    report_put(r, out)
}

/// `publish`: puts capsule.json only when it differs from the last accepted
/// write (or with `--force`).
pub(crate) fn publish(
    g: &Global,
    force: bool,
    write: &WriteOpts,
    out: JsonOut,
) -> Result<(), Error> {
    let c = client(g, write.wait)?;
    match c.publish(&put_options(write), force) {
        Ok(PublishOutcome::Clean { seq, cursor }) => {
            if out.json {
                print_json(&serde_json::json!({
                    "published": false, "seq": seq, "cursor": cursor
                }));
            } else {
                emit(&format!(
                    "clean: nothing to publish (seq {seq}, {cursor})\n"
                ));
            }
            Ok(())
        }
        Ok(PublishOutcome::Published(r)) => report_put(Ok(r), out),
        Err(e) => report_put(Err(e), out),
    }
}

fn put_options(w: &WriteOpts) -> PutOptions {
    PutOptions {
        seq: w.seq,
        skip_precheck: w.no_precheck,
    }
}

/// The outcome of a write on stdout. A rejection is still returned as the
/// error (stderr and the exit code come from it); with `--json`, stdout
/// also gets the service's body plus `accepted: false` and `exit_code`.
fn report_put(r: Result<PutResult, Error>, out: JsonOut) -> Result<(), Error> {
    match r {
        Ok(r) => {
            let a = &r.accepted;
            if out.json {
                print_json(a);
            } else {
                emit(&format!(
                    "accepted seq {} {} (writes: {} of {} used in 24 h, {} left)\n",
                    a.seq, a.cursor, a.writes.used_24h, a.writes.limit_24h, a.writes.remaining_24h
                ));
            }
            if r.confirmed_from_head {
                eprintln!("selfcap: the answer was lost; head.json confirms the write");
            }
            Ok(())
        }
        Err(Error::Rejected(rej)) => {
            if out.json {
                let mut v = serde_json::to_value(&*rej).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.insert("accepted".into(), false.into());
                    let code = ExitCode::for_class(rej.class()).code();
                    o.insert("exit_code".into(), code.into());
                }
                print_json(&v);
            }
            Err(Error::Rejected(rej))
        }
        Err(e) => Err(e),
    }
}
