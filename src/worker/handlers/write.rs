//! `PUT /self/{id}/capsule.json`, Worker half: enforce the body cap without
//! buffering more than the cap, refuse unauthenticated garbage statelessly,
//! and hand everything else to the agent's Durable Object, which makes every
//! decision that depends on stored state.

use crate::core::crypto::AgentId;
use crate::core::limits::MAX_BODY_BYTES;
use crate::core::quota::ip_bucket;
use crate::core::write::{self, DecisionLog, Rejection};
use crate::worker::body::{self, BodyError};
use crate::worker::config::Config;
use crate::worker::do_wire::{self, WriteCall};
use crate::worker::http::{self, NO_STORE};
use crate::worker::{clock, log};
use worker::{Env, Request, Response};

/// Test-only (honoured with `SELFCAP_TEST_CLOCK=1`): fail this write's first
/// KV mirror attempt so the alarm retry path can be observed.
const TEST_FAIL_MIRROR_HEADER: &str = "x-selfcap-test-fail-mirror";

/// One PUT.
pub async fn handle(
    req: Request,
    env: &Env,
    cfg: &Config,
    agent: &AgentId,
) -> worker::Result<Response> {
    let now_ms = clock::request_now_ms(&req, cfg.test_clock);
    let refuse = |rej: Rejection, bytes: u64| {
        log::line_str(&DecisionLog::rejected(agent.as_str(), &rej, bytes).to_line());
        http::rejection(&rej)
    };
    let bytes = match body::read_capped(&req, MAX_BODY_BYTES).await {
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
    if let Err(rej) = write::precheck(&bytes, agent) {
        return refuse(rej, bytes.len() as u64);
    }

    let connecting_ip = req.headers().get("CF-Connecting-IP")?;
    let call = WriteCall {
        agent: agent.clone(),
        now_ms,
        ip_bucket: ip_bucket(connecting_ip.as_deref()),
        fail_mirror: cfg.test_clock && req.headers().has(TEST_FAIL_MIRROR_HEADER)?,
        body: bytes,
    };
    let relayed = do_wire::write(env, call).await?;
    let out = http::respond(relayed.status, Some(relayed.body), NO_STORE);
    if let Some(ra) = relayed.retry_after {
        http::set(out.headers(), "Retry-After", &ra);
    }
    Ok(out)
}
