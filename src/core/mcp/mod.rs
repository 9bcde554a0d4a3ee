//! MCP (Model Context Protocol) tools, both doors: what every tool is
//! called, takes and does to a capsule. No transport here: `selfcap mcp`
//! serves these over stdio with the `rmcp` SDK, the Worker over
//! `POST /mcp`.
//!
//! | module | what |
//! |---|---|
//! | [`tools`] | the catalogue: names, titles, descriptions, input schemas, which door lists what |
//! | [`args`] | a call's arguments as typed values ([`args::Call`]), bad ones as [`args::ArgError`] |
//! | [`patch`] | `self_write`'s defaults and `self_checkpoint`'s patches |
//! | [`results`] | every answer's shape, for both doors ([`results::Answer`]) |
//! | [`rpc`] | the remote door's JSON-RPC / MCP messages: versions, `initialize`, `tools/*`, errors |

pub mod args;
pub mod patch;
pub mod results;
pub mod rpc;
pub mod tools;

pub use args::{ArgError, Call, CheckpointArgs, PayMethod, UpgradeAction};
pub use results::Answer;
pub use tools::{Door, Tool};
