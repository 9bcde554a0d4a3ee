//! `GET`/`HEAD` of head.json and capsule.json: one KV read, no Durable Object
//! (a signed read also admits its nonce, `handlers::signer`), or none when
//! this location holds a fresh copy of a public answer (`read_cache`).
//! Reads are the hot path (agents poll head.json), so they never wake the
//! per-agent object and answer `If-None-Match` with a bodiless 304.
//!
//! [`record`] is the read itself, shared with the MCP tools `self_read` and
//! `self_subscribe`; [`handle`] makes the HTTP answer of it.
//!
//! `head.json?wait=N` is a long-poll (`core::watch::parse_wait`): answered
//! the same way at once unless the answer would be a 304 or a
//! `capsule_not_found`; then the agent's Durable Object holds it until the
//! next commit this reader may read, or N seconds. Only such polls wake
//! the object; without `wait` nothing changes. The long-poll is the write
//! Worker's (the entry Worker forwards every head.json that names `wait`,
//! `core::entry`), so its code is compiled there only.

use super::{text_or_404, unreadable};
use crate::core::access::{self, Decision};
use crate::core::crypto::AgentId;
#[cfg(feature = "worker")]
use crate::core::history::QueryError;
use crate::core::jcs::cursor_hex;
use crate::core::model::ReadScope;
use crate::core::reason::ReasonCode;
use crate::core::record::{head_etag, kv_key, Record};
use crate::core::urls::Doc;
#[cfg(feature = "worker")]
use crate::core::watch;
use crate::worker::clock;
use crate::worker::config::Config;
#[cfg(feature = "worker")]
use crate::worker::do_wire::{self, WaitCall, Waited};
use crate::worker::failure::Failure;
use crate::worker::http::{self, CachedRead, Reply};
use crate::worker::kv::Kv;
use crate::worker::read_cache;
use crate::worker::request::Incoming;
use serde::Deserialize;
use worker::Env;

/// The parts of a stored record a read looks at before parsing it whole:
/// the cursor (304s) and whether the capsule is private (§12). Serde skips
/// everything else without building it.
#[derive(Deserialize)]
pub(super) struct Peek {
    cursor: String,
    #[serde(default)]
    capsule: CapsulePeek,
    /// The key log's length (head.json's entity tag names it).
    #[serde(default)]
    keys: Option<KeysPeek>,
}

#[derive(Deserialize)]
struct KeysPeek {
    length: u64,
}

#[derive(Deserialize, Default)]
struct CapsulePeek {
    #[serde(default)]
    access_control: Option<AccessPeek>,
}

#[derive(Deserialize)]
struct AccessPeek {
    // Absent cannot pass validation; if it ever is, fail closed.
    #[serde(default)]
    public: bool,
}

/// Who reads which scope, and when (for the access decision of §12).
pub struct ReadAs<'a> {
    /// The verified signer (`handlers::signer`); `None` for an unsigned read.
    pub reader: Option<&'a AgentId>,
    /// What the document needs (`core::access::scope_of`).
    pub scope: ReadScope,
    /// The request's clock (grant expiry).
    pub now_ms: u64,
}

/// What KV holds for an agent, as far as the caller needs it.
pub enum Stored<T> {
    /// The caller already holds the current entity: its answer for that
    /// (a 304, an "unchanged"), decided before the record was parsed.
    Held(T),
    /// The current record (boxed: it holds the whole capsule).
    Current(Box<Record>),
}

