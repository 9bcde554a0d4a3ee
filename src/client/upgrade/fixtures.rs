//! Test fixtures shared by the upgrade modules' tests: a fixed clock, anvil's
//! well-known dev accounts, an agent and a quote body issued to it.

use super::record::{Payment, Record};
use crate::core::crypto::{AgentId, AgentKey};
use crate::core::time::rfc3339;
use serde_json::{json, Value};

pub(super) const NOW: u64 = 1_770_681_600_000; // 2026-02-10T00:00:00Z
pub(super) const LATER: &str = "2026-02-10T01:00:00Z";

// anvil's dev account 0 (its well-known key) and account 1.
pub(super) const ANVIL_KEY: &str =
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
pub(super) const ANVIL_ADDR: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
pub(super) const ACCOUNT_1: &str = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

pub(super) fn agent() -> AgentId {
    AgentKey::from_seed(&[5; 32]).agent_id()
}

pub(super) fn quote_body(plan: &str, expires_at: &str) -> Value {
    let a = agent();
    json!({
        "invoice_id": format!("inv_{}0123456789abcdef", &a.as_str()[..16]),
        "agent_id": a.as_str(), "plan": plan, "days": 30,
        "amount": "5.004217", "amount_atomic": "5004217", "asset": "USDC",
        "chain": "base", "chain_id": 8453,
        "token_contract": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
        "to_address": ACCOUNT_1, "memo": "…", "expires_at": expires_at,
        "claim_url": "http://svc.test/api/v1/self/upgrade/claim", "min_confirmations": 5
    })
}

pub(super) fn record(plan: &str, expires_at: &str) -> Record {
    Record::new(quote_body(plan, expires_at))
}

pub(super) fn payment() -> Payment {
    Payment {
        tx_hash: format!("0x{}", "ab".repeat(32)),
        raw_tx: "0x02".into(),
        from: ANVIL_ADDR.to_ascii_lowercase(),
        nonce: 0,
        signed_at: rfc3339(NOW),
    }
}
