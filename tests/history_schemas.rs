//! The history bodies the core builds (entries, history.json, verify
//! reports, export bundles, the keyring) match their JSON Schemas in
//! `schemas/`, checked by the independent `jsonschema` validator.

mod support;

use self_capsule::core::crypto::AgentKey;
use self_capsule::core::history::export::ExportBundle;
use self_capsule::core::history::{
    verify_chain, verify_export, Entry, HistoryIndex, Keyring, KeysDoc, Query, ServiceKey, Viewer,
};
use self_capsule::core::jcs;
use self_capsule::core::json::parse_str;
use self_capsule::core::limits::TierTable;
use self_capsule::core::write::{check, AgentState, Signature, Terms};
use serde_json::Value;
use support::capsules;
use support::schemas::validator;

const T0: u64 = 1_770_681_600_000;

fn assert_valid(schema: &str, v: &Value) {
    let errs: Vec<String> = validator(schema)
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errs.is_empty(), "{schema}: {errs:#?}\n{v:#}");
}

/// Three accepted writes through the real pipeline, retention 2.
fn chain() -> (Vec<Entry>, HistoryIndex, Keyring) {
    chain_of(|_| None)
}

/// Three accepted writes, version `seq` with the `access_control` `access`
/// gives it (none: public), retention 2.
fn chain_of(access: impl Fn(u64) -> Option<Value>) -> (Vec<Entry>, HistoryIndex, Keyring) {
    let (tiers, _) = TierTable::default().with_overrides(|k| match k {
        "FREE_HISTORY_RETAINED" => Some("2".into()),
        "FREE_WRITES_PER_24H" => Some("10".into()),
        _ => None,
    });
    let agent = AgentKey::from_seed(&[3; 32]);
    let service = ServiceKey::from_seed(&[4; 32]);
    let ring = Keyring::new(Some(&service.public_key()), &[]);
    let mut capsule = capsules::example_for(agent.agent_id());
    let mut state = AgentState::default();
    let mut index = None;
    let mut entries = Vec::new();
    for seq in 1..=3u64 {
        capsule["self_motto"] = Value::from(format!("Version {seq}."));
        match access(seq) {
            Some(a) => capsule["access_control"] = a,
            None => {
                capsule.as_object_mut().unwrap().remove("access_control");
            }
        }
        let c = parse_str(&capsule.to_string()).unwrap();
        let body = jcs::canonicalize(&agent.sign_envelope(seq, &c));
        let cand = check(
            &state,
            body.as_bytes(),
            &agent.agent_id(),
            T0,
            &tiers,
            &Terms::genesis(Signature::Verify),
        )
        .unwrap();
        let sealed = state
            .commit_sealed(
                cand,
                T0 + seq * 1000,
                &tiers,
                &service,
                &ring,
                index.take(),
                None,
            )
            .unwrap();
        entries.push(sealed.entry);
        index = Some(sealed.history);
    }
    (entries, index.unwrap(), ring)
}

#[test]
fn entries_and_history_pages_match_their_schemas() {
    let (entries, index, _) = chain();
    for e in &entries {
        assert_valid(
            "entry.schema.json",
            &serde_json::from_str(&e.stored_text()).unwrap(),
        );
        assert_valid("entry.schema.json", &serde_json::to_value(e).unwrap());
    }
    for q in ["", "limit=1", "since="] {
        let query = if q == "since=" {
            Query::parse([("since", entries[1].cursor.as_str())])
        } else {
            Query::parse(
                q.split('&')
                    .filter(|p| !p.is_empty())
                    .map(|p| p.split_once('=').unwrap()),
            )
        }
        .unwrap();
        let sel = index.select(&query, &anyone(&index)).unwrap();
        let texts: Vec<String> = sel
            .sequences
            .iter()
            .map(|s| entries[*s as usize].stored_text())
            .collect();
        let body: Value = serde_json::from_str(&index.history_body(&sel, &texts)).unwrap();
        assert_valid("history.schema.json", &body);
    }
}

fn anyone(index: &HistoryIndex) -> Viewer<'_> {
    Viewer {
        owner: &index.agent_id,
        reader: None,
        now_ms: T0,
    }
}

