//! Push on change in the agent's object: watchers (hibernatable WebSockets,
//! capped by `core::watch`) and held long-polls, each sent the new head once
//! a commit's record is in KV, and ended when it loses access.

use super::{AgentDO, STATE_KEY};
use crate::core::access::{self, Decision};
use crate::core::crypto::AgentId;
use crate::core::model::ReadScope;
use crate::core::record::Record;
use crate::core::watch;
use crate::core::write::AgentState;
use crate::worker::config::Config;
use crate::worker::do_wire::feed::{self as feed_wire, AgentMoved};
use crate::worker::do_wire::{WaitCall, Waited, WatchCall};
use crate::worker::storage::load;
use futures_channel::oneshot;
use futures_util::future::{select, Either};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use worker::{Delay, Response, WebSocketPair};

/// Every watcher's socket carries this tag, and one of its address.
pub(super) const WATCH_TAG: &str = "watch";

fn address_tag(ip_bucket: &str) -> String {
    format!("ip:{ip_bucket}")
}

/// What a watcher's socket remembers across hibernation.
#[derive(Serialize, Deserialize)]
struct Watcher {
    /// The verified signer of the upgrade, if it was signed.
    reader: Option<String>,
    /// Whether it has been sent a head: one that has, and may no longer read
    /// the capsule, is told so (4404) as head.json would tell it; one that
    /// never could read it is told nothing, as for an agent with no capsule.
    seen: bool,
}

/// A held long-poll: resolved with the next head its reader may read whose
/// cursor differs from the one the client holds, or with "not found" by the
/// commit that takes away a head it was reading (as head.json would answer).
pub(super) struct Waiter {
    id: u64,
    reader: Option<String>,
    /// The entity the client holds: `Some` only if it could read the head
    /// when the poll was decided (a 304 is decided on a readable record).
    held: Option<String>,
    tx: oneshot::Sender<Waited>,
}

/// Whether `reader` may read `record`'s head now (§12).
fn may_read_head(record: &Record, reader: Option<&str>, now_ms: u64) -> bool {
    let decision = access::decide(
        &record.capsule,
        &record.agent_id,
        reader,
        ReadScope::Head,
        now_ms,
    );
    decision != Decision::Hidden
}

impl AgentDO {
    /// Sends `record`'s head to every watcher and held long-poll that may
    /// read it. Called once the record is in KV, so a watcher that then
    /// fetches capsule.json gets this capsule.
    pub(super) fn publish(&self, record: &Record, now_ms: u64) {
        let cfg = Config::of(&self.env);
        let head = match serde_json::to_string(&record.head(now_ms, &cfg.tiers)) {
            Ok(h) => h,
            Err(_) => return,
        };
        for ws in self.state.get_websockets_with_tag(WATCH_TAG) {
            let Ok(Some(mut w)) = ws.deserialize_attachment::<Watcher>() else {
                continue;
            };
            if may_read_head(record, w.reader.as_deref(), now_ms) {
                let _ = ws.send_with_str(&head);
                if !w.seen {
                    w.seen = true;
                    let _ = ws.serialize_attachment(&w);
                }
            } else if w.seen {
                let c = watch::Close::NotReadable;
                let _ = ws.close(Some(c.code()), Some(c.reason()));
            }
        }
        // A poll that may not read the record, and never could, waits on,
        // exactly as for an agent with no capsule; so does one whose client
        // already holds this cursor (a republished identical capsule, a
        // credited upgrade). One that held a head and may no longer read it
        // (the capsule went private, its grant was revoked) is answered now,
        // with what head.json answers it now.
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        let mut kept = Vec::new();
        for w in waiters {
            let readable = may_read_head(record, w.reader.as_deref(), now_ms);
            let etag = record.head_etag();
            let moved = w.held.as_deref() != Some(etag.as_str());
            if readable && moved {
                let _ = w.tx.send(Waited::Head(head.clone().into_bytes(), etag));
            } else if !readable && w.held.is_some() {
                let _ = w.tx.send(Waited::NotFound);
            } else {
                kept.push(w);
            }
        }
        self.waiters.borrow_mut().extend(kept);
    }

