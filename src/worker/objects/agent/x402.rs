//! The x402 purchase in the agent's object (docs/PROTOCOL.md §10, x402):
//! its x402 invoices (one open per plan, tags from the price's book), a paid
//! request settled through the facilitator and credited only on what the
//! chain shows, and the alarm that finishes a settlement whose outcome a
//! request could not wait for. Every decision is
//! `core::upgrade::x402::settle`'s; this file asks the facilitator and the
//! chain, and stores.
//!
//! Order for a payment of an open invoice, under the lock: the
//! facilitator's `/verify` (nothing bound, nothing moved); the payment's
//! identity (chain, token, payer, nonce) bound to this invoice in its own
//! object, first binding wins; the invoice stored as settling with the
//! alarm armed; `/settle`; the chain read. A crash anywhere after the
//! binding leaves the alarm to finish it.

use super::{AgentDO, MIRROR_KEY, STATE_KEY, X402_KEY};
use crate::core::crypto::AgentId;
use crate::core::json::Json;
use crate::core::mirror::Mirror;
use crate::core::reason::{ReasonCode as R, Refusal};
use crate::core::time::secs_until;
use crate::core::upgrade::config::UpgradeConfig;
use crate::core::upgrade::outcome::{Claimed, PaymentRecord};
use crate::core::upgrade::quote::{QuoteRequest, QUOTES_PER_IP_24H};
use crate::core::upgrade::x402::chain::Onchain;
use crate::core::upgrade::x402::config::X402Config;
use crate::core::upgrade::x402::facilitator::{
    read_settle, read_verify, request_body, Reply, Settle, Verify,
};
use crate::core::upgrade::x402::invoice::{expires_at_ms, Found, Stage, X402Book, X402Invoice};
use crate::core::upgrade::x402::settle::{
    self as decide, after_settle, on_alarm, on_payment, on_unpaid, tx_to_check, Alarm as Next,
    Facts, Outcome, Paid, Unpaid,
};
use crate::core::upgrade::x402::unbound::{self, Answer, Ask, Privacy, Said, Unbound};
use crate::core::upgrade::x402::wire::{
    payment_response, read_payment, Payment, Version, PAYMENT_REQUIRED_HEADER,
};
use crate::core::write::{AgentState, X402Due};
use crate::worker::config;
use crate::worker::do_wire::{PaymentBind, QuoteSlot, Slot, TagAsk, X402Call};
use crate::worker::facilitator;
use crate::worker::failure::Failure;
use crate::worker::http::{self, NO_STORE};
use crate::worker::log;
use crate::worker::read_cache;
use crate::worker::rpc;
use crate::worker::storage::{commit_atomic, load, save, Alarm, Batch};
use std::time::Duration;
use worker::Response;

/// The first look at a settlement the request could not finish (the
/// core's alarm schedule takes over from there).
const FIRST_CHECK_MS: u64 = 5_000;

/// What one request is decided with.
struct Ctx<'a> {
    up: &'a UpgradeConfig,
    x: &'a X402Config,
    agent: &'a AgentId,
    call: &'a X402Call,
    /// Whether answers may speak of the agent's payments.
    privacy: Privacy,
}

fn reply(answer: &facilitator::Answer) -> Reply<'_> {
    match answer {
        Some((status, body)) => Reply::Answered {
            status: *status,
            body,
        },
        None => Reply::Silent,
    }
}

