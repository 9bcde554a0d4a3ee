//! One Durable Object per client address bucket: counts distinct new agent
//! ids whose first capsule was accepted in the rolling 24-hour window.
//!
//! Reservations are idempotent per agent id (see `core::quota::IpWindow`), so
//! an agent DO that retries after a failure never spends two slots. Only agent
//! DOs call this object; it is not reachable from outside the Worker.

use super::lock::Lock;
use crate::core::quota::IpWindow;
use serde::{Deserialize, Serialize};
// The `#[durable_object]` expansion names `wasm_bindgen` unqualified.
use worker::wasm_bindgen;
use worker::{
    durable_object, DurableObject, Env, Method, Request, Response, ResponseBuilder, State,
};

pub const RESERVE_URL: &str = "https://ip-quota.do/reserve";
const WINDOW_KEY: &str = "window";

#[derive(Serialize, Deserialize)]
pub struct ReserveRequest {
    pub agent_id: String,
    pub now_ms: u64,
    pub limit: u32,
}

#[derive(Serialize, Deserialize)]
pub struct ReserveAnswer {
    /// `None`: granted. `Some(t)`: refused until `t` (Unix ms).
    pub reset_at_ms: Option<u64>,
}

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

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let url = req.url()?;
        if req.method() != Method::Post || url.path() != "/reserve" {
            return Ok(ResponseBuilder::new().with_status(404).empty());
        }
        let ask: ReserveRequest = req.json().await?;
        // Only storage awaits happen below, which already hold the input gate;
        // the lock keeps that true if this ever grows an outside call.
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        let mut window: IpWindow = match storage.get::<String>(WINDOW_KEY).await? {
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| worker::Error::RustError(format!("stored window unreadable: {e}")))?,
            None => IpWindow::default(),
        };
        let before = window.clone();
        let result = window.reserve(&ask.agent_id, ask.now_ms, ask.limit);
        if window != before {
            let text = serde_json::to_string(&window)
                .map_err(|e| worker::Error::RustError(e.to_string()))?;
            storage.put(WINDOW_KEY, text).await?;
        }
        let answer = ReserveAnswer {
            reset_at_ms: result.err(),
        };
        let body =
            serde_json::to_vec(&answer).map_err(|e| worker::Error::RustError(e.to_string()))?;
        Ok(ResponseBuilder::new().with_status(200).fixed(body))
    }
}
