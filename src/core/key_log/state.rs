//! The key state an agent's log folds to, and the rules each event must pass
//! against the state before it. The service's acceptance and the offline
//! verifier both call [`KeyState::check`] and [`KeyState::apply`] with the
//! event's sealed time, so a window or a recommit's maturity is decided the
//! same way by both.

use super::event::{Change, KeyEvent, RotationAuthority};
pub use super::served::{KeysSummary, PendingSummary};
use super::{Digest, MAX_KEY_EVENTS};
use crate::core::crypto::{AgentId, PublicKey};
use crate::core::reason::{ReasonCode, Refusal};
use crate::core::time::rfc3339;
use crate::core::write::Signature;
use serde::Serialize;
use std::collections::BTreeSet;

/// One key's time as the agent's current key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Epoch {
    /// The key.
    pub key: PublicKey,
    /// The event that made it current.
    pub event_index: u64,
    /// The first history sequence it may sign (the chain length when the
    /// event was accepted).
    pub history_sequence: u64,
    /// When the event was accepted (unix ms, sealed).
    pub accepted_ms: u64,
    /// A next-key rotation made while a recovery key was committed is
    /// provisional until then: a recovery may supersede it before.
    pub final_ms: Option<u64>,
    /// Voided by a recovery that superseded the event (every write it signed
    /// is disputed).
    pub void: bool,
}

/// Writes that do not count as the owner's: a key's versions after its last
/// good write, or all of a voided key's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Dispute {
    /// The key index whose writes are disputed.
    pub key_index: u64,
    /// Its writes with a higher `seq` are disputed; `None`: all of them.
    pub after_seq: Option<u64>,
}

/// A recommit waiting to mature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingRecommit {
    /// The recommit event.
    pub event_index: u64,
    /// When it takes effect unless a rotation lands first (unix ms).
    pub matures_ms: u64,
    /// The next-key digest it commits.
    pub next_key_digest: Digest,
    /// The recovery digest it commits.
    pub recovery_key_digest: Option<Digest>,
}

/// The key state after some prefix of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    /// The agent.
    pub agent_id: AgentId,
    /// Events applied.
    pub length: u64,
    /// The sealed hash of the last event applied.
    pub head_hash: String,
    /// The recovery window fixed at inception (seconds).
    pub window_sec: u64,
    /// Every key the agent had, by key index (0: the genesis key); the last
    /// is current.
    pub epochs: Vec<Epoch>,
    /// The committed next key.
    pub next_key_digest: Digest,
    /// The committed recovery key.
    pub recovery_key_digest: Option<Digest>,
    /// A recommit waiting to mature.
    pub pending_recommit: Option<PendingRecommit>,
    /// Disputed writes.
    pub disputes: Vec<Dispute>,
    /// Keys that served this agent (none may again).
    used_keys: BTreeSet<[u8; 32]>,
    /// Next-key digests ever committed, and digests of every used key (none
    /// may be committed again).
    used_digests: BTreeSet<Digest>,
    /// Recovery-key digests ever committed (a recovery may reveal one
    /// committed before the event it supersedes).
    recovery_digests: BTreeSet<Digest>,
}

/// What an accepted event needs from the rest of the log to be checked: the
/// state before an earlier event (a recovery's `supersedes`) and that
/// event's sealed hash, kind and time.
pub trait Earlier {
    /// The state before event `index` (settled at that event's time), its
    /// sealed hash, whether it is a next-key rotation, and when it was
    /// accepted (unix ms). `None` if there is no such event.
    fn before(&self, index: u64) -> Option<(Option<KeyState>, String, bool, u64)>;
}

fn refuse(code: ReasonCode, detail: impl Into<String>) -> Refusal {
    Refusal::new(code, detail)
}

impl KeyState {
    /// The current key.
    pub fn current(&self) -> &PublicKey {
        &self
            .epochs
            .last()
            .expect("a state has its genesis epoch")
            .key
    }

    /// The current key's index.
    pub fn key_index(&self) -> u64 {
        self.epochs.len() as u64 - 1
    }

