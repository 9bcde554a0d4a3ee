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
//!
//! One module per group of tools; this one holds what they share:
//!
//! | module | what |
//! |---|---|
//! | this one | [`ToolHost`], dispatching a call to its tool ([`ToolHost::call`]), the identity and reader lookups every tool starts with, and client errors as tool errors |
//! | `session` | `self_bootstrap` and `self_rehydrate` |
//! | `reads` | `self_read`, `self_subscribe`, `self_history`, `self_verify` |
//! | `writes` | `self_write`, `self_checkpoint`, and publishing with `pending.json` kept in step |
//! | `upgrade` | `self_upgrade` |
//! | `keys` | `self_keys`, `self_rotate` |
//! | `operator` | `admin_agents`, `admin_agent`, `admin_stats`: the operator API, only with the operator's token |

mod keys;
mod operator;
mod reads;
mod session;
mod upgrade;
mod writes;

use super::admin::AdminToken;
use super::http::UreqTransport;
use super::state::{Location, StateDir, KEY_FILE};
use super::{BackoffPolicy, Client, Error};
use crate::core::crypto::AgentId;
use crate::core::json::Json;
use crate::core::mcp::args::Call;
use crate::core::mcp::results::{self, Answer};
use crate::core::mcp::{Door, Tool};
use serde_json::{Map, Value};
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
    /// Where the identity is (or goes: `self_bootstrap` creates it there).
    pub location: Location,
    /// Overrides the URL `self_bootstrap` stored (`SELFCAP_URL`, else the
    /// public server's `DIFFDELTA_BASE_URL`).
    pub base_url: Option<String>,
    /// The retry policy of every request a tool makes.
    pub policy: BackoffPolicy,
    /// The per-request timeout (each tool call may make several requests).
    pub timeout: Duration,
    /// The public server's identity file, imported by `self_bootstrap` when
    /// no identity exists yet (`None`: never import).
    pub import_from: Option<PathBuf>,
    /// How `self_upgrade` pays (`None`: it quotes, and says how to pay
    /// from a wallet instead).
    pub pay: Option<PayConfig>,
    /// The deployment's operator token (`SELFCAP_ADMIN_TOKEN`): the
    /// operator tools are listed and run only with it.
    pub admin_token: Option<AdminToken>,
}

impl ToolHost {
    /// Whether this server offers `tool`: the local door's tools, the
    /// operator's only when it holds the operator's token.
    pub fn offers(&self, tool: Tool) -> bool {
        tool.offered(Door::Local) && (!tool.operator() || self.admin_token.is_some())
    }

    /// The tools this server lists, in order.
    pub fn tools(&self) -> impl Iterator<Item = Tool> + '_ {
        Tool::ALL.into_iter().filter(|t| self.offers(*t))
    }

    /// The tool `name` stands for here (`None`: not offered).
    pub fn tool(&self, name: &str) -> Option<Tool> {
        Tool::at(Door::Local, name).filter(|t| self.offers(*t))
    }

    /// Runs one `tools/call`: the tool's answer, or a tool error (unknown
    /// tool, bad arguments, or what went wrong). Never panics on input.
    pub fn call(&self, name: &str, args: Option<&Map<String, Value>>) -> Answer {
        let Some(tool) = self.tool(name) else {
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
            Call::Upgrade {
                action,
                plan,
                method,
            } => self.upgrade(action, plan, method),
            Call::Keys { agent } => self.keys(agent),
            Call::Rotate => self.rotate(),
            Call::Feed { agent, doc, since } => self.feed(agent, doc, since),
            Call::Meta { agent } => self.meta(agent),
            Call::AdminAgents {
                cursor,
                limit,
                tier,
                refused_24h,
            } => self.admin_agents(cursor, limit, tier, refused_24h),
            Call::AdminAgent { agent } => self.admin_agent(&agent),
            Call::AdminStats => self.admin_stats(),
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
        Error::AdminAuth(m) => results::error(
            "admin_auth_refused",
            m,
            "The service refused this server's SELFCAP_ADMIN_TOKEN; the operator must fix it (do not retry).",
        ),
        Error::ClaimLater(m) => results::error(
            "payment_provider_unavailable",
            m,
            "Nothing was credited and the payment is safe; claim it later with the command given.",
        ),
        Error::KeyLogConflict(m) => results::error(
            "key_log_conflict",
            m,
            "The service served a key log that contradicts the one this client pinned; stop and tell the operator.",
        ),
    }
}
