//! The work behind `selfcap mcp`'s tools (the local door): each tool is a
//! few client calls over the identity's state directory, answered in the
//! shapes of [`crate::core::mcp::results`]. The MCP transport itself (the
//! `rmcp` SDK over stdio) is the binary's; this module never sees JSON-RPC.
//!
//! Local first, and no accepted or intended state is ever lost:
//! - `self_write` and `self_checkpoint` save the new capsule to
//!   `capsule.json` *before* signing and sending it. When the write is
//!   refused or the service is unreachable, it stays there, dirty, with the
//!   reason in `pending.json`; the next `self_checkpoint` (even without
//!   arguments) or `self_write` publishes it.
//! - `self_checkpoint` patches the newest state there is: unpublished local
//!   work first, else the newer of the local copy and the service's.
//! - `self_rehydrate` returns unpublished local work as the agent's state
//!   (flagged), so a restart never goes back in time.

use super::http::UreqTransport;
use super::import::import_identity;
use super::state::{Location, Pending, StateDir, KEY_FILE};
use super::upgrade::UpgradeOptions;
use super::writes::minimal;
use super::{now_ms, BackoffPolicy, Client, Error, HeadOutcome, PublishOutcome, PutOptions, Side};
use crate::core::crypto::AgentId;
use crate::core::jcs::{self, cursor_hex};
use crate::core::json::Json;
use crate::core::limits::Tier;
use crate::core::mcp::args::{Call, CheckpointArgs, UpgradeAction};
use crate::core::mcp::patch::{self, Applied};
use crate::core::mcp::results::{self, Answer};
use crate::core::mcp::{Door, Tool};
use crate::core::time::rfc3339;
use crate::core::urls::Doc;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::time::Duration;

/// Paying for the paid tier from `self_upgrade` (only when configured).
#[derive(Debug, Clone)]
pub struct PayConfig {
    /// The payer's secp256k1 key file (mode 0600).
    pub evm_key: PathBuf,
    /// The chain's JSON-RPC URL.
    pub rpc_url: String,
    /// Longest wait for the receipt, confirmations and claim.
    pub timeout: Duration,
}

/// Everything a local tool call needs: where the identity lives, which
/// service, and how patient to be.
#[derive(Debug, Clone)]
pub struct ToolHost {
    pub location: Location,
    /// Overrides the URL `self_bootstrap` stored (`SELFCAP_URL`, else the
    /// public server's `DIFFDELTA_BASE_URL`).
    pub base_url: Option<String>,
    pub policy: BackoffPolicy,
    pub timeout: Duration,
    /// The public server's identity file, imported by `self_bootstrap` when
    /// no identity exists yet (`None`: never import).
    pub import_from: Option<PathBuf>,
    pub pay: Option<PayConfig>,
}

/// How a publish attempt ended (for `self_write` and `self_checkpoint`).
enum Published {
    /// Accepted: the service's body.
    Accepted(Value),
    /// The desired capsule already is the published one: nothing sent.
    Clean { seq: u64, cursor: String },
    /// Refused or not delivered: saved locally; the tool error to return.
    Failed(Answer),
}

impl ToolHost {
    /// Runs one `tools/call`: the tool's answer, or a tool error (unknown
    /// tool, bad arguments, or what went wrong). Never panics on input.
    pub fn call(&self, name: &str, args: Option<&Map<String, Value>>) -> Answer {
        let Some(tool) = Tool::at(Door::Local, name) else {
            return results::error(
                "unknown_tool",
                format!("no tool {name:?}"),
                "Call tools/list for the tools this server offers.",
            );
        };
        let call = match Call::parse(tool, Door::Local, args) {
            Ok(c) => c,
            Err(e) => return results::bad_arguments(&e),
        };
        let done = match call {
            Call::Bootstrap => self.bootstrap(),
            Call::Rehydrate => self.rehydrate(),
            Call::Read { agent } => self.read(agent),
            Call::Write { capsule } => self.write(capsule),
            Call::Subscribe { agent, etag } => self.subscribe(agent, etag),
            Call::History {
                agent,
                since,
                limit,
            } => self.history(agent, since, limit),
            Call::Checkpoint(a) => self.checkpoint(a),
            Call::Verify { agent } => self.verify(agent),
            Call::Upgrade { action, plan } => self.upgrade(action, plan),
            // Not offered at this door (Tool::at refused it above).
            Call::Submit { .. } => Ok(results::error(
                "unknown_tool",
                "self_submit is the remote server's",
                "Use self_write: this server signs for you.",
            )),
        };
        done.unwrap_or_else(failure)
    }

