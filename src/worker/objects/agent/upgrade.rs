//! The USDC upgrade in the agent's object: quotes (invoices kept here, tags
//! from the price's object) and claims (verified on-chain, bound once by the
//! payment's object, credited in one atomic commit).

use super::{AgentDO, INVOICES_KEY, MIRROR_KEY, STATE_KEY};
use crate::core::crypto::AgentId;
use crate::core::crypto::PublicKey;
use crate::core::mirror::{Mirror, RETRY_BASE_MS};
use crate::core::operator::meta::MetaRecord;
use crate::core::operator::stats::Method;
use crate::core::reason::{ReasonCode, Refusal};
use crate::core::time::secs_until;
use crate::core::upgrade::amount::Usdc;
use crate::core::upgrade::claim::{signer_stands, Claim};
use crate::core::upgrade::invoice::{InvoiceBook, INVOICE_TTL_MS};
use crate::core::upgrade::outcome::{
    after_chain, before_chain, credit, expected, Before, PaymentRecord,
};
use crate::core::upgrade::quote::{new_invoice, QuoteBody, QuoteRequest};
use crate::core::write::AgentState;
use crate::worker::config::{self, Config};
use crate::worker::do_wire::{ClaimCall, PaymentBind, QuoteCall, TagAsk};
use crate::worker::failure::Failure;
use crate::worker::http::{self, NO_STORE};
use crate::worker::log;
use crate::worker::rpc;
use crate::worker::storage::{commit_atomic, load, save, Alarm, Batch};
use std::time::Duration;
use worker::Response;

impl AgentDO {
    /// Quotes an upgrade: bounded open invoices per agent, a tag unique among
    /// open invoices at the price, the invoice stored before it is shown.
    pub(super) async fn quote(&self, call: QuoteCall) -> Result<Response, Failure> {
        let Ok(up) = &config::upgrade(&self.env) else {
            return Err(Failure::upgrades_not_configured());
        };
        let agent = AgentId::parse(&call.agent_id).ok_or("quote: bad agent id")?;
        let now = call.now_ms;
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        let mut book: InvoiceBook = load(&storage, INVOICES_KEY).await?.unwrap_or_default();
        book.prune(now);
        if !book.may_quote(now) {
            let next = book
                .items
                .iter()
                .filter(|i| i.is_open(now))
                .map(|i| i.expires_at_ms)
                .min()
                .unwrap_or(now);
            return Err(Refusal::new(
                ReasonCode::TooManyOpenInvoices,
                "this agent already has the most open invoices it may hold",
            )
            .retry_after(secs_until(now, next).max(1))
            .into());
        }
        let price = up.price(call.plan).ok_or("quote: free is not sold")?;
        let mut random = [0u8; 12];
        getrandom::getrandom(&mut random).map_err(|e| e.to_string())?;
        let ask = TagAsk {
            now_ms: now,
            expires_at_ms: now + INVOICE_TTL_MS,
            random: u32::from_le_bytes([random[8], random[9], random[10], random[11]]),
        };
        let tag = match call.forced_tag {
            Some(t) => Some(t),
            None => {
                ask.send(&self.env, &format!("{}:{}", up.chain_id, price.0))
                    .await?
            }
        };
        let Some(tag) = tag else {
            // Every tag at this price is held by an open invoice.
            return Err(Failure::Unavailable(Some(
                "too many open invoices at this price; retry later",
            )));
        };
        let mut id_random = [0u8; 8];
        id_random.copy_from_slice(&random[..8]);
        let req = QuoteRequest {
            agent_id: agent.clone(),
            plan: call.plan,
        };
        let inv = new_invoice(&req, up, tag, now, id_random);
        book.items.push(inv.clone());
        save(&storage, INVOICES_KEY, &book).await?;
        log::event(
            "upgrade_quoted",
            &[
                ("agent_id", agent.as_str()),
                ("invoice_id", inv.invoice_id.as_str()),
                ("amount_atomic", &inv.amount_atomic.to_string()),
            ],
        );
        let body = QuoteBody::new(&inv, &agent, up, call.claim_url);
        Ok(http::json(200, &body, NO_STORE)?)
    }

