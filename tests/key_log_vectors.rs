//! Key-log conformance vectors: `tests/vectors/keys/*.json`, one scenario per
//! file, so other implementations can check their key-log acceptance and
//! verifier against ours (`docs/PROTOCOL.md` §14).
//!
//! A scenario is a list of submissions to one agent's `POST keys.json`, each
//! with its time, the envelope seq it carries (if any), and the outcome
//! specified **here, by hand** (`New`, `AlreadyApplied`, or the reason code);
//! the writes the agent's history holds and the other agents that exist;
//! then the sealed log it ends with and verifier cases on that log (tampered
//! records, rollback and fork against a pin). The test replays every
//! scenario through the core and fails when the core disagrees with a
//! specified outcome; with `npm run regen` (or `SELFCAP_REGEN=1 cargo test
//! --test key_log_vectors`) it writes the files, and it fails when files and
//! list drift apart (docs/GENERATED.md).

mod support;

use self_capsule::core::crypto::{AgentId, AgentKey};
use self_capsule::core::history::{Keyring, ServiceKey};
use self_capsule::core::json::{parse_str, Json};
use self_capsule::core::key_log::{
    verify_key_log, Accepted, Change, Digest, KeyEvent, KeyLog, LastGood, Pin, PinCheck,
    RotationAuthority, Signatures, Submission, Supersedes, WriteLookup, Writes, DEFAULT_WINDOW_SEC,
};
use self_capsule::core::reason::ReasonCode;
use self_capsule::core::time::rfc3339;
use serde_json::{json, Value};
use std::path::PathBuf;
use support::generated::check_or_write;

/// RFC 8032 §7.1 TEST 2's seed seals, as in the history vectors.
const SERVICE_SEED: &str = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb";
const T0: u64 = 1_770_681_600_000;
const HOUR: u64 = 3_600_000;
/// 2^53 - 1: the seq a thief burns to brick an identity without a key log.
const MAX_SEQ: u64 = 9_007_199_254_740_991;

fn key(n: u8) -> AgentKey {
    AgentKey::from_seed(&[n; 32])
}
fn service() -> ServiceKey {
    AgentKey::from_seed(&hex::decode(SERVICE_SEED).unwrap().try_into().unwrap())
}
fn ring() -> Keyring {
    Keyring::new(Some(&service().public_key()), &[])
}
fn cursor(seq: u64) -> String {
    format!("sha256:{seq:064x}")
}

/// What a step expects, specified by hand.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    New,
    AlreadyApplied,
    Refused(ReasonCode),
}

/// An event to build against the log as it stands at that step.
enum Ev {
    Inception {
        next: u8,
        recovery: Option<u8>,
    },
    Rotation {
        authority: RotationAuthority,
        revealed: u8,
        current: u8,
        next: u8,
        recovery: Option<u8>,
    },
    Recommit {
        current: u8,
        next: u8,
        recovery: Option<u8>,
    },
}

struct Step {
    hours: u64,
    ev: Ev,
    /// Edits after building (before signing): supersede an event, dispute after a seq, stale place.
    supersedes: Option<u64>,
    disputes_after: Option<u64>,
    stale_by: u64,
    /// Resubmit the exact bytes of the step with this number instead.
    again: Option<usize>,
    envelope_seq: Option<u64>,
    expect: Expect,
}

fn step(hours: u64, ev: Ev, expect: Expect) -> Step {
    Step {
        hours,
        ev,
        supersedes: None,
        disputes_after: None,
        stale_by: 0,
        again: None,
        envelope_seq: None,
        expect,
    }
}

fn rot(revealed: u8, current: u8, next: u8) -> Ev {
    Ev::Rotation {
        authority: RotationAuthority::Next,
        revealed,
        current,
        next,
        recovery: None,
    }
}

struct Scenario {
    name: &'static str,
    description: &'static str,
    /// The outgoing key's retained writes: (key_index, seq).
    writes: Vec<(u64, u64)>,
    other_agents: Vec<u8>,
    steps: Vec<Step>,
}

struct History<'a>(&'a Scenario);

impl Writes for History<'_> {
    fn lookup(&self, key_index: u64, seq: u64) -> WriteLookup {
        if self.0.writes.contains(&(key_index, seq)) {
            WriteLookup::Found(cursor(seq))
        } else {
            WriteLookup::Missing
        }
    }
    fn is_other_agent(&self, id: &AgentId) -> bool {
        self.0
            .other_agents
            .iter()
            .any(|&n| key(n).agent_id() == *id)
    }
}