/// Versions 2 and 3 private, 3 retained with 2 (retention 2): an unsigned
/// reader's history.json, export and offline report, with withheld versions
/// and a pruned cursor.
#[test]
fn withheld_versions_match_their_schemas() {
    let (entries, index, ring) =
        chain_of(|seq| (seq == 2).then(|| serde_json::json!({"public": false})));
    let viewer = anyone(&index);
    for query in [
        Query::default(),
        Query::parse([("since", entries[0].cursor.as_str())]).unwrap(),
    ] {
        let sel = index.select(&query, &viewer).unwrap();
        let texts: Vec<String> = sel
            .sequences
            .iter()
            .map(|s| {
                index
                    .shown(*s, entries[*s as usize].stored_text(), &viewer)
                    .unwrap()
            })
            .collect();
        let body: Value = serde_json::from_str(&index.history_body(&sel, &texts)).unwrap();
        assert_valid("history.schema.json", &body);
        assert!(body.to_string().contains("\"withheld\":true"), "{body}");
    }
    // Version 1 is pruned: since it says how many newer ones went with it.
    let sel = index
        .select(
            &Query::parse([("since", entries[0].cursor.as_str())]).unwrap(),
            &viewer,
        )
        .unwrap();
    assert_eq!(sel.pruned_since, Some(0));
    let stored: Vec<String> = entries[index.head.first_sequence as usize..]
        .iter()
        .map(Entry::stored_text)
        .collect();
    let bundle =
        serde_json::to_value(ExportBundle::for_viewer(&index, &stored, &ring, &viewer).unwrap())
            .unwrap();
    assert_valid("export.schema.json", &bundle);
    let report = verify_export(&parse_str(&bundle.to_string()).unwrap());
    assert_eq!(report.withheld, [1]);
    assert_valid(
        "verify.schema.json",
        &serde_json::to_value(&report).unwrap(),
    );
}

#[test]
fn reports_bundles_and_keys_match_their_schemas() {
    let (entries, index, ring) = chain();
    assert_valid(
        "verify.schema.json",
        &serde_json::to_value(&index.report).unwrap(),
    );
    let kept = &entries[index.head.first_sequence as usize..];
    let bundle = serde_json::to_value(ExportBundle::new(&index, kept, &ring)).unwrap();
    assert_valid("export.schema.json", &bundle);
    let offline = verify_export(&parse_str(&bundle.to_string()).unwrap());
    assert!(offline.valid);
    assert_valid(
        "verify.schema.json",
        &serde_json::to_value(&offline).unwrap(),
    );
    // A failing report, too.
    let garbage = verify_export(&parse_str("{}").unwrap());
    assert_valid(
        "verify.schema.json",
        &serde_json::to_value(&garbage).unwrap(),
    );
    let keys = KeysDoc::new(&ring).unwrap();
    assert_valid("keys.schema.json", &serde_json::to_value(&keys).unwrap());
}

#[test]
fn the_vector_bundles_match_the_export_schema() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/history");
    let schema = validator("export.schema.json");
    let mut n = 0;
    for f in std::fs::read_dir(dir).unwrap() {
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(f.unwrap().path()).unwrap()).unwrap();
        // Tampered bundles are still well-formed bundles.
        assert!(schema.is_valid(&v["bundle"]), "{}", v["name"]);
        n += 1;
    }
    assert!(n >= 15);
}

/// The object's report after writes through the real pipeline (which hands
/// `append` the write check's results instead of scanning and verifying
/// again) measures what an offline verifier of the same entries measures.
#[test]
fn the_report_of_checked_writes_is_the_offline_verifiers() {
    let (entries, index, ring) = chain();
    let kept = &entries[index.head.first_sequence as usize..];
    let offline = verify_chain(&index.agent_id, &index.head, kept, &ring, None);
    assert!(offline.valid, "{offline:?}");
    assert_eq!(
        serde_json::to_value(&index.report.checks).unwrap(),
        serde_json::to_value(&offline.checks).unwrap()
    );
    assert_eq!(index.report.level, offline.level);
    assert_eq!(index.report.valid, offline.valid);
}
