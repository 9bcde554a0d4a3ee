//! The native client library behind the `selfcap` CLI (never compiled into
//! the Worker). Built on the core: the same canonicaliser, signing, schema
//! check, safety scanner and renderer the service uses.
//!
//! - [`Client`]: one identity's state directory plus a service URL. Typed
//!   results; every decision that does not need the network is a pure
//!   function in its own module:
//! - [`backoff`]: the retry policy ([`BackoffPolicy::decide`]).
//! - [`resolve`]: local-first resolution for rehydration ([`resolve::resolve`]).
//! - [`state`]: the state directory layout and dirty tracking.
//! - [`http`]: the transport seam ([`http::Transport`]; [`http::UreqTransport`]).
//! - [`wire`]: the service's response bodies.
//! - [`error`]: [`Error`] and the CLI's [`ExitCode`]s.

pub mod backoff;
pub mod error;
pub mod http;
pub mod resolve;
pub mod state;
pub mod wire;

#[cfg(test)]
mod tests;

pub use backoff::{BackoffPolicy, Decision, GiveUp, Outcome};
pub use error::{Error, ExitCode};
pub use resolve::{resolve, Resolution, Side, Version};
pub use state::{Location, StateDir};
pub use wire::{Accepted, Bootstrap, Head, Rejected};

use crate::core::crypto::{AgentId, AgentKey};
use crate::core::history::{self, Keyring, Report, VerifyOptions};
use crate::core::jcs;
use crate::core::json::{self, Json};
use crate::core::model::Capsule;
use crate::core::reason::{self, ReasonCode};
use crate::core::safety;
use crate::core::validate::{self, Violation};
use http::{Request, Response, Transport, UreqTransport};
use state::{HeadCache, Published, Service};
use std::time::Duration;

/// Default per-request timeout (connect + send + receive).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A retry about to happen (for progress output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryNote {
    pub method: &'static str,
    pub url: String,
    /// The attempt that just failed (1-based) and the total allowed.
    pub attempt: u32,
    pub max_attempts: u32,
    /// "HTTP 503" or the network error.
    pub reason: String,
    pub wait: Duration,
}

/// What `head` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadOutcome {
    /// 304: the cursor is still the stored ETag's.
    Unchanged { etag: String },
    /// 200: a head (new, or seen for the first time).
    Changed { head: Head },
}

/// A fetched capsule: the exact body (`JCS(capsule)`) and its cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched {
    pub body: Vec<u8>,
    pub capsule: Json,
    pub cursor: String,
}

/// An accepted write.
#[derive(Debug, Clone, PartialEq)]
pub struct PutResult {
    pub accepted: Accepted,
    /// True when the answer was lost (network error or 5xx) and the write
    /// was confirmed from head.json instead.
    pub confirmed_from_head: bool,
}

/// Options for a write.
#[derive(Debug, Clone, Default)]
pub struct PutOptions {
    /// Use this seq instead of max(local, service) + 1.
    pub seq: Option<u64>,
    /// Skip the local schema/safety check (send whatever it is).
    pub skip_precheck: bool,
}

/// What `publish` did.
#[derive(Debug, Clone, PartialEq)]
pub enum PublishOutcome {
    /// The desired capsule equals the last accepted one: nothing sent.
    Clean {
        seq: u64,
        cursor: String,
    },
    Published(PutResult),
}

/// The local picture (no network).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Status {
    pub agent_id: String,
    pub public_key: String,
    pub state_dir: String,
    pub base_url: Option<String>,
    pub published_seq: Option<u64>,
    pub published_cursor: Option<String>,
    pub desired_cursor: Option<String>,
    /// The desired capsule differs from the last accepted one.
    pub dirty: bool,
}

