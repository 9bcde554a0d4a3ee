//! One Durable Object per agent id: the only writer of that agent's state.
//!
//! It owns seq, the quota window, the cooldown counter and the published
//! record, and decides each write under a single-flight lock, so concurrent
//! PUTs are totally ordered: two can never both pass the seq check, the
//! capsule can never roll back, quota can never be over-spent. Each accepted
//! write also appends one sealed entry to the agent's history chain, in the
//! same atomic storage operation as the state. After a commit it mirrors the
//! record, the history index and the new entry into KV (where reads come
//! from; order and retries in `core::mirror`); if any of that fails, an
//! alarm (armed in the commit itself) keeps retrying until KV matches.
//!
//! It also holds the agent's watchers (hibernatable WebSockets: an idle
//! watcher costs nothing while the object sleeps) and its held long-polls,
//! and sends each the new head once the record of a commit is in KV
//! (`core::watch` decides caps and closes).
//!
//! A write's cost is mostly round trips, so the accepted path makes as few
//! as durability allows: one storage read (state, index, pending mirror),
//! one atomic storage write (with the alarm), two KV round trips, and one
//! storage write to clear or keep the mirror and disarm or re-arm the alarm.
//!
//! | concern | file |
//! |---|---|
//! | dispatch, storage keys, the object itself | this file |
//! | a write: decide, commit (state, chain, mirror ops, alarm in one storage write) | [`writes`] |
//! | a key event (and the write it carries): decide, commit, mirror | [`key_events`] |
//! | KV mirror: land what was committed, stage by stage; then tell watchers | [`mirror`] |
//! | push on change: watchers (hibernatable WebSockets) and held long-polls | [`push`] |
//! | the USDC upgrade: quotes and claims | [`upgrade`] |
//! | the x402 purchase: offers, settlements, the alarm that finishes them | [`x402`] |
//! | the export bundle, per reader | [`export`] |
//! | counts for the deployment's totals, sent to the agent's stats shard | [`stats`] |

mod export;
mod key_events;
mod mirror;
mod push;
mod stats;
mod upgrade;
mod writes;
mod x402;

use self::push::{Waiter, WATCH_TAG};
use super::sockets;

use crate::core::watch;
use crate::worker::config::Config;
use crate::worker::do_wire::{self, AgentCall};
use crate::worker::failure::settle;
use crate::worker::http::Audience;
use crate::worker::lock::Lock;
use crate::worker::log;
use crate::worker::storage::arm_by;
use std::cell::{Cell, RefCell};
// The `#[durable_object]` expansion names `wasm_bindgen` unqualified.
use worker::wasm_bindgen;
use worker::{
    durable_object, DurableObject, Env, Request, Response, State, WebSocket,
    WebSocketIncomingMessage, WebSocketRequestResponsePair,
};

/// Storage keys. State, mirror target, history index and the new entry are
/// written in one atomic operation (with the pruned entries' deletion), so
/// they can never disagree.
const STATE_KEY: &str = "state";
const MIRROR_KEY: &str = "mirror";
const HISTORY_KEY: &str = "history";
/// One key per retained history entry: `h:` + zero-padded sequence, so a
/// prefix list returns them oldest first.
const ENTRY_PREFIX: &str = "h:";
/// The agent's upgrade invoices (`core::upgrade::invoice::InvoiceBook`).
const INVOICES_KEY: &str = "invoices";
/// The agent's x402 invoices (`core::upgrade::x402::invoice::X402Book`).
const X402_KEY: &str = "x402";
/// The agent's key log (`core::key_log::KeyLog::stored_text`), when it has
/// one (`AgentState::keys` says so, so other agents never read it).
const KEY_LOG_KEY: &str = "keys";

/// When the alarm's x402 part failed (storage, a provider): look again.
const X402_ALARM_RETRY_MS: u64 = 30_000;

fn entry_key(sequence: u64) -> String {
    format!("{ENTRY_PREFIX}{sequence:016}")
}

/// What a write read from storage besides the state, parsed only once the
/// write is accepted.
struct Stored {
    /// The history index text.
    history: Option<String>,
    /// The pending mirror text.
    mirror: Option<String>,
}

#[durable_object]
pub struct AgentDO {
    state: State,
    env: Env,
    lock: Lock,
    /// Held long-polls (in memory: a held request keeps the object awake).
    waiters: RefCell<Vec<Waiter>>,
    next_waiter: Cell<u64>,
}

impl DurableObject for AgentDO {
    fn new(state: State, env: Env) -> Self {
        // Watchers' pings are answered by the runtime, even while the object
        // hibernates, and never wake it.
        if let Ok(pair) = WebSocketRequestResponsePair::new(watch::PING, watch::PONG) {
            state.set_websocket_auto_response(&pair);
        }
        // Tests only: shows an object woken from hibernation with its
        // watchers still attached.
        if Config::of(&env).test_clock {
            let watchers = state.get_websockets_with_tag(WATCH_TAG).len().to_string();
            log::event("agent_object_started", &[("watchers", &watchers)]);
        }
        Self {
            state,
            env,
            lock: Lock::default(),
            waiters: RefCell::new(Vec::new()),
            next_waiter: Cell::new(0),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        match AgentCall::read(req).await? {
            Some(AgentCall::Write(call)) => settle(self.write(call).await, Audience::Write),
            Some(AgentCall::KeyEvent(call)) => settle(self.key_event(call).await, Audience::Write),
            Some(AgentCall::Export(call)) => Ok(AgentCall::export_answer(self.export(call).await?)),
            Some(AgentCall::Quote(call)) => settle(self.quote(call).await, Audience::Read),
            Some(AgentCall::Claim(call)) => settle(self.claim(call).await, Audience::Read),
            Some(AgentCall::X402(call)) => settle(self.x402(call).await, Audience::Read),
            Some(AgentCall::Watch(call)) => self.watch(call).await,
            Some(AgentCall::Wait(call)) => Ok(self.wait(call).await?.answer()),
            None => Ok(do_wire::not_a_call()),
        }
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let _guard = self.lock.acquire().await;
        let now = crate::worker::clock::system_now_ms();
        // An x402 settlement first (it may credit, which mirrors), then
        // the mirror's retry, which keeps the alarm for the next look.
        let next = match self.x402_alarm(now).await {
            Ok(next) => next,
            Err(e) => {
                log::event("x402_alarm_error", &[("error", &format!("{e:?}"))]);
                let retry = std::time::Duration::from_millis(X402_ALARM_RETRY_MS);
                self.state.storage().set_alarm(retry).await?;
                Some(now + X402_ALARM_RETRY_MS)
            }
        };
        let stats = match self.stats_alarm(now).await {
            Ok(at) => at,
            Err(e) => {
                log::event("stats_alarm_error", &[("error", &format!("{e:?}"))]);
                Some(now + crate::core::operator::stats::FLUSH_EVERY_MS)
            }
        };
        let next = match (next, stats) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(at) = stats {
            // The mirror below leaves the alarm alone when nothing is
            // pending: arm it here (no later than it already is).
            let within = std::time::Duration::from_millis(at.saturating_sub(now).max(1));
            arm_by(&self.state.storage(), within).await?;
        }
        self.mirror_then_publish(None, now, next).await?;
        Response::empty()
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
        // The runtime has closed the socket already (e.g. 1009 past 32 MiB).
        Ok(())
    }
}
