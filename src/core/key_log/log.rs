//! The sealed key log: its records, the service's acceptance of a submitted
//! event, the offline verification of a served log, and a client's pin.
//!
//! A record is `{"event": <the event as signed>, "history_sequence": n,
//! "accepted_at": "<RFC 3339>"}` plus the seal every history entry has
//! (`hash` = SHA3-256 of the record's RFC 8785 bytes, `service_signature`,
//! `signed_by`). The agent's signed event is kept whole inside the record
//! (the design sketch wrote the service's members beside the event's; nested,
//! the bytes the agent signed stay one object that can be checked alone).
//! `previous_hash` inside each event is the previous record's sealed `hash`,
//! so the agent's signature covers the chain too.

use super::event::{Change, KeyEvent, RotationAuthority};
pub use super::served::{key_log_body, key_log_names};
use super::state::{Earlier, KeyState, KeysSummary};
use crate::core::crypto::AgentId;
use crate::core::history::{Hashed, Keyring, Malformed, Sealed, ServiceKey};
use crate::core::jcs;
use crate::core::json::Json;
use crate::core::reason::{ReasonCode, Refusal};
use crate::core::time::{parse_rfc3339, rfc3339};
use crate::core::write::Signature;
use serde::Serialize;

/// The hashed members of one key-log record.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRecord {
    /// The event, exactly as the agent signed it.
    pub event: Json,
    /// The history's length when the event was accepted: the sequence of the
    /// first entry the new key may sign.
    pub history_sequence: u64,
    /// When the service accepted it (RFC 3339, ms).
    pub accepted_at: String,
}

impl Serialize for KeyRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.unsealed().serialize(s)
    }
}

/// A record with its seal, as stored and served.
pub type SealedKeyRecord = Sealed<KeyRecord>;

impl Hashed for KeyRecord {
    const NAME: &'static str = "key record";

    fn unsealed(&self) -> Json {
        Json::Object(vec![
            ("event".into(), self.event.clone()),
            ("history_sequence".into(), self.history_sequence.into()),
            ("accepted_at".into(), self.accepted_at.as_str().into()),
        ])
    }

    fn from_unsealed(v: &Json) -> Result<Self, Malformed> {
        let m = v
            .as_object()
            .ok_or_else(|| Malformed::new("key record must be an object"))?;
        if m.len() != 3 {
            return Err(Malformed::new(
                "key record has exactly event, history_sequence, accepted_at and the seal",
            ));
        }
        Ok(KeyRecord {
            event: v
                .get("event")
                .filter(|e| e.as_object().is_some())
                .ok_or_else(|| Malformed::new("key record.event must be an object"))?
                .clone(),
            history_sequence: v
                .get("history_sequence")
                .and_then(Json::as_safe_u64)
                .ok_or_else(|| Malformed::new("key record.history_sequence must be an integer"))?,
            accepted_at: v
                .get("accepted_at")
                .and_then(Json::as_str)
                .filter(|t| parse_rfc3339(t).is_some())
                .ok_or_else(|| Malformed::new("key record.accepted_at must be an RFC 3339 time"))?
                .to_owned(),
        })
    }
}

impl KeyRecord {
    fn accepted_ms(&self) -> u64 {
        parse_rfc3339(&self.accepted_at).unwrap_or(0)
    }
}

/// What a submission to `POST /self/{agent_id}/keys.json` carries besides
/// the event: the seq of the capsule envelope signed by the new key, if one
/// comes with it (the Worker checks the envelope itself as a write).
#[derive(Debug, Clone)]
pub struct Submission {
    /// The event as sent.
    pub event: Json,
    /// The accompanying envelope's `seq`, if any.
    pub envelope_seq: Option<u64>,
}

/// What the history says about the write a disputing rotation names as the
/// owner's last good one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteLookup {
    /// Retained: its cursor.
    Found(String),
    /// Written once, but pruned from the retained history (its cursor can no
    /// longer be checked; the seq is trusted as the client recorded it).
    Pruned,
    /// The outgoing key never wrote this seq.
    Missing,
}

