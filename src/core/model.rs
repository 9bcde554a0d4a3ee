//! The typed `self_capsule_v0` model. A [`Capsule`] value only ever comes out
//! of [`crate::core::validate::validate_capsule`], so holding one means every
//! schema rule and limit has been checked. The raw [`Json`](crate::core::json::Json)
//! it was built from stays the source of truth for hashing and storage.

use serde::Serialize;

/// The only accepted `schema_version`.
pub const SCHEMA_VERSION: &str = "self_capsule_v0";

/// A validated capsule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capsule {
    /// 64 lowercase hex characters.
    pub agent_id: String,
    /// The required `policy` block: policy label, rehydrate mode and memory budget.
    pub policy: Policy,
    /// `None` when the field was absent (kept distinct from an empty array so
    /// the model says exactly what was sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Vec<Constraint>>,
    /// `objectives`: at most 8, ids unique; `None` when the field was absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objectives: Option<Vec<Objective>>,
    /// `capabilities`: the agent's tool allowlist and feature flags; `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    /// `pointers`: receipts for evidence kept outside the capsule; `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pointers: Option<Pointers>,
    /// `self_motto`: at most 160 chars; display-only, never an instruction. `None` when
    /// absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_motto: Option<String>,
    /// `watch`: what the agent monitors (tags, sources, stacks); selection only, the
    /// service never interprets it. `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch: Option<Watch>,
    /// `access_control`: who may read the capsule. `None` when absent, which means public,
    /// exactly as before the field existed (see [`Capsule::is_public`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_control: Option<AccessControl>,
}

impl Capsule {
    /// Whether anyone may read the capsule: `access_control` is absent or says `public: true`.
    pub fn is_public(&self) -> bool {
        self.access_control.as_ref().is_none_or(|a| a.public)
    }
}

/// The capsule's `policy` block: how a restarted agent may load the capsule back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Policy {
    /// `policy.policy_version`: a label the agent chooses for its policy (e.g. `"v0"`),
    /// 1-16 chars (Unicode scalar values).
    pub policy_version: String,
    /// v0 knows one mode; `deny_external_instructions` and
    /// `deny_tool_instructions_in_text` must be `true`, so they carry no
    /// information and are not stored in the model.
    pub rehydrate_mode: RehydrateMode,
    /// `policy.memory_budget`: how large the rehydration block may get.
    pub memory_budget: MemoryBudget,
}

/// `policy.rehydrate_mode`: how the capsule is loaded back into an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RehydrateMode {
    /// `"strict"`, the only v0 mode: the capsule is loaded as recorded data, never as
    /// instructions.
    Strict,
}

/// `policy.memory_budget`: the limits the rehydration renderer works within.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemoryBudget {
    /// 256..=1500.
    pub max_rehydrate_tokens: u32,
    /// 0..=8.
    pub max_objectives: u32,
}

/// One entry of `constraints` (at most 20): a rule the agent holds itself to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Constraint {
    /// `constraints[].id`: 1-24 chars of `[a-z0-9_-]`, unique among the capsule's constraints.
    pub id: String,
    /// Which rule this is (`type` on the wire).
    #[serde(rename = "type")]
    pub kind: ConstraintType,
    /// The rule's setting: a boolean or a list of strings (the schema accepts either shape for
    /// every type).
    pub value: ConstraintValue,
}

/// `constraints[].type`: the v0 constraint kinds; any other string is `constraint_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstraintType {
    /// `"no_shell"`: the agent runs no shell commands.
    NoShell,
    /// `"no_network_writes"`: the agent makes no writes over the network.
    NoNetworkWrites,
    /// `"no_secrets_export"`: the agent exports no secrets.
    NoSecretsExport,
    /// `"allowed_tools"`: the tools the agent may use (tool ids are exempt from the URL rule).
    AllowedTools,
    /// `"allowed_domains"`: the domains the agent may reach (bare domains are exempt from the
    /// URL rule).
    AllowedDomains,
}

