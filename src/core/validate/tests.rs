use super::*;
use crate::core::json::parse_str;

pub const EXAMPLE: &str = include_str!("../../../tests/vectors/spec_example_capsule.json");

fn check(json: &str) -> Result<Capsule, Vec<R>> {
    validate_capsule(&parse_str(json).unwrap()).map_err(|v| codes(&v))
}

fn with(f: impl FnOnce(&mut Json)) -> Json {
    let mut v = parse_str(EXAMPLE).unwrap();
    f(&mut v);
    v
}

fn set(v: &mut Json, path: &[&str], new: Json) {
    let mut cur = v;
    for (i, key) in path.iter().enumerate() {
        let last = i + 1 == path.len();
        cur = match cur {
            Json::Object(entries) => {
                if last {
                    entries.retain(|(k, _)| k != key);
                    entries.push((key.to_string(), new));
                    return;
                }
                &mut entries.iter_mut().find(|(k, _)| k == key).unwrap().1
            }
            Json::Array(items) => {
                let idx: usize = key.parse().unwrap();
                if last {
                    items[idx] = new;
                    return;
                }
                &mut items[idx]
            }
            _ => panic!("bad path"),
        };
    }
}

fn codes_of(v: &Json) -> Vec<R> {
    validate_capsule(v)
        .map(|_| vec![])
        .unwrap_or_else(|e| codes(&e))
}

#[test]
fn spec_example_passes() {
    let c = check(EXAMPLE).unwrap();
    assert_eq!(c.policy.memory_budget.max_rehydrate_tokens, 900);
    assert_eq!(
        c.objectives.as_ref().unwrap()[0].status,
        ObjectiveStatus::InProgress
    );
    assert_eq!(c.constraints.as_ref().unwrap().len(), 4);
}

#[test]
fn minimal_capsule_passes() {
    let min = r#"{"schema_version":"self_capsule_v0","agent_id":"00000000000000000000000000000000000000000000000000000000000000ff",
      "policy":{"policy_version":"v0","rehydrate_mode":"strict","deny_external_instructions":true,
      "deny_tool_instructions_in_text":true,"memory_budget":{"max_rehydrate_tokens":256,"max_objectives":0}}}"#;
    assert!(check(min).is_ok());
}

#[test]
fn every_problem_is_reported_once_in_stable_order() {
    let v = with(|v| {
        set(v, &["schema_version"], "self_capsule_v1".into());
        set(v, &["self_motto"], Json::String("x".repeat(161)));
        set(v, &["extra"], Json::Null);
        set(v, &["objectives", "0", "status"], "doing".into());
        set(
            v,
            &["objectives", "0", "title"],
            Json::String("t".repeat(121)),
        );
        set(
            v,
            &["policy", "memory_budget", "max_objectives"],
            Json::Number(9.0),
        );
        set(v, &["constraints", "0", "id"], "NO SHELL".into());
        set(v, &["constraints", "1", "id"], "NO SHELL".into());
    });
    assert_eq!(
        codes_of(&v),
        [
            R::UnknownField,
            R::SchemaVersion,
            R::MaxObjectives,
            R::ConstraintId,
            R::ObjectiveStatus,
            R::ObjectiveTitle,
            R::SelfMotto
        ]
    );
}

