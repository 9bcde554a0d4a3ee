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

use crate::core::access::{self, Decision};
use crate::core::crypto::AgentId;
use crate::core::history::export::ExportBundle;
use crate::core::history::{HistoryIndex, Viewer};
use crate::core::mirror::{Commit, Mirror, MirrorOp, Pass, CLEANUP_AFTER_MS, RETRY_BASE_MS};
use crate::core::model::ReadScope;
use crate::core::reason::ReasonCode;
use crate::core::record::Record;
use crate::core::time::secs_until;
use crate::core::upgrade::claim::Claim;
use crate::core::upgrade::invoice::{InvoiceBook, INVOICE_TTL_MS};
use crate::core::upgrade::outcome::{
    after_chain, before_chain, credit, expected, Before, PaymentRecord,
};
use crate::core::upgrade::quote::{new_invoice, QuoteBody, QuoteRequest};
use crate::core::upgrade::Refusal;
use crate::core::watch::{self, Answer, Incoming};
use crate::core::write::{self, AgentState, Candidate, DecisionLog, Rejection, Signature};
use crate::worker::config::{self, Config, ServiceKeys, SERVICE_KEY_SECRET};
use crate::worker::do_wire::{
    self, AgentCall, ClaimCall, ExportCall, Exported, PaymentBind, QuoteCall, Reserve, TagAsk,
    WaitCall, Waited, WatchCall, WriteCall,
};
use crate::worker::http::{self, Audience, NO_STORE};
use crate::worker::kv::Kv;
use crate::worker::lock::Lock;
use crate::worker::log;
use crate::worker::rpc;
use crate::worker::storage::{commit_atomic, load, parse, save, texts, texts_of, Alarm, Batch};
use futures_channel::oneshot;
use futures_util::future::{join_all, select, Either};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::time::Duration;
// The `#[durable_object]` expansion names `wasm_bindgen` unqualified.
use worker::wasm_bindgen;
use worker::{
    durable_object, Delay, DurableObject, Env, Request, Response, State, Storage, WebSocket,
    WebSocketIncomingMessage, WebSocketPair, WebSocketRequestResponsePair,
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

fn entry_key(sequence: u64) -> String {
    format!("{ENTRY_PREFIX}{sequence:016}")
}

/// Every watcher's socket carries this tag, and one of its address.
const WATCH_TAG: &str = "watch";

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
struct Waiter {
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

/// What a write read from storage besides the state, parsed only once the
/// write is accepted.
struct Stored {
    /// The history index text.
    history: Option<String>,
    /// The pending mirror text.
    mirror: Option<String>,
}

/// Makes KV hold one op; `false` if KV refused. On a retry, a put whose text
/// KV already holds is not repeated.
async fn land(kv: &Kv, op: &MirrorOp, pass: Pass) -> bool {
    match &op.value {
        Some(value) => {
            let already = pass == Pass::Retry
                && matches!(kv.text(&op.key).await, Ok(Some(ref v)) if v == value);
            already || kv.put(&op.key, value).await
        }
        None => kv.delete(&op.key).await,
    }
}

/// How a write ends before anything is committed.
enum Refused {
    /// A decided rejection: persisted (cooldown), logged, answered.
    Rejected(Rejection),
    /// The service cannot take writes (configuration): answered as is.
    Unavailable(Response),
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
            Some(AgentCall::Write(call)) => self.write(call).await,
            Some(AgentCall::Export(call)) => Ok(AgentCall::export_answer(self.export(call).await?)),
            Some(AgentCall::Quote(call)) => self.quote(call).await,
            Some(AgentCall::Claim(call)) => self.claim(call).await,
            Some(AgentCall::Watch(call)) => self.watch(call).await,
            Some(AgentCall::Wait(call)) => Ok(self.wait(call).await?.answer()),
            None => Ok(do_wire::not_a_call()),
        }
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let _guard = self.lock.acquire().await;
        if let Some(record) = self.sync_mirror(None).await? {
            self.publish(&record, crate::worker::clock::system_now_ms());
        }
        Response::empty()
    }

    async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> worker::Result<()> {
        let incoming = match &message {
            WebSocketIncomingMessage::String(t) => Incoming::Text(t),
            WebSocketIncomingMessage::Binary(b) => Incoming::Binary(b.len()),
        };
        match watch::answer(incoming) {
            Answer::Pong => ws.send_with_str(watch::PONG),
            Answer::Close(c) => ws.close(Some(c.code()), Some(c.reason())),
        }
    }

    async fn websocket_close(
        &self,
        ws: WebSocket,
        code: usize,
        _reason: String,
        _was_clean: bool,
    ) -> worker::Result<()> {
        // Hibernatable sockets are not answered by the runtime: complete the
        // closing handshake, or the client waits for it.
        let code = u16::try_from(code).ok().and_then(watch::echo);
        let _ = match code {
            Some(c) => ws.close(Some(c), Some("bye")),
            None => ws.close::<&str>(None, None),
        };
        Ok(())
    }

    async fn websocket_error(&self, _ws: WebSocket, _error: worker::Error) -> worker::Result<()> {
        // The runtime has closed the socket already (e.g. 1009 past 32 MiB).
        Ok(())
    }
}

