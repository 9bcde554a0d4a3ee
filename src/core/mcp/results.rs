//! What a tool answers, for both doors: small JSON objects (an MCP client
//! puts every answer into the model's context, so a cursor stands in for a
//! capsule wherever it can). The field names follow the public
//! `@diffdelta/mcp-server` where it has the same tool.
//!
//! A failed call is a tool error (`isError: true`) whose text is
//! [`error`]'s object or [`rejected`]'s: always an `error` code, a `detail`
//! and what to do next, never a protocol error the model cannot see.

use crate::core::history::{CheckName, Report};
use crate::core::reason::{Class, ReasonCode};
use crate::core::record::Head;
use serde_json::{json, Map, Value};

/// Longest list of failures a verify answer carries (the rest are counted).
pub const MAX_FAILURES_SHOWN: usize = 5;

/// A tool's answer: the JSON object, and whether it is a tool error.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The object the text content carries.
    pub body: Value,
    /// True for a tool error (`isError`).
    pub is_error: bool,
}

impl Answer {
    /// A successful answer.
    pub fn ok(body: Value) -> Answer {
        Answer {
            body,
            is_error: false,
        }
    }

    /// A tool error.
    pub fn err(body: Value) -> Answer {
        Answer {
            body,
            is_error: true,
        }
    }

    /// The text content: compact JSON (no indentation: it is read by a model,
    /// and every byte costs tokens).
    pub fn text(&self) -> String {
        self.body.to_string()
    }
}

/// A tool error with a stable `error` code, a one-line `detail` and a `hint`.
pub fn error(code: &str, detail: impl Into<String>, hint: &str) -> Answer {
    Answer::err(json!({ "error": code, "detail": detail.into(), "hint": hint }))
}

/// Bad arguments: the model can fix the call.
pub fn bad_arguments(e: &super::ArgError) -> Answer {
    Answer::err(json!({
        "error": "invalid_arguments",
        "field": e.field,
        "detail": e.detail,
        "hint": "Fix this argument and call again; see the tool's input schema.",
    }))
}

/// `self_read`: the capsule with its cursor.
pub fn read(agent: &str, cursor: &str, capsule: Value, is_own: Option<bool>) -> Answer {
    let mut o = Map::new();
    o.insert("agent_id".into(), agent.into());
    if let Some(own) = is_own {
        o.insert("is_own".into(), own.into());
    }
    o.insert("cursor".into(), cursor.into());
    o.insert("capsule".into(), capsule);
    Answer::ok(Value::Object(o))
}

/// `self_subscribe` when the head still has the caller's etag: nothing to do.
pub fn unchanged(agent: &str, etag: &str) -> Answer {
    Answer::ok(json!({
        "agent_id": agent,
        "changed_since_etag": false,
        "etag": etag,
        "hint": "Unchanged since that etag: do nothing.",
    }))
}

/// `self_subscribe` with a head to show: the head's fields plus the etag to
/// pass next time.
pub fn head(head: &Head, etag: &str, is_own: Option<bool>) -> Answer {
    let mut o = match serde_json::to_value(head) {
        Ok(Value::Object(o)) => o,
        _ => Map::new(),
    };
    if let Some(own) = is_own {
        o.insert("is_own".into(), own.into());
    }
    o.insert("changed_since_etag".into(), true.into());
    o.insert("etag".into(), etag.into());
    o.insert(
        "hint".into(),
        "Pass etag next time; read the capsule (self_read) only if cursor is not the one you hold."
            .into(),
    );
    Answer::ok(Value::Object(o))
}

/// `self_history`: a history.json page without the capsules (each version is
/// its seq, cursor and time; `self_read` or the snapshot URL has the rest; a
/// version withheld from this reader is its `sequence` and `withheld: true`).
pub fn history(page: &Value, is_own: Option<bool>) -> Answer {
    let versions: Vec<Value> = page["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|v| {
            if v["withheld"] == true {
                json!({ "sequence": v["sequence"], "withheld": true })
            } else {
                json!({
                    "seq": v["seq"],
                    "cursor": v["cursor"],
                    "accepted_at": v["accepted_at"],
                })
            }
        })
        .collect();
    let mut o = Map::new();
    o.insert("agent_id".into(), page["agent_id"].clone());
    if let Some(own) = is_own {
        o.insert("is_own".into(), own.into());
    }
    o.insert("version_count".into(), versions.len().into());
    for key in [
        "total_writes",
        "oldest_available_seq",
        "retained",
        "pruned",
        "up_to_date",
        "pruned_since",
        "next",
    ] {
        if let Some(v) = page.get(key).filter(|v| !v.is_null()) {
            o.insert(key.into(), v.clone());
        }
    }
    o.insert("versions".into(), Value::Array(versions));
    Answer::ok(Value::Object(o))
}

