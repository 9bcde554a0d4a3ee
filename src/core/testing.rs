//! Capsules for the crate's unit tests (compiled only for them): one
//! builder, so each test states only what is particular about its capsule
//! and starts from the same valid one. Everything starts from the spec's
//! example, `tests/vectors/spec_example_capsule.json`, the capsule the
//! conformance vectors pin; the integration tests' twin of this module is
//! `tests/support/capsules.rs` (they cannot see `#[cfg(test)]` items), with
//! the same functions over `serde_json::Value`.
//!
//! Member order is kept as written (the core's [`Json`] is ordered), so a
//! test that prints a capsule sees the example's order.

use crate::core::json::{parse_str, Json};
use std::fmt::Display;

/// The spec's example capsule, as text.
pub(crate) const EXAMPLE: &str = include_str!("../../tests/vectors/spec_example_capsule.json");

/// The agent id the example is written for.
pub(crate) const EXAMPLE_AGENT: &str =
    "3b2f0d7c3a6d5f4c1c8b2a1a9f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e";

/// The spec's example capsule, as it is: valid and scanner-clean, with
/// every optional section filled in.
pub(crate) fn example() -> Json {
    parse_str(EXAMPLE).expect("the spec example parses")
}

/// The spec's example, owned by `agent` (an agent id, or anything that
/// prints as one).
pub(crate) fn example_for(agent: impl Display) -> Json {
    with(example(), "agent_id", agent.to_string())
}

/// The smallest valid capsule for `agent`: `schema_version`, `agent_id`
/// and the example's `policy` (900 tokens, 8 objectives), nothing else.
pub(crate) fn minimal(agent: impl Display) -> Json {
    let Json::Object(members) = example_for(agent) else {
        unreachable!("the spec example is an object")
    };
    Json::Object(
        members
            .into_iter()
            .filter(|(k, _)| matches!(k.as_str(), "schema_version" | "agent_id" | "policy"))
            .collect(),
    )
}

/// `capsule` with its top-level member `name` set to `value`: replaced
/// where it stands, or appended when the capsule has none.
pub(crate) fn with(mut capsule: Json, name: &str, value: impl Into<Json>) -> Json {
    let Json::Object(members) = &mut capsule else {
        panic!("not a capsule object: {capsule:?}")
    };
    let value = value.into();
    match members.iter_mut().find(|(k, _)| k == name) {
        Some((_, v)) => *v = value,
        None => members.push((name.to_string(), value)),
    }
    capsule
}

/// `text` parsed: for the member values a test spells out as JSON.
pub(crate) fn json(text: &str) -> Json {
    parse_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::validate::validate_capsule;

    #[test]
    fn every_builder_gives_a_valid_capsule() {
        let agent = "ab".repeat(32);
        for c in [example(), example_for(&agent), minimal(&agent)] {
            assert!(validate_capsule(&c).is_ok(), "{c:?}");
        }
        assert_eq!(
            example().get("agent_id").unwrap().as_str(),
            Some(EXAMPLE_AGENT)
        );
        let m = minimal(&agent);
        let names: Vec<&str> = m
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(names, ["schema_version", "agent_id", "policy"]);
        assert_eq!(m.get("agent_id").unwrap().as_str(), Some(agent.as_str()));
    }

    #[test]
    fn with_replaces_in_place_or_appends() {
        let c = with(minimal("x"), "agent_id", "y");
        assert_eq!(
            c.as_object().unwrap()[1],
            ("agent_id".into(), Json::from("y"))
        );
        let c = with(c, "self_motto", "m");
        assert_eq!(c.as_object().unwrap().last().unwrap().0, "self_motto");
    }
}
