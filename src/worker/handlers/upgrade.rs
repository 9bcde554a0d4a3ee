//! `POST /api/v1/self/upgrade/quote` and `…/claim`, Worker half: read the
//! (small) body, refuse what needs no stored state (configuration, shape,
//! signature, the per-address quote rate), and hand the rest to the
//! agent's Durable Object, which keeps its invoices and credits payments.

use super::relay;
use crate::core::quota::ip_bucket;
use crate::core::reason::{ReasonCode, Refusal};
use crate::core::time::secs_until;
use crate::core::upgrade::claim::{read_claim, ClaimError};
use crate::core::upgrade::config::UpgradeConfig;
use crate::core::upgrade::invoice::TAGS;
use crate::core::upgrade::quote::{read_quote, MAX_UPGRADE_BODY, QUOTES_PER_IP_24H};
use crate::core::urls::CLAIM_PATH;
use crate::worker::body::{self, BodyError};
use crate::worker::config::{self, Config};
use crate::worker::do_wire::{self, AgentCall, ClaimCall, QuoteCall, QuoteSlot, Slot};
use crate::worker::failure::Failure;
use crate::worker::read_cache;
use crate::worker::request::Incoming;
use crate::worker::{clock, log};
use worker::{Env, Response};

/// Test-only (honoured with `SELFCAP_TEST_CLOCK=1`): force the invoice's tag.
const TEST_TAG_HEADER: &str = "x-selfcap-test-tag";

/// The body, or the refusal of one that is too big or unreadable.
async fn small_body(req: &Incoming) -> Result<Vec<u8>, Failure> {
    body::read_capped(req, MAX_UPGRADE_BODY)
        .await
        .map_err(|e| match e {
            BodyError::TooLarge { .. } => Failure::code(ReasonCode::PayloadTooLarge),
            BodyError::Read => Failure::refused(
                ReasonCode::BadUpgradeRequest,
                "the request body could not be read to its end",
            ),
        })
}

/// This deployment's upgrade settings, or the 503 for a deployment without
/// (valid) ones, logging what is missing by var name so the operator can
/// fix it.
pub(super) fn configured(env: &Env) -> Result<UpgradeConfig, Failure> {
    config::upgrade(env).map_err(|problems| {
        log::event("config_error", &[("upgrade", &problems.join("; "))]);
        Failure::upgrades_not_configured()
    })
}

/// One quote.
pub async fn quote(req: &Incoming, env: &Env, cfg: &Config) -> Result<Response, Failure> {
    let up = configured(env)?;
    let now_ms = clock::request_now_ms(req, cfg.test_clock);
    let bytes = small_body(req).await?;
    let ask = read_quote(&bytes, &up)?;
    let ip = ip_bucket(req.headers().get("CF-Connecting-IP")?.as_deref());
    let slot = QuoteSlot {
        now_ms,
        limit: QUOTES_PER_IP_24H,
    };
    if let Slot::FullUntil(reset) = slot.send(env, &ip).await? {
        return Err(Refusal::new(
            ReasonCode::QuoteRateExceeded,
            "too many quotes from this address in the last 24 hours",
        )
        .retry_after(secs_until(now_ms, reset).max(1))
        .into());
    }
    let call = AgentCall::Quote(QuoteCall {
        agent_id: ask.agent_id.to_string(),
        plan: ask.plan,
        now_ms,
        claim_url: format!("{}{CLAIM_PATH}", cfg.origin(req.href())),
        forced_tag: if cfg.test_clock {
            req.headers()
                .get(TEST_TAG_HEADER)?
                .and_then(|t| t.trim().parse::<u16>().ok())
                .filter(|t| (1..=TAGS).contains(t))
        } else {
            None
        },
    });
    Ok(relay(do_wire::upgrade(env, &ask.agent_id, &call).await?))
}

/// One claim.
pub async fn claim(req: &Incoming, env: &Env, cfg: &Config) -> Result<Response, Failure> {
    configured(env)?;
    let now_ms = clock::request_now_ms(req, cfg.test_clock);
    let bytes = small_body(req).await?;
    let claim = read_claim(&bytes).map_err(|e| match e {
        ClaimError::Malformed(why) => Failure::refused(ReasonCode::BadUpgradeRequest, why),
        ClaimError::BadSignature(why) => Failure::refused(ReasonCode::BadSignature, why),
    })?;
    let call = AgentCall::Claim(ClaimCall {
        agent_id: claim.agent_id.to_string(),
        invoice_id: claim.invoice_id,
        tx_hash: claim.tx_hash,
        seq: claim.seq,
        public_key: claim.signer.to_hex(),
        now_ms,
    });
    let relayed = do_wire::upgrade(env, &claim.agent_id, &call).await?;
    if relayed.status == 200 {
        // head.json shows the tier: this location's copy is old now.
        read_cache::changed(req, &claim.agent_id).await;
    }
    Ok(relay(relayed))
}
