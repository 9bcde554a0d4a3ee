//! Tool arguments as typed values. Both doors parse a `tools/call`'s
//! `arguments` here, so a bad argument gets the same answer everywhere: a
//! tool error naming the argument (the model can read it and fix the call),
//! never a protocol error.

use super::tools::{Door, Tool};
use crate::core::crypto::AgentId;
use crate::core::jcs;
use crate::core::json::Json;
use crate::core::model::ObjectiveStatus;
use serde_json::{Map, Value};
use std::fmt;

/// An argument the tool cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    /// The argument's name (a path such as `receipts[1].content_hash`).
    pub field: String,
    /// What is wrong with it, in one line.
    pub detail: String,
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.detail)
    }
}

impl std::error::Error for ArgError {}

fn bad(field: impl Into<String>, detail: impl Into<String>) -> ArgError {
    ArgError {
        field: field.into(),
        detail: detail.into(),
    }
}

/// A call's arguments, parsed for its tool.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// `self_bootstrap`.
    Bootstrap,
    /// `self_rehydrate`.
    Rehydrate,
    /// `self_read`.
    Read {
        /// `None`: the caller's own (local door only).
        agent: Option<AgentId>,
    },
    /// `self_write`.
    Write {
        /// The capsule as given (defaults are filled in by the caller, who knows the agent).
        capsule: Json,
    },
    /// `self_subscribe`.
    Subscribe {
        /// `None`: the caller's own (local door only).
        agent: Option<AgentId>,
        /// The etag of an earlier answer (without quotes).
        etag: Option<String>,
    },
    /// `self_history`.
    History {
        /// `None`: the caller's own (local door only).
        agent: Option<AgentId>,
        /// Only versions after this cursor (normalised to `sha256:<hex>`).
        since: Option<String>,
        /// At most this many versions (1..=100).
        limit: Option<u32>,
    },
    /// `self_checkpoint`.
    Checkpoint(CheckpointArgs),
    /// `self_verify`.
    Verify {
        /// `None`: the caller's own (local door only).
        agent: Option<AgentId>,
    },
    /// `self_upgrade`.
    Upgrade {
        /// What to do.
        action: UpgradeAction,
        /// `pro` or `plus` (needed for quote and pay).
        plan: Option<String>,
        /// How `pay` pays.
        method: PayMethod,
    },
    /// `self_keys`.
    Keys {
        /// `None`: the caller's own.
        agent: Option<AgentId>,
    },
    /// `self_rotate`.
    Rotate,
    /// `self_feed`.
    Feed {
        /// `None`: the caller's own.
        agent: Option<AgentId>,
        /// Which document.
        doc: crate::core::urls::FeedDoc,
        /// With latest: only what is new since this cursor.
        since: Option<String>,
    },
    /// `self_submit`.
    Submit {
        /// The signed envelope as given.
        envelope: Json,
    },
    /// `self_meta`.
    Meta {
        /// `None`: the caller's own.
        agent: Option<AgentId>,
    },
    /// `admin_agents`.
    AdminAgents {
        /// Where the page starts.
        cursor: Option<String>,
        /// Agents to read (1..=1000).
        limit: Option<u32>,
        /// Only agents on this tier now.
        tier: Option<crate::core::limits::Tier>,
        /// Only agents refused in the last 24 hours.
        refused_24h: bool,
    },
    /// `admin_agent`.
    AdminAgent {
        /// The agent.
        agent: AgentId,
    },
    /// `admin_stats`.
    AdminStats,
}

/// `self_upgrade`'s `action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeAction {
    /// The current tier (no network needed beyond a head read).
    Status,
    /// A quote for a plan (creates an invoice; pays nothing).
    Quote,
    /// Quote, pay and claim (only with an EVM key configured).
    Pay,
}

/// `self_upgrade`'s `method`: how `pay` pays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PayMethod {
    /// An ERC-20 transfer sent from the EVM key, then a claim.
    #[default]
    Transfer,
    /// x402: an EIP-3009 authorization the service settles (no gas).
    X402,
}

/// `self_checkpoint`'s arguments.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CheckpointArgs {
    /// Objective status/checkpoint changes, by id.
    pub objective_updates: Vec<ObjectiveUpdate>,
    /// Receipts to add.
    pub receipts: Vec<NewReceipt>,
    /// A new `self_motto`.
    pub motto: Option<String>,
    /// Notes to set (upsert by key).
    pub notes: Vec<NoteUpsert>,
    /// Publish even when nothing changed.
    pub force: bool,
}

