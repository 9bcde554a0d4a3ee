//! Who is reading: the signer of a signed read (docs/PROTOCOL.md §12),
//! checked by `core::read_auth` and its nonce admitted by the reader's
//! nonce book. Every read route and the MCP door ask here first, so a bad
//! signature is refused the same way whatever it reads (and before anything
//! about the capsule is looked up).

use crate::core::crypto::AgentId;
use crate::core::read_auth::{self, Admit, SignedRead};
use crate::core::reason::ReasonCode;
use crate::worker::do_wire::NonceCheck;
use crate::worker::log;
use crate::worker::request::Incoming;
use worker::Env;

/// A refused signature: the reason code and a one-line detail.
pub struct Refused {
    /// `read_signature_invalid`, `_expired` or `_replayed`.
    pub code: ReasonCode,
    /// What was wrong.
    pub detail: String,
}

/// The verified signer of `req`, `None` for an unsigned request, or why
/// its signature is refused. `now_ms` is the request's clock.
pub async fn of(
    req: &Incoming,
    env: &Env,
    now_ms: u64,
) -> worker::Result<Result<Option<AgentId>, Refused>> {
    let headers = req.headers();
    let header = |name: &str| headers.get(name).ok().flatten();
    if !read_auth::carries_signature(&header) {
        return Ok(Ok(None));
    }
    let url = req.url()?.to_string();
    let method = req.method();
    let signed = SignedRead {
        method: &method,
        target_uri: &url,
        header: &header,
    };
    let now_s = now_ms / 1000;
    let reader = match read_auth::verify(&signed, now_s) {
        Ok(r) => r,
        Err(e) => {
            return Ok(Err(Refused {
                code: e.code(),
                detail: e.to_string(),
            }))
        }
    };
    let check = NonceCheck {
        nonce: reader.nonce.clone(),
        until_s: reader.replay_until_s,
        now_s,
    };
    match check.send(env, &reader.agent_id).await? {
        Admit::Fresh => Ok(Ok(Some(reader.agent_id))),
        Admit::Replayed => {
            log::event(
                "read_nonce_replayed",
                &[("reader", reader.agent_id.as_str())],
            );
            Ok(Err(Refused {
                code: ReasonCode::ReadSignatureReplayed,
                detail: "this nonce was already used: sign every read with a fresh one".into(),
            }))
        }
        Admit::Full => Ok(Err(Refused {
            code: ReasonCode::ReadSignatureReplayed,
            detail: format!(
                "more than {} signed reads by this reader in {} s: slow down",
                read_auth::MAX_LIVE_NONCES,
                read_auth::MAX_AGE_S
            ),
        })),
    }
}
