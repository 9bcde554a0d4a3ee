//! The published record (what the Durable Object mirrors into KV and what
//! reads are served from) and the head.json view of it.

use crate::core::crypto::AgentId;
use crate::core::jcs;
use crate::core::json::Json;
use crate::core::key_log::KeysSummary;
use crate::core::limits::{Tier, TierTable, HEAD_TTL_SEC};
use crate::core::quota::{Usage, Window};
use crate::core::time::rfc3339;
use crate::core::upgrade::entitlement::Entitlement;
use crate::core::urls::Doc;
use serde::{Deserialize, Serialize};

/// Every agent's published record's KV key starts with this.
pub const RECORD_KV_PREFIX: &str = "self:capsule:";

/// KV key of an agent's published record (the v0 key layout).
pub fn kv_key(agent_id: &AgentId) -> String {
    format!("{RECORD_KV_PREFIX}{agent_id}")
}

/// KV key of an agent's history index (chain head, retained summaries,
/// verify report).
pub fn history_kv_key(agent_id: &AgentId) -> String {
    format!("self:history:{agent_id}")
}

/// Every agent's key log's KV key starts with this.
pub const KEY_LOG_KV_PREFIX: &str = "self:keys:";

/// KV key of an agent's key log (keys.json, docs/PROTOCOL.md §14).
pub fn key_log_kv_key(agent_id: &AgentId) -> String {
    format!("{KEY_LOG_KV_PREFIX}{agent_id}")
}

/// Every agent's meta record's KV key starts with this (the operator's
/// list of agents is a KV list of this prefix).
pub const META_KV_PREFIX: &str = "self:meta:";

/// KV key of an agent's meta record (meta.json and the operator's view,
/// `core::operator::meta`).
pub fn meta_kv_key(agent_id: &AgentId) -> String {
    format!("{META_KV_PREFIX}{agent_id}")
}

/// Every history entry's KV key starts with this.
pub const ENTRY_KV_PREFIX: &str = "self:entry:";

/// KV key of one retained history entry (its stored text).
pub fn entry_kv_key(agent_id: &AgentId, sequence: u64) -> String {
    format!("{ENTRY_KV_PREFIX}{agent_id}:{sequence:016}")
}

/// head.json's ETag value from the cursor's hex and the key log's length
/// (`None`: no key log). See [`Record::head_etag`].
pub fn head_etag(cursor_hex: &str, key_log_length: Option<u64>) -> String {
    match key_log_length {
        None => cursor_hex.to_owned(),
        Some(n) => format!("{cursor_hex}-k{n}"),
    }
}

/// The two halves of a head.json ETag made by [`head_etag`]: the cursor's
/// hex and the key log's length, if any.
pub fn split_head_etag(etag: &str) -> (&str, Option<u64>) {
    match etag.split_once("-k") {
        Some((hex, n)) => (hex, n.parse().ok()),
        None => (etag, None),
    }
}

impl Head {
    /// The ETag head.json is served with (see [`head_etag`]): what a client
    /// sends back as `If-None-Match`.
    pub fn etag(&self) -> String {
        head_etag(
            jcs::cursor_hex(&self.cursor),
            self.keys.as_ref().map(|k| k.length),
        )
    }
}

/// The KV mirror of an agent's last accepted write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The agent id, 64 lowercase hex characters.
    pub agent_id: String,
    /// The last-known-good capsule, exactly as accepted.
    pub capsule: Json,
    /// `sha256:` + lowercase hex of SHA-256 over the capsule's RFC 8785 bytes; its hex part
    /// is the ETag.
    pub cursor: String,
    /// The cursor before the last write; `None` when that was the agent's first.
    pub prev_cursor: Option<String>,
    /// Whether the last accepted write changed the cursor.
    pub changed: bool,
    /// The last accepted seq (0..=2^53-1); the next write must be greater.
    pub seq: u64,
    /// When the last write was accepted, RFC 3339 UTC (whole seconds).
    pub updated_at: String,
    /// The write quota as of the last write, re-evaluated when read.
    pub writes: RecordWrites,
    /// Paid time per plan: head.json shows the tier in force when read.
    #[serde(default, skip_serializing_if = "Entitlement::is_empty")]
    pub paid: Entitlement,
    /// The key log's summary (docs/PROTOCOL.md §14); absent for an agent
    /// without one, whose bytes stay as they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<KeysSummary>,
}