/// The result of local-first rehydration.
#[derive(Debug, Clone)]
pub struct Rehydrated {
    pub resolution: Resolution,
    pub side: Side,
    pub seq: u64,
    pub cursor: String,
    pub capsule: Json,
    /// The typed, validated capsule (what the renderer takes).
    pub typed: Capsule,
    /// The service could not be asked; the local copy was used.
    pub offline: bool,
    /// Things the operator should know (stale read, unpublished edits, ...).
    pub warnings: Vec<String>,
}

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
            sleeper: Box::new(sleep_with_jitter),
            on_retry: None,
        }
    }

    /// Overrides the recorded service URL (e.g. `--url`).
    pub fn with_base_url(mut self, url: Option<String>) -> Client {
        self.base_url = url.map(|u| u.trim_end_matches('/').to_string());
        self
    }

    pub fn with_policy(mut self, policy: BackoffPolicy) -> Client {
        self.policy = policy;
        self
    }

    pub fn with_transport(mut self, t: Box<dyn Transport>) -> Client {
        self.transport = t;
        self
    }

    /// How to wait between attempts (tests pass a recorder).
    pub fn with_sleeper(mut self, s: Box<dyn Fn(Duration)>) -> Client {
        self.sleeper = s;
        self
    }

    pub fn on_retry(mut self, f: RetryObserver) -> Client {
        self.on_retry = Some(f);
        self
    }

    pub fn state(&self) -> &StateDir {
        &self.state
    }

    pub fn policy(&self) -> &BackoffPolicy {
        &self.policy
    }

    pub fn key(&self) -> Result<AgentKey, Error> {
        self.state.load_key()
    }

    pub fn agent_id(&self) -> Result<AgentId, Error> {
        Ok(self.key()?.agent_id())
    }

    // ---------------------------------------------------------------- URLs

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

    pub fn head_url(&self, agent: &AgentId) -> Result<String, Error> {
        Ok(format!("{}/self/{agent}/head.json", self.base_url()?))
    }

    pub fn capsule_url(&self, agent: &AgentId) -> Result<String, Error> {
        Ok(format!("{}/self/{agent}/capsule.json", self.base_url()?))
    }

    // ------------------------------------------------------------- plumbing

    /// Sends `req` under the retry policy. `Ok` carries the last answer
    /// (which may be a 429 or 5xx the policy gave up on) and whether an
    /// earlier attempt failed in a way that may have applied the request.
    fn exchange(&self, req: &Request) -> Result<(Response, bool), Error> {
        let max = self.policy.max_attempts.max(1);
        let mut uncertain = false;
        let mut attempt = 1;
        loop {
            let (decision, reason, result) = match self.transport.send(req) {
                Ok(resp) => {
                    let outcome = Outcome::Status {
                        status: resp.status,
                        retry_after: resp.retry_after(),
                    };
                    let reason = format!("HTTP {}", resp.status);
                    (self.policy.decide(attempt, outcome), reason, Ok(resp))
                }
                Err(e) => (
                    self.policy.decide(attempt, Outcome::Network),
                    e.clone(),
                    Err(e),
                ),
            };
            match (decision, result) {
                (Decision::Retry(wait), result) => {
                    uncertain |= result.as_ref().map_or(true, |r| r.status >= 500);
                    if let Some(f) = &self.on_retry {
                        f(&RetryNote {
                            method: req.method,
                            url: req.url.clone(),
                            attempt,
                            max_attempts: max,
                            reason,
                            wait,
                        });
                    }
                    (self.sleeper)(wait);
                    attempt += 1;
                }
                (_, Ok(resp)) => return Ok((resp, uncertain)),
                (_, Err(e)) => {
                    let tries = if attempt == 1 {
                        "1 attempt".to_string()
                    } else {
                        format!("{attempt} attempts")
                    };
                    return Err(Error::Unavailable(format!(
                        "service unreachable: {} {}: {e} ({tries})",
                        req.method, req.url
                    )));
                }
            }
        }
    }

    /// Maps a non-success answer of a read to an error.
    fn read_error(&self, req: &Request, resp: &Response) -> Error {
        let code = serde_json::from_slice::<serde_json::Value>(&resp.body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned));
        match (resp.status, code.as_deref()) {
            (s, _) if s >= 500 => unavailable(req, resp),
            (404, Some("capsule_not_found")) => Error::NotFound(format!(
                "no capsule published yet at {} (capsule_not_found)",
                req.url
            )),
            (404 | 410, Some(c @ ("cursor_not_found" | "snapshot_not_found"))) => {
                Error::NotFound(format!(
                    "{c}: {}",
                    ReasonCode::from_wire(c).map_or("", ReasonCode::bot_action)
                ))
            }
            (_, Some(c)) if ReasonCode::from_wire(c).is_some() => Error::Protocol(format!(
                "{} {} answered HTTP {} {c}: {}",
                req.method,
                req.url,
                resp.status,
                ReasonCode::from_wire(c).map_or("", ReasonCode::bot_action)
            )),
            _ => Error::Protocol(format!(
                "{} {} answered HTTP {}: {}",
                req.method,
                req.url,
                resp.status,
                resp.snippet()
            )),
        }
    }

    // ------------------------------------------------------------- commands

    /// Generates a new identity in the directory `loc` selects.
    pub fn keygen(loc: &Location) -> Result<(StateDir, AgentKey), Error> {
        let key = AgentKey::generate()
            .map_err(|e| Error::local(format!("no randomness from the OS: {e}")))?;
        let dir = StateDir::new(loc.for_new(&key.agent_id())?);
        dir.create(&key)?;
        Ok((dir, key))
    }

    /// `POST /api/v1/self/bootstrap`; stores the URLs it returns.
    pub fn bootstrap(&self) -> Result<Bootstrap, Error> {
        let key = self.key()?;
        let base = self.base_url()?;
        let body = serde_json::json!({ "public_key": key.public_key().to_hex() });
        let req = Request::json(
            "POST",
            format!("{base}/api/v1/self/bootstrap"),
            body.to_string().into_bytes(),
        );
        let (resp, _) = self.exchange(&req)?;
        if resp.status != 200 {
            return Err(self.read_error(&req, &resp));
        }
        let b: Bootstrap = serde_json::from_slice(&resp.body)
            .map_err(|e| Error::Protocol(format!("bootstrap answer: {e}")))?;
        if b.agent_id != key.agent_id().as_str() || b.public_key != key.public_key().to_hex() {
            return Err(Error::Protocol(
                "bootstrap returned another agent id or public key than ours".into(),
            ));
        }
        self.state.save_service(&Service {
            base_url: base,
            head_url: b.head_url.clone(),
            capsule_url: b.capsule_url.clone(),
            limits: b.limits.clone(),
        })?;
        Ok(b)
    }

    /// `GET head.json`, conditional on `etag` when given. `Ok(None)`: 404.
    pub fn fetch_head(
        &self,
        agent: &AgentId,
        etag: Option<&str>,
    ) -> Result<Option<HeadOutcome>, Error> {
        let mut req = Request::get(self.head_url(agent)?);
        if let Some(tag) = etag {
            req = req.header("if-none-match", format!("\"{tag}\""));
        }
        let (resp, _) = self.exchange(&req)?;
        match resp.status {
            304 => Ok(Some(HeadOutcome::Unchanged {
                etag: etag.unwrap_or_default().to_string(),
            })),
            200 => {
                let head: Head = serde_json::from_slice(&resp.body)
                    .map_err(|e| Error::Protocol(format!("head.json: {e}")))?;
                if head.agent_id != agent.as_str() {
                    return Err(Error::Protocol("head.json is for another agent".into()));
                }
                Ok(Some(HeadOutcome::Changed { head }))
            }
            404 => match self.read_error(&req, &resp) {
                Error::NotFound(_) => Ok(None),
                other => Err(other),
            },
            _ => Err(self.read_error(&req, &resp)),
        }
    }

    /// `head`: for our own agent, revalidates the stored ETag and stores
    /// what it sees; for another agent, a plain read.
    pub fn head(&self, agent: Option<&AgentId>) -> Result<HeadOutcome, Error> {
        let own = self.agent_id()?;
        let target = agent.unwrap_or(&own);
        let is_own = *target == own;
        let cached = if is_own {
            self.state.head_cache()?
        } else {
            None
        };
        let etag = cached.as_ref().map(|c| c.etag.as_str());
        match self.fetch_head(target, etag)? {
            None => Err(Error::NotFound(format!(
                "no capsule published yet for agent {target}"
            ))),
            Some(HeadOutcome::Changed { head }) => {
                if is_own {
                    self.state.save_head_cache(&HeadCache {
                        etag: cursor_hex(&head.cursor).to_string(),
                        head: Some(head.clone()),
                    })?;
                }
                Ok(HeadOutcome::Changed { head })
            }
            Some(unchanged) => Ok(unchanged),
        }
    }

    /// `GET capsule.json`: the exact body, checked against its ETag.
    pub fn get(&self, agent: Option<&AgentId>) -> Result<Fetched, Error> {
        let own;
        let target = match agent {
            Some(a) => a,
            None => {
                own = self.agent_id()?;
                &own
            }
        };
        let req = Request::get(self.capsule_url(target)?);
        let (resp, _) = self.exchange(&req)?;
        if resp.status != 200 {
            return Err(self.read_error(&req, &resp));
        }
        let capsule = json::parse(&resp.body)
            .map_err(|e| Error::Protocol(format!("capsule.json is not valid JSON: {e}")))?;
        let cursor = jcs::cursor_of_canonical(&resp.body);
        if jcs::canonical_bytes(&capsule) != resp.body {
            return Err(Error::Protocol(
                "capsule.json is not in canonical (RFC 8785) form".into(),
            ));
        }
        if let Some(tag) = resp.header("etag") {
            let tag = tag.trim().trim_start_matches("W/").trim_matches('"');
            if cursor_hex(tag) != cursor_hex(&cursor) {
                return Err(Error::Protocol(
                    "capsule.json does not hash to its ETag".into(),
                ));
            }
        }
        Ok(Fetched {
            body: resp.body,
            capsule,
            cursor,
        })
    }

    /// The next seq from local knowledge only: above the last accepted and
    /// the last signed seq (or the pending seq when `capsule` is exactly what
    /// was last signed and not yet seen accepted: the identical envelope).
    pub fn next_seq_local(&self, capsule: &Json) -> Result<u64, Error> {
        let published = self.state.published()?.map_or(0, |p| p.seq);
        Ok(next_seq(
            published,
            self.state.signed()?.as_ref(),
            &jcs::cursor(capsule),
        ))
    }

    /// Signs `capsule` at `seq` (default: [`Client::next_seq_local`]) and
    /// records the signature, so the seq is never reused for another capsule.
    /// Nothing is sent.
    pub fn sign(&self, capsule: &Json, seq: Option<u64>) -> Result<(u64, Json), Error> {
        let key = self.key()?;
        let seq = match seq {
            Some(s) => s,
            None => self.next_seq_local(capsule)?,
        };
        self.state.note_signed(seq, &jcs::cursor(capsule))?;
        Ok((seq, key.sign_envelope(seq, capsule)))
    }

    /// The checks the service would make that need no stored state and no
    /// tier: the capsule is an object addressed to us, passes the schema,
    /// and passes the safety scanner. Same codes, same findings.
    pub fn precheck(&self, capsule: &Json) -> Result<(), Error> {
        precheck(&self.agent_id()?, capsule).map_err(Error::from)
    }

    /// Signs `capsule` with the next seq and PUTs it. On success records the
    /// write locally (published.json, the ETag, and capsule.json unless it
    /// holds other unpublished edits). On a rejection nothing local changes.
    pub fn put(&self, capsule: &Json, opts: &PutOptions) -> Result<PutResult, Error> {
        let key = self.key()?;
        let agent = key.agent_id();
        if !opts.skip_precheck {
            precheck(&agent, capsule)?;
        }
        let published = self.state.published()?;
        let cursor = jcs::cursor(capsule);
        let signed = self.state.signed()?;
        let mut resend = false;
        let seq = match opts.seq {
            Some(s) => s,
            None => {
                // The service may be ahead of us (another process or machine).
                let head = match self.fetch_head(&agent, None)? {
                    Some(HeadOutcome::Changed { head }) => Some(head),
                    _ => None,
                };
                let local = published.as_ref().map_or(0, |p| p.seq);
                if let (Some(h), Some(s)) = (&head, &signed) {
                    // Our last envelope did arrive (its answer was lost earlier).
                    if h.seq == s.seq && h.cursor == s.cursor && s.cursor == cursor && s.seq > local
                    {
                        let accepted = accepted_from_head(h.clone(), self.head_url(&agent)?);
                        self.record(capsule, &accepted, published.as_ref())?;
                        return Ok(PutResult {
                            accepted,
                            confirmed_from_head: true,
                        });
                    }
                }
                let base = local.max(head.map_or(0, |h| h.seq));
                let seq = next_seq(base, signed.as_ref(), &cursor);
                resend = signed.as_ref().is_some_and(|s| s.seq == seq);
                seq
            }
        };
        // Persisted before sending: this seq now belongs to this capsule.
        self.state.note_signed(seq, &cursor)?;
        let envelope = key.sign_envelope(seq, capsule);
        let req = Request::json(
            "PUT",
            self.capsule_url(&agent)?,
            jcs::canonical_bytes(&envelope),
        );
        let (resp, uncertain) = self.exchange(&req)?;
        let uncertain = uncertain || resend;
        let result = match resp.status {
            200 => {
                let accepted: Accepted = serde_json::from_slice(&resp.body)
                    .map_err(|e| Error::Protocol(format!("PUT answer: {e}")))?;
                if !accepted.accepted || accepted.seq != seq || accepted.cursor != cursor {
                    return Err(Error::Protocol(format!(
                        "PUT answer does not match the write (seq {}, cursor {})",
                        accepted.seq, accepted.cursor
                    )));
                }
                PutResult {
                    accepted,
                    confirmed_from_head: false,
                }
            }
            s if s >= 500 => return Err(unavailable(&req, &resp)),
            s => {
                let mut rejected: Rejected = serde_json::from_slice(&resp.body).map_err(|_| {
                    Error::Protocol(format!("PUT answered HTTP {s}: {}", resp.snippet()))
                })?;
                rejected.status = s;
                // A lost answer may hide our own success: the retry then
                // meets our own seq. head.json tells.
                if uncertain && rejected.reason_codes.iter().any(|c| c == "replay_seq") {
                    if let Some(HeadOutcome::Changed { head }) = self.fetch_head(&agent, None)? {
                        if head.seq == seq && head.cursor == cursor {
                            let accepted = accepted_from_head(head, self.head_url(&agent)?);
                            self.record(capsule, &accepted, published.as_ref())?;
                            return Ok(PutResult {
                                accepted,
                                confirmed_from_head: true,
                            });
                        }
                    }
                }
                return Err(rejected.into());
            }
        };
        self.record(capsule, &result.accepted, published.as_ref())?;
        Ok(result)
    }

    /// Records an accepted write locally.
    fn record(
        &self,
        capsule: &Json,
        accepted: &Accepted,
        previous: Option<&Published>,
    ) -> Result<(), Error> {
        self.adopt(
            Published {
                seq: accepted.seq,
                cursor: accepted.cursor.clone(),
                capsule: capsule.clone(),
                recorded_at: Some(accepted.generated_at.clone()),
            },
            previous,
        )
    }

    /// Makes `new` the local copy of the last accepted write. capsule.json
    /// follows it unless it holds unpublished edits of its own.
    fn adopt(&self, new: Published, previous: Option<&Published>) -> Result<(), Error> {
        let desired = self.state.desired()?;
        let desired_clean = match (&desired, previous) {
            (None, _) => true,
            (Some(d), Some(p)) => jcs::cursor(d) == p.cursor,
            (Some(d), None) => jcs::cursor(d) == new.cursor,
        };
        self.state.save_published(&new)?;
        self.state.save_head_cache(&HeadCache {
            etag: cursor_hex(&new.cursor).to_string(),
            head: None,
        })?;
        if desired_clean && desired.as_ref().map(jcs::cursor).as_deref() != Some(&new.cursor) {
            self.state.save_desired(&new.capsule)?;
        }
        Ok(())
    }

    /// Replaces the desired capsule (after the local check unless skipped).
    pub fn set_desired(&self, capsule: &Json, skip_precheck: bool) -> Result<Status, Error> {
        if !skip_precheck {
            self.precheck(capsule)?;
        }
        self.state.save_desired(capsule)?;
        self.status()
    }

    /// The local picture: identity, service, last accepted write, dirtiness.
    pub fn status(&self) -> Result<Status, Error> {
        let key = self.key()?;
        let published = self.state.published()?;
        let desired = self.state.desired()?.map(|d| jcs::cursor(&d));
        let dirty = match (&desired, &published) {
            (Some(d), Some(p)) => *d != p.cursor,
            (Some(_), None) => true,
            (None, _) => false,
        };
        Ok(Status {
            agent_id: key.agent_id().to_string(),
            public_key: key.public_key().to_hex(),
            state_dir: self.state.path().display().to_string(),
            base_url: self.base_url().ok(),
            published_seq: published.as_ref().map(|p| p.seq),
            published_cursor: published.map(|p| p.cursor),
            desired_cursor: desired,
            dirty,
        })
    }

    /// Publishes capsule.json if (and only if) it is dirty, or when forced.
    pub fn publish(&self, opts: &PutOptions, force: bool) -> Result<PublishOutcome, Error> {
        let Some(desired) = self.state.desired()? else {
            return Err(Error::local(format!(
                "nothing to publish: no {} (write it, or run `selfcap set FILE`)",
                self.state.file(state::DESIRED_FILE).display()
            )));
        };
        if !force {
            if let Some(p) = self.state.published()? {
                if p.cursor == jcs::cursor(&desired) {
                    return Ok(PublishOutcome::Clean {
                        seq: p.seq,
                        cursor: p.cursor,
                    });
                }
            }
        }
        self.put(&desired, opts).map(PublishOutcome::Published)
    }

    /// Local-first rehydration: compares the local copy of the last accepted
    /// write with the service's head, keeps the higher seq (ties agree),
    /// stores the winner locally and returns it validated. When the service
    /// cannot be reached, the local copy is used (and `offline` set).
    pub fn rehydrate(&self) -> Result<Rehydrated, Error> {
        let agent = self.agent_id()?;
        let local = self.state.published()?;
        let mut warnings = Vec::new();
        let (server, offline) = match self.fetch_head(&agent, None) {
            Ok(Some(HeadOutcome::Changed { head })) => (Some(head), false),
            Ok(_) => (None, false),
            Err(e @ Error::Unavailable(_)) if local.is_some() => {
                warnings.push(format!("{e}; using the local copy"));
                (None, true)
            }
            Err(e) => return Err(e),
        };
        let resolution = resolve(
            local.as_ref().map(|p| Version {
                seq: p.seq,
                cursor: &p.cursor,
            }),
            server.as_ref().map(|h| Version {
                seq: h.seq,
                cursor: &h.cursor,
            }),
        );
        match resolution {
            Resolution::LocalNewer => warnings.push(format!(
                "the service still shows seq {} (reads are cached); using the newer local copy",
                server.as_ref().map_or(0, |h| h.seq)
            )),
            Resolution::Diverged => warnings.push(
                "the local copy differs from what the service accepted at the same seq; \
                 using the service's"
                    .into(),
            ),
            _ => {}
        }
        let Some(side) = resolution.winner() else {
            return Err(Error::NotFound(format!(
                "nothing to rehydrate: no local copy and no capsule published for agent {agent}"
            )));
        };
        let winner = match (side, server) {
            (Side::Server, Some(head)) => {
                let fetched = self.get(Some(&agent))?;
                let head = if fetched.cursor == head.cursor {
                    head
                } else {
                    // The head moved between the two reads: read it again.
                    match self.fetch_head(&agent, None)? {
                        Some(HeadOutcome::Changed { head }) if head.cursor == fetched.cursor => {
                            head
                        }
                        _ => {
                            return Err(Error::Protocol(
                                "capsule.json does not match head.json's cursor".into(),
                            ))
                        }
                    }
                };
                let p = Published {
                    seq: head.seq,
                    cursor: head.cursor,
                    capsule: fetched.capsule,
                    recorded_at: Some(head.generated_at),
                };
                self.adopt(p.clone(), local.as_ref())?;
                p
            }
            _ => {
                let p = local.expect("a local winner exists");
                if self.state.desired()?.is_none() {
                    self.state.save_desired(&p.capsule)?;
                }
                p
            }
        };
        let typed = validate::validate_capsule(&winner.capsule).map_err(|v| {
            Error::Protocol(format!(
                "the capsule fails the schema ({})",
                codes_of(&v).join(", ")
            ))
        })?;
        if let Some(d) = self.state.desired()? {
            if jcs::cursor(&d) != winner.cursor {
                warnings.push(format!(
                    "{} has unpublished changes (not shown here): run `selfcap publish`",
                    self.state.file(state::DESIRED_FILE).display()
                ));
            }
        }
        Ok(Rehydrated {
            resolution: if offline {
                Resolution::LocalOnly
            } else {
                resolution
            },
            side,
            seq: winner.seq,
            cursor: winner.cursor,
            capsule: winner.capsule,
            typed,
            offline,
            warnings,
        })
    }
}

