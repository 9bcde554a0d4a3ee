//! The key log's rules, case by case: the attack table of
//! `docs/design/key-rotation.md` ("The attack cases"), at the level of the
//! core (the Worker's tests drive the same cases over HTTP).

use super::*;
use crate::core::crypto::{AgentId, AgentKey};
use crate::core::history::{Keyring, ServiceKey};
use crate::core::json::Json;
use crate::core::reason::ReasonCode;

const T0: u64 = 1_780_000_000_000;
const HOUR: u64 = 3_600_000;

fn key(n: u8) -> AgentKey {
    AgentKey::from_seed(&[n; 32])
}

fn digest(k: &AgentKey) -> Digest {
    Digest::of_key(&k.public_key())
}

fn service() -> ServiceKey {
    ServiceKey::from_seed(&[200; 32])
}

fn keyring() -> Keyring {
    Keyring::new(Some(&service().public_key()), &[])
}

/// A history with no retained writes and no other agents.
struct NoWrites;

impl Writes for NoWrites {
    fn lookup(&self, _: u64, _: u64) -> WriteLookup {
        WriteLookup::Missing
    }
    fn is_other_agent(&self, _: &AgentId) -> bool {
        false
    }
}

/// The outgoing key wrote seqs 1..=last, cursor "sha256:<seq repeated>".
struct WroteUpTo(u64);

fn cursor_of(seq: u64) -> String {
    format!("sha256:{:064x}", seq)
}

impl Writes for WroteUpTo {
    fn lookup(&self, _: u64, seq: u64) -> WriteLookup {
        if (1..=self.0).contains(&seq) {
            WriteLookup::Found(cursor_of(seq))
        } else {
            WriteLookup::Missing
        }
    }
    fn is_other_agent(&self, id: &AgentId) -> bool {
        // Key 99 is another agent's genesis key.
        *id == key(99).agent_id()
    }
}

/// An agent whose genesis key is key(1), its log, and the time.
struct Agent {
    id: AgentId,
    log: KeyLog,
    now: u64,
    history_len: u64,
}

impl Agent {
    fn new() -> Agent {
        Agent {
            id: key(1).agent_id(),
            log: KeyLog::empty(key(1).agent_id()),
            now: T0,
            history_len: 1,
        }
    }

    fn next_index(&self) -> u64 {
        self.log.records().len() as u64
    }

    fn head(&self) -> Option<String> {
        self.log.records().last().map(|r| r.seal.hash.clone())
    }

    /// The next event of this log: `current` made the key, committing
    /// `next` (and `recovery`), changing `change`, signed by `current` (and
    /// `revealed`).
    fn event(
        &self,
        current: &AgentKey,
        next: &AgentKey,
        recovery: Option<&AgentKey>,
        change: Change,
        revealed: Option<&AgentKey>,
    ) -> KeyEvent {
        KeyEvent {
            agent_id: self.id.clone(),
            index: self.next_index(),
            previous_hash: self.head(),
            public_key: current.public_key(),
            next_key_digest: digest(next),
            recovery_key_digest: recovery.map(digest),
            change,
            signatures: Signatures {
                revealed: None,
                public: [0; 64],
            },
        }
        .sign(current, revealed)
    }

    fn inception(
        &self,
        genesis: &AgentKey,
        next: &AgentKey,
        recovery: Option<&AgentKey>,
    ) -> KeyEvent {
        let change = Change::Inception {
            recovery_window_sec: DEFAULT_WINDOW_SEC,
        };
        // Always event 0, whatever the log holds (one test builds it on a
        // longer log, for a round trip).
        let mut e = self.event(genesis, next, recovery, change, None);
        e.index = 0;
        e.previous_hash = None;
        e.sign(genesis, None)
    }

    /// A rotation revealing `revealed`, making `current` the key, committing `next`.
    fn rotation(
        &self,
        authority: RotationAuthority,
        revealed: &AgentKey,
        current: &AgentKey,
        next: &AgentKey,
        recovery: Option<&AgentKey>,
    ) -> KeyEvent {
        let change = Change::Rotation {
            authority,
            revealed_key: revealed.public_key(),
            supersedes: None,
            disputes_after: None,
        };
        self.event(current, next, recovery, change, Some(revealed))
    }