fn scenarios() -> Vec<Scenario> {
    use Expect::*;
    use ReasonCode::*;
    let incept = || {
        step(
            0,
            Ev::Inception {
                next: 2,
                recovery: None,
            },
            New,
        )
    };
    let incept_with_recovery = || {
        step(
            0,
            Ev::Inception {
                next: 2,
                recovery: Some(50),
            },
            New,
        )
    };
    vec![
        Scenario {
            name: "routine_rotation",
            description: "inception by the genesis key, then two routine rotations with the committed next keys",
            writes: vec![],
            other_agents: vec![],
            steps: vec![incept(), step(1, rot(2, 2, 3), New), step(2, rot(3, 7, 8), New)],
        },
        Scenario {
            name: "inception_by_another_key",
            description: "an inception signed by a key that is not the genesis key",
            writes: vec![],
            other_agents: vec![],
            steps: vec![step(0, Ev::Inception { next: 2, recovery: None }, Refused(AgentId)), ],
        },
        Scenario {
            name: "leaked_key_rotates_to_itself",
            description: "a thief holding only the current key cannot rotate, to itself or to its own key; the owner's rotation then succeeds",
            writes: vec![],
            other_agents: vec![],
            steps: vec![
                incept(),
                step(1, rot(1, 1, 66), Refused(RotationNotCommitted)),
                step(1, rot(66, 66, 67), Refused(RotationNotCommitted)),
                step(2, rot(2, 2, 3), New),
            ],
        },
        Scenario {
            name: "replayed_and_stale_events",
            description: "the exact bytes of an accepted event again are applied once; an event built on an old head is stale; two rotations racing on one previous_hash: one wins",
            writes: vec![],
            other_agents: vec![],
            steps: vec![
                incept(),
                step(1, rot(2, 2, 3), New),
                Step { again: Some(1), ..step(1, rot(2, 2, 3), AlreadyApplied) },
                Step { stale_by: 1, ..step(2, rot(2, 2, 4), Refused(KeyEventStale)) },
            ],
        },
        Scenario {
            name: "key_and_commitment_reuse",
            description: "rotating to the genesis key, to another agent's genesis key, or to a revealed key; committing a used key, the same digest twice, or next = recovery",
            writes: vec![],
            other_agents: vec![99],
            steps: vec![
                incept(),
                step(1, rot(2, 1, 3), Refused(KeyReused)),
                step(1, rot(2, 99, 3), Refused(KeyReused)),
                step(1, rot(2, 2, 2), Refused(CommitmentReused)),
                step(1, rot(2, 2, 1), Refused(CommitmentReused)),
                step(1, Ev::Rotation { authority: RotationAuthority::Next, revealed: 2, current: 2, next: 3, recovery: Some(3) }, Refused(CommitmentReused)),
                step(1, rot(2, 2, 3), New),
                step(2, rot(3, 2, 4), Refused(KeyReused)),
                step(2, Ev::Recommit { current: 2, next: 3, recovery: None }, Refused(CommitmentReused)),
            ],
        },
        Scenario {
            name: "seq_burn_then_recovery",
            description: "a thief with the current key wrote up to seq 2^53-1; the owner rotates with the next key, disputing everything after its last good write (seq 4), and its capsule (seq 5) commits with the event",
            writes: vec![(0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, MAX_SEQ)],
            other_agents: vec![],
            steps: vec![
                incept(),
                Step { disputes_after: Some(4), ..step(1, rot(2, 2, 3), Refused(BadKeyEvent)) },
                Step { disputes_after: Some(4), envelope_seq: Some(4), ..step(1, rot(2, 2, 3), Refused(ReplaySeq)) },
                Step { disputes_after: Some(6), envelope_seq: Some(7), ..step(1, rot(2, 2, 3), Refused(BadKeyEvent)) },
                Step { disputes_after: Some(4), envelope_seq: Some(5), ..step(1, rot(2, 2, 3), New) },
            ],
        },
        Scenario {
            name: "recommit_race",
            description: "a thief with the current key recommits to its own next key; the owner's rotation inside the window cancels it, and the thief's key never rotates",
            writes: vec![],
            other_agents: vec![],
            steps: vec![
                incept(),
                step(1, Ev::Recommit { current: 1, next: 66, recovery: None }, New),
                step(2, Ev::Recommit { current: 1, next: 67, recovery: None }, Refused(RecommitPending)),
                step(70, rot(2, 2, 3), New),
                step(300, rot(66, 66, 68), Refused(RotationNotCommitted)),
            ],
        },
        Scenario {
            name: "recommit_matures",
            description: "an owner who lost only the next key recommits; after the 72 h window the old next key no longer rotates and the recommitted one does",
            writes: vec![],
            other_agents: vec![],
            steps: vec![
                incept(),
                step(1, Ev::Recommit { current: 1, next: 5, recovery: None }, New),
                step(73, rot(2, 2, 6), Refused(RotationNotCommitted)),
                step(73, rot(5, 5, 6), New),
            ],
        },
        Scenario {
            name: "recovery_inside_the_window",
            description: "current and next keys both stolen: the thief rotates with the next key; the operator's recovery key supersedes that rotation 70 h later, voiding the thief's key",
            writes: vec![],
            other_agents: vec![],
            steps: vec![
                incept_with_recovery(),
                step(1, rot(2, 66, 67), New),
                Step { supersedes: Some(1), ..step(71, Ev::Rotation { authority: RotationAuthority::Recovery, revealed: 77, current: 51, next: 52, recovery: Some(53) }, Refused(RotationNotCommitted)) },
                Step { supersedes: Some(1), ..step(71, Ev::Rotation { authority: RotationAuthority::Recovery, revealed: 50, current: 51, next: 52, recovery: Some(53) }, New) },
            ],
        },
        Scenario {
            name: "recovery_after_the_window",
            description: "the same recovery 74 h after the rotation it would supersede: the window is closed",
            writes: vec![],
            other_agents: vec![],
            steps: vec![
                incept_with_recovery(),
                step(1, rot(2, 66, 67), New),
                Step { supersedes: Some(1), ..step(75, Ev::Rotation { authority: RotationAuthority::Recovery, revealed: 50, current: 51, next: 52, recovery: None }, Refused(RecoveryWindowClosed)) },
            ],
        },
    ]
}

