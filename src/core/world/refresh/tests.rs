use super::*;
use crate::core::json::{parse_str, Json};

const T0: u64 = 1_770_681_600_000;
const MIN: u64 = 60_000;

fn c(n: u8) -> String {
    format!("sha256:{}", format!("{n:02x}").repeat(32))
}

fn head(cursor: &str) -> Json {
    parse_str(&format!(
        r#"{{"cursor":"{cursor}","changed":true,"generated_at":"2026-03-15T11:55:46Z","ttl_sec":900,"counts":{{"items":1}}}}"#
    ))
    .unwrap()
}

/// A catalog of three sources with these cursors (0: null).
fn catalog(a: u8, b: u8, d: u8) -> Catalog {
    let cur = |n: u8| {
        if n == 0 {
            "null".to_owned()
        } else {
            format!("\"{}\"", c(n))
        }
    };
    Catalog::parse(
        &parse_str(&format!(
            r#"{{"sources":[
            {{"source_id":"aws_status","tags":["cloud-status"],"cursor":{}}},
            {{"source_id":"gcp_status","tags":["cloud-status"],"cursor":{}}},
            {{"source_id":"github_changelog","tags":["news"],"enabled":false,"status":"disabled","cursor":{},"stale":true}}
        ]}}"#,
            cur(a),
            cur(b),
            cur(d)
        ))
        .unwrap(),
    )
    .unwrap()
}

fn batch(id: &str, n: u8) -> Batch {
    Batch::parse(
        &parse_str(&format!(
            r#"{{"source_id":"{id}","cursor":"{}","buckets":{{"items":[{{"source":"{id}","id":"i{n}"}}]}}}}"#,
            c(n)
        ))
        .unwrap(),
        id,
    )
    .unwrap()
}

/// The first refresh of a world of (1, 2, null).
fn first() -> WorldPointer {
    let r = Refresh {
        last: None,
        now_ms: T0,
    };
    let h = head(&c(90));
    let AfterHead::ReadCatalog(up, etag) = r.after_head(HeadAnswer::Body(&h, Some("\"e1\"")))
    else {
        panic!("a first refresh reads the catalog");
    };
    let cat = catalog(1, 2, 0);
    assert_eq!(
        r.to_fetch(&cat),
        [
            ("aws_status".to_owned(), c(1)),
            ("gcp_status".to_owned(), c(2))
        ],
        "every source with a batch, none without"
    );
    let fetched = [
        ("aws_status".to_owned(), Ok(batch("aws_status", 1))),
        ("gcp_status".to_owned(), Ok(batch("gcp_status", 2))),
    ]
    .into_iter()
    .collect();
    let (p, store) = r.finish(up, etag, &cat, fetched);
    assert_eq!(store.len(), 2);
    assert_eq!(p.etag.as_deref(), Some("\"e1\""));
    assert_eq!(p.sources["github_changelog"].cursor, None);
    assert!(
        p.sources["github_changelog"].stale,
        "as the upstream marks it"
    );
    p
}

#[test]
fn an_unchanged_upstream_is_one_request() {
    let p = first();
    let r = Refresh {
        last: Some(p.clone()),
        now_ms: T0 + 5 * MIN,
    };
    assert_eq!(r.etag(), Some("\"e1\""));
    let AfterHead::Done(t) = r.after_head(HeadAnswer::NotModified) else {
        panic!("a 304 ends the refresh");
    };
    assert_eq!(t.checked_at_ms, T0 + 5 * MIN);
    assert_eq!(
        WorldPointer {
            checked_at_ms: p.checked_at_ms,
            ..t.clone()
        },
        p,
        "only the check time changed"
    );
    // The same cursor in a 200 (no ETag support upstream): the same.
    let h = head(&c(90));
    assert!(matches!(
        r.after_head(HeadAnswer::Body(&h, None)),
        AfterHead::Done(_)
    ));
    // An hour on, the catalog is read again even so.
    let later = Refresh {
        last: Some(p),
        now_ms: T0 + 61 * MIN,
    };
    assert!(matches!(
        later.after_head(HeadAnswer::Body(&h, None)),
        AfterHead::ReadCatalog(..)
    ));
}