impl AgentDO {
    /// Everything from loading state to the KV mirror runs under the lock:
    /// the IP-quota call and the KV put are awaits on other objects, during
    /// which the runtime would otherwise deliver the next write to us.
    async fn write(&self, call: WriteCall) -> worker::Result<Response> {
        let cfg = Config::of(&self.env);
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        let [state_text, history, mirror] =
            texts(&storage, [STATE_KEY, HISTORY_KEY, MIRROR_KEY]).await?;
        let mut state: AgentState = parse(STATE_KEY, state_text)?.unwrap_or_default();
        let keys = config::service_keys(&self.env);
        let candidate = match self.decide(&state, &call, &cfg, &keys).await? {
            Ok(c) => c,
            Err(Refused::Unavailable(resp)) => return Ok(resp),
            Err(Refused::Rejected(rej)) => {
                if state.note_rejection(&rej, call.now_ms) {
                    save(&storage, STATE_KEY, &state).await?;
                }
                let line = DecisionLog::rejected(call.agent.as_str(), &rej, call.body.len() as u64);
                log::line_str(&line.to_line());
                return http::rejection(&rej);
            }
        };
        let log_line = DecisionLog::accepted(call.agent.as_str(), &candidate).to_line();
        let stored = Stored { history, mirror };
        let (accepted, mirror) = self
            .commit(&storage, &mut state, candidate, &call, &cfg, &keys, stored)
            .await?;
        // The write is committed, with the retry alarm armed in the same
        // atomic write, so even a crash before the KV puts still converges.
        // From here on nothing may turn it into an error for the client (a
        // retry would only earn a replay_seq).
        if !call.fail_mirror {
            match self.sync_mirror(Some(mirror)).await {
                Ok(Some(record)) => self.publish(&record, call.now_ms),
                Ok(None) => {}
                Err(e) => log::event(
                    "kv_mirror_error",
                    &[("agent_id", call.agent.as_str()), ("error", &e.to_string())],
                ),
            }
        }
        log::line_str(&log_line);
        http::json(200, &accepted, NO_STORE)
    }

    /// Every check of a write, in the contract's order: the core's checks,
    /// then (for a configured service only) the new-agent slot of the
    /// client's address, which lives in another object.
    async fn decide(
        &self,
        state: &AgentState,
        call: &WriteCall,
        cfg: &Config,
        keys: &ServiceKeys,
    ) -> worker::Result<Result<Candidate, Refused>> {
        let candidate = match write::check(
            state,
            &call.body,
            &call.agent,
            call.now_ms,
            &cfg.tiers,
            Signature::Prechecked,
        ) {
            Ok(c) => c,
            Err(rej) => return Ok(Err(Refused::Rejected(rej))),
        };
        // Sealing needs the service key; without it, refuse rather than
        // seal with a made-up one (checked before a new agent's IP slot is
        // taken, so nothing is spent).
        if keys.signing.is_none() {
            log::event(
                "config_error",
                &[
                    ("missing", SERVICE_KEY_SECRET),
                    ("agent_id", call.agent.as_str()),
                    ("effect", "write refused"),
                ],
            );
            return Ok(Err(Refused::Unavailable(http::unavailable_because(
                Audience::Write,
                Some("the service signing key is not configured; writes are refused until it is"),
            ))));
        }
        if candidate.is_new_agent() {
            let ask = Reserve {
                agent_id: call.agent.as_str().to_owned(),
                now_ms: call.now_ms,
                limit: cfg
                    .tiers
                    .get(state.tier_at(call.now_ms))
                    .new_agents_per_ip_24h,
            };
            if let Err(reset_at_ms) = ask.send(&self.env, &call.ip_bucket).await? {
                let rej = Rejection::new_agent_ip_quota(&candidate, call.now_ms, reset_at_ms);
                return Ok(Err(Refused::Rejected(rej)));
            }
        }
        Ok(Ok(candidate))
    }

