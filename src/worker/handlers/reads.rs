//! `GET`/`HEAD` of head.json and capsule.json: one KV read, no Durable Object.
//! Reads are the hot path (agents poll head.json), so they never wake the
//! per-agent object and answer `If-None-Match` with a bodiless 304.

use super::{text_or_404, unreadable};
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
    let raw = match text_or_404(&Kv::of(env)?, &kv_key(agent)).await? {
        Ok(raw) => raw,
        Err(not_found) => return Ok(not_found),
    };
    // The polling hot path: a conditional GET only needs the cursor, so peek
    // at that one field (serde skips the capsule without building it) and
    // answer 304 before parsing the whole record.
    if let Ok(peek) = serde_json::from_str::<CursorPeek>(&raw) {
        if let Some(not_modified) = read.fresh(cursor_hex(&peek.cursor)) {
            return Ok(not_modified);
        }
    }
    let record: Record = match serde_json::from_str(&raw) {
        Ok(r) => r,
        Err(e) => return Ok(unreadable("kv_record_unreadable", agent, &e.to_string())),
    };
    let body = match doc {
        Doc::Head => serde_json::to_vec(&record.head(now_ms, &cfg.tiers))?,
        // The canonical (RFC 8785) bytes: sha256(body) == cursor.
        _ => record.capsule_body().into_bytes(),
    };
    Ok(read.answer(body, record.etag()))
}
