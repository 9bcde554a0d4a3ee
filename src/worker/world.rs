//! The world snapshot's refresh, bytes only: `core::world::refresh` decides
//! each step (what to ask the ddv1 upstream, what the answers mean, what to
//! store); this asks and stores. Run by the cron trigger, and by a feed read
//! that finds no snapshot or one older than two refresh intervals.
//!
//! Stored in KV, batches first: `world:src:{id}:{cursor}` (immutable, one
//! per batch, kept 14 days), then the pointer `world:head` that names them,
//! so a reader never follows the pointer to a missing batch. A pointer that
//! moved a source is then told to the feed objects (`do_wire::feed`), which
//! push it to the watchers and held polls whose projection it moves, and
//! kept in this location's cache (`read_cache::world_store`), which is
//! where reads take it from ([`snapshot`]).

use super::body;
use super::do_wire::feed::{self as feed_wire, WorldMoved};
use super::kv::Kv;
use super::log;
use super::read_cache;
use crate::core::json::{self, Json};
use crate::core::projection::push;
use crate::core::world::ddv1::{Batch, Catalog, Malformed};
use crate::core::world::refresh::{
    batch_kv_key, batch_paths, AfterHead, HeadAnswer, Refresh, WorldPointer, BATCH_TTL_SEC,
    HEAD_PATH, POINTER_KV_KEY, SOURCES_PATH,
};
use futures_util::future::join_all;
use std::collections::BTreeMap;
use worker::{Env, Fetch, Headers, Method, Request, RequestInit};

/// The largest upstream document read (the largest served batch is about
/// 370 KB): anything larger is refused as malformed, not held in memory.
const MAX_DOCUMENT_BYTES: usize = 4 * 1024 * 1024;

/// One upstream GET: status, `ETag`, body (`None` on a network failure or a
/// body over [`MAX_DOCUMENT_BYTES`]).
async fn get(url: &str, etag: Option<&str>) -> Option<(u16, Option<String>, Vec<u8>)> {
    let headers = Headers::new();
    headers.set("Accept", "application/json").ok()?;
    if let Some(tag) = etag {
        headers.set("If-None-Match", tag).ok()?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Get).with_headers(headers);
    let req = Request::new_with_init(url, &init).ok()?;
    let resp = Fetch::Request(req).send().await.ok()?;
    let status = resp.status_code();
    let tag = resp.headers().get("ETag").ok().flatten();
    let declared = resp
        .headers()
        .get("Content-Length")
        .ok()
        .flatten()
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_DOCUMENT_BYTES) {
        return None;
    }
    let bytes = body::response_bytes(resp).await.ok()?;
    (bytes.len() <= MAX_DOCUMENT_BYTES).then_some((status, tag, bytes))
}

/// A JSON document from the upstream, or why not.
async fn document(url: &str) -> Result<Json, Malformed> {
    match get(url, None).await {
        None => Err(Malformed(format!("{url}: unreachable"))),
        Some((200, _, bytes)) => {
            json::parse(&bytes).map_err(|e| Malformed(format!("{url}: not JSON ({e})")))
        }
        Some((status, _, _)) => Err(Malformed(format!("{url}: HTTP {status}"))),
    }
}

/// A source's batch: the live path, then the older one when the live body
/// is not the batch the catalog promised.
async fn batch(upstream: &str, id: &str, promised: &str) -> Result<Batch, Malformed> {
    let [live, older] = batch_paths(id);
    let first = document(&format!("{upstream}{live}"))
        .await
        .and_then(|v| Batch::parse(&v, id));
    if matches!(&first, Ok(b) if b.cursor.as_deref() == Some(promised)) {
        return first;
    }
    match document(&format!("{upstream}{older}"))
        .await
        .and_then(|v| Batch::parse(&v, id))
    {
        Ok(b) if b.cursor.as_deref() == Some(promised) => Ok(b),
        _ => first,
    }
}

/// The stored pointer, if any (a pointer that does not parse is no pointer:
/// the next refresh writes a good one).
pub async fn pointer(kv: &Kv) -> worker::Result<Option<WorldPointer>> {
    Ok(kv
        .text(POINTER_KV_KEY)
        .await?
        .and_then(|t| serde_json::from_str(&t).ok()))
}

