//! `GET /api/v1/watch/{head,latest,digest}?agent_id=…`: an agent's
//! projected watch feed (docs/PROTOCOL.md §15). One KV read of the agent's
//! record (its watch and tier; a private capsule's watch is read as the
//! capsule is, §12), one of the world snapshot's pointer, and for `latest`
//! and `digest` one bulk read of the selected sources' batches. The remote
//! MCP door's `self_feed` answers through [`document`] too. Every decision is
//! `core::projection`'s; the snapshot's refresh is `worker::world`'s.

use super::reads::{self, ReadAs, Stored};
use super::signer;
use crate::core::crypto::AgentId;
use crate::core::json::{self, Json};
use crate::core::model::ReadScope;
use crate::core::projection::feed::{self as decide, REFRESH_INTERVAL_SEC};
use crate::core::reason::{ReasonCode, Refusal};
use crate::core::urls::FeedDoc;
use crate::core::world::ddv1::Batch;
use crate::core::world::refresh::batch_kv_key;
use crate::core::world::stacks::Stacks;
use crate::worker::clock;
use crate::worker::config::Config;
use crate::worker::failure::Failure;
use crate::worker::http::CachedRead;
use crate::worker::kv::Kv;
use crate::worker::request::Incoming;
use crate::worker::world;
use std::collections::BTreeMap;
use worker::{Env, Response};

/// How long a client waits after `upstream_unavailable` (one refresh).
const RETRY_AFTER_SEC: u64 = 60;

/// One feed document.
pub async fn handle(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    doc: FeedDoc,
    read: CachedRead,
) -> Result<Response, Failure> {
    let now_ms = clock::request_now_ms(req, cfg.test_clock);
    let (agent, since) = match doc {
        FeedDoc::Latest => decide::parse_latest_query(req.query_pairs())?,
        _ => (decide::parse_query(req.query_pairs())?, None),
    };
    let upstream = upstream(cfg)?;
    // A watch is capsule content: a private capsule's is read as it is.
    let reader = signer::of(req, env, now_ms).await?;
    let mut read = read;
    if reader.is_some() {
        read = read.private();
    }
    let read_as = ReadAs {
        reader: reader.as_ref(),
        scope: ReadScope::Capsule,
        now_ms,
    };
    let wanted = Wanted {
        doc,
        since: since.as_deref(),
    };
    match document(env, upstream, &agent, wanted, &read_as, |etag| {
        read.fresh(etag)
    })
    .await?
    {
        Fed::Held(not_modified) => Ok(not_modified),
        Fed::Body { etag, body } => Ok(read.answer(body, &etag)),
    }
}

// ---- One document's body, for the route above and the remote MCP door's
// `self_feed` (handlers::mcp): one path, so both answer the same bytes and
// the same refusals.

/// The configured upstream, or `503 watch_not_configured`.
pub fn upstream(cfg: &Config) -> Result<&str, Failure> {
    cfg.watch_upstream
        .as_deref()
        .ok_or_else(|| Failure::code(ReasonCode::WatchNotConfigured))
}

/// Which document, and `latest`'s `since` (normalised).
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// The document.
    pub doc: FeedDoc,
    /// With `latest`: only what is new since this cursor.
    pub since: Option<&'a str>,
}

/// A document, or the caller's answer for the entity it already holds.
pub enum Fed<H> {
    /// What `held` answered for the current ETag (a 304), decided before
    /// any batch was read.
    Held(H),
    /// The document's canonical JSON bytes and its ETag (the projection's
    /// cursor hex).
    Body {
        /// The entity tag.
        etag: String,
        /// The body.
        body: Vec<u8>,
    },
}

