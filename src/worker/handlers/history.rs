//! The history reads: `history.json` (newest first, `since`, paging),
//! `snapshot/{cursor}.json`, `verify.json` and `export.json`.
//!
//! All but export are served from KV: one get for the history index (which
//! also decides 304s), plus one bulk get for the entries a page returns.
//! Export is assembled by the agent's Durable Object from its own storage;
//! its 304 is still decided from KV without waking the object.

use super::reads::{self, ReadAs};
use super::{text_or_404, unreadable, Miss};
use crate::core::crypto::AgentId;
use crate::core::history::{HistoryIndex, Query, QueryError, Viewer};
use crate::core::jcs::normalize_cursor;
use crate::core::reason::ReasonCode;
use crate::core::record::{entry_kv_key, history_kv_key};
use crate::core::urls::Doc;
use crate::worker::do_wire;
use crate::worker::http::{self, Audience, CachedRead};
use crate::worker::kv::Kv;
use crate::worker::log;
use worker::{Env, Response, Url};

/// An agent's history index from KV: what history.json, verify.json and the
/// MCP tools `self_history` and `self_verify` are all answered from.
pub async fn index(kv: &Kv, agent: &AgentId) -> worker::Result<Result<HistoryIndex, Miss>> {
    let raw = match text_or_404(kv, &history_kv_key(agent)).await? {
        Ok(raw) => raw,
        Err(miss) => return Ok(Err(miss)),
    };
    Ok(serde_json::from_str(&raw)
        .map_err(|e| unreadable("kv_history_unreadable", agent, &e.to_string())))
}

/// [`index`], for `viewer`: the miss of an agent that never published when
/// the newest version is one it may not see (the current record it was
/// admitted by can lag the index in KV; the head, the report and the export
/// all describe the newest version).
pub async fn index_for(
    kv: &Kv,
    agent: &AgentId,
    viewer: &Viewer<'_>,
) -> worker::Result<Result<HistoryIndex, Miss>> {
    Ok(match index(kv, agent).await? {
        Ok(i) if i.newest_hidden_from(viewer) => Err(Miss::code(ReasonCode::CapsuleNotFound)),
        other => other,
    })
}

/// Who reads, for the per-version decisions of history (§9: a version
/// written private stays private).
pub fn viewer<'a>(agent: &'a AgentId, read_as: &ReadAs<'a>) -> Viewer<'a> {
    Viewer {
        owner: agent.as_str(),
        reader: read_as.reader.map(AgentId::as_str),
        now_ms: read_as.now_ms,
    }
}

/// The history.json body for a query (`Err` from [`Query::parse`] is
/// refused here too, so both callers answer bad queries alike), each version
/// `viewer` may not see withheld.
pub async fn page(
    kv: &Kv,
    agent: &AgentId,
    index: &HistoryIndex,
    query: Result<Query, QueryError>,
    viewer: &Viewer<'_>,
) -> worker::Result<Result<String, Miss>> {
    // Versions appended before access was recorded that this `since` could
    // name are decided from their entries first (they count as unknown).
    let mut recorded = None;
    if let Ok(Query { since: Some(c), .. }) = &query {
        let unrecorded = index.unrecorded_matching(c);
        if !unrecorded.is_empty() {
            let Some(texts) = entries(kv, agent, &unrecorded).await? else {
                return Ok(Err(incomplete(agent)));
            };
            let mut copy = index.clone();
            copy.record_unrecorded(&unrecorded.into_iter().zip(texts).collect::<Vec<_>>());
            recorded = Some(copy);
        }
    }
    let index = recorded.as_ref().unwrap_or(index);
    let sel = match query.and_then(|q| index.select(&q, viewer)) {
        Ok(s) => s,
        Err(QueryError::Bad(why)) => {
            return Ok(Err(Miss::Refused {
                code: ReasonCode::BadQuery,
                detail: Some(why),
                history_url: None,
            }))
        }
        Err(QueryError::CursorNotFound) => {
            return Ok(Err(Miss::Refused {
                code: ReasonCode::CursorNotFound,
                detail: None,
                history_url: Some(Doc::History.path(agent.as_str())),
            }))
        }
    };
    let Some(texts) = entries(kv, agent, &sel.sequences).await? else {
        return Ok(Err(incomplete(agent)));
    };
    let shown: Option<Vec<String>> = sel
        .sequences
        .iter()
        .zip(texts)
        .map(|(s, text)| index.shown(*s, text, viewer))
        .collect();
    let Some(shown) = shown else {
        return Ok(Err(incomplete(agent)));
    };
    Ok(Ok(index.history_body(&sel, &shown)))
}