/// The pointer as reads take it: this location's copy, else KV's (then
/// kept here).
pub async fn snapshot(kv: &Kv) -> worker::Result<Option<WorldPointer>> {
    if let Some(p) = read_cache::world_lookup()
        .await
        .and_then(|t| serde_json::from_str(&t).ok())
    {
        return Ok(Some(p));
    }
    let Some(text) = kv.text(POINTER_KV_KEY).await? else {
        return Ok(None);
    };
    let Ok(p) = serde_json::from_str(&text) else {
        return Ok(None);
    };
    read_cache::world_store(&text).await;
    Ok(Some(p))
}

/// Refreshes the snapshot from `upstream`; returns the pointer now stored
/// (`None`: the upstream failed and there is no snapshot yet).
pub async fn refresh(
    env: &Env,
    kv: &Kv,
    upstream: &str,
    now_ms: u64,
) -> worker::Result<Option<WorldPointer>> {
    let r = Refresh {
        last: pointer(kv).await?,
        now_ms,
    };
    let answer = get(&format!("{upstream}{HEAD_PATH}"), r.etag()).await;
    let parsed;
    let head_answer = match &answer {
        None => HeadAnswer::Failed("unreachable".into()),
        Some((304, _, _)) => HeadAnswer::NotModified,
        Some((200, tag, bytes)) => match json::parse(bytes) {
            Ok(v) => {
                parsed = v;
                HeadAnswer::Body(&parsed, tag.as_deref())
            }
            Err(e) => HeadAnswer::Failed(format!("head.json is not JSON ({e})")),
        },
        Some((status, _, _)) => HeadAnswer::Failed(format!("HTTP {status}")),
    };
    let (head, etag) = match r.after_head(head_answer) {
        AfterHead::Done(p) => return store_pointer(kv, p).await,
        AfterHead::Failed(kept, why) => return failed(kv, kept, &why).await,
        AfterHead::ReadCatalog(head, etag) => (head, etag),
    };
    let catalog = match document(&format!("{upstream}{SOURCES_PATH}"))
        .await
        .and_then(|v| Catalog::parse(&v))
    {
        Ok(c) => c,
        Err(Malformed(why)) => {
            let kept = r.last.clone().map(|mut p| {
                p.stale_since_ms.get_or_insert(now_ms);
                p
            });
            return failed(kv, kept, &why).await;
        }
    };
    let wanted = r.to_fetch(&catalog);
    let got = join_all(
        wanted
            .iter()
            .map(|(id, promised)| batch(upstream, id, promised)),
    )
    .await;
    let fetched: BTreeMap<String, Result<Batch, Malformed>> =
        crate::core::world::map_of(wanted.into_iter().map(|(id, _)| id).zip(got));
    for (id, res) in &fetched {
        if let Err(Malformed(why)) = res {
            log::event(
                "world_source_unavailable",
                &[("source", id), ("error", why)],
            );
        }
    }
    let (pointer, store) = r.finish(head, etag, &catalog, fetched);
    // Batches first: the pointer must never name a batch KV lacks.
    let puts = store.iter().map(|b| async move {
        let text = crate::core::jcs::canonicalize(&b.to_json());
        kv.put_expiring(
            &batch_kv_key(&b.source_id, b.cursor.as_deref()),
            &text,
            BATCH_TTL_SEC,
        )
        .await
    });
    if join_all(puts).await.into_iter().any(|ok| !ok) {
        log::event("world_store_failed", &[("what", "batch")]);
        return Ok(r.last);
    }
    log::event("world_refreshed", &[("batches", &store.len().to_string())]);
    let moved = push::moved(r.last.as_ref(), &pointer);
    let stored = store_pointer(kv, pointer).await?;
    if let Some(world) = stored.as_ref().filter(|_| !moved.is_empty()) {
        let call = WorldMoved {
            world: world.clone(),
            moved,
            now_ms,
        };
        let missed = feed_wire::world_moved(env, &call).await;
        if missed > 0 {
            log::event("feed_push_failed", &[("objects", &missed.to_string())]);
        }
    }
    Ok(stored)
}

async fn store_pointer(kv: &Kv, p: WorldPointer) -> worker::Result<Option<WorldPointer>> {
    let text = serde_json::to_string(&p)?;
    if !kv.put(POINTER_KV_KEY, &text).await {
        log::event("world_store_failed", &[("what", "pointer")]);
    }
    read_cache::world_store(&text).await;
    Ok(Some(p))
}

async fn failed(
    kv: &Kv,
    kept: Option<WorldPointer>,
    why: &str,
) -> worker::Result<Option<WorldPointer>> {
    log::event("upstream_unavailable", &[("error", why)]);
    match kept {
        Some(p) => store_pointer(kv, p).await,
        None => Ok(None),
    }
}