/// `agent`'s projected feed document as `read_as` may read it: the agent's
/// record (its watch and tier), the snapshot (refreshed first when it is
/// missing or two intervals old), the projection, then the body. `held`
/// sees the ETag before the body is built.
pub async fn document<H>(
    env: &Env,
    upstream: &str,
    agent: &AgentId,
    wanted: Wanted<'_>,
    read_as: &ReadAs<'_>,
    held: impl FnOnce(&str) -> Option<H>,
) -> Result<Fed<H>, Failure> {
    let now_ms = read_as.now_ms;
    let Stored::Current(record) = reads::record(env, agent, read_as, |_: &str| None::<()>).await?
    else {
        return Err(Failure::Unavailable(None));
    };
    let watch = decide::admit(&record.capsule, record.paid.tier_at(now_ms), upstream)?;
    let kv = Kv::of(env)?;
    // The cron trigger keeps the snapshot fresh; a read that finds none, or
    // one two intervals old (the trigger stopped), refreshes it first.
    let mut snapshot = world::pointer(&kv).await?;
    let stale = |p: &crate::core::world::refresh::WorldPointer| {
        now_ms.saturating_sub(p.checked_at_ms) > 2 * REFRESH_INTERVAL_SEC * 1000
    };
    if snapshot.as_ref().is_none_or(stale) {
        snapshot = world::refresh(&kv, upstream, now_ms).await?.or(snapshot);
    }
    let snapshot = snapshot.ok_or_else(|| {
        Failure::Refused(
            Refusal::new(
                ReasonCode::UpstreamUnavailable,
                "the world feed has not been read yet",
            )
            .retry_after(RETRY_AFTER_SEC),
        )
    })?;
    let projection = decide::project(&watch, &snapshot, Stacks::committed());
    let etag = projection.etag().to_owned();
    if let Some(h) = held(&etag) {
        return Ok(Fed::Held(h));
    }
    let since = wanted.since;
    let body = match wanted.doc {
        FeedDoc::Head => serde_json::to_vec(&projection.head(agent, &snapshot, now_ms))?,
        FeedDoc::Digest => {
            // Its breakdowns count the batches' items: one bulk read, as
            // for latest.
            let now_batches = batches(
                &kv,
                agent,
                &projection.resolved.sources,
                &snapshot.cursors(),
            )
            .await?;
            json_bytes(&projection.digest(&snapshot, &now_batches, now_ms))
        }
        FeedDoc::Latest => {
            let cursors = snapshot.cursors();
            let want = projection.since(&snapshot, since)?;
            let now_batches = match &want {
                decide::Since::Nothing => BTreeMap::new(),
                _ => batches(&kv, agent, &projection.resolved.sources, &cursors).await?,
            };
            match (&want, since) {
                (decide::Since::Changes(before), Some(from)) => {
                    let old = earlier(&kv, &projection.resolved.sources, before).await?;
                    let fresh = decide::new_items(&now_batches, &old);
                    json_bytes(&projection.latest_since(&snapshot, &fresh, now_ms, from))
                }
                (decide::Since::Nothing, Some(from)) => {
                    json_bytes(&projection.latest_since(&snapshot, &now_batches, now_ms, from))
                }
                _ => json_bytes(&projection.latest(&snapshot, &now_batches, now_ms)),
            }
        }
    };
    Ok(Fed::Body { etag, body })
}

/// The stored batches of `sources` at the given cursors (one bulk KV read;
/// a source without a cursor has no batch). A batch the pointer names but KV
/// lacks is ours to fix: a 503, never a partial answer.
async fn batches(
    kv: &Kv,
    agent: &AgentId,
    sources: &[String],
    cursors: &BTreeMap<String, Option<String>>,
) -> Result<BTreeMap<String, Batch>, Failure> {
    let keys: Vec<String> = sources
        .iter()
        .filter_map(|id| {
            let c = cursors.get(id)?.as_deref()?;
            Some(batch_kv_key(id, Some(c)))
        })
        .collect();
    let texts = kv.texts(&keys).await?.ok_or_else(|| {
        crate::worker::log::event("world_batch_missing", &[("agent_id", agent.as_str())]);
        Failure::Unavailable(None)
    })?;
    let mut out = BTreeMap::new();
    for text in texts {
        let v = json::parse(text.as_bytes()).map_err(|e| e.to_string())?;
        let id = v
            .get("source_id")
            .and_then(Json::as_str)
            .ok_or("stored batch without source_id")?
            .to_owned();
        let b = Batch::parse(&v, &id).map_err(|e| e.0)?;
        out.insert(id, b);
    }
    Ok(out)
}

/// The batches of `sources` at earlier cursors, as far as KV still keeps
/// them (14 days): a source whose earlier batch is gone counts every current
/// item as new.
async fn earlier(
    kv: &Kv,
    sources: &[String],
    cursors: &BTreeMap<String, Option<String>>,
) -> Result<BTreeMap<String, Batch>, Failure> {
    let keys: Vec<String> = sources
        .iter()
        .filter_map(|id| Some(batch_kv_key(id, Some(cursors.get(id)?.as_deref()?))))
        .collect();
    let mut out = BTreeMap::new();
    for text in kv.texts_found(&keys).await?.into_iter().flatten() {
        let Ok(v) = json::parse(text.as_bytes()) else {
            continue;
        };
        let Some(id) = v.get("source_id").and_then(Json::as_str).map(str::to_owned) else {
            continue;
        };
        if let Ok(b) = Batch::parse(&v, &id) {
            out.insert(id, b);
        }
    }
    Ok(out)
}

fn json_bytes(v: &Json) -> Vec<u8> {
    crate::core::jcs::canonicalize(v).into_bytes()
}