impl Client {
    /// `GET history.json`: one page of retained versions, newest first
    /// (`since`: only those newer than that cursor). The body as served.
    pub fn history(
        &self,
        agent: Option<&AgentId>,
        since: Option<&str>,
        limit: Option<u32>,
    ) -> Result<serde_json::Value, Error> {
        let target = self.target(agent)?;
        let mut query = Vec::new();
        if let Some(c) = since {
            let c = crate::core::jcs::normalize_cursor(c).ok_or_else(|| {
                Error::local(format!(
                    "not a cursor: {c:?} (expected sha256:<64 hex> or the 64 hex digits)"
                ))
            })?;
            query.push(format!("since={c}"));
        }
        if let Some(n) = limit {
            query.push(format!("limit={n}"));
        }
        let mut url = format!("{}/self/{target}/history.json", self.base_url()?);
        if !query.is_empty() {
            url = format!("{url}?{}", query.join("&"));
        }
        let body = self.read_ok(&Request::get(url))?;
        serde_json::from_slice(&body).map_err(|e| Error::Protocol(format!("history.json: {e}")))
    }

    /// `GET export.json`: the agent's retained chain as an offline bundle,
    /// the exact bytes served (checked to be JSON).
    pub fn export_raw(&self, agent: Option<&AgentId>) -> Result<Vec<u8>, Error> {
        let target = self.target(agent)?;
        let url = format!("{}/self/{target}/export.json", self.base_url()?);
        let body = self.read_ok(&Request::get(url))?;
        json::parse(&body).map_err(|e| Error::Protocol(format!("export.json: {e}")))?;
        Ok(body)
    }

