//! The location's copy of public reads (Workers Cache API, `caches.default`).
//!
//! Agents poll `head.json` every few seconds; without this every poll is a
//! KV read, the dominant bill. An unsigned 200 of `head.json` or
//! `capsule.json` for a public capsule is kept in the cache of the location
//! that served it for the `max-age` clients are told (60 s: the entry is
//! stored with the answers' own `Cache-Control`), and
//! polls within that time are answered from it, no KV read: the entry is
//! the full answer of an unconditional GET, headers and all, and is sent as
//! it is (304s and HEAD are derived from it by `CachedRead::kept`), so a hit
//! answers exactly what a miss did.
//! An accepted write (PUT, MCP submit) replaces the agent's two entries in
//! the location that took it with a marker of its seq, so that location
//! reads KV again at once and keeps nothing older than the write: it sees
//! the new cursor as soon as KV has it (at once, or after the agent
//! object's alarm has repaired a failed mirror). An upgrade claim deletes
//! the entries (the tier in head.json changes, the seq does not).
//!
//! The copies of head.json and capsule.json are the entry Worker's: it
//! answers those reads. A write reaches the write Worker through the
//! entry's service binding, so the write Worker tells the entry what it
//! changed (`entry_wire`) and the entry marks or drops its own copies before
//! it answers; this holds whether or not Cloudflare gives the Workers one
//! cache. The projected heads are the extras Worker's (it serves them); a
//! write marks them from the write Worker, which reaches them where the two
//! share the location's cache, and they lapse with their `max-age` where
//! they do not.
//!
//! Staleness bound (docs/PROTOCOL.md §4): another location may answer up to
//! 60 s from its copy, on top of KV's own propagation (a KV read is
//! itself cached up to 60 s per location), so at most ~2 × 60 s after the
//! write, the same order as a client honouring `max-age=60` on a KV answer.
//! Never cached: signed reads (`private, no-store`), 304s, errors and 404s
//! (so a first publish or a switch to private is never hidden by a cached
//! miss). Cloudflare runs the Cache API only on custom domains; on
//! `*.workers.dev` it does nothing and every read goes to KV, as before.

use crate::core::conditional::{etag_of_header, READ_CACHE_CONTROL};
use crate::core::crypto::AgentId;
use crate::core::entry::Changed;
use crate::core::urls::Doc;
use crate::core::urls::FeedDoc;
use crate::worker::clock::TEST_NOW_HEADER;
use crate::worker::request::Incoming;
use futures_util::future::join_all;
use worker::js_sys;
use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys;
use worker::worker_sys::ext::CacheStorageExt;
use worker::{Cache, Headers, Response};

/// A marker entry (no answer): a write of this seq was accepted here.
const WRITTEN_SEQ_HEADER: &str = "X-Selfcap-Written-Seq";

/// The host of every key: one name for the document whatever hostname or
/// port the request came in on (a write through one hostname must drop the
/// copy a poll through another made). Keys are only names in the cache.
const KEY_ORIGIN: &str = "https://read-cache.self-capsule.internal";

/// Where a document of an agent is kept (its path under [`KEY_ORIGIN`]). `None`
/// for a request that sets the test clock (tests only): `head.json` depends
/// on the time (`generated_at`, the write window), so such reads bypass the
/// cache both ways.
///
/// A Worker answering behind the entry neither reads nor makes the
/// copies: they are the entry's (`entry_wire`).
pub fn key(req: &Incoming, agent: &AgentId, doc: &Doc<'_>, test_clock: bool) -> Option<String> {
    #[cfg(feature = "worker")]
    if req.forwarded() {
        return None;
    }
    if test_clock && req.headers().has(TEST_NOW_HEADER).unwrap_or(true) {
        return None;
    }
    Some(key_of(agent, doc))
}

fn key_of(agent: &AgentId, doc: &Doc<'_>) -> String {
    format!("{KEY_ORIGIN}{}", doc.path(agent.as_str()))
}