/// `self_verify`: valid or not, the level reached, each check, and the first
/// failures. An invalid chain is still a successful call (the answer is the
/// measurement), not a tool error.
pub fn verify(r: &Report, by: &str) -> Answer {
    let mut checks = Map::new();
    let mut failures = Vec::new();
    let mut more = 0usize;
    for name in CheckName::ALL {
        let c = r.checks.get(name);
        checks.insert(
            name.as_str().into(),
            if c.ok { "ok" } else { "failed" }.into(),
        );
        for f in &c.failures {
            if failures.len() < MAX_FAILURES_SHOWN {
                failures.push(
                    json!({ "check": name.as_str(), "sequence": f.sequence, "detail": f.detail }),
                );
            } else {
                more += 1;
            }
        }
    }
    let mut o = json!({
        "agent_id": r.agent_id,
        "valid": r.valid,
        "level": r.level,
        "verified_by": by,
        "seq": r.seq,
        "cursor": r.cursor,
        "entries": r.window.entries,
        "checks": checks,
    });
    if !failures.is_empty() {
        o["failures"] = Value::Array(failures);
    }
    if more > 0 {
        o["more_failures"] = more.into();
    }
    if !r.warnings.is_empty() {
        o["warnings"] = r.warnings.clone().into();
    }
    Answer::ok(o)
}

/// A refused write, from the service's rejection body (or the local
/// pre-check's, in the same shape) and its HTTP status: a tool error that
/// names every reason code and what to do about each.
pub fn rejected(status: u16, body: &Value, saved_locally: bool) -> Answer {
    let codes: Vec<&str> = body["reason_codes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let known: Vec<ReasonCode> = codes
        .iter()
        .filter_map(|c| ReasonCode::from_wire(c))
        .collect();
    let mut what_to_do: Vec<String> = Vec::new();
    for c in &known {
        let a = c.bot_action().to_string();
        if !what_to_do.contains(&a) {
            what_to_do.push(a);
        }
    }
    let class = known.first().map(|c| c.class());
    let mut o = json!({
        "accepted": false,
        "error": "write_rejected",
        "http_status": status,
        "reason_codes": codes,
        "detail": body["detail"],
        "what_to_do": what_to_do,
    });
    for key in [
        "retry_after_sec",
        "next_write_at",
        "writes",
        "max_bytes",
        "observed_bytes",
    ] {
        if let Some(v) = body.get(key).filter(|v| !v.is_null()) {
            o[key] = v.clone();
        }
    }
    if let Some(f) = body["findings"].as_array().filter(|f| !f.is_empty()) {
        o["findings"] = Value::Array(f.iter().take(MAX_FAILURES_SHOWN).cloned().collect());
    }
    if body["local"] == true {
        // The client's own pre-check refused it: nothing reached the service.
        o["sent"] = false.into();
    }
    if saved_locally {
        o["saved_locally"] = true.into();
        o["hint"] = match class {
            Some(Class::BackOff) => {
                "Your capsule is saved locally. Call self_checkpoint (no arguments) after next_write_at to publish it."
            }
            Some(Class::Signature) => {
                "Your capsule is saved locally, but the service refused the signature: check the identity (self_bootstrap) before retrying."
            }
            _ => "Your capsule is saved locally. Fix what reason_codes name and call self_write with the corrected capsule.",
        }
        .into();
    }
    Answer::err(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejection_names_each_code_and_its_action_once() {
        let body = json!({
            "accepted": false,
            "reason_codes": ["unsafe_content", "schema_version"],
            "detail": "x",
            "findings": [{"path": "$.self_motto"}],
        });
        let a = rejected(422, &body, true);
        assert!(a.is_error);
        assert_eq!(
            a.body["reason_codes"],
            json!(["unsafe_content", "schema_version"])
        );
        assert_eq!(a.body["http_status"], 422);
        assert!(!a.body["what_to_do"].as_array().unwrap().is_empty());
        assert_eq!(a.body["saved_locally"], true);
        assert!(a.body["hint"].as_str().unwrap().contains("self_write"));
    }

    #[test]
    fn a_back_off_rejection_says_when() {
        let body = json!({ "reason_codes": ["write_quota_exceeded"], "retry_after_sec": 60,
            "next_write_at": "2026-01-01T00:00:00Z" });
        let a = rejected(429, &body, true);
        assert_eq!(a.body["next_write_at"], "2026-01-01T00:00:00Z");
        assert!(a.body["hint"].as_str().unwrap().contains("next_write_at"));
    }

    #[test]
    fn history_drops_the_capsules() {
        let page = json!({
            "agent_id": "a", "total_writes": 2, "retained": 2, "pruned": 0, "next": null,
            "versions": [{ "seq": 2, "cursor": "sha256:x", "accepted_at": "t", "capsule": { "big": 1 } }]
        });
        let a = history(&page, Some(true));
        assert_eq!(
            a.body["versions"],
            json!([{ "seq": 2, "cursor": "sha256:x", "accepted_at": "t" }])
        );
        assert_eq!(a.body["version_count"], 1);
        assert!(a.body.get("next").is_none());
        assert!(!a.text().contains("big"));
    }
}
