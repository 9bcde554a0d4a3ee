//! The service's response bodies as typed values (docs/PROTOCOL.md §4).
//! Unknown fields are ignored, so newer servers stay readable.

use crate::core::reason::{Class, ReasonCode};
use crate::core::write::Rejection;
use serde::{Deserialize, Serialize};

/// head.json, its `writes`, and the accepted-PUT body: the core's own types,
/// so the client and the service can never disagree about their shape.
pub use crate::core::record::{Head, WritesView as Writes};
pub use crate::core::write::AcceptedBody as Accepted;

/// The bootstrap answer (the parts a client stores).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bootstrap {
    /// The agent id the service derived from the public key sent; the
    /// client refuses an answer naming another.
    pub agent_id: String,
    /// The public key echoed back (hex), checked the same way.
    pub public_key: String,
    /// Where this agent's head.json lives.
    pub head_url: String,
    /// Where this agent's capsule.json lives.
    pub capsule_url: String,
    /// The tier limits, in the service's own shape (stored, not interpreted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<serde_json::Value>,
}

/// A refused write: the service's rejection body plus the HTTP status, or
/// the same shape produced by the client's local pre-check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejected {
    /// HTTP status (for a local pre-check: the status the service would use).
    #[serde(default)]
    pub status: u16,
    /// Every reason the write was refused (wire names, as the service
    /// sent them: a code this client does not know is kept, not dropped).
    pub reason_codes: Vec<String>,
    /// One human-readable line about the refusal.
    #[serde(default)]
    pub detail: Option<String>,
    /// How long to wait before writing again (back-off rejections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_sec: Option<u64>,
    /// When a write is allowed again (RFC 3339; back-off rejections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_write_at: Option<String>,
    /// The safety scanner's findings (`unsafe_content`): where, which rule,
    /// never the offending text itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<serde_json::Value>,
    /// The size limit that was exceeded (`capsule_too_large` and friends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// The size that exceeded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_bytes: Option<u64>,
    /// True when the client refused the write itself and sent nothing.
    #[serde(default)]
    pub local: bool,
}

impl Rejected {
    /// A rejection the core decided on this machine (the local pre-check:
    /// nothing was sent), in the shape of the body the service would answer.
    pub fn refused_locally(r: Rejection) -> Rejected {
        Rejected {
            status: r.status(),
            reason_codes: r
                .reason_codes
                .iter()
                .map(|c| c.as_str().to_owned())
                .collect(),
            detail: Some(r.detail),
            retry_after_sec: r.retry_after_sec,
            next_write_at: r.next_write_at,
            findings: r
                .findings
                .iter()
                .filter_map(|f| serde_json::to_value(f).ok())
                .collect(),
            max_bytes: r.max_bytes.map(|b| b as u64),
            observed_bytes: r.observed_bytes,
            local: true,
        }
    }

    /// The known reason codes, in the order given.
    pub fn codes(&self) -> Vec<ReasonCode> {
        self.reason_codes
            .iter()
            .filter_map(|c| ReasonCode::from_wire(c))
            .collect()
    }

    /// What to do about it: the first known code's class, else a guess from
    /// the status (a newer server may send a code this client does not know).
    pub fn class(&self) -> Class {
        match self.codes().first() {
            Some(c) => c.class(),
            None => match self.status {
                429 => Class::BackOff,
                401 => Class::Signature,
                s if s >= 500 => Class::Server,
                _ => Class::FixPayload,
            },
        }
    }

    /// One line: status, codes and the service's detail.
    pub fn summary(&self) -> String {
        let codes = if self.reason_codes.is_empty() {
            "no reason code".to_string()
        } else {
            self.reason_codes.join(", ")
        };
        let origin = if self.local {
            "refused locally, nothing sent".to_string()
        } else {
            format!("HTTP {}", self.status)
        };
        match &self.detail {
            Some(d) if !d.is_empty() => format!("write rejected ({origin}: {codes}): {d}"),
            _ => format!("write rejected ({origin}: {codes})"),
        }
    }

    /// For every code: `code: bot action` (the spec's table, from the core).
    pub fn actions(&self) -> Vec<(String, &'static str)> {
        self.reason_codes
            .iter()
            .map(|c| {
                let action = ReasonCode::from_wire(c)
                    .map(ReasonCode::bot_action)
                    .unwrap_or("Unknown code (newer service?): see docs/PROTOCOL.md.");
                (c.clone(), action)
            })
            .collect()
    }

    /// The findings as short lines (`path: class (rule[, decoded from via])` or
    /// `path: code: message`).
    pub fn finding_lines(&self) -> Vec<String> {
        self.findings
            .iter()
            .map(|f| {
                let s = |k: &str| f.get(k).and_then(|v| v.as_str()).unwrap_or("");
                if f.get("class").is_some() {
                    let via = match s("via") {
                        "" => String::new(),
                        v => format!(", decoded from {v}"),
                    };
                    format!("{}: {} ({}{via})", s("path"), s("class"), s("rule"))
                } else {
                    format!("{}: {}: {}", s("path"), s("code"), s("message"))
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(codes: &[&str], status: u16) -> Rejected {
        Rejected {
            status,
            reason_codes: codes.iter().map(|c| c.to_string()).collect(),
            detail: None,
            retry_after_sec: None,
            next_write_at: None,
            findings: vec![],
            max_bytes: None,
            observed_bytes: None,
            local: false,
        }
    }

    #[test]
    fn class_comes_from_the_first_known_code() {
        assert_eq!(
            rejected(&["write_quota_exceeded"], 429).class(),
            Class::BackOff
        );
        assert_eq!(rejected(&["bad_signature"], 401).class(), Class::Signature);
        assert_eq!(
            rejected(&["unknown_field", "self_motto"], 422).class(),
            Class::FixPayload
        );
        assert_eq!(rejected(&["replay_seq"], 409).class(), Class::FixPayload);
        // Unknown codes fall back to the status.
        assert_eq!(rejected(&["from_the_future"], 429).class(), Class::BackOff);
        assert_eq!(rejected(&[], 503).class(), Class::Server);
    }

    #[test]
    fn parses_a_service_rejection_and_lists_actions() {
        let body = r#"{"accepted":false,"reason_codes":["unsafe_content"],"detail":"x",
            "findings":[{"class":"injection","rule":"r1","path":"$.self_motto"},
                {"class":"secret","rule":"r2","path":"$.pointers.notes[0].value","via":"base64"}],
            "extra":1}"#;
        let mut r: Rejected = serde_json::from_str(body).unwrap();
        r.status = 422;
        assert_eq!(
            r.finding_lines(),
            [
                "$.self_motto: injection (r1)",
                "$.pointers.notes[0].value: secret (r2, decoded from base64)"
            ]
        );
        let actions = r.actions();
        assert_eq!(actions[0].0, "unsafe_content");
        assert_eq!(actions[0].1, ReasonCode::UnsafeContent.bot_action());
        assert!(r.summary().contains("HTTP 422: unsafe_content"));
    }
}