/// What this location holds for a key.
pub enum Kept {
    /// A fresh copy: the answer (`http::full_answer`) and its entity tag.
    Answer(web_sys::Response, String),
    /// A write of this seq was accepted here: only a record at least this
    /// new may be kept (KV can lag it while its mirror is repaired).
    WrittenSeq(u64),
    /// Nothing.
    Nothing,
}

/// The location's cache as the runtime gives it (`worker::Cache` would wrap
/// a hit in a `worker::Response`, which is rebuilt when it is sent).
fn location_cache() -> Option<web_sys::Cache> {
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    Some(global.caches().ok()?.default())
}

/// What this location holds for `key`: its body is not read here.
pub async fn lookup(key: &str) -> Kept {
    let Some(cache) = location_cache() else {
        return Kept::Nothing;
    };
    let found = match JsFuture::from(cache.match_with_str(key)).await {
        Ok(found) if found.is_instance_of::<web_sys::Response>() => found,
        _ => return Kept::Nothing,
    };
    let hit: web_sys::Response = found.unchecked_into();
    let headers = hit.headers();
    let header = |name: &str| headers.get(name).ok().flatten();
    if let Some(seq) = header(WRITTEN_SEQ_HEADER).and_then(|v| v.parse().ok()) {
        return Kept::WrittenSeq(seq);
    }
    let tag = header("ETag").and_then(|v| etag_of_header(&v).map(str::to_owned));
    match tag {
        Some(tag) => Kept::Answer(hit, tag),
        None => Kept::Nothing,
    }
}

/// Keeps `answer` (`http::full_answer` of the record numbered `seq`),
/// unless `kept` says a newer write was accepted here. A failure only costs
/// the next poll a KV read.
pub async fn store(key: &str, kept: &Kept, seq: u64, answer: Response) {
    if matches!(kept, Kept::WrittenSeq(newer) if seq < *newer) {
        return;
    }
    let _ = Cache::default().put(key, answer).await;
}

/// The keys of an agent's head.json and capsule.json.
fn reads_of(agent: &AgentId) -> Vec<String> {
    vec![key_of(agent, &Doc::Head), key_of(agent, &Doc::Capsule)]
}

/// Replaces what this location keeps at `keys` by a marker of `seq`, so the
/// next read goes to KV, and what it reads is kept only once KV has that
/// write (at once when the mirror succeeded; after the agent object's alarm
/// repairs it otherwise). Concurrently: the write's answer waits for them.
async fn mark(keys: Vec<String>, seq: u64) {
    join_all(keys.into_iter().map(|key| async move {
        let headers = Headers::new();
        let _ = headers.set(WRITTEN_SEQ_HEADER, &seq.to_string());
        let _ = headers.set("Cache-Control", READ_CACHE_CONTROL);
        let Ok(marker) = Response::empty() else {
            return;
        };
        let _ = Cache::default()
            .put(key, marker.with_headers(headers))
            .await;
    }))
    .await;
}

/// Drops what this location keeps at `keys`, concurrently.
async fn drop_all(keys: Vec<String>) {
    join_all(keys.into_iter().map(|key| async move {
        let _ = Cache::default().delete(key, false).await;
    }))
    .await;
}

/// After a write this location accepted: its copies of the agent's head,
/// capsule and (when `projection`: a location may hold one, and a commit
/// can change the watch) projected head are replaced by a marker of the new
/// seq ([`mark`]). Behind the entry Worker the head and capsule copies are
/// the entry's: `req` notes the write for it.
#[cfg(feature = "worker")]
pub async fn written(req: &Incoming, agent: &AgentId, seq: u64, projection: bool) {
    if req.forwarded() {
        req.note_changed(Changed::Written {
            agent: agent.clone(),
            seq,
        });
        if projection {
            mark(vec![feed_key_of(agent)], seq).await;
        }
    } else {
        written_here(agent, seq, projection).await;
    }
}