/// Replays a scenario through the core; returns its file's JSON and the log.
fn replay(s: &Scenario) -> (Value, KeyLog) {
    let id = key(1).agent_id();
    let mut log = KeyLog::empty(id.clone());
    let mut sent: Vec<Json> = Vec::new();
    let mut steps = Vec::new();
    for (n, st) in s.steps.iter().enumerate() {
        let now = T0 + st.hours * HOUR;
        let records = log.records();
        let index = records.len() as u64 - st.stale_by.min(records.len() as u64);
        let previous_hash = index
            .checked_sub(1)
            .map(|i| records[i as usize].seal.hash.clone());
        let digest = |n: u8| Digest::of_key(&key(n).public_key());
        let blank = Signatures {
            revealed: None,
            public: [0; 64],
        };
        let event = if let Some(k) = st.again {
            sent[k].clone()
        } else {
            // (the key made current, the next key, the recovery key, what changes, the revealed key)
            let (current, next, recovery, change, revealed) = match &st.ev {
                Ev::Inception { next, recovery } => {
                    // "inception_by_another_key" signs with key 3 as the genesis key.
                    let genesis = if s.name == "inception_by_another_key" {
                        3
                    } else {
                        1
                    };
                    let change = Change::Inception {
                        recovery_window_sec: DEFAULT_WINDOW_SEC,
                    };
                    (genesis, *next, *recovery, change, None)
                }
                Ev::Rotation {
                    authority,
                    revealed,
                    current,
                    next,
                    recovery,
                } => {
                    let change = Change::Rotation {
                        authority: *authority,
                        revealed_key: key(*revealed).public_key(),
                        supersedes: st.supersedes.map(|i| Supersedes {
                            index: i,
                            hash: log.records()[i as usize].seal.hash.clone(),
                        }),
                        disputes_after: st.disputes_after.map(|seq| LastGood {
                            seq,
                            cursor: cursor(seq),
                        }),
                    };
                    (*current, *next, *recovery, change, Some(*revealed))
                }
                Ev::Recommit {
                    current,
                    next,
                    recovery,
                } => (*current, *next, *recovery, Change::Recommit, None),
            };
            let ev = KeyEvent {
                agent_id: id.clone(),
                index,
                previous_hash,
                public_key: key(current).public_key(),
                next_key_digest: digest(next),
                recovery_key_digest: recovery.map(digest),
                change,
                signatures: blank,
            };
            let signer = current;
            ev.sign(&key(signer), revealed.map(key).as_ref()).to_json()
        };
        sent.push(event.clone());
        let sub = Submission {
            event: event.clone(),
            envelope_seq: st.envelope_seq,
        };
        let got = match log.accept(&sub, now, 1, &History(s), &service()) {
            Ok(Accepted::New { record, state, .. }) => {
                log.push(*record, *state);
                Expect::New
            }
            Ok(Accepted::AlreadyApplied { .. }) => Expect::AlreadyApplied,
            Err(r) => Expect::Refused(r.code),
        };
        assert_eq!(got, st.expect, "{} step {n}", s.name);
        let (status, code) = match st.expect {
            Expect::New | Expect::AlreadyApplied => (200, Value::Null),
            Expect::Refused(c) => (c.http_status(), c.as_str().into()),
        };
        steps.push(json!({
            "now": rfc3339(now),
            "event": serde_json::to_value(&event).unwrap(),
            "envelope_seq": st.envelope_seq,
            "expect": {
                "status": status,
                "reason_code": code,
                "applied": match st.expect { Expect::New => "new", Expect::AlreadyApplied => "already_applied", _ => "none" },
            },
        }));
    }
    let file = json!({
        "description": s.description,
        "agent_id": id.as_str(),
        "service_keyring": serde_json::to_value(ring()).unwrap(),
        "history_length": 1,
        "writes": s.writes.iter().map(|&(k, seq)| json!({"key_index": k, "seq": seq, "cursor": cursor(seq)})).collect::<Vec<_>>(),
        "other_agents": s.other_agents.iter().map(|&n| key(n).agent_id().as_str().to_owned()).collect::<Vec<_>>(),
        "steps": steps,
        "log": serde_json::to_value(log.records()).unwrap(),
        "keys": serde_json::to_value(log.summary(T0 + 400 * HOUR)).unwrap(),
        "keys_at": rfc3339(T0 + 400 * HOUR),
    });
    (file, log)
}

