//! The Cloudflare Worker: a thin shell that moves bytes between HTTP, KV and
//! Durable Object storage. Every protocol decision lives in `crate::core`.
//!
//! The modules form a tree (checked by `tests/worker_tree.rs`):
//! `routes -> handlers -> {failure -> http, kv, do_wire} -> core`, and the
//! Durable Objects on `{do_wire, storage, failure, http}`; the leaves (config, clock, body,
//! lock, log, request) use nothing above them.
//!
//! | concern                                         | module        |
//! |-------------------------------------------------|---------------|
//! | entry point: every failure answered             | this file     |
//! | route a request to its handler                  | [`routes`]    |
//! | one function per public operation               | [`handlers`]  |
//! | every response: headers, CORS, errors, 304/HEAD | [`http`]      |
//! | why a request fails, and its one answer         | [`failure`]   |
//! | the KV namespace                                | [`kv`]        |
//! | the Worker <-> Durable Object calls, both halves| [`do_wire`]   |
//! | the Durable Objects (agent, IP quota)           | [`objects`]   |
//! | Durable Object storage (JSON values, atomic)    | [`storage`]   |
//! | JSON-RPC to the payment chain                   | [`rpc`]       |
//! | the x402 facilitator (`/verify`, `/settle`)     | [`facilitator`] |
//! | the world feed snapshot's refresh (ddv1 upstream) | [`world`]   |
//! | vars and secrets                                | [`config`]    |
//! | "now", capped body reads, the DO lock, logs     | [`clock`], [`body`], [`lock`], [`log`] |
//! | the incoming public request                     | [`request`]   |

mod body;
mod clock;
mod config;
mod do_wire;
mod facilitator;
mod failure;
mod handlers;
mod http;
mod kv;
mod lock;
mod log;
mod objects;
mod read_cache;
mod request;
mod routes;
mod rpc;
mod storage;
mod world;

use request::Incoming;
use worker::{event, web_sys, Context, Env, ScheduleContext, ScheduledEvent};

/// Runs once per isolate, when the module is instantiated. Nothing else is
/// prepared here: the safety scanner's automata are compiled at build time
/// and rebuilt on the first write that needs them, so an isolate that only
/// serves reads never pays for them.
#[event(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// Every request ends here with a JSON answer: a failure below is answered
/// by `failure::Failure::response` (a runtime error as a 503 with
/// `retry_after_sec`, never a 500 or a stack trace).
#[event(fetch)]
async fn fetch(
    req: web_sys::Request,
    env: Env,
    _ctx: Context,
) -> worker::Result<web_sys::Response> {
    let req = Incoming::from(req);
    let audience = http::Audience::of(routes::method_of(&req));
    let cfg = config::Config::of(&env);
    let body = req.inner().body();
    let answer = match routes::route(&req, &env, &cfg).await {
        Ok(resp) => resp,
        Err(failure) => failure.response(audience, req.path()).into(),
    };
    body::discard_unread(body).await;
    Ok(answer.into_raw())
}

/// The cron trigger (`[triggers]` in wrangler.toml): refreshes the world
/// snapshot projected watch feeds read, when an upstream is configured.
#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    let cfg = config::Config::of(&env);
    let Some(upstream) = cfg.watch_upstream.as_deref() else {
        return;
    };
    let refreshed = match kv::Kv::of(&env) {
        Ok(kv) => world::refresh(&env, &kv, upstream, clock::system_now_ms()).await,
        Err(e) => Err(e),
    };
    if let Err(e) = refreshed {
        log::event(
            "internal_error",
            &[("path", "scheduled"), ("error", &e.to_string())],
        );
    }
}
