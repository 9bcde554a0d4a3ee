//! The `self_capsule_v0` schema check: every rule and limit of the spec's
//! limits table, over the raw parsed value, collecting *all* violations (a bot
//! fixes its capsule in one round trip, not one field per rejected write).
//! Lengths count Unicode scalar values. Success yields the typed [`Capsule`].

use crate::core::crypto::is_lower_hex;
use crate::core::jcs;
use crate::core::json::{path, Json};
use crate::core::model::*;
use crate::core::reason::ReasonCode as R;
use crate::core::time::is_timestamp;
use serde::Serialize;

/// One schema problem: which code, where, and a human-readable message
/// (which never quotes the offending value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The reason code this problem is reported under.
    pub code: R,
    /// Where: a JSON path such as `$.objectives[2].title` (an unknown key that
    /// could be sensitive is not spelled out, see [`unknown_field_path`]).
    pub path: String,
    /// What is wrong, in words; names the bound, never the value.
    pub message: String,
}

/// Spec limits (free tier and all others: the schema does not vary by tier).
/// In the code each bound is spelled only here: a check and its message both
/// read it, so a message cannot name another limit than the one enforced.
/// (`schemas/` spells them for JSON Schema; `tests/schemas.rs` checks that
/// both accept and reject the same capsules.) String lengths count Unicode
/// scalar values; `watch.sources` ids are ASCII, so there bytes are the same.
pub mod bounds {
    /// `policy.policy_version`: 1 to this many characters.
    pub const POLICY_VERSION_MAX: usize = 16;
    /// `policy.memory_budget.max_rehydrate_tokens`: inclusive range.
    pub const REHYDRATE_TOKENS: (u64, u64) = (256, 1500);
    /// `policy.memory_budget.max_objectives`: inclusive range.
    pub const MAX_OBJECTIVES: (u64, u64) = (0, 8);
    /// `constraints`: at most this many.
    pub const CONSTRAINTS_MAX: usize = 20;
    /// Constraint and objective `id`s: 1 to this many characters.
    pub const ID_MAX: usize = 24;
    /// A list-valued constraint `value`: at most this many strings.
    pub const CONSTRAINT_VALUES_MAX: usize = 20;
    /// Each string of a constraint `value`: 1 to this many characters.
    pub const CONSTRAINT_VALUE_LEN_MAX: usize = 48;
    /// `objectives`: at most this many.
    pub const OBJECTIVES_MAX: usize = 8;
    /// `objectives[].title`: 1 to this many characters.
    pub const TITLE_MAX: usize = 120;
    /// `objectives[].checkpoint`: at most this many characters.
    pub const CHECKPOINT_MAX: usize = 200;
    /// `tags` of an objective, receipt or note: at most this many (the public deployment's
    /// bound for objective and receipt tags; notes follow it).
    pub const TAGS_MAX: usize = 10;
    /// Each such tag: 1 to this many characters.
    pub const TAG_LEN_MAX: usize = 32;
    /// `capabilities.tool_allowlist`: at most this many tool ids.
    pub const TOOLS_MAX: usize = 20;
    /// Each tool id: 1 to this many characters.
    pub const TOOL_LEN_MAX: usize = 48;
    /// `capabilities.feature_flags`: at most this many flags.
    pub const FLAGS_MAX: usize = 20;
    /// Each feature flag: 1 to this many characters.
    pub const FLAG_LEN_MAX: usize = 32;
    /// `pointers.receipts`: at most this many.
    pub const RECEIPTS_MAX: usize = 5;
    /// `receipts[].name`: 1 to this many characters.
    pub const RECEIPT_NAME_MAX: usize = 32;
    /// `receipts[].evidence_url`: 1 to this many characters.
    pub const EVIDENCE_URL_MAX: usize = 200;
    /// `receipts[].rationale`: at most this many characters (the public deployment's bound).
    pub const RATIONALE_MAX: usize = 200;
    /// `pointers.notes`: at most this many. Upsert by key keeps a working set, not a log; 20
    /// matches the other list caps (constraints, tools, flags, readers).
    pub const NOTES_MAX: usize = 20;
    /// `notes[].key`: 1 to this many characters of `[a-z0-9_.:-]` (a tool id's alphabet and
    /// length: dotted or namespaced keys such as `repo.branch` or `ci:last_run`).
    pub const NOTE_KEY_MAX: usize = 48;
    /// `notes[].value`: 1 to this many characters. Room for a short paragraph; the tier's
    /// byte cap still bounds the sum (20 full notes do not fit the free tier).
    pub const NOTE_VALUE_MAX: usize = 500;
    /// `access_control.authorized_readers`: at most this many (the public deployment's bound).
    pub const READERS_MAX: usize = 20;
    /// Digits after the seconds' decimal point in a timestamp (`updated_at`, `expires_at`,
    /// `granted_at`): at most this many.
    pub use crate::core::time::TIMESTAMP_FRACTION_DIGITS_MAX;
    /// `self_motto`: at most this many characters.
    pub const MOTTO_MAX: usize = 160;
    /// `watch.tags`: at most this many.
    pub const WATCH_TAGS_MAX: usize = 10;
    /// Each watch tag: 1 to this many characters.
    pub const WATCH_TAG_LEN_MAX: usize = 24;
    /// `watch.sources`: at most this many.
    pub const WATCH_SOURCES_MAX: usize = 25;
    /// Each watch source id: this many characters, inclusive range.
    pub const WATCH_SOURCE_LEN: (usize, usize) = (2, 32);
    /// `watch.stacks`: at most this many.
    pub const WATCH_STACKS_MAX: usize = 10;
    /// Each watch stack name: 1 to this many characters.
    pub const WATCH_STACK_LEN_MAX: usize = 32;
}
use bounds::*;