/// One `notes[]` entry: set the note `key` to `value`.
#[derive(Debug, Clone, PartialEq)]
pub struct NoteUpsert {
    /// The note's key (unique in the capsule).
    pub key: String,
    /// Its new value.
    pub value: String,
    /// Its tags (replacing the old ones when given).
    pub tags: Option<Vec<String>>,
}

/// One `objective_updates[]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectiveUpdate {
    /// The objective's id.
    pub id: String,
    /// Its new status.
    pub status: Option<ObjectiveStatus>,
    /// Its new checkpoint text.
    pub checkpoint: Option<String>,
}

/// One `receipts[]` entry (what the capsule stores of it).
#[derive(Debug, Clone, PartialEq)]
pub struct NewReceipt {
    /// `name`.
    pub name: String,
    /// `content_hash` (`sha256:` + 64 hex).
    pub content_hash: String,
    /// `evidence_url`, when given.
    pub evidence_url: Option<String>,
    /// `rationale`: why, when given.
    pub rationale: Option<String>,
    /// `tags`, when given.
    pub tags: Option<Vec<String>>,
}

impl Call {
    /// Parses `args` (a `tools/call`'s `arguments`; absent counts as `{}`)
    /// for `tool` at `door`. Unknown arguments are refused.
    pub fn parse(
        tool: Tool,
        door: Door,
        args: Option<&Map<String, Value>>,
    ) -> Result<Call, ArgError> {
        let empty = Map::new();
        let a = Args {
            map: args.unwrap_or(&empty),
        };
        let agent_required = door == Door::Remote;
        let call = match tool {
            Tool::Bootstrap => {
                a.only(&[])?;
                Call::Bootstrap
            }
            Tool::Rehydrate => {
                a.only(&[])?;
                Call::Rehydrate
            }
            Tool::Read => {
                a.only(&["agent_id"])?;
                Call::Read {
                    agent: a.agent(agent_required)?,
                }
            }
            Tool::Verify => {
                a.only(&["agent_id"])?;
                Call::Verify {
                    agent: a.agent(agent_required)?,
                }
            }
            Tool::Keys => {
                a.only(&["agent_id"])?;
                Call::Keys {
                    agent: a.agent(agent_required)?,
                }
            }
            Tool::Rotate => {
                a.only(&[])?;
                Call::Rotate
            }
            Tool::Meta => {
                a.only(&["agent_id"])?;
                Call::Meta {
                    agent: a.agent(agent_required)?,
                }
            }
            Tool::AdminAgents => {
                use crate::core::limits::Tier;
                a.only(&["cursor", "limit", "tier", "refused_24h"])?;
                let limit = match a.map.get("limit") {
                    None | Some(Value::Null) => None,
                    Some(v) => match v.as_u64() {
                        Some(n @ 1..=1000) => Some(n as u32),
                        _ => return Err(bad("limit", "expected an integer from 1 to 1000")),
                    },
                };
                let tier = match a.string("tier", 8)?.as_deref() {
                    None => None,
                    Some("free") => Some(Tier::Free),
                    Some("plus") => Some(Tier::Plus),
                    Some("pro") => Some(Tier::Pro),
                    Some(_) => return Err(bad("tier", "expected free, plus or pro")),
                };
                let refused_24h = match a.map.get("refused_24h") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => return Err(bad("refused_24h", "expected true or false")),
                };
                Call::AdminAgents {
                    cursor: a.string("cursor", 1024)?.filter(|c| !c.is_empty()),
                    limit,
                    tier,
                    refused_24h,
                }
            }
            Tool::AdminAgent => {
                a.only(&["agent_id"])?;
                match a.agent(true)? {
                    Some(agent) => Call::AdminAgent { agent },
                    None => return Err(bad("agent_id", "required: 64 lowercase hex characters")),
                }
            }
            Tool::AdminStats => {
                a.only(&[])?;
                Call::AdminStats
            }
            Tool::Feed => {
                use crate::core::urls::FeedDoc;
                a.only(&["agent_id", "doc", "since"])?;
                let doc = match a.string("doc", 16)?.as_deref() {
                    None | Some("head") => FeedDoc::Head,
                    Some("latest") => FeedDoc::Latest,
                    Some("digest") => FeedDoc::Digest,
                    Some(_) => return Err(bad("doc", "expected head, latest or digest")),
                };
                let since = match a.string("since", 80)? {
                    None => None,
                    Some(c) if doc == FeedDoc::Latest => {
                        Some(crate::core::jcs::normalize_cursor(&c).ok_or_else(|| {
                            bad("since", "expected a watch_cursor (sha256:<hex>)")
                        })?)
                    }
                    Some(_) => return Err(bad("since", "only with doc latest")),
                };
                Call::Feed {
                    agent: a.agent(agent_required)?,
                    doc,
                    since,
                }
            }
            Tool::Subscribe => {
                a.only(&["agent_id", "etag"])?;
                Call::Subscribe {
                    agent: a.agent(agent_required)?,
                    etag: a
                        .string("etag", 80)?
                        .map(|e| e.trim_matches('"').to_string()),
                }
            }
            Tool::History => {
                a.only(&["agent_id", "since_cursor", "limit"])?;
                let since = match a.string("since_cursor", 80)? {
                    Some(c) => Some(jcs::normalize_cursor(&c).ok_or_else(|| {
                        bad("since_cursor", "expected sha256:<64 lowercase hex>")
                    })?),
                    None => None,
                };
                let limit = match a.map.get("limit") {
                    None | Some(Value::Null) => None,
                    Some(v) => match v.as_u64() {
                        Some(n @ 1..=100) => Some(n as u32),
                        _ => return Err(bad("limit", "expected an integer from 1 to 100")),
                    },
                };
                Call::History {
                    agent: a.agent(agent_required)?,
                    since,
                    limit,
                }
            }
            Tool::Write => {
                a.only(&["capsule"])?;
                Call::Write {
                    capsule: a.object("capsule")?,
                }
            }
            Tool::Submit => {
                a.only(&["envelope"])?;
                Call::Submit {
                    envelope: a.object("envelope")?,
                }
            }
            Tool::Upgrade => {
                a.only(&["action", "plan", "method"])?;
                let action = match a.string("action", 16)?.as_deref() {
                    None | Some("status") => UpgradeAction::Status,
                    Some("quote") => UpgradeAction::Quote,
                    Some("pay") => UpgradeAction::Pay,
                    Some(_) => return Err(bad("action", "expected status, quote or pay")),
                };
                let plan = a.string("plan", 16)?;
                if let Some(p) = &plan {
                    if p != "pro" && p != "plus" {
                        return Err(bad("plan", "expected pro or plus"));
                    }
                }
                if action != UpgradeAction::Status && plan.is_none() {
                    return Err(bad("plan", "needed for quote and pay: pro or plus"));
                }
                let method = match a.string("method", 16)?.as_deref() {
                    None | Some("transfer") => PayMethod::Transfer,
                    Some("x402") => PayMethod::X402,
                    Some(_) => return Err(bad("method", "expected transfer or x402")),
                };
                Call::Upgrade {
                    action,
                    plan,
                    method,
                }
            }
            Tool::Checkpoint => {
                a.only(&["objective_updates", "receipts", "notes", "motto", "force"])?;
                Call::Checkpoint(checkpoint(&a)?)
            }
        };
        Ok(call)
    }
}

