//! A paid request: the identical authorization of a bound invoice
//! answered from the store; anything else checked first
//! (`core::upgrade::x402::unbound`: `/verify`, the chain); a payment of an
//! open invoice bound in its own object, stored as settling with the alarm
//! armed, sent to `/settle`, and answered by what the chain shows
//! (`core::upgrade::x402::settle`).

use super::credit::paid;
use super::offer::challenge;
use super::Ctx;
use crate::core::json::Json;
use crate::core::reason::{ReasonCode as R, Refusal};
use crate::core::upgrade::config::UpgradeConfig;
use crate::core::upgrade::outcome::PaymentRecord;
use crate::core::upgrade::x402::chain::Onchain;
use crate::core::upgrade::x402::config::X402Config;
use crate::core::upgrade::x402::facilitator::{
    read_settle, read_verify, request_body, Reply, Settle, Verify,
};
use crate::core::upgrade::x402::invoice::{Found, Stage, X402Book, X402Invoice};
use crate::core::upgrade::x402::settle::{
    after_settle, on_payment, tx_to_check, Facts, Outcome, Paid,
};
use crate::core::upgrade::x402::unbound::{self, Answer, Ask, Said, Unbound};
use crate::core::upgrade::x402::wire::{Payment, Version};
use crate::core::write::AgentState;
use crate::worker::do_wire::PaymentBind;
use crate::worker::facilitator;
use crate::worker::failure::Failure;
use crate::worker::log;
use crate::worker::objects::agent::{AgentDO, STATE_KEY};
use crate::worker::rpc;
use crate::worker::storage::load;
use worker::Response;

/// The first look at a settlement the request could not finish (the
/// core's alarm schedule takes over from there).
const FIRST_CHECK_MS: u64 = 5_000;

fn reply(answer: &facilitator::Answer) -> Reply<'_> {
    match answer {
        Some((status, body)) => Reply::Answered {
            status: *status,
            body,
        },
        None => Reply::Silent,
    }
}

/// A payment that is not a bound authorization, once checked.
enum Checked {
    /// Bound to this open invoice (its own object first): settle it.
    Bind(String),
    /// Answered without binding anything.
    Answered(Response),
}

/// The requirements `p` was made for, on `inv`'s terms, in `p`'s version:
/// what `/verify` and `/settle` judge it against.
fn requirements(ctx: &Ctx<'_>, inv: &X402Invoice, p: &Payment) -> Result<Json, Failure> {
    let offer = inv.offer_accepted_by(p, &ctx.call.resource_url, ctx.call.now_ms, ctx.x);
    Ok(match p.version {
        Version::V2 => offer.requirements_v2(ctx.up, ctx.x),
        Version::V1 => offer
            .requirements_v1(ctx.up, ctx.x)
            .ok_or("x402: a v1 payment on a chain without a v1 name")?,
    })
}

impl AgentDO {
    /// A paid request: the identical authorization of a bound invoice
    /// answered from the store; anything else checked first
    /// ([`unbound`]), and a payment of an open invoice verified, bound,
    /// settled and answered by what the chain shows.
    pub(super) async fn settle(
        &self,
        ctx: &Ctx<'_>,
        book: &mut X402Book,
        p: &Payment,
    ) -> Result<Response, Failure> {
        let now = ctx.call.now_ms;
        let id = match book.find(ctx.call.plan, p, ctx.up, now) {
            Found::Bound(id) => id,
            Found::Unbound(u) => match self.unbound(ctx, book, p, &u).await? {
                Checked::Bind(id) => id,
                Checked::Answered(answer) => return Ok(answer),
            },
        };
        let inv = book.get(&id).ok_or("x402: matched invoice vanished")?;
        let body = request_body(p, requirements(ctx, inv, p)?);
        let storage = self.state.storage();
        let mut state: AgentState = load(&storage, STATE_KEY).await?.unwrap_or_default();
        let inv = book.find_mut(&id).ok_or("x402: invoice vanished")?;
        let (said, outcome) = match on_payment(inv, p, ctx.agent.as_str(), now)? {
            Paid::Repeat(claimed) => return paid(&claimed, Some(p), false),
            Paid::Settle => {
                // Stored as settling, with the alarm armed, before asking:
                // from here on the object finishes it whatever happens.
                self.due(&mut state, ctx.agent, now + FIRST_CHECK_MS);
                state.count(ctx.agent, now, |r| r.settlement(&id, Some(now)));
                self.store(&state, book, None).await?;
                let answer =
                    facilitator::post(ctx.x, "/settle", body, ctx.x.settle_timeout_ms).await;
                let said = read_settle(reply(&answer));
                let inv = book.find_mut(&id).ok_or("x402: invoice vanished")?;
                let facts = self.facts(ctx.up, ctx.x, inv, Some(&said)).await;
                let outcome = after_settle(inv, Some(&said), &facts);
                (Some(said), outcome)
            }
            Paid::Check { .. } => {
                let facts = self.facts(ctx.up, ctx.x, inv, None).await;
                (None, after_settle(inv, None, &facts))
            }
        };
        log::event(
            "x402_settle",
            &[
                ("agent_id", ctx.agent.as_str()),
                ("invoice_id", id.as_str()),
                ("facilitator", &format!("{said:?}")),
                ("outcome", &format!("{outcome:?}")),
            ],
        );
        match outcome {
            Outcome::Credit(c) => {
                let claimed = self
                    .credit(&mut state, book, &id, ctx.agent, &c, now)
                    .await?;
                paid(&claimed, Some(p), false)
            }
            Outcome::Pending { retry_after_sec } => {
                self.due(&mut state, ctx.agent, now + FIRST_CHECK_MS);
                self.store(&state, book, None).await?;
                Err(Refusal::new(
                    R::X402SettlementPending,
                    "the payment's outcome is not known yet; it is credited on its own once the chain shows it: resend the same payment, or read head.json",
                )
                .retry_after(retry_after_sec)
                .into())
            }
            Outcome::Failed { reason } => {
                state.count(ctx.agent, now, |r| r.settlement(&id, None));
                self.store(&state, book, None).await?;
                let detail = format!(
                    "the payment was not settled ({reason}); nothing moved: pay the new invoice"
                );
                self.unpaid(ctx, book, true, R::X402SettlementFailed, &detail)
                    .await
            }
        }
    }

