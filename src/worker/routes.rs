//! Dispatch: `core::urls` decides what a request is (route, method, agent
//! id); this file only calls the handler for it.

use super::config::Config;
use super::failure::Failure;
#[cfg(feature = "extras")]
use super::handlers::{admin, feed, mcp, upgrade, x402};
use super::handlers::{bootstrap, key_log, keys, watch, write};
use super::http::{CachedRead, Reply};
use super::read_route;
use crate::core::reason::ReasonCode;
use crate::core::urls::{Action, Method, Route};
use crate::core::watch::asks_websocket;
use crate::worker::request::Incoming;
use worker::Env;

/// The request's method as routed, from the raw method text: workers-rs
/// reads every method it has no variant for (PROPFIND, MKCOL, LOCK, COPY …)
/// as GET, which would serve documents to WebDAV verbs.
pub fn method_of(req: &Incoming) -> Method {
    Method::parse(&req.method())
}

/// The method of a request to the watch route, where a WebSocket upgrade is
/// read through `Method::of_upgrade` (the runtime reports every one as a
/// GET). Only there: no other route accepts an upgrade, and polls should
/// not pay for the header reads.
fn watch_method(req: &Incoming, reported: Method) -> worker::Result<Method> {
    let h = req.headers();
    if !asks_websocket(h.get("Upgrade")?.as_deref()) {
        return Ok(reported);
    }
    Ok(Method::of_upgrade(
        reported,
        h.has("Access-Control-Request-Method")?,
        h.has("Content-Length")? || h.has("Transfer-Encoding")?,
    ))
}

/// Dispatches one public request. Whatever fails goes back to the caller
/// as a [`Failure`], which answers it.
pub async fn route(req: &Incoming, env: &Env, cfg: &Config) -> Result<Reply, Failure> {
    let route = Route::parse(req.path());
    let method = match route {
        Route::Watch { .. } | Route::FeedSocket => watch_method(req, method_of(req))?,
        _ => method_of(req),
    };
    let action = route.dispatch(method);
    if let Some(decided) = read_route::decided(&action, method) {
        return decided;
    }
    Ok(match action {
        Action::Bootstrap => bootstrap::handle(req, cfg).await?.into(),
        #[cfg(feature = "extras")]
        Action::Quote => upgrade::quote(req, env, cfg).await?.into(),
        #[cfg(feature = "extras")]
        Action::Claim => upgrade::claim(req, env, cfg).await?.into(),
        #[cfg(feature = "extras")]
        Action::X402 => x402::handle(req, env, cfg).await?.into(),
        #[cfg(feature = "extras")]
        Action::Mcp => mcp::handle(req, env, cfg).await?.into(),
        #[cfg(feature = "extras")]
        Action::Admin { rest } => admin::handle(req, env, cfg, rest).await?.into(),
        #[cfg(feature = "extras")]
        Action::Feed { doc, head_only } => {
            feed::handle(req, env, cfg, doc, CachedRead::of(req, head_only)).await?
        }
        #[cfg(feature = "extras")]
        Action::FeedSocket => feed::socket(req, env, cfg).await?.into(),
        // The extras Worker's routes (`core::entry` sends them there): the
        // write Worker reached directly does not carry them.
        #[cfg(not(feature = "extras"))]
        Action::Quote
        | Action::Claim
        | Action::X402
        | Action::Mcp
        | Action::Feed { .. }
        | Action::FeedSocket
        | Action::Admin { .. } => return Err(Failure::code(ReasonCode::NotFound)),
        Action::Keys { head_only } => keys::handle(env, CachedRead::of(req, head_only))?.into(),
        Action::Write { agent } => write::handle(req, env, cfg, &agent).await?.into(),
        Action::KeyEvent { agent } => key_log::post(req, env, cfg, &agent).await?.into(),
        Action::Watch { agent } => watch::handle(req, env, cfg, &agent).await?.into(),
        Action::Read {
            doc,
            agent,
            head_only,
        } => read_route::read(req, env, cfg, doc, &agent, head_only).await?,
        // Answered above.
        Action::NotFound
        | Action::BadAgentId
        | Action::Preflight { .. }
        | Action::MethodNotAllowed { .. } => return Err(Failure::code(ReasonCode::NotFound)),
    })
}