    fn client_for(&self, state: StateDir) -> Client {
        Client::new(state)
            .with_base_url(self.base_url.clone())
            .with_transport(Box::new(UreqTransport::new(self.timeout)))
            .with_policy(self.policy.clone())
    }

    /// The identity's state directory, when there is an identity.
    fn existing(&self) -> Option<StateDir> {
        self.location
            .find()
            .ok()
            .filter(|s| s.file(KEY_FILE).is_file())
    }

    /// A client for the identity, or the `no_identity` tool error.
    fn client(&self) -> Result<Client, Answer> {
        match self.location.find() {
            Ok(s) if s.file(KEY_FILE).is_file() => Ok(self.client_for(s)),
            Ok(s) => Err(no_identity(&format!("no key in {}", s.path().display()))),
            Err(e) => Err(no_identity(&e.to_string())),
        }
    }

    /// A client to read `agent` with (any agent works without an identity
    /// when the service URL is configured), the target and whether it is
    /// our own.
    fn reader(&self, agent: Option<AgentId>) -> Result<(Client, AgentId, bool), Answer> {
        match (self.existing(), agent) {
            (Some(s), agent) => {
                let c = self.client_for(s);
                let own = c.agent_id().map_err(failure)?;
                let target = agent.unwrap_or_else(|| own.clone());
                let is_own = target == own;
                Ok((c, target, is_own))
            }
            // A directory that holds nothing: only the URL override is used.
            (None, Some(a)) => Ok((
                self.client_for(StateDir::new("/nonexistent/selfcap")),
                a,
                false,
            )),
            (None, None) => Err(no_identity("no identity yet")),
        }
    }

    fn bootstrap(&self) -> Result<Answer, Error> {
        let (state, status, imported) = match self.existing() {
            Some(s) => (s, "existing_identity", None),
            None => match self.import_from.as_ref().filter(|f| f.is_file()) {
                Some(f) => {
                    let (dir, _) = import_identity(&self.location, f)?;
                    (dir, "imported_identity", Some(f.display().to_string()))
                }
                None => (Client::keygen(&self.location)?.0, "created", None),
            },
        };
        let c = self.client_for(state);
        let key = c.key()?;
        let agent = key.agent_id();
        // Registration is stateless on the service: ask again only when the
        // stored URLs are missing or for another service.
        let stored = c.state().service()?;
        let registration = match (&stored, c.base_url()) {
            (_, Err(e)) => Err(e.to_string()),
            (Some(s), Ok(base)) if s.base_url == base => Ok(base),
            (_, Ok(base)) => c.bootstrap().map(|_| base).map_err(|e| e.to_string()),
        };
        let seq = c.state().published()?.map_or(0, |p| p.seq);
        let mut o = json!({
            "status": status,
            "agent_id": agent.as_str(),
            "public_key": key.public_key().to_hex(),
            "seq": seq,
            "identity_path": c.state().path().display().to_string(),
            "head_url": Doc::Head.path(agent.as_str()),
            "capsule_url": Doc::Capsule.path(agent.as_str()),
            "history_url": Doc::History.path(agent.as_str()),
        });
        if let Some(f) = imported {
            o["imported_from"] = f.into();
        }
        match registration {
            Ok(base) => {
                o["registered"] = true.into();
                o["base_url"] = base.into();
                o["hint"] = if seq == 0 {
                    "Ready. Store your first capsule with self_write; after a restart call self_rehydrate."
                } else {
                    "Ready. Call self_rehydrate to load your capsule."
                }
                .into();
            }
            Err(why) => {
                o["registered"] = false.into();
                o["registration_error"] = why.into();
                o["hint"] = "The identity is saved locally. Set SELFCAP_URL to the service's URL (or check that it is reachable) and call self_bootstrap again.".into();
            }
        }
        Ok(Answer::ok(o))
    }

