//! The `cargo bench` write-check path, as a plain program that also builds for
//! `wasm32-wasip1`, so the same work can be timed inside V8 (Node's WASI),
//! the engine a Worker runs in. Run with `scripts/wasm-bench.sh`.
//! Prints one JSON line per case: mean microseconds per operation, and for
//! the write check its ratio to a floor measured in the same process (SHA-256
//! of the same 4 KB canonical bytes, i.e. the cursor every read needs), so
//! figures from different machines and engines compare.

#[path = "../benches/fixtures.rs"]
mod fixtures;

use self_capsule::core::history::{Keyring, ServiceKey};
use self_capsule::core::jcs;
use self_capsule::core::json;
use self_capsule::core::limits::TierTable;
use self_capsule::core::safety;
use self_capsule::core::write::{check, AgentState, Signature};
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
        Signature::Verify
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
                Signature::Verify,
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
            Signature::Verify,
        )
        .expect("first write");
        let index = before
            .commit_sealed(c, fixtures::NOW_MS, &tiers, &service, &ring, None)
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
                let c = check(&state, &body, &agent, now, &tiers, Signature::Prechecked)
                    .expect("second write");
                state
                    .commit_sealed(c, now, &tiers, &service, &ring, Some(index.clone()))
                    .is_ok()
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
