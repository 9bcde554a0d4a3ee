//! `self_keys` and `self_rotate`: the key log (docs/PROTOCOL.md §14) for
//! the agent itself. Neither answer carries key material (public keys and
//! digests only). Recovery and recommits are deliberately not tools: a
//! prompt-injected agent must not be able to move its own authority.

use super::ToolHost;
use crate::client::keys::{PinStatus, RotateOptions};
use crate::client::Error;
use crate::core::crypto::AgentId;
use crate::core::key_log::PinCheck;
use crate::core::mcp::results::{self, Answer};
use serde_json::json;

impl ToolHost {
    pub(super) fn keys(&self, agent: Option<AgentId>) -> Result<Answer, Error> {
        let (c, target, is_own) = match self.reader(agent) {
            Ok(x) => x,
            Err(a) => return Ok(a),
        };
        let view = c.key_log(Some(&target))?;
        let conflict = view.pin.conflict(&view.agent_id);
        let hint = match (&view.pin, view.report.valid, &view.report.keys) {
            (PinStatus::Checked(PinCheck::Rollback { .. } | PinCheck::Fork { .. }), _, _) => {
                "The service contradicts the key log this machine pinned: stop writing and tell the operator."
            }
            (_, false, _) => "The key log does not verify: tell the operator.",
            (_, true, None) if is_own => {
                "No key log yet: your first publish starts one (or the operator runs `selfcap keys init`)."
            }
            (_, true, None) => "This agent has no key log: its genesis key is its key.",
            (_, true, Some(_)) => "Nothing to do.",
        };
        let body = json!({
            "agent_id": target.as_str(),
            "is_own": is_own,
            "valid": view.report.valid,
            "length": view.report.length,
            "keys": view.report.keys,
            "pin": view.pin,
            "failures": view.report.failures,
            "hint": hint,
        });
        Ok(match conflict {
            Some(e) => results::error("key_log_conflict", e.to_string(), hint),
            None => Answer::ok(body),
        })
    }

    pub(super) fn rotate(&self) -> Result<Answer, Error> {
        let c = match self.client() {
            Ok(c) => c,
            Err(a) => return Ok(a),
        };
        let r = c.rotate(&RotateOptions::default())?;
        Ok(Answer::ok(json!({
            "rotated": true,
            "applied": r.applied,
            "index": r.index,
            "resumed": r.resumed,
            "public_key": r.public_key,
            "keys": r.keys,
            "hint": "Done: keep working; writes now use the new key (the agent_id is unchanged).",
        })))
    }
}
