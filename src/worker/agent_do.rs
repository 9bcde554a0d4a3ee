//! One Durable Object per agent id: the only writer of that agent's state.
//!
//! It owns seq, the quota window, the cooldown counter and the published
//! record, and decides each write under a single-flight lock, so concurrent
//! PUTs are totally ordered: two can never both pass the seq check, the
//! capsule can never roll back, quota can never be over-spent. Each accepted
//! write also appends one sealed entry to the agent's history chain, in the
//! same atomic storage operation as the state. After a commit it mirrors the
//! record, the history index and the new entry into KV (where reads come
//! from) and deletes pruned entries there; if any of that fails, an alarm
//! keeps retrying until KV matches.

use super::clock;
use super::config::{self, Config, IP_QUOTA_DO_BINDING, KV_BINDING, SERVICE_KEY_SECRET};
use super::http::{self, Audience, NO_STORE};
use super::lock::Lock;
use super::log;
use super::write::{rejection_response, INTERNAL_IP_HEADER};
use crate::core::crypto::AgentId;
use crate::core::history::export::{ExportBundle, ExportEntry};
use crate::core::history::HistoryIndex;
use crate::core::record::{entry_kv_key, history_kv_key, kv_key};
use crate::core::write::{self, AgentState, DecisionLog, Rejection};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use worker::js_sys::{Object, Reflect};
use worker::wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::JsFuture;
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

/// Storage keys. State, mirror target, history index and the new entry are
/// written in one atomic operation (with the pruned entries' deletion), so
/// they can never disagree.
const STATE_KEY: &str = "state";
const MIRROR_KEY: &str = "mirror";
const HISTORY_KEY: &str = "history";
/// One key per retained history entry: `h:` + zero-padded sequence, so a
/// prefix list returns them oldest first.
const ENTRY_PREFIX: &str = "h:";

fn entry_key(sequence: u64) -> String {
    format!("{ENTRY_PREFIX}{sequence:016}")
}

/// First retry delay for a failed KV mirror; doubles per failure up to the cap.
const MIRROR_RETRY_BASE_MS: u64 = 1_000;
const MIRROR_RETRY_CAP_MS: u64 = 5 * 60 * 1_000;

/// What KV must still be made to hold: puts (exact JSON text) and deletes,
/// in order. Ops of a later commit supersede pending ops on the same key, so
/// nothing a failed sync left behind is lost and nothing stale is replayed.
#[derive(Default, Serialize, Deserialize)]
struct Mirror {
    #[serde(default)]
    ops: Vec<MirrorOp>,
    /// The pre-history form (one put), still read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    /// Consecutive failed attempts, for the retry backoff.
    #[serde(default)]
    failures: u32,
}

#[derive(Clone, Serialize, Deserialize)]
struct MirrorOp {
    key: String,
    /// `None`: delete the key.
    value: Option<String>,
}

