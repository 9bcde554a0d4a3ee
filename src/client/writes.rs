//! Everything that leads to a write: the desired state (`set`, and the
//! edits `access` makes to it), the choice of seq ([`next_seq`]), the local
//! [`precheck`], signing, `put` and `publish`, and recording an accepted
//! write locally.
//!
//! One rule runs through all of it: a seq, once signed, belongs to one
//! capsule (`signed.json` is written before anything is sent), because an
//! envelope whose answer was lost stays valid and may still arrive.
//!
//! A new identity's first write rides on its inception (docs/PROTOCOL.md
//! §14): the envelope goes to `POST keys.json` with the event that commits
//! the next key, so that `POST` ([`KeysAnswer`]) is sent from here, and
//! `keys` sends its rotations through the same call.

use super::exchange::unavailable;
use super::http::Request;
use super::identity::Signer;
use super::reads::HeadOutcome;
use super::state::{self, HeadCache, Published};
use super::wire::{Accepted, Head, Rejected};
use super::{Client, Error};
use crate::core::crypto::{AgentId, AgentKey};
use crate::core::jcs::{self, cursor_hex};
use crate::core::json::{self, Json};
use crate::core::key_log::build::{self, post_body};
use crate::core::key_log::{Digest, KeyEvent, KeysSummary, DEFAULT_WINDOW_SEC};
use crate::core::reason::ReasonCode;
use crate::core::record::{head_etag, split_head_etag};
use crate::core::write::check_capsule;

/// An accepted write.
#[derive(Debug, Clone, PartialEq)]
pub struct PutResult {
    /// The service's accepted-write body (seq, cursor, the quota left).
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
// A short-lived return value, matched at once: boxing would only add noise.
#[allow(clippy::large_enum_variant)]
pub enum PublishOutcome {
    /// The desired capsule equals the last accepted one: nothing sent.
    Clean {
        /// The seq of the last accepted write, which it equals.
        seq: u64,
        /// Its cursor.
        cursor: String,
    },
    /// It differed (or `force`): signed, sent and accepted.
    Published(PutResult),
}

/// The 200 answer to `POST keys.json`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct KeysAnswer {
    /// Always true on a 200.
    pub accepted: bool,
    /// `new`, or `already_applied` for an event the log already holds.
    pub applied: String,
    /// The event's index in the log.
    pub index: u64,
    /// The log's summary after it.
    #[serde(default)]
    pub keys: Option<KeysSummary>,
    /// The write the envelope made (a new event with an envelope only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<Accepted>,
}

