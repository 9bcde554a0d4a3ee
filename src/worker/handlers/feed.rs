//! `GET /api/v1/watch/{head,latest,digest}?agent_id=…`: an agent's
//! projected watch feed (docs/PROTOCOL.md §15), and
//! `GET /api/v1/watch/socket?agent_id=…`, a WebSocket of its head. One KV
//! read of the agent's record (its watch and tier; a private capsule's
//! watch is read as the capsule is, §12), the world snapshot's pointer from
//! this location's copy (`world::snapshot`: a KV read a minute), and for
//! `latest` and `digest` one bulk read of the selected sources' batches. An unsigned
//! poll of a public capsule's head is answered from this location's copy
//! while it was made of the snapshot this location holds (no KV read at
//! all); `digest` reads the batches too (its breakdowns count items).
//! `head?wait=N` whose client holds the head, and the socket, are held by
//! the agent's feed object (`objects::feed`). The remote MCP door's
//! `self_feed` answers through [`document`]. Every decision is
//! `core::projection`'s; the snapshot's refresh is `worker::world`'s.

use super::reads::{self, ReadAs, Stored};
use super::signer;
use crate::core::crypto::AgentId;
use crate::core::json::{self, Json};
use crate::core::model::{ReadScope, Watch};
use crate::core::projection::feed::{self as decide, REFRESH_INTERVAL_SEC};
use crate::core::quota::ip_bucket;
use crate::core::reason::{ReasonCode, Refusal};
use crate::core::record::Record;
use crate::core::urls::FeedDoc;
use crate::core::world::ddv1::Batch;
use crate::core::world::refresh::{batch_kv_key, WorldPointer};
use crate::core::world::stacks::Stacks;
use crate::worker::clock;
use crate::worker::config::Config;
use crate::worker::do_wire::feed::{self as feed_wire, FeedWaitCall, FeedWatchCall};
use crate::worker::do_wire::Waited;
use crate::worker::failure::Failure;
use crate::worker::http::{self, CachedRead, Reply};
use crate::worker::kv::Kv;
use crate::worker::read_cache::{self, Kept};
use crate::worker::request::Incoming;
use crate::worker::world;
use std::collections::BTreeMap;
use worker::{Env, Response};

/// How long a client waits after `upstream_unavailable` (one refresh).
const RETRY_AFTER_SEC: u64 = 60;

/// Whether a snapshot is too old to serve without refreshing it first: the
/// cron trigger keeps it fresh, so one two intervals old means it stopped.
fn outdated(p: &WorldPointer, now_ms: u64) -> bool {
    now_ms.saturating_sub(p.checked_at_ms) > 2 * REFRESH_INTERVAL_SEC * 1000
}

/// What every feed answer is decided on: the agent's record (read as this
/// reader may), its admitted watch, and the snapshot.
struct Admitted {
    record: Box<Record>,
    watch: Watch,
    world: WorldPointer,
}

async fn admitted(
    env: &Env,
    agent: &AgentId,
    upstream: &str,
    reader: Option<&AgentId>,
    known: Option<WorldPointer>,
    now_ms: u64,
) -> Result<Admitted, Failure> {
    let read_as = ReadAs {
        reader,
        scope: ReadScope::Capsule,
        now_ms,
    };
    let Stored::Current(record) = reads::record(env, agent, &read_as, |_: &str| None::<()>).await?
    else {
        return Err(Failure::Unavailable(None));
    };
    let watch = decide::admit(&record.capsule, record.paid.tier_at(now_ms), upstream)?;
    let mut world = known;
    if world.as_ref().is_none_or(|p| outdated(p, now_ms)) {
        world = world::refresh(env, &Kv::of(env)?, upstream, now_ms)
            .await?
            .or(world);
    }
    let world = world.ok_or_else(|| {
        Failure::Refused(
            Refusal::new(
                ReasonCode::UpstreamUnavailable,
                "the world feed has not been read yet",
            )
            .retry_after(RETRY_AFTER_SEC),
        )
    })?;
    Ok(Admitted {
        record,
        watch,
        world,
    })
}