/// history.json, snapshot, verify.json or export.json (`doc` is one of them).
pub async fn handle(
    url: &Url,
    env: &Env,
    doc: Doc<'_>,
    agent: &AgentId,
    read: CachedRead,
    read_as: &ReadAs<'_>,
) -> worker::Result<Response> {
    // A private capsule's history is as private as the capsule (§12).
    if let Err(miss) = reads::readable(env, agent, read_as).await? {
        return Ok(miss.response());
    }
    let kv = Kv::of(env)?;
    let viewer = viewer(agent, read_as);
    let index = match index_for(&kv, agent, &viewer).await? {
        Ok(i) => i,
        Err(miss) => return Ok(miss.response()),
    };
    // A snapshot's entity is that entry; every other document's is the chain.
    let head_hash = index.head.head_hash.as_str();
    if let Doc::Snapshot(raw_cursor) = doc {
        let not_found = || http::error(ReasonCode::SnapshotNotFound, Audience::Read, None);
        let Some(item) = normalize_cursor(raw_cursor).and_then(|c| index.find_cursor(&c)) else {
            return Ok(not_found());
        };
        // A version this reader may not see is a snapshot never published,
        // decided before a 304 could say it exists.
        let recorded = viewer.sees(item.access, &index.audiences);
        if recorded == Some(false) {
            return Ok(not_found());
        }
        if recorded == Some(true) {
            if let Some(not_modified) = read.fresh(&item.hash) {
                return Ok(not_modified);
            }
        }
        let Some(mut texts) = entries(&kv, agent, &[item.sequence]).await? else {
            return Ok(incomplete(agent).response());
        };
        let text = texts.remove(0);
        if !index.sees(item.sequence, &text, &viewer) {
            return Ok(not_found());
        }
        if let Some(not_modified) = read.fresh(&item.hash) {
            return Ok(not_modified);
        }
        return Ok(read.answer(text.into_bytes(), &item.hash));
    }
    if let Some(not_modified) = read.fresh(head_hash) {
        return Ok(not_modified);
    }
    match doc {
        Doc::Verify => Ok(read.answer(serde_json::to_vec(&index.report)?, head_hash)),
        Doc::Export => Ok(match do_wire::export(env, agent, &viewer).await? {
            Some(e) => read.answer(e.body, &e.etag),
            None => http::error(ReasonCode::CapsuleNotFound, Audience::Read, None),
        }),
        _ => Ok(
            match page(&kv, agent, &index, Query::parse(url.query_pairs()), &viewer).await? {
                Ok(body) => read.answer(body.into_bytes(), head_hash),
                Err(miss) => miss.response(),
            },
        ),
    }
}

/// The stored texts of these entries, in the given order. `None` if any is
/// missing (KV lags the index it was written before, or a bug): the caller
/// answers 503 rather than a page with holes.
async fn entries(
    kv: &Kv,
    agent: &AgentId,
    sequences: &[u64],
) -> worker::Result<Option<Vec<String>>> {
    let keys: Vec<String> = sequences.iter().map(|s| entry_kv_key(agent, *s)).collect();
    kv.texts(&keys).await
}

fn incomplete(agent: &AgentId) -> Miss {
    log::event("kv_history_incomplete", &[("agent_id", agent.as_str())]);
    Miss::Unavailable
}
