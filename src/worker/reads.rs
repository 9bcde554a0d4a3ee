//! `GET`/`HEAD` of head.json and capsule.json: one KV read, no Durable Object.
//! Reads are the hot path (agents poll head.json), so they never wake the
//! per-agent object and answer `If-None-Match` with a bodiless 304.

use super::config::{Config, KV_BINDING};
use super::http::{self, Audience, READ_CACHE_CONTROL};
use super::routes::Doc;
use super::{clock, log};
use crate::core::crypto::AgentId;
use crate::core::reason::ReasonCode;
use crate::core::record::{kv_key, Record};
use serde::Deserialize;
use worker::{Env, Request, Response};

pub async fn handle(
    req: &Request,
    env: &Env,
    cfg: &Config,
    doc: Doc<'_>,
    agent: &AgentId,
    head_only: bool,
) -> worker::Result<Response> {
    let now_ms = clock::request_now_ms(req, cfg.test_clock);
    let raw = match kv_text_or_404(env, &kv_key(agent)).await? {
        Ok(raw) => raw,
        Err(not_found) => return Ok(not_found),
    };
    // The polling hot path: a conditional GET only needs the cursor, so peek
    // at that one field (serde skips the capsule without building it) and
    // answer 304 before parsing the whole record.
    let inm = req.headers().get("If-None-Match").ok().flatten();
    if let Some(inm) = &inm {
        if let Ok(peek) = serde_json::from_str::<CursorPeek>(&raw) {
            let etag = etag_of(&peek.cursor);
            if http::if_none_match(inm, etag) {
                return Ok(not_modified(etag));
            }
        }
    }
    let record: Record = match serde_json::from_str(&raw) {
        Ok(r) => r,
        Err(e) => {
            // Only the Durable Object writes this key, so a bad value is our bug
            // (or a half-migrated format): answer 503 and say so in the log.
            log::event(
                "kv_record_unreadable",
                &[("agent_id", agent.as_str()), ("error", &e.to_string())],
            );
            return Ok(http::unavailable(Audience::Read));
        }
    };
    let etag = record.etag().to_owned();
    let body = match doc {
        Doc::Head => serde_json::to_vec(&record.head(now_ms))
            .map_err(|e| worker::Error::RustError(e.to_string()))?,
        // The canonical (RFC 8785) bytes: sha256(body) == cursor. (Only head
        // and capsule are routed here.)
        _ => record.capsule_body().into_bytes(),
    };
    // HEAD: same headers as GET, no body.
    let resp = http::respond(200, (!head_only).then_some(body), READ_CACHE_CONTROL);
    let h = resp.headers();
    http::set(h, "ETag", &format!("\"{etag}\""));
    if head_only {
        http::set(h, "Content-Type", http::JSON_CONTENT_TYPE);
    }
    Ok(resp)
}

/// Just the cursor of a stored record.
#[derive(Deserialize)]
struct CursorPeek {
    cursor: String,
}

/// The ETag value of a cursor: its hex part (as `Record::etag`).
fn etag_of(cursor: &str) -> &str {
    cursor.strip_prefix("sha256:").unwrap_or(cursor)
}

pub fn not_modified(etag: &str) -> Response {
    let resp = http::respond(304, None, READ_CACHE_CONTROL);
    http::set(resp.headers(), "ETag", &format!("\"{etag}\""));
    resp
}

/// The text stored in KV at `key`, or (as `Err`) the 404 answer for an agent
/// that has published nothing. Every per-agent read starts here.
pub(super) async fn kv_text_or_404(
    env: &Env,
    key: &str,
) -> worker::Result<Result<String, Response>> {
    let raw = env
        .kv(KV_BINDING)?
        .get(key)
        .text()
        .await
        .map_err(|e| worker::Error::RustError(format!("kv get: {e}")))?;
    Ok(raw.ok_or_else(|| http::error(ReasonCode::CapsuleNotFound, Audience::Read, None)))
}
