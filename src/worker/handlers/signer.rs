//! Who is reading: the signer of a signed read (docs/PROTOCOL.md §12),
//! checked by `core::read_auth` and its nonce admitted by the reader's
//! nonce book. Every read route and the MCP door ask here first, so a bad
//! signature is refused the same way whatever it reads (and before anything
//! about the capsule is looked up).

use crate::core::crypto::AgentId;
use crate::core::key_log::key_log_names;
use crate::core::read_auth::{self, Admit, Reader, SignedRead, Standing};
use crate::core::reason::ReasonCode;
use crate::core::record::{key_log_kv_key, kv_key};
use crate::worker::cold;
use crate::worker::failure::Failure;
use crate::worker::kv::Kv;
use crate::worker::log;
use crate::worker::nonce_wire::NonceCheck;
use crate::worker::request::Incoming;
use worker::Env;

/// The verified signer of `req`, `None` for an unsigned request, or why
/// its signature is refused (`read_signature_invalid`, `_expired` or
/// `_replayed`). `now_ms` is the request's clock.
pub async fn of(req: &Incoming, env: &Env, now_ms: u64) -> Result<Option<AgentId>, Failure> {
    let headers = req.headers();
    let header = |name: &str| headers.get(name).ok().flatten();
    if !read_auth::carries_signature(&header) {
        return Ok(None);
    }
    // Unsigned reads, the usual kind, never run (nor compile) the check.
    cold::path(verified(req, env, now_ms)).await.map(Some)
}

/// The signer of a signed read, checked (see [`of`]).
async fn verified(req: &Incoming, env: &Env, now_ms: u64) -> Result<AgentId, Failure> {
    let headers = req.headers();
    let header = |name: &str| headers.get(name).ok().flatten();
    // The URL as the runtime serialised it (WHATWG, as a parser would give
    // it back): what the client's signature covers as `@target-uri`.
    let url = req.href().to_owned();
    let method = req.method();
    let signed = SignedRead {
        method: &method,
        target_uri: &url,
        header: &header,
    };
    let now_s = now_ms / 1000;
    let reader =
        read_auth::verify(&signed, now_s).map_err(|e| Failure::refused(e.code(), e.to_string()))?;
    speaks_for(env, &reader).await?;
    let check = NonceCheck {
        nonce: reader.nonce.clone(),
        until_s: reader.replay_until_s,
        now_s,
    };
    match check.send(env, &reader.agent_id).await? {
        Admit::Fresh => Ok(reader.agent_id),
        Admit::Replayed => {
            log::event(
                "read_nonce_replayed",
                &[("reader", reader.agent_id.as_str())],
            );
            Err(Failure::refused(
                ReasonCode::ReadSignatureReplayed,
                "this nonce was already used: sign every read with a fresh one",
            ))
        }
        Admit::Full => Err(Failure::refused(
            ReasonCode::ReadSignatureReplayed,
            format!(
                "more than {} signed reads by this reader in {} s: slow down",
                read_auth::MAX_LIVE_NONCES,
                read_auth::MAX_AGE_S
            ),
        )),
    }
}

/// Whether the key that signed speaks for its `keyid` now (§14): the
/// reader's genesis key while it has no key log, else the key its log made
/// current. Costs one KV read of the reader's record (its key summary), and
/// a second only for a key that is neither its genesis nor its current one.
async fn speaks_for(env: &Env, reader: &Reader) -> Result<(), Failure> {
    let kv = Kv::of(env)?;
    let current = current_key(&kv, &reader.agent_id).await?;
    let rotated = || {
        Failure::refused(
            ReasonCode::KeyRotated,
            "this key was rotated out of the reader's key log: sign with its current key (keys.json says which)",
        )
    };
    let foreign = || {
        Failure::refused(
            ReasonCode::ReadSignatureInvalid,
            "Self-Public-Key is not the keyid's key: neither its genesis key (SHA-256 = keyid) nor the current key of its key log",
        )
    };
    match read_auth::standing(reader, current.as_deref()) {
        Standing::Current => Ok(()),
        Standing::Rotated => Err(rotated()),
        Standing::Foreign => Err(foreign()),
        Standing::AskTheLog => {
            let log = kv.text(&key_log_kv_key(&reader.agent_id)).await?;
            let named = log.is_some_and(|text| key_log_names(&text, &reader.key.to_hex()));
            Err(if named { rotated() } else { foreign() })
        }
    }
}

/// The current key of `agent`'s key log, from its record in KV (`None`: no
/// log, or no record). Also what tells the write handler that an agent may
/// sign with a key other than its genesis key.
pub async fn current_key(kv: &Kv, agent: &AgentId) -> Result<Option<String>, Failure> {
    #[derive(serde::Deserialize)]
    struct Peek {
        #[serde(default)]
        keys: Option<KeysPeek>,
    }
    #[derive(serde::Deserialize)]
    struct KeysPeek {
        public_key: String,
    }
    let raw = kv.text(&kv_key(agent)).await?;
    Ok(raw
        .and_then(|r| serde_json::from_str::<Peek>(&r).ok())
        .and_then(|p| p.keys)
        .map(|k| k.public_key))
}
