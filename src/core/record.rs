//! The published record (what the Durable Object mirrors into KV and what
//! reads are served from) and the head.json view of it.

use crate::core::crypto::AgentId;
use crate::core::jcs;
use crate::core::json::Json;
use crate::core::limits::{Tier, HEAD_TTL_SEC};
use crate::core::quota::{Usage, Window};
use crate::core::time::rfc3339;
use crate::core::urls::Doc;
use serde::{Deserialize, Serialize};

/// KV key of an agent's published record (the v0 key layout).
pub fn kv_key(agent_id: &AgentId) -> String {
    format!("self:capsule:{agent_id}")
}

/// KV key of an agent's history index (chain head, retained summaries,
/// verify report).
pub fn history_kv_key(agent_id: &AgentId) -> String {
    format!("self:history:{agent_id}")
}

/// KV key of one retained history entry (its stored text).
pub fn entry_kv_key(agent_id: &AgentId, sequence: u64) -> String {
    format!("self:entry:{agent_id}:{sequence:016}")
}

/// The KV mirror of an agent's last accepted write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub agent_id: String,
    /// The last-known-good capsule, exactly as accepted.
    pub capsule: Json,
    pub cursor: String,
    pub prev_cursor: Option<String>,
    /// Whether the last accepted write changed the cursor.
    pub changed: bool,
    pub seq: u64,
    pub updated_at: String,
    pub writes: RecordWrites,
}

/// The quota window as of the last write; head.json re-evaluates it at read
/// time so `used_24h` decays without any write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordWrites {
    pub tier: Tier,
    pub limit_24h: u32,
    pub window: Window,
}

/// `writes` as shown in head.json and accepted responses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WritesView {
    pub limit_24h: u32,
    pub used_24h: u32,
    pub remaining_24h: u32,
    /// When the oldest counted write leaves the window; null with none counted.
    pub reset_at: Option<String>,
}

impl From<Usage> for WritesView {
    fn from(u: Usage) -> Self {
        WritesView {
            limit_24h: u.limit,
            used_24h: u.used,
            remaining_24h: u.remaining(),
            reset_at: u.reset_at_ms.map(rfc3339),
        }
    }
}

/// The head.json body (the client parses it with the same type).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub agent_id: String,
    pub cursor: String,
    pub prev_cursor: Option<String>,
    pub changed: bool,
    pub seq: u64,
    pub generated_at: String,
    pub ttl_sec: u64,
    pub capsule_url: String,
    pub writes: WritesView,
}

impl Record {
    pub fn head(&self, now_ms: u64) -> Head {
        Head {
            agent_id: self.agent_id.clone(),
            cursor: self.cursor.clone(),
            prev_cursor: self.prev_cursor.clone(),
            changed: self.changed,
            seq: self.seq,
            generated_at: rfc3339(now_ms),
            ttl_sec: HEAD_TTL_SEC,
            capsule_url: Doc::Capsule.path(&self.agent_id),
            writes: self.writes_view(now_ms),
        }
    }

    pub fn writes_view(&self, now_ms: u64) -> WritesView {
        self.writes
            .window
            .usage(now_ms, self.writes.limit_24h)
            .into()
    }

    /// The capsule.json body: the RFC 8785 bytes of the capsule, so a client
    /// can check `sha256(body) == cursor` without a canonicaliser.
    pub fn capsule_body(&self) -> String {
        jcs::canonicalize(&self.capsule)
    }

    /// The ETag value (without quotes): the cursor's hex part.
    pub fn etag(&self) -> &str {
        jcs::cursor_hex(&self.cursor)
    }
}
