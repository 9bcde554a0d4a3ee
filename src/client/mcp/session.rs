//! The two tools an agent calls when it starts: `self_bootstrap` (an
//! identity, created or imported, and the service registered) and
//! `self_rehydrate` (the state to resume from, local first: unpublished
//! local work wins over anything the service holds, so a restart never
//! goes back in time).

use super::{to_value, ToolHost};
use crate::client::import::import_identity;
use crate::client::{Client, Error, Side};
use crate::core::jcs;
use crate::core::json::Json;
use crate::core::mcp::results::Answer;
use crate::core::urls::Doc;
use serde_json::{json, Value};

impl ToolHost {
    pub(super) fn bootstrap(&self) -> Result<Answer, Error> {
        let (state, status, imported) = match self.existing() {
            Some(s) => (s, "existing_identity", None),
            None => match self.import_from.as_ref().filter(|f| f.is_file()) {
                Some(f) => {
                    let (dir, _) = import_identity(&self.location, f)?;
                    (dir, "imported_identity", Some(f.display().to_string()))
                }
                None => (Client::keygen(&self.location)?.0, "created", None),
            },
        };
        let c = self.client_for(state);
        let key = c.key()?;
        let agent = key.agent_id();
        // Registration is stateless on the service: ask again only when the
        // stored URLs are missing or for another service.
        let stored = c.state().service()?;
        let registration = match (&stored, c.base_url()) {
            (_, Err(e)) => Err(e.to_string()),
            (Some(s), Ok(base)) if s.base_url == base => Ok(base),
            (_, Ok(base)) => c.bootstrap().map(|_| base).map_err(|e| e.to_string()),
        };
        let seq = c.state().published()?.map_or(0, |p| p.seq);
        let mut o = json!({
            "status": status,
            "agent_id": agent.as_str(),
            "public_key": key.public_key().to_hex(),
            "seq": seq,
            "identity_path": c.state().path().display().to_string(),
            "head_url": Doc::Head.path(agent.as_str()),
            "capsule_url": Doc::Capsule.path(agent.as_str()),
            "history_url": Doc::History.path(agent.as_str()),
        });
        if let Some(f) = imported {
            o["imported_from"] = f.into();
        }
        match registration {
            Ok(base) => {
                o["registered"] = true.into();
                o["base_url"] = base.into();
                o["hint"] = if seq == 0 {
                    "Ready. Store your first capsule with self_write; after a restart call self_rehydrate."
                } else {
                    "Ready. Call self_rehydrate to load your capsule."
                }
                .into();
            }
            Err(why) => {
                o["registered"] = false.into();
                o["registration_error"] = why.into();
                o["hint"] = "The identity is saved locally. Set SELFCAP_URL to the service's URL (or check that it is reachable) and call self_bootstrap again.".into();
            }
        }
        Ok(Answer::ok(o))
    }

    pub(super) fn rehydrate(&self) -> Result<Answer, Error> {
        let c = match self.client() {
            Ok(c) => c,
            Err(a) => return Ok(a),
        };
        let agent = c.agent_id()?;
        let desired = c.state().desired()?;
        let (mut o, published_cursor) = match c.rehydrate() {
            Ok(r) => {
                let mut o = json!({
                    "rehydrated": true,
                    "agent_id": agent.as_str(),
                    "source": match r.side { Side::Local => "local", Side::Server => "server" },
                    "seq": r.seq,
                    "cursor": r.cursor,
                    "server_reachable": !r.offline,
                    "capsule": to_value(&r.capsule),
                });
                let warnings: Vec<&String> = r
                    .warnings
                    .iter()
                    .filter(|w| !w.contains("unpublished changes"))
                    .collect();
                if !warnings.is_empty() {
                    o["warnings"] = json!(warnings);
                }
                (o, Some(r.cursor))
            }
            Err(e @ (Error::NotFound(_) | Error::Unavailable(_))) => {
                let reachable = matches!(e, Error::NotFound(_));
                let o = json!({
                    "rehydrated": false,
                    "agent_id": agent.as_str(),
                    "server_reachable": reachable,
                    "detail": if reachable {
                        "No capsule yet, here or on the service. Use self_write to store your first."
                    } else {
                        "The service is unreachable and nothing is stored locally yet."
                    },
                });
                (o, None)
            }
            Err(e) => return Err(e),
        };
        // Unpublished local work is the agent's newest state: it wins.
        if let Some(d) = desired.filter(|d| Some(jcs::cursor(d)) != published_cursor) {
            o["rehydrated"] = true.into();
            o["source"] = "local".into();
            o["capsule"] = to_value(&d);
            o["unpublished"] = unpublished(&c, &d)?;
            o.as_object_mut().map(|m| m.remove("detail"));
        }
        Ok(Answer::ok(o))
    }
}

/// What `self_rehydrate` says about unpublished local work.
fn unpublished(c: &Client, desired: &Json) -> Result<Value, Error> {
    let mut o = json!({
        "cursor": jcs::cursor(desired),
        "hint": "This is newer than what the service holds: self_checkpoint (no arguments) publishes it.",
    });
    if let Some(p) = c.state().pending()? {
        if p.cursor == jcs::cursor(desired) {
            o["last_attempt"] = serde_json::to_value(&p).unwrap_or_default();
        }
    }
    Ok(o)
}