    /// `GET export.json`, parsed.
    pub fn export(&self, agent: Option<&AgentId>) -> Result<Json, Error> {
        let body = self.export_raw(agent)?;
        json::parse(&body).map_err(|e| Error::Protocol(format!("export.json: {e}")))
    }

    /// `GET /api/v1/self/keys`: the service keyring seals are checked against.
    pub fn keyring(&self) -> Result<Keyring, Error> {
        let url = format!("{}/api/v1/self/keys", self.base_url()?);
        let body = self.read_ok(&Request::get(url))?;
        let doc = json::parse(&body).map_err(|e| Error::Protocol(format!("keys: {e}")))?;
        keyring_of(&doc).map_err(|e| Error::Protocol(format!("keys: {e}")))
    }

    /// Downloads the agent's export and verifies it offline with the core,
    /// trusting the service's published keyring (or `keys`, when given)
    /// rather than the keys inside the bundle. For our own agent, a chain
    /// that ends before the last write recorded here is called out.
    pub fn verify(&self, agent: Option<&AgentId>, keys: Option<Keyring>) -> Result<Report, Error> {
        let target = self.target(agent)?;
        let bundle = self.export(Some(&target))?;
        let trusted = match keys {
            Some(k) => k,
            None => self.keyring()?,
        };
        let mut report = verify_bundle(&bundle, Some(trusted), Some(target.as_str()));
        if self.agent_id().ok().as_ref() == Some(&target) {
            if let Some(p) = self.state.published()? {
                if report.seq.is_none_or(|s| s < p.seq) {
                    report.warnings.push(format!(
                        "the chain ends at seq {} but this client recorded an accepted write at seq {}",
                        report.seq.map_or("-".into(), |s| s.to_string()),
                        p.seq
                    ));
                }
            }
        }
        Ok(report)
    }

