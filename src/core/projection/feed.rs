//! The projected feed as served (`GET /api/v1/watch/{head,latest,digest}`,
//! docs/PROTOCOL.md §15): the query, who gets a feed, and the three bodies,
//! each a function of the agent's watch and the world snapshot alone, so
//! every location answers the same bytes for the same snapshot.

use super::{breakdown, latest, pairs, resolve, watch_cursor, Resolved, Unresolved};
use crate::core::crypto::AgentId;
use crate::core::json::Json;
use crate::core::limits::Tier;
use crate::core::model::Watch;
use crate::core::reason::{ReasonCode, Refusal};
use crate::core::time::rfc3339;
use crate::core::urls::FeedDoc;
use crate::core::world::ddv1::{Batch, BUCKETS};
use crate::core::world::refresh::{WorldPointer, HEAD_PATH, SOURCES_PATH};
use crate::core::world::stacks::Stacks;
use serde::Serialize;
use std::collections::BTreeMap;

/// How often the world snapshot is refreshed (the cron trigger): the
/// shortest `ttl_sec` a projected head tells its pollers.
pub const REFRESH_INTERVAL_SEC: u64 = 300;
/// The ddv1 schema version `latest` is written in.
pub const LATEST_SCHEMA_VERSION: &str = "1.2.0";

/// The feed's query: `agent_id`, nothing else.
pub fn parse_query<K: AsRef<str>, V: AsRef<str>>(
    pairs: impl IntoIterator<Item = (K, V)>,
) -> Result<AgentId, Refusal> {
    let mut agent = None;
    for (k, v) in pairs {
        match k.as_ref() {
            "agent_id" if agent.is_none() => agent = Some(v.as_ref().to_owned()),
            "agent_id" => {
                return Err(Refusal::new(
                    ReasonCode::BadQuery,
                    "agent_id is given twice",
                ))
            }
            other => {
                return Err(Refusal::new(
                    ReasonCode::BadQuery,
                    format!("unknown parameter {other:?}: the feed takes agent_id only"),
                ))
            }
        }
    }
    let raw = agent.ok_or_else(|| {
        Refusal::new(
            ReasonCode::BadQuery,
            "agent_id is required: ?agent_id=<64 hex>",
        )
    })?;
    AgentId::parse(&raw).ok_or_else(|| Refusal::code(ReasonCode::BadAgentId))
}

/// `head`'s query: `agent_id`, and optionally `wait=N` (a long-poll of up
/// to [`crate::core::watch::WAIT_MAX_SEC`] seconds, as on head.json).
pub fn parse_head_query<K: AsRef<str>, V: AsRef<str>>(
    pairs: impl IntoIterator<Item = (K, V)>,
) -> Result<(AgentId, Option<u64>), Refusal> {
    let (wait, rest): (Vec<_>, Vec<_>) = pairs.into_iter().partition(|(k, _)| k.as_ref() == "wait");
    let agent = parse_query(rest)?;
    let wait = crate::core::watch::parse_wait(wait).map_err(|e| match e {
        crate::core::history::QueryError::Bad(why) => Refusal::new(ReasonCode::BadQuery, why),
        crate::core::history::QueryError::CursorNotFound => Refusal::code(ReasonCode::BadQuery),
    })?;
    Ok((agent, wait))
}

/// `latest`'s query: `agent_id`, and optionally `since` (a `watch_cursor`
/// the client holds, with or without its `sha256:` prefix).
pub fn parse_latest_query<K: AsRef<str>, V: AsRef<str>>(
    pairs: impl IntoIterator<Item = (K, V)>,
) -> Result<(AgentId, Option<String>), Refusal> {
    let mut rest = Vec::new();
    let mut since = None;
    for (k, v) in pairs {
        if k.as_ref() == "since" {
            if since.is_some() {
                return Err(Refusal::new(ReasonCode::BadQuery, "since is given twice"));
            }
            let c = crate::core::jcs::normalize_cursor(v.as_ref()).ok_or_else(|| {
                Refusal::new(
                    ReasonCode::BadQuery,
                    "since is a watch_cursor: sha256: and 64 hex",
                )
            })?;
            since = Some(c);
        } else {
            rest.push((k.as_ref().to_owned(), v.as_ref().to_owned()));
        }
    }
    Ok((parse_query(rest)?, since))
}