/// One feed document.
pub async fn handle(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    doc: FeedDoc,
    read: CachedRead,
) -> Result<Reply, Failure> {
    let now_ms = clock::request_now_ms(req, cfg.test_clock);
    let (agent, since, wait) = match doc {
        FeedDoc::Latest => {
            let (agent, since) = decide::parse_latest_query(req.query_pairs())?;
            (agent, since, None)
        }
        FeedDoc::Head => {
            let (agent, wait) = decide::parse_head_query(req.query_pairs())?;
            (agent, None, wait)
        }
        FeedDoc::Digest => (decide::parse_query(req.query_pairs())?, None, None),
    };
    let upstream = upstream(cfg)?;
    // A watch is capsule content: a private capsule's is read as it is.
    let reader = signer::of(req, env, now_ms).await?;
    let mut read = read;
    if reader.is_some() {
        read = read.private();
    }
    let kv = Kv::of(env)?;
    let known = world::snapshot(&kv).await?;
    // An unsigned poll of the head (not a long-poll) may be answered from
    // this location's copy, if it was made of the snapshot held here.
    let cache_key = match (doc, &reader, wait) {
        (FeedDoc::Head, None, None) => read_cache::feed_key(req, &agent, cfg.test_clock),
        _ => None,
    };
    let kept = match &cache_key {
        Some(key) => read_cache::lookup(key).await,
        None => Kept::Nothing,
    };
    let current = |answer: &worker::web_sys::Response| {
        known.as_ref().is_some_and(|w| {
            !outdated(w, now_ms) && read_cache::world_of(answer) == Some(w.version())
        })
    };
    let kept = match kept {
        Kept::Answer(answer, etag) if current(&answer) => return Ok(read.kept(answer, &etag)),
        other => other,
    };
    let Admitted {
        record,
        watch,
        world: snapshot,
    } = admitted(env, &agent, upstream, reader.as_ref(), known, now_ms).await?;
    let projection = decide::project(&watch, &snapshot, Stacks::committed());
    let etag = projection.etag().to_owned();
    if let (Some(wait_sec), Some(_)) = (wait, read.fresh(&etag)) {
        let call = FeedWaitCall {
            agent_id: agent.to_string(),
            reader: reader.as_ref().map(AgentId::to_string),
            watch,
            held: etag.clone(),
            world_at_ms: snapshot.checked_at_ms,
            wait_ms: wait_sec * 1_000,
            now_ms,
        };
        // A held answer is for this client alone.
        let read = read.private();
        return match feed_wire::wait(env, &call).await? {
            Waited::Head(body, moved) => Ok(read.answer(body, &moved).into()),
            Waited::Unchanged => Ok(read.answer(Vec::new(), &etag).into()),
            Waited::NotFound => Err(Failure::code(ReasonCode::CapsuleNotFound)),
        };
    }
    // A read this location may keep is made whole even when the client
    // already holds it, as for head.json.
    if cache_key.is_none() {
        if let Some(not_modified) = read.fresh(&etag) {
            return Ok(not_modified.into());
        }
    }
    let wanted = Wanted {
        doc,
        since: since.as_deref(),
    };
    let body = body_of(&kv, &agent, wanted, &projection, &snapshot, now_ms).await?;
    // Unsigned and admitted: the capsule is public, the answer the same for
    // every reader.
    if let Some(key) = &cache_key {
        let mut answer = http::full_answer(body.clone(), &etag);
        let _ = answer
            .headers_mut()
            .set(read_cache::WORLD_VERSION_HEADER, &snapshot.version());
        read_cache::store(key, &kept, record.seq, answer).await;
    }
    Ok(read.answer(body, &etag).into())
}