    fn recommit(
        &self,
        current: &AgentKey,
        next: &AgentKey,
        recovery: Option<&AgentKey>,
    ) -> KeyEvent {
        self.event(current, next, recovery, Change::Recommit, None)
    }

    fn submit_with(
        &mut self,
        event: &Json,
        envelope_seq: Option<u64>,
        writes: &dyn Writes,
    ) -> Result<Accepted, ReasonCode> {
        let sub = Submission {
            event: event.clone(),
            envelope_seq,
        };
        let out = self
            .log
            .accept(&sub, self.now, self.history_len, writes, &service())
            .map_err(|r| r.code)?;
        if let Accepted::New { record, state, .. } = &out {
            self.log.push((**record).clone(), (**state).clone());
        }
        Ok(out)
    }

    fn submit(&mut self, event: &KeyEvent) -> Result<Accepted, ReasonCode> {
        self.submit_with(&event.to_json(), None, &NoWrites)
    }

    fn state(&self) -> &KeyState {
        self.log.state().expect("a log")
    }

    fn verify(&self) -> KeyLogReport {
        let events: Vec<Json> = self
            .log
            .records()
            .iter()
            .map(|r| crate::core::json::parse_str(&serde_json::to_string(r).unwrap()).unwrap())
            .collect();
        verify_key_log(&self.id, &events, &keyring(), self.now).0
    }

    /// Incepted with next key 2 (and recovery key 50 when asked).
    fn incepted(recovery: bool) -> Agent {
        let mut a = Agent::new();
        let e = a.inception(&key(1), &key(2), recovery.then(|| key(50)).as_ref());
        assert!(matches!(a.submit(&e), Ok(Accepted::New { .. })));
        a
    }
}

/// `e` (a recovery rotation) made to supersede event `index` of `log`,
/// signed again by `current` and `revealed`.
fn superseding(
    mut e: KeyEvent,
    log: &KeyLog,
    index: u64,
    current: &AgentKey,
    revealed: &AgentKey,
) -> KeyEvent {
    if let Change::Rotation { supersedes, .. } = &mut e.change {
        *supersedes = Some(Supersedes {
            index,
            hash: log.records()[index as usize].seal.hash.clone(),
        });
    }
    e.sign(current, Some(revealed))
}

fn is_new(r: Result<Accepted, ReasonCode>) -> bool {
    matches!(r, Ok(Accepted::New { .. }))
}

#[test]
fn an_inception_by_the_genesis_key_starts_the_log() {
    let a = Agent::incepted(false);
    let s = a.state();
    assert_eq!(s.key_index(), 0);
    assert_eq!(s.current(), &key(1).public_key());
    let summary = s.summary(a.now);
    assert_eq!(summary.index, 0);
    assert!(summary.next_committed && !summary.recovery_committed);
    assert_eq!(summary.final_at, None);
    assert!(a.verify().valid);
}

#[test]
fn an_inception_by_any_other_key_is_refused() {
    let mut a = Agent::new();
    let mut e = a.inception(&key(1), &key(2), None);
    e.public_key = key(3).public_key();
    let e = e.sign(&key(3), None);
    assert_eq!(a.submit(&e).unwrap_err(), ReasonCode::AgentId);
    assert!(a.log.state().is_none());
}

#[test]
fn the_current_key_alone_cannot_rotate_even_to_itself() {
    let mut a = Agent::incepted(false);
    // A thief with key 1 (current) but not key 2 (next).
    let to_itself = a.rotation(RotationAuthority::Next, &key(1), &key(1), &key(66), None);
    assert_eq!(
        a.submit(&to_itself).unwrap_err(),
        ReasonCode::RotationNotCommitted
    );
    let to_own = a.rotation(RotationAuthority::Next, &key(66), &key(66), &key(67), None);
    assert_eq!(
        a.submit(&to_own).unwrap_err(),
        ReasonCode::RotationNotCommitted
    );
    // The log is unchanged, and the owner's rotation then succeeds.
    assert_eq!(a.state().length, 1);
    let owner = a.rotation(RotationAuthority::Next, &key(2), &key(2), &key(3), None);
    assert!(is_new(a.submit(&owner)));
    assert_eq!(a.state().current(), &key(2).public_key());
    assert_eq!(a.state().key_index(), 1);
    assert!(a.verify().valid);
}

