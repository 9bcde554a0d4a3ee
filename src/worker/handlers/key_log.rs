//! `/self/{id}/keys.json` (docs/PROTOCOL.md §14): `GET` serves the agent's
//! key log from KV (to whoever may read its head.json); `POST` hands a key
//! event, and the envelope it carries, to the agent's Durable Object, which
//! decides and commits it (`objects::agent::key_events`). The POST is the
//! write Worker's only.

#[cfg(feature = "entry")]
use super::reads::{self, ReadAs, Stored};
#[cfg(feature = "worker")]
use super::relay;
use crate::core::crypto::AgentId;
#[cfg(feature = "entry")]
use crate::core::key_log::key_log_body;
#[cfg(feature = "worker")]
use crate::core::key_log::submit::{self, MAX_KEYS_BODY_BYTES};
#[cfg(feature = "worker")]
use crate::core::quota::ip_bucket;
#[cfg(feature = "entry")]
use crate::core::record::key_log_kv_key;
#[cfg(feature = "worker")]
use crate::core::write::Rejection;
#[cfg(feature = "worker")]
use crate::worker::body::{self, BodyError};
#[cfg(feature = "worker")]
use crate::worker::clock;
#[cfg(feature = "worker")]
use crate::worker::config::Config;
#[cfg(feature = "worker")]
use crate::worker::do_wire;
use crate::worker::failure::Failure;
#[cfg(feature = "entry")]
use crate::worker::http::CachedRead;
#[cfg(feature = "entry")]
use crate::worker::kv::Kv;
#[cfg(feature = "worker")]
use crate::worker::read_cache;
#[cfg(feature = "worker")]
use crate::worker::request::Incoming;
#[cfg(feature = "worker")]
use crate::worker::write_wire::WriteCall;
#[cfg(feature = "entry")]
use sha2::{Digest, Sha256};
use worker::{Env, Response};

/// `GET`/`HEAD`: the log as the agent's object last mirrored it, or an
/// empty one for an agent that never submitted an event. The miss of an
/// agent that never published (or that this reader may not read) is the
/// same `capsule_not_found` head.json answers. The entry Worker's alone.
#[cfg(feature = "entry")]
pub async fn get(
    env: &Env,
    agent: &AgentId,
    read: CachedRead,
    read_as: &ReadAs<'_>,
) -> Result<Response, Failure> {
    // Nothing is held (the closure never answers), so this is the record.
    let Stored::Current(record) = reads::record(env, agent, read_as, |_: &str| None::<()>).await?
    else {
        return Err(Failure::Unavailable(None));
    };
    let keys = record.keys.as_ref().map(|k| k.as_of(read_as.now_ms));
    let records = match keys {
        Some(_) => Kv::of(env)?.text(&key_log_kv_key(agent)).await?,
        None => None,
    };
    let body = key_log_body(agent, keys.as_ref(), records.as_deref().unwrap_or("[]"));
    let etag = hex::encode(&Sha256::digest(body.as_bytes())[..16]);
    Ok(read.answer(body.into_bytes(), &etag))
}

/// `POST`: one key event, with its envelope if it carries one.
#[cfg(feature = "worker")]
pub async fn post(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    agent: &AgentId,
) -> Result<Response, Failure> {
    let bytes = match body::read_capped(req, MAX_KEYS_BODY_BYTES).await {
        Ok(b) => b,
        Err(BodyError::TooLarge { observed }) => {
            return Err(Failure::Rejected(Rejection::body_over(
                observed,
                MAX_KEYS_BODY_BYTES,
            )))
        }
        Err(BodyError::Read) => return Err(Failure::Rejected(Rejection::unreadable_body())),
    };
    // Garbage and forged events are refused here, statelessly, without
    // waking the agent's object.
    submit::precheck(&bytes, agent).map_err(Failure::Rejected)?;
    let call = WriteCall {
        agent: agent.clone(),
        now_ms: clock::request_now_ms(req, cfg.test_clock),
        ip_bucket: ip_bucket(req.headers().get("CF-Connecting-IP")?.as_deref()),
        fail_mirror: false,
        body: bytes,
    };
    let relayed = do_wire::key_event(env, call).await?;
    if relayed.status == 200 {
        // head.json's `keys` (and, with an envelope, the capsule) changed.
        read_cache::changed(req, agent).await;
    }
    Ok(relay(relayed))
}
