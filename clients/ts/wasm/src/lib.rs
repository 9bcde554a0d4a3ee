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
//! - the recovery prompt: `core::render`;
//! - key rotation (docs/PROTOCOL.md §14): events built and signed with
//!   `core::key_log::KeyEvent::sign`, checked before sending with
//!   `KeyState::check` against the served log as `verify_key_log` folds it,
//!   and the pin (`Pin::of`, `Pin::check`: consistent, rollback, fork).
//!
//! Seeds cross the boundary as hex on each call: the wasm keeps no state,
//! so there is nothing to free on the JavaScript side.

use self_capsule::core::crypto::{AgentId, AgentKey};
use self_capsule::core::history::{self, Keyring, VerifyOptions};
use self_capsule::core::jcs;
use self_capsule::core::json::{self, Json, MAX_SAFE_INTEGER};
use self_capsule::core::key_log::{
    self as key_log, verify_key_log, Change, Digest, KeyEvent, KeyState, LastGood, Pin, PinCheck,
    Prefix, RotationAuthority, SealedKeyRecord, Supersedes,
};
use self_capsule::core::limits::{Tier, TierTable};
use self_capsule::core::read_auth;
use self_capsule::core::reason::{ReasonCode, Refusal as CoreRefusal};
use self_capsule::core::render::{self, Format};
use self_capsule::core::write::{self, Signature};
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

// --- Key rotation (docs/PROTOCOL.md §14) ---------------------------------

fn agent_of(agent_id: &str) -> Result<AgentId, Refusal> {
    AgentId::parse(agent_id)
        .ok_or_else(|| Refusal("an agent id is 64 lowercase hexadecimal characters".into()))
}

fn seq_of(seq: f64) -> Result<u64, Refusal> {
    if !(seq.fract() == 0.0 && seq >= 0.0 && seq <= MAX_SAFE_INTEGER as f64) {
        return Err(Refusal(format!(
            "seq must be an integer from 0 to {MAX_SAFE_INTEGER}"
        )));
    }
    Ok(seq as u64)
}

fn now_of(now_ms: f64) -> u64 {
    if now_ms.is_finite() && now_ms >= 0.0 {
        now_ms as u64
    } else {
        0
    }
}

fn keyring_of(text: &str) -> Result<Keyring, Refusal> {
    Keyring::from_keys_doc(&parse("the keyring", text)?)
        .map_err(|p| Refusal(format!("the keyring is not usable: {}", p.join("; "))))
}

/// The PUT body for `capsule` at `seq`, signed with the seed's key as
/// `agent_id`: after a rotation the current key signs for the agent, whose
/// id (its genesis key's SHA-256) never changes.
#[wasm_bindgen]
pub fn sign_envelope_as(
    seed_hex: &str,
    agent_id: &str,
    seq: f64,
    capsule: &str,
) -> Result<String, Refusal> {
    let key = key_of(seed_hex)?;
    let agent = agent_of(agent_id)?;
    text(&key.sign_envelope_as(&agent, seq_of(seq)?, &parse("the capsule", capsule)?))
}

/// The headers of a signed read of `url` by `agent_id` with the seed's key
/// (`keyid` the agent, `Self-Public-Key` the key): a rotated agent's read.
#[wasm_bindgen]
pub fn sign_read_as(
    seed_hex: &str,
    agent_id: &str,
    method: &str,
    url: &str,
) -> Result<String, Refusal> {
    let key = key_of(seed_hex)?;
    let agent = agent_of(agent_id)?;
    let nonce =
        read_auth::fresh_nonce().map_err(|e| Refusal(format!("no randomness for a nonce: {e}")))?;
    let headers = read_auth::sign_read_as(&key, &agent, method, url, nonce)
        .map_err(|e| Refusal(format!("cannot sign the read of {url}: {e}")))?;
    let map: serde_json::Map<String, serde_json::Value> = headers
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    text(&map)
}

/// `{"public_key", "digest"}` of a seed: the digest is what a key event
/// commits for it (`Digest::of_key`).
#[wasm_bindgen]
pub fn key_digest(seed_hex: &str) -> Result<String, Refusal> {
    let key = key_of(seed_hex)?;
    text(&json!({
        "public_key": key.public_key().to_hex(),
        "digest": Digest::of_key(&key.public_key()).to_hex(),
    }))
}