fn checkpoint(a: &Args<'_>) -> Result<CheckpointArgs, ArgError> {
    let mut out = CheckpointArgs {
        motto: a.string("motto", usize::MAX)?,
        force: match a.map.get("force") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(bad("force", "expected true or false")),
        },
        ..CheckpointArgs::default()
    };
    for (i, u) in a.array("objective_updates")?.iter().enumerate() {
        let field = |f: &str| format!("objective_updates[{i}].{f}");
        let o = Args::of(u)
            .ok_or_else(|| bad(format!("objective_updates[{i}]"), "expected an object"))?;
        o.only_at(
            &format!("objective_updates[{i}]"),
            &["id", "status", "checkpoint"],
        )?;
        let id = o
            .string("id", usize::MAX)
            .map_err(|e| bad(field("id"), e.detail))?
            .ok_or_else(|| bad(field("id"), "required"))?;
        let status = match o
            .string("status", 32)
            .map_err(|e| bad(field("status"), e.detail))?
        {
            None => None,
            Some(s) => Some(ObjectiveStatus::parse(&s).ok_or_else(|| {
                bad(
                    field("status"),
                    "expected open, in_progress, blocked, done or cancelled",
                )
            })?),
        };
        let checkpoint = o
            .string("checkpoint", usize::MAX)
            .map_err(|e| bad(field("checkpoint"), e.detail))?;
        out.objective_updates.push(ObjectiveUpdate {
            id,
            status,
            checkpoint,
        });
    }
    for (i, r) in a.array("receipts")?.iter().enumerate() {
        let at = format!("receipts[{i}]");
        let field = |f: &str| format!("{at}.{f}");
        let o = Args::of(r).ok_or_else(|| bad(&at, "expected an object"))?;
        o.only_at(
            &at,
            &["name", "content_hash", "evidence_url", "rationale", "tags"],
        )?;
        let name = o
            .string("name", usize::MAX)
            .map_err(|e| bad(field("name"), e.detail))?
            .ok_or_else(|| bad(field("name"), "required"))?;
        let content_hash = o
            .string("content_hash", usize::MAX)
            .map_err(|e| bad(field("content_hash"), e.detail))?
            .ok_or_else(|| bad(field("content_hash"), "required"))?;
        let evidence_url = o
            .string("evidence_url", usize::MAX)
            .map_err(|e| bad(field("evidence_url"), e.detail))?;
        let rationale = o
            .string("rationale", usize::MAX)
            .map_err(|e| bad(field("rationale"), e.detail))?;
        let tags = o.tags().map_err(|e| bad(field("tags"), e.detail))?;
        out.receipts.push(NewReceipt {
            name,
            content_hash,
            evidence_url,
            rationale,
            tags,
        });
    }
    for (i, n) in a.array("notes")?.iter().enumerate() {
        let at = format!("notes[{i}]");
        let field = |f: &str| format!("{at}.{f}");
        let o = Args::of(n).ok_or_else(|| bad(&at, "expected an object"))?;
        o.only_at(&at, &["key", "value", "tags"])?;
        let key = o
            .string("key", usize::MAX)
            .map_err(|e| bad(field("key"), e.detail))?
            .ok_or_else(|| bad(field("key"), "required"))?;
        let value = o
            .string("value", usize::MAX)
            .map_err(|e| bad(field("value"), e.detail))?
            .ok_or_else(|| bad(field("value"), "required"))?;
        let tags = o.tags().map_err(|e| bad(field("tags"), e.detail))?;
        out.notes.push(NoteUpsert { key, value, tags });
    }
    Ok(out)
}