/// The agent's writes, as a disputing rotation needs them.
pub trait Writes {
    /// The write with `seq` by key index `key_index`.
    fn lookup(&self, key_index: u64, seq: u64) -> WriteLookup;
    /// Whether `id` is another agent's id (its genesis key's SHA-256): a
    /// rotation may not make another agent's genesis key current, so a
    /// signed read's `keyid` names one agent only.
    fn is_other_agent(&self, id: &AgentId) -> bool;
}

/// The outcome of an accepted submission.
#[derive(Debug, Clone)]
pub enum Accepted {
    /// A new event: its sealed record and the state after it.
    New {
        /// The record to append.
        record: Box<SealedKeyRecord>,
        /// The state after it.
        state: Box<KeyState>,
        /// The event, parsed.
        event: Box<KeyEvent>,
    },
    /// The exact bytes of event `index` again: nothing changes (a client's
    /// safe retry).
    AlreadyApplied {
        /// The event's index.
        index: u64,
    },
}

/// An agent's key log: its sealed records and the state they fold to.
#[derive(Debug, Clone)]
pub struct KeyLog {
    agent_id: AgentId,
    records: Vec<SealedKeyRecord>,
    state: Option<KeyState>,
}

/// A log whose records do not fold: the first record that fails and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Broken {
    /// The failing record's index.
    pub index: u64,
    /// Why.
    pub refusal: Refusal,
}

/// The records before an event, and whether their signatures are checked
/// again when folded: what [`KeyState::check`] needs to decide a recovery's
/// `supersedes`.
pub struct Prefix<'a>(&'a [SealedKeyRecord], Signature);

impl<'a> Prefix<'a> {
    /// A served log's records (read from untrusted JSON: every signature is
    /// checked when a prefix is folded).
    pub fn served(records: &'a [SealedKeyRecord]) -> Prefix<'a> {
        Prefix(records, Signature::Verify)
    }
}

impl Earlier for Prefix<'_> {
    fn before(&self, index: u64) -> Option<(Option<KeyState>, String, bool, u64)> {
        let i = usize::try_from(index).ok()?;
        let record = self.0.get(i)?;
        let at = record.accepted_ms();
        let mut before = fold(&self.0[..i], self.1).ok()?;
        if let Some(s) = before.as_mut() {
            s.settle(at);
        }
        let was_next = matches!(
            KeyEvent::from_json(&record.event).map(|e| e.change),
            Ok(Change::Rotation {
                authority: RotationAuthority::Next,
                ..
            })
        );
        Some((before, record.seal.hash.clone(), was_next, at))
    }
}

/// Folds records into the state they reach, checking each event as it was
/// accepted (at its sealed time) but not the seals (the verifier's job).
/// `Prechecked`: the agent's signatures were verified when the service
/// accepted each event and the log comes from the object's own storage, so
/// they are not verified again (two Ed25519 checks per event are most of a
/// fold's cost, and the object folds its log on every write).
fn fold(records: &[SealedKeyRecord], sigs: Signature) -> Result<Option<KeyState>, Broken> {
    let mut state: Option<KeyState> = None;
    for (i, r) in records.iter().enumerate() {
        let broken = |refusal| Broken {
            index: i as u64,
            refusal,
        };
        let event = KeyEvent::from_json(&r.event)
            .map_err(|d| broken(Refusal::new(ReasonCode::BadKeyEvent, d)))?;
        let at = r.accepted_ms();
        if let Some(s) = state.as_mut() {
            s.settle(at);
        }
        KeyState::check(
            state.as_ref(),
            &event,
            at,
            &Prefix(&records[..i], sigs),
            sigs,
        )
        .map_err(broken)?;
        state = Some(KeyState::apply(
            state,
            &event,
            &r.seal.hash,
            at,
            r.history_sequence,
        ));
    }
    Ok(state)
}

impl KeyLog {
    /// An agent with no key log: today's rules (its genesis key signs everything).
    pub fn empty(agent_id: AgentId) -> KeyLog {
        KeyLog {
            agent_id,
            records: Vec::new(),
            state: None,
        }
    }

    /// The log from stored records (the agent's object keeps them).
    pub fn from_records(
        agent_id: AgentId,
        records: Vec<SealedKeyRecord>,
    ) -> Result<KeyLog, Broken> {
        let state = fold(&records, Signature::Verify)?;
        Ok(KeyLog {
            agent_id,
            records,
            state,
        })
    }

