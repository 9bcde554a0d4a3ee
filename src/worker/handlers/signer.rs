//! Who is reading: the signer of a signed read (docs/PROTOCOL.md §12),
//! checked by `core::read_auth` and its nonce admitted by the reader's
//! nonce book. Every read route and the MCP door ask here first, so a bad
//! signature is refused the same way whatever it reads (and before anything
//! about the capsule is looked up).

use crate::core::crypto::AgentId;
use crate::core::read_auth::{self, Admit, SignedRead};
use crate::core::reason::ReasonCode;
use crate::worker::do_wire::NonceCheck;
use crate::worker::failure::Failure;
use crate::worker::log;
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
    let url = req.url()?.to_string();
    let method = req.method();
    let signed = SignedRead {
        method: &method,
        target_uri: &url,
        header: &header,
    };
    let now_s = now_ms / 1000;
    let reader =
        read_auth::verify(&signed, now_s).map_err(|e| Failure::refused(e.code(), e.to_string()))?;
    let check = NonceCheck {
        nonce: reader.nonce.clone(),
        until_s: reader.replay_until_s,
        now_s,
    };
    match check.send(env, &reader.agent_id).await? {
        Admit::Fresh => Ok(Some(reader.agent_id)),
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
