//! The x402 purchase in the agent's object (docs/PROTOCOL.md §10, x402):
//! its x402 invoices (one open per plan, tags from the price's book), a paid
//! request settled through the facilitator and credited only on what the
//! chain shows, and the alarm that finishes a settlement whose outcome a
//! request could not wait for. Every decision is `core::upgrade::x402`'s
//! (`settle`, `unbound`, `invoice`); these files ask the facilitator and
//! the chain, and store.
//!
//! Order for a payment of an open invoice, under the lock: the
//! facilitator's `/verify` (nothing bound, nothing moved); the payment's
//! identity (chain, token, payer, nonce) bound to this invoice in its own
//! object, first binding wins; the invoice stored as settling with the
//! alarm armed; `/settle`; the chain read. A crash anywhere after the
//! binding leaves the alarm to finish it.
//!
//! | concern | file |
//! |---|---|
//! | a request: its payment read, the agent's privacy, the lock; storing state and invoices with the alarm | this file |
//! | an unpaid request: the credit again, the wait, or the 402 with the open invoice or a new one | [`offer`] |
//! | a paid request: the store's answer, `/verify`, the binding, `/settle`, the chain's facts | [`settlement`] |
//! | the credit: the transfer's key bound, the days added, the record mirrored; the 200 | [`credit`] |
//! | the alarm: every settlement in flight looked at, credited or released | [`alarm`] |

mod alarm;
mod credit;
mod offer;
mod settlement;

use super::{AgentDO, MIRROR_KEY, STATE_KEY, X402_KEY};
use crate::core::crypto::AgentId;
use crate::core::mirror::Mirror;
use crate::core::reason::ReasonCode as R;
use crate::core::upgrade::config::UpgradeConfig;
use crate::core::upgrade::x402::config::X402Config;
use crate::core::upgrade::x402::invoice::X402Book;
use crate::core::upgrade::x402::unbound::Privacy;
use crate::core::upgrade::x402::wire::{read_payment, Version};
use crate::core::write::{AgentState, X402Due};
use crate::worker::config;
use crate::worker::do_wire::X402Call;
use crate::worker::failure::Failure;
use crate::worker::storage::{commit_atomic, load, Alarm, Batch};
use std::time::Duration;
use worker::Response;

/// What one request is decided with.
struct Ctx<'a> {
    up: &'a UpgradeConfig,
    x: &'a X402Config,
    agent: &'a AgentId,
    call: &'a X402Call,
    /// Whether answers may speak of the agent's payments.
    privacy: Privacy,
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

    /// Notes that a settlement needs the alarm at `at` (or sooner).
    fn due(&self, state: &mut AgentState, agent: &AgentId, at: u64) {
        let at = state.x402_due_at().map_or(at, |t| t.min(at));
        state.x402_due = Some(X402Due {
            agent_id: agent.to_string(),
            check_at_ms: at,
        });
    }

    /// Stores the state and the x402 invoices (and `mirror`'s ops) in one
    /// commit, with the alarm at the state's due time (an x402 look, counts
    /// to send; never later than the mirror's retry).
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
        let alarm = match (self.due_at(state), mirror) {
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
}
