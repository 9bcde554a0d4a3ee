//! The credit of a settlement the chain confirmed: the transfer's own key
//! bound to the invoice (a classic claim can never reuse it), the plan's
//! days added, the invoice paid and the record mirrored in one commit; and
//! the 200 that answers it.

use crate::core::crypto::AgentId;
use crate::core::operator::stats::Method;
use crate::core::reason::{ReasonCode as R, Refusal};
use crate::core::upgrade::amount::Usdc;
use crate::core::upgrade::outcome::{Claimed, PaymentRecord};
use crate::core::upgrade::x402::invoice::{Stage, X402Book};
use crate::core::upgrade::x402::settle as decide;
use crate::core::upgrade::x402::wire::{payment_response, Payment};
use crate::core::write::AgentState;
use crate::worker::do_wire::PaymentBind;
use crate::worker::failure::Failure;
use crate::worker::http::{self, NO_STORE};
use crate::worker::log;
use crate::worker::objects::agent::AgentDO;
use worker::Response;

/// The 200 of a credited payment: the claim's body (`repeat` when it was
/// credited before this request), with the settlement response header.
pub(super) fn paid(
    claimed: &Claimed,
    payment: Option<&Payment>,
    repeat: bool,
) -> Result<Response, Failure> {
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

impl AgentDO {
    /// Credits a settlement the chain confirmed: the transfer's own key
    /// bound to the invoice (a classic claim can never reuse it), then the
    /// plan's days, the invoice paid and the record mirrored, in one commit.
    pub(super) async fn credit(
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
        let (plan, amount) = (inv.invoice().plan, Usdc(inv.invoice().amount_atomic));
        let before = state.paid.clone();
        let claimed = decide::credit(inv, &mut state.paid, agent.as_str(), c, now)
            .ok_or("x402: credited an invoice that was not settling")?;
        let after = state.paid.clone();
        state.count(agent, now, |r| {
            r.paid(&before, &after);
            r.credit(Method::X402, plan, amount, now);
            r.settlement(id, None);
        });
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
                .mirror_then_publish(mirror, now, self.due_at(state))
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
}