    /// Seals the accepted write into the chain and stores state, history
    /// index, the new entry, the pending KV mirror ops, the pruned entries'
    /// deletion and the mirror's retry alarm in one atomic operation.
    /// Returns the 200 body and the mirror ops to run now.
    #[allow(clippy::too_many_arguments)]
    async fn commit(
        &self,
        storage: &Storage,
        state: &mut AgentState,
        candidate: Candidate,
        call: &WriteCall,
        cfg: &Config,
        keys: &ServiceKeys,
        stored: Stored,
    ) -> worker::Result<(write::AcceptedBody, Mirror)> {
        let signer = keys.signing.as_ref().ok_or("checked in decide")?;
        let mut history: Option<HistoryIndex> = parse(HISTORY_KEY, stored.history)?;
        // Versions appended before the index recorded who may see them get
        // it recorded now, from their own entries (once per agent).
        if let Some(index) = history.as_mut() {
            let unrecorded = index.unrecorded();
            if !unrecorded.is_empty() {
                let keys: Vec<String> = unrecorded.iter().map(|s| entry_key(*s)).collect();
                let found = texts_of(storage, &keys).await?;
                let texts: Vec<(u64, String)> = unrecorded
                    .iter()
                    .zip(found)
                    .filter_map(|(s, t)| Some((*s, t?)))
                    .collect();
                index.record_unrecorded(&texts);
            }
        }
        let sealed = state
            .commit_sealed(
                candidate,
                call.now_ms,
                &cfg.tiers,
                signer,
                &keys.keyring,
                history,
            )
            .map_err(|e| e.to_string())?;
        let sequence = sealed.history.head.length - 1;
        let entry = sealed.entry.stored_text();
        let index = serde_json::to_string(&sealed.history)?;
        let record = serde_json::to_string(&sealed.record)?;
        let mut mirror: Mirror = parse(MIRROR_KEY, stored.mirror)?.unwrap_or_default();
        mirror.push_commit(&Commit {
            agent: &call.agent,
            sequence,
            entry: &entry,
            index: &index,
            record: &record,
            pruned: &sealed.pruned,
        });
        let pruned: Vec<String> = sealed.pruned.iter().map(|p| entry_key(*p)).collect();
        let puts = [
            (STATE_KEY.to_owned(), serde_json::to_string(&state)?),
            (MIRROR_KEY.to_owned(), serde_json::to_string(&mirror)?),
            (HISTORY_KEY.to_owned(), index),
            (entry_key(sequence), entry),
        ];
        commit_atomic(
            storage,
            &Batch {
                puts: &puts,
                deletes: &pruned,
                alarm: Alarm::In(Duration::from_millis(RETRY_BASE_MS)),
            },
        )
        .await?;
        Ok((sealed.body, mirror))
    }