/// Checks a capsule value. `Err` holds every violation found, in document
/// order; callers report their codes de-duplicated in stable order.
pub fn validate_capsule(value: &Json) -> Result<Capsule, Vec<Violation>> {
    let mut v = Checker::default();
    let capsule = v.capsule(value);
    match capsule {
        Some(c) if v.out.is_empty() => Ok(c),
        _ => {
            if v.out.is_empty() {
                // Defensive: a None without a recorded reason would be a bug here.
                v.push(R::InvalidCapsule, "$", "capsule is not valid");
            }
            Err(v.out)
        }
    }
}

#[derive(Default)]
struct Checker {
    out: Vec<Violation>,
}

/// A member of a checked object: its value, if present, and its path. The
/// checks take one, so a field's name is written once, in its object's list
/// of members ([`Checker::fields`]), which is also that object's allowlist.
struct Field<'a> {
    value: Option<&'a Json>,
    at: String,
}

impl<'a> Field<'a> {
    /// The value of a list item (or any value) at `at`, checked as a field.
    fn item(value: &'a Json, at: &str) -> Field<'a> {
        Field {
            value: Some(value),
            at: at.to_owned(),
        }
    }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// An enum's wire names, `a, b, c`, for "one of …" messages (from the
/// enum's own list, so a new variant cannot be missing from the message).
fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> String {
    all.iter().map(|&t| name(t)).collect::<Vec<_>>().join(", ")
}

/// `^[a-z0-9_-]+$`
fn is_slug(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// A present-but-invalid field (`Some(None)`) fails its parent; an absent one (`None`) is
/// fine. Turns a checked optional member into the parent's `Option<Option<T>>` shape.
fn member<T>(checked: Option<Option<T>>) -> Option<Option<T>> {
    checked.map(|c| c.ok_or(())).transpose().ok()
}

/// `^[a-z0-9_.:-]+$`
fn is_tool_id(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b':' | b'-')
        })
}

impl Checker {
    fn push(&mut self, code: R, at: &str, message: impl Into<String>) {
        self.out.push(Violation {
            code,
            path: at.to_owned(),
            message: message.into(),
        });
    }

