//! The read routes' dispatch, shared by every Worker: the answers the route
//! alone decides, and `GET`/`HEAD` of an
//! agent's documents (head.json, capsule.json, history.json, snapshots,
//! verify.json, keys.json; export.json in the write Worker only). The entry
//! Worker answers these itself; the router of the Workers behind it (`routes`) calls
//! the same function for the reads it is sent (a long-poll, export.json) or
//! that reach it directly.

use super::clock;
use super::cold;
use super::config::Config;
use super::failure::Failure;
use super::handlers::reads::ReadAs;
use super::handlers::{history, reads, signer};
#[cfg(feature = "entry")]
use super::handlers::{key_log, meta};
use super::http::{self, Audience, CachedRead, Reply};
use crate::core::access;
use crate::core::crypto::AgentId;
use crate::core::reason::ReasonCode;
use crate::core::urls::{Action, Doc, Method};
use crate::worker::request::Incoming;
use worker::Env;

/// The answer the route alone decides (`core::urls::Route::dispatch`): 404,
/// 400 `bad_agent_id`, a CORS preflight, 405. `None` for any other action.
pub fn decided(action: &Action<'_>, method: Method) -> Option<Result<Reply, Failure>> {
    Some(match action {
        Action::NotFound => Err(Failure::code(ReasonCode::NotFound)),
        Action::BadAgentId => Err(Failure::code(ReasonCode::BadAgentId)),
        Action::Preflight { allow, headers } => Ok(http::preflight(allow, headers).into()),
        Action::MethodNotAllowed { allow } => {
            Ok(http::method_not_allowed(allow, Audience::of(method)).into())
        }
        _ => return None,
    })
}

/// One read of `doc` of `agent` (`head_only` for `HEAD`).
pub async fn read(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    doc: Doc<'_>,
    agent: &AgentId,
    head_only: bool,
) -> Result<Reply, Failure> {
    let now_ms = clock::request_now_ms(req, cfg.test_clock);
    // A signature is checked before anything about the capsule is read.
    let reader = signer::of(req, env, now_ms).await?;
    let mut read = CachedRead::of(req, head_only);
    if reader.is_some() {
        // Whatever a signed read gets is for that reader alone.
        read = read.private();
    }
    // head.json and capsule.json are the hot path; the rest is kept out of
    // its code (`cold`).
    if let Doc::Head | Doc::Capsule = doc {
        return reads::handle(req, env, cfg, doc, agent, read, reader.as_ref()).await;
    }
    let read_as = ReadAs {
        reader: reader.as_ref(),
        scope: access::scope_of(&doc),
        now_ms,
    };
    Ok(match doc {
        // meta.json, keys.json, history.json, snapshots and verify.json are
        // the entry's alone: the write Worker reached directly does not
        // carry their readers (every Worker under 1 MiB), as it does not
        // carry the extras' routes. It answers export.json, which the entry
        // forwards.
        #[cfg(not(feature = "entry"))]
        Doc::Meta | Doc::KeyLog => return Err(Failure::code(ReasonCode::NotFound)),
        #[cfg(feature = "entry")]
        Doc::Meta => cold::path(meta::get(env, cfg, agent, read, &read_as))
            .await?
            .into(),
        #[cfg(feature = "entry")]
        Doc::KeyLog => cold::path(key_log::get(env, agent, read, &read_as))
            .await?
            .into(),
        #[cfg(feature = "worker")]
        Doc::Export => cold::path(history::export(env, agent, read, &read_as))
            .await?
            .into(),
        // Never sent to the entry Worker (`core::entry`).
        #[cfg(not(feature = "worker"))]
        Doc::Export => return Err(Failure::code(ReasonCode::NotFound)),
        #[cfg(all(feature = "write", not(feature = "extras")))]
        _ => return Err(Failure::code(ReasonCode::NotFound)),
        #[cfg(not(all(feature = "write", not(feature = "extras"))))]
        _ => {
            let query = req.query_pairs();
            cold::path(history::handle(query, env, doc, agent, read, &read_as))
                .await?
                .into()
        }
    })
}
