//! The native client library behind the `selfcap` CLI (never compiled into
//! the Worker). Built on the core: the same canonicaliser, URLs, signing,
//! capsule check, safety scanner, history verifier and renderer the service
//! uses, so the client cannot drift from it.
//!
//! [`Client`] is one identity's state directory plus a service URL, with
//! typed results; its methods are split by role over the modules below.
//! Every decision that does not need the network is a pure function (retry
//! policy, resolution, seq choice, pre-check), so it is unit-tested without
//! one.
//!
//! The modules stack one way, listed here top to bottom: each uses (imports,
//! or calls the `Client` methods of) only the layers below its own, never a
//! peer of its layer or anything above. `tests/client_layers.rs` reads the
//! source and fails on an edge against this order, and on a module placed
//! in no layer.
//!
//! | layer | module | what |
//! |---|---|---|
//! | local MCP | [`mcp`] | the local MCP tools' work (`selfcap mcp`): each tool over the state directory, local first ([`mcp::ToolHost`]; its own table lists its modules) |
//! | the local picture | `status` | `selfcap status` ([`Status`]): the files, the tier, a pending key event |
//! | commands | [`keys`] | the key log: read, verify and pin it; the inception, rotations and recovery, crash-safe |
//! | | [`upgrade`] | the paid upgrade: quote, pay on-chain (alloy, JSON-RPC over the transport), claim; `upgrade.json` and the re-run decision (its own table lists its modules) |
//! | | `rehydrate` | local-first rehydration ([`Rehydrated`]) |
//! | | [`import`] | importing the public MCP server's identity file (`~/.diffdelta/identity.json`) |
//! | | [`watch`] | `selfcap watch`: following an agent's head over a WebSocket or long-poll ([`Client::watch`]; its own table lists its modules) |
//! | sending | `writes` | the desired capsule (`set`, edits), seq choice ([`next_seq`]), the local [`precheck`], `sign`, `put`, `publish`; `POST keys.json` ([`KeysAnswer`]), which a first write's inception rides on |
//! | | `verify` | the service keyring, and the sealed history checked offline by the core ([`verify_bundle`], [`keyring_of`]) |
//! | asking | `reads` | `bootstrap`, head.json ([`HeadOutcome`]), capsule.json ([`Fetched`]), meta.json, history.json, export.json |
//! | | `feed` | an agent's projected watch feed (`selfcap feed`) |
//! | | [`admin`] | the operator API (`selfcap admin`): pages of agents, one agent's record, the totals, with the operator's token ([`admin::AdminToken`]) |
//! | plumbing | `exchange` | the URLs, the retry loop, conditional requests, when a read is signed (`read_doc`), mapping failed answers to [`Error`] |
//! | the handle | this file | [`Client`] and its builder, [`now_ms`] |
//! | pure work | [`read_sign`] | signing a read of a private capsule (RFC 9421 via `web-bot-auth`; docs/PROTOCOL.md §12) |
//! | | [`access`] | private capsules: the `access_control` edits behind `grant`, `revoke`, `visibility` ([`access::grant`], [`access::is_private`]) |
//! | the key | [`identity`] | which key speaks for the agent ([`identity::Signer`]), its secret files and those of a key swap in flight |
//! | files | [`state`] | the state directory layout and dirty tracking |
//! | errors | [`error`] | [`Error`] and the CLI's [`ExitCode`]s |
//! | leaves | [`http`] | the transport seam ([`http::Transport`]; [`http::UreqTransport`]) |
//! | | [`wire`] | the service's response bodies |
//! | | [`backoff`] | the retry policy ([`BackoffPolicy::decide`]), the note shown before a retry ([`RetryNote`]), the jitter |
//! | | [`resolve`] | local-first resolution for rehydration ([`resolve::resolve`]) |

#![warn(missing_docs)]

pub mod access;
pub mod admin;
pub mod backoff;
pub mod error;
mod exchange;
mod feed;
pub mod http;
pub mod identity;
pub mod import;
pub mod keys;
pub mod mcp;
pub mod read_sign;
mod reads;
mod rehydrate;
pub mod resolve;
pub mod state;
mod status;
pub mod upgrade;
mod verify;
pub mod watch;
pub mod wire;
mod writes;

#[cfg(test)]
mod tests;

pub use backoff::{with_jitter, BackoffPolicy, Decision, GiveUp, Outcome, RetryNote};
pub use error::{Error, ExitCode};
pub use reads::{Fetched, HeadOutcome};
pub use rehydrate::Rehydrated;
pub use resolve::{resolve, Resolution, Side, Version};
pub use state::{Location, StateDir};
pub use status::Status;
pub use verify::{keyring_of, verify_bundle, KeyringError};
pub use wire::{Accepted, Bootstrap, Head, Rejected};
pub use writes::{
    minimal, next_seq, precheck, template, KeysAnswer, PublishOutcome, PutOptions, PutResult,
};

