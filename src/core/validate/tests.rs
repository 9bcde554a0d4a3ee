use super::*;
use crate::core::json::parse_str;
use crate::core::testing::{self, EXAMPLE};

fn check(json: &str) -> Result<Capsule, Vec<R>> {
    validate_capsule(&parse_str(json).unwrap()).map_err(|v| codes(&v))
}

fn with(f: impl FnOnce(&mut Json)) -> Json {
    let mut v = testing::example();
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
    // The policy alone, at the smallest budget the schema allows.
    let mut min = testing::minimal(format!("{:064x}", 0xff));
    set(
        &mut min,
        &["policy", "memory_budget", "max_rehydrate_tokens"],
        256u64.into(),
    );
    set(
        &mut min,
        &["policy", "memory_budget", "max_objectives"],
        0u64.into(),
    );
    assert!(validate_capsule(&min).is_ok());
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

// ------------------------------------------------ fields the public clients write

const READER: &str = "3b2f0d7c3a6d5f4c1c8b2a1a9f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9f";

/// The example with every optional field the public deployment's clients write.
fn full() -> Json {
    with(|v| {
        set(
            v,
            &["objectives", "0", "updated_at"],
            "2026-02-10T12:34:56.789Z".into(),
        );
        set(
            v,
            &["objectives", "0", "tags"],
            parse_str(r#"["continuity"]"#).unwrap(),
        );
        let r = ["pointers", "receipts", "0"];
        set(v, &[r[0], r[1], r[2], "rationale"], "the spec".into());
        set(
            v,
            &[r[0], r[1], r[2], "updated_at"],
            "2026-02-10T12:34:56+02:00".into(),
        );
        set(
            v,
            &[r[0], r[1], r[2], "tags"],
            parse_str(r#"["spec"]"#).unwrap(),
        );
        set(
            v,
            &["pointers", "notes"],
            parse_str(
                r#"[{"key":"repo.branch","value":"feat/x","updated_at":"2026-02-10T00:00:00Z","tags":["git"]},
                    {"key":"ci:last_run","value":"green"}]"#,
            )
            .unwrap(),
        );
        set(
            v,
            &["access_control"],
            parse_str(&format!(
                r#"{{"public":false,"authorized_readers":["{READER}",
                   {{"agent_id":"{}","scopes":["READ_HEAD","READ_VERIFY"],
                     "expires_at":"2027-01-01T00:00:00Z","granted_at":"2026-02-10T00:00:00.123456789Z"}}]}}"#,
                "ab".repeat(32)
            ))
            .unwrap(),
        );
    })
}

