//! `PUT /self/{id}/capsule.json`, Worker half: enforce the body cap without
//! buffering more than the cap, refuse unauthenticated garbage statelessly,
//! and hand everything else to the agent's Durable Object, which makes every
//! decision that depends on stored state.
//!
//! [`write`] is the write itself, shared with the MCP tool `self_submit`, so
//! a submitted envelope meets the same cap, pre-check, per-address quota,
//! rate limits and decision log as a PUT; [`handle`] is the PUT around it.
//! Behind the entry Worker, a PUT reaches it only when the entry did not
//! send it to the object itself (`entry::write`): a refusal, a rotated
//! signer, a body without a declared length or over the cap.

use super::relay;
use crate::core::crypto::AgentId;
use crate::core::limits::MAX_BODY_BYTES;
use crate::core::reason::ReasonCode;
use crate::core::write::{self, DecisionLog, Rejection, Signer};
use crate::worker::body::{self, BodyError};
use crate::worker::config::Config;
use crate::worker::do_wire;
use crate::worker::failure::Failure;
use crate::worker::kv::Kv;
use crate::worker::log;
use crate::worker::read_cache;
use crate::worker::request::Incoming;
use crate::worker::write_wire::{Relayed, WriteCall};
use worker::{Env, Response};

/// One write of `body` (as read, capped at [`MAX_BODY_BYTES`]) to `agent`:
/// the agent's object's answer as is (accepted or not), or the rejection
/// of a write refused here (cap, JSON, envelope, signature), logged. `req`
/// supplies the client address (the new-agent quota bucket) and the test
/// hooks, exactly as for a PUT.
pub async fn write(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    agent: &AgentId,
    body: Result<Vec<u8>, BodyError>,
) -> Result<Relayed, Failure> {
    let refuse = |rej: Rejection, bytes: u64| {
        log::line_str(&DecisionLog::rejected(agent.as_str(), &rej, bytes).to_line());
        Err(Failure::Rejected(rej))
    };
    let bytes = match body {
        Ok(b) => b,
        Err(BodyError::TooLarge { observed }) => {
            return refuse(Rejection::payload_too_large(observed), observed)
        }
        // The client's body ended early (shorter than its Content-Length) or
        // broke off: the request is malformed, not the service. A 400 that
        // changes nothing, like any other unreadable body.
        Err(BodyError::Read) => return refuse(Rejection::unreadable_body(), 0),
    };

    // Stateless pre-check: JSON, envelope shape and signature do not depend on
    // stored state, so garbage is refused here without waking (or billing) the
    // agent's Durable Object, and structurally cannot learn anything stored.
    // Everything that passes goes to the DO, which repeats the cheap parse and
    // decides the rest with the real state, tier, seq and cooldown.
    // An agent with a key log may sign with a key other than its genesis
    // key: only a signer the genesis check refuses pays the KV read that
    // tells (a KV copy lagging a rotation by up to a minute refuses the new
    // key's first write the same way; the client's retry then succeeds).
    if let Err(rej) = write::precheck(&bytes, agent, Signer::Genesis) {
        let rotated = rej.reason_codes == [ReasonCode::BadSignature]
            && super::signer::current_key(&Kv::of(env)?, agent)
                .await?
                .is_some()
            && write::precheck(&bytes, agent, Signer::KeyLog).is_ok();
        if !rotated {
            let len = bytes.len() as u64;
            return refuse(rej, len);
        }
    }

    let relayed = do_wire::write(env, WriteCall::of_put(req, cfg, agent, bytes)?).await?;
    if relayed.status == 200 {
        // This location's copies of head.json and capsule.json are old now.
        match relayed.written {
            Some(w) => read_cache::written(req, agent, w.seq, w.projection).await,
            None => read_cache::changed(req, agent).await,
        }
    }
    Ok(relayed)
}

/// One PUT.
pub async fn handle(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    agent: &AgentId,
) -> Result<Response, Failure> {
    let body = body::read_capped(req, MAX_BODY_BYTES).await;
    Ok(relay(write(req, env, cfg, agent, body).await?))
}
