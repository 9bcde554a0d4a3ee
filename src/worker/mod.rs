//! The Cloudflare Workers: a thin shell that moves bytes between HTTP, KV and
//! Durable Object storage. Every protocol decision lives in `crate::core`.
//!
//! One source, three Workers (docs/ARCHITECTURE.md, "Three Workers"): the
//! entry Worker (feature `entry`, `workers/entry/`) compiles the read path
//! and [`entry`] only, answers the reads and forwards the rest; the write
//! Worker (feature `write`, `workers/write/`) compiles the Durable Objects
//! and the routes of the capsule's write path; the extras Worker (feature
//! `extras`, `workers/extras/`) compiles the routes off that path (MCP, the
//! upgrade's quote, claim and x402, projected feeds) and the cron, and no
//! Durable Object class. What is `#[cfg(feature = "worker")]` is shared by
//! the write and extras Workers; `write` and `extras` gate what is one's
//! alone.
//!
//! The modules form a tree (checked by `tests/worker_tree.rs`, which also
//! keeps the entry from reaching the write side):
//! `routes -> handlers -> {failure -> http, kv, do_wire} -> core`, and the
//! Durable Objects on `{do_wire, storage, failure, http}`; the leaves (config, clock, body,
//! lock, log, request) use nothing above them.
//!
//! | concern                                         | module        |
//! |-------------------------------------------------|---------------|
//! | the write and extras Workers' entry points: every failure answered | this file |
//! | the entry Worker: answer the reads, forward the rest | [`entry`] |
//! | route a request to its handler (write, extras)  | [`routes`]    |
//! | the read routes' dispatch (every Worker)        | [`read_route`] |
//! | one function per public operation               | [`handlers`]  |
//! | every response: headers, CORS, errors, 304/HEAD | [`http`]      |
//! | why a request fails, and its one answer         | [`failure`]   |
//! | the KV namespace                                | [`kv`]        |
//! | the location's copy of public reads (Cache API) | [`read_cache`] |
//! | the Worker <-> Durable Object calls, both halves| [`do_wire`]   |
//! | a signed read's nonce check (every Worker)      | [`nonce_wire`] |
//! | a write's call into its agent's object (every Worker) | [`write_wire`] |
//! | the transport of those calls (JSON in, JSON out) | [`do_json`]  |
//! | the entry <-> write and extras contract         | [`entry_wire`] |
//! | the Durable Objects (agent, IP quota)           | [`objects`]   |
//! | Durable Object storage (JSON values, atomic)    | [`storage`]   |
//! | JSON-RPC to the payment chain                   | [`rpc`]       |
//! | the x402 facilitator (`/verify`, `/settle`)     | [`facilitator`] |
//! | the world feed snapshot's refresh (ddv1 upstream) | [`world`]   |
//! | vars and secrets                                | [`config`]    |
//! | "now", capped body reads, the DO lock, logs     | [`clock`], [`body`], [`lock`], [`log`] |
//! | cold paths kept out of the hot path's code      | [`cold`]      |
//! | the incoming public request                     | [`request`]   |

// Both Workers: the read path and what it stands on.
mod body;
mod clock;
mod cold;
mod config;
mod do_json;
mod entry_wire;
mod failure;
mod handlers;
mod http;
mod kv;
mod log;
mod nonce_wire;
mod read_cache;
mod read_route;
mod request;
mod write_wire;

// The write and extras Workers (feature `worker`). Each compiles part of
// what these modules offer (the object half of a call or the caller's, a
// route or not), so what one of them leaves unused the other uses.
#[cfg(feature = "worker")]
#[cfg_attr(not(all(feature = "write", feature = "extras")), allow(dead_code))]
mod do_wire;
#[cfg(feature = "worker")]
mod routes;
#[cfg(feature = "worker")]
#[cfg_attr(not(all(feature = "write", feature = "extras")), allow(dead_code))]
mod world;

// The write Worker only (feature `write`): the Durable Objects and what
// only they use.
#[cfg(feature = "write")]
mod facilitator;
#[cfg(feature = "write")]
mod lock;
#[cfg(feature = "write")]
mod objects;
#[cfg(feature = "write")]
mod rpc;
#[cfg(feature = "write")]
mod storage;

// The entry Worker only (feature `entry`).
#[cfg(feature = "entry")]
pub mod entry;

#[cfg(feature = "worker")]
use request::Incoming;
#[cfg(feature = "worker")]
use worker::{web_sys, Context, Env};
#[cfg(feature = "extras")]
use worker::{ScheduleContext, ScheduledEvent};

/// Runs once per isolate, when the module is instantiated. Nothing else is
/// prepared here: the safety scanner's automata are compiled at build time
/// and rebuilt on the first write that needs them, so an isolate that only
/// serves reads never pays for them.
#[cfg(feature = "worker")]
pub fn start() {
    console_error_panic_hook::set_once();
}

/// Every request ends here with a JSON answer: a failure below is answered
/// by `failure::Failure::response` (a runtime error as a 503 with
/// `retry_after_sec`, never a 500 or a stack trace).
#[cfg(feature = "worker")]
pub async fn fetch(
    req: web_sys::Request,
    env: Env,
    _ctx: Context,
) -> worker::Result<web_sys::Response> {
    let req = Incoming::from(req);
    #[cfg(feature = "extras")]
    if entry_wire::is_cron(&req.method(), req.href()) {
        refresh_world(&env).await;
        return Ok(http::respond(204, None, http::NO_STORE).into());
    }
    let audience = http::Audience::of(routes::method_of(&req));
    let cfg = config::Config::of(&env);
    let body = req.inner().body();
    let answer = match routes::route(&req, &env, &cfg).await {
        Ok(resp) => resp,
        Err(failure) => failure.response(audience, req.path()).into(),
    };
    body::discard_unread(body).await;
    let answer = answer.into_raw();
    // Behind the entry Worker: what it must apply to its read copies.
    let changed = req.changed();
    if !changed.is_empty() {
        let items: Vec<String> = changed.iter().map(|c| c.item()).collect();
        answer
            .headers()
            .set(entry_wire::CHANGED_HEADER, &items.join(", "))?;
    }
    Ok(answer)
}

/// The cron trigger (`[triggers]` in wrangler.extras.toml): refreshes the
/// world snapshot projected watch feeds read, when an upstream is configured.
#[cfg(feature = "extras")]
pub async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    refresh_world(&env).await;
}

/// The cron's work, also run when the entry Worker hands a scheduled event
/// over (`entry_wire::CRON_URL`).
#[cfg(feature = "extras")]
async fn refresh_world(env: &Env) {
    let cfg = config::Config::of(env);
    let Some(upstream) = cfg.watch_upstream.as_deref() else {
        return;
    };
    let refreshed = match kv::Kv::of(env) {
        Ok(kv) => world::refresh(env, &kv, upstream, clock::system_now_ms()).await,
        Err(e) => Err(e),
    };
    if let Err(e) = refreshed {
        log::event(
            "internal_error",
            &[("path", "scheduled"), ("error", &e.to_string())],
        );
    }
}
