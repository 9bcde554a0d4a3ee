//! One Durable Object per agent id: the only writer of that agent's state.
//!
//! It owns seq, the quota window, the cooldown counter and the published
//! record, and decides each write under a single-flight lock, so concurrent
//! PUTs are totally ordered: two can never both pass the seq check, the
//! capsule can never roll back, quota can never be over-spent. After a commit
//! it mirrors the record into KV (where all reads come from); if that put
//! fails, an alarm keeps retrying until KV holds exactly the committed bytes.

use super::clock;
use super::config::{Config, IP_QUOTA_DO_BINDING, KV_BINDING};
use super::http::{self, NO_STORE};
use super::lock::Lock;
use super::log;
use super::write::{rejection_response, INTERNAL_IP_HEADER};
use crate::core::crypto::AgentId;
use crate::core::record::kv_key;
use crate::core::write::{self, AgentState, DecisionLog, Rejection};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use worker::js_sys::{Object, Reflect};
// The `#[durable_object]` expansion names `wasm_bindgen` unqualified.
use super::ip_quota_do::{ReserveAnswer, ReserveRequest, RESERVE_URL};
use worker::wasm_bindgen;
use worker::{
    durable_object, DurableObject, Env, Method, Request, RequestInit, Response, ResponseBuilder,
    State, Storage,
};

/// Internal header naming the agent (a DO does not reliably know its own name).
pub const INTERNAL_AGENT_HEADER: &str = "x-selfcap-agent";
/// Test-only fault injection: make this write's KV mirror fail once, so the
/// alarm path is exercised. Forwarded only when the test clock is enabled.
pub const INTERNAL_FAIL_MIRROR_HEADER: &str = "x-selfcap-fail-mirror";

/// Storage keys. State and the mirror target are written in one `put`, so they
/// can never disagree.
const STATE_KEY: &str = "state";
const MIRROR_KEY: &str = "mirror";

/// First retry delay for a failed KV mirror; doubles per failure up to the cap.
const MIRROR_RETRY_BASE_MS: u64 = 1_000;
const MIRROR_RETRY_CAP_MS: u64 = 5 * 60 * 1_000;

/// What KV must hold: the key and the exact JSON text.
#[derive(Serialize, Deserialize)]
struct Mirror {
    key: String,
    value: String,
    /// Consecutive failed attempts, for the retry backoff.
    #[serde(default)]
    failures: u32,
}

#[durable_object]
pub struct AgentDO {
    state: State,
    env: Env,
    lock: Lock,
}

impl DurableObject for AgentDO {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            lock: Lock::default(),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        let url = req.url()?;
        match (req.method(), url.path()) {
            (Method::Post, "/write") => self.write(req).await,
            _ => Ok(ResponseBuilder::new().with_status(404).empty()),
        }
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let _guard = self.lock.acquire().await;
        self.sync_mirror(false).await?;
        Ok(ResponseBuilder::new().with_status(204).empty())
    }
}

impl AgentDO {
    async fn write(&self, mut req: Request) -> worker::Result<Response> {
        let now_ms = clock::internal_now_ms(&req);
        let header = |name: &str| req.headers().get(name).ok().flatten();
        let agent = header(INTERNAL_AGENT_HEADER)
            .and_then(|a| AgentId::parse(&a))
            .ok_or_else(|| worker::Error::RustError("agent DO: missing agent header".into()))?;
        let ip = header(INTERNAL_IP_HEADER).unwrap_or_else(|| "unknown".into());
        let fail_mirror = header(INTERNAL_FAIL_MIRROR_HEADER).is_some();
        let cfg = Config::from_env(&self.env);
        // Already capped at MAX_BODY_BYTES by the Worker.
        let body = req.bytes().await?;

        // Everything from loading state to the KV mirror runs under the lock:
        // the IP-quota call and the KV put are awaits on other objects, during
        // which the runtime would otherwise deliver the next write to us.
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        let mut state: AgentState = load(&storage, STATE_KEY).await?.unwrap_or_default();

        let candidate = match write::check(&state, &body, &agent, now_ms, &cfg.tiers) {
            Ok(c) => c,
            Err(rej) => {
                return self
                    .reject(&storage, state, &agent, rej, body.len(), now_ms)
                    .await
            }
        };
        if candidate.is_new_agent() {
            let limit = cfg.tiers.get(state.tier).new_agents_per_ip_24h;
            if let Err(reset_at_ms) = reserve_ip_slot(&self.env, &ip, &agent, now_ms, limit).await?
            {
                let rej = Rejection::new_agent_ip_quota(&candidate, now_ms, reset_at_ms);
                return self
                    .reject(&storage, state, &agent, rej, body.len(), now_ms)
                    .await;
            }
        }

        let log_line = DecisionLog::accepted(agent.as_str(), &candidate).to_line();
        let (record, accepted) = state.commit(candidate, now_ms, &cfg.tiers);
        let mirror = Mirror {
            key: kv_key(&agent),
            value: serde_json::to_string(&record).map_err(to_worker_err)?,
            failures: 0,
        };
        save_pair(&storage, &state, &mirror).await?;
        // The write is committed: from here on nothing may turn it into an
        // error for the client (a retry would only earn a replay_seq).
        // The retry alarm is armed before the first attempt, so even a crash
        // between the commit and the KV put still converges.
        let armed = storage
            .set_alarm(Duration::from_millis(MIRROR_RETRY_BASE_MS))
            .await;
        let synced = if fail_mirror {
            Ok(())
        } else {
            self.sync_mirror(true).await
        };
        for e in [armed.err(), synced.err()].into_iter().flatten() {
            log::event(
                "kv_mirror_error",
                &[("agent_id", agent.as_str()), ("error", &e.to_string())],
            );
        }
        log::line_str(&log_line);
        http::json(200, &accepted, NO_STORE)
    }

