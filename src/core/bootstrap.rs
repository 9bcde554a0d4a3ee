//! `POST /api/v1/self/bootstrap`: given a public key in any common encoding,
//! the canonical identifiers and URLs an agent should store, plus exactly how
//! to sign a write. Stateless and pure: the Worker only reads the body (capped
//! at [`MAX_BOOTSTRAP_BODY`]) and supplies the public origin.
//!
//! Fields are declared in alphabetical order, the order the answer has
//! always been serialised in.

use crate::core::crypto::{PublicKey, SIGNATURE_ALG};
use crate::core::json;
use crate::core::limits::{TierLimits, MAX_BODY_BYTES};
use crate::core::reason::{ReasonCode, Refusal};
use crate::core::urls::Doc;
use serde::Serialize;

/// A bootstrap body is one short string; anything bigger is not a key.
pub const MAX_BOOTSTRAP_BODY: usize = 4096;

/// The 200 answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bootstrap {
    /// SHA-256 of the public key, 64 lowercase hex.
    pub agent_id: String,
    /// Absolute URL of capsule.json.
    pub capsule_url: String,
    /// Absolute URL of head.json.
    pub head_url: String,
    /// The free tier's limits (every agent starts there).
    pub limits: Limits,
    /// The key, 64 lowercase hex.
    pub public_key: String,
    /// How to sign a write.
    pub signing: Signing,
}

/// `limits` of a bootstrap answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// The PUT body cap.
    pub max_body_bytes: usize,
    /// The tier's cap on the canonical capsule.
    pub max_capsule_bytes: usize,
    /// Always `free`.
    pub tier: &'static str,
    /// Accepted writes per rolling 24 hours.
    pub writes_per_24h: u32,
}

/// `signing` of a bootstrap answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signing {
    /// Always RFC 8785.
    pub canonicalization: &'static str,
    /// The PUT body, with placeholders for what the agent fills in.
    pub envelope: Envelope,
    /// What is signed.
    pub message: &'static str,
    /// Always `PUT`.
    pub method: &'static str,
    /// The seq rule.
    pub seq: &'static str,
    /// Always `ed25519`.
    pub signature_alg: &'static str,
    /// How the signature is written.
    pub signature_encoding: &'static str,
    /// Where to PUT (the capsule URL).
    pub url: String,
}

/// `signing.envelope` of a bootstrap answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Envelope {
    /// This agent's id.
    pub agent_id: String,
    /// Placeholder for the capsule.
    pub capsule: &'static str,
    /// This agent's key.
    pub public_key: String,
    /// Placeholder for the seq.
    pub seq: &'static str,
    /// Placeholder for the signature.
    pub signature: &'static str,
    /// Always `ed25519`.
    pub signature_alg: &'static str,
}

/// Answers a bootstrap body (at most [`MAX_BOOTSTRAP_BODY`] bytes, which the
/// Worker enforces while reading). `origin` is the service's public origin
/// (`https://host[:port]`, no trailing slash).
pub fn answer(body: &[u8], origin: &str, free: &TierLimits) -> Result<Bootstrap, Refusal> {
    let refuse = |code, detail: &str| Refusal::new(code, detail);
    let parsed = json::parse(body).map_err(|_| {
        refuse(
            ReasonCode::InvalidJson,
            "body must be a JSON object {\"public_key\": \"...\"}",
        )
    })?;
    let raw_key = parsed
        .get("public_key")
        .and_then(|v| v.as_str())
        .ok_or_else(|| refuse(ReasonCode::BadPublicKey, "missing string field public_key"))?;
    let key = PublicKey::parse_any(raw_key)
        .map_err(|e| refuse(ReasonCode::BadPublicKey, &e.to_string()))?;
    let agent_id = key.agent_id().to_string();
    let public_key = key.to_hex();
    let capsule_url = format!("{origin}{}", Doc::Capsule.path(&agent_id));
    Ok(Bootstrap {
        head_url: format!("{origin}{}", Doc::Head.path(&agent_id)),
        limits: Limits {
            max_body_bytes: MAX_BODY_BYTES,
            max_capsule_bytes: free.max_capsule_bytes,
            tier: "free",
            writes_per_24h: free.writes_per_24h,
        },
        signing: Signing {
            canonicalization: "RFC 8785 (JCS)",
            envelope: Envelope {
                agent_id: agent_id.clone(),
                capsule: "<self_capsule_v0 object whose agent_id is this agent_id>",
                public_key: public_key.clone(),
                seq: "<integer>",
                signature: "<128 hex>",
                signature_alg: SIGNATURE_ALG,
            },
            message: "SHA-256 over JCS({\"agent_id\": <agent_id>, \"seq\": <seq>, \"capsule\": <capsule>}); sign the 32 raw digest bytes (not their hex)",
            method: "PUT",
            seq: "integer 0..2^53-1, strictly greater than the last accepted seq (head.json has it); 2^53-1 is the last write an agent id can make",
            signature_alg: SIGNATURE_ALG,
            signature_encoding: "128 lowercase hex characters (the 64-byte Ed25519 signature)",
            url: capsule_url.clone(),
        },
        agent_id,
        capsule_url,
        public_key,
    })
}

