//! Dispatch: `core::urls` decides what a request is (route, method, agent
//! id); this file only calls the handler for it.

use super::clock;
use super::config::Config;
use super::handlers::reads::ReadAs;
use super::handlers::{bootstrap, history, keys, mcp, reads, signer, upgrade, watch, write};
use super::http::{self, Audience, CachedRead};
use crate::core::access;
use crate::core::reason::ReasonCode;
use crate::core::urls::{Action, Doc, Method, Route};
use worker::{Env, Request, Response};

/// The request's method as routed, from the raw method text: workers-rs
/// reads every method it has no variant for (PROPFIND, MKCOL, LOCK, COPY …)
/// as GET, which would serve documents to WebDAV verbs.
pub fn method_of(req: &Request) -> Method {
    Method::parse(&req.inner().method())
}

/// Dispatches one public request. Errors bubble up to the caller, which turns
/// them into a 503.
pub async fn route(req: Request, env: &Env, cfg: &Config) -> worker::Result<Response> {
    let url = req.url()?;
    let method = method_of(&req);
    let audience = Audience::of(method);
    Ok(match Route::parse(url.path()).dispatch(method) {
        Action::NotFound => http::error(ReasonCode::NotFound, audience, None),
        Action::BadAgentId => http::error(ReasonCode::BadAgentId, audience, None),
        Action::Preflight { allow, headers } => http::preflight(allow, headers),
        Action::MethodNotAllowed { allow } => http::method_not_allowed(allow, audience),
        Action::Bootstrap => bootstrap::handle(&req, &url, cfg).await?,
        Action::Quote => upgrade::quote(&req, &url, env, cfg).await?,
        Action::Claim => upgrade::claim(&req, env, cfg).await?,
        Action::Mcp => mcp::handle(&req, env, cfg).await?,
        Action::Keys { head_only } => keys::handle(env, CachedRead::of(&req, head_only))?,
        Action::Write { agent } => write::handle(req, env, cfg, &agent).await?,
        Action::Watch { agent } => watch::handle(&req, env, cfg, &agent).await?,
        Action::Read {
            doc,
            agent,
            head_only,
        } => {
            let now_ms = clock::request_now_ms(&req, cfg.test_clock);
            // A signature is checked before anything about the capsule is read.
            let reader = match signer::of(&req, env, now_ms).await? {
                Ok(r) => r,
                Err(refused) => {
                    return Ok(http::error(refused.code, audience, Some(&refused.detail)))
                }
            };
            let mut read = CachedRead::of(&req, head_only);
            if reader.is_some() {
                // Whatever a signed read gets is for that reader alone.
                read = read.private();
            }
            match doc {
                Doc::Head | Doc::Capsule => {
                    reads::handle(&req, env, cfg, doc, &agent, read, reader.as_ref()).await?
                }
                _ => {
                    let read_as = ReadAs {
                        reader: reader.as_ref(),
                        scope: access::scope_of(&doc),
                        now_ms,
                    };
                    history::handle(&url, env, doc, &agent, read, &read_as).await?
                }
            }
        }
    })
}
