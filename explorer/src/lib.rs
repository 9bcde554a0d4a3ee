//! The Capsule Explorer's wasm (`/explorer`): the core's own offline
//! verifier, version diff, recovery-prompt renderer and meta.json reader, exported to the
//! page's JavaScript. Nothing is decided here: each function parses its
//! text arguments, calls the core, and returns JSON text (or the prompt).
//! The same core functions run natively in `selfcap verify` and `selfcap
//! rehydrate`, so the page and the CLI cannot disagree.

use self_capsule::core::diff;
use self_capsule::core::history::{self, Keyring, VerifyOptions};
use self_capsule::core::json::{self, Json};
use self_capsule::core::operator::meta::MetaBody;
use self_capsule::core::render::{self, Format};
use wasm_bindgen::prelude::*;

/// Why a call could not be answered (shown to the reader as is).
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

/// Verifies an export bundle (export.json text) and lays it out per entry:
/// the `Timeline` of `core::history::timeline` as JSON text (`report`,
/// `head`, `entries` oldest first with their `failures`, `general`).
///
/// `keys`: a `GET /api/v1/self/keys` body to trust instead of the keys the
/// bundle carries (which are only self-asserted; the report says so when
/// they are used). `agent_id`: the agent the bundle must be about.
/// `now_ms`: the clock for `verified_at`.
#[wasm_bindgen]
pub fn explore(
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
    let t = history::timeline(&bundle, &opts);
    serde_json::to_string(&t).map_err(|e| Refusal(e.to_string()))
}

/// What changed from one capsule version to another (JSON texts): the
/// `core::diff::Change` list as JSON text.
#[wasm_bindgen]
pub fn diff(before: &str, after: &str) -> Result<String, Refusal> {
    let changes = diff::diff(
        &parse("the older version", before)?,
        &parse("the newer version", after)?,
    );
    serde_json::to_string(&changes).map_err(|e| Refusal(e.to_string()))
}

/// The deterministic recovery prompt of a capsule (JSON text), exactly what
/// `selfcap rehydrate` prints (plain text format).
#[wasm_bindgen]
pub fn recovery_prompt(capsule: &str) -> Result<String, Refusal> {
    let value = parse("the capsule", capsule)?;
    render::recovery_prompt(&value, Format::Text).map_err(|e| Refusal(e.to_string()))
}

/// An agent's meta.json text (docs/PROTOCOL.md §16) as the page shows it:
/// the body as served, checked against the protocol's shape, with
/// `refusals.by_reason_code` as a list the most frequent code first, each
/// with its bot action from the reason-code table (`core::operator::meta`'s
/// `by_count`, which `selfcap meta` prints in the same order).
#[wasm_bindgen]
pub fn meta_summary(meta: &str) -> Result<String, Refusal> {
    let body: MetaBody = serde_json::from_str(meta)
        .map_err(|e| Refusal(format!("meta.json is not what the protocol describes: {e}")))?;
    let mut v = serde_json::to_value(&body).map_err(|e| Refusal(e.to_string()))?;
    v["refusals"]["by_reason_code"] =
        serde_json::to_value(body.refusals.by_count()).map_err(|e| Refusal(e.to_string()))?;
    Ok(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_json_with_a_reason() {
        assert_eq!(
            explore("{", None, None, None)
                .unwrap_err()
                .0
                .split(':')
                .next(),
            Some("the export is not valid JSON")
        );
        assert!(explore("{}", Some("[]".into()), None, None)
            .unwrap_err()
            .0
            .starts_with("the keyring is not usable"));
        assert!(recovery_prompt("{}")
            .unwrap_err()
            .0
            .contains("schema_version"));
    }

    #[test]
    fn garbage_bundles_verify_to_level_none() {
        let t: serde_json::Value =
            serde_json::from_str(&explore(r#"{"entries":[1]}"#, None, None, Some(0.0)).unwrap())
                .unwrap();
        assert_eq!(t["report"]["level"], "none");
        assert_eq!(t["entries"][0]["entry"], serde_json::Value::Null);
        assert_eq!(t["entries"][0]["failures"][0]["check"], "schema");
    }

    #[test]
    fn diff_is_the_cores() {
        let out = diff(r#"{"a":1}"#, r#"{"a":2}"#).unwrap();
        assert_eq!(
            out,
            r#"[{"path":"a","kind":"changed","before":1,"after":2}]"#
        );
    }

    #[test]
    fn meta_summary_ranks_codes_with_their_actions_and_refuses_other_shapes() {
        let meta = r#"{"agent_id":"ab","tier":"free","paid_until":null,
            "writes":{"total":2,"first_at":null,"last_at":null,"in_window":{"used":1,"limit":50,"reset_at":null}},
            "refusals":{"total":3,"last_24h":3,"by_reason_code":{"unsafe_content":1,"unknown_field":2},
                "last":{"at":"2026-02-10T05:00:01Z","reason_codes":["unsafe_content"]}},
            "history":null,"keys":null,"as_of":"2026-02-10T05:00:02Z"}"#;
        let v: serde_json::Value = serde_json::from_str(&meta_summary(meta).unwrap()).unwrap();
        let codes = &v["refusals"]["by_reason_code"];
        assert_eq!(codes[0]["code"], "unknown_field");
        assert_eq!(codes[0]["count"], 2);
        assert!(codes[1]["action"].as_str().unwrap().len() > 10);
        assert_eq!(v["refusals"]["last"]["reason_codes"][0], "unsafe_content");
        assert!(meta_summary("{}")
            .unwrap_err()
            .0
            .starts_with("meta.json is not"));
    }
}