    /// Reports members not in `allowed` as `unknown_field`; returns the object's entries.
    fn object<'a>(
        &mut self,
        value: &'a Json,
        at: &str,
        code: R,
        allowed: &[&str],
    ) -> Option<&'a [(String, Json)]> {
        let Some(entries) = value.as_object() else {
            self.push(
                code,
                at,
                format!("must be an object, not {}", value.type_name()),
            );
            return None;
        };
        for (k, _) in entries {
            if !allowed.contains(&k.as_str()) {
                self.push(
                    R::UnknownField,
                    &unknown_field_path(at, k),
                    "field is not in the v0 allowlist",
                );
            }
        }
        Some(entries)
    }

    /// The members `names` of the object `value` (absent ones with no value),
    /// in the order named; every other member is reported `unknown_field`.
    /// `None` when `value` is not an object (reported as `code`).
    fn fields<'a, const N: usize>(
        &mut self,
        value: &'a Json,
        at: &str,
        code: R,
        names: [&str; N],
    ) -> Option<[Field<'a>; N]> {
        self.object(value, at, code, &names)?;
        Some(names.map(|name| Field {
            value: value.get(name),
            at: path::key(at, name),
        }))
    }

    fn array<'a>(&mut self, value: &'a Json, at: &str, code: R, max: usize) -> Option<&'a [Json]> {
        match value.as_array() {
            None => {
                self.push(
                    code,
                    at,
                    format!("must be an array, not {}", value.type_name()),
                );
                None
            }
            Some(items) if items.len() > max => {
                self.push(
                    code,
                    at,
                    format!("at most {max} items ({} given)", items.len()),
                );
                // Still check the items, so every problem is reported at once.
                Some(items)
            }
            Some(items) => Some(items),
        }
    }

    /// A string of `min..=max` scalar values.
    fn string(&mut self, field: &Field<'_>, code: R, min: usize, max: usize) -> Option<String> {
        let at = field.at.as_str();
        let Some(value) = field.value else {
            self.push(code, at, "required");
            return None;
        };
        let Some(s) = value.as_str() else {
            self.push(
                code,
                at,
                format!("must be a string, not {}", value.type_name()),
            );
            return None;
        };
        let n = chars(s);
        if n < min || n > max {
            let range = if min == 0 {
                format!("at most {max}")
            } else {
                format!("{min} to {max}")
            };
            self.push(code, at, format!("must be {range} characters ({n} given)"));
            return None;
        }
        Some(s.to_owned())
    }

    fn optional_string(
        &mut self,
        field: &Field<'_>,
        code: R,
        min: usize,
        max: usize,
    ) -> Option<Option<String>> {
        match field.value {
            None => Some(None),
            Some(_) => self.string(field, code, min, max).map(Some),
        }
    }

    fn int(&mut self, field: &Field<'_>, code: R, (lo, hi): (u64, u64)) -> Option<u32> {
        match field.value.and_then(Json::as_safe_u64) {
            Some(n) if (lo..=hi).contains(&n) => Some(n as u32),
            _ => {
                self.push(code, &field.at, format!("required integer in {lo}..={hi}"));
                None
            }
        }
    }

    /// An array of strings, each passing `ok`, with the given bounds.
    fn string_list(
        &mut self,
        value: &Json,
        at: &str,
        code: R,
        max_items: usize,
        describe: &str,
        ok: impl Fn(&str) -> bool,
    ) -> Option<Vec<String>> {
        let items = self.array(value, at, code, max_items)?;
        let before = self.out.len();
        let mut list = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item.as_str() {
                Some(s) if ok(s) => list.push(s.to_owned()),
                _ => self.push(
                    code,
                    &path::index(at, i),
                    format!("each item must be {describe}"),
                ),
            }
        }
        (self.out.len() == before && items.len() <= max_items).then_some(list)
    }

    /// An optional list-valued member: `None` when absent, else the list if
    /// it passes [`Self::string_list`].
    fn optional_list(
        &mut self,
        field: &Field<'_>,
        code: R,
        max_items: usize,
        describe: &str,
        ok: impl Fn(&str) -> bool,
    ) -> Option<Option<Vec<String>>> {
        field
            .value
            .map(|v| self.string_list(v, &field.at, code, max_items, describe, ok))
    }

    fn capsule(&mut self, value: &Json) -> Option<Capsule> {
        if value.as_object().is_none() {
            self.push(
                R::InvalidCapsule,
                "$",
                format!("capsule must be an object, not {}", value.type_name()),
            );
            return None;
        }
        let [schema_version, agent_id, policy, constraints, objectives, capabilities, pointers, self_motto, watch, access_control] =
            self.fields(
                value,
                "$",
                R::InvalidCapsule,
                [
                    "schema_version",
                    "agent_id",
                    "policy",
                    "constraints",
                    "objectives",
                    "capabilities",
                    "pointers",
                    "self_motto",
                    "watch",
                    "access_control",
                ],
            )?;

        match schema_version.value {
            Some(Json::String(s)) if s == SCHEMA_VERSION => {}
            _ => self.push(
                R::SchemaVersion,
                &schema_version.at,
                format!("required, exactly \"{SCHEMA_VERSION}\""),
            ),
        }
        let agent_id = match agent_id.value {
            Some(Json::String(s)) if is_lower_hex(s, 64) => Some(s.clone()),
            _ => {
                self.push(
                    R::AgentId,
                    &agent_id.at,
                    "required, 64 lowercase hex characters",
                );
                None
            }
        };
        let policy = match policy.value {
            Some(p) => self.policy(p, &policy.at),
            None => {
                self.push(R::Policy, &policy.at, "required");
                None
            }
        };
        let constraints = constraints
            .value
            .map(|c| self.constraints(c, &constraints.at));
        let objectives = objectives.value.map(|o| self.objectives(o, &objectives.at));
        let capabilities = capabilities
            .value
            .map(|c| self.capabilities(c, &capabilities.at));
        let pointers = pointers.value.map(|p| self.pointers(p, &pointers.at));
        let self_motto = self.optional_string(&self_motto, R::SelfMotto, 0, MOTTO_MAX);
        let watch = watch.value.map(|w| self.watch(w, &watch.at));
        let access_control = access_control
            .value
            .map(|a| self.access_control(a, &access_control.at));

        Some(Capsule {
            agent_id: agent_id?,
            policy: policy?,
            constraints: member(constraints)?,
            objectives: member(objectives)?,
            capabilities: member(capabilities)?,
            pointers: member(pointers)?,
            self_motto: self_motto?,
            watch: member(watch)?,
            access_control: member(access_control)?,
        })
    }

    fn policy(&mut self, value: &Json, at: &str) -> Option<Policy> {
        let [policy_version, rehydrate_mode, deny_external, deny_tool, memory_budget] = self
            .fields(
                value,
                at,
                R::Policy,
                [
                    "policy_version",
                    "rehydrate_mode",
                    "deny_external_instructions",
                    "deny_tool_instructions_in_text",
                    "memory_budget",
                ],
            )?;
        let policy_version = self.string(&policy_version, R::PolicyVersion, 1, POLICY_VERSION_MAX);
        let rehydrate_mode = match rehydrate_mode.value {
            Some(Json::String(s)) if s == "strict" => Some(RehydrateMode::Strict),
            _ => {
                self.push(
                    R::RehydrateMode,
                    &rehydrate_mode.at,
                    "required, exactly \"strict\"",
                );
                None
            }
        };
        let mut deny_ok = true;
        for flag in [&deny_external, &deny_tool] {
            if flag.value != Some(&Json::Bool(true)) {
                self.push(R::Policy, &flag.at, "required, must be true");
                deny_ok = false;
            }
        }
        let memory_budget = match memory_budget.value {
            None => {
                self.push(R::MemoryBudget, &memory_budget.at, "required");
                None
            }
            Some(mb) => self.memory_budget(mb, &memory_budget.at),
        };
        let policy = Policy {
            policy_version: policy_version?,
            rehydrate_mode: rehydrate_mode?,
            memory_budget: memory_budget?,
        };
        deny_ok.then_some(policy)
    }

    fn memory_budget(&mut self, value: &Json, at: &str) -> Option<MemoryBudget> {
        let [tokens, objectives] = self.fields(
            value,
            at,
            R::MemoryBudget,
            ["max_rehydrate_tokens", "max_objectives"],
        )?;
        let tokens = self.int(&tokens, R::MaxRehydrateTokens, REHYDRATE_TOKENS);
        let objectives = self.int(&objectives, R::MaxObjectives, MAX_OBJECTIVES);
        Some(MemoryBudget {
            max_rehydrate_tokens: tokens?,
            max_objectives: objectives?,
        })
    }

    fn constraints(&mut self, value: &Json, at: &str) -> Option<Vec<Constraint>> {
        let items = self.array(value, at, R::Constraints, CONSTRAINTS_MAX)?;
        let before = self.out.len();
        let mut out = Vec::with_capacity(items.len());
        let mut ids: Vec<&str> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let at = path::index(at, i);
            let Some([id, kind, value]) =
                self.fields(item, &at, R::Constraints, ["id", "type", "value"])
            else {
                continue;
            };
            let id = self.id(&id, R::ConstraintId, &mut ids);
            let kind = match kind
                .value
                .and_then(Json::as_str)
                .and_then(ConstraintType::parse)
            {
                Some(t) => Some(t),
                None => {
                    self.push(
                        R::ConstraintType,
                        &kind.at,
                        format!(
                            "required, one of {}",
                            names(&ConstraintType::ALL, ConstraintType::as_str)
                        ),
                    );
                    None
                }
            };
            let val = match value.value {
                Some(Json::Bool(b)) => Some(ConstraintValue::Flag(*b)),
                Some(list @ Json::Array(_)) => self
                    .string_list(
                        list,
                        &value.at,
                        R::ConstraintValue,
                        CONSTRAINT_VALUES_MAX,
                        &format!("a string of 1 to {CONSTRAINT_VALUE_LEN_MAX} characters"),
                        |s| (1..=CONSTRAINT_VALUE_LEN_MAX).contains(&chars(s)),
                    )
                    .map(ConstraintValue::List),
                _ => {
                    self.push(
                        R::ConstraintValue,
                        &value.at,
                        "required, a boolean or an array of strings",
                    );
                    None
                }
            };
            if let (Some(id), Some(kind), Some(value)) = (id, kind, val) {
                out.push(Constraint { id, kind, value });
            }
        }
        (self.out.len() == before && items.len() <= CONSTRAINTS_MAX).then_some(out)
    }

    /// An id (`^[a-z0-9_-]+$`, at most [`ID_MAX`]) that must be unique among `seen`.
    fn id<'a>(&mut self, field: &Field<'a>, code: R, seen: &mut Vec<&'a str>) -> Option<String> {
        let describe = format!("required, 1 to {ID_MAX} characters of [a-z0-9_-]");
        self.unique(field, code, seen, &describe, |s| {
            is_slug(s) && chars(s) <= ID_MAX
        })
    }

    /// A string passing `ok` that must be unique among `seen` (ids, note keys, reader ids).
    fn unique<'a>(
        &mut self,
        field: &Field<'a>,
        code: R,
        seen: &mut Vec<&'a str>,
        describe: &str,
        ok: impl Fn(&str) -> bool,
    ) -> Option<String> {
        match field.value.and_then(Json::as_str) {
            Some(s) if ok(s) => {
                if seen.contains(&s) {
                    self.push(code, &field.at, "duplicate: an earlier item already has it");
                    return None;
                }
                seen.push(s);
                Some(s.to_owned())
            }
            _ => {
                self.push(code, &field.at, describe);
                None
            }
        }
    }

    /// An optional timestamp member (see [`is_timestamp`]).
    fn timestamp(&mut self, field: &Field<'_>, code: R) -> Option<Option<String>> {
        match field.value {
            None => Some(None),
            Some(Json::String(s)) if is_timestamp(s) => Some(Some(s.clone())),
            Some(_) => {
                self.push(
                    code,
                    &field.at,
                    format!(
                        "an RFC 3339 date-time such as 2026-02-10T12:00:00Z: upper-case T, \
                         Z, +HH:MM or -HH:MM, at most {TIMESTAMP_FRACTION_DIGITS_MAX} fraction \
                         digits, a real date"
                    ),
                );
                None
            }
        }
    }

    /// An optional `tags` member of an objective, receipt or note.
    fn tags(&mut self, field: &Field<'_>, code: R) -> Option<Option<Vec<String>>> {
        member(self.optional_list(
            field,
            code,
            TAGS_MAX,
            &format!("a tag of 1 to {TAG_LEN_MAX} characters"),
            |s| (1..=TAG_LEN_MAX).contains(&chars(s)),
        ))
    }

    fn objectives(&mut self, value: &Json, at: &str) -> Option<Vec<Objective>> {
        let items = self.array(value, at, R::Objectives, OBJECTIVES_MAX)?;
        let before = self.out.len();
        let mut out = Vec::with_capacity(items.len());
        let mut ids: Vec<&str> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let at = path::index(at, i);
            let Some([id, status, priority, title, checkpoint, updated_at, tags]) = self.fields(
                item,
                &at,
                R::Objectives,
                [
                    "id",
                    "status",
                    "priority",
                    "title",
                    "checkpoint",
                    "updated_at",
                    "tags",
                ],
            ) else {
                continue;
            };
            let id = self.id(&id, R::ObjectiveId, &mut ids);
            let status = match status
                .value
                .and_then(Json::as_str)
                .and_then(ObjectiveStatus::parse)
            {
                Some(s) => Some(s),
                None => {
                    self.push(
                        R::ObjectiveStatus,
                        &status.at,
                        format!(
                            "required, one of {}",
                            names(&ObjectiveStatus::ALL, ObjectiveStatus::as_str)
                        ),
                    );
                    None
                }
            };
            let priority = match priority.value {
                None => Some(None),
                Some(p) => match p.as_str().and_then(Priority::parse) {
                    Some(p) => Some(Some(p)),
                    None => {
                        self.push(
                            R::ObjectivePriority,
                            &priority.at,
                            format!("one of {}", names(&Priority::ALL, Priority::as_str)),
                        );
                        None
                    }
                },
            };
            let title = self.string(&title, R::ObjectiveTitle, 1, TITLE_MAX);
            let checkpoint =
                self.optional_string(&checkpoint, R::ObjectiveCheckpoint, 0, CHECKPOINT_MAX);
            let updated_at = self.timestamp(&updated_at, R::ObjectiveUpdatedAt);
            let tags = self.tags(&tags, R::ObjectiveTags);
            if let (
                Some(id),
                Some(status),
                Some(priority),
                Some(title),
                Some(checkpoint),
                Some(updated_at),
                Some(tags),
            ) = (id, status, priority, title, checkpoint, updated_at, tags)
            {
                out.push(Objective {
                    id,
                    status,
                    priority,
                    title,
                    checkpoint,
                    updated_at,
                    tags,
                });
            }
        }
        (self.out.len() == before && items.len() <= OBJECTIVES_MAX).then_some(out)
    }

    fn capabilities(&mut self, value: &Json, at: &str) -> Option<Capabilities> {
        let [tools, flags] = self.fields(
            value,
            at,
            R::Capabilities,
            ["tool_allowlist", "feature_flags"],
        )?;
        let before = self.out.len();
        let tool_allowlist = self.optional_list(
            &tools,
            R::ToolAllowlist,
            TOOLS_MAX,
            &format!("a tool id of 1 to {TOOL_LEN_MAX} characters of [a-z0-9_.:-]"),
            |s| is_tool_id(s) && chars(s) <= TOOL_LEN_MAX,
        );
        let feature_flags = self.optional_list(
            &flags,
            R::FeatureFlags,
            FLAGS_MAX,
            &format!("a flag of 1 to {FLAG_LEN_MAX} characters of [a-z0-9_-]"),
            |s| is_slug(s) && chars(s) <= FLAG_LEN_MAX,
        );
        (self.out.len() == before).then(|| Capabilities {
            tool_allowlist: tool_allowlist.flatten(),
            feature_flags: feature_flags.flatten(),
        })
    }

    fn pointers(&mut self, value: &Json, at: &str) -> Option<Pointers> {
        let [receipts, notes] = self.fields(value, at, R::Pointers, ["receipts", "notes"])?;
        let receipts = receipts.value.map(|r| self.receipts(r, &receipts.at));
        let notes = notes.value.map(|n| self.notes(n, &notes.at));
        Some(Pointers {
            receipts: member(receipts)?,
            notes: member(notes)?,
        })
    }

    fn receipts(&mut self, value: &Json, at: &str) -> Option<Vec<Receipt>> {
        let items = self.array(value, at, R::Receipts, RECEIPTS_MAX)?;
        let before = self.out.len();
        let mut receipts = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let at = path::index(at, i);
            let Some([name, content_hash, evidence_url, rationale, updated_at, tags]) = self
                .fields(
                    item,
                    &at,
                    R::Receipts,
                    [
                        "name",
                        "content_hash",
                        "evidence_url",
                        "rationale",
                        "updated_at",
                        "tags",
                    ],
                )
            else {
                continue;
            };
            let name = self.string(&name, R::ReceiptName, 1, RECEIPT_NAME_MAX);
            let content_hash = match content_hash.value.and_then(Json::as_str) {
                Some(h) if jcs::is_cursor(h) => Some(h.to_owned()),
                _ => {
                    self.push(
                        R::ReceiptContentHash,
                        &content_hash.at,
                        "required, \"sha256:\" followed by 64 lowercase hex characters",
                    );
                    None
                }
            };
            let evidence_url =
                self.optional_string(&evidence_url, R::ReceiptEvidenceUrl, 1, EVIDENCE_URL_MAX);
            let rationale = self.optional_string(&rationale, R::ReceiptRationale, 0, RATIONALE_MAX);
            let updated_at = self.timestamp(&updated_at, R::ReceiptUpdatedAt);
            let tags = self.tags(&tags, R::ReceiptTags);
            if let (
                Some(name),
                Some(content_hash),
                Some(evidence_url),
                Some(rationale),
                Some(updated_at),
                Some(tags),
            ) = (
                name,
                content_hash,
                evidence_url,
                rationale,
                updated_at,
                tags,
            ) {
                receipts.push(Receipt {
                    name,
                    content_hash,
                    evidence_url,
                    rationale,
                    updated_at,
                    tags,
                });
            }
        }
        (self.out.len() == before && items.len() <= RECEIPTS_MAX).then_some(receipts)
    }

    fn notes(&mut self, value: &Json, at: &str) -> Option<Vec<Note>> {
        let items = self.array(value, at, R::Notes, NOTES_MAX)?;
        let before = self.out.len();
        let mut notes = Vec::with_capacity(items.len());
        let mut keys: Vec<&str> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let at = path::index(at, i);
            let Some([key, text, updated_at, tags]) =
                self.fields(item, &at, R::Notes, ["key", "value", "updated_at", "tags"])
            else {
                continue;
            };
            let key = self.unique(
                &key,
                R::NoteKey,
                &mut keys,
                &format!("required, 1 to {NOTE_KEY_MAX} characters of [a-z0-9_.:-]"),
                |s| is_tool_id(s) && chars(s) <= NOTE_KEY_MAX,
            );
            let text = self.string(&text, R::NoteValue, 1, NOTE_VALUE_MAX);
            let updated_at = self.timestamp(&updated_at, R::NoteUpdatedAt);
            let tags = self.tags(&tags, R::NoteTags);
            if let (Some(key), Some(value), Some(updated_at), Some(tags)) =
                (key, text, updated_at, tags)
            {
                notes.push(Note {
                    key,
                    value,
                    updated_at,
                    tags,
                });
            }
        }
        (self.out.len() == before && items.len() <= NOTES_MAX).then_some(notes)
    }

    fn access_control(&mut self, value: &Json, at: &str) -> Option<AccessControl> {
        let [public, readers] = self.fields(
            value,
            at,
            R::AccessControl,
            ["public", "authorized_readers"],
        )?;
        let public = match public.value {
            Some(Json::Bool(b)) => Some(*b),
            _ => {
                self.push(R::AccessControlPublic, &public.at, "required, a boolean");
                None
            }
        };
        let readers = match readers.value {
            None => Some(Vec::new()),
            Some(list) => self.readers(list, &readers.at),
        };
        Some(AccessControl {
            public: public?,
            authorized_readers: readers?,
        })
    }

    fn readers(&mut self, value: &Json, at: &str) -> Option<Vec<Reader>> {
        let items = self.array(value, at, R::AuthorizedReaders, READERS_MAX)?;
        let before = self.out.len();
        let mut readers = Vec::with_capacity(items.len());
        // One grant per reader: two entries for one agent would leave its scopes ambiguous.
        let mut ids: Vec<&str> = Vec::new();
        let id_rule = "an agent id: 64 lowercase hex characters";
        for (i, item) in items.iter().enumerate() {
            let at = path::index(at, i);
            if item.as_str().is_some() {
                // A bare agent id: every read scope, no expiry.
                if let Some(agent_id) = self.unique(
                    &Field::item(item, &at),
                    R::AuthorizedReaderId,
                    &mut ids,
                    id_rule,
                    |s| is_lower_hex(s, 64),
                ) {
                    readers.push(Reader {
                        agent_id,
                        scopes: ReadScopes::ALL,
                        expires_at: None,
                        granted_at: None,
                    });
                }
                continue;
            }
            // A grant object; anything else is neither.
            let Some([agent_id, scopes, expires_at, granted_at]) =
                item.as_object().and_then(|_| {
                    self.fields(
                        item,
                        &at,
                        R::AuthorizedReaderId,
                        ["agent_id", "scopes", "expires_at", "granted_at"],
                    )
                })
            else {
                self.push(
                    R::AuthorizedReaderId,
                    &at,
                    format!("{id_rule}, or a grant object, not {}", item.type_name()),
                );
                continue;
            };
            let agent_id = self.unique(
                &agent_id,
                R::AuthorizedReaderId,
                &mut ids,
                &format!("required, {id_rule}"),
                |s| is_lower_hex(s, 64),
            );
            let scopes = self.scopes(&scopes);
            let expires_at = self.timestamp(&expires_at, R::AuthorizedReaderExpiry);
            let granted_at = self.timestamp(&granted_at, R::AuthorizedReaderExpiry);
            if let (Some(agent_id), Some(scopes), Some(expires_at), Some(granted_at)) =
                (agent_id, scopes, expires_at, granted_at)
            {
                readers.push(Reader {
                    agent_id,
                    scopes,
                    expires_at,
                    granted_at,
                });
            }
        }
        (self.out.len() == before && items.len() <= READERS_MAX).then_some(readers)
    }

    /// A grant's `scopes`: 1 to 4 distinct scope names.
    fn scopes(&mut self, field: &Field<'_>) -> Option<ReadScopes> {
        let rule = format!(
            "required, 1 to {} distinct scopes of {}",
            ReadScope::ALL.len(),
            names(&ReadScope::ALL, ReadScope::as_str)
        );
        let Some(items) = field.value.and_then(Json::as_array) else {
            self.push(R::AuthorizedReaderScope, &field.at, rule);
            return None;
        };
        // Every item a scope name, none repeated (so at most four), at least one.
        let mut scopes = ReadScopes::default();
        let mut ok = !items.is_empty();
        for item in items {
            match item.as_str().and_then(ReadScope::parse) {
                Some(scope) if !scopes.allows(scope) => scopes.insert(scope),
                _ => ok = false,
            }
        }
        if !ok {
            self.push(R::AuthorizedReaderScope, &field.at, rule);
            return None;
        }
        Some(scopes)
    }

    fn watch(&mut self, value: &Json, at: &str) -> Option<Watch> {
        let [tags, sources, stacks] =
            self.fields(value, at, R::Watch, ["tags", "sources", "stacks"])?;
        let before = self.out.len();
        let tags = self.optional_list(
            &tags,
            R::WatchTags,
            WATCH_TAGS_MAX,
            &format!("a tag of 1 to {WATCH_TAG_LEN_MAX} characters"),
            |s| (1..=WATCH_TAG_LEN_MAX).contains(&chars(s)),
        );
        let sources = self.optional_list(
            &sources,
            R::WatchSources,
            WATCH_SOURCES_MAX,
            &format!(
                "a source id of {} to {} characters of [a-z0-9_-]",
                WATCH_SOURCE_LEN.0, WATCH_SOURCE_LEN.1
            ),
            |s| is_slug(s) && (WATCH_SOURCE_LEN.0..=WATCH_SOURCE_LEN.1).contains(&s.len()),
        );
        let stacks = self.optional_list(
            &stacks,
            R::WatchStacks,
            WATCH_STACKS_MAX,
            &format!("a name of 1 to {WATCH_STACK_LEN_MAX} characters"),
            |s| (1..=WATCH_STACK_LEN_MAX).contains(&chars(s)),
        );
        (self.out.len() == before).then(|| Watch {
            tags: tags.flatten(),
            sources: sources.flatten(),
            stacks: stacks.flatten(),
        })
    }
}

/// The path reported for an unknown member. Findings never echo input that
/// could be sensitive, and an unknown *key* is input: it is named only when it
/// is a short plain identifier the safety scanner finds nothing in, and is
/// otherwise replaced by `[<unknown key>]`.
pub fn unknown_field_path(parent: &str, key: &str) -> String {
    let plain = (1..=32).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if plain
        && crate::core::safety::scan(&Json::Object(vec![(key.to_owned(), Json::Null)])).is_empty()
    {
        path::key(parent, key)
    } else {
        format!("{parent}[<unknown key>]")
    }
}

/// The distinct codes of a violation list, in reporting order.
pub fn codes(violations: &[Violation]) -> Vec<R> {
    let mut codes: Vec<R> = violations.iter().map(|v| v.code).collect();
    crate::core::reason::normalize(&mut codes);
    codes
}

#[cfg(test)]
mod tests;
