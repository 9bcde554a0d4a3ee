//! `POST /self/{agent_id}/keys.json`, decided whole: the body's shape, the
//! event against the agent's log ([`KeyLog::accept`]), then the envelope (if
//! one comes) as a write signed by the key the event makes current. Nothing
//! is stored unless everything passes; the agent's object then commits the
//! record, the state and the write in one storage operation, so an event and
//! the capsule it carries are never half applied.
//!
//! Every refusal is a [`Rejection`], the write path's failure type, so a
//! key submission is answered exactly like a PUT (`{"accepted": false,
//! "reason_codes": [...], "detail"}`), and none counts toward the cooldown.

use super::log::{Accepted, KeyLog, SealedKeyRecord, Submission, WriteLookup, Writes};
use super::state::KeyState;
use super::KeyEvent;
use crate::core::crypto::AgentId;
use crate::core::history::{HistoryIndex, ServiceKey};
use crate::core::jcs;
use crate::core::json::{self, Json};
use crate::core::limits::{TierTable, MAX_BODY_BYTES};
use crate::core::reason::{ReasonCode, Refusal};
use crate::core::write::{self, AgentState, Candidate, Rejection, Signature, Terms, WithKeyEvent};

/// The largest body: an envelope at the write cap plus an event (a few
/// hundred bytes; 8 KiB leaves room for any that is well-formed).
pub const MAX_KEYS_BODY_BYTES: usize = MAX_BODY_BYTES + 8 * 1024;

/// A submission's body: `{"event": …, "envelope"?: …}`.
#[derive(Debug, Clone)]
pub struct KeysPost {
    /// The event, as sent.
    pub event: Json,
    /// The envelope's bytes (its canonical text), if one comes.
    pub envelope: Option<Vec<u8>>,
}

/// What a submission comes to.
#[derive(Debug)]
pub enum Decided {
    /// The exact bytes of event `index` again: nothing changes (a client's
    /// safe retry; an envelope that came with it was committed then).
    Again {
        /// The event's index.
        index: u64,
    },
    /// A new event, and the write that commits with it, if any.
    New {
        /// The sealed record to append.
        record: Box<SealedKeyRecord>,
        /// The key state after it.
        state: Box<KeyState>,
        /// The envelope's write, checked against that state.
        write: Option<Box<Candidate>>,
    },
}

fn bad(detail: impl Into<String>) -> Rejection {
    Rejection::from(Refusal::new(ReasonCode::BadKeyEvent, detail))
}

/// Reads a body: JSON (`invalid_json` otherwise), an object with `event`
/// and optionally `envelope`, both objects, nothing else (`bad_key_event`).
pub fn parse_body(body: &[u8]) -> Result<KeysPost, Rejection> {
    if body.len() > MAX_KEYS_BODY_BYTES {
        return Err(Rejection::body_over(body.len() as u64, MAX_KEYS_BODY_BYTES));
    }
    let v = json::parse(body).map_err(|e| {
        Rejection::from(Refusal::new(
            ReasonCode::InvalidJson,
            format!("body is not acceptable JSON: {e}"),
        ))
    })?;
    let members = v
        .as_object()
        .ok_or_else(|| bad("the body is an object: {\"event\": …, \"envelope\"?: …}"))?;
    if let Some((k, _)) = members
        .iter()
        .find(|(k, _)| k != "event" && k != "envelope")
    {
        return Err(bad(format!(
            "unknown member {k:?}: the body has event and, optionally, envelope"
        )));
    }
    let event = v
        .get("event")
        .filter(|e| e.as_object().is_some())
        .ok_or_else(|| bad("event is required, an object"))?
        .clone();
    let envelope = match v.get("envelope") {
        None => None,
        Some(e) if e.as_object().is_some() => Some(jcs::canonicalize(e).into_bytes()),
        Some(_) => return Err(bad("envelope must be a PUT envelope (an object)")),
    };
    Ok(KeysPost { event, envelope })
}

/// What the Worker checks before waking the agent's object, with nothing
/// stored: the body's shape, the event's shape and agent, and its
/// signatures. The object decides everything else (and checks these again).
pub fn precheck(body: &[u8], agent: &AgentId) -> Result<(), Rejection> {
    let post = parse_body(body)?;
    let event = KeyEvent::from_json(&post.event).map_err(bad)?;
    if event.agent_id != *agent {
        return Err(bad("agent_id is not the agent in the path"));
    }
    // What needs no state (so no other key's inception, and no forged
    // signature, wakes the agent's object).
    event.check_signers().map_err(Rejection::from)?;
    Ok(())
}

