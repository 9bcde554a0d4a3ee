//! Visits every key and string value of a capsule with its JSON path and the
//! field context that decides which URL-ish content is legitimate there (and
//! each note's key and value once more, joined, for the secret rules).
//!
//! The walk is iterative (an explicit stack), so even a hand-built `Json`
//! deeper than the parser allows cannot overflow the call stack. Paths are
//! only formatted for strings that produce a finding.

use super::rules::Rule;
use super::FindingClass;
use crate::core::json::{path, Json};

/// Where a string sits, as far as the scanner cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Context {
    /// Free text, keys, anything not listed below.
    Text,
    /// `$.pointers.receipts[N].evidence_url`: the one place a URL may go.
    EvidenceUrl,
    /// `$.constraints[N].value[M]` of a constraint whose type is
    /// `allowed_domains`: host names, possibly `www.` ones.
    AllowedDomain,
    /// `$.capabilities.tool_allowlist[N]` or an `allowed_tools` constraint
    /// value: ids like `diffdelta.self.head` or `system:status`.
    ToolId,
    /// `$.pointers.notes[N].value` once more, as `"<key>: <value>"`. A note's
    /// key labels its value, so `aws_secret_access_key` + `wJalrXUt…` is a
    /// credential although neither string is one alone. Only secret rules
    /// look at the join: everything else was checked on the two parts (and
    /// a key such as `system` would read as a role header once joined).
    NoteJoined,
}

impl Context {
    /// Whether this position legitimately holds what `rule` flags.
    pub(super) fn allows(self, rule: &Rule) -> bool {
        (self == Context::NoteJoined && rule.class != FindingClass::Secret)
            || rule.exempt.contains(&self)
    }
}

/// Position of a node in the capsule structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Root,
    Pointers,
    Receipts,
    Receipt,
    Notes,
    Note,
    Constraints,
    Constraint(Kind),
    ConstraintValues(Kind),
    Capabilities,
    ToolAllowlist,
    // Leaf positions with a special context.
    EvidenceUrl,
    DomainItem,
    ToolItem,
    Other,
}

/// The constraint types whose values get a relaxed context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Domains,
    Tools,
    Other,
}

fn member_role(parent: Role, key: &str) -> Role {
    match (parent, key) {
        (Role::Root, "pointers") => Role::Pointers,
        (Role::Root, "constraints") => Role::Constraints,
        (Role::Root, "capabilities") => Role::Capabilities,
        (Role::Pointers, "receipts") => Role::Receipts,
        (Role::Pointers, "notes") => Role::Notes,
        (Role::Receipt, "evidence_url") => Role::EvidenceUrl,
        (Role::Constraint(kind), "value") => Role::ConstraintValues(kind),
        (Role::Capabilities, "tool_allowlist") => Role::ToolAllowlist,
        _ => Role::Other,
    }
}

fn element_role(parent: Role, element: &Json) -> Role {
    match parent {
        Role::Receipts => Role::Receipt,
        Role::Notes => Role::Note,
        Role::Constraints => Role::Constraint(match element.get("type").and_then(Json::as_str) {
            Some("allowed_domains") => Kind::Domains,
            Some("allowed_tools") => Kind::Tools,
            _ => Kind::Other,
        }),
        Role::ConstraintValues(Kind::Domains) => Role::DomainItem,
        Role::ConstraintValues(Kind::Tools) | Role::ToolAllowlist => Role::ToolItem,
        _ => Role::Other,
    }
}

/// The context of a string value at `role`. Domain and tool relaxations only
/// apply to single tokens: a value with whitespace is prose, not an id.
fn context(role: Role, text: &str) -> Context {
    let token = !text.chars().any(char::is_whitespace);
    match role {
        Role::EvidenceUrl => Context::EvidenceUrl,
        Role::DomainItem if token => Context::AllowedDomain,
        Role::ToolItem if token => Context::ToolId,
        _ => Context::Text,
    }
}

/// Calls `visit(text, context, path)` for every key and string value;
/// `path()` formats the string's JSON path (for a key: the member's path).
pub(super) fn strings(root: &Json, mut visit: impl FnMut(&str, Context, &dyn Fn() -> String)) {
    if let Json::String(s) = root {
        visit(s, Context::Text, &|| "$".to_string());
        return;
    }
    let mut stack: Vec<(&Json, String, Role)> = vec![(root, "$".to_string(), Role::Root)];
    while let Some((node, at, role)) = stack.pop() {
        match node {
            Json::Object(entries) => {
                let note_key = match role {
                    Role::Note => node.get("key").and_then(Json::as_str),
                    _ => None,
                };
                for (key, value) in entries {
                    let member_path = || path::key(&at, key);
                    visit(key, Context::Text, &member_path);
                    let child = member_role(role, key);
                    if let (Some(label), "value", Json::String(s)) = (note_key, key.as_str(), value)
                    {
                        visit(&format!("{label}: {s}"), Context::NoteJoined, &member_path);
                    }
                    match value {
                        Json::String(s) => visit(s, context(child, s), &member_path),
                        Json::Object(_) | Json::Array(_) => {
                            stack.push((value, member_path(), child))
                        }
                        _ => {}
                    }
                }
            }
            Json::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let item_path = || path::index(&at, i);
                    let child = element_role(role, item);
                    match item {
                        Json::String(s) => visit(s, context(child, s), &item_path),
                        Json::Object(_) | Json::Array(_) => stack.push((item, item_path(), child)),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
}
