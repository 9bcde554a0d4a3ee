//! One refresh of the world snapshot, decided step by step with no I/O: the
//! Worker asks the upstream what [`Refresh`] says, hands back what it got,
//! and stores what comes out (the changed sources' batches first, then the
//! pointer that names them, so a reader never follows a pointer to a
//! missing body).
//!
//! 1. `GET /diff/head.json` with the last `ETag`. A 304, or the same cursor
//!    while the catalog is younger than [`CATALOG_MAX_AGE_MS`], ends the
//!    refresh: no other request (the fast path of `docs/design/watch-feeds.md`,
//!    "What was decided, and why"; the upstream repeats a cursor only when
//!    nothing changed).
//! 2. Otherwise `GET /diff/sources.json`, then the `latest.json` of each
//!    source whose cursor moved ([`Refresh::to_fetch`]), at the live path
//!    and, when its body's cursor is not the catalog's, at the older one the
//!    catalog itself names.
//! 3. A source whose batch cannot be had keeps its last cursor, marked
//!    stale: an outage never reads as a change (ddv1 §5). An upstream that is
//!    down or malformed keeps the whole snapshot, marked stale since then.

use super::ddv1::{Batch, Catalog, CatalogSource, Malformed, UpstreamHead};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A catalog older than this is read again even when the global cursor did
/// not move (tags and enabled flags can change without a new batch).
pub const CATALOG_MAX_AGE_MS: u64 = 60 * 60 * 1000;

/// The upstream paths (relative to its base URL).
pub const HEAD_PATH: &str = "/diff/head.json";
/// The catalog.
pub const SOURCES_PATH: &str = "/diff/sources.json";

/// KV key of the world snapshot's pointer.
pub const POINTER_KV_KEY: &str = "world:head";
/// How long a stored batch is kept (a pointer names only current ones; the
/// older stay for projections still being read).
pub const BATCH_TTL_SEC: u64 = 14 * 86_400;

/// KV key of a source's batch, content-addressed by its cursor (immutable).
pub fn batch_kv_key(id: &str, cursor: Option<&str>) -> String {
    let hex = cursor.map_or("none", crate::core::jcs::cursor_hex);
    format!("world:src:{id}:{hex}")
}

/// Where a source's batch is read: the live path first, then the older one
/// (some catalogs still name `/diff/{id}/latest.json`).
pub fn batch_paths(id: &str) -> [String; 2] {
    [
        format!("/diff/source/{id}/latest.json"),
        format!("/diff/{id}/latest.json"),
    ]
}

/// What the snapshot knows of one source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceState {
    /// The cursor of the batch stored for it (`None`: none yet, or it never
    /// succeeded upstream).
    pub cursor: Option<String>,
    /// Its catalog tags.
    pub tags: Vec<String>,
    /// Enabled upstream.
    pub enabled: bool,
    /// The upstream's status word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Stale: marked so upstream, or its last batch could not be had here.
    #[serde(default)]
    pub stale: bool,
    /// Its polling hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_sec: Option<u64>,
    /// Items per bucket in its stored batch (`items`, `updated`, `removed`,
    /// `flagged`), so a projected head needs no batch read.
    #[serde(default)]
    pub counts: [u32; 4],
}

/// The world snapshot's pointer (KV `world:head`): what every projected
/// read starts from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorldPointer {
    /// The upstream's global cursor when last read.
    pub world_cursor: Option<String>,
    /// When the upstream generated it, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_generated_at: Option<String>,
    /// The upstream head's `ETag`, for the next `If-None-Match`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// When the upstream was last asked successfully (Unix ms).
    pub checked_at_ms: u64,
    /// When the catalog was last read (Unix ms).
    pub catalog_at_ms: u64,
    /// Since when the upstream has failed, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_since_ms: Option<u64>,
    /// Every source, by id.
    pub sources: BTreeMap<String, SourceState>,
    /// The sources' cursors before the last change (for `prev_cursor`).
    pub prev: BTreeMap<String, Option<String>>,
}