#[test]
fn public_client_fields_are_accepted_and_typed() {
    let c = validate_capsule(&full()).unwrap();
    let o = &c.objectives.as_ref().unwrap()[0];
    assert_eq!(o.updated_at.as_deref(), Some("2026-02-10T12:34:56.789Z"));
    assert_eq!(o.tags.as_deref(), Some(&["continuity".to_string()][..]));
    let p = c.pointers.as_ref().unwrap();
    assert_eq!(
        p.receipts.as_ref().unwrap()[0].rationale.as_deref(),
        Some("the spec")
    );
    let notes = p.notes.as_ref().unwrap();
    assert_eq!(
        (notes[1].key.as_str(), notes[1].value.as_str()),
        ("ci:last_run", "green")
    );
    assert_eq!(notes[1].updated_at, None);
    let ac = c.access_control.as_ref().unwrap();
    assert!(!ac.public && !c.is_public());
    let [bare, grant] = &ac.authorized_readers[..] else {
        panic!("two readers")
    };
    assert_eq!(bare.scopes, ReadScopes::ALL);
    assert_eq!(
        (bare.expires_at.as_deref(), bare.agent_id.as_str()),
        (None, READER)
    );
    assert!(grant.scopes.allows(ReadScope::Head) && grant.scopes.allows(ReadScope::Verify));
    assert!(!grant.scopes.allows(ReadScope::Capsule) && !grant.scopes.allows(ReadScope::History));
    assert_eq!(grant.expires_at.as_deref(), Some("2027-01-01T00:00:00Z"));
    // The model's JSON spells scopes as on the wire.
    let json = serde_json::to_value(grant).unwrap();
    assert_eq!(
        json["scopes"],
        serde_json::json!(["READ_HEAD", "READ_VERIFY"])
    );

    // Absent access_control, or one without readers, is as public as before.
    assert!(check(EXAMPLE).unwrap().is_public());
    let open = with(|v| {
        set(
            v,
            &["access_control"],
            parse_str(r#"{"public":true}"#).unwrap(),
        )
    });
    let c = validate_capsule(&open).unwrap();
    assert!(c.is_public());
    assert_eq!(c.access_control.unwrap().authorized_readers, vec![]);
    // Empty optional strings where the public deployment allows them.
    let v = with(|v| set(v, &["pointers", "receipts", "0", "rationale"], "".into()));
    assert!(validate_capsule(&v).is_ok());
}

#[test]
fn new_field_rules() {
    let ac = |s: &str| parse_str(s).unwrap();
    let grant = |extra: &str| {
        ac(&format!(
            r#"{{"public":false,"authorized_readers":[{{"agent_id":"{READER}","scopes":["READ_HEAD"]{extra}}}]}}"#
        ))
    };
    let note = |s: &str| ac(&format!("[{s}]"));
    let cases: Vec<(&[&str], Json, R)> = vec![
        (
            &["objectives", "0", "updated_at"],
            "2026-02-10".into(),
            R::ObjectiveUpdatedAt,
        ),
        (
            &["objectives", "0", "updated_at"],
            Json::Number(1.0),
            R::ObjectiveUpdatedAt,
        ),
        (
            &["objectives", "0", "tags"],
            ac(&format!(r#"["{}"]"#, "t".repeat(33))),
            R::ObjectiveTags,
        ),
        (
            &["objectives", "0", "tags"],
            ac(r#"[""]"#),
            R::ObjectiveTags,
        ),
        (&["objectives", "0", "tags"], "t".into(), R::ObjectiveTags),
        (
            &["pointers", "receipts", "0", "rationale"],
            Json::String("r".repeat(201)),
            R::ReceiptRationale,
        ),
        (
            &["pointers", "receipts", "0", "updated_at"],
            "2026-02-30T00:00:00Z".into(),
            R::ReceiptUpdatedAt,
        ),
        (
            &["pointers", "receipts", "0", "tags"],
            ac("[1]"),
            R::ReceiptTags,
        ),
        (&["pointers", "notes"], ac("{}"), R::Notes),
        (&["pointers", "notes"], note(r#""k""#), R::Notes),
        (
            &["pointers", "notes"],
            note(r#"{"key":"Has Space","value":"v"}"#),
            R::NoteKey,
        ),
        (
            &["pointers", "notes"],
            note(&format!(r#"{{"key":"{}","value":"v"}}"#, "k".repeat(49))),
            R::NoteKey,
        ),
        (&["pointers", "notes"], note(r#"{"value":"v"}"#), R::NoteKey),
        (
            &["pointers", "notes"],
            note(r#"{"key":"k","value":""}"#),
            R::NoteValue,
        ),
        (
            &["pointers", "notes"],
            note(&format!(r#"{{"key":"k","value":"{}"}}"#, "v".repeat(501))),
            R::NoteValue,
        ),
        (
            &["pointers", "notes"],
            note(r#"{"key":"k","value":"v","updated_at":"2026-02-10T00:00:00"}"#),
            R::NoteUpdatedAt,
        ),
        (
            &["pointers", "notes"],
            note(r#"{"key":"k","value":"v","tags":[null]}"#),
            R::NoteTags,
        ),
        (&["access_control"], ac("true"), R::AccessControl),
        (&["access_control"], ac("{}"), R::AccessControlPublic),
        (
            &["access_control"],
            ac(r#"{"public":"false"}"#),
            R::AccessControlPublic,
        ),
        (
            &["access_control"],
            ac(r#"{"public":false,"authorized_readers":{}}"#),
            R::AuthorizedReaders,
        ),
        (
            &["access_control"],
            ac(r#"{"public":false,"authorized_readers":["ABC"]}"#),
            R::AuthorizedReaderId,
        ),
        (
            &["access_control"],
            ac(r#"{"public":false,"authorized_readers":[7]}"#),
            R::AuthorizedReaderId,
        ),
        (
            &["access_control"],
            ac(r#"{"public":false,"authorized_readers":[{"scopes":["READ_HEAD"]}]}"#),
            R::AuthorizedReaderId,
        ),
    ];
    for (p, val, want) in &cases {
        let v = with(|v| set(v, p, val.clone()));
        assert_eq!(codes_of(&v), [*want], "{p:?} = {val:?}");
    }
    let scopes = |s: &str| {
        ac(&format!(
            r#"{{"public":false,"authorized_readers":[{{"agent_id":"{READER}","scopes":{s}}}]}}"#
        ))
    };
    for bad in [
        "[]",
        r#"["READ_ALL"]"#,
        r#"["read_head"]"#,
        r#"["READ_HEAD","READ_HEAD"]"#,
        r#""READ_HEAD""#,
        r#"["READ_HEAD","READ_CAPSULE","READ_HISTORY","READ_VERIFY","READ_HEAD"]"#,
    ] {
        let v = with(|v| set(v, &["access_control"], scopes(bad)));
        assert_eq!(codes_of(&v), [R::AuthorizedReaderScope], "{bad}");
    }
    for extra in [
        r#","expires_at":"tomorrow""#,
        r#","granted_at":"2026-02-10T00:00:00+0100""#,
    ] {
        let v = with(|v| set(v, &["access_control"], grant(extra)));
        assert_eq!(codes_of(&v), [R::AuthorizedReaderExpiry], "{extra}");
    }
    let v = with(|v| set(v, &["access_control"], grant(r#","scopes_extra":1"#)));
    assert_eq!(codes_of(&v), [R::UnknownField]);
}

#[test]
fn new_lists_are_capped_and_keyed_once() {
    let list = |n: usize, item: &dyn Fn(usize) -> String| {
        parse_str(&format!(
            "[{}]",
            (0..n).map(item).collect::<Vec<_>>().join(",")
        ))
        .unwrap()
    };
    let note = |i: usize| format!(r#"{{"key":"k{i}","value":"v"}}"#);
    let v = with(|v| set(v, &["pointers", "notes"], list(20, &note)));
    assert!(validate_capsule(&v).is_ok());
    let v = with(|v| set(v, &["pointers", "notes"], list(21, &note)));
    assert_eq!(codes_of(&v), [R::Notes]);
    let v = with(|v| set(v, &["pointers", "notes"], list(2, &|_| note(0))));
    let err = validate_capsule(&v).unwrap_err();
    assert_eq!(codes(&err), [R::NoteKey]);
    assert_eq!(err[0].path, "$.pointers.notes[1].key");

    let tag = |i: usize| format!(r#""t{i}""#);
    for (p, want) in [
        (&["objectives", "0", "tags"][..], R::ObjectiveTags),
        (&["pointers", "receipts", "0", "tags"], R::ReceiptTags),
    ] {
        let v = with(|v| set(v, p, list(10, &tag)));
        assert!(validate_capsule(&v).is_ok());
        let v = with(|v| set(v, p, list(11, &tag)));
        assert_eq!(codes_of(&v), [want]);
    }

    let readers = |n: usize, id: &dyn Fn(usize) -> String| {
        let mut ac = parse_str(r#"{"public":false}"#).unwrap();
        set(&mut ac, &["authorized_readers"], list(n, id));
        ac
    };
    let bare = |i: usize| format!(r#""{:064x}""#, i + 1);
    let v = with(|v| set(v, &["access_control"], readers(20, &bare)));
    assert!(validate_capsule(&v).is_ok());
    let v = with(|v| set(v, &["access_control"], readers(21, &bare)));
    assert_eq!(codes_of(&v), [R::AuthorizedReaders]);
    // One grant per reader, whether bare or an object.
    let twice = |i: usize| match i {
        0 => format!(r#""{READER}""#),
        _ => format!(r#"{{"agent_id":"{READER}","scopes":["READ_HEAD"]}}"#),
    };
    let v = with(|v| set(v, &["access_control"], readers(2, &twice)));
    let err = validate_capsule(&v).unwrap_err();
    assert_eq!(codes(&err), [R::AuthorizedReaderId]);
    assert_eq!(
        err[0].path,
        "$.access_control.authorized_readers[1].agent_id"
    );
}