/// The agent's writes as a disputing rotation looks them up: its retained
/// history, the key log's answer to which key wrote each, and whether the
/// event's new key is another agent's genesis key (the caller looked it up).
struct Retained<'a> {
    index: Option<&'a HistoryIndex>,
    keys: Option<&'a KeyState>,
    other_agent: bool,
}

impl Writes for Retained<'_> {
    fn lookup(&self, key_index: u64, seq: u64) -> WriteLookup {
        let Some(index) = self.index else {
            return WriteLookup::Missing;
        };
        let by = |sequence| self.keys.map_or(0, |k| k.key_index_at(sequence));
        if let Some(item) = index
            .items
            .iter()
            .find(|i| i.seq == seq && by(i.sequence) == key_index)
        {
            return WriteLookup::Found(item.cursor.clone());
        }
        // Older than every retained version (and written, since the chain
        // starts before the window): pruned, its cursor no longer checkable.
        match index.items.first() {
            Some(first) if index.head.first_sequence > 0 && seq < first.seq => WriteLookup::Pruned,
            _ => WriteLookup::Missing,
        }
    }
    fn is_other_agent(&self, _id: &AgentId) -> bool {
        self.other_agent
    }
}

/// The key an event makes current, if it names one (to look up whether it
/// is another agent's genesis key before deciding).
pub fn new_key(event: &Json) -> Option<AgentId> {
    KeyEvent::from_json(event)
        .ok()
        .map(|e| e.public_key.agent_id())
}

/// Everything a decision needs besides the body.
pub struct Context<'a> {
    /// The agent (from the path).
    pub agent: &'a AgentId,
    /// Its stored state.
    pub state: &'a AgentState,
    /// Its key log.
    pub log: &'a KeyLog,
    /// Its history index (`None` before the first write).
    pub history: Option<&'a HistoryIndex>,
    /// Whether the event's new key is another agent's genesis key.
    pub other_agent: bool,
    /// "Now" (Unix ms).
    pub now_ms: u64,
    /// The tier table.
    pub tiers: &'a TierTable,
    /// The key that seals the record.
    pub key: &'a ServiceKey,
}

/// Decides a submission (see the module comment). The event first: a
/// refused event is answered with its own code even if the envelope is bad
/// too.
pub fn decide(post: &KeysPost, cx: &Context<'_>) -> Result<Decided, Rejection> {
    let history_len = cx.state.chain.as_ref().map_or(0, |c| c.length);
    let envelope_seq = match &post.envelope {
        Some(bytes) => Some(envelope_seq(bytes)?),
        None => None,
    };
    let submission = Submission {
        event: post.event.clone(),
        envelope_seq,
    };
    let writes = Retained {
        index: cx.history,
        keys: cx.log.state(),
        other_agent: cx.other_agent,
    };
    let (record, state, event) = match cx
        .log
        .accept(&submission, cx.now_ms, history_len, &writes, cx.key)
        .map_err(Rejection::from)?
    {
        Accepted::AlreadyApplied { index } => return Ok(Decided::Again { index }),
        Accepted::New {
            record,
            state,
            event,
        } => (record, state, event),
    };
    // An agent's key log starts with its first capsule or after it: a key
    // event alone never creates an agent (that takes a write, which the
    // per-address new-agent quota counts).
    if cx.state.published.is_none() && post.envelope.is_none() {
        return Err(bad(
            "this agent has published nothing yet: send its inception with its first capsule (an envelope)",
        ));
    }
    let write = match &post.envelope {
        None => None,
        Some(bytes) => {
            let seq_above = match &event.change {
                super::Change::Rotation {
                    disputes_after: Some(last),
                    ..
                } => Some(last.seq),
                _ => None,
            };
            let terms = Terms {
                signature: Signature::Verify,
                keys: Some(&state),
                with_key_event: Some(WithKeyEvent { seq_above }),
            };
            let c = write::check(cx.state, bytes, cx.agent, cx.now_ms, cx.tiers, &terms)
                .map_err(Rejection::uncounted)?;
            Some(Box::new(c))
        }
    };
    Ok(Decided::New {
        record,
        state,
        write,
    })
}

/// The envelope's `seq`, read before the event is decided (a disputing
/// rotation needs it); the envelope itself is checked after.
fn envelope_seq(bytes: &[u8]) -> Result<u64, Rejection> {
    json::parse(bytes)
        .ok()
        .and_then(|e| e.get("seq").and_then(Json::as_safe_u64))
        .ok_or_else(|| {
            Rejection::from(Refusal::new(
                ReasonCode::BadSeq,
                "envelope.seq is required, an integer in 0..=9007199254740991",
            ))
        })
}