    fn target(&self, agent: Option<&AgentId>) -> Result<AgentId, Error> {
        match agent {
            Some(a) => Ok(a.clone()),
            None => self.agent_id(),
        }
    }

    /// GET that must answer 200; the body.
    fn read_ok(&self, req: &Request) -> Result<Vec<u8>, Error> {
        let (resp, _) = self.exchange(req)?;
        if resp.status != 200 {
            return Err(self.read_error(req, &resp));
        }
        Ok(resp.body)
    }
}

/// A keyring from a `GET /api/v1/self/keys` body (`{"current", "keys"}`).
pub fn keyring_of(doc: &Json) -> Result<Keyring, String> {
    let (ring, problems) = Keyring::from_json(
        doc.get("keys").unwrap_or(&Json::Null),
        doc.get("current").and_then(Json::as_str),
    );
    if problems.is_empty() {
        Ok(ring)
    } else {
        Err(problems.join("; "))
    }
}

/// Verifies an export bundle offline with the core's `verify_export`:
/// against `trusted` keys when given (else the bundle's own, with a warning),
/// and bound to `agent` when given. Needs no network.
pub fn verify_bundle(bundle: &Json, trusted: Option<Keyring>, agent: Option<&str>) -> Report {
    let opts = VerifyOptions {
        trusted_keys: trusted,
        agent_id: agent.map(str::to_owned),
        now_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_millis() as u64),
    };
    history::verify_export_with(bundle, &opts)
}