/// What `latest?since=` asks for, against the current projection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Since {
    /// No `since`: every item.
    Whole,
    /// `since` is the current cursor: nothing new.
    Nothing,
    /// `since` is the cursor before the world's last change: the items new
    /// since then, against the sources' cursors of that time.
    Changes(BTreeMap<String, Option<String>>),
}

/// The items of `now` that were not in `before` (a source's batch at its
/// earlier cursor): a source whose cursor did not move has none; otherwise
/// every item whose `(id, provenance.content_hash)` the earlier batch did not
/// hold. Items stay verbatim.
pub fn new_items(
    now: &BTreeMap<String, Batch>,
    before: &BTreeMap<String, Batch>,
) -> BTreeMap<String, Batch> {
    let key = |i: &Json| {
        (
            i.get("id").and_then(Json::as_str).unwrap_or("").to_owned(),
            i.get("provenance")
                .and_then(|p| p.get("content_hash"))
                .and_then(Json::as_str)
                .unwrap_or("")
                .to_owned(),
        )
    };
    let mut out = BTreeMap::new();
    for (id, b) in now {
        let old = before.get(id);
        if old.is_some_and(|o| o.cursor == b.cursor) {
            continue;
        }
        // Inserted, not collected: collecting into a set sorts first, and
        // each sorted type adds its own sort to the Worker's wasm.
        let mut seen = std::collections::BTreeSet::new();
        for i in old.iter().flat_map(|o| o.buckets.iter().flatten()) {
            seen.insert(key(i));
        }
        let mut fresh = b.clone();
        for bucket in &mut fresh.buckets {
            bucket.retain(|i| !seen.contains(&key(i)));
        }
        out.insert(id.clone(), fresh);
    }
    out
}

/// Whether this agent gets a projected feed: its capsule has a `watch`
/// (`watch_not_set`), and its tier in force is Pro or Plus
/// (`watch_requires_pro`, with where to upgrade and the upstream feed to
/// filter locally). Returns the watch.
pub fn admit(capsule: &Json, tier: Tier, upstream: &str) -> Result<Watch, Refusal> {
    let watch = crate::core::validate::validate_capsule(capsule)
        .ok()
        .and_then(|c| c.watch)
        .ok_or_else(|| Refusal::code(ReasonCode::WatchNotSet))?;
    if tier == Tier::Free {
        return Err(Refusal::code(ReasonCode::WatchRequiresPro)
            .link("upgrade_url", crate::core::urls::QUOTE_PATH)
            .link("upstream_head_url", format!("{upstream}{HEAD_PATH}"))
            .link("upstream_sources_url", format!("{upstream}{SOURCES_PATH}")));
    }
    Ok(watch)
}

/// Items per bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Counts {
    /// New items.
    pub items: usize,
    /// Updated.
    pub updated: usize,
    /// Removed.
    pub removed: usize,
    /// Flagged.
    pub flagged: usize,
}

impl Counts {
    fn of(sizes: [usize; 4]) -> Counts {
        Counts {
            items: sizes[0],
            updated: sizes[1],
            removed: sizes[2],
            flagged: sizes[3],
        }
    }
    fn total(&self) -> usize {
        self.items + self.updated + self.removed + self.flagged
    }
}

/// The world a projection was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorldView {
    /// The upstream's global cursor.
    pub cursor: Option<String>,
    /// When the upstream generated it.
    pub generated_at: Option<String>,
    /// When the upstream was last asked successfully.
    pub checked_at: String,
    /// The upstream failed since then, or a selected source could not be
    /// read: what is served is the last good snapshot.
    pub stale: bool,
}

/// `GET /api/v1/watch/head`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FeedHead {
    /// The agent.
    pub agent_id: String,
    /// The projected `watch_cursor`.
    pub cursor: String,
    /// The cursor before the world's last change.
    pub prev_cursor: String,
    /// Whether the world's last change moved this projection.
    pub changed: bool,
    /// When this answer was made.
    pub generated_at: String,
    /// Polling hint.
    pub ttl_sec: u64,
    /// The projected items.
    pub latest_url: String,
    /// Counts per source.
    pub digest_url: String,
    /// The selected sources.
    pub sources_included: Vec<String>,
    /// Items per bucket in the selected sources' last batches as the
    /// upstream holds them (`latest` serves at most 50 per source and
    /// 512 KiB, and says what it left out).
    pub counts: Counts,
    /// No items, and every selected source read fine.
    pub all_clear: bool,
    /// What the watch named that matches nothing.
    pub unresolved: Unresolved,
    /// The world it was made from.
    pub world: WorldView,
}

