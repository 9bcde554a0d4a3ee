//! The JSON Schemas in `schemas/` and the Rust validator must agree.
//!
//! Every capsule vector, and a few thousand deterministic random mutations of
//! the spec's example, go through both `validate_capsule` and an independent
//! draft 2020-12 validator (the `jsonschema` crate); the test fails on any
//! accept/reject disagreement. A few rules cannot be written in JSON Schema
//! (unique constraint/objective ids, note keys and reader agent ids; a
//! timestamp's day existing in its month; the canonical byte-size cap), so
//! cases that hinge on them are compared only after checking them separately.

mod support;

use self_capsule::core::json::{parse_str, Json};
use self_capsule::core::limits::TierTable;
use self_capsule::core::time::is_timestamp;
use self_capsule::core::validate::validate_capsule;
use self_capsule::core::write::{check, AgentState, Signature, Terms};
use serde_json::{json, Value};
use support::schemas::validator;

fn to_json(v: &Value) -> Json {
    parse_str(&serde_json::to_string(v).unwrap()).unwrap()
}

fn load_vectors(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Whether a capsule breaks a rule JSON Schema cannot state: a repeated
/// constraint id, objective id, note key or reader agent id (bare or in a
/// grant), or a timestamp whose day does not exist in its month.
fn breaks_unstateable_rule(capsule: &Value) -> bool {
    let items = |ptr: &str| -> Vec<&Value> {
        capsule
            .pointer(ptr)
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default()
    };
    let repeats = |keys: Vec<&Value>| (1..keys.len()).any(|i| keys[..i].contains(&keys[i]));
    let member = |ptr: &str, key: &str| -> Vec<&Value> {
        items(ptr).into_iter().filter_map(|i| i.get(key)).collect()
    };
    let readers: Vec<&Value> = items("/access_control/authorized_readers")
        .into_iter()
        .map(|r| r.get("agent_id").unwrap_or(r))
        .collect();
    let duplicates = repeats(member("/constraints", "id"))
        || repeats(member("/objectives", "id"))
        || repeats(member("/pointers/notes", "key"))
        || repeats(readers);
    // A timestamp that only fails for its day: valid once the day is 01.
    let stamps = [
        ("/objectives", "updated_at"),
        ("/pointers/receipts", "updated_at"),
        ("/pointers/notes", "updated_at"),
        ("/access_control/authorized_readers", "expires_at"),
        ("/access_control/authorized_readers", "granted_at"),
    ];
    let no_such_day = stamps.iter().any(|(ptr, key)| {
        member(ptr, key)
            .into_iter()
            .filter_map(Value::as_str)
            .any(|s| {
                let first = s
                    .get(..8)
                    .zip(s.get(10..))
                    .map(|(a, b)| format!("{a}01{b}"));
                !is_timestamp(s)
                    && first.is_some_and(|f| is_timestamp(&f))
                    && matches!(
                        s.get(8..10).and_then(|d| d.parse::<u8>().ok()),
                        Some(29..=31)
                    )
            })
    });
    duplicates || no_such_day
}

#[test]
fn capsule_vectors_agree() {
    let schema = validator("capsule.schema.json");
    let file = load_vectors("capsules.json");
    let mut compared = 0;
    for case in file["cases"].as_array().unwrap() {
        let capsule = &case["capsule"];
        let rust_ok = validate_capsule(&to_json(capsule)).is_ok();
        let schema_ok = schema.is_valid(capsule);
        if breaks_unstateable_rule(capsule) {
            assert!(
                !rust_ok && schema_ok,
                "{}: duplicate keys and impossible dates are the validator's alone",
                case["name"]
            );
            continue;
        }
        assert_eq!(
            rust_ok, schema_ok,
            "{}: rust={rust_ok} schema={schema_ok}",
            case["name"]
        );
        compared += 1;
    }
    assert!(compared >= 80, "only {compared} vectors compared");
}

struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// Lengths around every limit in the spec's table.
const LENGTHS: &[usize] = &[
    0, 1, 2, 15, 16, 17, 23, 24, 25, 31, 32, 33, 47, 48, 49, 119, 120, 121, 159, 160, 161, 199,
    200, 201,
];
const CHARS: &[char] = &['a', 'z', '0', '-', '_', '.', ':', 'A', ' ', 'é', '😀', '\n'];
const NUMBERS: &[f64] = &[
    -1.0, 0.0, 1.0, 8.0, 9.0, 255.0, 256.0, 300.5, 1500.0, 1501.0, 1e20,
];

fn random_string(rng: &mut Lcg) -> String {
    let len = LENGTHS[rng.below(LENGTHS.len())];
    // Mostly one repeated character, so pattern-valid strings of every
    // length occur often; sometimes a mix.
    if rng.below(3) > 0 {
        CHARS[rng.below(CHARS.len())].to_string().repeat(len)
    } else {
        (0..len).map(|_| CHARS[rng.below(CHARS.len())]).collect()
    }
}

fn random_value(rng: &mut Lcg, near: &Value) -> Value {
    match rng.below(9) {
        0 => Value::Null,
        1 => json!(rng.below(2) == 0),
        2 => json!(NUMBERS[rng.below(NUMBERS.len())]),
        3 | 4 => json!(random_string(rng)),
        5 => json!([]),
        6 => json!({}),
        7 => match near {
            // Same kind as the original, so deeper rules get exercised too.
            Value::Array(items) if !items.is_empty() => {
                let mut more = items.clone();
                let n = [1, 4, 12, 20][rng.below(4)];
                for _ in 0..n {
                    more.push(items[rng.below(items.len())].clone());
                }
                Value::Array(more)
            }
            other => other.clone(),
        },
        _ => json!([random_string(rng)]),
    }
}

/// Every (pointer, value) in the tree.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, c)| pointers(c, format!("{at}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| pointers(c, format!("{at}/{i}"), out)),
        _ => {}
    }
}