    /// Appends what [`KeyLog::accept`] returned, without folding the log
    /// again (the state is the one `accept` computed).
    pub fn push(&mut self, record: SealedKeyRecord, state: KeyState) {
        self.records.push(record);
        self.state = Some(state);
    }

    /// The records, oldest first.
    pub fn records(&self) -> &[SealedKeyRecord] {
        &self.records
    }

    /// The state (`None`: no event yet).
    pub fn state(&self) -> Option<&KeyState> {
        self.state.as_ref()
    }

    /// The log as the agent's object stores it: a JSON array of the sealed
    /// records, oldest first.
    pub fn stored_text(&self) -> String {
        serde_json::to_string(&self.records).expect("records serialise")
    }

    /// The log from [`KeyLog::stored_text`] (`None`: no log stored yet).
    /// Stored records are folded again, every rule but the agent's
    /// signatures (verified when each event was accepted; only the agent's
    /// object writes this text): a log that does not fold is never trusted,
    /// not even the service's own.
    pub fn from_stored(agent_id: AgentId, text: Option<&str>) -> Result<KeyLog, String> {
        let Some(text) = text else {
            return Ok(KeyLog::empty(agent_id));
        };
        let v = crate::core::json::parse(text.as_bytes()).map_err(|e| e.to_string())?;
        let records = v
            .as_array()
            .ok_or("the stored key log is not an array")?
            .iter()
            .map(|r| SealedKeyRecord::from_json(r).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let state = fold(&records, Signature::Prechecked).map_err(|b| {
            format!(
                "stored key record {} does not fold: {}",
                b.index,
                b.refusal.detail_or_code()
            )
        })?;
        Ok(KeyLog {
            agent_id,
            records,
            state,
        })
    }

    /// The records as JSON values (an export's `key_log`).
    pub fn records_json(&self) -> Vec<Json> {
        self.records
            .iter()
            .map(|r| {
                crate::core::json::parse(
                    serde_json::to_string(r)
                        .expect("records serialise")
                        .as_bytes(),
                )
                .expect("a record serialises to JSON")
            })
            .collect()
    }

    /// head.json's `keys` (`None` for an agent without a key log).
    pub fn summary(&self, now_ms: u64) -> Option<KeysSummary> {
        self.state.as_ref().map(|s| s.summary(now_ms))
    }

    /// Whether one of the keys that signed `event` (its `public_key`, its
    /// `revealed_key`) is this agent's: one the log names or commits, or,
    /// before the log, the genesis key. Decided before anything that
    /// depends on the log, so an event that is not the agent's is refused
    /// alike for every agent.
    fn speaks_for(&self, event: &KeyEvent) -> bool {
        std::iter::once(&event.public_key)
            .chain(event.revealed_key())
            .any(|key| match &self.state {
                Some(s) => s.names_or_commits(key),
                None => key.agent_id() == self.agent_id,
            })
    }

    /// head.json's `keys` as the event at `index` left it, at its sealed
    /// time: what the exact bytes of an accepted event are answered with
    /// (whoever holds an old event learns nothing of the log since).
    pub fn summary_after(&self, index: u64) -> Option<KeysSummary> {
        let end = usize::try_from(index).ok()?.checked_add(1)?;
        let records = self.records.get(..end)?;
        let at = records.last()?.accepted_ms();
        fold(records, Signature::Prechecked)
            .ok()
            .flatten()
            .map(|s| s.summary(at))
    }

    /// Decides a submission at `now_ms`, while the history holds
    /// `history_len` entries. On acceptance the record is sealed with `key`;
    /// the caller stores it (with the envelope's write, atomically) and
    /// swaps in the new state.
    pub fn accept(
        &self,
        submission: &Submission,
        now_ms: u64,
        history_len: u64,
        writes: &dyn Writes,
        key: &ServiceKey,
    ) -> Result<Accepted, Refusal> {
        let text = jcs::canonicalize(&submission.event);
        if let Some(i) = self
            .records
            .iter()
            .position(|r| jcs::canonicalize(&r.event) == text)
        {
            return Ok(Accepted::AlreadyApplied { index: i as u64 });
        }
        let event = KeyEvent::from_json(&submission.event)
            .map_err(|d| Refusal::new(ReasonCode::BadKeyEvent, d))?;
        if event.agent_id != self.agent_id {
            return Err(Refusal::new(
                ReasonCode::BadKeyEvent,
                "agent_id is not the agent in the path",
            ));
        }
        // Who signed, before anything that depends on the log: what needs
        // no state, then whether a signer is the agent's.
        event.check_signers()?;
        if !self.speaks_for(&event) {
            return Err(not_the_agents());
        }
        let mut state = self.state.clone();
        if let Some(s) = state.as_mut() {
            s.settle(now_ms);
        }
        let prefix = Prefix(&self.records, Signature::Prechecked);
        KeyState::check(
            state.as_ref(),
            &event,
            now_ms,
            &prefix,
            Signature::Prechecked,
        )?;
        if let Change::Rotation { disputes_after, .. } = &event.change {
            if writes.is_other_agent(&event.public_key.agent_id()) {
                return Err(Refusal::new(
                    ReasonCode::KeyReused,
                    "public_key is another agent's genesis key",
                ));
            }
            if let Some(last) = disputes_after {
                let outgoing = state.as_ref().map_or(0, KeyState::key_index);
                match writes.lookup(outgoing, last.seq) {
                    WriteLookup::Found(c) if c != last.cursor => {
                        return Err(Refusal::new(
                            ReasonCode::BadKeyEvent,
                            format!(
                                "disputes_after: the write with seq {} has cursor {c}",
                                last.seq
                            ),
                        ))
                    }
                    WriteLookup::Missing => {
                        return Err(Refusal::new(
                            ReasonCode::BadKeyEvent,
                            format!(
                                "disputes_after: the outgoing key wrote no version with seq {}",
                                last.seq
                            ),
                        ))
                    }
                    _ => {}
                }
                match submission.envelope_seq {
                    None => {
                        return Err(Refusal::new(
                            ReasonCode::BadKeyEvent,
                            "a disputing rotation carries the owner's capsule (an envelope signed by the new key)",
                        ))
                    }
                    Some(seq) if seq <= last.seq => {
                        return Err(Refusal::new(
                            ReasonCode::ReplaySeq,
                            format!(
                                "the envelope's seq must be above the last good write's ({})",
                                last.seq
                            ),
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
        let record = Sealed::new(
            KeyRecord {
                event: event.to_json(),
                history_sequence: history_len,
                accepted_at: rfc3339(now_ms),
            },
            key,
        );
        let state = KeyState::apply(state, &event, &record.seal.hash, now_ms, history_len);
        Ok(Accepted::New {
            record: Box::new(record),
            state: Box::new(state),
            event: Box::new(event),
        })
    }
}

/// The one answer to an event signed by no key of the agent's log: the same
/// whatever the agent's state, so a stranger learns nothing from it (not
/// whether the agent published, nor whether it has a log, nor where the log
/// stands). docs/PROTOCOL.md §14, acceptance step 3.
fn not_the_agents() -> Refusal {
    Refusal::new(
        ReasonCode::RotationNotCommitted,
        "the event is signed by no key this agent's key log names or commits (its genesis key before the log)",
    )
}

/// One problem the offline verifier found in a key log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyLogFailure {
    /// The record's index (`None`: the log as a whole).
    pub index: Option<u64>,
    /// The reason code the service would have refused the event with, or
    /// `seal` / `order` / `pin` for what only a verifier checks.
    pub check: String,
    /// What is wrong.
    pub detail: String,
}

/// The offline verification of a served key log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyLogReport {
    /// No failure.
    pub valid: bool,
    /// Records read.
    pub length: u64,
    /// What the log folds to (`None` if it is empty or broken).
    pub keys: Option<KeysSummary>,
    /// Everything wrong, first failure first.
    pub failures: Vec<KeyLogFailure>,
}

/// Verifies a key log from untrusted JSON (keys.json's `records`, or an
/// export's `key_log`) for `agent`: every seal under `keyring`, each record's
/// hash over its own bytes, the chain of `previous_hash`, times and history
/// positions that never go back, and every event against the state before it
/// at its sealed time: the rules the service applied. `now_ms` only dates the
/// summary (`final_at`, a pending recommit).
pub fn verify_key_log(
    agent: &AgentId,
    events: &[Json],
    keyring: &Keyring,
    now_ms: u64,
) -> (KeyLogReport, Option<KeyState>) {
    let mut failures = Vec::new();
    let fail =
        |failures: &mut Vec<KeyLogFailure>, index: Option<u64>, check: &str, detail: String| {
            failures.push(KeyLogFailure {
                index,
                check: check.to_owned(),
                detail,
            })
        };
    let mut records = Vec::new();
    for (i, v) in events.iter().enumerate() {
        let i = i as u64;
        match SealedKeyRecord::from_json(v) {
            Ok(r) => {
                if crate::core::history::sha3_hex(r.canonical().as_bytes()) != r.seal.hash {
                    fail(
                        &mut failures,
                        Some(i),
                        "seal",
                        "hash does not match the record's bytes".into(),
                    );
                } else if let Err(e) = r.seal.verify(keyring) {
                    fail(&mut failures, Some(i), "seal", e.to_string());
                }
                records.push(r);
            }
            Err(e) => {
                fail(&mut failures, Some(i), "bad_key_event", e.to_string());
                break;
            }
        }
    }
    for (i, pair) in records.windows(2).enumerate() {
        if pair[1].accepted_ms() < pair[0].accepted_ms()
            || pair[1].history_sequence < pair[0].history_sequence
        {
            fail(
                &mut failures,
                Some(i as u64 + 1),
                "order",
                "accepted_at or history_sequence goes back".into(),
            );
        }
    }
    let state = match fold(&records, Signature::Verify) {
        Ok(s) => s,
        Err(b) => {
            fail(
                &mut failures,
                Some(b.index),
                b.refusal.code.as_str(),
                b.refusal.detail_or_code().to_owned(),
            );
            None
        }
    };
    if let Some(s) = &state {
        if s.agent_id != *agent {
            fail(
                &mut failures,
                None,
                "bad_key_event",
                "the log is another agent's".into(),
            );
        }
    }
    // Reported by position (a whole-log failure first), each position's in
    // the order found: seal, order, then the rule that refused the event.
    failures.sort_by_key(|f| f.index);
    let report = KeyLogReport {
        valid: failures.is_empty(),
        length: records.len() as u64,
        keys: state.as_ref().map(|s| s.summary(now_ms)),
        failures,
    };
    (report, state)
}

/// What a client remembers of the last key log it saw for an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Pin {
    /// Events in it.
    pub length: u64,
    /// Its last record's sealed hash.
    pub head_hash: String,
}

/// A served log against a pin (serialised as `{"status": "consistent" |
/// "rollback" | "fork", …}`, as clients report it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PinCheck {
    /// The pinned log, or one that extends it.
    Consistent,
    /// Shorter than the pinned one: a rollback.
    Rollback {
        /// Pinned length.
        pinned: u64,
        /// Served length.
        served: u64,
    },
    /// A different sealed record at the pinned position: two histories, both
    /// sealed by the service (evidence that it equivocated or its key leaked).
    Fork {
        /// The position.
        index: u64,
        /// The pinned hash.
        pinned: String,
        /// The served hash.
        served: String,
    },
}

impl Pin {
    /// The pin for a log.
    pub fn of(records: &[SealedKeyRecord]) -> Option<Pin> {
        records.last().map(|r| Pin {
            length: records.len() as u64,
            head_hash: r.seal.hash.clone(),
        })
    }

    /// Compares a served log with this pin. The log is append-only (a
    /// recovery supersedes by appending), so any difference is a fork.
    pub fn check(&self, served: &[SealedKeyRecord]) -> PinCheck {
        let served_len = served.len() as u64;
        if served_len < self.length {
            return PinCheck::Rollback {
                pinned: self.length,
                served: served_len,
            };
        }
        let at = &served[(self.length - 1) as usize].seal.hash;
        if *at != self.head_hash {
            return PinCheck::Fork {
                index: self.length - 1,
                pinned: self.head_hash.clone(),
                served: at.clone(),
            };
        }
        PinCheck::Consistent
    }
}
