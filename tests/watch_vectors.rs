//! Projection conformance vectors: `tests/vectors/watch/projection.json`, so
//! other implementations can check how a `watch` resolves against a ddv1
//! catalog and what its `watch_cursor` is (docs/PROTOCOL.md, projected watch
//! feeds; `src/core/projection.rs`).
//!
//! Each case is a catalog (in the served `sources.json` shape, drift
//! included), a watch, and the expected selection and unresolved names,
//! specified **here, by hand**; the cursor is the formula's (its inputs are
//! written out in the case as `cursor_input`, the exact RFC 8785 text hashed,
//! so a reader can check it with any SHA-256). The test fails when the core
//! disagrees with a hand-specified selection; `npm run regen` (or
//! `SELFCAP_REGEN=1 cargo test --test watch_vectors`) writes the file.

mod support;

use self_capsule::core::json::parse_str;
use self_capsule::core::model::Watch;
use self_capsule::core::projection::{pairs, resolve, watch_cursor};
use self_capsule::core::world::ddv1::Catalog;
use self_capsule::core::world::stacks::Stacks;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::PathBuf;
use support::generated::check_or_write;

fn c(n: u8) -> String {
    format!("sha256:{}", format!("{n:02x}").repeat(32))
}

/// A catalog in the served shape: tags on sources, a disabled source with a
/// null cursor, the zero cursor for a source that never succeeded.
fn catalog() -> Value {
    json!({
        "schema_version": "1.2.0",
        "tags_available": ["cloud-status", "news", "releases", "security"],
        "sources": [
            {"source_id": "aws_status", "tags": ["cloud-status"], "enabled": true, "status": "ok", "cursor": c(1), "ttl_sec": 300},
            {"source_id": "gcp_status", "tags": ["cloud-status"], "enabled": true, "status": "ok", "cursor": c(2), "ttl_sec": 300},
            {"source_id": "cisa_kev", "tags": ["security"], "enabled": true, "status": "ok", "cursor": c(3), "ttl_sec": 3600},
            {"source_id": "nist_nvd", "tags": ["security"], "enabled": true, "status": "error", "cursor": format!("sha256:{}", "0".repeat(64)), "ttl_sec": 7200},
            {"source_id": "nodejs_releases", "tags": ["releases"], "enabled": true, "status": "ok", "cursor": c(4), "ttl_sec": 3600},
            {"source_id": "kubernetes_releases", "tags": ["releases"], "enabled": true, "status": "ok", "cursor": c(5), "ttl_sec": 3600},
            {"source_id": "helm_releases", "tags": ["releases"], "enabled": true, "status": "ok", "cursor": c(6), "ttl_sec": 3600},
            {"source_id": "github_changelog", "tags": ["news"], "enabled": false, "status": "disabled", "cursor": null, "stale": true}
        ]
    })
}

struct Case {
    name: &'static str,
    watch: Value,
    /// Specified by hand.
    sources: &'static [&'static str],
    unresolved: (
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
    ),
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "by source id",
            watch: json!({"sources": ["cisa_kev", "gcp_status"]}),
            sources: &["cisa_kev", "gcp_status"],
            unresolved: (&[], &[], &[]),
        },
        Case {
            name: "by tag: every source carrying it",
            watch: json!({"tags": ["security"]}),
            sources: &["cisa_kev", "nist_nvd"],
            unresolved: (&[], &[], &[]),
        },
        Case {
            name: "by stack: the committed map, names lowercased",
            watch: json!({"stacks": ["Kubernetes"]}),
            // kubernetes → kubernetes_releases, kubernetes_cve, helm_releases;
            // this catalog has no kubernetes_cve.
            sources: &["helm_releases", "kubernetes_releases"],
            unresolved: (&[], &[], &[]),
        },
        Case {
            name: "a union of all three, deduplicated",
            watch: json!({"sources": ["gcp_status"], "tags": ["cloud-status"], "stacks": ["gcp", "node"]}),
            sources: &["aws_status", "gcp_status", "nodejs_releases"],
            unresolved: (&[], &[], &[]),
        },
        Case {
            name: "names that match nothing are listed back",
            watch: json!({"sources": ["cisa_kev", "not_a_source"], "tags": ["Security", "weather"], "stacks": ["docker", "left-pad"]}),
            // Exact matches only: "Security" is not "security"; docker's
            // sources are not in this catalog.
            sources: &["cisa_kev"],
            unresolved: (
                &["not_a_source"],
                &["Security", "weather"],
                &["docker", "left-pad"],
            ),
        },
        Case {
            name: "a disabled source and one that never succeeded count with a null cursor",
            watch: json!({"sources": ["github_changelog", "nist_nvd"]}),
            sources: &["github_changelog", "nist_nvd"],
            unresolved: (&[], &[], &[]),
        },
        Case {
            name: "an empty watch projects to nothing, with a stable cursor",
            watch: json!({}),
            sources: &[],
            unresolved: (&[], &[], &[]),
        },
    ]
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn projection_file_matches_the_specified_cases() {
    let cat_json = catalog();
    let cat = Catalog::parse(&parse_str(&cat_json.to_string()).unwrap()).unwrap();
    let world: BTreeMap<String, Option<String>> = cat
        .sources
        .iter()
        .map(|(id, s)| (id.clone(), s.cursor.clone()))
        .collect();
    let stacks = Stacks::committed();
    let mut out = Vec::new();
    for case in cases() {
        let list = |k: &str| {
            case.watch.get(k).map(|v| {
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap().to_owned())
                    .collect()
            })
        };
        let watch = Watch {
            tags: list("tags"),
            sources: list("sources"),
            stacks: list("stacks"),
        };
        let r = resolve(&watch, &cat, stacks);
        assert_eq!(r.sources, strings(case.sources), "{}", case.name);
        assert_eq!(
            r.unresolved.sources,
            strings(case.unresolved.0),
            "{}",
            case.name
        );
        assert_eq!(
            r.unresolved.tags,
            strings(case.unresolved.1),
            "{}",
            case.name
        );
        assert_eq!(
            r.unresolved.stacks,
            strings(case.unresolved.2),
            "{}",
            case.name
        );
        let p = pairs(&r, &world);
        let input = json!({"basis": "watch_v1", "sources": p}).to_string();
        let cursor = watch_cursor(&p);
        // serde_json sorts an object's keys and writes no spaces: for these
        // keys and values (ASCII strings, nulls) that is RFC 8785's text.
        assert_eq!(
            cursor,
            format!("sha256:{}", hex::encode(Sha256::digest(input.as_bytes()))),
            "{}",
            case.name
        );
        out.push(json!({
            "name": case.name,
            "watch": case.watch,
            "sources": r.sources,
            "via": r.via,
            "unresolved": r.unresolved,
            "cursor_input": input,
            "watch_cursor": cursor,
        }));
    }
    let file = json!({
        "description": "How a capsule's watch resolves against a ddv1 catalog, and its watch_cursor: sha256 over cursor_input (RFC 8785 text of {basis, sources: [[id, upstream cursor or null], ...]}). Stacks resolve through src/core/world/stacks.json.",
        "catalog": cat_json,
        "cases": out,
    });
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/watch/projection.json");
    check_or_write(
        &path,
        &(serde_json::to_string_pretty(&file).unwrap() + "\n"),
        "cargo test --test watch_vectors",
    );
}