    fn rehydrate(&self) -> Result<Answer, Error> {
        let c = match self.client() {
            Ok(c) => c,
            Err(a) => return Ok(a),
        };
        let agent = c.agent_id()?;
        let desired = c.state().desired()?;
        let (mut o, published_cursor) = match c.rehydrate() {
            Ok(r) => {
                let mut o = json!({
                    "rehydrated": true,
                    "agent_id": agent.as_str(),
                    "source": match r.side { Side::Local => "local", Side::Server => "server" },
                    "seq": r.seq,
                    "cursor": r.cursor,
                    "server_reachable": !r.offline,
                    "capsule": to_value(&r.capsule),
                });
                let warnings: Vec<&String> = r
                    .warnings
                    .iter()
                    .filter(|w| !w.contains("unpublished changes"))
                    .collect();
                if !warnings.is_empty() {
                    o["warnings"] = json!(warnings);
                }
                (o, Some(r.cursor))
            }
            Err(e @ (Error::NotFound(_) | Error::Unavailable(_))) => {
                let reachable = matches!(e, Error::NotFound(_));
                let o = json!({
                    "rehydrated": false,
                    "agent_id": agent.as_str(),
                    "server_reachable": reachable,
                    "detail": if reachable {
                        "No capsule yet, here or on the service. Use self_write to store your first."
                    } else {
                        "The service is unreachable and nothing is stored locally yet."
                    },
                });
                (o, None)
            }
            Err(e) => return Err(e),
        };
        // Unpublished local work is the agent's newest state: it wins.
        if let Some(d) = desired.filter(|d| Some(jcs::cursor(d)) != published_cursor) {
            o["rehydrated"] = true.into();
            o["source"] = "local".into();
            o["capsule"] = to_value(&d);
            o["unpublished"] = unpublished(&c, &d)?;
            o.as_object_mut().map(|m| m.remove("detail"));
        }
        Ok(Answer::ok(o))
    }

    fn read(&self, agent: Option<AgentId>) -> Result<Answer, Error> {
        let (c, target, is_own) = match self.reader(agent) {
            Ok(x) => x,
            Err(a) => return Ok(a),
        };
        match c.get(Some(&target)) {
            Ok(f) => Ok(results::read(
                target.as_str(),
                &f.cursor,
                to_value(&f.capsule),
                Some(is_own),
            )),
            Err(Error::NotFound(m)) => Ok(results::error(
                "capsule_not_found",
                m,
                if is_own {
                    "No capsule published yet: use self_write (or self_rehydrate for unpublished local work)."
                } else {
                    "This agent has no capsule, or the agent_id is wrong."
                },
            )),
            Err(e) => Err(e),
        }
    }

    fn subscribe(&self, agent: Option<AgentId>, etag: Option<String>) -> Result<Answer, Error> {
        let (c, target, is_own) = match self.reader(agent) {
            Ok(x) => x,
            Err(a) => return Ok(a),
        };
        match c.fetch_head(&target, etag.as_deref())? {
            None => Ok(results::error(
                "agent_not_found",
                format!("no capsule published for agent {target}"),
                "Check the agent_id; an agent appears once it has published.",
            )),
            Some(HeadOutcome::Unchanged { etag }) => Ok(results::unchanged(target.as_str(), &etag)),
            Some(HeadOutcome::Changed { head }) => {
                let etag = cursor_hex(&head.cursor).to_string();
                if is_own {
                    // `status` and `self_upgrade` read the tier from here.
                    c.state().save_head_cache(&super::state::HeadCache {
                        etag: etag.clone(),
                        head: Some(head.clone()),
                    })?;
                }
                Ok(results::head(&head, &etag, Some(is_own)))
            }
        }
    }

