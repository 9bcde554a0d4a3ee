//! Durable Object storage as the objects use it: values are JSON text rather
//! than structured-clone objects, so the stored format is exactly serde's,
//! independent of how JS numbers round-trip; and one commit writes many keys
//! atomically.

use serde::{de::DeserializeOwned, Serialize};
use std::time::Duration;
use worker::js_sys::{Array, Date, Object, Promise, Reflect};
// The `#[wasm_bindgen]` expansion names `wasm_bindgen` unqualified.
use worker::wasm_bindgen;
use worker::wasm_bindgen::prelude::wasm_bindgen;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::Storage;

/// The value at `key`, if any.
pub async fn load<T: DeserializeOwned>(storage: &Storage, key: &str) -> worker::Result<Option<T>> {
    match storage.get::<String>(key).await? {
        None => Ok(None),
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("stored {key} unreadable: {e}").into()),
    }
}

/// Stores `value` at `key`.
pub async fn save<T: Serialize>(storage: &Storage, key: &str, value: &T) -> worker::Result<()> {
    storage.put(key, serde_json::to_string(value)?).await
}

/// The texts at `keys`, in order, with one storage read (each `await` of a
/// storage call is a trip through the JS promise machinery, which a write
/// pays for in CPU; reading together costs one).
pub async fn texts<const N: usize>(
    storage: &Storage,
    keys: [&str; N],
) -> worker::Result<[Option<String>; N]> {
    let found = storage.get_multiple(keys.to_vec()).await?;
    Ok(keys.map(|k| found.get(&k.into()).as_string()))
}

/// The most keys one storage `get` takes.
const GET_MAX_KEYS: usize = 128;

/// The text values at any number of `keys`, in order (`None`: absent),
/// fetched [`GET_MAX_KEYS`] at a time.
pub async fn texts_of(storage: &Storage, keys: &[String]) -> worker::Result<Vec<Option<String>>> {
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(GET_MAX_KEYS) {
        let found = storage.get_multiple(chunk.to_vec()).await?;
        out.extend(chunk.iter().map(|k| found.get(&k.into()).as_string()));
    }
    Ok(out)
}

/// Parses what [`texts`] found at `key`.
pub fn parse<T: DeserializeOwned>(key: &str, text: Option<String>) -> worker::Result<Option<T>> {
    match text {
        None => Ok(None),
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("stored {key} unreadable: {e}").into()),
    }
}

/// What a [`Batch`] does to the object's alarm.
pub enum Alarm {
    /// Leaves it as it is.
    Keep,
    /// Arms it to fire after this long.
    In(Duration),
    /// Arms it to fire after this long at the latest: an alarm already
    /// armed to fire sooner stays.
    By(Duration),
    /// Disarms it.
    Delete,
}

/// Storage changes that land together or not at all.
pub struct Batch<'a> {
    /// Keys and their new texts.
    pub puts: &'a [(String, String)],
    /// Keys to delete.
    pub deletes: &'a [String],
    /// The alarm change.
    pub alarm: Alarm,
}

/// Applies `batch` as one atomic unit. Every storage call is issued before
/// any is awaited, and the runtime commits writes issued with no `await` in
/// between together (write coalescing; alarm changes included): either all
/// of it lands or none does. An alarm armed this way is armed exactly when
/// the writes it must retry are stored. Nothing the object sends after it
/// (an answer, a KV put, a message) leaves before it is on disk.
pub async fn commit_atomic(storage: &Storage, batch: &Batch<'_>) -> worker::Result<()> {
    commit(storage, batch, false).await
}

/// [`commit_atomic`], but what the object sends next does not wait for it
/// to reach disk (`allowUnconfirmed`). Only for a commit whose loss changes
/// nothing any answer said: the runtime keeps the object's storage
/// operations in order, so it can only be lost with nothing after it, and
/// the stored state before it must already be correct (e.g. a mirror
/// cleared once it landed: lost, the alarm the commit before it armed lands
/// the same texts again).
pub async fn commit_unconfirmed(storage: &Storage, batch: &Batch<'_>) -> worker::Result<()> {
    commit(storage, batch, true).await
}

#[wasm_bindgen]
extern "C" {
    /// The runtime's storage object, for `put(entries, options)` and
    /// `delete(keys, options)`, which worker-sys binds without their options.
    type StorageWithOptions;
    #[wasm_bindgen(method, catch, js_name = put)]
    fn put_entries(
        this: &StorageWithOptions,
        entries: &Object,
        options: &Object,
    ) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch, js_name = delete)]
    fn delete_keys(
        this: &StorageWithOptions,
        keys: &Array,
        options: &Object,
    ) -> Result<Promise, JsValue>;
}

async fn commit(storage: &Storage, batch: &Batch<'_>, unconfirmed: bool) -> worker::Result<()> {
    // Read before any write is issued, so the writes still coalesce.
    let armed = match batch.alarm {
        Alarm::By(_) => storage.get_alarm().await?,
        _ => None,
    };
    let options = Object::new();
    if unconfirmed {
        Reflect::set(&options, &"allowUnconfirmed".into(), &JsValue::TRUE)?;
    }
    let raw = storage.as_raw();
    let with_options: &StorageWithOptions = raw.unchecked_ref();
    let mut pending: Vec<Promise> = Vec::with_capacity(3);
    if !batch.puts.is_empty() {
        let entries = Object::new();
        for (k, v) in batch.puts {
            Reflect::set(&entries, &k.as_str().into(), &v.as_str().into())?;
        }
        pending.push(with_options.put_entries(&entries, &options)?);
    }
    if !batch.deletes.is_empty() {
        let keys: Array = batch
            .deletes
            .iter()
            .map(|k| JsValue::from(k.as_str()))
            .collect();
        pending.push(with_options.delete_keys(&keys, &options)?);
    }
    match batch.alarm {
        Alarm::Keep => {}
        Alarm::In(after) => {
            let at = Date::now() + after.as_millis() as f64;
            pending.push(raw.set_alarm(Date::new(&at.into()), options)?);
        }
        Alarm::By(within) => {
            let at = Date::now() + within.as_millis() as f64;
            if armed.is_none_or(|armed| armed as f64 > at) {
                pending.push(raw.set_alarm(Date::new(&at.into()), options)?);
            }
        }
        Alarm::Delete => pending.push(raw.delete_alarm(options)?),
    }
    // One await for all of them.
    let all: Array = pending.into_iter().collect();
    JsFuture::from(Promise::all(&all)).await?;
    Ok(())
}

/// Arms the alarm to fire within `within`, unless it already fires sooner.
pub async fn arm_by(storage: &Storage, within: Duration) -> worker::Result<()> {
    commit_atomic(
        storage,
        &Batch {
            puts: &[],
            deletes: &[],
            alarm: Alarm::By(within),
        },
    )
    .await
}

/// Every `(key, text)` under `prefix`, in key order (one storage list).
pub async fn texts_under(storage: &Storage, prefix: &str) -> worker::Result<Vec<(String, String)>> {
    let found = storage
        .list_with_options(worker::ListOptions::new().prefix(prefix))
        .await?;
    let mut out = Vec::new();
    found.for_each(&mut |v, k| {
        if let (Some(k), Some(v)) = (k.as_string(), v.as_string()) {
            out.push((k, v));
        }
    });
    Ok(out)
}
