//! One function per public operation, each on `http` (answers), `kv`
//! (reads), `do_wire` (calls into the Durable Objects) and the core (every
//! decision). Handlers never call each other or the router.
//!
//! | operation                                   | module        |
//! |---------------------------------------------|---------------|
//! | head.json / capsule.json from KV            | [`reads`]     |
//! | history, snapshot, verify, export           | [`history`]   |
//! | the service keyring                         | [`keys`]      |
//! | stateless bootstrap                         | [`bootstrap`] |
//! | PUT: body cap, pre-check, to the agent's DO | [`write`]     |
//! | upgrade quote and claim, to the agent's DO  | [`upgrade`]   |

pub mod bootstrap;
pub mod history;
pub mod keys;
pub mod reads;
pub mod upgrade;
pub mod write;

use crate::core::crypto::AgentId;
use crate::core::reason::ReasonCode;
use crate::worker::http::{self, Audience};
use crate::worker::kv::Kv;
use crate::worker::log;
use worker::Response;

/// The text stored in KV at `key`, or (as `Err`) the 404 answer for an agent
/// that has published nothing. Every per-agent read starts here.
async fn text_or_404(kv: &Kv, key: &str) -> worker::Result<Result<String, Response>> {
    Ok(kv
        .text(key)
        .await?
        .ok_or_else(|| http::error(ReasonCode::CapsuleNotFound, Audience::Read, None)))
}

/// The 503 for a stored value that does not parse, logged as `event`. Only
/// the agent's Durable Object writes these keys, so a bad value is our bug
/// (or a half-migrated format), never the client's.
fn unreadable(event: &str, agent: &AgentId, error: &str) -> Response {
    log::event(event, &[("agent_id", agent.as_str()), ("error", error)]);
    http::unavailable(Audience::Read)
}
