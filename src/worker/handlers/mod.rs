//! One function per public operation, each on `http` (answers), `kv`
//! (reads), `do_wire` (calls into the Durable Objects) and the core (every
//! decision). Handlers never call the router. The read and write handlers
//! come in two halves: the data (`reads::record`, `history::index`,
//! `history::page`, `write::write`) and the HTTP answer built from it; the
//! MCP handler is the one handler that calls others, and only their data
//! halves, so a tool reads and writes through exactly the code a route does.
//!
//! | operation                                   | module        |
//! |---------------------------------------------|---------------|
//! | head.json / capsule.json from KV            | [`reads`]     |
//! | history, snapshot, verify, export           | [`history`]   |
//! | the service keyring                         | [`keys`]      |
//! | stateless bootstrap                         | [`bootstrap`] |
//! | PUT: body cap, pre-check, to the agent's DO | [`write`]     |
//! | upgrade quote and claim, to the agent's DO  | [`upgrade`]   |
//! | `POST /mcp`: the remote MCP tools           | [`mcp`]       |
//! | who signed a read (RFC 9421), nonce admitted | [`signer`]    |
//! | watch: WebSocket upgrade to the agent's DO  | [`watch`]     |

pub mod bootstrap;
pub mod history;
pub mod keys;
pub mod mcp;
pub mod reads;
pub mod signer;
pub mod upgrade;
pub mod watch;
pub mod write;

use crate::core::crypto::AgentId;
use crate::core::reason::ReasonCode;
use crate::worker::http::{self, Audience};
use crate::worker::kv::Kv;
use crate::worker::log;
use worker::Response;

/// Why a read has nothing to serve. The HTTP routes answer it with
/// [`Miss::response`]; the MCP tools turn it into a tool error with the
/// same reason code.
pub enum Miss {
    /// The client's problem: a reason code (with its own status).
    Refused {
        /// The reason code.
        code: ReasonCode,
        /// A one-line explanation, when there is more to say than the code.
        detail: Option<String>,
        /// `cursor_not_found`: where to start over.
        history_url: Option<String>,
    },
    /// Ours: a stored value we cannot use (already logged); a 503.
    Unavailable,
}

impl Miss {
    fn code(code: ReasonCode) -> Miss {
        Miss::Refused {
            code,
            detail: None,
            history_url: None,
        }
    }

    /// The HTTP answer of a read that missed.
    pub fn response(&self) -> Response {
        match self {
            Miss::Refused {
                code: ReasonCode::CursorNotFound,
                history_url: Some(url),
                ..
            } => http::cursor_not_found(url),
            Miss::Refused { code, detail, .. } => {
                http::error(*code, Audience::Read, detail.as_deref())
            }
            Miss::Unavailable => http::unavailable(Audience::Read),
        }
    }
}

/// The text stored in KV at `key`, or (as `Err`) the miss of an agent that
/// has published nothing. Every per-agent read starts here.
async fn text_or_404(kv: &Kv, key: &str) -> worker::Result<Result<String, Miss>> {
    Ok(kv
        .text(key)
        .await?
        .ok_or_else(|| Miss::code(ReasonCode::CapsuleNotFound)))
}

/// The miss for a stored value that does not parse, logged as `event`. Only
/// the agent's Durable Object writes these keys, so a bad value is our bug
/// (or a half-migrated format), never the client's.
fn unreadable(event: &str, agent: &AgentId, error: &str) -> Miss {
    log::event(event, &[("agent_id", agent.as_str()), ("error", error)]);
    Miss::Unavailable
}
