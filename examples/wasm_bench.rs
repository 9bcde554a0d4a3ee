//! The `cargo bench` write-check path, as a plain program that also builds for
//! `wasm32-wasip1`, so the same work can be timed inside V8 (Node's WASI),
//! the engine a Worker runs in. Run with `scripts/wasm-bench.sh`.
//! Prints one JSON line per case: mean microseconds per operation.

#[path = "../benches/fixtures.rs"]
mod fixtures;

use self_capsule::core::jcs;
use self_capsule::core::json;
use self_capsule::core::limits::TierTable;
use self_capsule::core::write::{check, AgentState};
use std::hint::black_box;
use std::time::Instant;

fn time(name: &str, iters: u32, mut f: impl FnMut() -> bool) {
    // Warm up (JIT tiers, regex compilation, allocator).
    for _ in 0..iters / 10 + 1 {
        assert!(f(), "{name} failed");
    }
    let start = Instant::now();
    for _ in 0..iters {
        black_box(f());
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / iters as f64;
    println!(r#"{{"case":"{name}","iters":{iters},"us_per_op":{us:.1}}}"#);
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
    assert!(check(&state, &example, &agent, fixtures::NOW_MS, &tiers).is_ok());
    let cold = start.elapsed().as_secs_f64() * 1e6;
    println!(r#"{{"case":"write_check/first_call_cold","iters":1,"us_per_op":{cold:.1}}}"#);

    for (name, capsule) in [
        ("write_check/spec_example", fixtures::example_capsule()),
        ("write_check/maximal_4kb", fixtures::maximal_capsule()),
    ] {
        let body = fixtures::put_body(&capsule);
        time(name, iters, || {
            check(&state, black_box(&body), &agent, fixtures::NOW_MS, &tiers).is_ok()
        });
    }
    let canonical = jcs::canonicalize(&fixtures::maximal_capsule());
    time("read/parse_and_cursor_maximal_4kb", iters * 10, || {
        json::parse_str(black_box(&canonical))
            .map(|v| jcs::cursor(&v))
            .is_ok()
    });
}
