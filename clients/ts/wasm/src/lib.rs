//! The npm package `selfcap`'s wasm (`clients/ts/`): the Self Capsule core's
//! rules for every JavaScript runtime. Nothing is decided here: each
//! function parses its text arguments, calls the core, and returns text
//! (JSON, canonical bytes, a hex seed), exactly what the Worker and the
//! native `selfcap` CLI compute with the same functions:
//!
//! - RFC 8785 canonical text and the cursor: `core::jcs`;
//! - the local pre-check: `core::write::check_capsule_in_tier` (schema,
//!   safety, then the tier's default size cap: the service's own checks);
//! - keys, the agent id and the write envelope: `core::crypto`;
//! - signed reads (RFC 9421): `core::read_auth::sign_read`;
//! - offline verification of an export: `core::history::verify_export_with`;
//! - the recovery prompt: `core::render`.
//!
//! Seeds cross the boundary as hex on each call: the wasm keeps no state,
//! so there is nothing to free on the JavaScript side.

use self_capsule::core::crypto::AgentKey;
use self_capsule::core::history::{self, Keyring, VerifyOptions};
use self_capsule::core::jcs;
use self_capsule::core::json::{self, Json, MAX_SAFE_INTEGER};
use self_capsule::core::limits::{Tier, TierTable};
use self_capsule::core::read_auth;
use self_capsule::core::reason::ReasonCode;
use self_capsule::core::render::{self, Format};
use self_capsule::core::write;
use serde_json::json;
use wasm_bindgen::prelude::*;

/// Why a call could not be answered (thrown as a JavaScript `Error`).
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal(pub String);

impl From<Refusal> for JsValue {
    fn from(r: Refusal) -> JsValue {
        JsError::new(&r.0).into()
    }
}

fn parse(what: &str, text: &str) -> Result<Json, Refusal> {
    json::parse_str(text).map_err(|e| Refusal(format!("{what} is not valid JSON: {e}")))
}

fn key_of(seed_hex: &str) -> Result<AgentKey, Refusal> {
    let mut seed = [0u8; 32];
    hex::decode_to_slice(seed_hex, &mut seed)
        .map_err(|_| Refusal("a seed is 64 hexadecimal characters (32 bytes)".into()))?;
    Ok(AgentKey::from_seed(&seed))
}

fn text(v: &impl serde::Serialize) -> Result<String, Refusal> {
    serde_json::to_string(v).map_err(|e| Refusal(e.to_string()))
}

/// The RFC 8785 canonical text of a JSON text.
#[wasm_bindgen]
pub fn canonicalize(value: &str) -> Result<String, Refusal> {
    Ok(jcs::canonicalize(&parse("the value", value)?))
}

/// A capsule's cursor: `sha256:` + hex SHA-256 of its RFC 8785 bytes.
#[wasm_bindgen]
pub fn cursor(capsule: &str) -> Result<String, Refusal> {
    Ok(jcs::cursor(&parse("the capsule", capsule)?))
}

/// What a well-behaved bot does for each code (a JSON array of codes in,
/// a JSON array of distinct actions out, in the codes' order; unknown codes
/// are skipped): `core::reason`'s table, the one the docs print.
#[wasm_bindgen]
pub fn what_to_do(reason_codes: &str) -> Result<String, Refusal> {
    let codes = parse("the reason codes", reason_codes)?;
    let mut actions: Vec<&str> = Vec::new();
    for c in codes.as_array().unwrap_or(&[]) {
        if let Some(code) = c.as_str().and_then(ReasonCode::from_wire) {
            if !actions.contains(&code.bot_action()) {
                actions.push(code.bot_action());
            }
        }
    }
    text(&actions)
}

/// The service's checks on a capsule itself, in its order: schema, safety,
/// then the size cap of `tier` (`free`, `pro`, `plus`; the defaults, which
/// an operator may have changed). `null` when it passes, else
/// `{"status": <HTTP status>, "body": <the PUT's refusal body>}`.
#[wasm_bindgen]
pub fn check(capsule: &str, tier: &str) -> Result<String, Refusal> {
    let Some(tier) = Tier::from_name(tier) else {
        return Err(Refusal(format!("unknown tier {tier:?} (free, pro, plus)")));
    };
    let value = match json::parse_str(capsule) {
        Ok(v) => v,
        Err(e) => {
            let code = ReasonCode::InvalidJson;
            return text(&json!({
                "status": code.http_status(),
                "body": {"accepted": false, "reason_codes": [code.as_str()], "detail": e.to_string()},
            }));
        }
    };
    let tiers = TierTable::default();
    match write::check_capsule_in_tier(&value, tier, tiers.get(tier)) {
        Ok(_) => Ok("null".into()),
        Err(r) => text(&json!({"status": r.status(), "body": r})),
    }
}

/// A fresh random seed (hex), from Web Crypto.
#[wasm_bindgen]
pub fn generate_seed() -> Result<String, Refusal> {
    let key = AgentKey::generate().map_err(|e| Refusal(format!("no randomness: {e}")))?;
    Ok(hex::encode(key.seed()))
}

