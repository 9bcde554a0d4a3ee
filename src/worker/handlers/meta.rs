//! `/self/{id}/meta.json` (docs/PROTOCOL.md §16): what became of an agent's
//! writes, from the meta record its object mirrors into KV, evaluated as of
//! the read (window, refusals in the last 24 hours, tier in force). Read
//! with the record in one bulk KV get; whoever may not read head.json gets
//! head.json's miss. A read never wakes the object.

use super::reads::{self, ReadAs};
use super::unreadable;
use crate::core::crypto::AgentId;
use crate::core::operator::meta::MetaRecord;
use crate::core::reason::ReasonCode;
use crate::core::record::{kv_key, meta_kv_key, Record};
use crate::worker::config::Config;
use crate::worker::failure::Failure;
use crate::worker::http::CachedRead;
use crate::worker::kv::Kv;
use sha2::{Digest, Sha256};
use worker::{Env, Response};

/// `GET`/`HEAD`.
pub async fn get(
    env: &Env,
    cfg: &Config,
    agent: &AgentId,
    read: CachedRead,
    read_as: &ReadAs<'_>,
) -> Result<Response, Failure> {
    let keys = [kv_key(agent), meta_kv_key(agent)];
    let [raw, meta] = <[Option<String>; 2]>::try_from(Kv::of(env)?.texts_found(&keys).await?)
        .map_err(|_| Failure::Unavailable(None))?;
    let raw = raw.ok_or_else(|| Failure::code(ReasonCode::CapsuleNotFound))?;
    // A private capsule's meta.json is for its head's readers only.
    reads::admit(&raw, agent, read_as)?;
    let record = match meta {
        Some(text) => serde_json::from_str::<MetaRecord>(&text)
            .map_err(|e| unreadable("kv_meta_unreadable", agent, &e.to_string()))?,
        None => {
            let record: Record = serde_json::from_str(&raw)
                .map_err(|e| unreadable("kv_record_unreadable", agent, &e.to_string()))?;
            MetaRecord::from_record(&record)
        }
    };
    let body = serde_json::to_vec(&record.body(&cfg.tiers, read_as.now_ms))?;
    let etag = hex::encode(&Sha256::digest(&body)[..16]);
    Ok(read.answer(body, &etag))
}
