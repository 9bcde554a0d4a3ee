//! `GET`/`HEAD` of head.json and capsule.json: one KV read, no Durable Object.
//! Reads are the hot path (agents poll head.json), so they never wake the
//! per-agent object and answer `If-None-Match` with a bodiless 304.
//!
//! [`record`] is the read itself, shared with the MCP tools `self_read` and
//! `self_subscribe`; [`handle`] makes the HTTP answer of it.

use super::{text_or_404, unreadable, Miss};
use crate::core::crypto::AgentId;
use crate::core::jcs::cursor_hex;
use crate::core::record::{kv_key, Record};
use crate::core::urls::Doc;
use crate::worker::clock;
use crate::worker::config::Config;
use crate::worker::http::CachedRead;
use crate::worker::kv::Kv;
use serde::Deserialize;
use worker::{Env, Request, Response};

/// Just the cursor of a stored record.
#[derive(Deserialize)]
struct CursorPeek {
    cursor: String,
}

/// What KV holds for an agent, as far as the caller needs it.
pub enum Stored<T> {
    /// The caller already holds the current entity: its answer for that
    /// (a 304, an "unchanged"), decided before the record was parsed.
    Held(T),
    /// The current record.
    Current(Record),
}

/// An agent's record from KV. `held` is asked with the current entity tag
/// (the cursor's hex) and answers `Some` when the caller already has it:
/// the polling hot path then only peeks at one field (serde skips the
/// capsule without building it) and never parses the whole record.
pub async fn record<T>(
    env: &Env,
    agent: &AgentId,
    held: impl FnOnce(&str) -> Option<T>,
) -> worker::Result<Result<Stored<T>, Miss>> {
    let raw = match text_or_404(&Kv::of(env)?, &kv_key(agent)).await? {
        Ok(raw) => raw,
        Err(miss) => return Ok(Err(miss)),
    };
    if let Ok(peek) = serde_json::from_str::<CursorPeek>(&raw) {
        if let Some(answer) = held(cursor_hex(&peek.cursor)) {
            return Ok(Ok(Stored::Held(answer)));
        }
    }
    Ok(match serde_json::from_str(&raw) {
        Ok(r) => Ok(Stored::Current(r)),
        Err(e) => Err(unreadable("kv_record_unreadable", agent, &e.to_string())),
    })
}

/// head.json or capsule.json (`doc` is one of the two).
pub async fn handle(
    req: &Request,
    env: &Env,
    cfg: &Config,
    doc: Doc<'_>,
    agent: &AgentId,
    read: CachedRead,
) -> worker::Result<Response> {
    let now_ms = clock::request_now_ms(req, cfg.test_clock);
    let record = match record(env, agent, |etag| read.fresh(etag)).await? {
        Ok(Stored::Current(r)) => r,
        Ok(Stored::Held(not_modified)) => return Ok(not_modified),
        Err(miss) => return Ok(miss.response()),
    };
    let body = match doc {
        Doc::Head => serde_json::to_vec(&record.head(now_ms, &cfg.tiers))?,
        // The canonical (RFC 8785) bytes: sha256(body) == cursor.
        _ => record.capsule_body().into_bytes(),
    };
    Ok(read.answer(body, record.etag()))
}