    /// The index of `key` among this agent's keys, if it ever was one.
    pub fn index_of(&self, key: &PublicKey) -> Option<u64> {
        self.epochs
            .iter()
            .position(|e| &e.key == key)
            .map(|i| i as u64)
    }

    /// Whether `key` is one this log names or commits: a key the agent had
    /// (current or rotated out), or one whose digest an event committed as
    /// a next or recovery key. Only an event signed by such a key can be
    /// the agent's; anything else is told nothing about the log.
    pub fn names_or_commits(&self, key: &PublicKey) -> bool {
        let digest = Digest::of_key(key);
        self.used_keys.contains(key.as_bytes())
            || self.used_digests.contains(&digest)
            || self.recovery_digests.contains(&digest)
    }

    /// The index of the key current at chain position `sequence` (the
    /// genesis key's before the first rotation, including before the log).
    pub fn key_index_at(&self, sequence: u64) -> u64 {
        self.epochs
            .iter()
            .rposition(|e| e.history_sequence <= sequence)
            .unwrap_or(0) as u64
    }

    /// Applies a recommit that has matured by `now_ms`.
    pub fn settle(&mut self, now_ms: u64) {
        if let Some(p) = self.pending_recommit {
            if now_ms >= p.matures_ms {
                self.next_key_digest = p.next_key_digest;
                self.recovery_key_digest = p.recovery_key_digest;
                self.pending_recommit = None;
            }
        }
    }

    /// Whether a write with `seq` signed by key index `key_index` is disputed.
    pub fn is_disputed(&self, key_index: u64, seq: u64) -> bool {
        self.disputes
            .iter()
            .any(|d| d.key_index == key_index && d.after_seq.is_none_or(|after| seq > after))
    }

    /// head.json's `keys`, as of `now_ms`.
    pub fn summary(&self, now_ms: u64) -> KeysSummary {
        let mut s = self.clone();
        s.settle(now_ms);
        let current = s.epochs.last().expect("genesis epoch");
        KeysSummary {
            index: s.key_index(),
            public_key: current.key.to_hex(),
            length: s.length,
            head_hash: s.head_hash.clone(),
            next_committed: true,
            recovery_committed: s.recovery_key_digest.is_some(),
            final_at: current.final_ms.filter(|&f| f > now_ms).map(rfc3339),
            pending_recommit: s.pending_recommit.map(|p| PendingSummary {
                matures_at: rfc3339(p.matures_ms),
                recovery_committed: p.recovery_key_digest.is_some(),
            }),
            disputed: {
                let keys: BTreeSet<u64> = s.disputes.iter().map(|d| d.key_index).collect();
                keys.len()
            },
        }
    }

