//! The quote body, checked against what was asked before anything is paid
//! ([`check_quote`] → [`Invoice`]).

use crate::client::Error;
use crate::core::crypto::AgentId;
use crate::core::limits::Tier;
use crate::core::time::parse_rfc3339;
use crate::core::upgrade::amount::Usdc;
use crate::core::upgrade::claim::is_invoice_id;
use crate::core::upgrade::config::canonical_usdc;
use crate::core::upgrade::evm;
use crate::core::upgrade::quote::issued_to;
use serde_json::Value;

/// A quote body, checked against what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Invoice {
    pub invoice_id: String,
    pub plan: Tier,
    pub days: u64,
    pub amount: Usdc,
    pub chain: String,
    pub chain_id: u64,
    pub token: evm::Address,
    pub to: evm::Address,
    pub expires_at: String,
    pub expires_at_ms: u64,
    pub min_confirmations: u64,
}

/// Reads a quote body and checks it is an invoice for `agent` and `plan`
/// that can be paid as the protocol says (exact amount, known USDC on a
/// known chain). Anything else is the service's fault: nothing is paid.
pub(super) fn check_quote(body: &Value, agent: &AgentId, plan: Tier) -> Result<Invoice, Error> {
    let bad = |why: String| Error::Protocol(format!("quote answer: {why}"));
    let text = |k: &str| {
        body.get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("{k} is missing or not a string")))
    };
    let number = |k: &str| {
        body.get(k)
            .and_then(Value::as_u64)
            .ok_or_else(|| bad(format!("{k} is missing or not an integer")))
    };
    let invoice_id = text("invoice_id")?;
    if !is_invoice_id(invoice_id) || !issued_to(invoice_id, agent) {
        return Err(bad(format!(
            "invoice_id {invoice_id:?} was not issued to this agent"
        )));
    }
    if text("agent_id")? != agent.as_str() {
        return Err(bad("the invoice is for another agent".into()));
    }
    if text("plan")? != plan.as_str() {
        return Err(bad(format!(
            "plan {:?}, asked {}",
            text("plan")?,
            plan.as_str()
        )));
    }
    if text("asset")? != "USDC" {
        return Err(bad(format!("asset {:?}, not USDC", text("asset")?)));
    }
    let atomic: u64 = text("amount_atomic")?
        .parse()
        .map_err(|_| bad("amount_atomic is not a decimal integer".into()))?;
    let amount = Usdc(atomic);
    if atomic == 0 || Usdc::parse(text("amount")?) != Some(amount) {
        return Err(bad(format!(
            "amount {:?} does not match amount_atomic {atomic}",
            text("amount")?
        )));
    }
    let chain_id = number("chain_id")?;
    let token = evm::Address::parse(text("token_contract")?)
        .ok_or_else(|| bad("token_contract is not an address".into()))?;
    if let Some(usdc) = canonical_usdc(chain_id) {
        if usdc != token {
            return Err(bad(format!(
                "token_contract {token} is not USDC on chain {chain_id} ({usdc})"
            )));
        }
    }
    let to = evm::Address::parse(text("to_address")?)
        .filter(|a| a.as_str() != format!("0x{}", "0".repeat(40)))
        .ok_or_else(|| bad("to_address is not a usable address".into()))?;
    let expires_at = text("expires_at")?;
    let expires_at_ms =
        parse_rfc3339(expires_at).ok_or_else(|| bad("expires_at is not RFC 3339".into()))?;
    Ok(Invoice {
        invoice_id: invoice_id.to_owned(),
        plan,
        days: number("days")?,
        amount,
        chain: text("chain")?.to_owned(),
        chain_id,
        token,
        to,
        expires_at: expires_at.to_owned(),
        expires_at_ms,
        min_confirmations: number("min_confirmations")?.max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::upgrade::fixtures::*;
    use serde_json::json;

    #[test]
    fn quotes_are_checked_before_anything_is_paid() {
        let a = agent();
        let inv = check_quote(&quote_body("pro", LATER), &a, Tier::Pro).unwrap();
        assert_eq!(inv.amount, Usdc(5_004_217));
        assert_eq!(inv.chain_id, 8453);
        assert_eq!(inv.to.checksummed(), ACCOUNT_1);
        assert_eq!(inv.expires_at_ms, NOW + 3_600_000);
        assert_eq!(inv.min_confirmations, 5);
        let set = |k: &str, v: Value| {
            let mut b = quote_body("pro", LATER);
            b[k] = v;
            b
        };
        for bad in [
            set("plan", json!("plus")),
            set("agent_id", json!("ab".repeat(32))),
            set("invoice_id", json!(format!("inv_{}", "0".repeat(32)))),
            set("amount", json!("5.004218")),
            set("amount_atomic", json!("0")),
            set("asset", json!("DAI")),
            // Not Circle's USDC on Base.
            set("token_contract", json!(ACCOUNT_1)),
            set("to_address", json!(format!("0x{}", "0".repeat(40)))),
            set(
                "to_address",
                json!("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"),
            ),
            set("expires_at", json!("soon")),
            set("chain_id", json!("8453")),
        ] {
            let e = check_quote(&bad, &a, Tier::Pro).unwrap_err();
            assert_eq!(e.exit_code(), crate::client::ExitCode::Unavailable, "{bad}");
        }
        // On a chain without a known USDC, the quoted contract is taken.
        let other = set("chain_id", json!(31337));
        let other = {
            let mut o = other;
            o["token_contract"] = json!(ACCOUNT_1);
            o
        };
        assert!(check_quote(&other, &a, Tier::Pro).is_ok());
    }
}