    /// Persists what a rejection changes (only the cooldown counter, and only
    /// for authenticated requests), logs it and answers it. Capsule, cursor,
    /// seq and quota are untouched: that is the hard-reject invariant.
    async fn reject(
        &self,
        storage: &Storage,
        mut state: AgentState,
        agent: &AgentId,
        rej: Rejection,
        bytes: usize,
        now_ms: u64,
    ) -> worker::Result<Response> {
        if state.note_rejection(&rej, now_ms) {
            save(storage, STATE_KEY, &state).await?;
        }
        log::line_str(&DecisionLog::rejected(agent.as_str(), &rej, bytes).to_line());
        rejection_response(&rej)
    }

    /// Makes KV hold the committed record. `fresh`: just committed, so skip the
    /// comparison read. On failure, re-arms the alarm with backoff.
    async fn sync_mirror(&self, fresh: bool) -> worker::Result<()> {
        let storage = self.state.storage();
        let Some(mut mirror) = load::<Mirror>(&storage, MIRROR_KEY).await? else {
            return Ok(());
        };
        let kv = self.env.kv(KV_BINDING)?;
        let matches = !fresh
            && matches!(kv.get(&mirror.key).text().await, Ok(Some(ref v)) if *v == mirror.value);
        let ok = matches
            || match kv.put(&mirror.key, mirror.value.as_str()) {
                Ok(put) => put.execute().await.is_ok(),
                Err(_) => false,
            };
        if ok {
            if mirror.failures != 0 {
                mirror.failures = 0;
                save(&storage, MIRROR_KEY, &mirror).await?;
            }
            storage.delete_alarm().await?;
        } else {
            mirror.failures = mirror.failures.saturating_add(1);
            let delay = MIRROR_RETRY_BASE_MS
                .saturating_mul(1u64 << mirror.failures.min(16))
                .min(MIRROR_RETRY_CAP_MS);
            log::event(
                "kv_mirror_failed",
                &[
                    ("key", mirror.key.as_str()),
                    ("failures", &mirror.failures.to_string()),
                ],
            );
            save(&storage, MIRROR_KEY, &mirror).await?;
            storage.set_alarm(Duration::from_millis(delay)).await?;
        }
        Ok(())
    }
}

/// Values are stored as JSON text rather than structured-clone objects: the
/// format is then exactly serde's, independent of how JS numbers round-trip.
async fn load<T: for<'de> Deserialize<'de>>(
    storage: &Storage,
    key: &str,
) -> worker::Result<Option<T>> {
    match storage.get::<String>(key).await? {
        None => Ok(None),
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| worker::Error::RustError(format!("stored {key} unreadable: {e}"))),
    }
}

async fn save<T: Serialize>(storage: &Storage, key: &str, value: &T) -> worker::Result<()> {
    let text = serde_json::to_string(value).map_err(to_worker_err)?;
    storage.put(key, text).await
}

/// Writes state and mirror target in one atomic `put`.
async fn save_pair(storage: &Storage, state: &AgentState, mirror: &Mirror) -> worker::Result<()> {
    let state =
        serde_json::to_string(state).map_err(|e| worker::Error::RustError(e.to_string()))?;
    let mirror =
        serde_json::to_string(mirror).map_err(|e| worker::Error::RustError(e.to_string()))?;
    // A plain JS object: `put_multiple` would serialise a map as a JS `Map`.
    let obj = Object::new();
    Reflect::set(&obj, &STATE_KEY.into(), &state.into())?;
    Reflect::set(&obj, &MIRROR_KEY.into(), &mirror.into())?;
    storage.put_multiple_raw(obj).await
}

fn to_worker_err(e: serde_json::Error) -> worker::Error {
    worker::Error::RustError(e.to_string())
}

/// Asks the client address's quota object for a new-agent slot.
/// `Ok(Err(reset_at_ms))` means the address is out of slots until then.
async fn reserve_ip_slot(
    env: &Env,
    ip: &str,
    agent: &AgentId,
    now_ms: u64,
    limit: u32,
) -> worker::Result<Result<(), u64>> {
    let req = ReserveRequest {
        agent_id: agent.as_str().to_owned(),
        now_ms,
        limit,
    };
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(
        serde_json::to_string(&req).map_err(to_worker_err)?.into(),
    ));
    let stub = env
        .durable_object(IP_QUOTA_DO_BINDING)?
        .id_from_name(ip)?
        .get_stub()?;
    let mut resp = stub
        .fetch_with_request(Request::new_with_init(RESERVE_URL, &init)?)
        .await?;
    if resp.status_code() != 200 {
        return Err(worker::Error::RustError(format!(
            "ip quota DO answered {}",
            resp.status_code()
        )));
    }
    let answer: ReserveAnswer = resp.json().await?;
    Ok(match answer.reset_at_ms {
        None => Ok(()),
        Some(reset) => Err(reset),
    })
}
