//! The KV namespace every read comes from: exact-text gets and the puts and
//! deletes of the mirror (the write Worker's only). Keys are decided in
//! `core::record`; what to write and in which order in `core::mirror`.

use super::config::KV_BINDING;
use worker::kv::KvStore;
use worker::Env;

/// The namespace.
pub struct Kv(
    KvStore,
    /// The binding as the runtime gives it, for a put with metadata.
    #[cfg(feature = "write")]
    worker::wasm_bindgen::JsValue,
);

impl Kv {
    /// The service's namespace from the environment.
    pub fn of(env: &Env) -> worker::Result<Kv> {
        Ok(Kv(
            env.kv(KV_BINDING)?,
            #[cfg(feature = "write")]
            worker::js_sys::Reflect::get(env, &KV_BINDING.into())?,
        ))
    }

    /// The text stored at `key`, if any.
    pub async fn text(&self, key: &str) -> worker::Result<Option<String>> {
        Ok(self.0.get(key).text().await?)
    }

    /// The texts stored at `keys`, in the given order, with one bulk get;
    /// `None` if any is missing. (History pages and feeds: the write Worker
    /// reads neither.)
    #[cfg(any(feature = "entry", feature = "extras"))]
    pub async fn texts(&self, keys: &[String]) -> worker::Result<Option<Vec<String>>> {
        if keys.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let mut found = self.0.get_bulk(keys).text().await?;
        Ok(keys.iter().map(|k| found.remove(k).flatten()).collect())
    }

    /// The texts stored at `keys`, in the given order, with one bulk get;
    /// each `None` where nothing is stored.
    pub async fn texts_found(&self, keys: &[String]) -> worker::Result<Vec<Option<String>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut found = self.0.get_bulk(keys).text().await?;
        Ok(keys.iter().map(|k| found.remove(k).flatten()).collect())
    }

    /// Puts `value` at `key`; `false` if KV refused.
    #[cfg(feature = "worker")]
    pub async fn put(&self, key: &str, value: &str) -> bool {
        match self.0.put(key, value) {
            Ok(put) => put.execute().await.is_ok(),
            Err(_) => false,
        }
    }

    /// Puts `value` at `key` with `metadata` (JSON text, stored as the
    /// key's metadata object); `false` if KV refused or it is not JSON. The
    /// runtime's own `put` with `JSON.parse`d metadata: no serde of a JSON
    /// value in the Worker for it.
    #[cfg(feature = "write")]
    pub async fn put_with_metadata(&self, key: &str, value: &str, metadata: &str) -> bool {
        use worker::js_sys::{Function, Object, Promise, Reflect, JSON};
        use worker::wasm_bindgen::JsCast;
        let put = || -> Result<Promise, worker::wasm_bindgen::JsValue> {
            let options = Object::new();
            Reflect::set(&options, &"metadata".into(), &JSON::parse(metadata)?)?;
            let put: Function = Reflect::get(&self.1, &"put".into())?.dyn_into()?;
            put.call3(&self.1, &key.into(), &value.into(), &options)?
                .dyn_into()
        };
        match put() {
            Ok(promise) => worker::wasm_bindgen_futures::JsFuture::from(promise)
                .await
                .is_ok(),
            Err(_) => false,
        }
    }

    /// One page of the keys under `prefix` with their metadata, from
    /// `cursor` (KV's own pagination token), at most `limit` keys.
    #[cfg(feature = "extras")]
    pub async fn list(
        &self,
        prefix: &str,
        cursor: Option<String>,
        limit: u64,
    ) -> worker::Result<worker::kv::ListResponse> {
        let mut list = self.0.list().prefix(prefix.to_owned()).limit(limit);
        if let Some(c) = cursor {
            list = list.cursor(c);
        }
        Ok(list.execute().await?)
    }

    /// Puts `value` at `key`, to expire after `ttl_sec`; `false` if KV refused.
    #[cfg(feature = "worker")]
    pub async fn put_expiring(&self, key: &str, value: &str, ttl_sec: u64) -> bool {
        match self.0.put(key, value) {
            Ok(put) => put.expiration_ttl(ttl_sec).execute().await.is_ok(),
            Err(_) => false,
        }
    }

    /// Deletes `key`; `false` if KV refused.
    #[cfg(feature = "write")]
    pub async fn delete(&self, key: &str) -> bool {
        self.0.delete(key).await.is_ok()
    }
}
