//! The protocol core: everything a write must pass and everything a reader
//! needs to trust a capsule, with no I/O. One module per concern:
//!
//! | concern                                   | module      |
//! |-------------------------------------------|-------------|
//! | strict JSON parsing (dup keys, depth)     | [`json`]    |
//! | RFC 8785 canonical bytes, cursor          | [`jcs`]     |
//! | reason codes, HTTP status, bot action     | [`reason`]  |
//! | tier table and fixed limits               | [`limits`]  |
//! | typed capsule model                       | [`model`]   |
//! | schema check of a capsule                 | [`validate`]|
//! | secrets / injection / URL scanner         | [`safety`]  |
//! | keys, agent_id, signing, verification     | [`crypto`]  |
//! | PUT envelope parsing and the write checks | [`write`]   |
//! | quota windows and the retry cooldown      | [`quota`]   |
//! | signed reads (RFC 9421): who is asking     | [`read_auth`] |
//! | who may read a (private) capsule's documents | [`access`] |
//! | KV record and head.json                   | [`record`]  |
//! | KV mirror order and retry backoff         | [`mirror`]  |
//! | If-None-Match, 304, read caching headers  | [`conditional`] |
//! | the bootstrap answer                      | [`bootstrap`] |
//! | hash-chained, sealed history; verify      | [`history`] |
//! | a readable diff of two capsule versions    | [`diff`]    |
//! | clock formatting                          | [`time`]    |
//! | the USDC upgrade: invoices, claims, payment checks | [`upgrade`] |
//! | every public URL, route and method        | [`urls`]    |
//! | which of the three Workers answers a request | [`entry`]  |
//! | MCP tools: catalogue, arguments, patches  | [`mcp`]     |
//! | rehydration prompt rendering              | [`render`]  |
//! | push on change: watch caps, close codes, long-poll `wait` | [`watch`] |
//! | key rotation and recovery: the key log, its rules and verifier | [`key_log`] |
//! | the ddv1 world feed as served; the stack map | [`world`] |
//! | projected watch feeds: selection, cursor, latest | [`projection`] |
//! | the operator's view: meta.json, admin access, totals | [`operator`] |
//!
//! The unit tests build their capsules with `testing` (compiled for them
//! only): the spec's example, or the minimal capsule, and one member set.

#![warn(missing_docs)]

pub mod access;
#[cfg(feature = "core-full")]
pub mod bootstrap;
pub mod conditional;
pub mod crypto;
#[cfg(feature = "core-full")]
pub mod diff;
pub mod entry;
pub mod envelope;
pub mod history;
pub mod jcs;
pub mod json;
pub mod key_log;
pub mod limits;
#[cfg(feature = "core-full")]
pub mod mcp;
#[cfg(feature = "core-full")]
pub mod mirror;
pub mod model;
pub mod operator;
#[cfg(feature = "core-full")]
pub mod projection;
pub mod quota;
pub mod read_auth;
pub mod reason;
pub mod record;
#[cfg(feature = "core-full")]
pub mod render;
#[cfg(feature = "core-full")]
pub mod safety;
pub mod time;
pub mod upgrade;
pub mod urls;
#[cfg(feature = "core-full")]
pub mod validate;
#[cfg(feature = "core-full")]
pub mod watch;
#[cfg(feature = "core-full")]
pub mod world;
#[cfg(feature = "core-full")]
pub mod write;

#[cfg(test)]
pub(crate) mod testing;
