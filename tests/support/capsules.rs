//! Capsules for the integration tests: one builder, so each test states
//! only what is particular about its capsule and starts from the same
//! valid one. Everything starts from the spec's example,
//! `tests/vectors/spec_example_capsule.json`, the capsule the conformance
//! vectors pin. The crate's unit tests have the same functions over the
//! core's `Json` in `src/core/testing.rs` (integration tests cannot see
//! `#[cfg(test)]` items, so each side has its own).
//!
//! These return `serde_json::Value`, which the tests vary with `v["k"] = …`
//! and hand to the core through their `to_json` (its members come out
//! sorted; hashes and signatures are over RFC 8785 bytes, so order never
//! matters to them).

use serde_json::Value;
use std::fmt::Display;

/// The spec's example capsule, as text.
pub const EXAMPLE: &str = include_str!("../vectors/spec_example_capsule.json");

/// The agent id the example is written for.
pub const EXAMPLE_AGENT: &str = "3b2f0d7c3a6d5f4c1c8b2a1a9f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e";

/// The spec's example capsule, as it is: valid and scanner-clean, with
/// every optional section filled in.
pub fn example() -> Value {
    serde_json::from_str(EXAMPLE).expect("the spec example parses")
}

/// The spec's example, owned by `agent` (an agent id, or anything that
/// prints as one).
pub fn example_for(agent: impl Display) -> Value {
    let mut v = example();
    v["agent_id"] = Value::from(agent.to_string());
    v
}

/// The smallest valid capsule for `agent`: `schema_version`, `agent_id`
/// and the example's `policy` (900 tokens, 8 objectives), nothing else.
pub fn minimal(agent: impl Display) -> Value {
    let mut v = example_for(agent);
    v.as_object_mut()
        .expect("the spec example is an object")
        .retain(|k, _| matches!(k.as_str(), "schema_version" | "agent_id" | "policy"));
    v
}