/// A served keys.json, read and verified.
struct Served {
    agent: AgentId,
    records: Vec<Json>,
    sealed: Vec<SealedKeyRecord>,
    report: key_log::KeyLogReport,
    state: Option<KeyState>,
}

fn served(body: &str, keyring: &str, agent_id: &str, now_ms: u64) -> Result<Served, Refusal> {
    let agent = agent_of(agent_id)?;
    let doc = parse("keys.json", body)?;
    if doc.get("agent_id").and_then(Json::as_str) != Some(agent.as_str()) {
        return Err(Refusal("keys.json is for another agent".into()));
    }
    let records: Vec<Json> = match doc.get("records") {
        Some(Json::Array(a)) => a.clone(),
        _ => return Err(Refusal("keys.json has no records array".into())),
    };
    let keyring = keyring_of(keyring)?;
    let (report, state) = verify_key_log(&agent, &records, &keyring, now_ms);
    let sealed = records
        .iter()
        .filter_map(|r| SealedKeyRecord::from_json(r).ok())
        .collect();
    Ok(Served {
        agent,
        records,
        sealed,
        report,
        state,
    })
}

fn pin_of(pin: Option<String>) -> Result<Option<Pin>, Refusal> {
    let Some(t) = pin else { return Ok(None) };
    let p: Pin = serde_json::from_str(&t)
        .map_err(|e| Refusal(format!("a pin is {{\"length\", \"head_hash\"}}: {e}")))?;
    if p.length == 0 {
        return Err(Refusal("a pin's length is at least 1".into()));
    }
    Ok(Some(p))
}

/// How the served log compares with `pin` (`new`: no pin given).
fn pin_status(pin: Option<&Pin>, sealed: &[SealedKeyRecord]) -> serde_json::Value {
    match pin.map(|p| p.check(sealed)) {
        None => json!({"status": "new"}),
        Some(PinCheck::Consistent) => json!({"status": "consistent"}),
        Some(PinCheck::Rollback { pinned, served }) => {
            json!({"status": "rollback", "pinned": pinned, "served": served})
        }
        Some(PinCheck::Fork {
            index,
            pinned,
            served,
        }) => json!({"status": "fork", "index": index, "pinned": pinned, "served": served}),
    }
}

/// Verifies a served `GET /self/{agent_id}/keys.json` body offline against
/// the service's keyring (`GET /api/v1/self/keys`) with the core's
/// verifier, and compares it with `pin` (`{"length", "head_hash"}`, the last
/// log this client saw; absent: first sight). Returns `{"agent_id",
/// "valid", "length", "keys", "failures", "records", "next_key_digest",
/// "pin": {"status": "new" | "consistent" | "rollback" | "fork", …},
/// "keep"}`, `keep` the pin to keep from now on: the served log's when it
/// verified and is new or consistent, else the one given.
#[wasm_bindgen]
pub fn key_log(
    body: &str,
    keyring: &str,
    agent_id: &str,
    pin: Option<String>,
    now_ms: f64,
) -> Result<String, Refusal> {
    let now = now_of(now_ms);
    let s = served(body, keyring, agent_id, now)?;
    let pin = pin_of(pin)?;
    let status = pin_status(pin.as_ref(), &s.sealed);
    let moves = s.report.valid && matches!(status["status"].as_str(), Some("new" | "consistent"));
    let keep = if moves {
        Pin::of(&s.sealed).or(pin)
    } else {
        pin
    };
    let next = s.state.as_ref().map(|st| {
        let mut st = st.clone();
        st.settle(now);
        st.next_key_digest.to_hex()
    });
    text(&json!({
        "agent_id": s.agent.as_str(),
        "valid": s.report.valid,
        "length": s.report.length,
        "keys": s.report.keys,
        "failures": s.report.failures,
        "records": s.records,
        "next_key_digest": next,
        "pin": status,
        "keep": keep,
    }))
}

