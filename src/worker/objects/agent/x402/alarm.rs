//! The alarm's part: every settling invoice looked at on the chain,
//! credited, released or looked at again later
//! (`core::upgrade::x402::settle::on_alarm` decides).

use crate::core::crypto::AgentId;
use crate::core::upgrade::x402::invoice::{Stage, X402Book};
use crate::core::upgrade::x402::settle::{on_alarm, Alarm as Next};
use crate::core::write::{AgentState, X402Due};
use crate::worker::config;
use crate::worker::failure::Failure;
use crate::worker::log;
use crate::worker::objects::agent::{AgentDO, STATE_KEY, X402_KEY};
use crate::worker::read_cache;
use crate::worker::storage::load;
use std::time::Duration;

impl AgentDO {
    /// The alarm's part: every settling invoice looked at on the chain,
    /// credited, released or looked at again later. Runs before the
    /// mirror's retry, which then keeps the alarm no later than the next
    /// look.
    pub(in crate::worker::objects::agent) async fn x402_alarm(
        &self,
        now: u64,
    ) -> Result<Option<u64>, Failure> {
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
                Next::Released => {
                    state.count(&agent, now, |r| r.settlement(&id, None));
                    log::event(
                        "x402_released",
                        &[("agent_id", agent.as_str()), ("invoice_id", id.as_str())],
                    )
                }
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
