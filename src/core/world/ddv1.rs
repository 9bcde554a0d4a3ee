//! DiffDelta's ddv1 feed as it is *served* (`docs/design/watch-feeds.md`,
//! "ddv1 as served"), read leniently: the global `head.json`, the catalog
//! `sources.json` and a source's `latest.json`. What is kept is what a
//! projection needs; items are kept verbatim (never rewritten or rescored),
//! only sorted into the spec's buckets.
//!
//! The drift absorbed here, each seen in served files (the same page,
//! "Drift a reader must absorb"): the schema's bucket names (`new` ≡
//! `items`, plus `flagged`) beside the spec's; the zero cursor for "never
//! succeeded" (≡ `null`); catalog entries with fields missing; unknown
//! members everywhere. Cursors are opaque: compared, never recomputed (the
//! spec's `canonical_v1` does not reproduce the served ones).

use crate::core::json::Json;
use std::collections::BTreeMap;

/// Why a ddv1 document cannot be used (the refresh keeps the last snapshot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn bad(what: impl Into<String>) -> Malformed {
    Malformed(what.into())
}

/// The cursor of "never succeeded", which the upstream also writes as `null`.
pub const ZERO_CURSOR: &str =
    "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// A ddv1 cursor: `None` for `null`, absent or the zero cursor; otherwise
/// `sha256:` + 64 lowercase hex (anything else is malformed).
pub fn cursor(v: Option<&Json>) -> Result<Option<String>, Malformed> {
    match v {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) if s == ZERO_CURSOR => Ok(None),
        Some(Json::String(s)) if crate::core::jcs::is_cursor(s) => Ok(Some(s.clone())),
        Some(_) => Err(bad("a cursor is null or sha256: and 64 lowercase hex")),
    }
}

/// The global `/diff/head.json`: whether anything moved upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamHead {
    /// The world cursor (`None`: never succeeded).
    pub cursor: Option<String>,
    /// When the upstream generated it, as written (never parsed: some
    /// upstream times carry no zone).
    pub generated_at: Option<String>,
    /// The upstream's polling hint.
    pub ttl_sec: Option<u64>,
}

impl UpstreamHead {
    /// Reads `head.json` (an object with a cursor; the rest is optional).
    pub fn parse(v: &Json) -> Result<UpstreamHead, Malformed> {
        if v.as_object().is_none() {
            return Err(bad("head.json is not an object"));
        }
        if v.get("cursor").is_none() {
            return Err(bad("head.json has no cursor"));
        }
        Ok(UpstreamHead {
            cursor: cursor(v.get("cursor"))?,
            generated_at: v
                .get("generated_at")
                .and_then(Json::as_str)
                .map(str::to_owned),
            ttl_sec: v.get("ttl_sec").and_then(Json::as_safe_u64),
        })
    }
}

/// One source of the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogSource {
    /// `source_id`.
    pub id: String,
    /// Its tags (sources carry tags; items do not).
    pub tags: Vec<String>,
    /// Whether the upstream still runs it.
    pub enabled: bool,
    /// `ok`, `error`, `disabled`, … as written.
    pub status: Option<String>,
    /// Its cursor (`None`: never succeeded).
    pub cursor: Option<String>,
    /// Its polling hint.
    pub ttl_sec: Option<u64>,
    /// Marked stale by the upstream.
    pub stale: bool,
}

/// The catalog, `/diff/sources.json`: every source, by id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Catalog {
    /// By `source_id` (sorted; a repeated id keeps its first entry).
    pub sources: BTreeMap<String, CatalogSource>,
}