    /// Tells the agent's feed object of a commit whose record has a
    /// `watch` (its watch, plan or access may have moved its projected
    /// head). Best effort: the feed's next world change looks again anyway.
    pub(super) async fn tell_feed(&self, record: Record, now_ms: u64) {
        let has_watch = record.capsule.get("watch").is_some();
        if !has_watch || Config::of(&self.env).watch_upstream.is_none() {
            return;
        }
        let call = AgentMoved { record, now_ms };
        if let Err(e) = feed_wire::agent_moved(&self.env, &call).await {
            crate::worker::log::event("feed_push_failed", &[("error", &e.to_string())]);
        }
    }

    /// Takes a watcher the Worker admitted: capped (`core::watch::admit`),
    /// accepted for hibernation and sent the current head at once (if there
    /// is one it may read). Under the lock, so a commit's head is sent
    /// either in this answer or by `publish`, never missed.
    pub(super) async fn watch(&self, call: WatchCall) -> worker::Result<Response> {
        let cfg = Config::of(&self.env);
        let agent = AgentId::parse(&call.agent_id).ok_or("watch: bad agent id")?;
        let _guard = self.lock.acquire().await;
        let pair = WebSocketPair::new()?;
        let tag = address_tag(&call.ip_bucket);
        let watching = self.state.get_websockets_with_tag(WATCH_TAG).len();
        let from_address = self.state.get_websockets_with_tag(&tag).len();
        if let Err(c) = watch::admit(watching, from_address) {
            // Accepted without hibernation only to be closed: a socket
            // accepted for hibernation and closed in the same request is
            // told so only when the object next sleeps.
            pair.server.accept()?;
            pair.server.close(Some(c.code()), Some(c.reason()))?;
            return Response::from_websocket(pair.client);
        }
        self.state
            .accept_websocket_with_tags(&pair.server, &[WATCH_TAG, &tag]);
        let state: AgentState = load(&self.state.storage(), STATE_KEY)
            .await?
            .unwrap_or_default();
        let record = state.record(&agent, &cfg.tiers, call.now_ms);
        let readable = record
            .as_ref()
            .filter(|r| may_read_head(r, call.reader.as_deref(), call.now_ms));
        if let Some(r) = readable {
            pair.server
                .send_with_str(serde_json::to_string(&r.head(call.now_ms, &cfg.tiers))?)?;
        }
        pair.server.serialize_attachment(&Watcher {
            reader: call.reader,
            seen: readable.is_some(),
        })?;
        Response::from_websocket(pair.client)
    }

    /// Holds a long-poll: answered at once if this object holds a head the
    /// client does not (KV can lag a commit), otherwise with the next head
    /// its reader may read, or at the deadline. Past the cap of held polls
    /// it is answered at once, as without `wait`.
    pub(super) async fn wait(&self, call: WaitCall) -> worker::Result<Waited> {
        let cfg = Config::of(&self.env);
        let agent = AgentId::parse(&call.agent_id).ok_or("wait: bad agent id")?;
        let timed_out = || match call.held {
            Some(_) => Waited::Unchanged,
            None => Waited::NotFound,
        };
        let (id, rx) = {
            let _guard = self.lock.acquire().await;
            let state: AgentState = load(&self.state.storage(), STATE_KEY)
                .await?
                .unwrap_or_default();
            if let Some(r) = state.record(&agent, &cfg.tiers, call.now_ms) {
                let etag = r.head_etag();
                let newer = call.held.as_deref() != Some(etag.as_str());
                let readable = may_read_head(&r, call.reader.as_deref(), call.now_ms);
                if newer && readable {
                    let head = serde_json::to_vec(&r.head(call.now_ms, &cfg.tiers))?;
                    return Ok(Waited::Head(head, etag));
                }
                // Access ended between the Worker's read and this call.
                if !readable && call.held.is_some() {
                    return Ok(Waited::NotFound);
                }
            }
            if self.waiters.borrow().len() >= watch::HELD_POLLS_PER_AGENT {
                return Ok(timed_out());
            }
            let (tx, rx) = oneshot::channel();
            let id = self.next_waiter.get();
            self.next_waiter.set(id + 1);
            self.waiters.borrow_mut().push(Waiter {
                id,
                reader: call.reader.clone(),
                held: call.held.clone(),
                tx,
            });
            (id, rx)
        };
        let deadline = Delay::from(Duration::from_millis(call.wait_ms));
        match select(rx, deadline).await {
            Either::Left((Ok(answer), _)) => Ok(answer),
            _ => {
                self.waiters.borrow_mut().retain(|w| w.id != id);
                Ok(timed_out())
            }
        }
    }
}
