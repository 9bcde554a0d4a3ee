//! Projected watch feeds (docs/PROTOCOL.md §15): the part
//! of the ddv1 world feed an agent's `watch` selects, and a cursor that
//! moves only when that part does. Pure: the Worker fetches and stores the
//! world ([`crate::core::world`]); everything decided about a projection is
//! decided here.
//!
//! **Selection, never interpretation.** A watch resolves to the union of
//! its `sources` found in the catalog, the catalog's sources carrying any of
//! its `tags`, and the sources its `stacks` map to (by the committed stack
//! map). Matches are exact (a stack name is lowercased, nothing else); what
//! matches nothing is listed back as unresolved. The union differs from the
//! peer client's filter, which ANDs sources with tags: a watch here only
//! ever adds sources.
//!
//! **The cursor** is `sha256:` + hex SHA-256 of the RFC 8785 bytes of
//! `{"basis": "watch_v1", "sources": [[id, cursor|null], …]}` over the
//! resolved ids (sorted) and each one's upstream cursor as the last good
//! snapshot holds it. The upstream's cursors hash exactly the items served,
//! so it moves iff the projected items do: equal on every edge, equal for two
//! agents whose watches resolve alike, blind to watch order, unmoved by
//! unwatched sources, and unmoved by an outage (a failed source keeps its
//! last cursor).

use crate::core::jcs;
use crate::core::json::Json;
use crate::core::model::Watch;
use crate::core::world::ddv1::{Batch, Catalog, BUCKETS};
use crate::core::world::stacks::Stacks;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

pub mod feed;
pub mod push;

/// The cursor's basis, so a future definition cannot collide with this one.
pub const BASIS: &str = "watch_v1";
/// At most this many sources per projection (sorted by id; the rest are
/// reported in [`Resolved::over_cap`]).
pub const MAX_SOURCES: usize = 50;
/// At most this many items per source in `latest` (the newest).
pub const MAX_ITEMS_PER_SOURCE: usize = 50;
/// At most this many bytes of items in `latest`; sources past it are listed
/// as truncated, with where to read them whole.
pub const MAX_LATEST_BYTES: usize = 512 * 1024;

/// What a watch named that matches nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Unresolved {
    /// Source ids not in the catalog.
    pub sources: Vec<String>,
    /// Tags no catalog source carries.
    pub tags: Vec<String>,
    /// Stack names the map does not know, or whose sources are none in the
    /// catalog.
    pub stacks: Vec<String>,
}

/// A watch resolved against a catalog.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resolved {
    /// The selected source ids, sorted, at most [`MAX_SOURCES`].
    pub sources: Vec<String>,
    /// For each selected source, why: `source:<id>`, `tag:<tag>`,
    /// `stack:<name>` (sorted).
    pub via: BTreeMap<String, Vec<String>>,
    /// What matched nothing.
    pub unresolved: Unresolved,
    /// Sources selected past the cap (sorted), not projected.
    pub over_cap: Vec<String>,
}

/// Resolves `watch` against the catalog and the stack map (see the module
/// comment).
pub fn resolve(watch: &Watch, catalog: &Catalog, stacks: &Stacks) -> Resolved {
    let mut via: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut unresolved = Unresolved::default();
    let mut add = |id: &str, why: String| {
        via.entry(id.to_owned()).or_default().insert(why);
    };
    for id in watch.sources.iter().flatten() {
        if catalog.sources.contains_key(id) {
            add(id, format!("source:{id}"));
        } else {
            unresolved.sources.push(id.clone());
        }
    }
    for tag in watch.tags.iter().flatten() {
        let matching: Vec<&String> = catalog
            .sources
            .values()
            .filter(|s| s.tags.iter().any(|t| t == tag))
            .map(|s| &s.id)
            .collect();
        if matching.is_empty() {
            unresolved.tags.push(tag.clone());
        }
        for id in matching {
            add(id, format!("tag:{tag}"));
        }
    }
    for name in watch.stacks.iter().flatten() {
        let known: Vec<&String> = stacks
            .sources(name)
            .unwrap_or(&[])
            .iter()
            .filter(|id| catalog.sources.contains_key(*id))
            .collect();
        if known.is_empty() {
            unresolved.stacks.push(name.clone());
        }
        for id in known {
            add(id, format!("stack:{}", name.to_lowercase()));
        }
    }
    for list in [
        &mut unresolved.sources,
        &mut unresolved.tags,
        &mut unresolved.stacks,
    ] {
        list.sort();
        list.dedup();
    }
    let mut sources: Vec<String> = via.keys().cloned().collect();
    let over_cap = sources.split_off(sources.len().min(MAX_SOURCES));
    let via = crate::core::world::map_of(
        via.into_iter()
            .filter(|(id, _)| sources.binary_search(id).is_ok())
            .map(|(id, why)| (id, why.into_iter().collect())),
    );
    Resolved {
        sources,
        via,
        unresolved,
        over_cap,
    }
}