/// The seq for the next signature: one above both `accepted` (the highest
/// seq known accepted) and the last signed seq, except that when `cursor` is
/// exactly what was last signed above `accepted`, that seq again (re-signing
/// yields the identical envelope, which is safe to resend).
pub fn next_seq(accepted: u64, signed: Option<&state::Signed>, cursor: &str) -> u64 {
    match signed {
        Some(s) if s.seq > accepted && s.cursor == cursor => s.seq,
        Some(s) => s.seq.max(accepted) + 1,
        None => accepted + 1,
    }
}

/// The local pre-check (see [`Client::precheck`]), staged like the service:
/// envelope-level problems, then the schema, then the safety scan.
pub fn precheck(agent: &AgentId, capsule: &Json) -> Result<(), Rejected> {
    let reject = |codes: Vec<ReasonCode>, detail: String, findings: Vec<serde_json::Value>| {
        let mut codes = codes;
        reason::normalize(&mut codes);
        Rejected {
            status: codes.first().map_or(422, |c| c.http_status()),
            reason_codes: codes.iter().map(|c| c.as_str().to_string()).collect(),
            detail: Some(detail),
            retry_after_sec: None,
            next_write_at: None,
            findings,
            max_bytes: None,
            observed_bytes: None,
            local: true,
        }
    };
    if capsule.as_object().is_none() {
        return Err(reject(
            vec![ReasonCode::InvalidCapsule],
            format!(
                "the capsule must be a JSON object, not {}",
                capsule.type_name()
            ),
            vec![],
        ));
    }
    if let Some(Json::String(id)) = capsule.get("agent_id") {
        if id != agent.as_str() {
            return Err(reject(
                vec![ReasonCode::AgentId],
                format!("capsule agent_id is not this identity's ({agent})"),
                vec![serde_json::json!({
                    "code": "agent_id", "path": "$.agent_id",
                    "message": "must equal the agent id in the path"
                })],
            ));
        }
    }
    if let Err(violations) = validate::validate_capsule(capsule) {
        let findings = violations
            .iter()
            .filter_map(|v| serde_json::to_value(v).ok())
            .collect();
        return Err(reject(
            validate::codes(&violations),
            format!(
                "capsule fails the self_capsule_v0 schema ({} problems)",
                violations.len()
            ),
            findings,
        ));
    }
    let findings = safety::scan(capsule);
    if !findings.is_empty() {
        return Err(reject(
            vec![ReasonCode::UnsafeContent],
            format!("safety scanner flagged {} string(s)", findings.len()),
            findings
                .iter()
                .filter_map(|f| serde_json::to_value(f).ok())
                .collect(),
        ));
    }
    Ok(())
}