    fn history(
        &self,
        agent: Option<AgentId>,
        since: Option<String>,
        limit: Option<u32>,
    ) -> Result<Answer, Error> {
        let (c, target, is_own) = match self.reader(agent) {
            Ok(x) => x,
            Err(a) => return Ok(a),
        };
        match c.history(Some(&target), since.as_deref(), limit) {
            Ok(page) => Ok(results::history(&page, Some(is_own))),
            Err(Error::NotFound(m)) => Ok(results::error(
                "no_history",
                m,
                "No history for this agent (nothing published, or a since_cursor that is not retained: omit it).",
            )),
            Err(e) => Err(e),
        }
    }

    fn verify(&self, agent: Option<AgentId>) -> Result<Answer, Error> {
        let (c, target, _) = match self.reader(agent) {
            Ok(x) => x,
            Err(a) => return Ok(a),
        };
        match c.verify(Some(&target), None) {
            Ok(report) => Ok(results::verify(&report, "selfcap")),
            Err(Error::NotFound(m)) => Ok(results::error(
                "no_history",
                m,
                "Nothing to verify: this agent has published nothing.",
            )),
            Err(e) => Err(e),
        }
    }

    fn write(&self, mut capsule: Json) -> Result<Answer, Error> {
        let c = match self.client() {
            Ok(c) => c,
            Err(a) => return Ok(a),
        };
        let agent = c.agent_id()?;
        patch::fill_defaults(&mut capsule, &agent);
        // Saved before anything is sent: a failure below loses nothing.
        c.state().save_desired(&capsule)?;
        Ok(match publish(&c, false)? {
            Published::Accepted(a) => Answer::ok(json!({
                "accepted": true,
                "agent_id": agent.as_str(),
                "seq": a["seq"],
                "cursor": a["cursor"],
                "prev_cursor": a["prev_cursor"],
                "changed": a["changed"],
                "writes": a["writes"],
            })),
            Published::Clean { seq, cursor } => Answer::ok(json!({
                "accepted": true,
                "agent_id": agent.as_str(),
                "seq": seq,
                "cursor": cursor,
                "changed": false,
                "sent": false,
                "detail": "Identical to your published capsule: nothing sent, no write spent.",
            })),
            Published::Failed(a) => a,
        })
    }