    /// A payment that is not the identical authorization of a bound
    /// invoice: what `unbound::ask` says to ask, then its answer.
    async fn unbound(
        &self,
        ctx: &Ctx<'_>,
        book: &mut X402Book,
        p: &Payment,
        u: &Unbound,
    ) -> Result<Checked, Failure> {
        let mut said = Said::default();
        let asked = unbound::ask(u, ctx.privacy);
        if asked == Ask::Verify {
            let id = match u {
                Unbound::Claimed(id) | Unbound::Open(id) => id,
                Unbound::Taken { invoice_id, .. } => invoice_id,
                Unbound::Unmatched(_) => return Err("x402: verify of no invoice".into()),
            };
            let inv = book.get(id).ok_or("x402: matched invoice vanished")?;
            let terms = inv.at_value_of(p);
            let body = request_body(p, requirements(ctx, &terms, p)?);
            let verified = facilitator::post(ctx.x, "/verify", body, ctx.x.settle_timeout_ms).await;
            let verify = read_verify(reply(&verified));
            if let Verify::Unknown(why) = &verify {
                log::event(
                    "x402_facilitator_unavailable",
                    &[("agent_id", ctx.agent.as_str()), ("error", why)],
                );
            }
            // Refused: unless the chain shows it used already (a front-run:
            // money moved), nothing of it moved.
            if matches!(verify, Verify::Invalid(_)) {
                said.used = rpc::authorization_state(&ctx.up.rpc_url, &p.id).await;
            }
            said.verify = Some(verify);
        }
        if asked == Ask::Chain {
            said.used = rpc::authorization_state(&ctx.up.rpc_url, &p.id).await;
        }
        let answer = unbound::answer(u, ctx.privacy, &said);
        log::event(
            "x402_unbound",
            &[
                ("agent_id", ctx.agent.as_str()),
                ("payment", &p.id.key()),
                ("found", &format!("{u:?}")),
                ("answer", &format!("{answer:?}")),
            ],
        );
        match answer {
            Answer::Bind => {
                let Unbound::Open(id) = u else {
                    return Err("x402: bind of no open invoice".into());
                };
                let bind = PaymentBind {
                    record: PaymentRecord {
                        invoice_id: id.clone(),
                        agent_id: ctx.agent.to_string(),
                    },
                };
                if !bind.send(&self.env, &p.id.key()).await? {
                    return Err(Refusal::new(
                        R::PaymentAlreadyClaimed,
                        "this authorization is bound to another invoice",
                    )
                    .into());
                }
                Ok(Checked::Bind(id.clone()))
            }
            Answer::Refuse(r) => Err(r.into()),
            Answer::Challenge(r) => {
                let Unbound::Open(id) = u else {
                    return Err("x402: challenge of no open invoice".into());
                };
                let inv = book.get(id).ok_or("x402: invoice vanished")?;
                let detail = r.detail.unwrap_or_default();
                Ok(Checked::Answered(challenge(ctx, inv, r.code, &detail)?))
            }
            Answer::Offer(r) => {
                let detail = r.detail.unwrap_or_default();
                Ok(Checked::Answered(
                    self.unpaid(ctx, book, true, r.code, &detail).await?,
                ))
            }
        }
    }

    /// What the chain shows of `inv`'s settlement: the transaction to look
    /// at first; unless that credits or is confirming, whether the
    /// authorization is used, and if so the transaction its log names.
    pub(super) async fn facts(
        &self,
        up: &UpgradeConfig,
        x: &X402Config,
        inv: &X402Invoice,
        said: Option<&Settle>,
    ) -> Facts {
        let mut facts = Facts::default();
        let (Some(want), Stage::Settling(s)) = (inv.expected(up, x), inv.stage()) else {
            return facts;
        };
        let id = s.id.clone();
        if let Some(tx) = tx_to_check(inv, said) {
            let seen = rpc::settlement(&up.rpc_url, &want, &id, &tx).await;
            let settled = matches!(seen, Onchain::Credit { .. } | Onchain::Confirming { .. });
            facts.seen = Some((tx, seen));
            if settled {
                return facts;
            }
        }
        facts.used = rpc::authorization_state(&up.rpc_url, &id).await;
        if facts.used == Some(true) {
            match rpc::authorization_tx(&up.rpc_url, &id).await {
                Ok(Some(tx)) => {
                    let seen = rpc::settlement(&up.rpc_url, &want, &id, &tx).await;
                    facts.seen = Some((tx, seen));
                }
                Ok(None) => {}
                Err(e) => log::event("payment_provider_fault", &[("error", &e.0)]),
            }
        }
        facts
    }
}
