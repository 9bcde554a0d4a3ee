//! The feed objects (`core::projection::push`): WebSocket watchers and held
//! long-polls of agents' projected heads, sixteen objects by the agent id's
//! first hex digit.
//!
//! Each keeps the last world snapshot it was told of (`world`) and, per
//! agent with watchers, the sources its watch resolved to (`sel:{agent}`),
//! so that a new snapshot wakes only the agents whose selection holds a
//! moved source: their records are read from KV (one bulk read), admitted
//! again (a lapsed plan, a removed watch, a revoked grant close the socket
//! with the code a read would answer), projected, and the head sent to each
//! watcher whose cursor it is not. An agent's commit is told by its own
//! object with the record, and handled the same way for that agent.
//! Watchers hibernate: an idle one costs nothing while the object sleeps.

use super::sockets;
use crate::core::access::{self, Decision};
use crate::core::crypto::AgentId;
use crate::core::model::{ReadScope, Watch};
use crate::core::projection::feed::{self as decide, Projection};
use crate::core::projection::push;
use crate::core::reason::ReasonCode;
use crate::core::record::{kv_key, Record};
use crate::core::watch::{self, Close};
use crate::core::world::refresh::WorldPointer;
use crate::core::world::stacks::Stacks;
use crate::worker::config::Config;
use crate::worker::do_wire::feed::{AgentMoved, FeedCall, FeedWaitCall, FeedWatchCall, WorldMoved};
use crate::worker::do_wire::{self, Waited};
use crate::worker::kv::Kv;
use crate::worker::storage::{load, save, texts_under};
use crate::worker::world;
use futures_channel::oneshot;
use futures_util::future::{select, Either};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::time::Duration;
// The `#[durable_object]` expansion names `wasm_bindgen` unqualified.
use worker::wasm_bindgen;
use worker::{
    durable_object, Delay, DurableObject, Env, Request, Response, ResponseBuilder, State,
    WebSocket, WebSocketIncomingMessage, WebSocketPair, WebSocketRequestResponsePair,
};

/// The last snapshot this object was told of.
const WORLD_KEY: &str = "world";
/// Per agent with watchers: its resolved sources.
const SELECTION_PREFIX: &str = "sel:";
/// Every watcher's socket carries this tag.
const WATCH_TAG: &str = "feed";

fn agent_tag(agent: &str) -> String {
    format!("a:{agent}")
}

fn address_tag(ip_bucket: &str, agent: &str) -> String {
    format!("ip:{ip_bucket}:{agent}")
}

/// What a watcher's socket remembers across hibernation.
#[derive(Serialize, Deserialize)]
struct Watcher {
    /// The verified signer of the upgrade, if it was signed.
    reader: Option<String>,
    /// The entity tag (cursor hex) of the last head it was sent.
    sent: String,
}

/// A held long-poll (in memory: a held request keeps the object awake).
struct Waiter {
    id: u64,
    agent: AgentId,
    reader: Option<String>,
    watch: Watch,
    held: String,
    tx: oneshot::Sender<Waited>,
}

#[durable_object]
pub struct FeedDO {
    state: State,
    env: Env,
    waiters: RefCell<Vec<Waiter>>,
    next_waiter: Cell<u64>,
}

/// Why a watcher is closed, from the refusal a read would answer.
fn close_for(code: ReasonCode) -> Close {
    match code {
        ReasonCode::WatchNotSet => Close::WatchNotSet,
        ReasonCode::WatchRequiresPro => Close::WatchRequiresPro,
        _ => Close::NotReadable,
    }
}

/// Whether `reader` may read `record`'s watch (capsule content, §12).
fn may_read(record: &Record, reader: Option<&str>, now_ms: u64) -> bool {
    access::decide(
        &record.capsule,
        &record.agent_id,
        reader,
        ReadScope::Capsule,
        now_ms,
    ) != Decision::Hidden
}

