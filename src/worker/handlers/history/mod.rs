//! The history reads: `history.json`, `snapshot/{cursor}.json` and
//! `verify.json` ([`pages`], from KV: the entry Worker's, and the extras
//! Worker's MCP tools), and `export.json` ([`export`], assembled by the
//! agent's Durable Object from its own storage: the write Worker's, the
//! entry forwards it, `core::entry`). Both read the history index in KV
//! first, which decides who may read and the 304s.

#[cfg(any(feature = "entry", feature = "extras"))]
mod pages;
#[cfg(any(feature = "entry", feature = "extras"))]
pub use pages::handle;
#[cfg(feature = "extras")]
pub use pages::{page, verify_index, verify_report};

use super::reads::{self, ReadAs};
use super::{text_or_404, unreadable};
use crate::core::crypto::AgentId;
use crate::core::history::{HistoryIndex, Viewer};
use crate::core::reason::ReasonCode;
use crate::core::record::history_kv_key;
#[cfg(feature = "worker")]
use crate::worker::do_wire;
use crate::worker::failure::Failure;
#[cfg(feature = "worker")]
use crate::worker::http::CachedRead;
use crate::worker::kv::Kv;
use worker::Env;
#[cfg(feature = "worker")]
use worker::Response;

/// An agent's history index from KV: what history.json, verify.json and the
/// MCP tools `self_history` and `self_verify` are all answered from.
pub async fn index(kv: &Kv, agent: &AgentId) -> Result<HistoryIndex, Failure> {
    let raw = text_or_404(kv, &history_kv_key(agent)).await?;
    serde_json::from_str(&raw)
        .map_err(|e| unreadable("kv_history_unreadable", agent, &e.to_string()))
}

/// [`index`], for `viewer`: the miss of an agent that never published when
/// the newest version is one it may not see (the current record it was
/// admitted by can lag the index in KV; the head, the report and the export
/// all describe the newest version).
pub async fn index_for(
    kv: &Kv,
    agent: &AgentId,
    viewer: &Viewer<'_>,
) -> Result<HistoryIndex, Failure> {
    let index = index(kv, agent).await?;
    if index.newest_hidden_from(viewer) {
        return Err(Failure::code(ReasonCode::CapsuleNotFound));
    }
    Ok(index)
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

/// export.json: assembled by the agent's object for this reader; its 304 is
/// decided from the index in KV without waking the object.
#[cfg(feature = "worker")]
pub async fn export(
    env: &Env,
    agent: &AgentId,
    read: CachedRead,
    read_as: &ReadAs<'_>,
) -> Result<Response, Failure> {
    let (_, index, viewer) = readable_index(env, agent, read_as).await?;
    // Its entity is the chain (and the key log), as history.json's.
    if let Some(not_modified) = read.fresh(index.etag().as_str()) {
        return Ok(not_modified);
    }
    match do_wire::export(env, agent, &viewer).await? {
        Some(e) => Ok(read.answer(e.body, &e.etag)),
        None => Err(Failure::code(ReasonCode::CapsuleNotFound)),
    }
}

/// The index a history read of `read_as` is answered from, once the capsule
/// admits it: a private capsule's history is as private as the capsule (§12).
async fn readable_index<'a>(
    env: &Env,
    agent: &'a AgentId,
    read_as: &ReadAs<'a>,
) -> Result<(Kv, HistoryIndex, Viewer<'a>), Failure> {
    reads::readable(env, agent, read_as).await?;
    let kv = Kv::of(env)?;
    let viewer = viewer(agent, read_as);
    let index = index_for(&kv, agent, &viewer).await?;
    Ok((kv, index, viewer))
}