/// A source id as the capsule's `watch.sources` admits them: 2 to 32 of
/// `[a-z0-9_-]` (the upstream's ids are all of this form).
fn is_source_id(s: &str) -> bool {
    (2..=32).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

impl Catalog {
    /// Reads `sources.json`: `{"sources": [...]}`. An entry without a usable
    /// `source_id` is skipped (it could never be selected); a malformed
    /// cursor makes the whole catalog unusable (it would change what a
    /// projection's cursor means).
    pub fn parse(v: &Json) -> Result<Catalog, Malformed> {
        let list = v
            .get("sources")
            .and_then(Json::as_array)
            .ok_or_else(|| bad("sources.json has no sources array"))?;
        let mut sources = BTreeMap::new();
        for s in list {
            let Some(id) = s
                .get("source_id")
                .and_then(Json::as_str)
                .filter(|i| is_source_id(i))
            else {
                continue;
            };
            if sources.contains_key(id) {
                continue;
            }
            let tags = s
                .get("tags")
                .and_then(Json::as_array)
                .map(|t| {
                    let mut t: Vec<String> = t
                        .iter()
                        .filter_map(Json::as_str)
                        .map(str::to_owned)
                        .collect();
                    t.sort();
                    t.dedup();
                    t
                })
                .unwrap_or_default();
            sources.insert(
                id.to_owned(),
                CatalogSource {
                    id: id.to_owned(),
                    tags,
                    enabled: s.get("enabled").and_then(Json::as_bool).unwrap_or(true),
                    status: s.get("status").and_then(Json::as_str).map(str::to_owned),
                    cursor: cursor(s.get("cursor"))
                        .map_err(|e| bad(format!("sources.json {id}: {e}")))?,
                    ttl_sec: s.get("ttl_sec").and_then(Json::as_safe_u64),
                    stale: s.get("stale").and_then(Json::as_bool).unwrap_or(false),
                },
            );
        }
        Ok(Catalog { sources })
    }
}

/// The buckets of a batch, under the spec's names plus `flagged`.
pub const BUCKETS: [&str; 4] = ["items", "updated", "removed", "flagged"];

/// A source's last changed batch, its `latest.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// The source.
    pub source_id: String,
    /// The batch's cursor (must equal the catalog's for the source).
    pub cursor: Option<String>,
    /// Items by bucket ([`BUCKETS`] order), each verbatim.
    pub buckets: [Vec<Json>; 4],
}

impl Batch {
    /// Reads a source's `latest.json`. Buckets: `items` (or the schema's
    /// `new`, the same bucket), `updated`, `removed`, `flagged`; unknown ones
    /// are ignored. An item must be an object with a string `id` (the key is
    /// `(source, id)`); anything else in a bucket makes the batch unusable.
    pub fn parse(v: &Json, source_id: &str) -> Result<Batch, Malformed> {
        if v.as_object().is_none() {
            return Err(bad(format!("{source_id}: latest.json is not an object")));
        }
        if let Some(id) = v.get("source_id").and_then(Json::as_str) {
            if id != source_id {
                return Err(bad(format!("{source_id}: latest.json is {id}'s")));
            }
        }
        let cursor = cursor(v.get("cursor")).map_err(|e| bad(format!("{source_id}: {e}")))?;
        let mut buckets: [Vec<Json>; 4] = Default::default();
        if let Some(b) = v.get("buckets") {
            let b = b
                .as_object()
                .ok_or_else(|| bad(format!("{source_id}: buckets is not an object")))?;
            for (name, items) in b {
                let slot = match name.as_str() {
                    "items" | "new" => 0,
                    "updated" => 1,
                    "removed" => 2,
                    "flagged" => 3,
                    _ => continue,
                };
                let items = items
                    .as_array()
                    .ok_or_else(|| bad(format!("{source_id}: bucket {name} is not an array")))?;
                for item in items {
                    if item.get("id").and_then(Json::as_str).is_none() {
                        return Err(bad(format!(
                            "{source_id}: an item in {name} has no string id"
                        )));
                    }
                    buckets[slot].push(item.clone());
                }
            }
        }
        Ok(Batch {
            source_id: source_id.to_owned(),
            cursor,
            buckets,
        })
    }

    /// The batch as stored (normalised: the four buckets under their spec
    /// names, items verbatim); [`Batch::parse`] reads it back unchanged.
    pub fn to_json(&self) -> Json {
        let buckets = BUCKETS
            .iter()
            .zip(&self.buckets)
            .map(|(name, items)| ((*name).to_owned(), Json::Array(items.clone())))
            .collect();
        Json::Object(vec![
            ("source_id".into(), Json::from(self.source_id.as_str())),
            (
                "cursor".into(),
                self.cursor.as_deref().map_or(Json::Null, Json::from),
            ),
            ("buckets".into(), Json::Object(buckets)),
        ])
    }

    /// Items in every bucket.
    pub fn len(&self) -> usize {
        self.buckets.iter().map(Vec::len).sum()
    }

    /// No items at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