/// A head as sent: its body and entity tag.
fn head_of(p: &Projection, agent: &AgentId, world: &WorldPointer, now_ms: u64) -> (String, String) {
    let body = serde_json::to_string(&p.head(agent, world, now_ms)).unwrap_or_default();
    (body, p.etag().to_owned())
}

impl DurableObject for FeedDO {
    fn new(state: State, env: Env) -> Self {
        // Watchers' pings are answered by the runtime, even while the object
        // hibernates, and never wake it.
        if let Ok(pair) = WebSocketRequestResponsePair::new(watch::PING, watch::PONG) {
            state.set_websocket_auto_response(&pair);
        }
        Self {
            state,
            env,
            waiters: RefCell::new(Vec::new()),
            next_waiter: Cell::new(0),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        match FeedCall::read(req).await? {
            Some(FeedCall::Watch(call)) => self.watch(call).await,
            Some(FeedCall::Wait(call)) => Ok(self.wait(call).await?.answer()),
            Some(FeedCall::World(call)) => {
                self.world_moved(call).await?;
                Ok(ResponseBuilder::new().with_status(204).empty())
            }
            Some(FeedCall::Agent(call)) => {
                self.agent_moved(call).await?;
                Ok(ResponseBuilder::new().with_status(204).empty())
            }
            None => Ok(do_wire::not_a_call()),
        }
    }

    async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> worker::Result<()> {
        sockets::answer(&ws, &message)
    }

    async fn websocket_close(
        &self,
        ws: WebSocket,
        code: usize,
        _reason: String,
        _was_clean: bool,
    ) -> worker::Result<()> {
        sockets::complete_close(&ws, code);
        Ok(())
    }

    async fn websocket_error(&self, _ws: WebSocket, _error: worker::Error) -> worker::Result<()> {
        Ok(())
    }
}

impl FeedDO {
    /// The last snapshot this object knows, made at least as new as the one
    /// checked at `at_least_ms` (read from KV when it lags: the object was
    /// not told of a snapshot a request already saw).
    async fn world(&self, at_least_ms: u64) -> worker::Result<Option<WorldPointer>> {
        let storage = self.state.storage();
        let kept: Option<WorldPointer> = load(&storage, WORLD_KEY).await?;
        if kept
            .as_ref()
            .is_some_and(|w| w.checked_at_ms >= at_least_ms)
        {
            return Ok(kept);
        }
        let read = world::pointer(&Kv::of(&self.env)?).await?;
        match read {
            Some(w)
                if kept
                    .as_ref()
                    .is_none_or(|k| w.checked_at_ms > k.checked_at_ms) =>
            {
                save(&storage, WORLD_KEY, &w).await?;
                Ok(Some(w))
            }
            _ => Ok(kept),
        }
    }

    /// Takes a watcher: admitted for hibernation (within the caps) and sent
    /// the current head at once.
    async fn watch(&self, call: FeedWatchCall) -> worker::Result<Response> {
        let agent = AgentId::parse(&call.agent_id).ok_or("feed watch: bad agent id")?;
        let pair = WebSocketPair::new()?;
        let (a_tag, ip_tag) = (
            agent_tag(agent.as_str()),
            address_tag(&call.ip_bucket, agent.as_str()),
        );
        let total = self.state.get_websockets_with_tag(WATCH_TAG).len();
        let admitted = if total >= push::WATCHERS_PER_SHARD {
            Err(Close::TooManyWatchers)
        } else {
            watch::admit(
                self.state.get_websockets_with_tag(&a_tag).len(),
                self.state.get_websockets_with_tag(&ip_tag).len(),
            )
        };
        if let Err(c) = admitted {
            // Accepted without hibernation only to be closed (see the agent
            // object's watch).
            pair.server.accept()?;
            pair.server.close(Some(c.code()), Some(c.reason()))?;
            return Response::from_websocket(pair.client);
        }
        let Some(world) = self.world(call.world_at_ms).await? else {
            return Err("feed watch: no world snapshot".into());
        };
        self.state
            .accept_websocket_with_tags(&pair.server, &[WATCH_TAG, &a_tag, &ip_tag]);
        let p = decide::project(&call.watch, &world, Stacks::committed());
        let (head, etag) = head_of(&p, &agent, &world, call.now_ms);
        pair.server.send_with_str(&head)?;
        pair.server.serialize_attachment(&Watcher {
            reader: call.reader,
            sent: etag,
        })?;
        self.remember(&agent, &p).await?;
        Response::from_websocket(pair.client)
    }

