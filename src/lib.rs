//! Self Capsule v0: restart-safe "self" state for autonomous agents.
//!
//! - [`core`]: the pure protocol core (parse, canonicalise, validate, scan,
//!   verify, render, quota and history logic). No I/O, no worker types; built
//!   natively for tests, benches and the `selfcap` CLI, and into the Workers.
//!   Feature `core-full` is all of it; without it, only the read path's part
//!   (what the entry Worker needs).
//! - `worker` (wasm32 only): the Worker layer, compiled for one of the
//!   service's three Workers. Feature `entry` is the entry Worker
//!   (`workers/entry/`): the read routes from KV and the location's read
//!   cache, everything else forwarded; feature `write` the write Worker
//!   (`workers/write/`): the write path and the Durable Objects; feature
//!   `extras` the extras Worker (`workers/extras/`): MCP, the payment routes,
//!   the projected feeds and the cron, on the write Worker's objects (`write`
//!   and `extras` are both on by default). The Capsule Explorer's browser
//!   build (`explorer/`) is the core without it.
//! - [`client`] (native only): the client library behind the `selfcap` CLI.
//! - [`cli`] (native only): the `selfcap` CLI itself, as one function
//!   ([`cli::run`]) that the binary and the Python package's command call.

// `Result<_, Rejection>` is the write path's shape: a rejection is the cold
// path and carries its whole response body, so boxing it would buy nothing.
#![allow(clippy::result_large_err)]

pub mod core;

/// The native client library behind the `selfcap` CLI. Never part of a wasm
/// build (the Worker's or the wasip1 benchmark's). On the whole core.
#[cfg(all(not(target_arch = "wasm32"), feature = "core-full"))]
pub mod client;

/// The `selfcap` command line (arguments, dispatch, output, exit codes) over
/// [`client`]. Native only, like it.
#[cfg(all(not(target_arch = "wasm32"), feature = "core-full"))]
pub mod cli;

/// The Worker layer; its entry points are called by the Worker crates
/// (`workers/entry/`, `workers/write/`).
#[cfg(all(
    target_arch = "wasm32",
    target_os = "unknown",
    feature = "worker-reads"
))]
pub mod worker;