    /// Whether `event` may follow the log whose state is `state` (`None`:
    /// no event yet), accepted at `now_ms`. Checks, in order: the place
    /// (index and previous hash), the cap, the signatures, the authority
    /// (which committed key speaks), the window of a supersede, and that no
    /// key or commitment is used twice. The state must be settled at
    /// `now_ms`. `earlier` serves a recovery's `supersedes`.
    pub fn check(
        state: Option<&KeyState>,
        event: &KeyEvent,
        now_ms: u64,
        earlier: &dyn Earlier,
        sigs: Signature,
    ) -> Result<(), Refusal> {
        let (length, head) = state.map_or((0, None), |s| (s.length, Some(s.head_hash.as_str())));
        if event.index != length || event.previous_hash.as_deref() != head {
            // The log's length and hash are not told: keys.json says them to
            // whoever may read it (a refusal must not describe a private
            // agent's state).
            return Err(refuse(
                ReasonCode::KeyEventStale,
                "index and previous_hash are not the log's next place (its length and its last record's hash, as keys.json serves them)",
            ));
        }
        if length >= MAX_KEY_EVENTS {
            return Err(refuse(
                ReasonCode::KeyLogFull,
                format!("the key log holds its {MAX_KEY_EVENTS} events"),
            ));
        }
        if sigs == Signature::Verify {
            event.check_signatures()?;
        }
        let Some(state) = state else {
            // Index 0 is an inception (the event's reader guarantees it).
            event.check_inception_signer()?;
            return fresh_commitments(event, &BTreeSet::new());
        };
        if event.agent_id != state.agent_id {
            return Err(refuse(
                ReasonCode::BadKeyEvent,
                "agent_id is not this log's agent",
            ));
        }
        match &event.change {
            Change::Inception { .. } => unreachable!("an inception is index 0"),
            Change::Recommit => {
                if event.public_key != *state.current() {
                    return Err(refuse(
                        ReasonCode::RotationNotCommitted,
                        "a recommit is made by the current key",
                    ));
                }
                if let Some(p) = state.pending_recommit {
                    return Err(refuse(
                        ReasonCode::RecommitPending,
                        format!(
                            "the recommit of event {} matures at {}",
                            p.event_index,
                            rfc3339(p.matures_ms)
                        ),
                    ));
                }
                fresh_commitments(event, &state.used_digests)
            }
            Change::Rotation {
                authority,
                revealed_key,
                supersedes,
                disputes_after: _,
            } => {
                let revealed = Digest::of_key(revealed_key);
                let (committed, against) = match (authority, supersedes) {
                    (RotationAuthority::Next, _) => (Some(state.next_key_digest), "next"),
                    (RotationAuthority::Recovery, None) => (state.recovery_key_digest, "recovery"),
                    (RotationAuthority::Recovery, Some(sup)) => {
                        let Some((before, hash, was_next, accepted_ms)) = earlier.before(sup.index)
                        else {
                            return Err(refuse(
                                ReasonCode::BadKeyEvent,
                                format!("supersedes.index {} is not in the log", sup.index),
                            ));
                        };
                        if hash != sup.hash || !was_next {
                            return Err(refuse(
                                ReasonCode::BadKeyEvent,
                                format!(
                                    "supersedes names event {} by a hash it does not have, or an event that is not a next-key rotation",
                                    sup.index
                                ),
                            ));
                        }
                        let committed = before.and_then(|b| b.recovery_key_digest);
                        if committed == Some(revealed)
                            && now_ms.saturating_sub(accepted_ms) > state.window_sec * 1000
                        {
                            return Err(refuse(
                                ReasonCode::RecoveryWindowClosed,
                                format!(
                                    "event {} became final at {}",
                                    sup.index,
                                    rfc3339(accepted_ms + state.window_sec * 1000)
                                ),
                            ));
                        }
                        (committed, "recovery (before the superseded event)")
                    }
                };
                if committed != Some(revealed) {
                    return Err(refuse(
                        ReasonCode::RotationNotCommitted,
                        format!("revealed_key is not the committed {against} key"),
                    ));
                }
                for key in [revealed_key, &event.public_key] {
                    if state.used_keys.contains(key.as_bytes()) {
                        return Err(refuse(
                            ReasonCode::KeyReused,
                            format!("key {} served this agent before", key.to_hex()),
                        ));
                    }
                }
                fresh_commitments(event, &state.used_digests)
            }
        }
    }