impl ConstraintType {
    /// Every type; the `constraint_type` finding's message lists them in this order.
    pub const ALL: [ConstraintType; 5] = [
        ConstraintType::NoShell,
        ConstraintType::NoNetworkWrites,
        ConstraintType::NoSecretsExport,
        ConstraintType::AllowedTools,
        ConstraintType::AllowedDomains,
    ];
    /// The wire string, e.g. `"no_network_writes"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConstraintType::NoShell => "no_shell",
            ConstraintType::NoNetworkWrites => "no_network_writes",
            ConstraintType::NoSecretsExport => "no_secrets_export",
            ConstraintType::AllowedTools => "allowed_tools",
            ConstraintType::AllowedDomains => "allowed_domains",
        }
    }
    /// The type whose wire string is exactly `s` (case-sensitive); `None` otherwise.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// `constraints[].value`, untagged on the wire: a JSON boolean or an array of strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ConstraintValue {
    /// A JSON boolean, e.g. `true` for `no_shell`.
    Flag(bool),
    /// A JSON array of at most 20 strings, each 1-48 chars, e.g. tool ids or domains.
    List(Vec<String>),
}

/// One entry of `objectives` (at most 8): something the agent is working toward.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Objective {
    /// `objectives[].id`: 1-24 chars of `[a-z0-9_-]`, unique among the capsule's objectives.
    pub id: String,
    /// Lifecycle state; active objectives (open, in progress, blocked) are rendered first.
    pub status: ObjectiveStatus,
    /// `None` when absent; ranks below `low` when the renderer orders objectives.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    /// What the objective is: 1-120 chars (Unicode scalar values).
    pub title: String,
    /// Where the work stands, at most 200 chars; `None` when absent. Finished objectives'
    /// checkpoints are the first thing the renderer drops for budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// When the agent last changed the objective (RFC 3339, as the agent wrote it); `None` when
    /// absent. Recorded, never interpreted by the service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// At most 10 tags, each 1-32 chars; `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

/// `objectives[].status`; any other string is `objective_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectiveStatus {
    /// `"open"`: not started yet (active).
    Open,
    /// `"in_progress"`: being worked on (active).
    InProgress,
    /// `"blocked"`: waiting on something (still active).
    Blocked,
    /// `"done"`: finished.
    Done,
    /// `"cancelled"`: abandoned (finished, like `done`).
    Cancelled,
}

impl ObjectiveStatus {
    /// Every status, open first: exactly the strings [`ObjectiveStatus::parse`] accepts.
    pub const ALL: [ObjectiveStatus; 5] = [
        ObjectiveStatus::Open,
        ObjectiveStatus::InProgress,
        ObjectiveStatus::Blocked,
        ObjectiveStatus::Done,
        ObjectiveStatus::Cancelled,
    ];
    /// The wire string, e.g. `"in_progress"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectiveStatus::Open => "open",
            ObjectiveStatus::InProgress => "in_progress",
            ObjectiveStatus::Blocked => "blocked",
            ObjectiveStatus::Done => "done",
            ObjectiveStatus::Cancelled => "cancelled",
        }
    }
    /// The status whose wire string is exactly `s` (case-sensitive); `None` otherwise.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
    /// Still being worked on (open, in progress or blocked), as opposed to finished.
    pub fn is_active(self) -> bool {
        matches!(
            self,
            ObjectiveStatus::Open | ObjectiveStatus::InProgress | ObjectiveStatus::Blocked
        )
    }
}

/// `objectives[].priority` (optional); ordered `Low < Med < High`. Any other string is
/// `objective_priority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// `"low"`.
    Low,
    /// `"med"` (medium).
    Med,
    /// `"high"`: rendered before every other priority.
    High,
}

impl Priority {
    /// Every priority, lowest first.
    pub const ALL: [Priority; 3] = [Priority::Low, Priority::Med, Priority::High];
    /// The wire string: `"low"`, `"med"` or `"high"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Med => "med",
            Priority::High => "high",
        }
    }
    /// The priority whose wire string is exactly `s` (case-sensitive); `None` otherwise.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// The optional `capabilities` object: what the agent is equipped with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Capabilities {
    /// Tool ids the agent may call: at most 20, each 1-48 chars of `[a-z0-9_.:-]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_allowlist: Option<Vec<String>>,
    /// Feature flags the agent has switched on: at most 20, each 1-32 chars of `[a-z0-9_-]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_flags: Option<Vec<String>>,
}

/// The optional `pointers` object: references to evidence kept outside the capsule, and the
/// agent's key-value working notes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Pointers {
    /// At most 5 receipts; `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipts: Option<Vec<Receipt>>,
    /// At most 20 notes, keys unique; `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<Note>>,
}

/// One `pointers.notes[]` entry: a key-value working note. Clients upsert by `key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    /// 1-48 chars of `[a-z0-9_.:-]`, unique among the capsule's notes.
    pub key: String,
    /// 1-500 chars of free text (safety-scanned like every string).
    pub value: String,
    /// When the note was last written (RFC 3339); `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// At most 10 tags, each 1-32 chars; `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