#[test]
fn unknown_fields_at_every_level() {
    for p in [
        &["policy", "x"][..],
        &["policy", "memory_budget", "x"],
        &["constraints", "0", "x"],
        &["objectives", "0", "x"],
        &["capabilities", "x"],
        &["pointers", "x"],
        &["pointers", "receipts", "0", "x"],
    ] {
        let v = with(|v| set(v, p, Json::Bool(true)));
        assert_eq!(codes_of(&v), [R::UnknownField], "{p:?}");
    }
    let v = with(|v| set(v, &["watch"], parse_str(r#"{"tags":["a"],"x":1}"#).unwrap()));
    assert_eq!(codes_of(&v), [R::UnknownField]);
}

#[test]
fn lengths_count_scalar_values_not_bytes() {
    // 160 four-byte characters: 640 bytes, but 160 scalar values.
    let ok = with(|v| set(v, &["self_motto"], Json::String("😀".repeat(160))));
    assert!(validate_capsule(&ok).is_ok());
    let long = with(|v| set(v, &["self_motto"], Json::String("é".repeat(161))));
    assert_eq!(codes_of(&long), [R::SelfMotto]);
}

#[test]
fn policy_rules() {
    let cases: Vec<(&[&str], Json, R)> = vec![
        (
            &["policy", "policy_version"],
            Json::String("v".repeat(17)),
            R::PolicyVersion,
        ),
        (
            &["policy", "policy_version"],
            Json::from(""),
            R::PolicyVersion,
        ),
        (
            &["policy", "rehydrate_mode"],
            "lenient".into(),
            R::RehydrateMode,
        ),
        (
            &["policy", "deny_external_instructions"],
            false.into(),
            R::Policy,
        ),
        (
            &["policy", "deny_tool_instructions_in_text"],
            Json::from("true"),
            R::Policy,
        ),
        (
            &["policy", "memory_budget"],
            Json::Array(vec![]),
            R::MemoryBudget,
        ),
        (
            &["policy", "memory_budget", "max_rehydrate_tokens"],
            Json::Number(255.0),
            R::MaxRehydrateTokens,
        ),
        (
            &["policy", "memory_budget", "max_rehydrate_tokens"],
            Json::Number(1501.0),
            R::MaxRehydrateTokens,
        ),
        (
            &["policy", "memory_budget", "max_rehydrate_tokens"],
            Json::Number(300.5),
            R::MaxRehydrateTokens,
        ),
        (
            &["policy", "memory_budget", "max_objectives"],
            Json::Number(-1.0),
            R::MaxObjectives,
        ),
        (&["policy"], Json::Null, R::Policy),
    ];
    for (p, val, want) in cases {
        let v = with(|v| set(v, p, val.clone()));
        assert_eq!(codes_of(&v), [want], "{p:?} = {val:?}");
    }
    // Integral floats are integers in JSON.
    let v = with(|v| {
        set(
            v,
            &["policy", "memory_budget", "max_rehydrate_tokens"],
            Json::Number(256.0),
        )
    });
    assert!(validate_capsule(&v).is_ok());
}

#[test]
fn item_rules() {
    let cases: Vec<(&[&str], Json, R)> = vec![
        (&["constraints"], Json::from("x"), R::Constraints),
        (&["constraints", "0"], Json::from("x"), R::Constraints),
        (
            &["constraints", "0", "id"],
            Json::String("a".repeat(25)),
            R::ConstraintId,
        ),
        (
            &["constraints", "0", "type"],
            "no_fun".into(),
            R::ConstraintType,
        ),
        (
            &["constraints", "0", "value"],
            Json::Number(1.0),
            R::ConstraintValue,
        ),
        (
            &["constraints", "2", "value"],
            parse_str(r#"["ok", 5]"#).unwrap(),
            R::ConstraintValue,
        ),
        (
            &["constraints", "2", "value"],
            Json::Array(vec![Json::String("x".repeat(49))]),
            R::ConstraintValue,
        ),
        (&["objectives", "0", "id"], "Bad".into(), R::ObjectiveId),
        (
            &["objectives", "0", "priority"],
            "urgent".into(),
            R::ObjectivePriority,
        ),
        (&["objectives", "0", "title"], Json::Null, R::ObjectiveTitle),
        (
            &["objectives", "0", "checkpoint"],
            Json::String("c".repeat(201)),
            R::ObjectiveCheckpoint,
        ),
        (&["capabilities"], Json::Array(vec![]), R::Capabilities),
        (
            &["capabilities", "tool_allowlist"],
            parse_str(r#"["Web.Read"]"#).unwrap(),
            R::ToolAllowlist,
        ),
        (
            &["capabilities", "feature_flags"],
            parse_str(r#"["a.b"]"#).unwrap(),
            R::FeatureFlags,
        ),
        (&["pointers"], Json::Null, R::Pointers),
        (&["pointers", "receipts"], Json::from("r"), R::Receipts),
        (
            &["pointers", "receipts", "0", "name"],
            Json::String("n".repeat(33)),
            R::ReceiptName,
        ),
        (
            &["pointers", "receipts", "0", "content_hash"],
            Json::from("sha256:AA"),
            R::ReceiptContentHash,
        ),
        (
            &["pointers", "receipts", "0", "evidence_url"],
            Json::String("h".repeat(201)),
            R::ReceiptEvidenceUrl,
        ),
        (&["watch"], Json::from("all"), R::Watch),
        (
            &["watch"],
            parse_str(r#"{"tags":["t","x"],"stacks":[""]}"#).unwrap(),
            R::WatchStacks,
        ),
        (
            &["watch"],
            parse_str(r#"{"sources":["a"]}"#).unwrap(),
            R::WatchSources,
        ),
        (
            &["watch"],
            parse_str(r#"{"tags":["0123456789012345678901234"]}"#).unwrap(),
            R::WatchTags,
        ),
        (&["agent_id"], Json::from("ABC"), R::AgentId),
    ];
    for (p, val, want) in cases {
        let v = with(|v| set(v, p, val.clone()));
        assert_eq!(codes_of(&v), [want], "{p:?} = {val:?}");
    }
}

#[test]
fn array_caps() {
    let many = |n: usize, item: &str| parse_str(&format!("[{}]", vec![item; n].join(","))).unwrap();
    let v = with(|v| set(v, &["capabilities", "tool_allowlist"], many(21, r#""t""#)));
    assert_eq!(codes_of(&v), [R::ToolAllowlist]);
    let v = with(|v| {
        set(
            v,
            &["watch"],
            Json::Object(vec![("tags".into(), many(11, r#""t""#))]),
        )
    });
    assert_eq!(codes_of(&v), [R::WatchTags]);
    let v = with(|v| {
        let objs: Vec<String> = (0..9)
            .map(|i| format!(r#"{{"id":"o{i}","status":"open","title":"t"}}"#))
            .collect();
        set(
            v,
            &["objectives"],
            parse_str(&format!("[{}]", objs.join(","))).unwrap(),
        );
    });
    assert_eq!(codes_of(&v), [R::Objectives]);
}

#[test]
fn duplicate_ids_are_rejected() {
    let v = with(|v| {
        set(v, &["objectives"], parse_str(
        r#"[{"id":"a","status":"open","title":"t"},{"id":"a","status":"done","title":"u"}]"#).unwrap())
    });
    assert_eq!(codes_of(&v), [R::ObjectiveId]);
}

#[test]
fn unknown_keys_are_named_only_when_harmless() {
    let v = with(|v| {
        set(v, &["notes"], Json::Null);
        set(v, &[concat!("AKIA", "IOSFODNN7EXAMPLE")], Json::Null);
        set(v, &["policy", "password_is_hunter2x"], Json::Null);
    });
    let paths: Vec<String> = validate_capsule(&v)
        .unwrap_err()
        .into_iter()
        .map(|v| v.path)
        .collect();
    assert_eq!(
        paths,
        [
            "$.notes",
            "$[<unknown key>]",
            "$.policy.password_is_hunter2x"
        ]
    );
    let secret_key = concat!("ghp_", "abcdefghijklmnopqrstuvwxyz0123456789");
    assert_eq!(unknown_field_path("$", secret_key), "$[<unknown key>]");
    assert_eq!(unknown_field_path("$", "a b"), "$[<unknown key>]");
}

#[test]
fn non_object_capsule() {
    assert_eq!(check("[]").unwrap_err(), [R::InvalidCapsule]);
    assert_eq!(
        check("{}").unwrap_err(),
        [R::AgentId, R::SchemaVersion, R::Policy]
    );
}