/// A minimal valid capsule for `agent`, to start from.
pub fn template(agent: &AgentId) -> Json {
    let text = format!(
        r#"{{
  "schema_version": "self_capsule_v0",
  "agent_id": "{agent}",
  "policy": {{
    "policy_version": "v0",
    "rehydrate_mode": "strict",
    "deny_external_instructions": true,
    "deny_tool_instructions_in_text": true,
    "memory_budget": {{ "max_rehydrate_tokens": 900, "max_objectives": 8 }}
  }},
  "constraints": [
    {{ "id": "no-secrets-export", "type": "no_secrets_export", "value": true }}
  ],
  "objectives": [
    {{ "id": "first-objective", "status": "open", "priority": "med",
      "title": "Describe what this agent is working toward" }}
  ]
}}"#
    );
    json::parse_str(&text).expect("the template is valid JSON")
}

fn codes_of(v: &[Violation]) -> Vec<String> {
    validate::codes(v)
        .iter()
        .map(|c| c.as_str().to_string())
        .collect()
}

/// The 64 hex digits of a cursor or ETag value.
pub fn cursor_hex(cursor: &str) -> &str {
    cursor.strip_prefix("sha256:").unwrap_or(cursor)
}

fn unavailable(req: &Request, resp: &Response) -> Error {
    let wait = resp
        .retry_after()
        .map(|d| format!("; retry after {} s", d.as_secs()))
        .unwrap_or_default();
    Error::Unavailable(format!(
        "service failing: {} {} answered HTTP {}{wait}",
        req.method, req.url, resp.status
    ))
}

fn accepted_from_head(head: Head, head_url: String) -> Accepted {
    Accepted {
        accepted: true,
        agent_id: head.agent_id,
        seq: head.seq,
        cursor: head.cursor,
        prev_cursor: head.prev_cursor,
        changed: head.changed,
        generated_at: head.generated_at,
        ttl_sec: head.ttl_sec,
        capsule_url: head.capsule_url,
        head_url,
        writes: head.writes,
    }
}

/// Sleeps `d` plus up to 20% random jitter (so a fleet does not retry in
/// lockstep); never less than asked.
fn sleep_with_jitter(d: Duration) {
    let mut b = [0u8; 2];
    let frac = match getrandom::getrandom(&mut b) {
        Ok(()) => u16::from_le_bytes(b) as f64 / u16::MAX as f64,
        Err(_) => 0.0,
    };
    std::thread::sleep(d + d.mul_f64(0.2 * frac));
}
