//! The calls of the feed objects (`objects::feed`), both halves: the
//! projected head's WebSocket watchers and long-polls (from the feed
//! handler), and the pokes that may move projections (a new world snapshot
//! from the refresh, an agent's commit from its own object). See
//! `core::projection::push` for which object holds what.

use super::{json_of, upgrade_call, upgrade_request, Waited};
use crate::core::crypto::AgentId;
use crate::core::model::Watch;
use crate::core::projection::push;
use crate::core::record::Record;
use crate::core::world::refresh::WorldPointer;
use crate::worker::config::FEED_DO_BINDING;
use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use worker::{Env, Method, Request, RequestInit, Response};

const WATCH_URL: &str = "https://feed.do/watch";
const WAIT_URL: &str = "https://feed.do/wait";
const WORLD_URL: &str = "https://feed.do/world";
const AGENT_URL: &str = "https://feed.do/agent";

/// A call to a feed object.
pub enum FeedCall {
    /// Take a WebSocket watcher of an agent's projected head.
    Watch(FeedWatchCall),
    /// Hold a projected head's long-poll.
    Wait(FeedWaitCall),
    /// The world snapshot moved.
    World(WorldMoved),
    /// An agent committed (its watch, plan or access may have changed).
    Agent(AgentMoved),
}

/// A watcher the Worker admitted: the agent has a projected feed this
/// reader may read, as of the snapshot checked at `world_at_ms`.
#[derive(Serialize, Deserialize)]
pub struct FeedWatchCall {
    /// The agent.
    pub agent_id: String,
    /// The verified signer of the upgrade, if it was signed.
    pub reader: Option<String>,
    /// The client's address bucket (the per-address watcher cap).
    pub ip_bucket: String,
    /// The agent's watch.
    pub watch: Watch,
    /// When the snapshot the Worker decided on was checked (Unix ms).
    pub world_at_ms: u64,
    /// "Now" (Unix ms).
    pub now_ms: u64,
}

/// A long-poll whose client already holds the projected head.
#[derive(Serialize, Deserialize)]
pub struct FeedWaitCall {
    /// The agent.
    pub agent_id: String,
    /// The verified signer, if the poll was signed.
    pub reader: Option<String>,
    /// The agent's watch.
    pub watch: Watch,
    /// The entity tag (cursor hex) the client holds.
    pub held: String,
    /// When the snapshot the Worker decided on was checked (Unix ms).
    pub world_at_ms: u64,
    /// How long to hold the poll (ms).
    pub wait_ms: u64,
    /// "Now" (Unix ms).
    pub now_ms: u64,
}

/// A new world snapshot, with the sources whose cursors moved.
#[derive(Serialize, Deserialize)]
pub struct WorldMoved {
    /// The snapshot's pointer, as stored.
    pub world: WorldPointer,
    /// `push::moved` of the last pointer and this one.
    pub moved: Vec<String>,
    /// "Now" (Unix ms).
    pub now_ms: u64,
}

/// An agent's record as a commit left it.
#[derive(Serialize, Deserialize)]
pub struct AgentMoved {
    /// The record.
    pub record: Record,
    /// "Now" (Unix ms).
    pub now_ms: u64,
}

fn stub(env: &Env, name: &str) -> worker::Result<worker::Stub> {
    env.durable_object(FEED_DO_BINDING)?
        .id_from_name(name)?
        .get_stub()
}

fn agent(id: &str) -> worker::Result<AgentId> {
    Ok(AgentId::parse(id).ok_or("feed call: bad agent id")?)
}

async fn post(env: &Env, name: &str, url: &str, call: &impl Serialize) -> worker::Result<Response> {
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_body(Some(serde_json::to_string(call)?.into()));
    stub(env, name)?
        .fetch_with_request(Request::new_with_init(url, &init)?)
        .await
}

/// Worker side: hands a WebSocket upgrade to the agent's feed object; its
/// answer (101 with the socket) goes to the client as is.
pub async fn watch(env: &Env, call: &FeedWatchCall) -> worker::Result<Response> {
    let name = push::shard_of(&agent(&call.agent_id)?);
    stub(env, &name)?
        .fetch_with_request(upgrade_request(WATCH_URL, call)?)
        .await
}

/// Worker side: holds a long-poll in the agent's feed object.
pub async fn wait(env: &Env, call: &FeedWaitCall) -> worker::Result<Waited> {
    let name = push::shard_of(&agent(&call.agent_id)?);
    Waited::read(post(env, &name, WAIT_URL, call).await?).await
}

/// Tells every feed object of a new snapshot (one call each, at once).
/// Returns how many did not take it (logged by the caller).
pub async fn world_moved(env: &Env, call: &WorldMoved) -> usize {
    let sent = join_all(push::shards().map(|name| async move {
        matches!(post(env, &name, WORLD_URL, call).await, Ok(r) if r.status_code() == 204)
    }))
    .await;
    sent.into_iter().filter(|ok| !ok).count()
}

/// Object side of an agent's commit: tells its feed object.
pub async fn agent_moved(env: &Env, call: &AgentMoved) -> worker::Result<()> {
    let name = push::shard_of(&agent(&call.record.agent_id)?);
    let resp = post(env, &name, AGENT_URL, call).await?;
    match resp.status_code() {
        204 => Ok(()),
        s => Err(format!("feed DO agent poke answered {s}").into()),
    }
}

impl FeedCall {
    /// Object side: reads a call; `None` for anything that is not one.
    pub async fn read(req: Request) -> worker::Result<Option<FeedCall>> {
        let url = req.inner().url();
        let is = |u: &str| url.as_str() == u;
        Ok(Some(match req.method() {
            Method::Get if is(WATCH_URL) => FeedCall::Watch(upgrade_call(&req)?),
            Method::Post if is(WAIT_URL) => FeedCall::Wait(json_of(&req).await?),
            Method::Post if is(WORLD_URL) => FeedCall::World(json_of(&req).await?),
            Method::Post if is(AGENT_URL) => FeedCall::Agent(json_of(&req).await?),
            _ => return Ok(None),
        }))
    }
}
