//! history.json (newest first, `since`, paging), `snapshot/{cursor}.json`
//! and `verify.json`, served from KV: one get for the history index (which
//! also decides 304s), plus one bulk get for the entries a page returns.
//! The entry Worker answers them, and the extras Worker's MCP tools
//! `self_history` and `self_verify` read through them; the write Worker
//! does not compile them.

use super::{index, readable_index, viewer};
use crate::core::crypto::AgentId;
use crate::core::history::{HistoryIndex, Query, QueryError, Report, Viewer};
use crate::core::jcs::normalize_cursor;
use crate::core::reason::ReasonCode;
use crate::core::record::entry_kv_key;
use crate::core::urls::Doc;
use crate::worker::failure::Failure;
use crate::worker::handlers::reads::{self, ReadAs};
use crate::worker::http::CachedRead;
use crate::worker::kv::Kv;
use crate::worker::log;
use worker::url::form_urlencoded;
use worker::{Env, Response};

/// The history.json body for a query (`Err` from [`Query::parse`] is
/// refused here too, so both callers answer bad queries alike), each version
/// `viewer` may not see withheld.
pub async fn page(
    kv: &Kv,
    agent: &AgentId,
    index: &HistoryIndex,
    query: Result<Query, QueryError>,
    viewer: &Viewer<'_>,
) -> Result<String, Failure> {
    // Versions appended before access was recorded that this `since` could
    // name are decided from their entries first (they count as unknown).
    let mut recorded = None;
    if let Ok(Query { since: Some(c), .. }) = &query {
        let unrecorded = index.unrecorded_matching(c);
        if !unrecorded.is_empty() {
            let texts = entries(kv, agent, &unrecorded).await?;
            let mut copy = index.clone();
            copy.record_unrecorded(&unrecorded.into_iter().zip(texts).collect::<Vec<_>>());
            recorded = Some(copy);
        }
    }
    let index = recorded.as_ref().unwrap_or(index);
    let sel = query
        .and_then(|q| index.select(&q, viewer))
        .map_err(|e| match e {
            QueryError::Bad(why) => Failure::refused(ReasonCode::BadQuery, why),
            QueryError::CursorNotFound => Failure::CursorNotFound {
                history_url: Doc::History.path(agent.as_str()),
            },
        })?;
    let texts = entries(kv, agent, &sel.sequences).await?;
    let shown: Option<Vec<String>> = sel
        .sequences
        .iter()
        .zip(texts)
        .map(|(s, text)| index.shown(*s, text, viewer))
        .collect();
    let shown = shown.ok_or_else(|| incomplete(agent))?;
    Ok(index.history_body(&sel, &shown))
}

/// The index verify.json's report is made of, once `read_as` (its scope
/// `READ_VERIFY`) may have it: the current record admits it (§12), and so
/// does the newest version the report describes (KV can lag either way);
/// else the miss of an agent that never published.
pub async fn verify_index(
    env: &Env,
    agent: &AgentId,
    read_as: &ReadAs<'_>,
) -> Result<HistoryIndex, Failure> {
    let admitted = reads::readable(env, agent, read_as).await?;
    let kv = Kv::of(env)?;
    let viewer = viewer(agent, read_as);
    let index = index(&kv, agent).await?;
    if !index.newest_verifiable_by(&viewer, admitted.as_deref().unwrap_or_default()) {
        let newest = index.items.last().map(|i| i.sequence);
        let text = entries(&kv, agent, &newest.into_iter().collect::<Vec<_>>()).await?;
        if !text
            .first()
            .is_some_and(|t| viewer.granted_by_entry(t, read_as.scope))
        {
            return Err(Failure::code(ReasonCode::CapsuleNotFound));
        }
    }
    Ok(index)
}

/// verify.json's report for this reader (verify.json and the MCP tool
/// `self_verify`): the versions it may not see in history withheld
/// (`HistoryIndex::report_for`), deciding those whose access was never
/// recorded from their entries.
pub async fn verify_report(
    env: &Env,
    agent: &AgentId,
    index: &HistoryIndex,
    read_as: &ReadAs<'_>,
) -> Result<Report, Failure> {
    let viewer = viewer(agent, read_as);
    let unrecorded = index.unrecorded();
    let stored = match unrecorded.is_empty() || viewer.is_owner() {
        true => Vec::new(),
        false => {
            let texts = entries(&Kv::of(env)?, agent, &unrecorded).await?;
            unrecorded.into_iter().zip(texts).collect()
        }
    };
    Ok(index.report_for(&viewer, &stored))
}

/// history.json, snapshot or verify.json (`doc` is one of them).
pub async fn handle(
    query: form_urlencoded::Parse<'_>,
    env: &Env,
    doc: Doc<'_>,
    agent: &AgentId,
    read: CachedRead,
    read_as: &ReadAs<'_>,
) -> Result<Response, Failure> {
    if let Doc::Verify = doc {
        let index = verify_index(env, agent, read_as).await?;
        let etag = index.etag();
        if let Some(not_modified) = read.fresh(&etag) {
            return Ok(not_modified);
        }
        let report = verify_report(env, agent, &index, read_as).await?;
        return Ok(read.answer(serde_json::to_vec(&report)?, &etag));
    }
    let (kv, index, viewer) = readable_index(env, agent, read_as).await?;
    if let Doc::Snapshot(raw_cursor) = doc {
        return snapshot(&kv, agent, &index, raw_cursor, read, &viewer).await;
    }
    // history.json's entity is the chain (and the key log).
    let etag = index.etag();
    let head_hash = etag.as_str();
    if let Some(not_modified) = read.fresh(head_hash) {
        return Ok(not_modified);
    }
    let body = page(&kv, agent, &index, Query::parse(query), &viewer).await?;
    Ok(read.answer(body.into_bytes(), head_hash))
}

/// `snapshot/{cursor}.json`: one entry, whose hash is its entity. A version
/// this reader may not see is a snapshot never published, decided before a
/// 304 could say it exists.
async fn snapshot(
    kv: &Kv,
    agent: &AgentId,
    index: &HistoryIndex,
    raw_cursor: &str,
    read: CachedRead,
    viewer: &Viewer<'_>,
) -> Result<Response, Failure> {
    let not_found = || Failure::code(ReasonCode::SnapshotNotFound);
    let item = normalize_cursor(raw_cursor)
        .and_then(|c| index.find_cursor(&c))
        .ok_or_else(not_found)?;
    let recorded = viewer.sees(item.access, &index.audiences);
    if recorded == Some(false) {
        return Err(not_found());
    }
    if recorded == Some(true) {
        if let Some(not_modified) = read.fresh(&item.hash) {
            return Ok(not_modified);
        }
    }
    let text = entries(kv, agent, &[item.sequence]).await?.remove(0);
    if !index.sees(item.sequence, &text, viewer) {
        return Err(not_found());
    }
    Ok(read.answer(text.into_bytes(), &item.hash))
}

/// The stored texts of these entries, in the given order; unavailable if
/// any is missing (KV lags the index it was written before, or a bug): a
/// 503 rather than a page with holes.
async fn entries(kv: &Kv, agent: &AgentId, sequences: &[u64]) -> Result<Vec<String>, Failure> {
    let keys: Vec<String> = sequences.iter().map(|s| entry_kv_key(agent, *s)).collect();
    kv.texts(&keys).await?.ok_or_else(|| incomplete(agent))
}

fn incomplete(agent: &AgentId) -> Failure {
    log::event("kv_history_incomplete", &[("agent_id", agent.as_str())]);
    Failure::Unavailable(None)
}