/// `GET /api/v1/watch/socket?agent_id=…`: the WebSocket upgrade is checked
/// (426 without one), the feed admitted as a read of the head would be,
/// and the socket handed to the agent's feed object, which sends the head
/// at once and again whenever it moves.
pub async fn socket(req: &Incoming, env: &Env, cfg: &Config) -> Result<Response, Failure> {
    super::watch::handshake(req)?;
    let agent = decide::parse_query(req.query_pairs())?;
    let upstream = upstream(cfg)?;
    let now_ms = clock::request_now_ms(req, cfg.test_clock);
    let reader = signer::of(req, env, now_ms).await?;
    let known = world::snapshot(&Kv::of(env)?).await?;
    let admitted = admitted(env, &agent, upstream, reader.as_ref(), known, now_ms).await?;
    let call = FeedWatchCall {
        agent_id: agent.to_string(),
        reader: reader.map(|r| r.to_string()),
        ip_bucket: ip_bucket(req.headers().get("CF-Connecting-IP")?.as_deref()),
        watch: admitted.watch,
        world_at_ms: admitted.world.checked_at_ms,
        now_ms,
    };
    Ok(feed_wire::watch(env, &call).await?)
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

/// `agent`'s projected feed document as `read_as` may read it: the agent's
/// record (its watch and tier), the snapshot (refreshed first when it is
/// missing or two intervals old), the projection, then the body.
pub async fn document(
    env: &Env,
    upstream: &str,
    agent: &AgentId,
    wanted: Wanted<'_>,
    read_as: &ReadAs<'_>,
) -> Result<Vec<u8>, Failure> {
    let now_ms = read_as.now_ms;
    let kv = Kv::of(env)?;
    let known = world::snapshot(&kv).await?;
    let Admitted {
        watch,
        world: snapshot,
        ..
    } = admitted(env, agent, upstream, read_as.reader, known, now_ms).await?;
    let projection = decide::project(&watch, &snapshot, Stacks::committed());
    body_of(&kv, agent, wanted, &projection, &snapshot, now_ms).await
}

/// A document's bytes from its projection: the head and digest from the
/// snapshot (the digest's breakdowns from the batches), `latest` from the
/// batches (and, with `since`, the earlier ones).
async fn body_of(
    kv: &Kv,
    agent: &AgentId,
    wanted: Wanted<'_>,
    projection: &decide::Projection,
    snapshot: &WorldPointer,
    now_ms: u64,
) -> Result<Vec<u8>, Failure> {
    let sources = &projection.resolved.sources;
    Ok(match wanted.doc {
        FeedDoc::Head => serde_json::to_vec(&projection.head(agent, snapshot, now_ms))?,
        FeedDoc::Digest => {
            let now_batches = batches(kv, agent, sources, &snapshot.cursors()).await?;
            json_bytes(&projection.digest(snapshot, &now_batches, now_ms))
        }
        FeedDoc::Latest => {
            let since = wanted.since;
            let want = projection.since(snapshot, since)?;
            let now_batches = match &want {
                decide::Since::Nothing => BTreeMap::new(),
                _ => batches(kv, agent, sources, &snapshot.cursors()).await?,
            };
            match (&want, since) {
                (decide::Since::Changes(before), Some(from)) => {
                    let old = earlier(kv, sources, before).await?;
                    let fresh = decide::new_items(&now_batches, &old);
                    json_bytes(&projection.latest_since(snapshot, &fresh, now_ms, from))
                }
                (decide::Since::Nothing, Some(from)) => {
                    json_bytes(&projection.latest_since(snapshot, &now_batches, now_ms, from))
                }
                _ => json_bytes(&projection.latest(snapshot, &now_batches, now_ms)),
            }
        }
    })
}

/// The stored batches of `sources` at the given cursors (one bulk KV read;
/// a source without a cursor has no batch). A batch the pointer names but KV
/// lacks is ours to fix: a 503, never a partial answer.
async fn batches(
    kv: &Kv,
    agent: &crate::core::crypto::AgentId,
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