/// The state a new event builds on: the served log, verified, consistent
/// with `pin`, settled at `now`.
fn trusted(
    body: &str,
    keyring: &str,
    agent_id: &str,
    pin: Option<String>,
    now: u64,
) -> Result<(Served, KeyState), Refusal> {
    let s = served(body, keyring, agent_id, now)?;
    let pin = pin_of(pin)?;
    match pin.as_ref().map(|p| p.check(&s.sealed)) {
        Some(PinCheck::Rollback { pinned, served }) => {
            return Err(Refusal(format!(
                "key log ROLLBACK for {}: the service served {served} event(s) where this client saw {pinned}; \
                 the log is append-only, so the service equivocated or its key leaked (nothing was sent)",
                s.agent
            )))
        }
        Some(PinCheck::Fork {
            index,
            pinned,
            served,
        }) => {
            return Err(Refusal(format!(
                "key log FORK for {}: event {index} is sealed as {served} where this client saw {pinned}; \
                 the service equivocated or its key leaked (nothing was sent)",
                s.agent
            )))
        }
        _ => {}
    }
    if let Some(f) = s.report.failures.first() {
        return Err(Refusal(format!(
            "the key log does not verify: event {}: {} ({})",
            f.index.map_or("-".into(), |i| i.to_string()),
            f.check,
            f.detail
        )));
    }
    let Some(mut state) = s.state.clone() else {
        return Err(Refusal(format!(
            "{} has no key log: publish with a next key (the first write carries the inception) or incept",
            s.agent
        )));
    };
    state.settle(now);
    Ok((s, state))
}

/// `{"refused": {"status", "body"}}`: the service's refusal of `event`,
/// decided here by the rules it applies (`KeyState::check`).
fn refused(r: CoreRefusal) -> Result<String, Refusal> {
    text(&json!({"refused": {
        "status": r.code.http_status(),
        "body": {"accepted": false, "reason_codes": [r.code.as_str()], "detail": r.detail_or_code()},
    }}))
}

/// `{"event", "key_index", "public_key"}` of a signed event that passed the
/// local check, else its refusal.
fn checked(
    state: Option<&KeyState>,
    event: KeyEvent,
    earlier: &Prefix<'_>,
    now: u64,
) -> Result<String, Refusal> {
    if let Err(r) = KeyState::check(state, &event, now, earlier, Signature::Verify) {
        return refused(r);
    }
    let key_index = match (&event.change, state) {
        (Change::Rotation { .. }, Some(s)) => s.key_index() + 1,
        (_, Some(s)) => s.key_index(),
        (_, None) => 0,
    };
    text(&json!({
        "event": event.to_json(),
        "key_index": key_index,
        "public_key": event.public_key.to_hex(),
    }))
}

/// Options of the events: a JSON object (or nothing).
fn options(text: Option<String>) -> Result<Json, Refusal> {
    match text {
        None => Ok(Json::Object(Vec::new())),
        Some(t) => {
            let v = parse("the options", &t)?;
            if v.as_object().is_none() {
                return Err(Refusal("the options are a JSON object".into()));
            }
            Ok(v)
        }
    }
}

/// `recovery_key_digest` from the options: absent carries `carried` over,
/// null commits none, a string commits that digest.
fn recovery_digest(opts: &Json, carried: Option<Digest>) -> Result<Option<Digest>, Refusal> {
    match opts.get("recovery_key_digest") {
        None => Ok(carried),
        Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Digest::from_hex(s).map(Some).ok_or_else(|| {
            Refusal("recovery_key_digest is 64 lowercase hexadecimal characters".into())
        }),
        Some(_) => Err(Refusal(
            "recovery_key_digest is null or a hex string".into(),
        )),
    }
}

/// An agent's inception (event 0), signed by its genesis key (the seed),
/// committing `next_seed`'s key. Options: `recovery_key_digest` (an
/// operator's recovery key's digest), `recovery_window_sec` (default 72 h).
/// `{"event", "key_index", "public_key"}`, or `{"refused": {"status",
/// "body"}}` when the service would refuse it.
#[wasm_bindgen]
pub fn inception_event(
    genesis_seed: &str,
    next_seed: &str,
    opts: Option<String>,
    now_ms: f64,
) -> Result<String, Refusal> {
    let genesis = key_of(genesis_seed)?;
    let next = key_of(next_seed)?;
    let opts = options(opts)?;
    let window = match opts.get("recovery_window_sec") {
        None => key_log::DEFAULT_WINDOW_SEC,
        Some(w) => w
            .as_safe_u64()
            .filter(|w| (key_log::MIN_WINDOW_SEC..=key_log::MAX_WINDOW_SEC).contains(w))
            .ok_or_else(|| {
                Refusal(format!(
                    "recovery_window_sec is an integer {}..{}",
                    key_log::MIN_WINDOW_SEC,
                    key_log::MAX_WINDOW_SEC
                ))
            })?,
    };
    let event = key_log::build::inception(
        &genesis,
        Digest::of_key(&next.public_key()),
        recovery_digest(&opts, None)?,
        window,
    );
    checked(None, event, &Prefix::served(&[]), now_of(now_ms))
}