/// The 402 offering `inv`, with `code` and `detail`: the v2 requirements
/// in `PAYMENT-REQUIRED`, the v1 form in the body where the chain has one.
fn challenge(ctx: &Ctx<'_>, inv: &X402Invoice, code: R, detail: &str) -> Result<Response, Failure> {
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

/// The 200 of a credited payment: the claim's body (`repeat` when it was
/// credited before this request), with the settlement response header.
fn paid(claimed: &Claimed, payment: Option<&Payment>, repeat: bool) -> Result<Response, Failure> {
    let mut body = serde_json::to_value(claimed)?;
    if repeat {
        body["repeat"] = serde_json::Value::Bool(true);
    }
    let resp = http::json(200, &body, NO_STORE)?;
    if let Some(p) = payment {
        let (name, value) = payment_response(p, &claimed.tx_hash);
        http::set(resp.headers(), name, &value);
    }
    Ok(resp)
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
    /// One x402 request: an offer (402), a settlement, or the credit again.
    pub(super) async fn x402(&self, call: X402Call) -> Result<Response, Failure> {
        let Ok(up) = config::upgrade(&self.env) else {
            return Err(Failure::upgrades_not_configured());
        };
        let Ok(Some(x)) = config::x402(&self.env, &up) else {
            return Err(Failure::code(R::X402NotConfigured));
        };
        let agent = AgentId::parse(&call.agent_id).ok_or("x402: bad agent id")?;
        let payment = match &call.payment {
            None => None,
            Some((n, text)) => {
                let version = if *n == 1 { Version::V1 } else { Version::V2 };
                Some(read_payment(version, text, &up)?)
            }
        };
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        let state: AgentState = load(&storage, STATE_KEY).await?.unwrap_or_default();
        let ctx = Ctx {
            up: &up,
            x: &x,
            agent: &agent,
            call: &call,
            privacy: Privacy::of(state.published.as_ref().map(|p| &p.capsule)),
        };
        let mut book: X402Book = load(&storage, X402_KEY).await?.unwrap_or_default();
        book.prune(call.now_ms);
        match payment {
            None => {
                let detail = "pay this invoice with x402: sign the amount for payTo and resend with PAYMENT-SIGNATURE (v1: X-PAYMENT)";
                self.unpaid(&ctx, &mut book, call.renew, R::X402PaymentRequired, detail)
                    .await
            }
            Some(p) => self.settle(&ctx, &mut book, &p).await,
        }
    }

    /// A request without a payment (or one answered with a fresh offer):
    /// the recent credit again, the settlement in flight, or a 402 with the
    /// open invoice or a new one.
    async fn unpaid(
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

    /// A paid request: the identical authorization of a bound invoice
    /// answered from the store; anything else checked first
    /// ([`unbound`]), and a payment of an open invoice verified, bound,
    /// settled and answered by what the chain shows.
    async fn settle(
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

    /// Notes that a settlement needs the alarm at `at` (or sooner).
    fn due(&self, state: &mut AgentState, agent: &AgentId, at: u64) {
        let at = state.x402_due_at().map_or(at, |t| t.min(at));
        state.x402_due = Some(X402Due {
            agent_id: agent.to_string(),
            check_at_ms: at,
        });
    }

    /// Stores the state and the x402 invoices (and `mirror`'s ops) in one
    /// commit, with the alarm at the state's x402 due time (never later
    /// than the mirror's retry).
    async fn store(
        &self,
        state: &AgentState,
        book: &X402Book,
        mirror: Option<&Mirror>,
    ) -> Result<(), Failure> {
        let mut puts = vec![
            (STATE_KEY.to_owned(), serde_json::to_string(state)?),
            (X402_KEY.to_owned(), serde_json::to_string(book)?),
        ];
        if let Some(m) = mirror {
            puts.push((MIRROR_KEY.to_owned(), serde_json::to_string(m)?));
        }
        let now = crate::worker::clock::system_now_ms();
        let alarm = match (state.x402_due_at(), mirror) {
            (_, Some(_)) => Alarm::In(Duration::from_millis(crate::core::mirror::RETRY_BASE_MS)),
            (Some(at), None) => Alarm::In(Duration::from_millis(at.saturating_sub(now).max(1))),
            (None, None) => Alarm::Keep,
        };
        commit_atomic(
            &self.state.storage(),
            &Batch {
                puts: &puts,
                deletes: &[],
                alarm,
            },
        )
        .await?;
        Ok(())
    }

    /// What the chain shows of `inv`'s settlement: the transaction to look
    /// at first; unless that credits or is confirming, whether the
    /// authorization is used, and if so the transaction its log names.
    async fn facts(
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

    /// Credits a settlement the chain confirmed: the transfer's own key
    /// bound to the invoice (a classic claim can never reuse it), then the
    /// plan's days, the invoice paid and the record mirrored, in one commit.
    async fn credit(
        &self,
        state: &mut AgentState,
        book: &mut X402Book,
        id: &str,
        agent: &AgentId,
        c: &decide::Credit,
        now: u64,
    ) -> Result<Claimed, Failure> {
        let bind = PaymentBind {
            record: PaymentRecord {
                invoice_id: id.to_owned(),
                agent_id: agent.to_string(),
            },
        };
        if !bind.send(&self.env, &c.confirmed.payment).await? {
            return Err(Refusal::new(
                R::PaymentAlreadyClaimed,
                "this transfer already credited another invoice",
            )
            .into());
        }
        let inv = book.find_mut(id).ok_or("x402: invoice vanished")?;
        let claimed = decide::credit(inv, &mut state.paid, agent.as_str(), c, now)
            .ok_or("x402: credited an invoice that was not settling")?;
        if !book
            .items()
            .iter()
            .any(|i| matches!(i.stage(), Stage::Settling(_)))
        {
            state.x402_due = None;
        }
        // head.json shows the tier: mirror the record if there is one.
        let mirror = self.record_mirror(agent, state, now).await?;
        self.store(state, book, mirror.as_ref()).await?;
        log::event(
            "upgrade_credited",
            &[
                ("agent_id", agent.as_str()),
                ("invoice_id", id),
                ("payment", c.confirmed.payment.as_str()),
                ("paid_until", claimed.paid_until.as_str()),
                ("via", "x402"),
            ],
        );
        if mirror.is_some() {
            if let Err(e) = self
                .mirror_then_publish(mirror, now, state.x402_due_at())
                .await
            {
                log::event(
                    "kv_mirror_error",
                    &[("agent_id", agent.as_str()), ("error", &e.to_string())],
                );
            }
        }
        Ok(claimed)
    }

    /// The alarm's part: every settling invoice looked at on the chain,
    /// credited, released or looked at again later. Runs before the
    /// mirror's retry, which then keeps the alarm no later than the next
    /// look.
    pub(super) async fn x402_alarm(&self, now: u64) -> Result<Option<u64>, Failure> {
        let storage = self.state.storage();
        let mut state: AgentState = load(&storage, STATE_KEY).await?.unwrap_or_default();
        let Some(due) = state.x402_due.clone() else {
            return Ok(None);
        };
        if now < due.check_at_ms {
            // Woken early (for the mirror): keep the alarm for the look due.
            let wait = Duration::from_millis(due.check_at_ms - now);
            storage.set_alarm(wait).await?;
            return Ok(Some(due.check_at_ms));
        }
        let (Ok(up), agent) = (config::upgrade(&self.env), AgentId::parse(&due.agent_id)) else {
            log::event(
                "config_error",
                &[("x402", "the alarm has no upgrade config")],
            );
            return Ok(None);
        };
        let agent = agent.ok_or("x402 alarm: bad agent id")?;
        let Ok(Some(x)) = config::x402(&self.env, &up) else {
            log::event("config_error", &[("x402", "the alarm has no x402 config")]);
            return Ok(None);
        };
        let mut book: X402Book = load(&storage, X402_KEY).await?.unwrap_or_default();
        let settling: Vec<String> = book
            .items()
            .iter()
            .filter(|i| matches!(i.stage(), Stage::Settling(_)))
            .map(|i| i.invoice().invoice_id.clone())
            .collect();
        let mut next: Option<u64> = None;
        for id in settling {
            let inv = book.find_mut(&id).ok_or("x402 alarm: invoice vanished")?;
            let facts = self.facts(&up, &x, inv, None).await;
            match on_alarm(inv, &facts, now) {
                Next::Credit(c) => {
                    state.x402_due = None;
                    match self
                        .credit(&mut state, &mut book, &id, &agent, &c, now)
                        .await
                    {
                        // head.json shows the tier: this location's copy is
                        // old now (a request's credit is purged by the
                        // Worker; elsewhere copies live out their max-age).
                        Ok(_) => read_cache::purge(&agent).await,
                        Err(e) => log::event(
                            "x402_alarm_credit_failed",
                            &[("invoice_id", id.as_str()), ("error", &format!("{e:?}"))],
                        ),
                    }
                }
                Next::CheckAt(at) => next = Some(next.map_or(at, |n| n.min(at))),
                Next::Released => log::event(
                    "x402_released",
                    &[("agent_id", agent.as_str()), ("invoice_id", id.as_str())],
                ),
                Next::Idle => {}
            }
        }
        state.x402_due = next.map(|at| X402Due {
            agent_id: agent.to_string(),
            check_at_ms: at,
        });
        self.store(&state, &book, None).await?;
        Ok(next)
    }
}
