//! An unpaid request (or one answered with a fresh offer): the recent
//! credit again, the settlement in flight, or the 402 with the plan's open
//! invoice or a new one (`core::upgrade::x402::settle::on_unpaid` decides;
//! a private capsule's gets neither of the first two).

use super::credit::paid;
use super::Ctx;
use crate::core::json::Json;
use crate::core::reason::{ReasonCode as R, Refusal};
use crate::core::time::secs_until;
use crate::core::upgrade::quote::{QuoteRequest, QUOTES_PER_IP_24H};
use crate::core::upgrade::x402::invoice::{expires_at_ms, X402Book, X402Invoice};
use crate::core::upgrade::x402::settle::{on_unpaid, Unpaid};
use crate::core::upgrade::x402::wire::PAYMENT_REQUIRED_HEADER;
use crate::worker::do_wire::{QuoteSlot, Slot, TagAsk};
use crate::worker::failure::Failure;
use crate::worker::http::{self, NO_STORE};
use crate::worker::log;
use crate::worker::objects::agent::{AgentDO, X402_KEY};
use crate::worker::storage::save;
use worker::Response;

/// The 402 offering `inv`, with `code` and `detail`: the v2 requirements
/// in `PAYMENT-REQUIRED`, the v1 form in the body where the chain has one.
pub(super) fn challenge(
    ctx: &Ctx<'_>,
    inv: &X402Invoice,
    code: R,
    detail: &str,
) -> Result<Response, Failure> {
    let ch = inv
        .offer(&ctx.call.resource_url, ctx.call.now_ms, ctx.x)
        .challenge(code, ctx.up, ctx.x);
    let mut body = vec![
        ("error".to_owned(), Json::from(code.as_str())),
        ("detail".to_owned(), Json::from(detail)),
    ];
    if let Some(Json::Object(v1)) = ch.v1_body {
        body.extend(v1.into_iter().filter(|(k, _)| k != "error"));
    }
    let resp = http::json(402, &Json::Object(body.into_iter().collect()), NO_STORE)?;
    http::set(
        resp.headers(),
        PAYMENT_REQUIRED_HEADER,
        &ch.payment_required,
    );
    Ok(resp)
}

impl AgentDO {
    /// A request without a payment (or one answered with a fresh offer):
    /// the recent credit again, the settlement in flight, or a 402 with the
    /// open invoice or a new one.
    pub(super) async fn unpaid(
        &self,
        ctx: &Ctx<'_>,
        book: &mut X402Book,
        renew: bool,
        code: R,
        detail: &str,
    ) -> Result<Response, Failure> {
        let now = ctx.call.now_ms;
        let plan = ctx.call.plan;
        let new = match on_unpaid(book, plan, ctx.agent.as_str(), renew, ctx.privacy, now, ctx.x) {
            Unpaid::Repeat(claimed) => return paid(&claimed, None, true),
            Unpaid::InFlight { retry_after_sec } => {
                return Err(Refusal::new(
                    R::X402SettlementPending,
                    "a payment for this plan is being settled: resend it, or read head.json; renew=1 buys again",
                )
                .retry_after(retry_after_sec)
                .into())
            }
            Unpaid::Offer(inv) => return challenge(ctx, inv, code, detail),
            Unpaid::Quote => self.new_invoice(ctx).await?,
        };
        book.add(new.clone());
        save(&self.state.storage(), X402_KEY, book).await?;
        log::event(
            "x402_quoted",
            &[
                ("agent_id", ctx.agent.as_str()),
                ("invoice_id", new.invoice().invoice_id.as_str()),
                ("amount_atomic", &new.invoice().amount_atomic.to_string()),
            ],
        );
        challenge(ctx, &new, code, detail)
    }

    /// A new x402 invoice: the address's quote limit, then a tag unique
    /// among open invoices at the price, reserved until it expires.
    async fn new_invoice(&self, ctx: &Ctx<'_>) -> Result<X402Invoice, Failure> {
        let now = ctx.call.now_ms;
        let slot = QuoteSlot {
            now_ms: now,
            limit: QUOTES_PER_IP_24H,
        };
        if let Slot::FullUntil(reset) = slot.send(&self.env, &ctx.call.ip_bucket).await? {
            return Err(Refusal::new(
                R::QuoteRateExceeded,
                "too many invoices from this address in the last 24 hours",
            )
            .retry_after(secs_until(now, reset).max(1))
            .into());
        }
        let price = ctx
            .up
            .price(ctx.call.plan)
            .ok_or("x402: free is not sold")?;
        let mut random = [0u8; 12];
        getrandom::getrandom(&mut random).map_err(|e| e.to_string())?;
        let ask = TagAsk {
            now_ms: now,
            expires_at_ms: expires_at_ms(now, ctx.x),
            random: u32::from_le_bytes([random[8], random[9], random[10], random[11]]),
        };
        let Some(tag) = ask
            .send(&self.env, &format!("{}:{}", ctx.up.chain_id, price.0))
            .await?
        else {
            return Err(Failure::Unavailable(Some(
                "too many open invoices at this price; retry later",
            )));
        };
        let mut id_random = [0u8; 8];
        id_random.copy_from_slice(&random[..8]);
        let req = QuoteRequest {
            agent_id: ctx.agent.clone(),
            plan: ctx.call.plan,
        };
        Ok(X402Invoice::new(&req, ctx.up, ctx.x, tag, now, id_random))
    }
}
