//! One function per public operation, each on `http` (answers), `kv`
//! (reads), `do_wire` (calls into the Durable Objects) and the core (every
//! decision). Handlers never call the router. The read and write handlers
//! come in two halves: the data (`reads::record`, `history::index`,
//! `history::page`, `write::write`) and the HTTP answer built from it; the
//! MCP handler is the one handler that calls others, and only their data
//! halves, so a tool reads and writes through exactly the code a route does.
//!
//! Every handler and data half returns `Result<_, failure::Failure>`: a
//! refusal, a rejection and a runtime error all leave through `?`, and
//! `Failure::response` (or, for a tool, `mcp`'s one mapping) answers them.
//!
//! | operation                                   | module        |
//! |---------------------------------------------|---------------|
//! | head.json / capsule.json from KV            | [`reads`]     |
//! | history, snapshot, verify, export           | [`history`]   |
//! | the service keyring                         | [`keys`]      |
//! | an agent's key log: read, POST an event     | [`key_log`]   |
//! | meta.json: an agent's writes and refusals   | [`meta`]      |
//! | an agent's projected watch feed             | [`feed`]      |
//! | stateless bootstrap                         | [`bootstrap`] |
//! | the operator API: gate, agents, one agent   | [`admin`]     |
//! | an x402 purchase (402, settle, credit)      | [`x402`]      |
//! | PUT: body cap, pre-check, to the agent's DO | [`write`]     |
//! | upgrade quote and claim, to the agent's DO  | [`upgrade`]   |
//! | `POST /mcp`: the remote MCP tools           | [`mcp`]       |
//! | who signed a read (RFC 9421), nonce admitted | [`signer`]    |
//! | watch: WebSocket upgrade to the agent's DO  | [`watch`]     |

// The read handlers, in every Worker (key_log's GET; its POST only in the
// Workers behind the entry).
pub mod history;
pub mod key_log;
#[cfg(feature = "entry")]
pub mod meta;
pub mod reads;
pub mod signer;

// The write and extras Workers.
#[cfg(feature = "worker")]
pub mod bootstrap;
#[cfg(feature = "worker")]
pub mod keys;
#[cfg(feature = "worker")]
pub mod watch;
#[cfg(feature = "worker")]
pub mod write;

// The extras Worker only: the routes off the capsule's write path.
#[cfg(feature = "extras")]
pub mod admin;
#[cfg(feature = "extras")]
pub mod feed;
#[cfg(feature = "extras")]
pub mod mcp;
#[cfg(feature = "extras")]
pub mod upgrade;
#[cfg(feature = "extras")]
pub mod x402;

use crate::core::crypto::AgentId;
use crate::core::reason::ReasonCode;
use crate::worker::failure::Failure;
use crate::worker::http::{self, NO_STORE};
use crate::worker::kv::Kv;
use crate::worker::log;
use crate::worker::write_wire::Relayed;
use worker::Response;

/// The answer an agent's object decided (a write, a quote, a claim),
/// relayed as it gave it (also the entry's answer to a PUT it sent to the
/// object itself).
pub fn relay(r: Relayed) -> Response {
    let out = http::respond(r.status, Some(r.body), NO_STORE);
    if let Some(ra) = r.retry_after {
        http::set(out.headers(), "Retry-After", &ra);
    }
    for (name, value) in &r.x402 {
        http::set(out.headers(), name, value);
    }
    out
}

/// The text stored in KV at `key`, or the miss of an agent that has
/// published nothing. Every per-agent read starts here.
async fn text_or_404(kv: &Kv, key: &str) -> Result<String, Failure> {
    kv.text(key)
        .await?
        .ok_or_else(|| Failure::code(ReasonCode::CapsuleNotFound))
}

/// The failure for a stored value that does not parse, logged as `event`.
/// Only the agent's Durable Object writes these keys, so a bad value is our
/// bug (or a half-migrated format), never the client's.
fn unreadable(event: &str, agent: &AgentId, error: &str) -> Failure {
    log::event(event, &[("agent_id", agent.as_str()), ("error", error)]);
    Failure::Unavailable(None)
}
