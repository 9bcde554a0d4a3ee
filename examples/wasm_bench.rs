//! The `cargo bench` write-check path, as a plain program that also builds for
//! `wasm32-wasip1`, so the same work can be timed inside V8 (Node's WASI),
//! the engine a Worker runs in. Run with `scripts/wasm-bench.sh`.
//! Prints one JSON line per case: mean microseconds per operation, and for
//! the write check its ratio to a floor measured in the same process (SHA-256
//! of the same 4 KB canonical bytes, i.e. the cursor every read needs), so
//! figures from different machines and engines compare.

#[path = "../benches/fixtures.rs"]
mod fixtures;

use self_capsule::core::crypto::{AgentId, AgentKey};
use self_capsule::core::history::HistoryIndex;
use self_capsule::core::history::{Keyring, ServiceKey};
use self_capsule::core::jcs;
use self_capsule::core::json;
use self_capsule::core::key_log::{
    Accepted, Change, Digest, KeyEvent, KeyLog, RotationAuthority, Signatures, Submission,
    WriteLookup, Writes, DEFAULT_WINDOW_SEC,
};
use self_capsule::core::limits::TierTable;
use self_capsule::core::mirror::{Commit, Mirror};
use self_capsule::core::safety;
use self_capsule::core::write::{check, precheck, AgentState, Signature, Signer, Terms};
use std::hint::black_box;
use std::time::Instant;

fn time(name: &str, iters: u32, f: impl FnMut() -> bool) -> f64 {
    time_vs(name, iters, None, f)
}

