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
    pub policy: Policy,
    /// `None` when the field was absent (kept distinct from an empty array so
    /// the model says exactly what was sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Vec<Constraint>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objectives: Option<Vec<Objective>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pointers: Option<Pointers>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_motto: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch: Option<Watch>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Policy {
    pub policy_version: String,
    /// v0 knows one mode; `deny_external_instructions` and
    /// `deny_tool_instructions_in_text` must be `true`, so they carry no
    /// information and are not stored in the model.
    pub rehydrate_mode: RehydrateMode,
    pub memory_budget: MemoryBudget,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RehydrateMode {
    Strict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemoryBudget {
    /// 256..=1500.
    pub max_rehydrate_tokens: u32,
    /// 0..=8.
    pub max_objectives: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Constraint {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: ConstraintType,
    pub value: ConstraintValue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstraintType {
    NoShell,
    NoNetworkWrites,
    NoSecretsExport,
    AllowedTools,
    AllowedDomains,
}

impl ConstraintType {
    pub const ALL: [ConstraintType; 5] = [
        ConstraintType::NoShell,
        ConstraintType::NoNetworkWrites,
        ConstraintType::NoSecretsExport,
        ConstraintType::AllowedTools,
        ConstraintType::AllowedDomains,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            ConstraintType::NoShell => "no_shell",
            ConstraintType::NoNetworkWrites => "no_network_writes",
            ConstraintType::NoSecretsExport => "no_secrets_export",
            ConstraintType::AllowedTools => "allowed_tools",
            ConstraintType::AllowedDomains => "allowed_domains",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ConstraintValue {
    Flag(bool),
    List(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Objective {
    pub id: String,
    pub status: ObjectiveStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectiveStatus {
    Open,
    InProgress,
    Blocked,
    Done,
    Cancelled,
}

impl ObjectiveStatus {
    pub const ALL: [ObjectiveStatus; 5] = [
        ObjectiveStatus::Open,
        ObjectiveStatus::InProgress,
        ObjectiveStatus::Blocked,
        ObjectiveStatus::Done,
        ObjectiveStatus::Cancelled,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectiveStatus::Open => "open",
            ObjectiveStatus::InProgress => "in_progress",
            ObjectiveStatus::Blocked => "blocked",
            ObjectiveStatus::Done => "done",
            ObjectiveStatus::Cancelled => "cancelled",
        }
    }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    Low,
    Med,
    High,
}

impl Priority {
    pub const ALL: [Priority; 3] = [Priority::Low, Priority::Med, Priority::High];
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Med => "med",
            Priority::High => "high",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Capabilities {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_allowlist: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_flags: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Pointers {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipts: Option<Vec<Receipt>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Receipt {
    pub name: String,
    /// `sha256:` + 64 lowercase hex.
    pub content_hash: String,
    /// Untrusted pointer, never fetched by the service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Watch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stacks: Option<Vec<String>>,
}