    /// Stores the agent's selection if it is not the one stored.
    async fn remember(&self, agent: &AgentId, p: &Projection) -> worker::Result<()> {
        let key = format!("{SELECTION_PREFIX}{agent}");
        let storage = self.state.storage();
        let kept: Option<Vec<String>> = load(&storage, &key).await?;
        if kept.as_ref() != Some(&p.resolved.sources) {
            save(&storage, &key, &p.resolved.sources).await?;
        }
        Ok(())
    }

    /// Holds a long-poll: answered at once if the snapshot this object
    /// knows moves the client's projection already, else with the next
    /// head that does, or at the deadline (304). Past the cap it is
    /// answered at once.
    async fn wait(&self, call: FeedWaitCall) -> worker::Result<Waited> {
        let agent = AgentId::parse(&call.agent_id).ok_or("feed wait: bad agent id")?;
        let kept: Option<WorldPointer> = load(&self.state.storage(), WORLD_KEY).await?;
        if let Some(w) = kept.filter(|w| w.checked_at_ms > call.world_at_ms) {
            let p = decide::project(&call.watch, &w, Stacks::committed());
            if push::moved_for(Some(&call.held), &p) {
                let (head, etag) = head_of(&p, &agent, &w, call.now_ms);
                return Ok(Waited::Head(head.into_bytes(), etag));
            }
        }
        if self.waiters.borrow().len() >= push::HELD_POLLS_PER_SHARD {
            return Ok(Waited::Unchanged);
        }
        let (tx, rx) = oneshot::channel();
        let id = self.next_waiter.get();
        self.next_waiter.set(id + 1);
        self.waiters.borrow_mut().push(Waiter {
            id,
            agent,
            reader: call.reader,
            watch: call.watch,
            held: call.held,
            tx,
        });
        let deadline = Delay::from(Duration::from_millis(call.wait_ms));
        match select(rx, deadline).await {
            Either::Left((Ok(answer), _)) => Ok(answer),
            _ => {
                self.waiters.borrow_mut().retain(|w| w.id != id);
                Ok(Waited::Unchanged)
            }
        }
    }

    /// Answers every held poll the snapshot moves (only those of one
    /// agent, if given with its record and watch now: one that may no
    /// longer read it is told so, as a read would be).
    fn wake_waiters(&self, world: &WorldPointer, only: Option<(&Record, &Watch)>, now_ms: u64) {
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        let mut kept = Vec::new();
        for mut w in waiters {
            match only {
                Some((r, _)) if r.agent_id != w.agent.as_str() => {
                    kept.push(w);
                    continue;
                }
                Some((r, _)) if !may_read(r, w.reader.as_deref(), now_ms) => {
                    let _ = w.tx.send(Waited::NotFound);
                    continue;
                }
                Some((_, watch)) => w.watch = watch.clone(),
                None => {}
            }
            let p = decide::project(&w.watch, world, Stacks::committed());
            if push::moved_for(Some(&w.held), &p) {
                let (head, etag) = head_of(&p, &w.agent, world, now_ms);
                let _ = w.tx.send(Waited::Head(head.into_bytes(), etag));
            } else {
                kept.push(w);
            }
        }
        self.waiters.borrow_mut().extend(kept);
    }