#[test]
fn a_rotation_may_make_a_fresh_key_current_and_signs_with_both() {
    let mut a = Agent::incepted(false);
    let e = a.rotation(RotationAuthority::Next, &key(2), &key(7), &key(8), None);
    assert!(e.signatures.revealed.is_some());
    assert!(is_new(a.submit(&e)));
    assert_eq!(a.state().current(), &key(7).public_key());
    // Key 2 was revealed: it is used, and cannot become current later.
    let back = a.rotation(RotationAuthority::Next, &key(8), &key(2), &key(9), None);
    assert_eq!(a.submit(&back).unwrap_err(), ReasonCode::KeyReused);
}

#[test]
fn the_same_bytes_again_are_applied_once_and_a_stale_event_is_refused() {
    let mut a = Agent::incepted(false);
    let e = a.rotation(RotationAuthority::Next, &key(2), &key(2), &key(3), None);
    assert!(is_new(a.submit(&e)));
    assert!(matches!(
        a.submit(&e),
        Ok(Accepted::AlreadyApplied { index: 1 })
    ));
    assert_eq!(a.state().length, 2);
    // Built on the old head: stale.
    let mut stale = a.rotation(RotationAuthority::Next, &key(3), &key(3), &key(4), None);
    stale.index = 1;
    stale.previous_hash = Some(a.log.records()[0].seal.hash.clone());
    let stale = stale.sign(&key(3), None);
    assert_eq!(a.submit(&stale).unwrap_err(), ReasonCode::KeyEventStale);
}

#[test]
fn two_rotations_racing_on_one_previous_hash_one_wins() {
    let mut a = Agent::incepted(false);
    let first = a.rotation(RotationAuthority::Next, &key(2), &key(2), &key(3), None);
    let second = a.rotation(RotationAuthority::Next, &key(2), &key(2), &key(4), None);
    assert!(is_new(a.submit(&first)));
    assert_eq!(a.submit(&second).unwrap_err(), ReasonCode::KeyEventStale);
}

#[test]
fn another_agents_path_edited_agent_id_and_bad_signatures() {
    let mut a = Agent::incepted(false);
    let mut e = a.rotation(RotationAuthority::Next, &key(2), &key(2), &key(3), None);
    e.agent_id = key(9).agent_id();
    // Edited after signing: refused as another agent's before any signature.
    assert_eq!(a.submit(&e).unwrap_err(), ReasonCode::BadKeyEvent);
    let mut e = a.rotation(RotationAuthority::Next, &key(2), &key(2), &key(3), None);
    e.next_key_digest = digest(&key(4));
    assert_eq!(a.submit(&e).unwrap_err(), ReasonCode::BadSignature);
}

#[test]
fn keys_and_commitments_are_never_reused() {
    let mut a = Agent::incepted(false);
    // To the genesis key.
    let e = a.rotation(RotationAuthority::Next, &key(2), &key(1), &key(3), None);
    assert_eq!(a.submit(&e).unwrap_err(), ReasonCode::KeyReused);
    // To another agent's genesis key.
    let e = a.rotation(RotationAuthority::Next, &key(2), &key(99), &key(3), None);
    assert_eq!(
        a.submit_with(&e.to_json(), None, &WroteUpTo(0))
            .unwrap_err(),
        ReasonCode::KeyReused
    );
    // Committing the key just revealed, the genesis key, or next == recovery.
    for (next, recovery) in [(2u8, None), (1, None), (3, Some(3u8))] {
        let e = a.rotation(
            RotationAuthority::Next,
            &key(2),
            &key(2),
            &key(next),
            recovery.map(key).as_ref(),
        );
        assert_eq!(
            a.submit(&e).unwrap_err(),
            ReasonCode::CommitmentReused,
            "next {next}"
        );
    }
    // A next digest committed once is spent, even before its key is
    // revealed: key 3, committed by this rotation, cannot be recommitted.
    let e = a.rotation(RotationAuthority::Next, &key(2), &key(2), &key(3), None);
    assert!(is_new(a.submit(&e)));
    let again = a.recommit(&key(2), &key(3), None);
    assert_eq!(a.submit(&again).unwrap_err(), ReasonCode::CommitmentReused);
}

