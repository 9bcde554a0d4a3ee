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
//! the object; without `wait` nothing changes.

use super::{text_or_404, unreadable, Miss};
use crate::core::access::{self, Decision};
use crate::core::crypto::AgentId;
use crate::core::history::QueryError;
use crate::core::jcs::cursor_hex;
use crate::core::model::ReadScope;
use crate::core::reason::ReasonCode;
use crate::core::record::{kv_key, Record};
use crate::core::urls::Doc;
use crate::core::watch;
use crate::worker::clock;
use crate::worker::config::Config;
use crate::worker::do_wire::{self, WaitCall, Waited};
use crate::worker::http::{self, CachedRead, Reply};
use crate::worker::kv::Kv;
use crate::worker::read_cache;
use crate::worker::request::Incoming;
use serde::Deserialize;
use worker::{Env, Response};

/// The parts of a stored record a read looks at before parsing it whole:
/// the cursor (304s) and whether the capsule is private (§12). Serde skips
/// everything else without building it.
#[derive(Deserialize)]
struct Peek {
    cursor: String,
    #[serde(default)]
    capsule: CapsulePeek,
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
    /// The current record.
    Current(Record),
}

/// The access decision over a stored record's text: `Ok(peek, None)` for a
/// public capsule (nothing parsed beyond the peek), `Ok(_, Some(record))`
/// for a private one this reader may read, and for one it may not the very
/// miss of an agent that never published (§12: existence is not revealed).
fn admit(
    raw: &str,
    agent: &AgentId,
    read_as: &ReadAs<'_>,
) -> Result<(Option<Peek>, Option<Record>), Miss> {
    let peek = serde_json::from_str::<Peek>(raw).ok();
    let private = peek
        .as_ref()
        .is_some_and(|p| p.capsule.access_control.as_ref().is_some_and(|a| !a.public));
    if !private {
        return Ok((peek, None));
    }
    // Unsigned: no need even to parse the record.
    if read_as.reader.is_none() {
        return Err(Miss::code(ReasonCode::CapsuleNotFound));
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
        Decision::Hidden => Err(Miss::code(ReasonCode::CapsuleNotFound)),
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
) -> worker::Result<Result<Stored<T>, Miss>> {
    let raw = match text_or_404(&Kv::of(env)?, &kv_key(agent)).await? {
        Ok(raw) => raw,
        Err(miss) => return Ok(Err(miss)),
    };
    let (peek, admitted) = match admit(&raw, agent, read_as) {
        Ok(x) => x,
        Err(miss) => return Ok(Err(miss)),
    };
    if let Some(peek) = peek {
        if let Some(answer) = held(cursor_hex(&peek.cursor)) {
            return Ok(Ok(Stored::Held(answer)));
        }
    }
    if let Some(record) = admitted {
        return Ok(Ok(Stored::Current(record)));
    }
    Ok(match serde_json::from_str(&raw) {
        Ok(r) => Ok(Stored::Current(r)),
        Err(e) => Err(unreadable("kv_record_unreadable", agent, &e.to_string())),
    })
}

/// Whether `read_as` may read `agent`'s documents at all (the history
/// routes, which are served from other keys, ask this first).
pub async fn readable(
    env: &Env,
    agent: &AgentId,
    read_as: &ReadAs<'_>,
) -> worker::Result<Result<(), Miss>> {
    let raw = match text_or_404(&Kv::of(env)?, &kv_key(agent)).await? {
        Ok(raw) => raw,
        Err(miss) => return Ok(Err(miss)),
    };
    Ok(admit(&raw, agent, read_as).map(|_| ()))
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
) -> worker::Result<Reply> {
    let now_ms = clock::request_now_ms(req, cfg.test_clock);
    let wait = match doc {
        Doc::Head => match watch::parse_wait(req.query_pairs()) {
            Ok(w) => w,
            Err(QueryError::Bad(why)) => {
                let miss = Miss::Refused {
                    code: ReasonCode::BadQuery,
                    detail: Some(why),
                    history_url: None,
                };
                return Ok(miss.response().into());
            }
            Err(QueryError::CursorNotFound) => None,
        },
        _ => None,
    };
    let poll = |held: Option<String>, wait_sec: u64, read: CachedRead| Poll {
        env,
        call: WaitCall {
            agent_id: agent.to_string(),
            reader: reader.map(AgentId::to_string),
            held,
            wait_ms: wait_sec * 1_000,
            now_ms,
        },
        read,
    };
    let read_as = ReadAs {
        reader,
        scope: access::scope_of(&doc),
        now_ms,
    };
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
        if let (Some(w), Some(_)) = (wait, read.fresh(&etag)) {
            return Ok(poll(Some(etag), w, read).answer().await?.into());
        }
        return Ok(read.kept(answer, &etag));
    }
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
    let record = match record(env, agent, &read_as, fresh).await? {
        Ok(Stored::Current(r)) => r,
        Ok(Stored::Held(not_modified)) => match wait {
            Some(w) => return Ok(poll(held, w, read).answer().await?.into()),
            None => return Ok(not_modified.into()),
        },
        Err(Miss::Refused {
            code: ReasonCode::CapsuleNotFound,
            ..
        }) if wait.is_some() => {
            return Ok(poll(None, wait.unwrap_or(0), read).answer().await?.into())
        }
        Err(miss) => return Ok(miss.response().into()),
    };
    let body = match doc {
        Doc::Head => serde_json::to_vec(&record.head(now_ms, &cfg.tiers))?,
        // The canonical (RFC 8785) bytes: sha256(body) == cursor.
        _ => record.capsule_body().into_bytes(),
    };
    // Unsigned and not a miss: the capsule is public (§12), so the answer
    // is the same for every reader and may be kept.
    if let Some(key) = &cache_key {
        let answer = http::full_answer(body.clone(), record.etag());
        read_cache::store(key, &kept, record.seq, answer).await;
    }
    if let (Some(w), Some(_)) = (wait, read.fresh(record.etag())) {
        let held = Some(record.etag().to_owned());
        return Ok(poll(held, w, read).answer().await?.into());
    }
    Ok(read.answer(body, record.etag()).into())
}

/// A long-poll for the agent's object to hold.
struct Poll<'a> {
    env: &'a Env,
    call: WaitCall,
    read: CachedRead,
}

impl Poll<'_> {
    /// The held answer: a head the client does not hold (200), nothing new
    /// (304 on the entity it holds), or still nothing it may read (404).
    /// Never kept by a cache: it answers one client's wait.
    async fn answer(self) -> worker::Result<Response> {
        let read = self.read.private();
        Ok(match do_wire::wait(self.env, &self.call).await? {
            Waited::Head(body, etag) => read.answer(body, &etag),
            Waited::Unchanged => match self.call.held.as_deref().and_then(|e| read.fresh(e)) {
                Some(not_modified) => not_modified,
                None => Miss::code(ReasonCode::CapsuleNotFound).response(),
            },
            Waited::NotFound => Miss::code(ReasonCode::CapsuleNotFound).response(),
        })
    }
}