    /// The export bundle, built from this object's own storage (the one
    /// history read that wakes the object: it is rare, and for the larger
    /// tiers too big to assemble from KV within a Worker's CPU budget), as
    /// the call's reader may have it: each version it may not see withheld.
    /// `None` before the first entry.
    async fn export(&self, call: ExportCall) -> worker::Result<Option<Exported>> {
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        let Some(index) = load::<HistoryIndex>(&storage, HISTORY_KEY).await? else {
            return Ok(None);
        };
        let viewer = Viewer {
            owner: &index.agent_id,
            reader: call.reader.as_deref(),
            now_ms: call.now_ms,
        };
        // The bundle's head describes the newest version: a reader who may
        // not see it gets what an agent with no history answers (the Worker
        // admitted it by a record KV may not have updated yet).
        if index.newest_hidden_from(&viewer) {
            return Ok(None);
        }
        let keys = config::service_keys(&self.env);
        let opts = worker::ListOptions::new().prefix(ENTRY_PREFIX);
        let listed = storage.list_with_options(opts).await?;
        let mut stored = Vec::with_capacity(index.items.len());
        for value in listed.values() {
            stored.push(value?.as_string().ok_or("stored entry is not text")?);
        }
        let bundle =
            ExportBundle::for_viewer(&index, &stored, &keys.keyring, &viewer).ok_or_else(|| {
                format!(
                    "history index lists {} entries, storage holds {} (or one has no seal)",
                    index.items.len(),
                    stored.len()
                )
            })?;
        Ok(Some(Exported {
            body: serde_json::to_vec(&bundle)?,
            etag: index.head.head_hash.clone(),
        }))
    }

    /// Makes KV hold what was committed, stage by stage (`core::mirror`),
    /// stopping after the first stage with a failure. `mirror`: the ops just
    /// committed (a [`Pass::Commit`], which skips comparison reads and
    /// leaves this write's deletes for the next one), or `None` for the
    /// alarm's [`Pass::Retry`] of everything pending. On failure, keeps what
    /// did not land and re-arms the alarm with backoff. Returns the record
    /// that landed, if one did (what watchers are sent).
    async fn sync_mirror(&self, mirror: Option<Mirror>) -> worker::Result<Option<Record>> {
        let storage = self.state.storage();
        let (mirror, pass) = match mirror {
            Some(m) => (Some(m), Pass::Commit),
            None => (load::<Mirror>(&storage, MIRROR_KEY).await?, Pass::Retry),
        };
        let Some(mut mirror) = mirror else {
            return Ok(None);
        };
        let kv = Kv::of(&self.env)?;
        let mut landed = vec![false; mirror.ops.len()];
        let mut failed = None;
        for stage in mirror.stages(pass) {
            let ops = stage.iter().map(|&i| land(&kv, &mirror.ops[i], pass));
            let results = join_all(ops).await;
            for (&i, ok) in stage.iter().zip(results) {
                landed[i] = ok;
                if !ok && failed.is_none() {
                    failed = Some(i);
                }
            }
            if failed.is_some() {
                break;
            }
        }
        let failed_key = failed.map(|i| mirror.ops[i].key.clone());
        let record = mirror
            .ops
            .iter()
            .zip(&landed)
            .find_map(|(op, landed)| op.record_put().filter(|_| *landed))
            .map(serde_json::from_str::<Record>)
            .transpose()?;
        mirror.drop_landed(&landed);
        let (puts, alarm) = match failed_key {
            None => {
                // Every index put landed: what is left are deletes of
                // entries no index names, for the next write (or, after a
                // day without one, the alarm).
                mirror.heads_landed();
                if mirror.ops.is_empty() {
                    (vec![], Alarm::Delete)
                } else {
                    let keep = (MIRROR_KEY.to_owned(), serde_json::to_string(&mirror)?);
                    let cleanup = Duration::from_millis(CLEANUP_AFTER_MS);
                    (vec![keep], Alarm::In(cleanup))
                }
            }
            Some(key) => {
                let delay = mirror.failed();
                log::event(
                    "kv_mirror_failed",
                    &[
                        ("key", key.as_str()),
                        ("failures", &mirror.failures.to_string()),
                    ],
                );
                let keep = (MIRROR_KEY.to_owned(), serde_json::to_string(&mirror)?);
                (vec![keep], Alarm::In(Duration::from_millis(delay)))
            }
        };
        let clear = [MIRROR_KEY.to_owned()];
        let batch = Batch {
            deletes: if puts.is_empty() { &clear } else { &[] },
            puts: &puts,
            alarm,
        };
        commit_atomic(&storage, &batch).await?;
        Ok(record)
    }

