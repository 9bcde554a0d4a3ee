use super::*;
use crate::core::json::parse_str;
use crate::core::world::ddv1::{cursor, UpstreamHead, ZERO_CURSOR};
use sha2::{Digest, Sha256};

fn c(n: u8) -> String {
    format!("sha256:{}", format!("{n:02x}").repeat(32))
}

/// A catalog in the served shape, with the drift: a disabled source with a
/// null cursor, one with the zero cursor, an entry without an id, unknown
/// members.
fn catalog() -> Catalog {
    let v = parse_str(&format!(
        r#"{{"schema_version":"1.2.0","tags_available":["cloud-status","releases","security"],"sources":[
        {{"source_id":"aws_status","name":"AWS","tags":["cloud-status"],"enabled":true,"status":"ok","cursor":"{}","ttl_sec":300}},
        {{"source_id":"gcp_status","tags":["cloud-status"],"enabled":true,"status":"ok","cursor":"{}","ttl_sec":300}},
        {{"source_id":"cisa_kev","tags":["security"],"status":"ok","cursor":"{}"}},
        {{"source_id":"nodejs_releases","tags":["releases"],"cursor":"{}","homepage":"x"}},
        {{"source_id":"github_changelog","tags":["news"],"enabled":false,"status":"disabled","cursor":null,"stale":true}},
        {{"source_id":"nist_nvd","tags":["security"],"cursor":"{ZERO_CURSOR}"}},
        {{"name":"no id at all","tags":["security"]}}
    ]}}"#,
        c(1),
        c(2),
        c(3),
        c(4)
    ))
    .unwrap();
    Catalog::parse(&v).unwrap()
}

fn watch(sources: &[&str], tags: &[&str], stacks: &[&str]) -> Watch {
    let list = |l: &[&str]| (!l.is_empty()).then(|| l.iter().map(|s| s.to_string()).collect());
    Watch {
        sources: list(sources),
        tags: list(tags),
        stacks: list(stacks),
    }
}

fn cursors(cat: &Catalog) -> BTreeMap<String, Option<String>> {
    cat.sources
        .iter()
        .map(|(id, s)| (id.clone(), s.cursor.clone()))
        .collect()
}