/// After a write this location accepted, where the Worker that sent it
/// keeps the copies (the entry Worker, or a Worker reached directly): see
/// [`written`].
pub async fn written_here(agent: &AgentId, seq: u64, projection: bool) {
    let mut keys = reads_of(agent);
    if projection {
        keys.push(feed_key_of(agent));
    }
    mark(keys, seq).await;
}

/// After a key event or an upgrade this location took (they change the head
/// but not the seq; a paid plan also changes who gets a projected feed): its
/// copies of the agent's head, capsule and projected head are dropped.
/// Behind the entry Worker the head and capsule copies are the entry's:
/// `req` notes the change for it.
#[cfg(feature = "worker")]
pub async fn changed(req: &Incoming, agent: &AgentId) {
    if req.forwarded() {
        req.note_changed(Changed::Purged {
            agent: agent.clone(),
        });
        drop_all(vec![feed_key_of(agent)]).await;
    } else {
        purge(agent).await;
    }
}

/// Drops this location's copies of the agent's head, capsule and projected
/// head, where no request asked (an agent object's alarm), or where the
/// Worker that took the change keeps them.
pub async fn purge(agent: &AgentId) {
    let mut keys = reads_of(agent);
    keys.push(feed_key_of(agent));
    drop_all(keys).await;
}

/// The entry Worker's side: applies to this location's copies what the
/// write Worker said a forwarded request changed (`entry_wire`).
#[cfg(feature = "entry")]
pub async fn apply(changed: &Changed) {
    match changed {
        Changed::Written { agent, seq } => mark(reads_of(agent), *seq).await,
        Changed::Purged { agent } => drop_all(reads_of(agent)).await,
    }
}

/// Where the location keeps the world snapshot's pointer (§15): every
/// projected read starts from it, so one KV read a minute per location
/// serves them all. The refresh that stores a new one replaces it here at
/// once; other locations see it within `max-age`, as KV would show it.
#[cfg(feature = "worker")]
fn world_key() -> String {
    format!("{KEY_ORIGIN}/api/v1/watch/world")
}

/// The pointer's text this location keeps, if any.
#[cfg(feature = "worker")]
pub async fn world_lookup() -> Option<String> {
    let cache = location_cache()?;
    let found = JsFuture::from(cache.match_with_str(&world_key()))
        .await
        .ok()?;
    let hit: web_sys::Response = found.dyn_into().ok()?;
    let text = JsFuture::from(hit.text().ok()?).await.ok()?;
    text.as_string()
}

/// Keeps the pointer's text for `max-age`.
#[cfg(feature = "worker")]
pub async fn world_store(text: &str) {
    let headers = Headers::new();
    let _ = headers.set("Cache-Control", READ_CACHE_CONTROL);
    let Ok(resp) = Response::ok(text) else {
        return;
    };
    let _ = Cache::default()
        .put(world_key(), resp.with_headers(headers))
        .await;
}

/// The key of an agent's projected head (public capsules only, as for
/// head.json; `None` with the test clock).
#[cfg(feature = "extras")]
pub fn feed_key(req: &Incoming, agent: &AgentId, test_clock: bool) -> Option<String> {
    if test_clock && req.headers().has(TEST_NOW_HEADER).unwrap_or(true) {
        return None;
    }
    Some(feed_key_of(agent))
}

fn feed_key_of(agent: &AgentId) -> String {
    format!("{KEY_ORIGIN}{}?agent_id={agent}", FeedDoc::Head.path())
}

/// The header a kept projected head carries: the snapshot it was made of
/// (`WorldPointer::version`), so a location that has a newer pointer never
/// answers from an older projection.
#[cfg(feature = "extras")]
pub const WORLD_VERSION_HEADER: &str = "X-Selfcap-World";

/// The snapshot a kept answer was made of.
#[cfg(feature = "extras")]
pub fn world_of(answer: &web_sys::Response) -> Option<String> {
    answer.headers().get(WORLD_VERSION_HEADER).ok().flatten()
}
