//! A PUT of capsule.json at the entry: one hop to the agent's object
//! instead of two. A body of declared length within the cap is read here
//! and its envelope authenticated (`core::envelope`, the write check's
//! stateless steps, against the agent's genesis key); when it checks out
//! the write goes straight to the agent's Durable Object (`write_wire`,
//! through a cross-script binding of `AGENT_DO`), whose answer is relayed
//! as the write Worker would relay it, and this location's copies are
//! marked as that Worker would mark them.
//!
//! Everything else goes to the write Worker with the body as it came (the
//! other branch of the body, teed before it was read): a refusal is worded
//! and logged in one place, there; a rotated signer's key is read from KV
//! there; a body without a declared length, over the cap, or broken off is
//! read and refused there. So the entry decides nothing a client sees: it
//! only skips the hop when the write Worker would have sent the body on.

use super::forward::WRITER_BINDING;
use super::forwarded;
use crate::core::crypto::AgentId;
use crate::core::envelope::{self, Signature, Signer};
use crate::core::limits::MAX_BODY_BYTES;
use crate::worker::body;
use crate::worker::config::Config;
use crate::worker::failure::Failure;
use crate::worker::handlers::relay;
use crate::worker::http::Audience;
use crate::worker::read_cache;
use crate::worker::request::Incoming;
use crate::worker::write_wire::{self, WriteCall, WriteKind};
use worker::wasm_bindgen::JsCast;
use worker::{web_sys, Env};

/// The answer to a PUT of `agent`'s capsule.json.
pub async fn put(req: &Incoming, env: &Env, cfg: &Config, agent: &AgentId) -> web_sys::Response {
    let audience = Audience::Write;
    let within_cap = body::declared_length(req).filter(|&len| len <= MAX_BODY_BYTES as u64);
    let (Some(stream), Some(_)) = (req.inner().body(), within_cap) else {
        return forwarded(WRITER_BINDING, req, env, audience, None).await;
    };
    let branches = stream.tee();
    let mine: web_sys::ReadableStream = branches.get(0).unchecked_into();
    let theirs: web_sys::ReadableStream = branches.get(1).unchecked_into();
    let body = match body::stream_bytes(&mine).await {
        Ok(bytes) if authenticates(&bytes, agent) => bytes,
        _ => return forwarded(WRITER_BINDING, req, env, audience, Some(&theirs)).await,
    };
    let _ = theirs.cancel();
    match send(req, env, cfg, agent, body).await {
        Ok(answer) => answer,
        Err(failure) => failure.response(audience, req.path()).into(),
    }
}

/// Whether the write Worker would send `body` on to the agent's object
/// without reading anything stored: within the cap, the envelope whole and
/// signed by the agent's genesis key.
fn authenticates(body: &[u8], agent: &AgentId) -> bool {
    envelope::authenticate_body(body, agent, Signature::Verify, Signer::Genesis).is_ok()
}

/// The write to the agent's object, its answer relayed.
async fn send(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    agent: &AgentId,
    body: Vec<u8>,
) -> Result<web_sys::Response, Failure> {
    let call = WriteCall::of_put(req, cfg, agent, body)?;
    let relayed = write_wire::send(env, WriteKind::Capsule, call).await?;
    if relayed.status == 200 {
        // This location's copies of head.json and capsule.json are old now.
        match relayed.written {
            Some(w) => read_cache::written_here(agent, w.seq, w.projection).await,
            None => read_cache::purge(agent).await,
        }
    }
    Ok(relay(relayed).into())
}