impl Mirror {
    fn normalized(mut self) -> Mirror {
        if let (Some(key), Some(value)) = (self.key.take(), self.value.take()) {
            self.ops.insert(
                0,
                MirrorOp {
                    key,
                    value: Some(value),
                },
            );
        }
        self
    }
    fn push(&mut self, key: String, value: Option<String>) {
        self.ops.retain(|o| o.key != key);
        self.ops.push(MirrorOp { key, value });
    }
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
            (Method::Get, "/export") => self.export().await,
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
        // Sealing needs the service key; without it, refuse rather than
        // seal with a made-up one (checked before a new agent's IP slot is
        // taken, so nothing is spent).
        let keys = config::service_keys(&self.env);
        let Some(signer) = keys.signing.as_ref() else {
            log::event(
                "config_error",
                &[
                    ("missing", SERVICE_KEY_SECRET),
                    ("agent_id", agent.as_str()),
                    ("effect", "write refused"),
                ],
            );
            return Ok(http::unavailable_because(
                Audience::Write,
                Some("the service signing key is not configured; writes are refused until it is"),
            ));
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
        let history: Option<HistoryIndex> = load(&storage, HISTORY_KEY).await?;
        let sealed = state
            .commit_sealed(
                candidate,
                now_ms,
                &cfg.tiers,
                signer,
                &keys.keyring,
                history,
            )
            .map_err(|e| worker::Error::RustError(e.to_string()))?;
        let sequence = sealed.history.head.length - 1;
        let entry_text = sealed.entry.stored_text();
        let index_text = serde_json::to_string(&sealed.history).map_err(to_worker_err)?;
        let record_text = serde_json::to_string(&sealed.record).map_err(to_worker_err)?;
        let state_text = serde_json::to_string(&state).map_err(to_worker_err)?;

        // KV: the entry first, then the index that names it, then the record;
        // pruned entries last (a reader never finds an index naming an entry
        // that is not there yet).
        let mut mirror = load::<Mirror>(&storage, MIRROR_KEY)
            .await?
            .unwrap_or_default()
            .normalized();
        mirror.failures = 0;
        mirror.push(entry_kv_key(&agent, sequence), Some(entry_text.clone()));
        mirror.push(history_kv_key(&agent), Some(index_text.clone()));
        mirror.push(kv_key(&agent), Some(record_text));
        for p in &sealed.pruned {
            mirror.push(entry_kv_key(&agent, *p), None);
        }
        let mirror_text = serde_json::to_string(&mirror).map_err(to_worker_err)?;
        commit_atomic(
            &storage,
            &[
                (STATE_KEY.to_owned(), state_text),
                (MIRROR_KEY.to_owned(), mirror_text),
                (HISTORY_KEY.to_owned(), index_text),
                (entry_key(sequence), entry_text),
            ],
            sealed.pruned.iter().map(|p| entry_key(*p)).collect(),
        )
        .await?;
        let accepted = sealed.body;
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

    /// `GET /export` (internal): the export bundle, built from this object's
    /// own storage (the one history read that wakes the object: it is rare,
    /// and for the larger tiers too big to assemble from KV within a
    /// Worker's CPU budget). 404 before the first entry.
    async fn export(&self) -> worker::Result<Response> {
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        let Some(index) = load::<HistoryIndex>(&storage, HISTORY_KEY).await? else {
            return Ok(ResponseBuilder::new().with_status(404).empty());
        };
        let keys = config::service_keys(&self.env);
        let opts = worker::ListOptions::new().prefix(ENTRY_PREFIX);
        let listed = storage.list_with_options(opts).await?;
        let mut entries = Vec::with_capacity(index.items.len());
        for value in listed.values() {
            let text = value?
                .as_string()
                .ok_or_else(|| worker::Error::RustError("stored entry is not text".into()))?;
            entries.push(ExportEntry::from_stored(&text).ok_or_else(|| {
                worker::Error::RustError("stored entry has no seal suffix".into())
            })?);
        }
        if entries.len() != index.items.len() {
            return Err(worker::Error::RustError(format!(
                "history index lists {} entries, storage holds {}",
                index.items.len(),
                entries.len()
            )));
        }
        let bundle = ExportBundle::from_parts(&index, entries, &keys.keyring);
        let resp = http::json(200, &bundle, http::READ_CACHE_CONTROL)?;
        http::set(
            resp.headers(),
            "ETag",
            &format!("\"{}\"", index.head.head_hash),
        );
        Ok(resp)
    }

    /// Makes KV hold what was committed, op by op in order, stopping at the
    /// first failure. `fresh`: just committed, so skip comparison reads. On
    /// failure, keeps what is left and re-arms the alarm with backoff.
    async fn sync_mirror(&self, fresh: bool) -> worker::Result<()> {
        let storage = self.state.storage();
        let Some(mirror) = load::<Mirror>(&storage, MIRROR_KEY).await? else {
            return Ok(());
        };
        let mut mirror = mirror.normalized();
        let kv = self.env.kv(KV_BINDING)?;
        let mut done = 0;
        for op in &mirror.ops {
            let ok = match &op.value {
                Some(value) => {
                    let matches = !fresh
                        && matches!(kv.get(&op.key).text().await, Ok(Some(ref v)) if v == value);
                    matches
                        || match kv.put(&op.key, value.as_str()) {
                            Ok(put) => put.execute().await.is_ok(),
                            Err(_) => false,
                        }
                }
                None => kv.delete(&op.key).await.is_ok(),
            };
            if !ok {
                break;
            }
            done += 1;
        }
        if done == mirror.ops.len() {
            // All of it is in KV: nothing left to retry.
            storage.delete(MIRROR_KEY).await?;
            storage.delete_alarm().await?;
        } else {
            let failed_key = mirror.ops[done].key.clone();
            mirror.ops.drain(..done);
            mirror.failures = mirror.failures.saturating_add(1);
            let delay = MIRROR_RETRY_BASE_MS
                .saturating_mul(1u64 << mirror.failures.min(16))
                .min(MIRROR_RETRY_CAP_MS);
            log::event(
                "kv_mirror_failed",
                &[
                    ("key", failed_key.as_str()),
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

/// Writes `puts` and deletes `deletes` as one atomic unit. Both storage
/// calls are issued before either is awaited, and the runtime commits writes
/// issued with no `await` in between together (write coalescing): either all
/// of them land or none does.
async fn commit_atomic(
    storage: &Storage,
    puts: &[(String, String)],
    deletes: Vec<String>,
) -> worker::Result<()> {
    // A plain JS object: `put_multiple` would serialise a map as a JS `Map`.
    let obj = Object::new();
    for (k, v) in puts {
        Reflect::set(&obj, &k.as_str().into(), &v.as_str().into())?;
    }
    let raw = storage.as_raw();
    let put = raw.put_multiple(obj.into())?;
    let delete = if deletes.is_empty() {
        None
    } else {
        let keys: Vec<JsValue> = deletes.iter().map(|k| JsValue::from(k.as_str())).collect();
        Some(raw.delete_multiple(keys)?)
    };
    JsFuture::from(put).await?;
    if let Some(d) = delete {
        JsFuture::from(d).await?;
    }
    Ok(())
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