#[test]
fn only_moved_sources_are_fetched_and_prev_keeps_the_last_change() {
    let p = first();
    let r = Refresh {
        last: Some(p.clone()),
        now_ms: T0 + 15 * MIN,
    };
    let h = head(&c(91));
    let AfterHead::ReadCatalog(up, etag) = r.after_head(HeadAnswer::Body(&h, Some("\"e2\"")))
    else {
        panic!("a new global cursor reads the catalog");
    };
    let cat = catalog(1, 3, 0);
    assert_eq!(r.to_fetch(&cat), [("gcp_status".to_owned(), c(3))]);
    let fetched = [("gcp_status".to_owned(), Ok(batch("gcp_status", 3)))]
        .into_iter()
        .collect();
    let (q, store) = r.finish(up, etag, &cat, fetched);
    assert_eq!(store.len(), 1);
    assert_eq!(q.sources["gcp_status"].cursor, Some(c(3)));
    assert_eq!(q.sources["aws_status"].cursor, Some(c(1)));
    assert_eq!(q.prev, p.cursors(), "prev is the world before this change");
}

#[test]
fn a_source_that_cannot_be_had_keeps_its_cursor_and_reads_stale() {
    let p = first();
    let r = Refresh {
        last: Some(p),
        now_ms: T0 + 15 * MIN,
    };
    let h = head(&c(91));
    let AfterHead::ReadCatalog(up, etag) = r.after_head(HeadAnswer::Body(&h, None)) else {
        panic!();
    };
    let cat = catalog(4, 5, 0);
    let fetched = [
        ("aws_status".to_owned(), Err(Malformed("HTTP 503".into()))),
        // The body is another batch than the catalog promised.
        ("gcp_status".to_owned(), Ok(batch("gcp_status", 6))),
    ]
    .into_iter()
    .collect();
    let (q, store) = r.finish(up, etag, &cat, fetched);
    assert!(store.is_empty(), "nothing unpromised is stored");
    assert_eq!(q.sources["aws_status"].cursor, Some(c(1)));
    assert_eq!(q.sources["gcp_status"].cursor, Some(c(2)));
    assert!(q.sources["aws_status"].stale && q.sources["gcp_status"].stale);
    // A projection over them does not move: an outage is not a change.
    assert_eq!(q.cursors(), r.last.as_ref().unwrap().cursors());
}

#[test]
fn a_failing_upstream_keeps_the_snapshot_marked_stale_since_the_first_failure() {
    let p = first();
    let r = Refresh {
        last: Some(p.clone()),
        now_ms: T0 + 5 * MIN,
    };
    let AfterHead::Failed(Some(s), why) = r.after_head(HeadAnswer::Failed("HTTP 503".into()))
    else {
        panic!("the snapshot is kept");
    };
    assert_eq!(why, "HTTP 503");
    assert_eq!(s.stale_since_ms, Some(T0 + 5 * MIN));
    let again = Refresh {
        last: Some(s),
        now_ms: T0 + 10 * MIN,
    };
    let garbage = parse_str(r#"{"changed":true}"#).unwrap();
    let AfterHead::Failed(Some(s2), _) = again.after_head(HeadAnswer::Body(&garbage, None)) else {
        panic!("a head without a cursor is a failure");
    };
    assert_eq!(
        s2.stale_since_ms,
        Some(T0 + 5 * MIN),
        "since the first failure"
    );
    assert_eq!(s2.sources, p.sources);
    // Recovery clears it.
    let back = Refresh {
        last: Some(s2),
        now_ms: T0 + 15 * MIN,
    };
    let AfterHead::Done(ok) = back.after_head(HeadAnswer::NotModified) else {
        panic!();
    };
    assert_eq!(ok.stale_since_ms, None);
    // No snapshot yet: nothing to serve.
    let none = Refresh {
        last: None,
        now_ms: T0,
    };
    assert!(matches!(
        none.after_head(HeadAnswer::Failed("timeout".into())),
        AfterHead::Failed(None, _)
    ));
}

#[test]
fn the_pointer_round_trips_and_gives_the_catalog_projections_resolve_against() {
    let p = first();
    let text = serde_json::to_string(&p).unwrap();
    assert_eq!(serde_json::from_str::<WorldPointer>(&text).unwrap(), p);
    let cat = p.catalog();
    assert_eq!(cat.sources["aws_status"].tags, ["cloud-status"]);
    assert_eq!(batch_paths("x_y")[0], "/diff/source/x_y/latest.json");
}