/// The access decision over a stored record's text: `Ok(peek, None)` for a
/// public capsule (nothing parsed beyond the peek), `Ok(_, Some(record))`
/// for a private one this reader may read, and for one it may not the very
/// miss of an agent that never published (§12: existence is not revealed).
pub(super) fn admit(
    raw: &str,
    agent: &AgentId,
    read_as: &ReadAs<'_>,
) -> Result<(Option<Peek>, Option<Record>), Failure> {
    let peek = serde_json::from_str::<Peek>(raw).ok();
    let private = peek
        .as_ref()
        .is_some_and(|p| p.capsule.access_control.as_ref().is_some_and(|a| !a.public));
    if !private {
        return Ok((peek, None));
    }
    // Unsigned: no need even to parse the record.
    if read_as.reader.is_none() {
        return Err(Failure::code(ReasonCode::CapsuleNotFound));
    }
    let record: Record = serde_json::from_str(raw)
        .map_err(|e| unreadable("kv_record_unreadable", agent, &e.to_string()))?;
    match access::decide(
        &record.capsule,
        agent.as_str(),
        read_as.reader.map(AgentId::as_str),
        read_as.scope,
        read_as.now_ms,
    ) {
        Decision::Hidden => Err(Failure::code(ReasonCode::CapsuleNotFound)),
        Decision::Public | Decision::Granted => Ok((peek, Some(record))),
    }
}

/// An agent's record from KV, if `read_as` may read it. `held` is asked
/// with the current entity tag (the cursor's hex) and answers `Some` when
/// the caller already has it: on the polling hot path (a public capsule)
/// only the peek is parsed, never the whole record.
pub async fn record<T>(
    env: &Env,
    agent: &AgentId,
    read_as: &ReadAs<'_>,
    held: impl FnOnce(&str) -> Option<T>,
) -> Result<Stored<T>, Failure> {
    let raw = text_or_404(&Kv::of(env)?, &kv_key(agent)).await?;
    let (peek, admitted) = admit(&raw, agent, read_as)?;
    if let Some(peek) = peek {
        let hex = cursor_hex(&peek.cursor);
        let etag = match read_as.scope {
            ReadScope::Head => head_etag(hex, peek.keys.map(|k| k.length)),
            _ => hex.to_owned(),
        };
        if let Some(answer) = held(&etag) {
            return Ok(Stored::Held(answer));
        }
    }
    if let Some(record) = admitted {
        return Ok(Stored::Current(Box::new(record)));
    }
    serde_json::from_str(&raw)
        .map(|r| Stored::Current(Box::new(r)))
        .map_err(|e| unreadable("kv_record_unreadable", agent, &e.to_string()))
}

/// Whether `read_as` may read `agent`'s documents at all (the history
/// routes, which are served from other keys, ask this first): the cursor
/// of the record that admitted it (`None` if the record's cursor does not
/// read).
pub async fn readable(
    env: &Env,
    agent: &AgentId,
    read_as: &ReadAs<'_>,
) -> Result<Option<String>, Failure> {
    let raw = text_or_404(&Kv::of(env)?, &kv_key(agent)).await?;
    admit(&raw, agent, read_as).map(|(peek, _)| peek.map(|p| p.cursor))
}