#[test]
fn a_recommit_matures_after_the_window_unless_a_rotation_lands_first() {
    // Cancelled: a thief with the current key recommits to its own next key;
    // the owner rotates with the committed next key inside the window.
    let mut a = Agent::incepted(false);
    let thief = a.recommit(&key(1), &key(66), None);
    assert!(is_new(a.submit(&thief)));
    let pending = a.state().summary(a.now).pending_recommit.expect("pending");
    assert_eq!(
        pending.matures_at,
        crate::core::time::rfc3339(T0 + 72 * HOUR)
    );
    let twice = a.recommit(&key(1), &key(67), None);
    assert_eq!(a.submit(&twice).unwrap_err(), ReasonCode::RecommitPending);
    a.now += 71 * HOUR;
    let owner = a.rotation(RotationAuthority::Next, &key(2), &key(2), &key(3), None);
    assert!(is_new(a.submit(&owner)));
    assert!(a.state().pending_recommit.is_none());
    // The thief's key 66 never became the next key.
    a.now += 10 * 24 * HOUR;
    let e = a.rotation(RotationAuthority::Next, &key(66), &key(66), &key(68), None);
    assert_eq!(a.submit(&e).unwrap_err(), ReasonCode::RotationNotCommitted);
    assert!(a.verify().valid);

    // Matured: an owner who lost only the next key recommits and waits.
    let mut b = Agent::incepted(false);
    let lost = b.recommit(&key(1), &key(5), None);
    assert!(is_new(b.submit(&lost)));
    b.now += 72 * HOUR;
    // The old next key no longer rotates; the recommitted one does.
    let old = b.rotation(RotationAuthority::Next, &key(2), &key(2), &key(6), None);
    assert_eq!(
        b.submit(&old).unwrap_err(),
        ReasonCode::RotationNotCommitted
    );
    let new = b.rotation(RotationAuthority::Next, &key(5), &key(5), &key(6), None);
    assert!(is_new(b.submit(&new)));
    assert!(b.verify().valid);
}

#[test]
fn a_recovery_supersedes_a_next_key_rotation_inside_the_window_only() {
    // Next and current keys both taken (one disk): the thief rotates with the
    // next key; the operator's recovery key supersedes it inside 72 h.
    let mut a = Agent::incepted(true);
    let thief = a.rotation(RotationAuthority::Next, &key(2), &key(66), &key(67), None);
    assert!(is_new(a.submit(&thief)));
    let summary = a.state().summary(a.now);
    assert_eq!(
        summary.final_at,
        Some(crate::core::time::rfc3339(T0 + 72 * HOUR))
    );
    a.now += 70 * HOUR;
    let recovery = superseding(
        a.rotation(
            RotationAuthority::Recovery,
            &key(50),
            &key(51),
            &key(52),
            Some(&key(53)),
        ),
        &a.log,
        1,
        &key(51),
        &key(50),
    );
    assert!(is_new(a.submit(&recovery)));
    let s = a.state();
    assert_eq!(s.current(), &key(51).public_key());
    assert!(s.epochs[1].void, "the thief's key is void");
    assert!(
        s.is_disputed(1, 1),
        "everything the thief's key signed is disputed"
    );
    assert!(!s.is_disputed(0, 5), "the genesis key's writes are not");
    assert!(a.verify().valid);

    // After the window the same recovery is refused.
    let mut b = Agent::incepted(true);
    let thief = b.rotation(RotationAuthority::Next, &key(2), &key(66), &key(67), None);
    assert!(is_new(b.submit(&thief)));
    b.now += 73 * HOUR;
    let late = superseding(
        b.rotation(
            RotationAuthority::Recovery,
            &key(50),
            &key(51),
            &key(52),
            None,
        ),
        &b.log,
        1,
        &key(51),
        &key(50),
    );
    assert_eq!(
        b.submit(&late).unwrap_err(),
        ReasonCode::RecoveryWindowClosed
    );
    // A recovery key that was not committed gets nothing, in or out of the window.
    let wrong = superseding(
        b.rotation(
            RotationAuthority::Recovery,
            &key(77),
            &key(51),
            &key(52),
            None,
        ),
        &b.log,
        1,
        &key(51),
        &key(77),
    );
    assert_eq!(
        b.submit(&wrong).unwrap_err(),
        ReasonCode::RotationNotCommitted
    );
}