/// One `pointers.receipts[]` entry: a named content hash, optionally with where to find the
/// content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Receipt {
    /// What the receipt is for: 1-32 chars.
    pub name: String,
    /// `sha256:` + 64 lowercase hex.
    pub content_hash: String,
    /// Untrusted pointer, never fetched by the service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence_url: Option<String>,
    /// Why the receipt matters, at most 200 chars; `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// When the receipt was last written (RFC 3339); `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// At most 10 tags, each 1-32 chars; `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

/// The optional `watch` object: what the agent monitors. Selection only: the service never
/// interprets it and the rehydration block marks it as not instructions. Deserialized only
/// from the service's own calls (a feed object is handed the watch its read admitted);
/// capsules are read through `validate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, Default)]
pub struct Watch {
    /// At most 10 tags, each 1-24 chars.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// At most 25 source ids, each `^[a-z0-9_-]{2,32}$`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<String>>,
    /// At most 10 stack names, each 1-32 chars.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stacks: Option<Vec<String>>,
}

/// The optional `access_control` object. Absent means public (as before the field existed).
/// Stored and validated now; the read paths start enforcing it in a later step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccessControl {
    /// `true`: anyone may read; `false`: only the owner and `authorized_readers`.
    pub public: bool,
    /// At most 20 readers, agent ids unique; empty when the field was absent.
    pub authorized_readers: Vec<Reader>,
}

/// One `access_control.authorized_readers[]` entry. On the wire either a bare agent id (every
/// read scope, no expiry) or `{agent_id, scopes, expires_at?, granted_at?}`; the model holds
/// both as this one shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reader {
    /// The reader's agent id: 64 lowercase hex characters.
    pub agent_id: String,
    /// What the reader may read.
    pub scopes: ReadScopes,
    /// When the grant ends (RFC 3339); `None`: it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// When the grant was made (RFC 3339, informational); `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub granted_at: Option<String>,
}

/// One read scope of a grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadScope {
    /// `"READ_HEAD"`: `head.json`.
    Head,
    /// `"READ_CAPSULE"`: `capsule.json` (and the rendered forms of it).
    Capsule,
    /// `"READ_HISTORY"`: `history.json` and snapshots.
    History,
    /// `"READ_VERIFY"`: `verify.json`.
    Verify,
}

impl ReadScope {
    /// Every scope, in wire order.
    pub const ALL: [ReadScope; 4] = [
        ReadScope::Head,
        ReadScope::Capsule,
        ReadScope::History,
        ReadScope::Verify,
    ];
    /// The wire string, e.g. `"READ_HEAD"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadScope::Head => "READ_HEAD",
            ReadScope::Capsule => "READ_CAPSULE",
            ReadScope::History => "READ_HISTORY",
            ReadScope::Verify => "READ_VERIFY",
        }
    }
    /// The scope whose wire string is exactly `s` (case-sensitive); `None` otherwise.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// The set of scopes a reader holds. A bare agent id in `authorized_readers` holds all four.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ReadScopes {
    /// [`ReadScope::Head`].
    pub head: bool,
    /// [`ReadScope::Capsule`].
    pub capsule: bool,
    /// [`ReadScope::History`].
    pub history: bool,
    /// [`ReadScope::Verify`].
    pub verify: bool,
}

impl ReadScopes {
    /// Every scope: what a bare agent id grants.
    pub const ALL: ReadScopes = ReadScopes {
        head: true,
        capsule: true,
        history: true,
        verify: true,
    };
    /// Whether `scope` is in the set.
    pub fn allows(self, scope: ReadScope) -> bool {
        match scope {
            ReadScope::Head => self.head,
            ReadScope::Capsule => self.capsule,
            ReadScope::History => self.history,
            ReadScope::Verify => self.verify,
        }
    }
    /// Adds `scope` to the set.
    pub fn insert(&mut self, scope: ReadScope) {
        match scope {
            ReadScope::Head => self.head = true,
            ReadScope::Capsule => self.capsule = true,
            ReadScope::History => self.history = true,
            ReadScope::Verify => self.verify = true,
        }
    }
}

/// On the wire (and in the model's JSON) a scope set is the array of its scope names, in
/// [`ReadScope::ALL`] order.
impl Serialize for ReadScopes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let scopes = ReadScope::ALL.into_iter().filter(|&x| self.allows(x));
        let mut seq = s.serialize_seq(None)?;
        for scope in scopes {
            seq.serialize_element(scope.as_str())?;
        }
        seq.end()
    }
}
