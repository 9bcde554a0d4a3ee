//! `cargo bench`: the full write-check path (parse, canonicalise, validate,
//! scan, verify) for the spec's example and for a maximal 4 KB capsule, and
//! the cursor computation a read needs. The same work in wasm:
//! `scripts/wasm-bench.sh`.

#[path = "fixtures.rs"]
mod fixtures;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use self_capsule::core::jcs;
use self_capsule::core::json;
use self_capsule::core::limits::TierTable;
use self_capsule::core::write::{check, AgentState, Signature, Terms};
use std::hint::black_box;

fn write_check(c: &mut Criterion) {
    let tiers = TierTable::default();
    let state = AgentState::default();
    let agent = fixtures::key().agent_id();
    let mut group = c.benchmark_group("write_check");
    for (name, capsule) in [
        ("spec_example", fixtures::example_capsule()),
        ("maximal_4kb", fixtures::maximal_capsule()),
    ] {
        let body = fixtures::put_body(&capsule);
        assert!(
            check(
                &state,
                &body,
                &agent,
                fixtures::NOW_MS,
                &tiers,
                &Terms::genesis(Signature::Verify)
            )
            .is_ok(),
            "{name} must be accepted"
        );
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                check(
                    black_box(&state),
                    black_box(&body),
                    &agent,
                    fixtures::NOW_MS,
                    &tiers,
                    &Terms::genesis(Signature::Verify),
                )
                .is_ok()
            })
        });
    }
    group.finish();
}

fn read_cursor(c: &mut Criterion) {
    let canonical = jcs::canonicalize(&fixtures::maximal_capsule());
    c.bench_function("read/parse_and_cursor_maximal_4kb", |b| {
        b.iter(|| jcs::cursor(&json::parse_str(black_box(&canonical)).expect("parses")))
    });
    c.bench_function("read/cursor_of_canonical_maximal_4kb", |b| {
        b.iter(|| jcs::cursor_of_canonical(black_box(canonical.as_bytes())))
    });
}

criterion_group!(benches, write_check, read_cursor);
criterion_main!(benches);
