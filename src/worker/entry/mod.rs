//! The entry Worker (feature `entry`, built as `workers/entry/`): every
//! request reaches it first. `core::entry` decides who answers: the reads
//! from KV (`read_route`, the same code the write Worker runs for them) and
//! the answers the route alone decides are made here; a PUT whose envelope
//! authenticates goes from here straight to the agent's object ([`write`]);
//! everything else is sent, as it came, to the write Worker or the extras
//! Worker through their service bindings ([`forward`]). Nothing of the write
//! side is compiled into it (`tests/worker_tree.rs`): no Durable Object
//! class, no write check beyond the envelope's, no payment, MCP or feed code.

mod forward;
mod write;

use super::body;
use super::cold;
use super::config::Config;
use super::failure::Failure;
use super::http::{Audience, Reply};
use super::log;
use super::read_route;
use super::request::Incoming;
use crate::core::entry::{answerer, asks_to_wait, Answerer};
use crate::core::urls::{Action, Method, Route};
use worker::{web_sys, Context, Env};

/// Runs once per isolate, when the module is instantiated.
pub fn start() {
    console_error_panic_hook::set_once();
}

/// Every request ends here: answered (a failure by
/// `failure::Failure::response`, never a 500), or forwarded.
pub async fn fetch(
    req: web_sys::Request,
    env: Env,
    _ctx: Context,
) -> worker::Result<web_sys::Response> {
    let req = Incoming::from(req);
    let method = Method::parse(&req.method());
    let audience = Audience::of(method);
    let behind = match answerer(Route::parse(req.path()), method, || {
        asks_to_wait(req.query_pairs())
    }) {
        Answerer::Entry(action) => Ok(action),
        Answerer::Writer => Err(forward::WRITER_BINDING),
        Answerer::Extras => Err(forward::EXTRAS_BINDING),
    };
    let action = match behind {
        Ok(action) => action,
        Err(to) => return Ok(cold::path(forwarded(to, &req, &env, audience, None)).await),
    };
    let cfg = Config::of(&env);
    if let Action::Write { agent } = &action {
        return Ok(cold::path(write::put(&req, &env, &cfg, agent)).await);
    }
    let body = req.inner().body();
    let answer = match answer(&req, &env, &cfg, action, method).await {
        Ok(Some(reply)) => reply,
        // Not one of the entry's (`core::entry` never gives one): the
        // write Worker answers it, with its body still unread.
        Ok(None) => {
            let to = forward::WRITER_BINDING;
            return Ok(cold::path(forwarded(to, &req, &env, audience, None)).await);
        }
        Err(failure) => failure.response(audience, req.path()).into(),
    };
    body::discard_unread(body).await;
    Ok(answer.into_raw())
}

/// The entry Worker has no cron trigger: the cron is the extras Worker's
/// (wrangler.extras.toml). A scheduled event that reaches it anyway is
/// handed to the extras Worker's handler; locally that is how npm start's
/// `/__scheduled` runs the cron (`wrangler dev --test-scheduled` reaches the
/// first Worker only).
pub async fn scheduled(env: Env) {
    if let Err(e) = forward::scheduled_to_extras(&env).await {
        log::event(
            "internal_error",
            &[("path", "scheduled"), ("error", &e.to_string())],
        );
    }
}

/// The entry's own answer to `action`, or `None` for an action it leaves to
/// the write Worker.
async fn answer(
    req: &Incoming,
    env: &Env,
    cfg: &Config,
    action: Action<'_>,
    method: Method,
) -> Result<Option<Reply>, Failure> {
    if let Some(decided) = read_route::decided(&action, method) {
        return decided.map(Some);
    }
    match action {
        Action::Read {
            doc,
            agent,
            head_only,
        } => read_route::read(req, env, cfg, doc, &agent, head_only)
            .await
            .map(Some),
        _ => Ok(None),
    }
}

/// The answer to `req` of the Worker behind `binding` (`body`: see
/// [`forward::to`]), or the 503 of a call that failed.
async fn forwarded(
    binding: &str,
    req: &Incoming,
    env: &Env,
    audience: Audience,
    body: Option<&web_sys::ReadableStream>,
) -> web_sys::Response {
    match forward::to(binding, req, env, body).await {
        Ok(resp) => resp,
        Err(e) => Failure::from(e).response(audience, req.path()).into(),
    }
}