/// `{"agent_id", "public_key"}` of a seed.
#[wasm_bindgen]
pub fn identity(seed_hex: &str) -> Result<String, Refusal> {
    let key = key_of(seed_hex)?;
    text(&json!({"agent_id": key.agent_id().as_str(), "public_key": key.public_key().to_hex()}))
}

/// The PUT body for `capsule` at `seq`, signed with the seed's key.
#[wasm_bindgen]
pub fn sign_envelope(seed_hex: &str, seq: f64, capsule: &str) -> Result<String, Refusal> {
    if !(seq.fract() == 0.0 && seq >= 0.0 && seq <= MAX_SAFE_INTEGER as f64) {
        return Err(Refusal(format!(
            "seq must be an integer from 0 to {MAX_SAFE_INTEGER}"
        )));
    }
    let key = key_of(seed_hex)?;
    text(&key.sign_envelope(seq as u64, &parse("the capsule", capsule)?))
}

/// The headers of a signed read of `url` (RFC 9421; lower-case names): a
/// JSON object. A fresh nonce and `created` (now) every call.
#[wasm_bindgen]
pub fn sign_read(seed_hex: &str, method: &str, url: &str) -> Result<String, Refusal> {
    let key = key_of(seed_hex)?;
    let nonce =
        read_auth::fresh_nonce().map_err(|e| Refusal(format!("no randomness for a nonce: {e}")))?;
    let headers = read_auth::sign_read(&key, method, url, nonce)
        .map_err(|e| Refusal(format!("cannot sign the read of {url}: {e}")))?;
    let map: serde_json::Map<String, serde_json::Value> = headers
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    text(&map)
}

/// Verifies an export bundle (export.json text) offline: the verify report
/// as JSON text. `keys`: a `GET /api/v1/self/keys` body to trust instead of
/// the keys the bundle carries. `agent_id`: the agent it must be about.
#[wasm_bindgen]
pub fn verify_export(
    bundle: &str,
    keys: Option<String>,
    agent_id: Option<String>,
    now_ms: Option<f64>,
) -> Result<String, Refusal> {
    let bundle = parse("the export", bundle)?;
    let trusted_keys = match keys {
        None => None,
        Some(k) => Some(
            Keyring::from_keys_doc(&parse("the keyring", &k)?)
                .map_err(|p| Refusal(format!("the keyring is not usable: {}", p.join("; "))))?,
        ),
    };
    let opts = VerifyOptions {
        trusted_keys,
        agent_id,
        now_ms: now_ms
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| n as u64),
    };
    text(&history::verify_export_with(&bundle, &opts))
}

/// The deterministic recovery prompt of a capsule (JSON text), exactly what
/// `selfcap rehydrate` prints.
#[wasm_bindgen]
pub fn recovery_prompt(capsule: &str) -> Result<String, Refusal> {
    let value = parse("the capsule", capsule)?;
    render::recovery_prompt(&value, Format::Text).map_err(|e| Refusal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_text_and_cursor_are_the_cores() {
        assert_eq!(
            canonicalize(r#"{"b":1e2,"a":[true]}"#).unwrap(),
            r#"{"a":[true],"b":100}"#
        );
        assert!(cursor("{}").unwrap().starts_with("sha256:"));
        assert!(canonicalize(r#"{"a":1,"a":2}"#).is_err());
    }

    #[test]
    fn check_refuses_with_the_services_codes() {
        let out: serde_json::Value = serde_json::from_str(&check("{}", "free").unwrap()).unwrap();
        assert_eq!(out["status"], 422);
        assert_eq!(out["body"]["accepted"], false);
        assert!(!out["body"]["reason_codes"].as_array().unwrap().is_empty());
        assert!(check("{}", "gold").is_err());
        let deep = "[".repeat(40) + &"]".repeat(40);
        let out: serde_json::Value = serde_json::from_str(&check(&deep, "free").unwrap()).unwrap();
        assert_eq!(out["body"]["reason_codes"][0], "invalid_json");
    }

    #[test]
    fn signed_reads_verify_with_the_services_verifier() {
        let seed = hex::encode([7u8; 32]);
        let url = "https://self.example/self/aa/capsule.json";
        let h: serde_json::Value =
            serde_json::from_str(&sign_read(&seed, "GET", url).unwrap()).unwrap();
        let lookup = |name: &str| h[name].as_str().map(str::to_string);
        let req = read_auth::SignedRead {
            method: "GET",
            target_uri: url,
            header: &lookup,
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let reader = read_auth::verify(&req, now).unwrap();
        assert_eq!(reader.agent_id, key_of(&seed).unwrap().agent_id());
    }

    #[test]
    fn seeds_and_seqs_are_checked() {
        assert!(identity("00").is_err());
        let seed = hex::encode([1u8; 32]);
        assert!(sign_envelope(&seed, 1.5, "{}").is_err());
        assert!(sign_envelope(&seed, -1.0, "{}").is_err());
        assert!(sign_envelope(&seed, 2.0, "{}")
            .unwrap()
            .contains(r#""seq":2"#));
        let actions: Vec<String> =
            serde_json::from_str(&what_to_do(r#"["replay_seq","nope","replay_seq"]"#).unwrap())
                .unwrap();
        assert_eq!(actions.len(), 1);
    }
}
