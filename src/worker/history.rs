//! The history reads: `history.json` (newest first, `since`, paging),
//! `snapshot/{cursor}.json`, `verify.json` and `export.json`, plus the
//! service keyring at `/api/v1/self/keys`.
//!
//! All but export are served from KV: one get for the history index (which
//! also decides 304s), plus one bulk get for the entries a page returns.
//! Export is assembled by the agent's Durable Object from its own storage;
//! its 304 is still decided from KV without waking the object.

use super::config::{self, AGENT_DO_BINDING, KV_BINDING, SERVICE_KEY_SECRET};
use super::http::{self, Audience, READ_CACHE_CONTROL};
use super::log;
use super::reads::not_modified;
use super::routes::Doc;
use crate::core::crypto::AgentId;
use crate::core::history::index::history_url;
use crate::core::jcs::normalize_cursor;
use crate::core::history::{HistoryIndex, KeysDoc, Query, QueryError};
use crate::core::reason::ReasonCode;
use crate::core::record::{entry_kv_key, history_kv_key};
use sha2::{Digest, Sha256};
use worker::kv::KvStore;
use worker::{Env, Method, Request, RequestInit, Response, Url};

/// Internal path of the export on the agent DO.
const AGENT_DO_EXPORT_URL: &str = "https://agent.do/export";

pub async fn handle(
    req: &Request,
    url: &Url,
    env: &Env,
    doc: Doc<'_>,
    agent: &AgentId,
    head_only: bool,
) -> worker::Result<Response> {
    let raw = match super::reads::kv_text_or_404(env, &history_kv_key(agent)).await? {
        Ok(raw) => raw,
        Err(not_found) => return Ok(not_found),
    };
    let kv = env.kv(KV_BINDING)?;
    let index: HistoryIndex = match serde_json::from_str(&raw) {
        Ok(i) => i,
        Err(e) => {
            log::event(
                "kv_history_unreadable",
                &[("agent_id", agent.as_str()), ("error", &e.to_string())],
            );
            return Ok(http::unavailable(Audience::Read));
        }
    };
    let inm = req.headers().get("If-None-Match").ok().flatten();
    let fresh = |etag: &str| inm.as_deref().is_some_and(|h| http::if_none_match(h, etag));
    let head_hash = index.head.head_hash.as_str();

    match doc {
        Doc::Snapshot(raw_cursor) => {
            let Some(item) = normalize_cursor(raw_cursor).and_then(|c| index.find_cursor(&c))
            else {
                return Ok(http::error(
                    ReasonCode::SnapshotNotFound,
                    Audience::Read,
                    None,
                ));
            };
            if fresh(&item.hash) {
                return Ok(not_modified(&item.hash));
            }
            let Some(mut texts) = entries(&kv, agent, &[item.sequence]).await? else {
                return Ok(inconsistent(agent));
            };
            Ok(ok(texts.remove(0).into_bytes(), &item.hash, head_only))
        }
        _ if fresh(head_hash) => Ok(not_modified(head_hash)),
        Doc::Verify => {
            let body = serde_json::to_vec(&index.report)
                .map_err(|e| worker::Error::RustError(e.to_string()))?;
            Ok(ok(body, head_hash, head_only))
        }
        Doc::Export => export(env, agent, head_only).await,
        _ => {
            let selection = Query::parse(url.query_pairs()).and_then(|q| index.select(&q));
            let sel = match selection {
                Ok(s) => s,
                Err(QueryError::Bad(why)) => {
                    return Ok(http::error(
                        ReasonCode::BadQuery,
                        Audience::Read,
                        Some(&why),
                    ))
                }
                Err(QueryError::CursorNotFound) => {
                    return Ok(http::cursor_not_found(&history_url(agent.as_str())))
                }
            };
            let Some(texts) = entries(&kv, agent, &sel.sequences).await? else {
                return Ok(inconsistent(agent));
            };
            let body = index.history_body(&sel, &texts);
            Ok(ok(body.into_bytes(), head_hash, head_only))
        }
    }
}

/// The stored texts of these entries, in the given order, with one bulk get.
/// `None` if any is missing (KV lags the index it was written before, or a
/// bug): the caller answers 503 rather than a page with holes.
async fn entries(
    kv: &KvStore,
    agent: &AgentId,
    sequences: &[u64],
) -> worker::Result<Option<Vec<String>>> {
    if sequences.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let keys: Vec<String> = sequences.iter().map(|s| entry_kv_key(agent, *s)).collect();
    let mut found = kv
        .get_bulk(&keys)
        .text()
        .await
        .map_err(|e| worker::Error::RustError(format!("kv bulk get: {e}")))?;
    Ok(keys
        .iter()
        .map(|k| found.remove(k).flatten())
        .collect::<Option<Vec<String>>>())
}

fn inconsistent(agent: &AgentId) -> Response {
    log::event("kv_history_incomplete", &[("agent_id", agent.as_str())]);
    http::unavailable(Audience::Read)
}

/// 200 with the read caching headers and an ETag; HEAD drops the body.
fn ok(body: Vec<u8>, etag: &str, head_only: bool) -> Response {
    let resp = http::respond(200, (!head_only).then_some(body), READ_CACHE_CONTROL);
    let h = resp.headers();
    http::set(h, "ETag", &format!("\"{etag}\""));
    if head_only {
        http::set(h, "Content-Type", http::JSON_CONTENT_TYPE);
    }
    resp
}

/// Asks the agent's Durable Object for the bundle.
async fn export(env: &Env, agent: &AgentId, head_only: bool) -> worker::Result<Response> {
    let mut init = RequestInit::new();
    init.with_method(Method::Get);
    let stub = env
        .durable_object(AGENT_DO_BINDING)?
        .id_from_name(agent.as_str())?
        .get_stub()?;
    let mut resp = stub
        .fetch_with_request(Request::new_with_init(AGENT_DO_EXPORT_URL, &init)?)
        .await?;
    match resp.status_code() {
        200 => {
            let etag = resp
                .headers()
                .get("ETag")
                .ok()
                .flatten()
                .unwrap_or_default();
            let body = resp.bytes().await?;
            Ok(ok(body, etag.trim_matches('"'), head_only))
        }
        404 => Ok(http::error(
            ReasonCode::CapsuleNotFound,
            Audience::Read,
            None,
        )),
        s => Err(worker::Error::RustError(format!(
            "agent DO export answered {s}"
        ))),
    }
}

/// `GET /api/v1/self/keys`: the keyring seals are checked against.
pub fn keys(req: &Request, env: &Env, head_only: bool) -> worker::Result<Response> {
    let keys = config::service_keys(env);
    let Some(doc) = KeysDoc::new(&keys.keyring) else {
        log::event(
            "config_error",
            &[
                ("missing", SERVICE_KEY_SECRET),
                ("effect", "keys unavailable"),
            ],
        );
        return Ok(http::unavailable_because(
            Audience::Read,
            Some("the service signing key is not configured"),
        ));
    };
    let body = serde_json::to_vec(&doc).map_err(|e| worker::Error::RustError(e.to_string()))?;
    let etag = hex::encode(&Sha256::digest(&body)[..16]);
    let inm = req.headers().get("If-None-Match").ok().flatten();
    if inm.is_some_and(|h| http::if_none_match(&h, &etag)) {
        return Ok(not_modified(&etag));
    }
    Ok(ok(body, &etag, head_only))
}