    /// Verifies a claim on-chain and credits it, once: the payment's own
    /// object binds it to this invoice first, then state, invoice and the
    /// KV record change in one atomic commit.
    pub(super) async fn claim(&self, call: ClaimCall) -> Result<Response, Failure> {
        let Ok(up) = &config::upgrade(&self.env) else {
            return Err(Failure::upgrades_not_configured());
        };
        let agent = AgentId::parse(&call.agent_id).ok_or("claim: bad agent id")?;
        let claim = Claim {
            invoice_id: call.invoice_id,
            agent_id: agent.clone(),
            signer: PublicKey::from_hex(&call.public_key).map_err(|e| e.to_string())?,
            tx_hash: call.tx_hash,
            seq: call.seq,
        };
        let now = call.now_ms;
        let _guard = self.lock.acquire().await;
        let storage = self.state.storage();
        // The signer must be the agent's key now (its key log's current
        // key, once it has one): decided before any invoice is looked at.
        let mut state: AgentState = load(&storage, STATE_KEY).await?.unwrap_or_default();
        signer_stands(&claim, state.keys.as_ref())?;
        let mut book: InvoiceBook = load(&storage, INVOICES_KEY).await?.unwrap_or_default();
        let inv = match before_chain(&claim, book.find(&claim.invoice_id)) {
            Err(r) => return Err(r.into()),
            Ok(Before::Repeat(body)) => return Ok(http::json(200, &body, NO_STORE)?),
            Ok(Before::Verify) => book.find(&claim.invoice_id).cloned().ok_or("checked")?,
        };
        let want = expected(&inv, up).ok_or("stored invoice has malformed addresses")?;
        let verdict = rpc::verify_payment(&up.rpc_url, &want, &claim.tx_hash).await;
        let confirmed = match after_chain(&claim, up.chain_id, verdict) {
            Ok(c) => c,
            Err(r) => {
                if let Some(why) = &r.log {
                    log::event(
                        "payment_provider_fault",
                        &[("agent_id", agent.as_str()), ("error", why)],
                    );
                }
                return Err(r.into());
            }
        };
        let bind = PaymentBind {
            record: PaymentRecord {
                invoice_id: claim.invoice_id.clone(),
                agent_id: agent.to_string(),
            },
        };
        if !bind.send(&self.env, &confirmed.payment).await? {
            return Err(Failure::refused(
                ReasonCode::PaymentAlreadyClaimed,
                "this payment already credited another invoice",
            ));
        }
        let inv = book.find_mut(&claim.invoice_id).ok_or("checked")?;
        let (plan, amount) = (inv.plan, Usdc(inv.amount_atomic));
        let before = state.paid.clone();
        let body = credit(
            &mut state.paid,
            inv,
            agent.as_str(),
            &claim.tx_hash,
            &confirmed,
            now,
        );
        let after = state.paid.clone();
        state.count(&agent, now, |r| {
            r.paid(&before, &after);
            r.credit(Method::Transfer, plan, amount, now);
        });
        let mut puts = vec![
            (STATE_KEY.to_owned(), serde_json::to_string(&state)?),
            (INVOICES_KEY.to_owned(), serde_json::to_string(&book)?),
        ];
        // head.json shows the tier: mirror the record if there is one (with
        // the retry alarm armed in the same commit, as for a write).
        let mirror = self.record_mirror(&agent, &state, now).await?;
        if let Some(m) = &mirror {
            puts.push((MIRROR_KEY.to_owned(), serde_json::to_string(m)?));
        }
        let alarm = match mirror {
            Some(_) => Alarm::In(Duration::from_millis(RETRY_BASE_MS)),
            None => Alarm::Keep,
        };
        let batch = Batch {
            puts: &puts,
            deletes: &[],
            alarm,
        };
        commit_atomic(&storage, &batch).await?;
        log::event(
            "upgrade_credited",
            &[
                ("agent_id", agent.as_str()),
                ("invoice_id", claim.invoice_id.as_str()),
                ("payment", confirmed.payment.as_str()),
                ("paid_until", body.paid_until.as_str()),
            ],
        );
        if mirror.is_some() {
            if let Err(e) = self
                .mirror_then_publish(mirror, now, self.due_at(&state))
                .await
            {
                log::event(
                    "kv_mirror_error",
                    &[("agent_id", agent.as_str()), ("error", &e.to_string())],
                );
            }
        }
        Ok(http::json(200, &body, NO_STORE)?)
    }

    /// The pending mirror with the agent's record and meta record as
    /// `state` now makes them (a credit changes the tier head.json and
    /// meta.json show); `None` before the
    /// agent's first write (no record to show).
    pub(super) async fn record_mirror(
        &self,
        agent: &AgentId,
        state: &AgentState,
        now: u64,
    ) -> worker::Result<Option<Mirror>> {
        let cfg = Config::of(&self.env);
        let Some(record) = state.record(agent, &cfg.tiers, now) else {
            return Ok(None);
        };
        let mut mirror = load::<Mirror>(&self.state.storage(), MIRROR_KEY)
            .await?
            .unwrap_or_default();
        mirror.push_record(agent, &serde_json::to_string(&record)?);
        MetaRecord::mirror(&mut mirror, agent, state, now);
        Ok(Some(mirror))
    }
}