impl WorldPointer {
    /// Names this snapshot for a location's kept projections: it changes
    /// with every refresh that stored something (`checked_at_ms`) and with
    /// an outage (`stale_since_ms`), which both show in a projected head.
    pub fn version(&self) -> String {
        format!(
            "{}.{}",
            self.checked_at_ms,
            self.stale_since_ms.unwrap_or(0)
        )
    }

    /// The sources' cursors, as projections hash them.
    pub fn cursors(&self) -> BTreeMap<String, Option<String>> {
        super::map_of(
            self.sources
                .iter()
                .map(|(id, s)| (id.clone(), s.cursor.clone())),
        )
    }

    /// The sources' cursors before the world's last change: the previous
    /// cursor where one is known, else the current one (a source that
    /// appeared since has no earlier cursor).
    pub fn cursors_before(&self) -> BTreeMap<String, Option<String>> {
        let mut before = self.cursors();
        for (id, c) in &self.prev {
            before.insert(id.clone(), c.clone());
        }
        before
    }

    /// The catalog as the snapshot holds it (what a watch resolves against).
    pub fn catalog(&self) -> Catalog {
        Catalog {
            sources: super::map_of(self.sources.iter().map(|(id, s)| {
                (
                    id.clone(),
                    CatalogSource {
                        id: id.clone(),
                        tags: s.tags.clone(),
                        enabled: s.enabled,
                        status: s.status.clone(),
                        cursor: s.cursor.clone(),
                        ttl_sec: s.ttl_sec,
                        stale: s.stale,
                    },
                )
            })),
        }
    }
}

/// The upstream head's answer, as the Worker got it.
#[derive(Debug, Clone)]
pub enum HeadAnswer<'a> {
    /// `304 Not Modified`.
    NotModified,
    /// `200` with this body and `ETag`.
    Body(&'a crate::core::json::Json, Option<&'a str>),
    /// Anything else: a status, a network error, a body that is not JSON.
    Failed(String),
}

/// What to do after the head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterHead {
    /// Nothing moved: store this pointer (only the check time changed).
    Done(WorldPointer),
    /// Read the catalog next.
    ReadCatalog(UpstreamHead, Option<String>),
    /// The upstream failed: store this pointer (stale) if there is one;
    /// `None` with no snapshot yet.
    Failed(Option<WorldPointer>, String),
}

/// One refresh, started from the stored pointer (`None`: the first).
#[derive(Debug, Clone)]
pub struct Refresh {
    /// The stored pointer.
    pub last: Option<WorldPointer>,
    /// "Now" (Unix ms).
    pub now_ms: u64,
}

impl Refresh {
    /// The `If-None-Match` for the head request.
    pub fn etag(&self) -> Option<&str> {
        self.last.as_ref().and_then(|p| p.etag.as_deref())
    }

    fn failed(&self, why: String) -> AfterHead {
        let stale = self.last.clone().map(|mut p| {
            p.stale_since_ms.get_or_insert(self.now_ms);
            p
        });
        AfterHead::Failed(stale, why)
    }

    fn touched(&self, p: &WorldPointer) -> WorldPointer {
        let mut p = p.clone();
        p.checked_at_ms = self.now_ms;
        p.stale_since_ms = None;
        p
    }