/// A rotation of the served log's agent (`keys_body`: keys.json as served,
/// verified against `keyring` and checked against `pin` first), revealing
/// `revealed_seed`'s key and committing `new_next_seed`'s. Options:
/// `authority` (`"next"`, the default: the revealed key becomes current;
/// `"recovery"`: the operator's recovery key, and `current`, the new current
/// key's seed), `outgoing` (the current key the caller holds: refused when
/// the log's current key is another), `recovery_key_digest` (absent: the
/// log's carried over by a next rotation, none after a recovery),
/// `supersedes` (a recovery's: the index of the next-key rotation it voids),
/// `disputes_after` (`{"seq", "cursor"}`: the owner's last good write; the
/// current key was stolen). `{"event", "key_index", "public_key"}`, or
/// `{"refused": {"status", "body"}}` when the service would refuse it.
#[wasm_bindgen]
#[allow(clippy::too_many_arguments)] // flat text arguments: the JavaScript side's call
pub fn rotation_event(
    keys_body: &str,
    keyring: &str,
    agent_id: &str,
    pin: Option<String>,
    revealed_seed: &str,
    new_next_seed: &str,
    opts: Option<String>,
    now_ms: f64,
) -> Result<String, Refusal> {
    let now = now_of(now_ms);
    let (s, state) = trusted(keys_body, keyring, agent_id, pin, now)?;
    let opts = options(opts)?;
    outgoing_is_current(&opts, &state)?;
    let revealed = key_of(revealed_seed)?;
    let new_next = key_of(new_next_seed)?;
    let authority = match opts.get("authority").and_then(Json::as_str) {
        None | Some("next") => RotationAuthority::Next,
        Some("recovery") => RotationAuthority::Recovery,
        Some(a) => return Err(Refusal(format!("authority {a:?}: next or recovery"))),
    };
    let current = match (authority, opts.get("current").and_then(Json::as_str)) {
        (RotationAuthority::Next, None) => AgentKey::from_seed(&revealed.seed()),
        (RotationAuthority::Next, Some(_)) => {
            return Err(Refusal(
                "a next-key rotation makes the revealed key current: no `current`".into(),
            ))
        }
        (RotationAuthority::Recovery, Some(seed)) => key_of(seed)?,
        (RotationAuthority::Recovery, None) => {
            return Err(Refusal(
                "a recovery names the new current key's seed (`current`)".into(),
            ))
        }
    };
    let supersedes = match opts.get("supersedes") {
        None | Some(Json::Null) => None,
        Some(k) => {
            let k = k
                .as_safe_u64()
                .ok_or_else(|| Refusal("supersedes is an event index".into()))?;
            let hash = s
                .records
                .get(k as usize)
                .and_then(|r| r.get("hash"))
                .and_then(Json::as_str)
                .ok_or_else(|| Refusal(format!("supersedes {k}: the key log has no event {k}")))?;
            Some(Supersedes {
                index: k,
                hash: hash.to_owned(),
            })
        }
    };
    let disputes_after = match opts.get("disputes_after") {
        None | Some(Json::Null) => None,
        Some(d) => Some(LastGood {
            seq: d
                .get("seq")
                .and_then(Json::as_safe_u64)
                .ok_or_else(|| Refusal("disputes_after.seq is an integer".into()))?,
            cursor: d
                .get("cursor")
                .and_then(Json::as_str)
                .filter(|c| jcs::is_cursor(c))
                .ok_or_else(|| Refusal("disputes_after.cursor is a cursor (sha256:…)".into()))?
                .to_owned(),
        }),
    };
    let carried = match authority {
        RotationAuthority::Next => state.recovery_key_digest,
        RotationAuthority::Recovery => None,
    };
    let event = key_log::build::rotation(
        &state,
        key_log::build::Rotation {
            authority,
            revealed: &revealed,
            current: &current,
            next: Digest::of_key(&new_next.public_key()),
            recovery: recovery_digest(&opts, carried)?,
            supersedes,
            disputes_after,
        },
    );
    checked(Some(&state), event, &Prefix::served(&s.sealed), now)
}

