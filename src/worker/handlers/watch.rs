//! `GET /self/{id}/watch`, Worker half: a WebSocket upgrade is checked for
//! (426 without one), a signature verified like any read's, and the socket
//! handed to the agent's Durable Object, which holds it (hibernatable),
//! applies the caps and sends the heads (`core::watch`). The long-poll of
//! head.json lives with the other reads (`reads`).

use crate::core::crypto::AgentId;
use crate::core::quota::ip_bucket;
use crate::core::reason::ReasonCode;
use crate::core::watch;
use crate::worker::clock;
use crate::worker::config::Config;
use crate::worker::do_wire::{self, WatchCall};
use crate::worker::failure::Failure;
use crate::worker::handlers::signer;
use crate::worker::request::Incoming;
use worker::{Env, Response};

/// Refuses (426) a request that is not a WebSocket opening handshake the
/// runtime can complete: every socket route checks this first.
pub fn handshake(req: &Incoming) -> Result<(), Failure> {
    let h = req.headers();
    if !watch::asks_websocket(h.get("Upgrade")?.as_deref()) {
        return Err(Failure::code(ReasonCode::WebsocketRequired));
    }
    let (key, version) = (h.get("Sec-WebSocket-Key")?, h.get("Sec-WebSocket-Version")?);
    if !watch::is_handshake(key.as_deref(), version.as_deref()) {
        return Err(Failure::refused(
            ReasonCode::WebsocketRequired,
            "not a WebSocket opening handshake: it needs Sec-WebSocket-Key (16 random bytes, base64) and Sec-WebSocket-Version: 13 (RFC 6455 4.1)",
        ));
    }
    Ok(())
}

/// One watch request.
pub async fn handle(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    agent: &AgentId,
) -> Result<Response, Failure> {
    handshake(req)?;
    let now_ms = clock::request_now_ms(req, cfg.test_clock);
    // A signature is checked before anything about the capsule is read.
    let reader = signer::of(req, env, now_ms).await?;
    let call = WatchCall {
        agent_id: agent.to_string(),
        reader: reader.map(|r| r.to_string()),
        ip_bucket: ip_bucket(req.headers().get("CF-Connecting-IP")?.as_deref()),
        now_ms,
    };
    Ok(do_wire::watch(env, &call).await?)
}