/// head.json or capsule.json (`doc` is one of the two).
pub async fn handle(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    doc: Doc<'_>,
    agent: &AgentId,
    read: CachedRead,
    reader: Option<&AgentId>,
) -> Result<Reply, Failure> {
    let now_ms = clock::request_now_ms(req, cfg.test_clock);
    #[cfg(feature = "worker")]
    let waiter = wait_of(req, &doc)?.map(|wait_sec| Waiter {
        env,
        agent,
        reader,
        now_ms,
        wait_sec,
    });
    #[cfg(not(feature = "worker"))]
    let waiter: Option<Waiter> = None;
    // An unsigned read may be answered from this location's copy (no KV
    // read at all); a signed one never is.
    let cache_key = match reader {
        None => read_cache::key(req, agent, &doc, cfg.test_clock),
        Some(_) => None,
    };
    let kept = match &cache_key {
        Some(key) => read_cache::lookup(key).await,
        None => read_cache::Kept::Nothing,
    };
    if let read_cache::Kept::Answer(answer, etag) = kept {
        return match &waiter {
            Some(w) if read.fresh(&etag).is_some() => w.hold(Some(etag), read).await,
            _ => Ok(read.kept(answer, &etag)),
        };
    }
    let read_as = ReadAs {
        reader,
        scope: access::scope_of(&doc),
        now_ms,
    };
    // A read this location may keep is read whole even when the client
    // already holds it: conditional polls, the usual kind, must make the
    // copy too, or once it expired every poll would read KV again.
    let keep = cache_key.is_some();
    let mut held = None;
    let fresh = |etag: &str| {
        held = Some(etag.to_owned());
        if keep {
            None
        } else {
            read.fresh(etag)
        }
    };
    let record = match (record(env, agent, &read_as, fresh).await, &waiter) {
        (Ok(Stored::Current(r)), _) => r,
        (Ok(Stored::Held(_)), Some(w)) => return w.hold(held, read).await,
        (Ok(Stored::Held(not_modified)), None) => return Ok(not_modified.into()),
        (Err(f), Some(w)) if f.is_not_found() => return w.hold(None, read).await,
        (Err(f), _) => return Err(f),
    };
    let (body, etag) = match doc {
        Doc::Head => (
            serde_json::to_vec(&record.head(now_ms, &cfg.tiers))?,
            record.head_etag(),
        ),
        // The canonical (RFC 8785) bytes: sha256(body) == cursor.
        _ => (record.capsule_body().into_bytes(), record.etag().to_owned()),
    };
    // Unsigned and not a miss: the capsule is public (§12), so the answer
    // is the same for every reader and may be kept.
    if let Some(key) = &cache_key {
        let answer = http::full_answer(body.clone(), &etag);
        read_cache::store(key, &kept, record.seq, answer).await;
    }
    match &waiter {
        Some(w) if read.fresh(&etag).is_some() => w.hold(Some(etag), read).await,
        _ => Ok(read.answer(body, &etag).into()),
    }
}

/// The `wait` of a head.json long-poll, in seconds (`None`: answer at once).
#[cfg(feature = "worker")]
fn wait_of(req: &Incoming, doc: &Doc<'_>) -> Result<Option<u64>, Failure> {
    if !matches!(doc, Doc::Head) {
        return Ok(None);
    }
    match watch::parse_wait(req.query_pairs()) {
        Ok(w) => Ok(w),
        Err(QueryError::Bad(why)) => Err(Failure::refused(ReasonCode::BadQuery, why)),
        Err(QueryError::CursorNotFound) => Ok(None),
    }
}

/// A head.json read that asked to wait: held by the agent's object when
/// the answer would be a 304 or a `capsule_not_found`.
#[cfg(feature = "worker")]
struct Waiter<'a> {
    env: &'a Env,
    agent: &'a AgentId,
    reader: Option<&'a AgentId>,
    now_ms: u64,
    wait_sec: u64,
}

#[cfg(feature = "worker")]
impl Waiter<'_> {
    /// The held answer for a client that holds `held` (or nothing): a head
    /// it does not hold (200), nothing new (304 on the entity it holds), or
    /// still nothing it may read (404). Never kept by a cache: it answers
    /// one client's wait.
    async fn hold(&self, held: Option<String>, read: CachedRead) -> Result<Reply, Failure> {
        let read = read.private();
        let call = WaitCall {
            agent_id: self.agent.to_string(),
            reader: self.reader.map(AgentId::to_string),
            held,
            wait_ms: self.wait_sec * 1_000,
            now_ms: self.now_ms,
        };
        let not_found = || Err(Failure::code(ReasonCode::CapsuleNotFound));
        match do_wire::wait(self.env, &call).await? {
            Waited::Head(body, etag) => Ok(read.answer(body, &etag).into()),
            Waited::Unchanged => match call.held.as_deref().and_then(|e| read.fresh(e)) {
                Some(not_modified) => Ok(not_modified.into()),
                None => not_found(),
            },
            Waited::NotFound => not_found(),
        }
    }
}

/// In the entry Worker no read waits (`core::entry` forwards long-polls).
#[cfg(not(feature = "worker"))]
enum Waiter {}

#[cfg(not(feature = "worker"))]
impl Waiter {
    async fn hold(&self, _held: Option<String>, _read: CachedRead) -> Result<Reply, Failure> {
        match *self {}
    }
}
