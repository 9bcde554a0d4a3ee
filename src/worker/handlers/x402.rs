//! `POST /api/v1/self/upgrade/x402?plan=…&agent_id=…`, Worker half
//! (docs/PROTOCOL.md §10, x402): refuse what needs no stored state (the
//! configuration, the query, a payment header that does not read), then hand
//! the request to the agent's Durable Object, which offers its invoice (402)
//! or settles the payment and credits it on the chain's word.

use super::relay;
use super::upgrade::configured;
use crate::core::quota::ip_bucket;
use crate::core::reason::ReasonCode;
use crate::core::upgrade::x402::ask::parse_query;
use crate::core::upgrade::x402::config::X402Config;
use crate::core::upgrade::x402::wire::{read_payment, Version};
use crate::core::urls::X402_PATH;
use crate::worker::config::{self, Config};
use crate::worker::do_wire::{self, AgentCall, X402Call};
use crate::worker::failure::Failure;
use crate::worker::read_cache;
use crate::worker::request::Incoming;
use crate::worker::{clock, log};
use worker::{Env, Response};

/// This deployment's x402 settings, or the 503 for one without (valid)
/// ones, logging what is wrong by var or secret name (never a value: with
/// `X402_FACILITATOR_AUTH=cdp`, a missing or malformed `CDP_API_KEY_ID` or
/// `CDP_API_KEY_SECRET` is one of these).
pub fn x402_configured(
    env: &Env,
    up: &crate::core::upgrade::config::UpgradeConfig,
) -> Result<X402Config, Failure> {
    let not_configured = |why: &'static str| Failure::refused(ReasonCode::X402NotConfigured, why);
    match config::x402(env, up) {
        Ok(Some(x)) => Ok(x),
        Ok(None) => Err(not_configured(
            "this deployment takes no x402 payments; pay by transfer and claim (POST /api/v1/self/upgrade/quote)",
        )),
        Err(problems) => {
            log::event("config_error", &[("x402", &problems.join("; "))]);
            Err(not_configured(
                "this deployment's x402 settings are invalid; pay by transfer and claim",
            ))
        }
    }
}

/// The payment header, if any: v2's `PAYMENT-SIGNATURE` wins over v1's
/// `X-PAYMENT` (a client sends one; a v2 client never sends the other).
fn payment_header(req: &Incoming) -> Result<Option<(Version, String)>, Failure> {
    let h = req.headers();
    for version in [Version::V2, Version::V1] {
        if let Some(v) = h.get(version.payment_header())? {
            return Ok(Some((version, v)));
        }
    }
    Ok(None)
}

/// One x402 request.
pub async fn handle(req: &Incoming, env: &Env, cfg: &Config) -> Result<Response, Failure> {
    let up = configured(env)?;
    x402_configured(env, &up)?;
    let ask = parse_query(req.query_pairs())?;
    let payment = payment_header(req)?;
    // A header that does not read is refused here, without waking the
    // agent's object (which reads it again, as it trusts nothing it is sent).
    if let Some((version, text)) = &payment {
        read_payment(*version, text, &up)?;
    }
    let call = X402Call {
        agent_id: ask.agent_id.to_string(),
        plan: ask.plan,
        renew: ask.renew,
        payment: payment.map(|(v, text)| (v.number(), text)),
        resource_url: format!(
            "{}{X402_PATH}?plan={}&agent_id={}",
            cfg.origin(req.href()),
            ask.plan.as_str(),
            ask.agent_id
        ),
        ip_bucket: ip_bucket(req.headers().get("CF-Connecting-IP")?.as_deref()),
        now_ms: clock::request_now_ms(req, cfg.test_clock),
    };
    let relayed = do_wire::upgrade(env, &ask.agent_id, &AgentCall::X402(call)).await?;
    if relayed.status == 200 {
        // head.json shows the tier: this location's copy is old now.
        read_cache::changed(req, &ask.agent_id).await;
    }
    Ok(relay(relayed))
}