/// The quota window as of the last write; head.json re-evaluates it at read
/// time so `used_24h` decays without any write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordWrites {
    /// The agent's tier when the record was written.
    pub tier: Tier,
    /// Accepted writes allowed per rolling 24 h (the tier's `writes_per_24h`).
    pub limit_24h: u32,
    /// Times (Unix ms) of the accepted writes inside the window at the last write.
    pub window: Window,
}

/// `writes` as shown in head.json and accepted responses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WritesView {
    /// Accepted writes allowed per rolling 24 h.
    pub limit_24h: u32,
    /// Accepted writes in the last 24 h.
    pub used_24h: u32,
    /// `limit_24h - used_24h`, never below 0.
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
    /// The agent id, 64 lowercase hex characters.
    pub agent_id: String,
    /// The current cursor: `sha256:` + hex of SHA-256 over `JCS(capsule)`.
    pub cursor: String,
    /// The cursor before the last write; `null` when that was the agent's first.
    pub prev_cursor: Option<String>,
    /// Whether the last accepted write moved the cursor (`false` on republishing an identical
    /// capsule at a higher seq).
    pub changed: bool,
    /// The last accepted seq; a new write must use a greater one.
    pub seq: u64,
    /// When this head was generated (the read, not the write), RFC 3339 UTC.
    pub generated_at: String,
    /// Polling hint, in seconds ([`HEAD_TTL_SEC`], 600).
    pub ttl_sec: u64,
    /// Relative path of the capsule: `/self/{agent_id}/capsule.json`.
    pub capsule_url: String,
    /// Relative path of the retained versions: `/self/{agent_id}/history.json`.
    /// (`default`: a client still reads a head from a server without it.)
    #[serde(default)]
    pub history_url: String,
    /// Relative path of the service's verification report: `/self/{agent_id}/verify.json`.
    #[serde(default)]
    pub verify_url: String,
    /// The write quota evaluated at read time against the rolling window
    /// and the tier in force then.
    pub writes: WritesView,
    /// The tier in force when read (`free` unless a paid plan has time left).
    #[serde(default)]
    pub tier: Tier,
    /// When that tier's paid time ends, RFC 3339 UTC; `null` on free.
    #[serde(default)]
    pub paid_until: Option<String>,
    /// The key log's summary, for an agent that has one (§14): a reader
    /// notices a rotation here, and the entity tag changes with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<KeysSummary>,
}

impl Record {
    /// The head.json body as of `now_ms` (Unix ms): `generated_at` is then, and the
    /// tier and quota are re-evaluated (a lapsed plan shows as free at once).
    pub fn head(&self, now_ms: u64, tiers: &TierTable) -> Head {
        let tier = self.paid.tier_at(now_ms);
        Head {
            agent_id: self.agent_id.clone(),
            cursor: self.cursor.clone(),
            prev_cursor: self.prev_cursor.clone(),
            changed: self.changed,
            seq: self.seq,
            generated_at: rfc3339(now_ms),
            ttl_sec: HEAD_TTL_SEC,
            capsule_url: Doc::Capsule.path(&self.agent_id),
            history_url: Doc::History.path(&self.agent_id),
            verify_url: Doc::Verify.path(&self.agent_id),
            writes: self
                .writes
                .window
                .usage(now_ms, tiers.get(tier).writes_per_24h)
                .into(),
            tier,
            paid_until: self.paid.paid_until(now_ms).map(rfc3339),
            keys: self.keys.as_ref().map(|k| k.as_of(now_ms)),
        }
    }

    /// The `writes` block as of `now_ms` (Unix ms): writes older than 24 h no longer
    /// count, without any new write.
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

    /// capsule.json's ETag value (without quotes): the cursor's hex part.
    pub fn etag(&self) -> &str {
        jcs::cursor_hex(&self.cursor)
    }

    /// head.json's ETag value: the cursor's hex part, and for an agent with
    /// a key log `-k` and the log's length, so it changes on every key event
    /// (the summary changes only then). Unchanged for every other agent.
    pub fn head_etag(&self) -> String {
        head_etag(self.etag(), self.keys.as_ref().map(|k| k.length))
    }
}