/// A projection of one agent's watch over one snapshot.
#[derive(Debug, Clone)]
pub struct Projection {
    /// The selection.
    pub resolved: Resolved,
    /// Its cursor now.
    pub cursor: String,
    /// Its cursor over the world before the last change.
    pub prev_cursor: String,
    /// Whether any selected source is stale.
    pub stale_source: bool,
}

/// Projects `watch` over the snapshot.
pub fn project(watch: &Watch, world: &WorldPointer, stacks: &Stacks) -> Projection {
    let resolved = resolve(watch, &world.catalog(), stacks);
    let now = world.cursors();
    let cursor = watch_cursor(&pairs(&resolved, &now));
    let prev_cursor = watch_cursor(&pairs(&resolved, &world.cursors_before()));
    let stale_source = resolved
        .sources
        .iter()
        .any(|id| world.sources.get(id).is_some_and(|s| s.stale));
    Projection {
        resolved,
        cursor,
        prev_cursor,
        stale_source,
    }
}

fn query(doc: FeedDoc, agent: &AgentId) -> String {
    format!("{}?agent_id={agent}", doc.path())
}

impl Projection {
    /// The entity tag: the cursor's hex.
    pub fn etag(&self) -> &str {
        crate::core::jcs::cursor_hex(&self.cursor)
    }

    fn world(&self, world: &WorldPointer) -> WorldView {
        WorldView {
            cursor: world.world_cursor.clone(),
            generated_at: world.upstream_generated_at.clone(),
            checked_at: rfc3339(world.checked_at_ms),
            stale: world.stale_since_ms.is_some() || self.stale_source,
        }
    }

    /// What `since` asks for: the current cursor (nothing new), the one
    /// before the world's last change (the changes since), or nothing.
    /// Anything older is `410 cursor_not_found`: read `latest` whole (the
    /// service keeps no per-agent views; a client polling at `ttl_sec` holds
    /// one of the two).
    pub fn since(&self, world: &WorldPointer, since: Option<&str>) -> Result<Since, Refusal> {
        match since {
            None => Ok(Since::Whole),
            Some(c) if c == self.cursor => Ok(Since::Nothing),
            Some(c) if c == self.prev_cursor => Ok(Since::Changes(world.cursors_before())),
            Some(_) => Err(Refusal::new(
                ReasonCode::CursorNotFound,
                "since is neither this projection's cursor nor the one before the world's last change: read latest without since",
            )),
        }
    }

    /// The head, from the snapshot alone (counts are the pointer's).
    pub fn head(&self, agent: &AgentId, world: &WorldPointer, now_ms: u64) -> FeedHead {
        let mut sizes = [0usize; 4];
        for id in &self.resolved.sources {
            if let Some(s) = world.sources.get(id) {
                for (total, n) in sizes.iter_mut().zip(s.counts) {
                    *total += n as usize;
                }
            }
        }
        let counts = Counts::of(sizes);
        let ttl_sec = self
            .resolved
            .sources
            .iter()
            .filter_map(|id| world.sources.get(id).and_then(|s| s.ttl_sec))
            .min()
            .unwrap_or(REFRESH_INTERVAL_SEC)
            .max(REFRESH_INTERVAL_SEC);
        let world_view = self.world(world);
        FeedHead {
            agent_id: agent.to_string(),
            cursor: self.cursor.clone(),
            prev_cursor: self.prev_cursor.clone(),
            changed: self.prev_cursor != self.cursor,
            generated_at: rfc3339(now_ms),
            ttl_sec,
            latest_url: query(FeedDoc::Latest, agent),
            digest_url: query(FeedDoc::Digest, agent),
            sources_included: self.resolved.sources.clone(),
            all_clear: counts.total() == 0 && !world_view.stale,
            counts,
            unresolved: self.resolved.unresolved.clone(),
            world: world_view,
        }
    }

