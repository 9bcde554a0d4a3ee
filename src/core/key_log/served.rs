//! The key log as a reader gets it (docs/PROTOCOL.md §14): the summary
//! head.json shows, the body of keys.json, and whether a stored log ever
//! named a key (which tells a rotated reader's key from a stranger's). What
//! the read path needs of the key log, and all it needs: folding a log,
//! accepting an event and verifying one are the rest of this module.

use crate::core::crypto::AgentId;
use crate::core::json::Json;
use crate::core::time::parse_rfc3339;
use serde::{Deserialize, Serialize};

/// The `keys` member of head.json: what a reader needs to notice a rotation.
/// Made when an event is accepted (as of that time) and served unchanged
/// until the next one, so head.json's entity tag changes exactly on key
/// events: `final_at` and `matures_at` are times a reader compares with its
/// clock (once past, the rotation is final, the recommit in force).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeysSummary {
    /// The current key's index (0: the genesis key).
    pub index: u64,
    /// The current key.
    pub public_key: String,
    /// Events in the log.
    pub length: u64,
    /// The log's last sealed hash.
    pub head_hash: String,
    /// Always true: pre-rotation cannot be switched off.
    pub next_committed: bool,
    /// Whether an operator's recovery key is committed.
    pub recovery_committed: bool,
    /// When the current key's rotation stops being supersedable, if it still is.
    pub final_at: Option<String>,
    /// A recommit waiting to mature: `{matures_at}`.
    pub pending_recommit: Option<PendingSummary>,
    /// Keys whose writes are (partly) disputed.
    pub disputed: usize,
}

/// head.json's view of a pending recommit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingSummary {
    /// When it takes effect unless a rotation lands first.
    pub matures_at: String,
    /// Whether a recovery key is committed once it does.
    pub recovery_committed: bool,
}

impl KeysSummary {
    /// This summary (made at its event's time) as of `now_ms`, with no
    /// event since: a rotation's `final_at` once past is dropped, and a
    /// recommit once mature is in force. What `KeyState::summary` gives
    /// at `now_ms`, from the summary alone, so head.json is evaluated when
    /// read, as its quota and tier are.
    pub fn as_of(&self, now_ms: u64) -> KeysSummary {
        let past = |t: &str| parse_rfc3339(t).is_some_and(|t| t <= now_ms);
        let mut s = self.clone();
        if s.final_at.as_deref().is_some_and(past) {
            s.final_at = None;
        }
        if let Some(p) = s.pending_recommit.take() {
            if past(&p.matures_at) {
                s.recovery_committed = p.recovery_committed;
            } else {
                s.pending_recommit = Some(p);
            }
        }
        s
    }
}

/// Whether a stored key log (`KeyLog::stored_text`) ever named `key_hex`
/// as one of the agent's keys (made current by an event; a revealed key that
/// never became current never spoke for the agent).
/// A text that does not parse names nothing.
pub fn key_log_names(stored: &str, key_hex: &str) -> bool {
    let Ok(v) = crate::core::json::parse(stored.as_bytes()) else {
        return false;
    };
    v.as_array().is_some_and(|records| {
        records.iter().any(|r| {
            r.get("event")
                .and_then(|e| e.get("public_key"))
                .and_then(Json::as_str)
                == Some(key_hex)
        })
    })
}

/// The body of `GET /self/{agent_id}/keys.json`: `{"agent_id", "v",
/// "keys", "records"}`, with `keys` the summary as head.json shows it
/// (null without a log) and `records` the sealed log exactly as stored
/// (`KeyLog::stored_text`, embedded without parsing it again).
pub fn key_log_body(agent_id: &AgentId, keys: Option<&KeysSummary>, records: &str) -> String {
    let keys = serde_json::to_string(&keys).expect("a summary serialises");
    format!(
        "{{\"agent_id\":\"{agent_id}\",\"v\":\"{}\",\"keys\":{keys},\"records\":{records}}}",
        super::KEYS_VERSION
    )
}