/// The projected cursor over `(id, upstream cursor)` pairs, sorted by id
/// (see the module comment).
pub fn watch_cursor(pairs: &[(String, Option<String>)]) -> String {
    let sources = pairs
        .iter()
        .map(|(id, c)| {
            Json::Array(vec![
                Json::from(id.as_str()),
                c.as_deref().map_or(Json::Null, Json::from),
            ])
        })
        .collect();
    jcs::cursor(&Json::Object(vec![
        ("basis".into(), Json::from(BASIS)),
        ("sources".into(), Json::Array(sources)),
    ]))
}

/// The `(id, cursor)` pairs of `resolved` as the snapshot `cursors` holds
/// them (a source the snapshot never fetched counts as `null`).
pub fn pairs(
    resolved: &Resolved,
    cursors: &BTreeMap<String, Option<String>>,
) -> Vec<(String, Option<String>)> {
    resolved
        .sources
        .iter()
        .map(|id| (id.clone(), cursors.get(id).cloned().flatten()))
        .collect()
}

/// A source left out of `latest` whole, and where to read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Truncated {
    /// The source.
    pub source_id: String,
    /// Its upstream batch (relative to the upstream's base URL).
    pub full_url: String,
}

/// The projected `latest`: its buckets (items verbatim), what was cut, and
/// the counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Latest {
    /// Items by bucket ([`BUCKETS`] order), each sorted by
    /// `(published_at, source, id)` compared as strings (upstream times are
    /// not all parseable: some have no zone).
    pub buckets: [Vec<Json>; 4],
    /// Sources whose items did not fit, whole.
    pub truncated: Vec<Truncated>,
    /// Sources with more than [`MAX_ITEMS_PER_SOURCE`] items, cut to their
    /// newest.
    pub capped: Vec<String>,
}

fn text<'a>(item: &'a Json, key: &str) -> &'a str {
    item.get(key).and_then(Json::as_str).unwrap_or("")
}

fn order_key(item: &Json, source: &str) -> (String, String, String) {
    (
        text(item, "published_at").to_owned(),
        source.to_owned(),
        text(item, "id").to_owned(),
    )
}

/// The positions of `items` in `(published_at, source, id)` order, the
/// position breaking ties. Sorted as one joined string per item (fields
/// joined by NUL, which sorts below every other character, so the order is
/// the tuple's): the Worker already has a sort of strings, and each sort of
/// another key type would add kilobytes to its wasm.
fn order_of<'a>(items: impl Iterator<Item = (&'a Json, &'a str)>) -> Vec<usize> {
    let mut keys: Vec<String> = items
        .enumerate()
        .map(|(i, (item, source))| {
            let (published, source, id) = order_key(item, source);
            format!("{published}\0{source}\0{id}\0{i:010}")
        })
        .collect();
    keys.sort();
    keys.iter()
        .filter_map(|k| k.rsplit('\0').next()?.parse().ok())
        .collect()
}