#[test]
fn a_disputing_rotation_names_the_last_good_write_and_carries_the_owners_capsule() {
    let mut a = Agent::incepted(false);
    let with = |a: &Agent, last: u64, cursor: String| {
        let mut e = a.rotation(RotationAuthority::Next, &key(2), &key(2), &key(3), None);
        if let Change::Rotation { disputes_after, .. } = &mut e.change {
            *disputes_after = Some(LastGood { seq: last, cursor });
        }
        e.sign(&key(2), None).to_json()
    };
    let good = with(&a, 4, cursor_of(4));
    // The thief pushed seq to 2^53-1; the owner's last good write was seq 4.
    let writes = WroteUpTo(9_007_199_254_740_991);
    assert_eq!(
        a.submit_with(&good, None, &writes).unwrap_err(),
        ReasonCode::BadKeyEvent,
        "no envelope"
    );
    assert_eq!(
        a.submit_with(&good, Some(4), &writes).unwrap_err(),
        ReasonCode::ReplaySeq
    );
    let wrong_cursor = with(&a, 4, cursor_of(5));
    assert_eq!(
        a.submit_with(&wrong_cursor, Some(5), &writes).unwrap_err(),
        ReasonCode::BadKeyEvent
    );
    assert_eq!(
        a.submit_with(&good, Some(5), &WroteUpTo(3)).unwrap_err(),
        ReasonCode::BadKeyEvent,
        "never written"
    );
    assert!(is_new(a.submit_with(&good, Some(5), &writes)));
    let s = a.state();
    assert!(s.is_disputed(0, 5) && s.is_disputed(0, 9_007_199_254_740_991));
    assert!(!s.is_disputed(0, 4) && !s.is_disputed(1, 5));
    assert_eq!(s.summary(a.now).disputed, 1);
}

#[test]
fn the_reader_refuses_what_a_kind_does_not_have() {
    let a = Agent::incepted(false);
    let e = a.rotation(RotationAuthority::Next, &key(2), &key(2), &key(3), None);
    let mut j = e.to_json();
    if let Json::Object(m) = &mut j {
        m.push(("extra".into(), Json::Null));
    }
    assert!(KeyEvent::from_json(&j).unwrap_err().contains("extra"));
    // A next-key rotation that supersedes.
    let mut e = e.clone();
    if let Change::Rotation { supersedes, .. } = &mut e.change {
        *supersedes = Some(Supersedes {
            index: 0,
            hash: "0".repeat(64),
        });
    }
    assert!(KeyEvent::from_json(&e.to_json()).is_err());
    // Round trip of every kind.
    for ev in [
        a.inception(&key(1), &key(2), Some(&key(50))),
        a.rotation(
            RotationAuthority::Recovery,
            &key(50),
            &key(51),
            &key(52),
            None,
        ),
        a.recommit(&key(1), &key(5), None),
    ] {
        assert_eq!(KeyEvent::from_json(&ev.to_json()).unwrap(), ev);
    }
}