/// A recommit: the current key (`current_seed`) replaces the commitments
/// with `new_next_seed`'s key (its owner lost the next key); it matures
/// after the recovery window unless a rotation lands first. The log as for
/// [`rotation_event`]. Options: `recovery_key_digest` (absent: carried
/// over). Same answer as [`rotation_event`].
#[wasm_bindgen]
#[allow(clippy::too_many_arguments)] // flat text arguments: the JavaScript side's call
pub fn recommit_event(
    keys_body: &str,
    keyring: &str,
    agent_id: &str,
    pin: Option<String>,
    current_seed: &str,
    new_next_seed: &str,
    opts: Option<String>,
    now_ms: f64,
) -> Result<String, Refusal> {
    let now = now_of(now_ms);
    let (s, state) = trusted(keys_body, keyring, agent_id, pin, now)?;
    let opts = options(opts)?;
    let current = key_of(current_seed)?;
    let new_next = key_of(new_next_seed)?;
    let event = key_log::build::recommit(
        &state,
        &current,
        Digest::of_key(&new_next.public_key()),
        recovery_digest(&opts, state.recovery_key_digest)?,
    );
    checked(Some(&state), event, &Prefix::served(&s.sealed), now)
}

/// Refuses when the caller's current key (`outgoing`) is not the log's.
fn outgoing_is_current(opts: &Json, state: &KeyState) -> Result<(), Refusal> {
    if let Some(k) = opts.get("outgoing").and_then(Json::as_str) {
        if k != state.current().to_hex() {
            return Err(Refusal(format!(
                "the key log's current key is {}, not {k}: another copy of this identity rotated, \
                 or this key was rotated out",
                state.current().to_hex()
            )));
        }
    }
    Ok(())
}