    /// Sends `record`'s head to every watcher and held long-poll that may
    /// read it. Called once the record is in KV, so a watcher that then
    /// fetches capsule.json gets this capsule.
    fn publish(&self, record: &Record, now_ms: u64) {
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
            let moved = w.held.as_deref() != Some(record.etag());
            if readable && moved {
                let _ = w.tx.send(Waited::Head(
                    head.clone().into_bytes(),
                    record.etag().to_owned(),
                ));
            } else if !readable && w.held.is_some() {
                let _ = w.tx.send(Waited::NotFound);
            } else {
                kept.push(w);
            }
        }
        self.waiters.borrow_mut().extend(kept);
    }

    /// Takes a watcher: refused with a close code past the caps, otherwise
    /// accepted for hibernation and sent the current head at once (if there
    /// is one it may read). Under the lock, so a commit's head is sent
    /// either in this answer or by `publish`, never missed.
    async fn watch(&self, call: WatchCall) -> worker::Result<Response> {
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
    async fn wait(&self, call: WaitCall) -> worker::Result<Waited> {
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
                let newer = call.held.as_deref() != Some(r.etag());
                let readable = may_read_head(&r, call.reader.as_deref(), call.now_ms);
                if newer && readable {
                    let head = serde_json::to_vec(&r.head(call.now_ms, &cfg.tiers))?;
                    return Ok(Waited::Head(head, r.etag().to_owned()));
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

    /// Quotes an upgrade: bounded open invoices per agent, a tag unique among
    /// open invoices at the price, the invoice stored before it is shown.
    async fn quote(&self, call: QuoteCall) -> worker::Result<Response> {
        let Ok(up) = &config::upgrade(&self.env) else {
            return Ok(http::upgrades_not_configured());
        };
        let agent = AgentId::parse(&call.agent_id).ok_or("quote: bad agent id")?;
        let now = call.now_ms;
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        let mut book: InvoiceBook = load(&storage, INVOICES_KEY).await?.unwrap_or_default();
        book.prune(now);
        if !book.may_quote(now) {
            let next = book
                .items
                .iter()
                .filter(|i| i.is_open(now))
                .map(|i| i.expires_at_ms)
                .min()
                .unwrap_or(now);
            return http::upgrade_refusal(
                &Refusal::new(
                    ReasonCode::TooManyOpenInvoices,
                    "this agent already has the most open invoices it may hold",
                )
                .retry_after(secs_until(now, next).max(1)),
            );
        }
        let price = up.price(call.plan).ok_or("quote: free is not sold")?;
        let mut random = [0u8; 12];
        getrandom::getrandom(&mut random).map_err(|e| e.to_string())?;
        let ask = TagAsk {
            now_ms: now,
            expires_at_ms: now + INVOICE_TTL_MS,
            random: u32::from_le_bytes([random[8], random[9], random[10], random[11]]),
        };
        let tag = match call.forced_tag {
            Some(t) => Some(t),
            None => {
                ask.send(&self.env, &format!("{}:{}", up.chain_id, price.0))
                    .await?
            }
        };
        let Some(tag) = tag else {
            // Every tag at this price is held by an open invoice.
            return Ok(http::unavailable_because(
                Audience::Read,
                Some("too many open invoices at this price; retry later"),
            ));
        };
        let mut id_random = [0u8; 8];
        id_random.copy_from_slice(&random[..8]);
        let req = QuoteRequest {
            agent_id: agent.clone(),
            plan: call.plan,
        };
        let inv = new_invoice(&req, up, tag, now, id_random);
        book.items.push(inv.clone());
        save(&storage, INVOICES_KEY, &book).await?;
        log::event(
            "upgrade_quoted",
            &[
                ("agent_id", agent.as_str()),
                ("invoice_id", inv.invoice_id.as_str()),
                ("amount_atomic", &inv.amount_atomic.to_string()),
            ],
        );
        http::json(
            200,
            &QuoteBody::new(&inv, &agent, up, call.claim_url),
            NO_STORE,
        )
    }

    /// Verifies a claim on-chain and credits it, once: the payment's own
    /// object binds it to this invoice first, then state, invoice and the
    /// KV record change in one atomic commit.
    async fn claim(&self, call: ClaimCall) -> worker::Result<Response> {
        let cfg = Config::of(&self.env);
        let Ok(up) = &config::upgrade(&self.env) else {
            return Ok(http::upgrades_not_configured());
        };
        let agent = AgentId::parse(&call.agent_id).ok_or("claim: bad agent id")?;
        let claim = Claim {
            invoice_id: call.invoice_id,
            agent_id: agent.clone(),
            tx_hash: call.tx_hash,
            seq: call.seq,
        };
        let now = call.now_ms;
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        let mut book: InvoiceBook = load(&storage, INVOICES_KEY).await?.unwrap_or_default();
        let inv = match before_chain(&claim, book.find(&claim.invoice_id)) {
            Err(r) => return http::upgrade_refusal(&r),
            Ok(Before::Repeat(body)) => return http::json(200, &body, NO_STORE),
            Ok(Before::Verify) => book.find(&claim.invoice_id).cloned().ok_or("checked")?,
        };
        let want = expected(&inv, up).ok_or("stored invoice has malformed addresses")?;
        let verdict = rpc::verify_payment(&up.rpc_url, &want, &claim.tx_hash).await;
        let confirmed = match after_chain(&claim, up.chain_id, verdict) {
            Ok(c) => c,
            Err(r) => {
                if let Some(why) = &r.log {
                    log::event(
                        "payment_provider_fault",
                        &[("agent_id", agent.as_str()), ("error", why)],
                    );
                }
                return http::upgrade_refusal(&r);
            }
        };
        let bind = PaymentBind {
            record: PaymentRecord {
                invoice_id: claim.invoice_id.clone(),
                agent_id: agent.to_string(),
            },
        };
        if !bind.send(&self.env, &confirmed.payment).await? {
            return http::upgrade_refusal(&Refusal::new(
                ReasonCode::PaymentAlreadyClaimed,
                "this payment already credited another invoice",
            ));
        }
        let mut state: AgentState = load(&storage, STATE_KEY).await?.unwrap_or_default();
        let inv = book.find_mut(&claim.invoice_id).ok_or("checked")?;
        let body = credit(
            &mut state.paid,
            inv,
            agent.as_str(),
            &claim.tx_hash,
            &confirmed,
            now,
        );
        let mut puts = vec![
            (STATE_KEY.to_owned(), serde_json::to_string(&state)?),
            (INVOICES_KEY.to_owned(), serde_json::to_string(&book)?),
        ];
        // head.json shows the tier: mirror the record if there is one (with
        // the retry alarm armed in the same commit, as for a write).
        let mirror = match state.record(&agent, &cfg.tiers, now) {
            Some(record) => {
                let mut mirror = load::<Mirror>(&storage, MIRROR_KEY)
                    .await?
                    .unwrap_or_default();
                mirror.push_record(&agent, &serde_json::to_string(&record)?);
                puts.push((MIRROR_KEY.to_owned(), serde_json::to_string(&mirror)?));
                Some(mirror)
            }
            None => None,
        };
        let alarm = match mirror {
            Some(_) => Alarm::In(Duration::from_millis(RETRY_BASE_MS)),
            None => Alarm::Keep,
        };
        let batch = Batch {
            puts: &puts,
            deletes: &[],
            alarm,
        };
        commit_atomic(&storage, &batch).await?;
        log::event(
            "upgrade_credited",
            &[
                ("agent_id", agent.as_str()),
                ("invoice_id", claim.invoice_id.as_str()),
                ("payment", confirmed.payment.as_str()),
                ("paid_until", body.paid_until.as_str()),
            ],
        );
        if mirror.is_some() {
            match self.sync_mirror(mirror).await {
                Ok(Some(record)) => self.publish(&record, now),
                Ok(None) => {}
                Err(e) => log::event(
                    "kv_mirror_error",
                    &[("agent_id", agent.as_str()), ("error", &e.to_string())],
                ),
            }
        }
        http::json(200, &body, NO_STORE)
    }
}
