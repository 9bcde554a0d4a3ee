//! `POST /api/v1/self/bootstrap`: stateless convenience. Given a public key in
//! any common encoding, return the canonical identifiers and URLs an agent
//! should store, plus exactly how to sign a write. Touches no storage.

use super::body::{self, BodyError};
use super::config::Config;
use super::http::{self, Audience, NO_STORE};
use crate::core::crypto::{PublicKey, SIGNATURE_ALG};
use crate::core::json;
use crate::core::limits::MAX_BODY_BYTES;
use crate::core::reason::ReasonCode;
use serde_json::json;
use worker::{Request, Response, Url};

/// A bootstrap body is one short string; anything bigger is not a key.
const MAX_BOOTSTRAP_BODY: usize = 4096;

pub async fn handle(req: &Request, url: &Url, cfg: &Config) -> worker::Result<Response> {
    let bytes = match body::read_capped(req, MAX_BOOTSTRAP_BODY).await {
        Ok(b) => b,
        Err(BodyError::TooLarge { .. }) => {
            return Ok(http::error(
                ReasonCode::PayloadTooLarge,
                Audience::Read,
                None,
            ))
        }
        Err(BodyError::Read(e)) => return Err(worker::Error::RustError(e)),
    };
    let parsed = match json::parse(&bytes) {
        Ok(v) => v,
        Err(_) => {
            return Ok(http::error(
                ReasonCode::InvalidJson,
                Audience::Read,
                Some("body must be a JSON object {\"public_key\": \"...\"}"),
            ))
        }
    };
    let Some(raw_key) = parsed.get("public_key").and_then(|v| v.as_str()) else {
        return Ok(http::error(
            ReasonCode::BadPublicKey,
            Audience::Read,
            Some("missing string field public_key"),
        ));
    };
    let key = match PublicKey::parse_any(raw_key) {
        Ok(k) => k,
        Err(e) => {
            return Ok(http::error(
                ReasonCode::BadPublicKey,
                Audience::Read,
                Some(&e.to_string()),
            ))
        }
    };
    let agent_id = key.agent_id();
    let public_key = key.to_hex();
    let origin = url.origin().ascii_serialization();
    let head_url = format!("{origin}/self/{agent_id}/head.json");
    let capsule_url = format!("{origin}/self/{agent_id}/capsule.json");
    let body = json!({
        "agent_id": agent_id.as_str(),
        "public_key": public_key,
        "head_url": head_url,
        "capsule_url": capsule_url,
        "signing": {
            "method": "PUT",
            "url": capsule_url,
            "signature_alg": SIGNATURE_ALG,
            "canonicalization": "RFC 8785 (JCS)",
            "message": "SHA-256 over JCS({\"agent_id\": <agent_id>, \"seq\": <seq>, \"capsule\": <capsule>}); sign the 32 raw digest bytes (not their hex)",
            "signature_encoding": "128 lowercase hex characters (the 64-byte Ed25519 signature)",
            "seq": "integer 0..2^53-1, strictly greater than the last accepted seq (head.json has it)",
            "envelope": {
                "agent_id": agent_id.as_str(),
                "public_key": public_key,
                "seq": "<integer>",
                "signature_alg": SIGNATURE_ALG,
                "signature": "<128 hex>",
                "capsule": "<self_capsule_v0 object whose agent_id is this agent_id>"
            }
        },
        "limits": {
            "tier": "free",
            "max_body_bytes": MAX_BODY_BYTES,
            "max_capsule_bytes": cfg.tiers.free.max_capsule_bytes,
            "writes_per_24h": cfg.tiers.free.writes_per_24h,
        }
    });
    http::json(200, &body, NO_STORE)
}
