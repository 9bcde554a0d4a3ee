//! Inputs shared by the native benches (`cargo bench`) and the wasm bench
//! (`examples/wasm_bench.rs`), so both measure the same work.

use self_capsule::core::crypto::AgentKey;
use self_capsule::core::jcs;
use self_capsule::core::json::{parse_str, Json};

pub const EXAMPLE: &str = include_str!("../tests/vectors/spec_example_capsule.json");
pub const NOW_MS: u64 = 1_770_681_600_000;

pub fn key() -> AgentKey {
    AgentKey::from_seed(&[42; 32])
}

fn set(v: &mut Json, key: &str, value: Json) {
    if let Json::Object(entries) = v {
        entries.retain(|(k, _)| k != key);
        entries.push((key.to_owned(), value));
    }
}

/// The spec's example capsule, owned by `key()`.
pub fn example_capsule() -> Json {
    let mut v = parse_str(EXAMPLE).expect("example parses");
    set(&mut v, "agent_id", Json::from(key().agent_id().as_str()));
    v
}

/// Plain prose of exactly `n` characters (passes the safety scanner).
fn prose(n: usize, salt: usize) -> String {
    const WORDS: &[&str] = &[
        "review", "pending", "module", "tests", "batch", "retry", "schema", "summary", "notes",
        "queue", "merge", "draft", "report", "cache", "index", "stable",
    ];
    let mut s = String::new();
    let mut i = salt;
    while s.len() < n {
        s.push_str(WORDS[i % WORDS.len()]);
        s.push(' ');
        i += 7;
    }
    s.truncate(n);
    s.trim_end().to_string() + &"x".repeat(n - s.trim_end().len())
}

/// A schema-valid, scanner-clean capsule whose canonical form is as close to
/// 4096 bytes as possible without exceeding it: the free tier's worst case.
pub fn maximal_capsule() -> Json {
    let mut v = example_capsule();
    // Longest checkpoints that still leave the capsule under the cap, then
    // the motto fills what is left.
    let mut checkpoint = 200;
    loop {
        let objectives: Vec<Json> = (0..8)
            .map(|i| {
                parse_str(&format!(
                    r#"{{"id":"objective-{i}","status":"in_progress","priority":"high","title":"{}","checkpoint":"{}"}}"#,
                    prose(120, i),
                    prose(checkpoint, i + 3)
                ))
                .expect("objective parses")
            })
            .collect();
        set(&mut v, "objectives", Json::Array(objectives));
        set(&mut v, "self_motto", Json::from(""));
        if jcs::canonicalize(&v).len() <= 4096 || checkpoint == 0 {
            break;
        }
        checkpoint -= 1;
    }
    let mut motto = 160;
    loop {
        set(&mut v, "self_motto", Json::from(prose(motto, 1)));
        if jcs::canonicalize(&v).len() <= 4096 || motto == 0 {
            break v;
        }
        motto -= 1;
    }
}

/// A signed PUT body for `capsule` at seq 1.
pub fn put_body(capsule: &Json) -> Vec<u8> {
    serde_json::to_vec(&key().sign_envelope(1, capsule)).expect("serialises")
}