impl Client {
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
        let mut seen_head: Option<Option<Head>> = None;
        let seq = match opts.seq {
            Some(s) => s,
            None => {
                // The service may be ahead of us (another process or machine).
                let head = match self.fetch_head(&agent, None)? {
                    Some(HeadOutcome::Changed { head }) => Some(head),
                    _ => None,
                };
                seen_head = Some(head.clone());
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
        // A new identity's first write carries its inception (§14), so the
        // next key is committed before the genesis key ever signs a capsule.
        let inception = if published.is_none() {
            let head = match seen_head {
                Some(h) => h,
                None => match self.fetch_head(&agent, None)? {
                    Some(HeadOutcome::Changed { head }) => Some(head),
                    _ => None,
                },
            };
            self.inception_due(&key, head.is_some_and(|h| h.keys.is_some()))?
        } else {
            None
        };
        // Persisted before sending: this seq now belongs to this capsule.
        self.state.note_signed(seq, &cursor)?;
        let envelope = key.sign_envelope(seq, capsule);
        if let Some(event) = inception {
            let body = post_body(&event, Some(&envelope));
            let (answer, _) = self.post_key_event(&agent, body)?;
            let accepted = match answer.write {
                Some(a) => a,
                // Sent before and applied (its answer was lost): the head
                // shows the write.
                None => self
                    .accepted_if_head_is(&agent, seq, &cursor)?
                    .ok_or_else(|| {
                        Error::Protocol(
                            "keys.json applied the inception but head.json does not show its write"
                                .into(),
                        )
                    })?,
            };
            if !accepted.accepted || accepted.seq != seq || accepted.cursor != cursor {
                return Err(Error::Protocol(format!(
                    "keys.json answer does not match the write (seq {}, cursor {})",
                    accepted.seq, accepted.cursor
                )));
            }
            self.record(capsule, &accepted, published.as_ref())?;
            if let Some(k) = &answer.keys {
                self.note_key_log_length(k.length)?;
            }
            return Ok(PutResult {
                accepted,
                confirmed_from_head: false,
            });
        }
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

    /// `POST keys.json` with `body`. A refusal is a [`Rejected`] error with
    /// the service's reason codes (so the CLI prints their bot actions).
    pub(crate) fn post_key_event(
        &self,
        agent: &AgentId,
        body: Vec<u8>,
    ) -> Result<(KeysAnswer, bool), Error> {
        let req = Request::json("POST", self.keys_url(agent)?, body);
        let (resp, uncertain) = self.exchange(&req)?;
        match resp.status {
            200 => {
                let a: KeysAnswer = serde_json::from_slice(&resp.body)
                    .map_err(|e| Error::Protocol(format!("keys.json answer: {e}")))?;
                if !a.accepted {
                    return Err(Error::Protocol("keys.json answered 200 unaccepted".into()));
                }
                Ok((a, uncertain))
            }
            s if s >= 500 => Err(unavailable(&req, &resp)),
            s => {
                let mut rejected: Rejected = serde_json::from_slice(&resp.body).map_err(|_| {
                    Error::Protocol(format!("keys.json answered HTTP {s}: {}", resp.snippet()))
                })?;
                rejected.status = s;
                Err(rejected.into())
            }
        }
    }

    /// The inception the first write carries, if it is due: the identity
    /// committed a next key at `keygen` (identity.json's `next_key_digest`;
    /// next.key itself is never loaded here), is still on its genesis key,
    /// and has published nothing from here. `has_log`: whether head.json
    /// already shows a key log (then none is due).
    pub(crate) fn inception_due(&self, key: &Signer, has_log: bool) -> Result<Option<Json>, Error> {
        if has_log || key.key_index() > 0 || self.state.published()?.is_some() {
            return Ok(None);
        }
        let Some(id) = self.state.identity()? else {
            return Ok(None);
        };
        let Some(digest) = id.next_key_digest.as_deref().and_then(Digest::from_hex) else {
            return Ok(None);
        };
        let recovery = id.recovery_key_digest.as_deref().and_then(Digest::from_hex);
        Ok(Some(inception(key.key(), digest, recovery).to_json()))
    }

    /// The accepted-write body head.json stands for, when it shows `agent`
    /// at exactly `seq` and `cursor` (a write whose own answer was lost).
    pub(crate) fn accepted_if_head_is(
        &self,
        agent: &AgentId,
        seq: u64,
        cursor: &str,
    ) -> Result<Option<Accepted>, Error> {
        match self.fetch_head(agent, None)? {
            Some(HeadOutcome::Changed { head }) if head.seq == seq && head.cursor == cursor => {
                Ok(Some(accepted_from_head(head, self.head_url(agent)?)))
            }
            _ => Ok(None),
        }
    }

    /// A key event changed the log's length: the cached head's ETag
    /// (`<cursor hex>-k<length>`) follows, so the next `head` can be a 304.
    pub(crate) fn note_key_log_length(&self, length: u64) -> Result<(), Error> {
        if let Some(mut h) = self.state.head_cache()? {
            h.etag = head_etag(split_head_etag(&h.etag).0, Some(length));
            self.state.save_head_cache(&h)?;
        }
        Ok(())
    }

    /// Records an accepted write locally.
    pub(super) fn record(
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

    /// Makes `new` the local copy of the last accepted write (after a write,
    /// or when rehydration finds the service's copy newer). capsule.json
    /// follows it unless it holds unpublished edits of its own.
    pub(super) fn adopt(&self, new: Published, previous: Option<&Published>) -> Result<(), Error> {
        let desired = self.state.desired()?;
        let desired_clean = match (&desired, previous) {
            (None, _) => true,
            (Some(d), Some(p)) => jcs::cursor(d) == p.cursor,
            (Some(d), None) => jcs::cursor(d) == new.cursor,
        };
        // head.json's ETag is the cursor's hex, plus `-k<length>` once the
        // agent has a key log (§14); a write leaves the log as it was.
        let log_length = self
            .state
            .head_cache()?
            .and_then(|h| split_head_etag(&h.etag).1);
        self.state.save_published(&new)?;
        self.state.save_head_cache(&HeadCache {
            etag: head_etag(cursor_hex(&new.cursor), log_length),
            head: None,
        })?;
        if desired_clean && desired.as_ref().map(jcs::cursor).as_deref() != Some(&new.cursor) {
            self.state.save_desired(&new.capsule)?;
        }
        Ok(())
    }

    /// Replaces the desired capsule (after the local check unless skipped).
    pub fn set_desired(&self, capsule: &Json, skip_precheck: bool) -> Result<(), Error> {
        if !skip_precheck {
            self.precheck(capsule)?;
        }
        self.state.save_desired(capsule)
    }

    /// Applies `f` to the desired capsule (capsule.json) and stores the
    /// result after the local pre-check, like `set` (a refused edit leaves
    /// capsule.json as it was); `publish` sends it. Returns the new desired
    /// capsule. The edits themselves (`grant`, `revoke`, `visibility`) are
    /// `access`'s pure functions.
    pub fn edit_desired(
        &self,
        f: impl FnOnce(&Json) -> Result<Json, Error>,
        skip_precheck: bool,
    ) -> Result<Json, Error> {
        let Some(desired) = self.state.desired()? else {
            return Err(Error::local(format!(
                "no {}: publish a capsule first (or run `selfcap rehydrate` on a new machine)",
                self.state.file(state::DESIRED_FILE).display()
            )));
        };
        let next = f(&desired)?;
        // An edit that changes nothing stores nothing (and checks nothing).
        if next != desired {
            self.set_desired(&next, skip_precheck)?;
        }
        Ok(next)
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

/// The inception of `genesis`'s agent committing `next` (and the
/// operator's `recovery` key digest), with the clients' default window.
pub(super) fn inception(genesis: &AgentKey, next: Digest, recovery: Option<Digest>) -> KeyEvent {
    build::inception(genesis, next, recovery, DEFAULT_WINDOW_SEC)
}

/// The local pre-check (see [`Client::precheck`]), staged like the service:
/// envelope-level problems (the capsule is an object naming this agent),
/// then the core's own [`check_capsule`] (schema, then safety), so the codes,
/// details and findings are the service's.
pub fn precheck(agent: &AgentId, capsule: &Json) -> Result<(), Rejected> {
    if capsule.as_object().is_none() {
        return Err(envelope_rejection(
            ReasonCode::InvalidCapsule,
            format!(
                "the capsule must be a JSON object, not {}",
                capsule.type_name()
            ),
            vec![],
        ));
    }
    if let Some(Json::String(id)) = capsule.get("agent_id") {
        if id != agent.as_str() {
            return Err(envelope_rejection(
                ReasonCode::AgentId,
                format!("capsule agent_id is not this identity's ({agent})"),
                vec![serde_json::json!({
                    "code": "agent_id", "path": "$.agent_id",
                    "message": "must equal the agent id in the path"
                })],
            ));
        }
    }
    check_capsule(capsule).map_err(Rejected::refused_locally)
}

/// A refusal of the envelope-level checks, which the service makes while
/// reading the envelope (before the signature), so the core has no
/// capsule-only function for them.
fn envelope_rejection(
    code: ReasonCode,
    detail: String,
    findings: Vec<serde_json::Value>,
) -> Rejected {
    Rejected {
        status: code.http_status(),
        reason_codes: vec![code.as_str().to_string()],
        detail: Some(detail),
        retry_after_sec: None,
        next_write_at: None,
        findings,
        max_bytes: None,
        observed_bytes: None,
        local: true,
    }
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

/// The smallest valid capsule for `agent`: the policy alone (what
/// `self_checkpoint` starts from when nothing was ever published).
pub fn minimal(agent: &AgentId) -> Json {
    let text = format!(
        r#"{{"schema_version":"self_capsule_v0","agent_id":"{agent}","policy":{{"policy_version":"v0","rehydrate_mode":"strict","deny_external_instructions":true,"deny_tool_instructions_in_text":true,"memory_budget":{{"max_rehydrate_tokens":900,"max_objectives":8}}}}}}"#
    );
    json::parse_str(&text).expect("the minimal capsule is valid JSON")
}

/// The accepted-write body a head stands for, when the PUT's own answer was
/// lost and head.json shows that the write arrived.
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
        history_url: head.history_url,
        verify_url: head.verify_url,
        writes: head.writes,
    }
}
