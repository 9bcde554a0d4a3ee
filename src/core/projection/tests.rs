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
    let r = resolve(&w, &cat, &Stacks::committed());
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
        &Stacks::committed(),
    );
    assert!(near.sources.is_empty());
}

#[test]
fn the_cursor_is_the_spec_formula_and_moves_only_with_the_projection() {
    let cat = catalog();
    let stacks = Stacks::committed();
    let by_tag = resolve(&watch(&[], &["cloud-status"], &[]), &cat, &stacks);
    let by_id = resolve(
        &watch(&["gcp_status", "aws_status"], &[], &[]),
        &cat,
        &stacks,
    );
    let reordered = resolve(
        &watch(&["aws_status", "gcp_status"], &[], &[]),
        &cat,
        &stacks,
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
    let with_disabled = resolve(&watch(&["github_changelog"], &[], &[]), &cat, &stacks);
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