/// Reads a configured public origin (`SELFCAP_PUBLIC_ORIGIN`):
/// `http(s)://host[:port]` with nothing after it (a trailing `/` is
/// dropped). `None` when it is anything else, so a typo cannot put a path
/// or a query into every URL an agent stores.
pub fn parse_origin(raw: &str) -> Option<String> {
    let raw = raw.trim();
    let raw = raw.strip_suffix('/').unwrap_or(raw);
    let rest = raw
        .strip_prefix("https://")
        .or_else(|| raw.strip_prefix("http://"))?;
    let ok = !rest.is_empty()
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    ok.then(|| raw.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::crypto::AgentKey;
    use crate::core::limits::TierTable;

    fn free() -> TierLimits {
        TierTable::default().free
    }

    #[test]
    fn any_key_encoding_gives_the_same_identity_and_absolute_urls() {
        let key = AgentKey::from_seed(&[7; 32]).public_key();
        let hex = key.to_hex();
        let id = key.agent_id().to_string();
        for raw in [hex.clone(), hex.to_uppercase()] {
            let body = format!("{{\"public_key\":\"{raw}\"}}");
            let a = answer(body.as_bytes(), "https://capsule.example", &free()).unwrap();
            assert_eq!(a.agent_id, id);
            assert_eq!(a.public_key, hex);
            assert_eq!(
                a.head_url,
                format!("https://capsule.example/self/{id}/head.json")
            );
            assert_eq!(a.signing.url, a.capsule_url);
            assert_eq!(a.signing.envelope.agent_id, id);
            assert_eq!(a.limits.max_capsule_bytes, free().max_capsule_bytes);
        }
    }

    #[test]
    fn the_answer_serialises_with_sorted_keys_as_it_always_has() {
        let key = AgentKey::from_seed(&[1; 32]).public_key().to_hex();
        let a = answer(
            format!("{{\"public_key\":\"{key}\"}}").as_bytes(),
            "http://x",
            &free(),
        )
        .unwrap();
        let text = serde_json::to_string(&a).unwrap();
        let reparsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        // serde_json's map sorts keys: equal text means the declared order
        // is the sorted order at every level.
        assert_eq!(serde_json::to_string(&reparsed).unwrap(), text);
    }

    #[test]
    fn bad_bodies_are_refused_with_their_codes() {
        let cases: [(&[u8], ReasonCode); 5] = [
            (b"not json", ReasonCode::InvalidJson),
            (
                b"{\"public_key\":1,\"public_key\":2}",
                ReasonCode::InvalidJson,
            ),
            (b"{}", ReasonCode::BadPublicKey),
            (b"{\"public_key\":42}", ReasonCode::BadPublicKey),
            (b"{\"public_key\":\"abc\"}", ReasonCode::BadPublicKey),
        ];
        for (body, code) in cases {
            let r = answer(body, "http://x", &free()).unwrap_err();
            assert_eq!(r.code, code, "{}", String::from_utf8_lossy(body));
            assert!(r.detail.as_ref().is_some_and(|d| !d.is_empty()));
        }
    }

    #[test]
    fn only_a_bare_http_origin_is_accepted() {
        assert_eq!(
            parse_origin("https://Capsule.Example/").as_deref(),
            Some("https://capsule.example")
        );
        assert_eq!(
            parse_origin("http://127.0.0.1:8787").as_deref(),
            Some("http://127.0.0.1:8787")
        );
        assert_eq!(
            parse_origin("http://[::1]:8787").as_deref(),
            Some("http://[::1]:8787")
        );
        for bad in [
            "",
            "capsule.example",
            "ftp://capsule.example",
            "https://",
            "https://capsule.example/api",
            "https://capsule.example?x=1",
            "https://user@capsule.example",
            "https://capsule.example#f",
        ] {
            assert_eq!(parse_origin(bad), None, "{bad}");
        }
    }
}