fn mutate(rng: &mut Lcg, mut v: Value) -> Value {
    for _ in 0..1 + rng.below(3) {
        let mut all = Vec::new();
        pointers(&v, String::new(), &mut all);
        let target = &all[1 + rng.below(all.len() - 1)];
        let (parent, key) = target.rsplit_once('/').unwrap();
        let old = v.pointer(target).cloned().unwrap_or(Value::Null);
        let kind = rng.below(6);
        let Some(p) = v.pointer_mut(parent) else {
            continue;
        };
        match (p, kind) {
            (Value::Object(m), 0) => {
                m.remove(key);
            }
            (Value::Object(m), 1) => {
                m.insert(format!("{key}_extra"), Value::Bool(true));
            }
            (Value::Object(m), _) => {
                let new = random_value(rng, &old);
                m.insert(key.to_string(), new);
            }
            (Value::Array(a), 0) => {
                a.remove(key.parse::<usize>().unwrap());
            }
            (Value::Array(a), _) => {
                let new = random_value(rng, &old);
                a[key.parse::<usize>().unwrap()] = new;
            }
            _ => {}
        }
    }
    v
}

#[test]
fn random_mutations_agree() {
    let schema = validator("capsule.schema.json");
    let base = support::capsules::example();
    let mut watch_base = base.clone();
    watch_base["watch"] = json!({"tags": ["rust"], "sources": ["nvd"], "stacks": ["serde"]});
    // Every field the public deployment's clients write, from the vectors.
    let vectors = load_vectors("capsules.json");
    let public_base = vectors["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "public_client_fields")
        .map(|c| c["capsule"].clone())
        .expect("public_client_fields vector");
    let bases = [&base, &watch_base, &public_base];
    let mut rng = Lcg(0x5c4e_3a11);
    let (mut accepted, mut rejected, mut skipped) = (0, 0, 0);
    for i in 0..6000 {
        let capsule = mutate(&mut rng, bases[i % bases.len()].clone());
        if breaks_unstateable_rule(&capsule) {
            skipped += 1;
            continue;
        }
        let rust_ok = validate_capsule(&to_json(&capsule)).is_ok();
        let schema_ok = schema.is_valid(&capsule);
        assert_eq!(
            rust_ok, schema_ok,
            "mutation {i} disagrees (rust={rust_ok}): {capsule}"
        );
        if rust_ok {
            accepted += 1
        } else {
            rejected += 1
        }
    }
    println!(
        "random mutations: {accepted} valid, {rejected} invalid, {skipped} skipped (duplicate keys)"
    );
    // Both outcomes must be well represented, or the test proves little.
    assert!(
        accepted > 450 && rejected > 2250,
        "{accepted} valid / {rejected} invalid"
    );
}

#[test]
fn envelope_schema_matches_shape_outcomes() {
    let schema = validator("envelope.schema.json");
    let file = load_vectors("envelopes.json");
    // Outcomes decided purely by shape (and so expressible in the schema).
    const SHAPE: &[&str] = &["bad_seq", "invalid_capsule", "unknown_field"];
    let mut checked = 0;
    for case in file["cases"].as_array().unwrap() {
        let Ok(body) = serde_json::from_str::<Value>(case["body"].as_str().unwrap()) else {
            continue; // not JSON at all: nothing for a schema to say
        };
        let codes: Vec<&str> = case["reason_codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        let name = case["name"].as_str().unwrap();
        if codes.is_empty() || codes == ["replay_seq"] {
            assert!(
                schema.is_valid(&body),
                "{name}: accepted shape must match the schema"
            );
            checked += 1;
        } else if codes.iter().all(|c| SHAPE.contains(c)) {
            assert!(
                !schema.is_valid(&body),
                "{name}: malformed envelope must fail the schema"
            );
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} envelope vectors checked");
}

#[test]
fn real_bodies_match_their_schemas() {
    let errors = validator("error.schema.json");
    let heads = validator("head.schema.json");
    let file = load_vectors("envelopes.json");
    let tiers = TierTable::default();
    let mut rejections = 0;
    for case in file["cases"].as_array().unwrap() {
        let agent =
            self_capsule::core::crypto::AgentId::parse(case["path_agent_id"].as_str().unwrap())
                .unwrap();
        let body = case["body"].as_str().unwrap().as_bytes();
        let mut state = AgentState::default();
        match check(
            &state,
            body,
            &agent,
            1_770_681_600_000,
            &tiers,
            &Terms::genesis(Signature::Verify),
        ) {
            Err(r) => {
                let v = serde_json::to_value(&r).unwrap();
                let errs: Vec<String> = errors.iter_errors(&v).map(|e| e.to_string()).collect();
                assert!(
                    errs.is_empty(),
                    "{}: rejection body fails error.schema.json: {errs:?}\n{v}",
                    case["name"]
                );
                rejections += 1;
            }
            Ok(c) => {
                let (record, _) = state.commit(c, 1_770_681_600_000, &tiers);
                let head = serde_json::to_value(record.head(1_770_681_700_000, &tiers)).unwrap();
                let errs: Vec<String> = heads.iter_errors(&head).map(|e| e.to_string()).collect();
                assert!(
                    errs.is_empty(),
                    "head fails head.schema.json: {errs:?}\n{head}"
                );
            }
        }
    }
    assert!(rejections >= 20);
}

#[test]
fn the_error_schema_lists_every_reason_code_in_reporting_order() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schemas/error.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let listed: Vec<&str> = schema["$defs"]["reason_code"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let all: Vec<&str> = self_capsule::core::reason::ReasonCode::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    assert_eq!(listed, all);
}