/// A view of an arguments object.
struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    fn of(v: &'a Value) -> Option<Args<'a>> {
        v.as_object().map(|map| Args { map })
    }

    /// Refuses any argument not in `known`.
    fn only(&self, known: &[&str]) -> Result<(), ArgError> {
        self.only_at("", known)
    }

    fn only_at(&self, at: &str, known: &[&str]) -> Result<(), ArgError> {
        match self.map.keys().find(|k| !known.contains(&k.as_str())) {
            None => Ok(()),
            Some(k) => Err(bad(
                if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                },
                if known.is_empty() {
                    "this tool takes no arguments".to_string()
                } else {
                    format!("unknown argument (expected {})", known.join(", "))
                },
            )),
        }
    }

    /// An optional string of at most `max` characters (null counts as absent:
    /// some clients send every optional argument).
    fn string(&self, key: &str, max: usize) -> Result<Option<String>, ArgError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.chars().count() <= max => Ok(Some(s.clone())),
            Some(Value::String(_)) => Err(bad(key, format!("longer than {max} characters"))),
            Some(_) => Err(bad(key, "expected a string")),
        }
    }

    /// An optional list of strings under `tags` (bounds are the schema's,
    /// checked with the whole capsule).
    fn tags(&self) -> Result<Option<Vec<String>>, ArgError> {
        match self.map.get("tags") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|t| t.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| bad("tags", "expected an array of strings")),
            Some(_) => Err(bad("tags", "expected an array of strings")),
        }
    }

    fn array(&self, key: &str) -> Result<&'a [Value], ArgError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(_) => Err(bad(key, "expected an array")),
        }
    }

    fn object(&self, key: &str) -> Result<Json, ArgError> {
        match self.map.get(key) {
            Some(v @ Value::Object(_)) => {
                serde_json::from_value(v.clone()).map_err(|e| bad(key, e.to_string()))
            }
            None | Some(Value::Null) => Err(bad(key, "required: a JSON object")),
            Some(_) => Err(bad(key, "expected a JSON object")),
        }
    }

    fn agent(&self, required: bool) -> Result<Option<AgentId>, ArgError> {
        match self.string("agent_id", 64)? {
            Some(s) => AgentId::parse(&s)
                .map(Some)
                .ok_or_else(|| bad("agent_id", "expected 64 lowercase hex characters")),
            None if required => Err(bad("agent_id", "required: 64 lowercase hex characters")),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(tool: Tool, door: Door, v: Value) -> Result<Call, ArgError> {
        Call::parse(tool, door, v.as_object())
    }

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    #[test]
    fn own_agent_is_optional_locally_and_required_remotely() {
        assert_eq!(
            parse(Tool::Read, Door::Local, json!({})).unwrap(),
            Call::Read { agent: None }
        );
        let e = parse(Tool::Read, Door::Remote, json!({})).unwrap_err();
        assert_eq!(e.field, "agent_id");
        let e = parse(Tool::Read, Door::Local, json!({ "agent_id": "ABC" })).unwrap_err();
        assert!(e.detail.contains("64 lowercase hex"));
        assert!(parse(Tool::Read, Door::Remote, json!({ "agent_id": A })).is_ok());
    }

    #[test]
    fn unknown_arguments_are_named() {
        let e = parse(Tool::Read, Door::Local, json!({ "agentid": A })).unwrap_err();
        assert_eq!(e.field, "agentid");
        let e = parse(Tool::Bootstrap, Door::Local, json!({ "x": 1 })).unwrap_err();
        assert!(e.detail.contains("no arguments"));
    }

    #[test]
    fn history_normalises_the_cursor_and_bounds_the_limit() {
        let hex = "b".repeat(64);
        let c = parse(
            Tool::History,
            Door::Local,
            json!({ "since_cursor": hex, "limit": 3 }),
        )
        .unwrap();
        assert_eq!(
            c,
            Call::History {
                agent: None,
                since: Some(format!("sha256:{}", "b".repeat(64))),
                limit: Some(3)
            }
        );
        for bad_limit in [json!(0), json!(101), json!(2.5), json!("3")] {
            let e = parse(Tool::History, Door::Local, json!({ "limit": bad_limit })).unwrap_err();
            assert_eq!(e.field, "limit");
        }
        let e = parse(
            Tool::History,
            Door::Local,
            json!({ "since_cursor": "sha256:xyz" }),
        )
        .unwrap_err();
        assert_eq!(e.field, "since_cursor");
    }

    #[test]
    fn checkpoint_reads_updates_receipts_and_notes() {
        let c = parse(
            Tool::Checkpoint,
            Door::Local,
            json!({
                "objective_updates": [{ "id": "o1", "status": "done", "checkpoint": "shipped" }],
                "receipts": [{ "name": "r", "content_hash": format!("sha256:{}", "c".repeat(64)),
                               "rationale": "why", "tags": ["t"] }],
                "motto": "m",
                "force": null
            }),
        )
        .unwrap();
        let Call::Checkpoint(a) = c else { panic!() };
        assert_eq!(a.objective_updates[0].status, Some(ObjectiveStatus::Done));
        assert_eq!(a.receipts[0].name, "r");
        assert_eq!(a.motto.as_deref(), Some("m"));
        assert!(!a.force);
        assert_eq!(a.receipts[0].rationale.as_deref(), Some("why"));
        assert_eq!(a.receipts[0].tags, Some(vec!["t".to_string()]));
        let e = parse(
            Tool::Checkpoint,
            Door::Local,
            json!({ "objective_updates": [{ "id": "o1", "status": "finished" }] }),
        )
        .unwrap_err();
        assert_eq!(e.field, "objective_updates[0].status");
        let e = parse(
            Tool::Checkpoint,
            Door::Local,
            json!({ "receipts": [{ "name": "r" }] }),
        )
        .unwrap_err();
        assert_eq!(e.field, "receipts[0].content_hash");
    }

    #[test]
    fn upgrade_needs_a_plan_except_for_status() {
        assert_eq!(
            parse(Tool::Upgrade, Door::Local, json!({})).unwrap(),
            Call::Upgrade {
                action: UpgradeAction::Status,
                plan: None,
                method: PayMethod::Transfer,
            }
        );
        assert_eq!(
            parse(
                Tool::Upgrade,
                Door::Local,
                json!({ "action": "pay", "plan": "pro", "method": "x402" })
            )
            .unwrap(),
            Call::Upgrade {
                action: UpgradeAction::Pay,
                plan: Some("pro".into()),
                method: PayMethod::X402,
            }
        );
        assert!(parse(
            Tool::Upgrade,
            Door::Local,
            json!({ "action": "pay", "plan": "pro", "method": "card" })
        )
        .is_err());
        let e = parse(Tool::Upgrade, Door::Local, json!({ "action": "quote" })).unwrap_err();
        assert_eq!(e.field, "plan");
        assert!(parse(
            Tool::Upgrade,
            Door::Local,
            json!({ "action": "pay", "plan": "gold" })
        )
        .is_err());
    }

    #[test]
    fn write_and_submit_need_objects() {
        assert!(parse(Tool::Write, Door::Local, json!({ "capsule": [] })).is_err());
        assert!(parse(Tool::Write, Door::Local, json!({})).is_err());
        assert!(parse(
            Tool::Submit,
            Door::Remote,
            json!({ "envelope": { "a": 1 } })
        )
        .is_ok());
    }
}