    /// The state after `event`, accepted at `now_ms` with sealed hash `hash`
    /// while the history had `history_sequence` entries. `event` must have
    /// passed [`KeyState::check`]; `earlier` as there.
    pub fn apply(
        state: Option<KeyState>,
        event: &KeyEvent,
        hash: &str,
        now_ms: u64,
        history_sequence: u64,
    ) -> KeyState {
        let epoch = |final_ms| Epoch {
            key: event.public_key.clone(),
            event_index: event.index,
            history_sequence,
            accepted_ms: now_ms,
            final_ms,
            void: false,
        };
        let Some(mut s) = state else {
            let Change::Inception {
                recovery_window_sec,
            } = event.change
            else {
                unreachable!("event 0 is an inception")
            };
            let mut used_digests = BTreeSet::from([event.next_key_digest]);
            used_digests.insert(Digest::of_key(&event.public_key));
            let recovery_digests = event.recovery_key_digest.into_iter().collect();
            return KeyState {
                agent_id: event.agent_id.clone(),
                length: 1,
                head_hash: hash.to_owned(),
                window_sec: recovery_window_sec,
                epochs: vec![epoch(None)],
                next_key_digest: event.next_key_digest,
                recovery_key_digest: event.recovery_key_digest,
                pending_recommit: None,
                disputes: Vec::new(),
                used_keys: BTreeSet::from([*event.public_key.as_bytes()]),
                used_digests,
                recovery_digests,
            };
        };
        s.length += 1;
        s.head_hash = hash.to_owned();
        s.recovery_digests.extend(event.recovery_key_digest);
        match &event.change {
            Change::Inception { .. } => unreachable!("an inception is index 0"),
            Change::Recommit => {
                s.pending_recommit = Some(PendingRecommit {
                    event_index: event.index,
                    matures_ms: now_ms + s.window_sec * 1000,
                    next_key_digest: event.next_key_digest,
                    recovery_key_digest: event.recovery_key_digest,
                });
                s.used_digests.insert(event.next_key_digest);
            }
            Change::Rotation {
                authority,
                revealed_key,
                supersedes,
                disputes_after,
            } => {
                let outgoing = s.key_index();
                if let Some(sup) = supersedes {
                    // Every key made current from the superseded event on is
                    // void, and all it signed disputed.
                    for (i, e) in s.epochs.iter_mut().enumerate() {
                        if e.event_index >= sup.index && !e.void {
                            e.void = true;
                            s.disputes.push(Dispute {
                                key_index: i as u64,
                                after_seq: None,
                            });
                        }
                    }
                } else if let Some(last) = disputes_after {
                    s.disputes.push(Dispute {
                        key_index: outgoing,
                        after_seq: Some(last.seq),
                    });
                }
                // A next-key rotation stays supersedable for the window when
                // a recovery key was committed before it.
                let final_ms = (*authority == RotationAuthority::Next
                    && s.recovery_key_digest.is_some())
                .then(|| now_ms + s.window_sec * 1000);
                s.pending_recommit = None;
                s.epochs.push(epoch(final_ms));
                for key in [revealed_key, &event.public_key] {
                    s.used_keys.insert(*key.as_bytes());
                    s.used_digests.insert(Digest::of_key(key));
                }
                s.used_digests.insert(event.next_key_digest);
                s.next_key_digest = event.next_key_digest;
                s.recovery_key_digest = event.recovery_key_digest;
            }
        }
        s
    }
}

/// The event's new commitments are fresh: next and recovery differ, neither
/// is a key or a next-key digest used before, nor the event's own keys. A
/// recovery digest may be carried over unchanged: it enters `used_digests`
/// only when its key is revealed (the operator's key serves until then).
fn fresh_commitments(event: &KeyEvent, used_digests: &BTreeSet<Digest>) -> Result<(), Refusal> {
    let own: Vec<Digest> = std::iter::once(&event.public_key)
        .chain(event.revealed_key())
        .map(Digest::of_key)
        .collect();
    let reused = |d: &Digest| used_digests.contains(d) || own.contains(d);
    if Some(event.next_key_digest) == event.recovery_key_digest {
        return Err(refuse(
            ReasonCode::CommitmentReused,
            "next_key_digest and recovery_key_digest must differ",
        ));
    }
    if reused(&event.next_key_digest) {
        return Err(refuse(
            ReasonCode::CommitmentReused,
            "next_key_digest was committed or used before",
        ));
    }
    if let Some(r) = &event.recovery_key_digest {
        if reused(r) {
            return Err(refuse(
                ReasonCode::CommitmentReused,
                "recovery_key_digest is a key or next-key digest used before",
            ));
        }
    }
    Ok(())
}

impl crate::core::history::AgentKeys for KeyState {
    fn key_at(&self, sequence: u64) -> &PublicKey {
        &self.epochs[self.key_index_at(sequence) as usize].key
    }
    fn disputed(&self, sequence: u64, seq: u64) -> bool {
        self.is_disputed(self.key_index_at(sequence), seq)
    }
}
