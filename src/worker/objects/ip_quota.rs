//! One Durable Object per client address bucket: counts distinct new agent
//! ids whose first capsule was accepted in the rolling 24-hour window, and
//! upgrade quotes asked for in it (so quoting cannot fill storage).
//!
//! Reservations are idempotent per agent id (see `core::quota::IpWindow`), so
//! an agent object that retries after a failure never spends two slots. Only
//! agent objects call this one (`do_wire::Reserve`); it is not reachable from
//! outside the Worker.

use crate::core::quota::{IpWindow, Window};
use crate::worker::do_wire::{self, IpCall, Reserve, Slot};
use crate::worker::lock::Lock;
use crate::worker::storage::{load, save};
// The `#[durable_object]` expansion names `wasm_bindgen` unqualified.
use worker::wasm_bindgen;
use worker::{durable_object, DurableObject, Env, Request, Response, State};

const WINDOW_KEY: &str = "window";
/// Upgrade quotes from this address in the rolling 24 hours.
const QUOTES_KEY: &str = "quotes";

#[durable_object(fetch)]
pub struct IpQuotaDO {
    state: State,
    lock: Lock,
}

impl DurableObject for IpQuotaDO {
    fn new(state: State, _env: Env) -> Self {
        Self {
            state,
            lock: Lock::default(),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        let Some(call) = IpCall::read(req).await? else {
            return Ok(do_wire::not_a_call());
        };
        // Only storage awaits happen below, which already hold the input gate;
        // the lock keeps that true if this ever grows an outside call.
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        match call {
            IpCall::Reserve(ask) => {
                let mut window: IpWindow = load(&storage, WINDOW_KEY).await?.unwrap_or_default();
                let before = window.clone();
                let result = window.reserve(&ask.agent_id, ask.now_ms, ask.limit);
                if window != before {
                    save(&storage, WINDOW_KEY, &window).await?;
                }
                Reserve::answer(result.map_or_else(Slot::FullUntil, |()| Slot::Granted))
            }
            IpCall::Quote(slot) => {
                let mut quotes: Window = load(&storage, QUOTES_KEY).await?.unwrap_or_default();
                let usage = quotes.usage(slot.now_ms, slot.limit);
                if usage.exhausted() {
                    let reset = usage.reset_at_ms.unwrap_or(slot.now_ms);
                    return Reserve::answer(Slot::FullUntil(reset));
                }
                quotes.record(slot.now_ms);
                save(&storage, QUOTES_KEY, &quotes).await?;
                Reserve::answer(Slot::Granted)
            }
        }
    }
}