/// Verifier cases on the routine scenario's log, each specified by hand.
fn verifier_file(log: &KeyLog) -> Value {
    let records: Vec<Value> = log
        .records()
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    let as_json = |v: &[Value]| -> Vec<Json> {
        v.iter()
            .map(|r| parse_str(&r.to_string()).unwrap())
            .collect()
    };
    let at = T0 + 400 * HOUR;
    let mut cases = Vec::new();
    let mut case = |name: &str, log: Vec<Value>, valid: bool, first: Option<(u64, &str)>| {
        let (report, _) = verify_key_log(&key(1).agent_id(), &as_json(&log), &ring(), at);
        assert_eq!(report.valid, valid, "{name}: {:?}", report.failures);
        if let Some((index, check)) = first {
            assert_eq!(
                (report.failures[0].index, report.failures[0].check.as_str()),
                (Some(index), check),
                "{name}"
            );
        }
        cases.push(json!({
            "name": name,
            "log": log,
            "expect": {"valid": valid, "first_failure": first.map(|(i, c)| json!({"index": i, "check": c}))},
        }));
    };
    case("intact", records.clone(), true, None);
    let mut edited = records.clone();
    edited[1]["history_sequence"] = json!(9);
    case("edited_history_sequence", edited, false, Some((1, "seal")));
    let mut edited = records.clone();
    edited[2]["event"]["next_key_digest"] = json!("0".repeat(64));
    case(
        "edited_event_under_its_seal",
        edited,
        false,
        Some((2, "seal")),
    );
    let mut reordered = records.clone();
    reordered.swap(1, 2);
    case("reordered", reordered, false, Some((1, "key_event_stale")));
    let mut dropped = records.clone();
    dropped.remove(1);
    case(
        "middle_event_dropped",
        dropped,
        false,
        Some((1, "key_event_stale")),
    );

    let pin = Pin::of(log.records()).unwrap();
    let served = &log.records()[..2];
    assert!(matches!(
        pin.check(served),
        PinCheck::Rollback {
            pinned: 3,
            served: 2
        }
    ));
    json!({
        "description": "the offline verifier on the routine_rotation log (sealed by the service_keyring), and a client's pin against a truncated copy",
        "agent_id": key(1).agent_id().as_str(),
        "service_keyring": serde_json::to_value(ring()).unwrap(),
        "cases": cases,
        "pin": {"pinned": {"length": pin.length, "head_hash": pin.head_hash}, "served_length": 2, "expect": "rollback"},
    })
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/keys")
}

#[test]
fn key_log_files_match_the_specified_cases() {
    let mut routine = None;
    for s in scenarios() {
        let (file, log) = replay(&s);
        if s.name == "routine_rotation" {
            routine = Some(log);
        }
        let text = serde_json::to_string_pretty(&file).unwrap() + "\n";
        check_or_write(
            &dir().join(format!("{}.json", s.name)),
            &text,
            "cargo test --test key_log_vectors",
        );
    }
    let text = serde_json::to_string_pretty(&verifier_file(&routine.unwrap())).unwrap() + "\n";
    check_or_write(
        &dir().join("verifier.json"),
        &text,
        "cargo test --test key_log_vectors",
    );
}

#[test]
fn no_stray_files() {
    let mut expected: Vec<String> = scenarios()
        .iter()
        .map(|s| format!("{}.json", s.name))
        .collect();
    expected.push("verifier.json".into());
    expected.sort();
    let mut found: Vec<String> = std::fs::read_dir(dir())
        .map(|d| {
            d.map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    if !support::generated::regen() {
        assert_eq!(found, expected);
    }
}