    /// Step 1: the head's answer.
    pub fn after_head(&self, answer: HeadAnswer<'_>) -> AfterHead {
        let head = match answer {
            HeadAnswer::NotModified => {
                return match &self.last {
                    Some(p) => AfterHead::Done(self.touched(p)),
                    // A 304 to a request that named no ETag is nonsense.
                    None => self.failed("304 without a snapshot".into()),
                };
            }
            HeadAnswer::Failed(why) => return self.failed(why),
            HeadAnswer::Body(v, etag) => match UpstreamHead::parse(v) {
                Ok(h) => (h, etag.map(str::to_owned)),
                Err(Malformed(why)) => return self.failed(format!("head.json: {why}")),
            },
        };
        if let Some(p) = &self.last {
            let fresh = self.now_ms.saturating_sub(p.catalog_at_ms) < CATALOG_MAX_AGE_MS;
            if p.world_cursor == head.0.cursor && fresh {
                let mut t = self.touched(p);
                t.etag = head.1.or(t.etag);
                return AfterHead::Done(t);
            }
        }
        AfterHead::ReadCatalog(head.0, head.1)
    }

    /// Step 2: the sources whose batch to fetch, with the cursor the catalog
    /// promises: those whose cursor moved since the snapshot (and that have
    /// one).
    pub fn to_fetch(&self, catalog: &Catalog) -> Vec<(String, String)> {
        catalog
            .sources
            .values()
            .filter_map(|s| {
                let c = s.cursor.as_ref()?;
                let stored = self
                    .last
                    .as_ref()
                    .and_then(|p| p.sources.get(&s.id))
                    .and_then(|st| st.cursor.as_ref());
                (stored != Some(c)).then(|| (s.id.clone(), c.clone()))
            })
            .collect()
    }

    /// Step 3: the new pointer from the head, the catalog and what the
    /// fetches gave (a batch per source id, or why not; a batch whose cursor
    /// is not the catalog's counts as not had). Returns the pointer and the
    /// batches to store first, each under its own cursor.
    pub fn finish(
        &self,
        head: UpstreamHead,
        etag: Option<String>,
        catalog: &Catalog,
        fetched: BTreeMap<String, Result<Batch, Malformed>>,
    ) -> (WorldPointer, Vec<Batch>) {
        let mut store = Vec::new();
        let mut sources = BTreeMap::new();
        let old = self.last.as_ref();
        for s in catalog.sources.values() {
            let before = old.and_then(|p| p.sources.get(&s.id));
            let kept = before.and_then(|b| b.cursor.clone());
            let mut counts = before.map_or([0; 4], |b| b.counts);
            let (cursor, had) = match fetched.get(&s.id) {
                Some(Ok(b)) if b.cursor == s.cursor => {
                    counts = b.buckets.each_ref().map(|v| v.len() as u32);
                    store.push(b.clone());
                    (b.cursor.clone(), true)
                }
                // Not had, or not the batch the catalog promised: the last
                // one stays, and the source reads as stale.
                Some(_) => (kept, false),
                // Not fetched because nothing moved, or because it has no
                // batch upstream (never succeeded, disabled): what is stored
                // stays, as it is.
                None if s.cursor.is_none() || s.cursor == kept => (kept, true),
                // Moved, yet not fetched: not had.
                None => (kept, false),
            };
            sources.insert(
                s.id.clone(),
                SourceState {
                    cursor,
                    tags: s.tags.clone(),
                    enabled: s.enabled,
                    status: s.status.clone(),
                    stale: s.stale || !had,
                    ttl_sec: s.ttl_sec,
                    counts,
                },
            );
        }
        let old_cursors = old.map(WorldPointer::cursors).unwrap_or_default();
        let new_cursors: BTreeMap<String, Option<String>> = super::map_of(
            sources
                .iter()
                .map(|(id, s): (&String, &SourceState)| (id.clone(), s.cursor.clone())),
        );
        let prev = if new_cursors != old_cursors {
            old_cursors
        } else {
            old.map(|p| p.prev.clone()).unwrap_or_default()
        };
        let pointer = WorldPointer {
            world_cursor: head.cursor,
            upstream_generated_at: head.generated_at,
            etag,
            checked_at_ms: self.now_ms,
            catalog_at_ms: self.now_ms,
            stale_since_ms: None,
            sources,
            prev,
        };
        (pointer, store)
    }
}

#[cfg(test)]
mod tests;