/// Assembles `latest` from the stored batches of the resolved sources, in
/// id order: at most [`MAX_ITEMS_PER_SOURCE`] per source (its newest by
/// `(published_at, id)`), at most [`MAX_LATEST_BYTES`] of items (a source
/// that would cross it is listed in `truncated` whole, and the sources after
/// it still get their turn). Deterministic: the same batches give the same
/// bytes.
pub fn latest(resolved: &Resolved, batches: &BTreeMap<String, Batch>) -> Latest {
    let mut out = Latest {
        buckets: Default::default(),
        truncated: Vec::new(),
        capped: Vec::new(),
    };
    let mut bytes = 0usize;
    for id in &resolved.sources {
        let Some(batch) = batches.get(id) else {
            continue;
        };
        let mut items: Vec<(usize, &Json)> = batch
            .buckets
            .iter()
            .enumerate()
            .flat_map(|(b, items)| items.iter().map(move |i| (b, i)))
            .collect();
        if items.len() > MAX_ITEMS_PER_SOURCE {
            // Keep the newest MAX: the last ones in order.
            let order = order_of(items.iter().map(|(_, i)| (*i, id.as_str())));
            let keep = &order[order.len() - MAX_ITEMS_PER_SOURCE..];
            items = keep.iter().map(|&k| items[k]).collect();
            out.capped.push(id.clone());
        }
        let size: usize = items
            .iter()
            .map(|(_, i)| jcs::canonicalize(i).len() + 1)
            .sum();
        if bytes + size > MAX_LATEST_BYTES {
            out.truncated.push(Truncated {
                source_id: id.clone(),
                full_url: format!("/diff/source/{id}/latest.json"),
            });
            continue;
        }
        bytes += size;
        for (b, item) in items {
            out.buckets[b].push(item.clone());
        }
    }
    for bucket in &mut out.buckets {
        let order = order_of(bucket.iter().map(|i| (i, text(i, "source"))));
        let mut slots: Vec<Option<Json>> = std::mem::take(bucket).into_iter().map(Some).collect();
        *bucket = order.iter().filter_map(|&k| slots[k].take()).collect();
    }
    out
}

/// Items per signal value over the selected sources' batches, as the
/// upstream wrote them (`digest`'s `by_severity` and `by_suggested_action`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Breakdown {
    /// Items per `signals.severity.level`.
    pub by_severity: BTreeMap<String, usize>,
    /// Items per `signals.suggested_action`.
    pub by_suggested_action: BTreeMap<String, usize>,
}

/// Counts the items of the resolved sources' whole batches (every bucket,
/// before `latest`'s caps: the same items as the digest's `counts`) by
/// their upstream signals: `signals.severity.level` and
/// `signals.suggested_action`, each a string used verbatim as the key
/// (never normalised, rescored or inferred). An item without the signal,
/// or with one that is not a string, counts under no key, so a map's sum
/// can be less than the items counted.
pub fn breakdown(resolved: &Resolved, batches: &BTreeMap<String, Batch>) -> Breakdown {
    let mut out = Breakdown::default();
    let items = resolved
        .sources
        .iter()
        .filter_map(|id| batches.get(id))
        .flat_map(|b| b.buckets.iter().flatten());
    for item in items {
        let Some(signals) = item.get("signals") else {
            continue;
        };
        let severity = signals.get("severity").and_then(|s| s.get("level"));
        if let Some(level) = severity.and_then(Json::as_str) {
            *out.by_severity.entry(level.to_owned()).or_default() += 1;
        }
        if let Some(action) = signals.get("suggested_action").and_then(Json::as_str) {
            *out.by_suggested_action
                .entry(action.to_owned())
                .or_default() += 1;
        }
    }
    out
}

impl Latest {
    /// Items per bucket, in [`BUCKETS`] order.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        crate::core::world::map_of(
            BUCKETS
                .iter()
                .zip(&self.buckets)
                .map(|(name, b)| (*name, b.len())),
        )
    }
}

#[cfg(test)]
mod tests;