#[test]
fn the_log_is_capped() {
    let mut a = Agent::incepted(false);
    // Rotate with fresh keys until the cap.
    let k = |n: u16| {
        AgentKey::from_seed(&{
            let mut s = [7u8; 32];
            s[..2].copy_from_slice(&n.to_be_bytes());
            s
        })
    };
    let mut current = key(2);
    let mut n = 1000u16;
    let first = a.rotation(RotationAuthority::Next, &current, &current, &k(n), None);
    assert!(is_new(a.submit(&first)));
    while a.state().length < MAX_KEY_EVENTS {
        current = k(n);
        let e = a.rotation(RotationAuthority::Next, &current, &current, &k(n + 1), None);
        assert!(is_new(a.submit(&e)));
        n += 1;
    }
    current = k(n);
    let e = a.rotation(RotationAuthority::Next, &current, &current, &k(n + 1), None);
    assert_eq!(a.submit(&e).unwrap_err(), ReasonCode::KeyLogFull);
    // The whole log still folds and verifies from its records.
    assert!(KeyLog::from_records(a.id.clone(), a.log.records().to_vec()).is_ok());
    assert!(a.verify().valid);
}

#[test]
fn the_verifier_catches_tampering_and_the_pin_catches_rollback_and_forks() {
    let mut a = Agent::incepted(false);
    let e = a.rotation(RotationAuthority::Next, &key(2), &key(2), &key(3), None);
    assert!(is_new(a.submit(&e)));
    let pin = Pin::of(a.log.records()).unwrap();
    assert_eq!(pin.check(a.log.records()), PinCheck::Consistent);
    // Rollback: the served log lost its tail.
    assert!(matches!(
        pin.check(&a.log.records()[..1]),
        PinCheck::Rollback {
            pinned: 2,
            served: 1
        }
    ));
    // Fork: a different sealed event at the pinned index.
    let mut b = Agent::incepted(false);
    let other = b.rotation(RotationAuthority::Next, &key(2), &key(2), &key(4), None);
    assert!(is_new(b.submit(&other)));
    assert!(matches!(
        pin.check(b.log.records()),
        PinCheck::Fork { index: 1, .. }
    ));

    // Tampering with a sealed record breaks its seal.
    let mut json: Vec<Json> = a
        .log
        .records()
        .iter()
        .map(|r| crate::core::json::parse_str(&serde_json::to_string(r).unwrap()).unwrap())
        .collect();
    let good = verify_key_log(&a.id, &json, &keyring(), a.now).0;
    assert!(good.valid, "{:?}", good.failures);
    assert_eq!(good.keys.as_ref().unwrap().index, 1);
    if let Json::Object(m) = &mut json[1] {
        for (k, v) in m.iter_mut() {
            if k == "history_sequence" {
                *v = Json::from(7u64);
            }
        }
    }
    let bad = verify_key_log(&a.id, &json, &keyring(), a.now).0;
    assert!(!bad.valid);
    assert_eq!(bad.failures[0].check, "seal");
    // Another agent's log.
    let other = verify_key_log(&key(9).agent_id(), &json[..1], &keyring(), a.now).0;
    assert!(!other.valid);
}

#[test]
fn a_summary_made_at_its_event_reads_later_as_the_state_would_say_then() {
    // head.json stores the summary of the last event and evaluates it when
    // read: it must agree with folding the state at that later time.
    let mut a = Agent::incepted(true);
    let rotated = a.rotation(
        RotationAuthority::Next,
        &key(2),
        &key(2),
        &key(3),
        Some(&key(50)),
    );
    assert!(is_new(a.submit(&rotated)));
    let recommit = a.recommit(&key(2), &key(9), None);
    assert!(is_new(a.submit(&recommit)));
    let made = a.state().summary(a.now);
    assert!(made.final_at.is_some() && made.pending_recommit.is_some());
    assert!(made.recovery_committed);
    for later in [0, HOUR, 71 * HOUR, 72 * HOUR, 73 * HOUR, 30 * 24 * HOUR] {
        let now = a.now + later;
        assert_eq!(made.as_of(now), a.state().summary(now), "{later} ms later");
    }
    let matured = made.as_of(a.now + 72 * HOUR);
    assert!(matured.pending_recommit.is_none());
    assert!(
        !matured.recovery_committed,
        "the recommit dropped the recovery key"
    );
}