/// The body of `POST /self/{agent_id}/keys.json`: `{"event", "envelope"?}`
/// in RFC 8785 form (a retry resends it byte for byte).
#[wasm_bindgen]
pub fn key_post_body(event: &str, envelope: Option<String>) -> Result<String, Refusal> {
    let mut m = vec![("event".to_owned(), parse("the event", event)?)];
    if let Some(e) = envelope {
        m.push(("envelope".to_owned(), parse("the envelope", &e)?));
    }
    Ok(jcs::canonicalize(&Json::Object(m)))
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
        let h: serde_json::Value = serde_json::from_str(
            &sign_read_as(
                &seed,
                &key_of(&seed).unwrap().agent_id().to_string(),
                "GET",
                url,
            )
            .unwrap(),
        )
        .unwrap();
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
        let agent = key_of(&seed).unwrap().agent_id().to_string();
        assert!(sign_envelope_as(&seed, &agent, 1.5, "{}").is_err());
        assert!(sign_envelope_as(&seed, &agent, -1.0, "{}").is_err());
        assert!(sign_envelope_as(&seed, &agent, 2.0, "{}")
            .unwrap()
            .contains(r#""seq":2"#));
        let actions: Vec<String> =
            serde_json::from_str(&what_to_do(r#"["replay_seq","nope","replay_seq"]"#).unwrap())
                .unwrap();
        assert_eq!(actions.len(), 1);
    }

    /// keys.json and the keyring of the core's verifier vector (the
    /// routine_rotation log, tests/vectors/keys/verifier.json), its first
    /// `served` records.
    fn vector_log(served: usize) -> (String, String, String) {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../tests/vectors/keys/verifier.json"
        ))
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let agent = v["agent_id"].as_str().unwrap().to_owned();
        let log = v["cases"][0]["log"].as_array().unwrap()[..served].to_vec();
        let body = json!({"agent_id": agent, "v": "selfcap-keys/1", "keys": null, "records": log});
        (agent, body.to_string(), v["service_keyring"].to_string())
    }

    #[test]
    fn a_served_log_verifies_and_the_pin_tells_rollback_from_extension() {
        let (agent, full, keyring) = vector_log(3);
        let out: serde_json::Value =
            serde_json::from_str(&key_log(&full, &keyring, &agent, None, 0.0).unwrap()).unwrap();
        assert_eq!(out["valid"], true, "{out}");
        assert_eq!(out["pin"]["status"], "new");
        assert_eq!(out["keep"]["length"], 3);
        assert_eq!(out["keys"]["index"], 2);
        let pin = out["keep"].to_string();
        let (_, short, _) = vector_log(2);
        let rolled: serde_json::Value = serde_json::from_str(
            &key_log(&short, &keyring, &agent, Some(pin.clone()), 0.0).unwrap(),
        )
        .unwrap();
        assert_eq!(rolled["pin"]["status"], "rollback");
        assert_eq!(rolled["pin"]["served"], 2);
        assert_eq!(
            rolled["keep"].to_string(),
            pin,
            "a rollback never moves the pin"
        );
        let forked = json!({"length": 3, "head_hash": "0".repeat(64)}).to_string();
        let f: serde_json::Value = serde_json::from_str(
            &key_log(&full, &keyring, &agent, Some(forked.clone()), 0.0).unwrap(),
        )
        .unwrap();
        assert_eq!(f["pin"]["status"], "fork");
        // Nothing is built on a rolled-back or forked log.
        let seed = hex::encode([9u8; 32]);
        let next = hex::encode([10u8; 32]);
        let e = rotation_event(&short, &keyring, &agent, Some(pin), &seed, &next, None, 0.0)
            .unwrap_err();
        assert!(e.0.contains("ROLLBACK"), "{}", e.0);
        assert!(key_log(&full, &keyring, &"a".repeat(64), None, 0.0).is_err());
        assert!(key_log(
            &full,
            &keyring,
            &agent,
            Some(r#"{"length":0,"head_hash":""}"#.into()),
            0.0
        )
        .is_err());
    }

    #[test]
    fn a_rotation_by_a_key_the_log_never_committed_is_refused_here() {
        let (agent, full, keyring) = vector_log(3);
        let seed = hex::encode([9u8; 32]);
        let next = hex::encode([10u8; 32]);
        let out: serde_json::Value = serde_json::from_str(
            &rotation_event(&full, &keyring, &agent, None, &seed, &next, None, 0.0).unwrap(),
        )
        .unwrap();
        assert_eq!(out["refused"]["status"], 403, "{out}");
        assert_eq!(
            out["refused"]["body"]["reason_codes"][0],
            "rotation_not_committed"
        );
        // Holding a key that is not the log's current one is an error.
        let stale = json!({"outgoing": "b".repeat(64)}).to_string();
        assert!(rotation_event(
            &full,
            &keyring,
            &agent,
            None,
            &seed,
            &next,
            Some(stale),
            0.0
        )
        .is_err());
        let rec: serde_json::Value = serde_json::from_str(
            &recommit_event(&full, &keyring, &agent, None, &seed, &next, None, 0.0).unwrap(),
        )
        .unwrap();
        assert_eq!(
            rec["refused"]["body"]["reason_codes"][0],
            "rotation_not_committed"
        );
    }

    #[test]
    fn the_inception_and_a_rotated_agents_envelope_are_the_cores() {
        let genesis = hex::encode([3u8; 32]);
        let next = hex::encode([4u8; 32]);
        let out: serde_json::Value =
            serde_json::from_str(&inception_event(&genesis, &next, None, 0.0).unwrap()).unwrap();
        let event = json::parse_str(&out["event"].to_string()).unwrap();
        let parsed = KeyEvent::from_json(&event).unwrap();
        assert!(parsed.signatures_verify());
        assert_eq!(parsed.agent_id, key_of(&genesis).unwrap().agent_id());
        assert_eq!(
            parsed.next_key_digest,
            Digest::of_key(&key_of(&next).unwrap().public_key())
        );
        assert_eq!(out["key_index"], 0);
        // Committing the genesis key itself as the next one is refused.
        let same: serde_json::Value =
            serde_json::from_str(&inception_event(&genesis, &genesis, None, 0.0).unwrap()).unwrap();
        assert!(same["refused"].is_object(), "{same}");
        assert!(inception_event(
            &genesis,
            &next,
            Some(r#"{"recovery_window_sec":5}"#.into()),
            0.0
        )
        .is_err());
        let body = key_post_body(&out["event"].to_string(), None).unwrap();
        assert_eq!(canonicalize(&body).unwrap(), body);
        // The current key signs as the agent.
        let agent = key_of(&genesis).unwrap().agent_id();
        let env: serde_json::Value =
            serde_json::from_str(&sign_envelope_as(&next, agent.as_str(), 2.0, "{}").unwrap())
                .unwrap();
        assert_eq!(env["agent_id"], agent.as_str());
        assert_eq!(
            env["public_key"],
            key_of(&next).unwrap().public_key().to_hex()
        );
        let d: serde_json::Value = serde_json::from_str(&key_digest(&next).unwrap()).unwrap();
        assert_eq!(d["digest"], parsed.next_key_digest.to_hex());
    }
}