#[test]
fn the_catalog_is_read_as_served() {
    let cat = catalog();
    assert_eq!(cat.sources.len(), 6, "the entry without an id is skipped");
    let gh = &cat.sources["github_changelog"];
    assert!(!gh.enabled && gh.stale && gh.cursor.is_none());
    assert_eq!(
        cat.sources["nist_nvd"].cursor, None,
        "the zero cursor is null"
    );
    assert!(
        cat.sources["cisa_kev"].enabled,
        "enabled unless said otherwise"
    );
    let bad = parse_str(r#"{"sources":[{"source_id":"x_y","cursor":"sha256:XYZ"}]}"#).unwrap();
    assert!(
        Catalog::parse(&bad).is_err(),
        "a malformed cursor is not guessed at"
    );
    assert!(Catalog::parse(&parse_str(r#"{"items":[]}"#).unwrap()).is_err());
    let head = UpstreamHead::parse(
        &parse_str(&format!(
            r#"{{"cursor":"{}","generated_at":"2026-03-15T11:55:46Z","ttl_sec":900,"changed":true}}"#,
            c(9)
        ))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(head.cursor, Some(c(9)));
    assert_eq!(head.ttl_sec, Some(900));
    assert_eq!(cursor(Some(&Json::Null)).unwrap(), None);
}

#[test]
fn a_watch_resolves_by_exact_match_and_lists_what_matched_nothing() {
    let cat = catalog();
    // Stacks: "GCP" maps to gcp_status (in the catalog); "docker" maps to
    // sources this catalog lacks; "left-pad" is in no map.
    let w = watch(
        &["cisa_kev", "no_such_source"],
        &["cloud-status", "no-such-tag"],
        &["GCP", "docker", "left-pad"],
    );
    let r = resolve(&w, &cat, Stacks::committed());
    assert_eq!(r.sources, ["aws_status", "cisa_kev", "gcp_status"]);
    assert_eq!(r.via["gcp_status"], ["stack:gcp", "tag:cloud-status"]);
    assert_eq!(r.via["aws_status"], ["tag:cloud-status"]);
    assert_eq!(r.via["cisa_kev"], ["source:cisa_kev"]);
    assert_eq!(r.unresolved.sources, ["no_such_source"]);
    assert_eq!(r.unresolved.tags, ["no-such-tag"]);
    assert_eq!(r.unresolved.stacks, ["docker", "left-pad"]);
    assert!(r.over_cap.is_empty());
    // A near miss is not a match: selection, never interpretation.
    let near = resolve(
        &watch(&["cisa-kev"], &["Security"], &[]),
        &cat,
        Stacks::committed(),
    );
    assert!(near.sources.is_empty());
}

#[test]
fn the_cursor_is_the_spec_formula_and_moves_only_with_the_projection() {
    let cat = catalog();
    let stacks = Stacks::committed();
    let by_tag = resolve(&watch(&[], &["cloud-status"], &[]), &cat, stacks);
    let by_id = resolve(
        &watch(&["gcp_status", "aws_status"], &[], &[]),
        &cat,
        stacks,
    );
    let reordered = resolve(
        &watch(&["aws_status", "gcp_status"], &[], &[]),
        &cat,
        stacks,
    );
    let world = cursors(&cat);
    let cursor = watch_cursor(&pairs(&by_tag, &world));
    assert_eq!(
        cursor,
        watch_cursor(&pairs(&by_id, &world)),
        "however selected"
    );
    assert_eq!(
        cursor,
        watch_cursor(&pairs(&reordered, &world)),
        "in any order"
    );
    // The formula, spelled out as text (not through the canonicaliser).
    let text = format!(
        r#"{{"basis":"watch_v1","sources":[["aws_status","{}"],["gcp_status","{}"]]}}"#,
        c(1),
        c(2)
    );
    assert_eq!(
        cursor,
        format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
    );
    // An unwatched source moves: nothing. A watched one: a new cursor.
    let mut moved = world.clone();
    moved.insert("cisa_kev".into(), Some(c(33)));
    assert_eq!(watch_cursor(&pairs(&by_tag, &moved)), cursor);
    moved.insert("gcp_status".into(), Some(c(22)));
    assert_ne!(watch_cursor(&pairs(&by_tag, &moved)), cursor);
    // A source never fetched counts as null, like a never-succeeded one.
    let with_disabled = resolve(&watch(&["github_changelog"], &[], &[]), &cat, stacks);
    let text = r#"{"basis":"watch_v1","sources":[["github_changelog",null]]}"#;
    assert_eq!(
        watch_cursor(&pairs(&with_disabled, &BTreeMap::new())),
        format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
    );
}

#[test]
fn past_fifty_sources_the_rest_are_reported_not_projected() {
    let entries: Vec<String> = (0..60)
        .map(|i| format!(r#"{{"source_id":"src_{i:02}","tags":["many"],"cursor":null}}"#))
        .collect();
    let cat =
        Catalog::parse(&parse_str(&format!(r#"{{"sources":[{}]}}"#, entries.join(","))).unwrap())
            .unwrap();
    let r = resolve(&watch(&[], &["many"], &[]), &cat, &Stacks::default());
    assert_eq!(r.sources.len(), MAX_SOURCES);
    assert_eq!(r.sources[0], "src_00");
    assert_eq!(
        r.over_cap,
        (50..60).map(|i| format!("src_{i}")).collect::<Vec<_>>()
    );
}

fn item(source: &str, id: &str, published_at: &str) -> String {
    format!(
        r#"{{"source":"{source}","id":"{id}","url":"https://example.com/{id}","published_at":"{published_at}","updated_at":"{published_at}","headline":"Item {id}","content":{{"lang":"en"}},"provenance":{{"fetched_at":"2026-03-15T00:00:00Z","evidence_urls":[],"content_hash":"{}"}}}}"#,
        c(7)
    )
}

#[test]
fn a_batch_is_read_with_the_served_drift_and_kept_verbatim() {
    let v = parse_str(&format!(
        r#"{{"source_id":"cisa_kev","cursor":"{}","buckets":{{"new":[{}],"flagged":[{}],"updated":[],"removed":[],"surprise":[1]}},"batch_narrative":"prose"}}"#,
        c(3),
        item("cisa_kev", "CVE-1", "2026-03-01T00:00:00Z"),
        item("cisa_kev", "CVE-2", "2025-12-11T01:16:00"),
    ))
    .unwrap();
    let b = Batch::parse(&v, "cisa_kev").unwrap();
    assert_eq!(b.cursor, Some(c(3)));
    assert_eq!(b.buckets[0].len(), 1, "new is items");
    assert_eq!(b.buckets[3].len(), 1, "flagged is kept");
    assert_eq!(b.len(), 2, "an unknown bucket is ignored");
    assert_eq!(
        jcs::canonicalize(&b.buckets[3][0]),
        jcs::canonicalize(&parse_str(&item("cisa_kev", "CVE-2", "2025-12-11T01:16:00")).unwrap()),
        "verbatim"
    );
    assert!(
        Batch::parse(&v, "nist_nvd").is_err(),
        "another source's batch"
    );
    let no_id = parse_str(r#"{"cursor":null,"buckets":{"items":[{"source":"x"}]}}"#).unwrap();
    assert!(Batch::parse(&no_id, "x_y").is_err());
}

#[test]
fn latest_is_the_union_sorted_capped_per_source_and_truncated_past_the_byte_cap() {
    let cat = catalog();
    let r = resolve(
        &watch(&["aws_status", "gcp_status"], &[], &[]),
        &cat,
        &Stacks::default(),
    );
    let batch = |id: &str, items: Vec<String>| {
        let v = parse_str(&format!(
            r#"{{"cursor":null,"buckets":{{"items":[{}]}}}}"#,
            items.join(",")
        ))
        .unwrap();
        (id.to_owned(), Batch::parse(&v, id).unwrap())
    };
    let many: Vec<String> = (0..60)
        .map(|i| {
            item(
                "aws_status",
                &format!("a{i:02}"),
                &format!("2026-03-{:02}T00:00:00Z", i % 28 + 1),
            )
        })
        .collect();
    let batches: BTreeMap<String, Batch> = [
        batch("aws_status", many),
        batch(
            "gcp_status",
            vec![item("gcp_status", "g1", "2026-03-02T00:00:00Z")],
        ),
        batch(
            "cisa_kev",
            vec![item("cisa_kev", "k1", "2026-03-02T00:00:00Z")],
        ),
    ]
    .into_iter()
    .collect();
    let l = latest(&r, &batches);
    assert_eq!(l.capped, ["aws_status"]);
    assert_eq!(
        l.buckets[0].len(),
        MAX_ITEMS_PER_SOURCE + 1,
        "50 of aws, gcp's one, no cisa"
    );
    assert!(l.truncated.is_empty());
    let keys: Vec<(String, String)> = l.buckets[0]
        .iter()
        .map(|i| {
            (
                text(i, "published_at").to_owned(),
                text(i, "source").to_owned(),
            )
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "sorted by (published_at, source, id)");
    // The ten dropped are the oldest: days 1 to 4 each occur three times
    // among the 60 (i % 28 + 1), so the ten are days 1 to 3 and one of day 4.
    let aws_days: Vec<&str> = l.buckets[0]
        .iter()
        .filter(|i| text(i, "source") == "aws_status")
        .map(|i| &text(i, "published_at")[..10])
        .collect();
    for gone in ["2026-03-01", "2026-03-02", "2026-03-03"] {
        assert!(!aws_days.contains(&gone), "{gone}");
    }
    assert_eq!(aws_days.iter().filter(|d| **d == "2026-03-04").count(), 2);
    assert_eq!(l.counts()["items"], 51);
    assert_eq!(latest(&r, &batches), l, "deterministic");

    // Past the byte cap: the source that would cross it is listed whole;
    // the next still fits.
    let big_text = "x".repeat(20_000);
    let big: Vec<String> = (0..30)
        .map(|i| {
            item(
                "aws_status",
                &format!("b{i}-{big_text}"),
                "2026-03-01T00:00:00Z",
            )
        })
        .collect();
    let huge: BTreeMap<String, Batch> = [
        batch("aws_status", big),
        batch(
            "gcp_status",
            vec![item("gcp_status", "g1", "2026-03-02T00:00:00Z")],
        ),
    ]
    .into_iter()
    .collect();
    let l = latest(&r, &huge);
    assert_eq!(
        l.truncated,
        [Truncated {
            source_id: "aws_status".into(),
            full_url: "/diff/source/aws_status/latest.json".into()
        }]
    );
    assert_eq!(l.buckets[0].len(), 1);
    assert_eq!(text(&l.buckets[0][0], "id"), "g1");
}

// --- the served feed (feed.rs) ---

use crate::core::crypto::AgentId;
use crate::core::limits::Tier;
use crate::core::reason::ReasonCode;
use crate::core::world::refresh::{SourceState, WorldPointer};
use feed::{admit, parse_query, project};

fn world() -> WorldPointer {
    let st = |tags: &[&str], cursor: Option<String>, counts: [u32; 4], stale: bool| SourceState {
        cursor,
        tags: tags.iter().map(|t| t.to_string()).collect(),
        enabled: true,
        status: Some("ok".into()),
        stale,
        ttl_sec: Some(600),
        counts,
    };
    WorldPointer {
        world_cursor: Some(c(90)),
        upstream_generated_at: Some("2026-03-15T11:55:46Z".into()),
        etag: None,
        checked_at_ms: 1_770_681_600_000,
        catalog_at_ms: 1_770_681_600_000,
        stale_since_ms: None,
        sources: [
            (
                "aws_status".to_owned(),
                st(&["cloud-status"], Some(c(1)), [0; 4], false),
            ),
            (
                "gcp_status".to_owned(),
                st(&["cloud-status"], Some(c(2)), [1, 0, 0, 0], false),
            ),
            (
                "cisa_kev".to_owned(),
                st(&["security"], Some(c(3)), [0, 0, 0, 4], false),
            ),
        ]
        .into_iter()
        .collect(),
        // The last change moved gcp_status (from 12) only.
        prev: [
            ("aws_status".to_owned(), Some(c(1))),
            ("gcp_status".to_owned(), Some(c(12))),
            ("cisa_kev".to_owned(), Some(c(3))),
        ]
        .into_iter()
        .collect(),
    }
}

#[test]
fn the_query_is_agent_id_only() {
    let id = "ab".repeat(32);
    assert_eq!(
        parse_query([("agent_id", id.as_str())]).unwrap().as_str(),
        id
    );
    let code = |q: &[(&str, &str)]| parse_query(q.iter().copied()).unwrap_err().code;
    assert_eq!(code(&[]), ReasonCode::BadQuery);
    assert_eq!(
        code(&[("agent_id", &id), ("agent_id", &id)]),
        ReasonCode::BadQuery
    );
    assert_eq!(
        code(&[("agent_id", &id), ("tags", "x")]),
        ReasonCode::BadQuery
    );
    assert_eq!(code(&[("agent_id", "AB")]), ReasonCode::BadAgentId);
}

#[test]
fn only_a_paid_agent_with_a_watch_gets_a_feed() {
    let id = "ab".repeat(32);
    let capsule = crate::core::testing::example_for(&id);
    let without = admit(&capsule, Tier::Pro, "http://up").unwrap_err();
    assert_eq!(without.code, ReasonCode::WatchNotSet);
    let mut with = capsule.clone();
    if let Json::Object(m) = &mut with {
        m.push((
            "watch".into(),
            parse_str(r#"{"tags":["security"]}"#).unwrap(),
        ));
    }
    let free = admit(&with, Tier::Free, "http://up").unwrap_err();
    assert_eq!(free.code, ReasonCode::WatchRequiresPro);
    let links: BTreeMap<&str, &str> = free.links.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(links["upgrade_url"], "/api/v1/self/upgrade/quote");
    assert_eq!(links["upstream_head_url"], "http://up/diff/head.json");
    assert_eq!(links["upstream_sources_url"], "http://up/diff/sources.json");
    for tier in [Tier::Pro, Tier::Plus] {
        assert_eq!(
            admit(&with, tier, "http://up").unwrap().tags,
            Some(vec!["security".to_owned()])
        );
    }
}

#[test]
fn the_head_says_whether_the_last_change_moved_this_projection() {
    let w = world();
    let agent = AgentId::parse(&"ab".repeat(32)).unwrap();
    let cloud = project(&watch(&[], &["cloud-status"], &[]), &w, &Stacks::default());
    let h = cloud.head(&agent, &w, 1_770_681_700_000);
    assert!(h.changed, "gcp_status moved");
    assert_ne!(h.prev_cursor, h.cursor);
    assert_eq!(h.counts.items, 1);
    assert!(!h.all_clear);
    assert_eq!(h.ttl_sec, 600);
    assert_eq!(
        h.latest_url,
        format!("/api/v1/watch/latest?agent_id={agent}")
    );
    assert_eq!(cloud.etag(), &h.cursor[7..]);
    let security = project(&watch(&[], &["security"], &[]), &w, &Stacks::default());
    let h = security.head(&agent, &w, 1_770_681_700_000);
    assert!(!h.changed, "cisa_kev did not move");
    assert_eq!(h.prev_cursor, h.cursor);
    assert_eq!(h.counts.flagged, 4);
    // A stale snapshot is said, and is never "all clear".
    let mut down = w.clone();
    down.stale_since_ms = Some(1);
    let quiet = project(&watch(&["aws_status"], &[], &[]), &down, &Stacks::default());
    let h = quiet.head(&agent, &down, 1_770_681_700_000);
    assert!(h.world.stale && !h.all_clear);
    assert!(
        project(&watch(&["aws_status"], &[], &[]), &w, &Stacks::default())
            .head(&agent, &w, 0)
            .all_clear
    );
}

#[test]
fn latest_and_digest_are_ddv1_shaped() {
    let w = world();
    let p = project(
        &watch(&["gcp_status"], &["security"], &[]),
        &w,
        &Stacks::default(),
    );
    let b = |id: &str, n: u8| {
        let v = parse_str(&format!(
            r#"{{"cursor":"{}","buckets":{{"items":[{}]}}}}"#,
            c(n),
            item(id, "x", "2026-03-01T00:00:00Z")
        ))
        .unwrap();
        (id.to_owned(), Batch::parse(&v, id).unwrap())
    };
    let batches = [b("gcp_status", 2), b("cisa_kev", 3)].into_iter().collect();
    let l = p.latest(&w, &batches, 0);
    assert_eq!(
        l.get("schema_version").and_then(Json::as_str),
        Some("1.2.0")
    );
    assert_eq!(
        l.get("cursor").and_then(Json::as_str),
        Some(p.cursor.as_str())
    );
    let items = l
        .get("buckets")
        .and_then(|b| b.get("items"))
        .and_then(Json::as_array)
        .unwrap();
    assert_eq!(items.len(), 2);
    let d = p.digest(&w, &batches, 0);
    let sources = d.get("sources").and_then(Json::as_array).unwrap();
    assert_eq!(sources.len(), 2);
    assert_eq!(
        sources[0].get("via").and_then(Json::as_array).unwrap()[0].as_str(),
        Some("tag:security")
    );
    // A stored batch reads back as it was.
    let (_, gcp) = b("gcp_status", 2);
    assert_eq!(Batch::parse(&gcp.to_json(), "gcp_status").unwrap(), gcp);
}

#[test]
fn since_answers_nothing_the_last_change_or_410() {
    let w = world();
    let p = project(&watch(&[], &["cloud-status"], &[]), &w, &Stacks::default());
    assert_eq!(p.since(&w, None).unwrap(), feed::Since::Whole);
    assert_eq!(p.since(&w, Some(&p.cursor)).unwrap(), feed::Since::Nothing);
    let feed::Since::Changes(before) = p.since(&w, Some(&p.prev_cursor)).unwrap() else {
        panic!("the cursor before the last change");
    };
    assert_eq!(before["gcp_status"], Some(c(12)));
    assert_eq!(before["aws_status"], Some(c(1)));
    assert_eq!(
        p.since(&w, Some(&c(77))).unwrap_err().code,
        ReasonCode::CursorNotFound
    );
    let id = "ab".repeat(32);
    let (_, since) =
        feed::parse_latest_query([("agent_id", id.as_str()), ("since", &c(5)[7..])]).unwrap();
    assert_eq!(since, Some(c(5)), "the prefix is optional");
    assert_eq!(
        feed::parse_latest_query([("agent_id", id.as_str()), ("since", "nope")])
            .unwrap_err()
            .code,
        ReasonCode::BadQuery
    );
}

#[test]
fn new_items_are_those_the_earlier_batch_did_not_hold() {
    let batch = |id: &str, n: u8, items: &[(&str, u8)]| {
        let items: Vec<String> = items
            .iter()
            .map(|(i, h)| {
                format!(
                    r#"{{"source":"{id}","id":"{i}","provenance":{{"content_hash":"{}"}}}}"#,
                    c(*h)
                )
            })
            .collect();
        let v = parse_str(&format!(
            r#"{{"cursor":"{}","buckets":{{"items":[{}]}}}}"#,
            c(n),
            items.join(",")
        ))
        .unwrap();
        (id.to_owned(), Batch::parse(&v, id).unwrap())
    };
    let before: BTreeMap<String, Batch> = [
        batch("gcp_status", 12, &[("a", 1), ("b", 2)]),
        batch("aws_status", 1, &[("x", 9)]),
    ]
    .into_iter()
    .collect();
    // gcp: "a" unchanged, "b" edited (new hash), "c" new; aws did not move.
    let now: BTreeMap<String, Batch> = [
        batch("gcp_status", 2, &[("a", 1), ("b", 3), ("c", 4)]),
        batch("aws_status", 1, &[("x", 9)]),
    ]
    .into_iter()
    .collect();
    let fresh = feed::new_items(&now, &before);
    assert!(
        !fresh.contains_key("aws_status"),
        "a source that did not move has nothing new"
    );
    let ids: Vec<&str> = fresh["gcp_status"].buckets[0]
        .iter()
        .map(|i| i.get("id").and_then(Json::as_str).unwrap())
        .collect();
    assert_eq!(ids, ["b", "c"]);
    // An earlier batch no longer kept: every current item is new.
    let all = feed::new_items(&now, &BTreeMap::new());
    assert_eq!(all["gcp_status"].len(), 3);
}

/// The world of a fixture state (tests/fixtures/ddv1/<state>), as a first
/// refresh stores it: the pointer from its head and catalog, and each
/// source's batch from the live path, or the older one when the live body is
/// not the batch the catalog promises (as `worker::world` reads them).
fn fixture_world(state: &str) -> (WorldPointer, BTreeMap<String, Batch>) {
    use crate::core::world::refresh::Refresh;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ddv1")
        .join(state);
    let read = |rel: &str| -> Option<Json> {
        let text = std::fs::read_to_string(dir.join(rel)).ok()?;
        Some(parse_str(&text).unwrap())
    };
    let head = UpstreamHead::parse(&read("diff/head.json").unwrap()).unwrap();
    let catalog = Catalog::parse(&read("diff/sources.json").unwrap()).unwrap();
    let r = Refresh {
        last: None,
        now_ms: 1_773_576_000_000,
    };
    let mut fetched = BTreeMap::new();
    for (id, promised) in r.to_fetch(&catalog) {
        let found = crate::core::world::refresh::batch_paths(&id)
            .iter()
            .filter_map(|p| read(p.trim_start_matches('/')))
            .filter_map(|v| Batch::parse(&v, &id).ok())
            .find(|b| b.cursor.as_deref() == Some(promised.as_str()));
        fetched.insert(
            id.clone(),
            found.ok_or_else(|| crate::core::world::ddv1::Malformed(format!("{id}: no batch"))),
        );
    }
    let (pointer, store) = r.finish(head, None, &catalog, fetched);
    let batches = store
        .into_iter()
        .map(|b| (b.source_id.clone(), b))
        .collect();
    (pointer, batches)
}

fn counts_of(d: &Json, key: &str) -> BTreeMap<String, u64> {
    d.get(key)
        .and_then(Json::as_object)
        .unwrap_or_else(|| panic!("{key} is an object"))
        .iter()
        .map(|(k, v)| (k.clone(), v.as_safe_u64().unwrap()))
        .collect()
}

fn expect(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

#[test]
fn the_digest_counts_the_fixture_items_by_upstream_severity_and_suggested_action() {
    // Counted by hand from tests/fixtures/ddv1/v3/diff/source/*/latest.json:
    // nist_nvd's 8 items carry signals.severity.level (2 each of low,
    // medium, high, critical); cisa_kev's 60 flagged items and the cloud
    // status items carry no severity; nodejs_releases' 1 item (3 in v1)
    // carries signals.suggested_action REVIEW_CHANGELOG.
    let (w, batches) = fixture_world("v3");
    let digest = |watch: &Watch| {
        project(watch, &w, &Stacks::default()).digest(&w, &batches, 1_773_576_000_000)
    };
    let security = digest(&self::watch(&[], &["security"], &[]));
    assert_eq!(
        counts_of(&security, "by_severity"),
        expect(&[("critical", 2), ("high", 2), ("low", 2), ("medium", 2)])
    );
    assert_eq!(counts_of(&security, "by_suggested_action"), expect(&[]));
    let all = digest(&self::watch(
        &["nodejs_releases"],
        &["security", "cloud-status", "news"],
        &[],
    ));
    assert_eq!(
        counts_of(&all, "by_suggested_action"),
        expect(&[("REVIEW_CHANGELOG", 1)])
    );
    assert_eq!(counts_of(&all, "by_severity").values().sum::<u64>(), 8);
    let cloud = digest(&self::watch(&[], &["cloud-status"], &[]));
    assert_eq!(counts_of(&cloud, "by_severity"), expect(&[]));
    assert_eq!(counts_of(&cloud, "by_suggested_action"), expect(&[]));
    // The maps follow the batches: v1 served three releases.
    let (w1, b1) = fixture_world("v1");
    let releases = project(
        &self::watch(&["nodejs_releases"], &[], &[]),
        &w1,
        &Stacks::default(),
    )
    .digest(&w1, &b1, 0);
    assert_eq!(
        counts_of(&releases, "by_suggested_action"),
        expect(&[("REVIEW_CHANGELOG", 3)])
    );
}

#[test]
fn a_breakdown_counts_whole_batches_verbatim_and_skips_what_is_not_a_signal() {
    let items: Vec<String> = (0..60)
        .map(|n| {
            let signals = match n % 6 {
                0 => r#""signals":{"severity":{"level":"high"},"suggested_action":"PATCH_NOW"}"#,
                1 => r#""signals":{"severity":{"level":"High"}}"#,
                2 => r#""signals":{"severity":{"cvss":9.8}}"#,
                3 => r#""signals":{"severity":{"level":7},"suggested_action":null}"#,
                4 => r#""suggested_action":"PATCH_NOW""#,
                _ => r#""signals":{"incident":{"status":"resolved"}}"#,
            };
            format!(
                r#"{{"source":"s_x","id":"{n}","published_at":"2026-03-01T00:00:{:02}Z",{signals}}}"#,
                n % 60
            )
        })
        .collect();
    let v = parse_str(&format!(
        r#"{{"cursor":"{}","buckets":{{"items":[{}],"flagged":[{}]}}}}"#,
        c(1),
        items[..40].join(","),
        items[40..].join(",")
    ))
    .unwrap();
    let batches: BTreeMap<String, Batch> = [("s_x".to_owned(), Batch::parse(&v, "s_x").unwrap())]
        .into_iter()
        .collect();
    let resolved = Resolved {
        sources: vec!["s_x".into(), "s_missing".into()],
        ..Resolved::default()
    };
    let by = breakdown(&resolved, &batches);
    // Every bucket, all 60 items (latest would serve 50): 10 of each kind.
    assert_eq!(by.by_severity.get("high"), Some(&10));
    assert_eq!(by.by_severity.get("High"), Some(&10), "never normalised");
    assert_eq!(by.by_severity.len(), 2);
    assert_eq!(
        by.by_suggested_action.into_iter().collect::<Vec<_>>(),
        [("PATCH_NOW".to_owned(), 10)],
        "only signals.suggested_action, only a string"
    );
    assert_eq!(
        breakdown(&Resolved::default(), &batches),
        Breakdown::default()
    );
}