/// The refusal (code and detail) of `event` submitted to `a`.
fn refusal(a: &Agent, event: &KeyEvent) -> (ReasonCode, String) {
    let sub = Submission {
        event: event.to_json(),
        envelope_seq: None,
    };
    let r = a
        .log
        .accept(&sub, a.now, a.history_len, &NoWrites, &service())
        .expect_err("refused");
    (r.code, r.detail_or_code().to_owned())
}

#[test]
fn an_event_signed_by_no_key_of_the_log_is_refused_alike_whatever_the_log_holds() {
    let none = Agent::new();
    let mut long = Agent::incepted(true);
    let e = long.rotation(RotationAuthority::Next, &key(2), &key(2), &key(3), None);
    assert!(is_new(long.submit(&e)));
    // Strangers' keys 70..: a rotation at each place, a recovery, a recommit.
    let forged = |a: &Agent, index: u64| {
        let mut events = vec![
            a.rotation(RotationAuthority::Next, &key(70), &key(71), &key(72), None),
            a.rotation(
                RotationAuthority::Recovery,
                &key(73),
                &key(73),
                &key(72),
                None,
            ),
            a.recommit(&key(74), &key(72), None),
        ];
        for e in &mut events {
            e.index = index;
            e.previous_hash = Some("ab".repeat(32));
        }
        events
            .into_iter()
            .map(|e| {
                let revealed = e.revealed_key().cloned();
                let signer = [70u8, 71, 73, 74]
                    .into_iter()
                    .map(key)
                    .find(|k| k.public_key() == e.public_key)
                    .unwrap();
                let revealed = revealed.and_then(|r| {
                    [70u8, 73]
                        .into_iter()
                        .map(key)
                        .find(|k| k.public_key() == r)
                });
                e.sign(&signer, revealed.as_ref())
            })
            .collect::<Vec<_>>()
    };
    let expected = refusal(&none, &forged(&none, 1)[0]);
    assert_eq!(expected.0, ReasonCode::RotationNotCommitted);
    for index in [1, 2, 3, 200] {
        for (n, a) in [&none, &long].into_iter().enumerate() {
            for e in forged(a, index) {
                let got = refusal(a, &e);
                assert_eq!(got, expected, "agent {n}, index {index}, {}", e.kind());
            }
        }
    }
}

#[test]
fn the_agents_own_keys_pass_the_gate_and_meet_the_log_rules() {
    let mut a = Agent::incepted(true);
    // The committed next key, built on a stale place: told it is stale.
    let mut stale = a.rotation(RotationAuthority::Next, &key(2), &key(2), &key(3), None);
    stale.index = 4;
    let stale = stale.sign(&key(2), None);
    assert_eq!(refusal(&a, &stale).0, ReasonCode::KeyEventStale);
    // The stale answer does not describe the log.
    assert!(!refusal(&a, &stale).1.contains(&a.state().head_hash));
    // The committed recovery key (key 50) passes the gate.
    let rec = a.rotation(
        RotationAuthority::Recovery,
        &key(50),
        &key(51),
        &key(52),
        None,
    );
    assert!(is_new(a.submit(&rec)));
    // The genesis key, rotated out, is still the agent's: it meets the
    // authority rule, not the gate.
    let old = a.recommit(&key(1), &key(60), None);
    let (code, _) = refusal(&a, &old);
    assert_eq!(code, ReasonCode::RotationNotCommitted);
    assert_ne!(
        refusal(&a, &old).1,
        refusal(&Agent::new(), &a.recommit(&key(80), &key(60), None)).1
    );
}

#[test]
fn the_summary_after_an_event_is_that_events_not_the_logs_since() {
    let mut a = Agent::incepted(false);
    let e = a.rotation(RotationAuthority::Next, &key(2), &key(2), &key(3), None);
    assert!(is_new(a.submit(&e)));
    let first = a.log.summary_after(0).unwrap();
    assert_eq!(first.length, 1);
    assert_eq!(first.index, 0);
    assert_eq!(first.public_key, key(1).public_key().to_hex());
    assert_eq!(first.head_hash, a.log.records()[0].seal.hash);
    assert_eq!(a.log.summary_after(1).unwrap().length, 2);
    assert_eq!(a.log.summary_after(2), None);
}
