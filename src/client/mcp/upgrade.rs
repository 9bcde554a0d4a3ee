//! `self_upgrade`: the paid tier from inside the agent. `status` and
//! `quote` always work; `pay` only when the server was started with an EVM
//! key and a chain (`SELFCAP_EVM_KEY`, `SELFCAP_RPC_URL`), and it buys at
//! most once, through the same never-pay-twice record as `selfcap upgrade`
//! (`method: "x402"` pays like `selfcap upgrade --x402`).

use super::ToolHost;
use crate::client::upgrade::{UpgradeOptions, X402Options, PROVIDER_TIMEOUT};
use crate::client::{Error, HeadOutcome};
use crate::core::limits::Tier;
use crate::core::mcp::args::{PayMethod, UpgradeAction};
use crate::core::mcp::results::{self, Answer};
use serde_json::json;
use std::time::Duration;

impl ToolHost {
    pub(super) fn upgrade(
        &self,
        action: UpgradeAction,
        plan: Option<String>,
        method: PayMethod,
    ) -> Result<Answer, Error> {
        let c = match self.client() {
            Ok(c) => c,
            Err(a) => return Ok(a),
        };
        let plan = plan.as_deref().and_then(|p| {
            Tier::ALL
                .into_iter()
                .find(|t| *t != Tier::Free && t.as_str() == p)
        });
        let can_pay = self.pay.is_some();
        match (action, plan) {
            (UpgradeAction::Status, _) => {
                // Refresh the tier from the head when the service answers.
                let writes = match c.head(None) {
                    Ok(HeadOutcome::Changed { head }) => Some(json!(head.writes)),
                    _ => None,
                };
                let s = c.status()?;
                let mut o = json!({
                    "agent_id": s.agent_id,
                    "tier": s.tier.unwrap_or_else(|| "free".into()),
                    "paid_until": s.paid_until,
                    "as_of": s.tier_as_of,
                    "can_pay": can_pay,
                });
                if let Some(w) = writes {
                    o["writes"] = w;
                }
                Ok(Answer::ok(o))
            }
            (UpgradeAction::Quote, Some(plan)) => {
                let q = c.upgrade_quote(plan)?;
                let mut o = q;
                o["hint"] = if can_pay {
                    "Call self_upgrade with action pay and this plan to pay and claim it."
                } else {
                    "Pay amount_atomic of token_contract to to_address on the quoted chain, then run `selfcap upgrade claim --invoice <invoice_id> --tx <hash>`; or start selfcap mcp with SELFCAP_EVM_KEY and SELFCAP_RPC_URL to pay with action pay."
                }
                .into();
                Ok(Answer::ok(o))
            }
            (UpgradeAction::Pay, Some(plan)) => {
                let Some(pay) = &self.pay else {
                    return Ok(results::error(
                        "no_evm_key",
                        "paying needs an EVM key and a chain: this server was started without SELFCAP_EVM_KEY and SELFCAP_RPC_URL",
                        "Use action quote and pay from a wallet, or restart selfcap mcp with both set.",
                    ));
                };
                // Either way through the one record: a purchase in flight
                // is finished by its own method, never paid twice.
                let done = match method {
                    PayMethod::Transfer => c.upgrade(
                        &UpgradeOptions {
                            plan,
                            evm_key: pay.evm_key.clone(),
                            rpc_url: pay.rpc_url.clone(),
                            timeout: pay.timeout,
                            poll: Duration::from_secs(1),
                            provider_timeout: PROVIDER_TIMEOUT,
                            new: false,
                            stop_after: None,
                        },
                        &|_| {},
                    )?,
                    PayMethod::X402 => c.upgrade_x402(
                        &X402Options {
                            plan,
                            evm_key: pay.evm_key.clone(),
                            chain_id: None,
                            rpc_url: Some(pay.rpc_url.clone()),
                            price: None,
                            pay_to: None,
                            timeout: pay.timeout,
                            poll: Duration::from_secs(1),
                            new: false,
                            stop_after: None,
                        },
                        &|_| {},
                    )?,
                };
                let mut o = done.claimed;
                o["credited"] = true.into();
                o["fresh"] = done.fresh.into();
                if !done.fresh {
                    o["detail"] = "Credited on an earlier call; nothing was paid now. This server buys at most once: renewing or another plan is the operator's `selfcap upgrade --new`.".into();
                }
                Ok(Answer::ok(o))
            }
            (_, None) => Ok(results::error(
                "invalid_arguments",
                "plan: expected pro or plus",
                "Pass plan: pro or plus.",
            )),
        }
    }
}