/// Like `time`, also printing the ratio to `floor_us` when given.
fn time_vs(name: &str, iters: u32, floor_us: Option<f64>, mut f: impl FnMut() -> bool) -> f64 {
    // Warm up (JIT tiers, regex compilation, allocator).
    for _ in 0..iters / 10 + 1 {
        assert!(f(), "{name} failed");
    }
    let start = Instant::now();
    for _ in 0..iters {
        black_box(f());
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / iters as f64;
    match floor_us {
        Some(floor) => println!(
            r#"{{"case":"{name}","iters":{iters},"us_per_op":{us:.1},"x_floor":{:.1}}}"#,
            us / floor
        ),
        None => println!(r#"{{"case":"{name}","iters":{iters},"us_per_op":{us:.1}}}"#),
    }
    us
}

fn main() {
    let iters: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(300);
    let tiers = TierTable::default();
    let state = AgentState::default();
    let agent = fixtures::key().agent_id();

    // The very first check in a fresh instance also compiles the scanner's
    // regexes: a Worker's cold-start cost.
    let example = fixtures::put_body(&fixtures::example_capsule());
    let start = Instant::now();
    assert!(check(
        &state,
        &example,
        &agent,
        fixtures::NOW_MS,
        &tiers,
        &Terms::genesis(Signature::Verify)
    )
    .is_ok());
    let cold = start.elapsed().as_secs_f64() * 1e6;
    println!(r#"{{"case":"write_check/first_call_cold","iters":1,"us_per_op":{cold:.1}}}"#);

    let canonical = jcs::canonicalize(&fixtures::maximal_capsule());
    let floor = time("floor/sha256_of_4kb_canonical", iters * 10, || {
        jcs::cursor_of_canonical(black_box(canonical.as_bytes())).len() == 71
    });
    for (name, capsule) in [
        ("write_check/spec_example", fixtures::example_capsule()),
        ("write_check/maximal_4kb", fixtures::maximal_capsule()),
    ] {
        let body = fixtures::put_body(&capsule);
        time_vs(name, iters, Some(floor), || {
            check(
                &state,
                black_box(&body),
                &agent,
                fixtures::NOW_MS,
                &tiers,
                &Terms::genesis(Signature::Verify),
            )
            .is_ok()
        });
    }
    // An accepted write as the agent's object runs it: the check (signature
    // prechecked by the Worker), then sealing it into a chain with a retained
    // version before it and the verify report updated.
    {
        let service = ServiceKey::from_seed(&[7; 32]);
        let ring = Keyring::new(Some(&service.public_key()), &[]);
        let key = fixtures::key();
        let first = fixtures::put_body(&fixtures::example_capsule());
        let mut before = AgentState::default();
        let c = check(
            &before,
            &first,
            &agent,
            fixtures::NOW_MS,
            &tiers,
            &Terms::genesis(Signature::Verify),
        )
        .expect("first write");
        let index = before
            .commit_sealed(c, fixtures::NOW_MS, &tiers, &service, &ring, None, None)
            .expect("genesis")
            .history;
        let mut second = fixtures::maximal_capsule();
        if let json::Json::Object(entries) = &mut second {
            entries.retain(|(k, _)| k != "self_motto");
        }
        let body = jcs::canonicalize(&key.sign_envelope(2, &second)).into_bytes();
        let now = fixtures::NOW_MS + 3_600_000;
        time_vs(
            "accept/check_and_seal_maximal_4kb",
            iters,
            Some(floor),
            || {
                let mut state = before.clone();
                let c = check(
                    &state,
                    &body,
                    &agent,
                    now,
                    &tiers,
                    &Terms::genesis(Signature::Prechecked),
                )
                .expect("second write");
                state
                    .commit_sealed(c, now, &tiers, &service, &ring, Some(index.clone()), None)
                    .is_ok()
            },
        );
    }
    // The write `npm run bench` sends (the spec example, a free agent with
    // one retained version), split as the Worker and the agent's object run
    // it: the Worker's stateless precheck (parse, envelope, Ed25519 verify);
    // then everything the object computes between its storage read and its
    // KV puts: the stored texts parsed, the check (signature prechecked),
    // the seal, and the texts it commits and mirrors serialised.
    {
        let service = ServiceKey::from_seed(&[7; 32]);
        let ring = Keyring::new(Some(&service.public_key()), &[]);
        let key = fixtures::key();
        let mut before = AgentState::default();
        let first = check(
            &before,
            &fixtures::put_body(&fixtures::example_capsule()),
            &agent,
            fixtures::NOW_MS,
            &tiers,
            &Terms::genesis(Signature::Verify),
        )
        .expect("first write");
        let sealed = before
            .commit_sealed(first, fixtures::NOW_MS, &tiers, &service, &ring, None, None)
            .expect("genesis");
        let state_text = serde_json::to_string(&before).expect("state");
        let index_text = serde_json::to_string(&sealed.history).expect("index");
        let body =
            serde_json::to_vec(&key.sign_envelope(2, &fixtures::example_capsule())).expect("body");
        let now = fixtures::NOW_MS + 3_600_000;
        time_vs(
            "write/worker_precheck_spec_example",
            iters,
            Some(floor),
            || precheck(black_box(&body), &agent, Signer::Genesis).is_ok(),
        );
        time_vs("write/object_cpu_spec_example", iters, Some(floor), || {
            let mut state: AgentState = serde_json::from_str(&state_text).expect("state");
            let index: HistoryIndex = serde_json::from_str(&index_text).expect("index");
            let c = check(
                &state,
                black_box(&body),
                &agent,
                now,
                &tiers,
                &Terms::genesis(Signature::Prechecked),
            )
            .expect("second write");
            let s = state
                .commit_sealed(c, now, &tiers, &service, &ring, Some(index), None)
                .expect("sealed");
            let entry = s.entry.stored_text();
            let index = serde_json::to_string(&s.history).expect("index");
            let record = serde_json::to_string(&s.record).expect("record");
            let mut mirror = Mirror::default();
            mirror.push_commit(&Commit {
                agent: &agent,
                sequence: s.history.head.length - 1,
                entry: &entry,
                index: &index,
                record: &record,
                pruned: &s.pruned,
            });
            let committed = [
                serde_json::to_string(&state).expect("state"),
                serde_json::to_string(&mirror).expect("mirror"),
            ];
            black_box((committed, record));
            s.record.seq == 2
        });
    }
    // What a write of an agent with a key log pays on top (§14): its object
    // loads the stored log and folds it (every event checked again, its
    // signatures included) before the write check. Logs of 2 events (an
    // inception and a rotation, the usual) and 256 (the cap).
    for events in [2u32, 256] {
        let stored = key_log_of(events);
        let agent = bench_key(0).public_key().agent_id();
        time_vs(
            &format!("key_log/load_and_fold_{events}_events"),
            if events > 2 { iters / 10 + 1 } else { iters },
            Some(floor),
            || {
                KeyLog::from_stored(agent.clone(), Some(&stored))
                    .is_ok_and(|l| l.records().len() == events as usize)
            },
        );
    }
    time("read/parse_and_cursor_maximal_4kb", iters * 10, || {
        json::parse_str(black_box(&canonical))
            .map(|v| jcs::cursor(&v))
            .is_ok()
    });

    // Text the scanner's lazy automata have never seen (every write brings
    // some): each line of the public corpus once, as its own string. Reported
    // per 4 KB, the free tier's largest capsule.
    let corpus = include_str!("../tests/corpus/public/benign.tsv");
    let lines: Vec<&str> = corpus
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split('\t').nth(2))
        .collect();
    let bytes: usize = lines.iter().map(|l| l.len()).sum();
    let start = Instant::now();
    for line in &lines {
        black_box(safety::scan(&json::Json::from(*line)));
    }
    let per_4kb = start.elapsed().as_secs_f64() * 1e6 * 4096.0 / bytes as f64;
    println!(
        r#"{{"case":"scan/unseen_text_per_4kb","iters":1,"us_per_op":{per_4kb:.1},"x_floor":{:.1}}}"#,
        per_4kb / floor
    );
}

/// The key log's `i`-th key (from a seed that is `i + 1` in little endian).
fn bench_key(i: u32) -> AgentKey {
    let mut seed = [0u8; 32];
    seed[..4].copy_from_slice(&(i + 1).to_le_bytes());
    AgentKey::from_seed(&seed)
}

/// The stored text of a key log of `events` events: an inception, then
/// next-key rotations, each revealing the key the one before committed (and
/// making it current), accepted an hour apart.
fn key_log_of(events: u32) -> String {
    struct NoWrites;
    impl Writes for NoWrites {
        fn lookup(&self, _: u64, _: u64) -> WriteLookup {
            WriteLookup::Missing
        }
        fn is_other_agent(&self, _: &AgentId) -> bool {
            false
        }
    }
    let service = ServiceKey::from_seed(&[7; 32]);
    let key = bench_key;
    let genesis = key(0);
    let agent = genesis.public_key().agent_id();
    let mut log = KeyLog::empty(agent.clone());
    for i in 0..events {
        let current = key(i);
        let change = match i {
            0 => Change::Inception {
                recovery_window_sec: DEFAULT_WINDOW_SEC,
            },
            _ => Change::Rotation {
                authority: RotationAuthority::Next,
                revealed_key: current.public_key(),
                supersedes: None,
                disputes_after: None,
            },
        };
        let event = KeyEvent {
            agent_id: agent.clone(),
            index: u64::from(i),
            previous_hash: log.records().last().map(|r| r.seal.hash.clone()),
            public_key: current.public_key(),
            next_key_digest: Digest::of_key(&key(i + 1).public_key()),
            recovery_key_digest: None,
            change,
            signatures: Signatures {
                revealed: None,
                public: [0; 64],
            },
        }
        .sign(&current, None);
        let sub = Submission {
            event: event.to_json(),
            envelope_seq: None,
        };
        let now = fixtures::NOW_MS + u64::from(i) * 3_600_000;
        match log.accept(&sub, now, 1, &NoWrites, &service) {
            Ok(Accepted::New { record, state, .. }) => log.push(*record, *state),
            other => panic!("event {i}: {other:?}"),
        }
    }
    log.stored_text()
}