use crate::core::crypto::{AgentId, AgentKey};
use http::{Transport, UreqTransport};
use identity::Signer;
use std::time::Duration;

/// The client's one clock read, Unix ms (the pure functions take `now_ms`).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A new random key from the OS.
pub(crate) fn fresh_key() -> Result<AgentKey, Error> {
    AgentKey::generate().map_err(|e| Error::local(format!("no randomness from the OS: {e}")))
}

/// Default per-request timeout (connect + send + receive).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A client for one identity.
pub struct Client {
    state: StateDir,
    base_url: Option<String>,
    policy: BackoffPolicy,
    transport: Box<dyn Transport>,
    sleeper: Box<dyn Fn(Duration)>,
    on_retry: Option<RetryObserver>,
}

/// Called before each retry (e.g. to print progress).
pub type RetryObserver = Box<dyn Fn(&RetryNote)>;

impl Client {
    /// A client over `state`, with the real transport, the default policy,
    /// and the service URL recorded by `bootstrap` (see [`Client::with_base_url`]).
    pub fn new(state: StateDir) -> Client {
        Client {
            state,
            base_url: None,
            policy: BackoffPolicy::default(),
            transport: Box::new(UreqTransport::new(DEFAULT_TIMEOUT)),
            sleeper: Box::new(backoff::sleep_with_jitter),
            on_retry: None,
        }
    }

    /// Overrides the recorded service URL (e.g. `--url`).
    pub fn with_base_url(mut self, url: Option<String>) -> Client {
        self.base_url = url.map(|u| u.trim_end_matches('/').to_string());
        self
    }

    /// Replaces the retry policy (the CLI's `--retries` and `--wait`; tests
    /// pass [`BackoffPolicy::no_retries`] or short delays).
    pub fn with_policy(mut self, policy: BackoffPolicy) -> Client {
        self.policy = policy;
        self
    }

    /// Replaces the HTTP transport: another timeout for the CLI, a
    /// scripted fake for the unit tests (no network needed).
    pub fn with_transport(mut self, t: Box<dyn Transport>) -> Client {
        self.transport = t;
        self
    }

    /// How to wait between attempts (tests pass a recorder).
    pub fn with_sleeper(mut self, s: Box<dyn Fn(Duration)>) -> Client {
        self.sleeper = s;
        self
    }

    /// Calls `f` before every retry, so a long wait is never silent (the
    /// CLI prints a progress line on stderr).
    pub fn on_retry(mut self, f: RetryObserver) -> Client {
        self.on_retry = Some(f);
        self
    }

    /// The identity's state directory, for what the client methods do not
    /// cover (status, pending writes, the files the CLI prints).
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// The retry policy in force (a caller with a bound of its own, like
    /// `watch`, derives its policy from it).
    pub fn policy(&self) -> &BackoffPolicy {
        &self.policy
    }

    /// The identity's current signing key and the agent it signs for, read
    /// from the state directory on each call (it is never kept in the
    /// client).
    pub fn key(&self) -> Result<Signer, Error> {
        self.state.load_key()
    }

    /// This identity's agent id, from identity.json checked against its key
    /// (fails without an identity, like [`Client::key`]).
    pub fn agent_id(&self) -> Result<AgentId, Error> {
        Ok(self.key()?.agent_id())
    }

    /// The service's base URL: the override, else what `bootstrap` stored.
    pub fn base_url(&self) -> Result<String, Error> {
        if let Some(u) = &self.base_url {
            return Ok(u.clone());
        }
        match self.state.service()? {
            Some(s) => Ok(s.base_url),
            None => Err(Error::local(
                "no service URL: run `selfcap bootstrap --url URL` or pass --url",
            )),
        }
    }

    /// Generates a new identity in the directory `loc` selects.
    pub fn keygen(loc: &Location) -> Result<(StateDir, AgentKey), Error> {
        let key = fresh_key()?;
        // The next key is committed by the first publish (the inception),
        // so a later leak of `key` alone never lets a thief rotate.
        let next = fresh_key()?;
        let dir = StateDir::new(loc.for_new(&key.agent_id())?);
        dir.create(&key, Some(&next))?;
        Ok((dir, key))
    }

    /// `agent`, or this identity's own id.
    fn target(&self, agent: Option<&AgentId>) -> Result<AgentId, Error> {
        match agent {
            Some(a) => Ok(a.clone()),
            None => self.agent_id(),
        }
    }
}