    /// A new snapshot: stored, then every agent whose selection it touches
    /// is projected again, and every held poll it moves answered.
    async fn world_moved(&self, call: WorldMoved) -> worker::Result<()> {
        let storage = self.state.storage();
        let kept: Option<WorldPointer> = load(&storage, WORLD_KEY).await?;
        if kept
            .as_ref()
            .is_some_and(|k| k.checked_at_ms >= call.world.checked_at_ms)
        {
            // Told out of order: a later snapshot is already here.
            return Ok(());
        }
        save(&storage, WORLD_KEY, &call.world).await?;
        self.wake_waiters(&call.world, None, call.now_ms);
        let mut touched = Vec::new();
        for (key, text) in texts_under(&storage, SELECTION_PREFIX).await? {
            let selected: Vec<String> = serde_json::from_str(&text).unwrap_or_default();
            if push::touched(&selected, &call.moved) {
                if let Some(a) = AgentId::parse(&key[SELECTION_PREFIX.len()..]) {
                    touched.push(a);
                }
            }
        }
        if touched.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = touched.iter().map(kv_key).collect();
        let texts = Kv::of(&self.env)?.texts_found(&keys).await?;
        for (agent, text) in touched.iter().zip(texts) {
            let record = text.and_then(|t| serde_json::from_str::<Record>(&t).ok());
            self.reproject(agent, record.as_ref(), &call.world, call.now_ms)
                .await?;
        }
        Ok(())
    }

    /// An agent's commit: its watchers and held polls are projected again
    /// with the record it left.
    async fn agent_moved(&self, call: AgentMoved) -> worker::Result<()> {
        let agent = AgentId::parse(&call.record.agent_id).ok_or("feed poke: bad agent id")?;
        let has_waiters = self.waiters.borrow().iter().any(|w| w.agent == agent);
        let has_watchers = !self
            .state
            .get_websockets_with_tag(&agent_tag(agent.as_str()))
            .is_empty();
        if !has_waiters && !has_watchers {
            return Ok(());
        }
        let Some(world) = self.world(0).await? else {
            return Ok(());
        };
        self.reproject(&agent, Some(&call.record), &world, call.now_ms)
            .await
    }

    /// Projects `agent`'s watch again over `world` and tells its watchers
    /// (and, for a commit, its held polls) what a read would now answer.
    async fn reproject(
        &self,
        agent: &AgentId,
        record: Option<&Record>,
        world: &WorldPointer,
        now_ms: u64,
    ) -> worker::Result<()> {
        let sockets = self
            .state
            .get_websockets_with_tag(&agent_tag(agent.as_str()));
        let key = format!("{SELECTION_PREFIX}{agent}");
        let cfg = Config::of(&self.env);
        let admitted = match (record, cfg.watch_upstream.as_deref()) {
            (Some(r), Some(upstream)) => {
                decide::admit(&r.capsule, r.paid.tier_at(now_ms), upstream)
                    .map(|w| (r, w))
                    .map_err(|f| f.code)
            }
            (None, _) => Err(ReasonCode::CapsuleNotFound),
            (_, None) => Err(ReasonCode::WatchNotConfigured),
        };
        let (record, watch) = match admitted {
            Ok(found) => found,
            Err(code) => {
                let c = close_for(code);
                for ws in sockets {
                    let _ = ws.close(Some(c.code()), Some(c.reason()));
                }
                self.state.storage().delete(&key).await?;
                return Ok(());
            }
        };
        self.wake_waiters(world, Some((record, &watch)), now_ms);
        if sockets.is_empty() {
            self.state.storage().delete(&key).await?;
            return Ok(());
        }
        let p = decide::project(&watch, world, Stacks::committed());
        let (head, etag) = head_of(&p, agent, world, now_ms);
        for ws in sockets {
            let Ok(Some(mut w)) = ws.deserialize_attachment::<Watcher>() else {
                continue;
            };
            if !may_read(record, w.reader.as_deref(), now_ms) {
                let c = Close::NotReadable;
                let _ = ws.close(Some(c.code()), Some(c.reason()));
            } else if w.sent != etag {
                let _ = ws.send_with_str(&head);
                w.sent = etag.clone();
                let _ = ws.serialize_attachment(&w);
            }
        }
        self.remember(agent, &p).await
    }
}