    /// `latest`: a ddv1 feed of the selected sources' batches (`batches` as
    /// stored for their current cursors).
    pub fn latest(
        &self,
        world: &WorldPointer,
        batches: &BTreeMap<String, Batch>,
        now_ms: u64,
    ) -> Json {
        let l = latest(&self.resolved, batches);
        let buckets = BUCKETS
            .iter()
            .zip(&l.buckets)
            .map(|(name, items)| ((*name).to_owned(), Json::Array(items.clone())))
            .collect();
        let sizes = [0, 1, 2, 3].map(|i| l.buckets[i].len());
        let counts = Counts::of(sizes);
        let mut out = vec![
            ("schema_version".into(), Json::from(LATEST_SCHEMA_VERSION)),
            ("generated_at".into(), Json::from(rfc3339(now_ms).as_str())),
            ("cursor".into(), Json::from(self.cursor.as_str())),
            ("prev_cursor".into(), Json::from(self.prev_cursor.as_str())),
            (
                "changed".into(),
                Json::Bool(self.prev_cursor != self.cursor),
            ),
            ("ttl_sec".into(), Json::from(REFRESH_INTERVAL_SEC)),
            (
                "sources_included".into(),
                Json::Array(
                    self.resolved
                        .sources
                        .iter()
                        .map(|s| Json::from(s.as_str()))
                        .collect(),
                ),
            ),
            ("counts".into(), to_json(&counts)),
            ("buckets".into(), Json::Object(buckets)),
            ("stale".into(), Json::Bool(self.world(world).stale)),
        ];
        if !l.truncated.is_empty() {
            out.push(("truncated".into(), to_json(&l.truncated)));
        }
        if !l.capped.is_empty() {
            out.push((
                "capped".into(),
                Json::Array(l.capped.iter().map(|s| Json::from(s.as_str())).collect()),
            ));
        }
        Json::Object(out)
    }

    /// `latest?since=`: [`Projection::latest`] over only what is new
    /// ([`new_items`]), naming the cursor it counts from.
    pub fn latest_since(
        &self,
        world: &WorldPointer,
        batches: &BTreeMap<String, Batch>,
        now_ms: u64,
        since: &str,
    ) -> Json {
        let mut body = self.latest(world, batches, now_ms);
        if let Json::Object(m) = &mut body {
            m.insert(4, ("since".into(), Json::from(since)));
        }
        body
    }

    /// `digest`: per selected source, its cursor, status and counts, and
    /// why it was selected; over all of them, items per upstream severity
    /// level and suggested action ([`super::breakdown`] of `batches`, as
    /// stored for their current cursors).
    pub fn digest(
        &self,
        world: &WorldPointer,
        batches: &BTreeMap<String, Batch>,
        now_ms: u64,
    ) -> Json {
        let sources: Vec<DigestSource> = self
            .resolved
            .sources
            .iter()
            .map(|id| {
                let s = world.sources.get(id);
                DigestSource {
                    source_id: id.clone(),
                    cursor: s.and_then(|s| s.cursor.clone()),
                    status: s.and_then(|s| s.status.clone()),
                    stale: s.is_some_and(|s| s.stale),
                    counts: Counts::of(s.map_or([0; 4], |s| s.counts.map(|n| n as usize))),
                    via: self.resolved.via.get(id).cloned().unwrap_or_default(),
                }
            })
            .collect();
        let by = breakdown(&self.resolved, batches);
        let digest = Digest {
            cursor: &self.cursor,
            generated_at: rfc3339(now_ms),
            sources,
            unresolved: &self.resolved.unresolved,
            over_cap: &self.resolved.over_cap,
            by_suggested_action: by.by_suggested_action,
            by_severity: by.by_severity,
        };
        to_json(&digest)
    }
}

#[derive(Serialize)]
struct DigestSource {
    source_id: String,
    cursor: Option<String>,
    status: Option<String>,
    stale: bool,
    counts: Counts,
    via: Vec<String>,
}

#[derive(Serialize)]
struct Digest<'a> {
    cursor: &'a str,
    generated_at: String,
    sources: Vec<DigestSource>,
    unresolved: &'a Unresolved,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    over_cap: &'a [String],
    by_suggested_action: BTreeMap<String, usize>,
    by_severity: BTreeMap<String, usize>,
}

fn to_json<T: Serialize>(v: &T) -> Json {
    let text = serde_json::to_string(v).expect("a feed body serialises");
    crate::core::json::parse(text.as_bytes()).expect("serde_json writes JSON")
}
