//! The identity and its state directory: `keygen`, `id`, `bootstrap`,
//! `status`. The key itself is never printed, only the ids derived from it.

use crate::cli::print::{emit, print_json};
use crate::cli::{client, location, Global, JsonOut};
use crate::client::{import, state, Client, Error};
use std::path::PathBuf;

/// `keygen`: a new identity in the directory the options select.
pub(crate) fn keygen(
    g: &Global,
    recovery: Option<crate::core::key_log::Digest>,
    out: JsonOut,
) -> Result<(), Error> {
    let (dir, key) = Client::keygen(&location(g))?;
    if let Some(d) = recovery {
        // Committed by the inception the first publish carries.
        let mut id = dir
            .identity()?
            .ok_or_else(|| Error::Local("keygen wrote no identity.json".into()))?;
        id.recovery_key_digest = Some(d.to_hex());
        dir.save_identity(&id)?;
    }
    let v = serde_json::json!({
        "agent_id": key.agent_id().as_str(),
        "public_key": key.public_key().to_hex(),
        "state_dir": dir.path().display().to_string(),
    });
    if out.json {
        print_json(&v);
    } else {
        print_id(&v);
        eprintln!("selfcap: next: selfcap bootstrap --url URL");
    }
    Ok(())
}

/// `import-identity [FILE]`: the public MCP server's identity, as a new
/// identity here with the same agent id.
pub(crate) fn import(g: &Global, file: Option<PathBuf>, out: JsonOut) -> Result<(), Error> {
    let file = file
        .or_else(import::default_identity_file)
        .ok_or_else(|| Error::Local("no home directory: pass the identity file".into()))?;
    let (dir, key) = import::import_identity(&location(g), &file)?;
    let v = serde_json::json!({
        "agent_id": key.agent_id().as_str(),
        "public_key": key.public_key().to_hex(),
        "state_dir": dir.path().display().to_string(),
        "imported_from": file.display().to_string(),
    });
    if out.json {
        print_json(&v);
    } else {
        print_id(&v);
        eprintln!(
            "selfcap: imported from {}; next: selfcap bootstrap --url URL",
            file.display()
        );
    }
    Ok(())
}

/// `id`: the agent id and public key (no network, no client).
pub(crate) fn id(g: &Global, out: JsonOut) -> Result<(), Error> {
    let state = location(g).find()?;
    let key = state.load_key()?;
    let v = serde_json::json!({
        "agent_id": key.agent_id().as_str(),
        "public_key": key.public_key().to_hex(),
        "state_dir": state.path().display().to_string(),
    });
    if out.json {
        print_json(&v);
    } else {
        print_id(&v);
    }
    Ok(())
}

/// `bootstrap`: checks the agent id with the service and stores its URLs.
pub(crate) fn bootstrap(g: &Global, out: JsonOut) -> Result<(), Error> {
    if g.url.is_none() {
        return Err(Error::Local(
            "bootstrap needs the service URL: --url URL (or SELFCAP_URL)".into(),
        ));
    }
    let c = client(g, 0)?;
    let b = c.bootstrap()?;
    if out.json {
        print_json(&b);
    } else {
        emit(&format!(
            "agent_id     {}\nhead_url     {}\ncapsule_url  {}\n",
            b.agent_id, b.head_url, b.capsule_url
        ));
        eprintln!(
            "selfcap: stored in {}",
            c.state().file(state::SERVICE_FILE).display()
        );
    }
    Ok(())
}

/// `status`: identity, service, last accepted write, dirty or clean, and
/// the tier (from the last head.json seen, or the last credited upgrade).
pub(crate) fn status(g: &Global, out: JsonOut) -> Result<(), Error> {
    let s = client(g, 0)?.status()?;
    if out.json {
        print_json(&s);
    } else {
        let none = || "-".to_string();
        emit(&format!(
            "agent_id    {}\nstate_dir   {}\nservice     {}\npublished   {}\ndesired     {}\n",
            s.agent_id,
            s.state_dir,
            s.base_url.clone().unwrap_or_else(none),
            match (&s.published_seq, &s.published_cursor) {
                (Some(q), Some(c)) => format!("seq {q} {c}"),
                _ => none(),
            },
            match &s.desired_cursor {
                Some(c) if s.dirty => format!("{c} (dirty: run `selfcap publish`)"),
                Some(c) => format!("{c} (clean)"),
                None => none(),
            }
        ));
        emit(&format!(
            "tier        {}\n",
            match (&s.tier, &s.paid_until, &s.tier_as_of) {
                (Some(t), Some(u), Some(at)) => format!("{t} (paid until {u}; as of {at})"),
                (Some(t), _, Some(at)) => format!("{t} (as of {at})"),
                (Some(t), _, None) => t.clone(),
                (None, ..) => format!("{} (run `selfcap head` to read it)", none()),
            }
        ));
        if let Some(i) = s.key_index {
            emit(&format!(
                "key         index {i} in the key log (`selfcap keys`)\n"
            ));
        }
        if let Some(k) = &s.key_event_pending {
            emit(&format!(
                "pending     a {k} in rotation.json, not yet seen accepted: run the command again to finish it\n"
            ));
        }
    }
    Ok(())
}

fn print_id(v: &serde_json::Value) {
    emit(&format!(
        "agent_id    {}\npublic_key  {}\nstate_dir   {}\n",
        v["agent_id"].as_str().unwrap_or(""),
        v["public_key"].as_str().unwrap_or(""),
        v["state_dir"].as_str().unwrap_or("")
    ));
}
