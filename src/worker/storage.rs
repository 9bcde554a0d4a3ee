//! Durable Object storage as the objects use it: values are JSON text rather
//! than structured-clone objects, so the stored format is exactly serde's,
//! independent of how JS numbers round-trip; and one commit writes many keys
//! atomically.

use serde::{de::DeserializeOwned, Serialize};
use worker::js_sys::{Object, Reflect};
use worker::wasm_bindgen::JsValue;
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

/// Writes `puts` and deletes `deletes` as one atomic unit. Both storage
/// calls are issued before either is awaited, and the runtime commits writes
/// issued with no `await` in between together (write coalescing): either all
/// of them land or none does.
pub async fn commit_atomic(
    storage: &Storage,
    puts: &[(String, String)],
    deletes: &[String],
) -> worker::Result<()> {
    // A plain JS object: `put_multiple` would serialise a map as a JS `Map`.
    let obj = Object::new();
    for (k, v) in puts {
        Reflect::set(&obj, &k.as_str().into(), &v.as_str().into())?;
    }
    let raw = storage.as_raw();
    let put = raw.put_multiple(obj.into())?;
    let delete = if deletes.is_empty() {
        None
    } else {
        let keys: Vec<JsValue> = deletes.iter().map(|k| JsValue::from(k.as_str())).collect();
        Some(raw.delete_multiple(keys)?)
    };
    JsFuture::from(put).await?;
    if let Some(d) = delete {
        JsFuture::from(d).await?;
    }
    Ok(())
}
