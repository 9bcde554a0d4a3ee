//! The export bundle, assembled from the object's own storage for one reader.

use super::{AgentDO, ENTRY_PREFIX, HISTORY_KEY, KEY_LOG_KEY};
use crate::core::crypto::AgentId;
use crate::core::history::export::ExportBundle;
use crate::core::history::{HistoryIndex, Viewer};
use crate::core::key_log::KeyLog;
use crate::worker::config;
use crate::worker::do_wire::{ExportCall, Exported};
use crate::worker::storage::{load, texts};

impl AgentDO {
    /// The export bundle, built from this object's own storage (the one
    /// history read that wakes the object: it is rare, and for the larger
    /// tiers too big to assemble from KV within a Worker's CPU budget), as
    /// the call's reader may have it: each version it may not see withheld.
    /// `None` before the first entry.
    pub(super) async fn export(&self, call: ExportCall) -> worker::Result<Option<Exported>> {
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        let Some(index) = load::<HistoryIndex>(&storage, HISTORY_KEY).await? else {
            return Ok(None);
        };
        let agent = AgentId::parse(&index.agent_id).ok_or("history index: bad agent id")?;
        let [log_text] = texts(&storage, [KEY_LOG_KEY]).await?;
        let key_log = KeyLog::from_stored(agent, log_text.as_deref())?;
        let viewer = Viewer {
            owner: &index.agent_id,
            reader: call.reader.as_deref(),
            now_ms: call.now_ms,
        };
        // The bundle's head describes the newest version: a reader who may
        // not see it gets what an agent with no history answers (the Worker
        // admitted it by a record KV may not have updated yet).
        if index.newest_hidden_from(&viewer) {
            return Ok(None);
        }
        let keys = config::service_keys(&self.env);
        let opts = worker::ListOptions::new().prefix(ENTRY_PREFIX);
        let listed = storage.list_with_options(opts).await?;
        let mut stored = Vec::with_capacity(index.items.len());
        for value in listed.values() {
            stored.push(value?.as_string().ok_or("stored entry is not text")?);
        }
        let bundle = ExportBundle::for_viewer(&index, &stored, &keys.keyring, &viewer)
            .map(|b| b.with_key_log(key_log.records_json()))
            .ok_or_else(|| {
                format!(
                    "history index lists {} entries, storage holds {} (or one has no seal)",
                    index.items.len(),
                    stored.len()
                )
            })?;
        Ok(Some(Exported {
            body: serde_json::to_vec(&bundle)?,
            etag: index.etag(),
        }))
    }
}
