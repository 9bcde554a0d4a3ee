//! What the people who run the service, and the authors of the bots that use
//! it, see of an agent without reading storage by hand.
//!
//! - [`refusals`]: an agent's refused writes, by reason code and by the
//!   hour, counted by its own object (only bodies that authenticated as the
//!   agent count: nobody can inflate another agent's counts).
//! - [`meta`]: what the agent's object mirrors for meta.json and for the
//!   operator's list of agents, and the meta.json body as of a read (the
//!   only part the entry Worker's read path compiles, with [`refusals`]).
//! - [`admin`]: the operator API's routes, its gate and the list's query.
//! - [`auth`]: who may use the operator API (a bearer token from a Worker
//!   secret, or Cloudflare Access), decided in constant time.
//! - [`stats`]: the deployment's totals, kept in sharded counters that the
//!   agents' objects feed in batches (no object on every write's path).

#![warn(missing_docs)]

#[cfg(feature = "core-full")]
pub mod admin;
#[cfg(feature = "core-full")]
pub mod auth;
pub mod meta;
pub mod refusals;
#[cfg(feature = "core-full")]
pub mod stats;

/// One hour, in ms: the granularity of every rolling count here.
pub const HOUR_MS: u64 = 3_600_000;

/// The Unix hour `at_ms` falls in.
pub fn hour_of(at_ms: u64) -> u64 {
    at_ms / HOUR_MS
}