    fn checkpoint(&self, args: CheckpointArgs) -> Result<Answer, Error> {
        let c = match self.client() {
            Ok(c) => c,
            Err(a) => return Ok(a),
        };
        let agent = c.agent_id()?;
        // The newest base: adopts a newer service copy unless local edits
        // are unpublished (those are never overwritten). Offline is fine.
        match c.rehydrate() {
            Ok(_) | Err(Error::NotFound(_) | Error::Unavailable(_)) => {}
            Err(e) => return Err(e),
        }
        let published = c.state().published()?;
        let desired = c.state().desired()?;
        let pending_before = match (&desired, &published) {
            (Some(d), Some(p)) => jcs::cursor(d) != p.cursor,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let mut capsule = desired
            .or(published.map(|p| p.capsule))
            .unwrap_or_else(|| minimal(&agent));
        let applied = patch::checkpoint(&mut capsule, &args, &rfc3339(now_ms()));
        patch::fill_defaults(&mut capsule, &agent);
        if applied.changes_applied == 0 && !args.force && !pending_before {
            let mut o = applied_json(&applied);
            o["checkpointed"] = false.into();
            o["detail"] = "Nothing to save: no change, and nothing unpublished. Pass objective_updates, receipts or motto (or force: true).".into();
            return Ok(Answer::ok(o));
        }
        c.state().save_desired(&capsule)?;
        Ok(match publish(&c, args.force)? {
            Published::Accepted(a) => {
                let mut o = applied_json(&applied);
                o["checkpointed"] = true.into();
                o["seq"] = a["seq"].clone();
                o["cursor"] = a["cursor"].clone();
                o["writes"] = a["writes"].clone();
                if pending_before {
                    o["published_pending"] = true.into();
                }
                Answer::ok(o)
            }
            Published::Clean { seq, cursor } => {
                let mut o = applied_json(&applied);
                o["checkpointed"] = true.into();
                o["seq"] = seq.into();
                o["cursor"] = cursor.into();
                o["sent"] = false.into();
                Answer::ok(o)
            }
            Published::Failed(mut a) => {
                a.body["checkpointed"] = false.into();
                a.body["changes_applied"] = applied.changes_applied.into();
                Answer {
                    body: a.body,
                    is_error: true,
                }
            }
        })
    }

    fn upgrade(&self, action: UpgradeAction, plan: Option<String>) -> Result<Answer, Error> {
        let c = match self.client() {
            Ok(c) => c,
            Err(a) => return Ok(a),
        };
        let plan = plan.as_deref().and_then(|p| {
            Tier::ALL
                .into_iter()
                .find(|t| *t != Tier::Free && t.as_str() == p)
        });
        let can_pay = self.pay.is_some();
        match (action, plan) {
            (UpgradeAction::Status, _) => {
                // Refresh the tier from the head when the service answers.
                let writes = match c.head(None) {
                    Ok(HeadOutcome::Changed { head }) => Some(json!(head.writes)),
                    _ => None,
                };
                let s = c.status()?;
                let mut o = json!({
                    "agent_id": s.agent_id,
                    "tier": s.tier.unwrap_or_else(|| "free".into()),
                    "paid_until": s.paid_until,
                    "as_of": s.tier_as_of,
                    "can_pay": can_pay,
                });
                if let Some(w) = writes {
                    o["writes"] = w;
                }
                Ok(Answer::ok(o))
            }
            (UpgradeAction::Quote, Some(plan)) => {
                let q = c.upgrade_quote(plan)?;
                let mut o = q;
                o["hint"] = if can_pay {
                    "Call self_upgrade with action pay and this plan to pay and claim it."
                } else {
                    "Pay amount_atomic of token_contract to to_address on the quoted chain, then run `selfcap upgrade claim --invoice <invoice_id> --tx <hash>`; or start selfcap mcp with SELFCAP_EVM_KEY and SELFCAP_RPC_URL to pay with action pay."
                }
                .into();
                Ok(Answer::ok(o))
            }
            (UpgradeAction::Pay, Some(plan)) => {
                let Some(pay) = &self.pay else {
                    return Ok(results::error(
                        "no_evm_key",
                        "paying needs an EVM key and a chain: this server was started without SELFCAP_EVM_KEY and SELFCAP_RPC_URL",
                        "Use action quote and pay from a wallet, or restart selfcap mcp with both set.",
                    ));
                };
                let done = c.upgrade(
                    &UpgradeOptions {
                        plan,
                        evm_key: pay.evm_key.clone(),
                        rpc_url: pay.rpc_url.clone(),
                        timeout: pay.timeout,
                        poll: Duration::from_secs(1),
                        provider_timeout: crate::client::upgrade::PROVIDER_TIMEOUT,
                        new: false,
                        stop_after: None,
                    },
                    &|_| {},
                )?;
                let mut o = done.claimed;
                o["credited"] = true.into();
                o["fresh"] = done.fresh.into();
                if !done.fresh {
                    o["detail"] = "Credited on an earlier call; nothing was paid now. This server buys at most once: renewing or another plan is the operator's `selfcap upgrade --new`.".into();
                }
                Ok(Answer::ok(o))
            }
            (_, None) => Ok(results::error(
                "invalid_arguments",
                "plan: expected pro or plus",
                "Pass plan: pro or plus.",
            )),
        }
    }
}

/// Publishes capsule.json (if it differs from the published copy, or when
/// forced) and keeps `pending.json` in step with the outcome.
fn publish(c: &Client, force: bool) -> Result<Published, Error> {
    let desired = c.state().desired()?;
    let cursor = desired.as_ref().map(jcs::cursor).unwrap_or_default();
    let outcome = c.publish(&PutOptions::default(), force);
    let pending =
        |error: &str, codes: Vec<String>, detail: Option<String>, next: Option<String>| {
            c.state().save_pending(&Pending {
                cursor: cursor.clone(),
                at: rfc3339(now_ms()),
                error: error.into(),
                reason_codes: codes,
                detail,
                next_write_at: next,
            })
        };
    match outcome {
        Ok(PublishOutcome::Published(r)) => {
            c.state().clear_pending()?;
            Ok(Published::Accepted(
                serde_json::to_value(&r.accepted).unwrap_or_default(),
            ))
        }
        Ok(PublishOutcome::Clean { seq, cursor }) => {
            c.state().clear_pending()?;
            Ok(Published::Clean { seq, cursor })
        }
        Err(Error::Rejected(r)) => {
            pending(
                "write_rejected",
                r.reason_codes.clone(),
                r.detail.clone(),
                r.next_write_at.clone(),
            )?;
            let body = serde_json::to_value(&*r).unwrap_or_default();
            Ok(Published::Failed(results::rejected(r.status, &body, true)))
        }
        Err(e @ (Error::Unavailable(_) | Error::Protocol(_))) => {
            pending("service_unavailable", Vec::new(), Some(e.to_string()), None)?;
            let mut a = results::error(
                "service_unavailable",
                e.to_string(),
                "Your capsule is saved locally. Call self_checkpoint (no arguments) later to publish it.",
            );
            a.body["saved_locally"] = true.into();
            Ok(Published::Failed(a))
        }
        Err(e) => Err(e),
    }
}

/// What `self_rehydrate` says about unpublished local work.
fn unpublished(c: &Client, desired: &Json) -> Result<Value, Error> {
    let mut o = json!({
        "cursor": jcs::cursor(desired),
        "hint": "This is newer than what the service holds: self_checkpoint (no arguments) publishes it.",
    });
    if let Some(p) = c.state().pending()? {
        if p.cursor == jcs::cursor(desired) {
            o["last_attempt"] = serde_json::to_value(&p).unwrap_or_default();
        }
    }
    Ok(o)
}

fn applied_json(a: &Applied) -> Value {
    serde_json::to_value(a).unwrap_or_else(|_| json!({}))
}

fn to_value(j: &Json) -> Value {
    serde_json::to_value(j).unwrap_or(Value::Null)
}

fn no_identity(detail: &str) -> Answer {
    results::error(
        "no_identity",
        detail,
        "Call self_bootstrap first (it creates or imports the identity).",
    )
}

/// A client error as a tool error.
fn failure(e: Error) -> Answer {
    match e {
        Error::Rejected(r) => {
            let body = serde_json::to_value(&*r).unwrap_or_default();
            results::rejected(r.status, &body, false)
        }
        Error::NotFound(m) => results::error(
            "not_found",
            m,
            "Check the agent_id (a private capsule looks missing unless its owner granted this identity that read).",
        ),
        Error::Unavailable(m) => results::error(
            "service_unavailable",
            m,
            "The service could not be reached; try again later (self_rehydrate works offline).",
        ),
        Error::Protocol(m) => results::error(
            "protocol_error",
            m,
            "The service answered something unexpected; check SELFCAP_URL points at a Self Capsule service.",
        ),
        Error::Local(m) => results::error(
            "local_error",
            m,
            "A problem on this machine (state directory, key file or configuration).",
        ),
        Error::Unverified(m) => results::error("unverified", m, "The history does not verify."),
        Error::ReadSignature(m) => results::error(
            "read_signature_refused",
            m,
            "The service refused this identity's signed read; check the machine's clock and the key file.",
        ),
        Error::ClaimLater(m) => results::error(
            "payment_provider_unavailable",
            m,
            "Nothing was credited and the payment is safe; claim it later with the command given.",
        ),
    }
}
