//! Quoting: reading a quote request, naming the invoice, and the 200 body.

use super::amount::Usdc;
use super::config::{chain_name, UpgradeConfig};
use super::invoice::{Invoice, INVOICE_TTL_MS};
use crate::core::crypto::AgentId;
use crate::core::json::{self, Json};
use crate::core::limits::Tier;
use crate::core::reason::ReasonCode as R;
use crate::core::reason::Refusal;
use crate::core::time::rfc3339;
use serde::Serialize;

/// New invoices (a quote, an x402 offer) per client address per rolling
/// 24 hours.
pub const QUOTES_PER_IP_24H: u32 = 30;
/// A quote or claim body is a few short strings.
pub const MAX_UPGRADE_BODY: usize = 4096;
const FIELDS: [&str; 4] = ["agent_id", "plan", "chain", "asset"];

/// A valid quote request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuoteRequest {
    /// The agent the invoice is bound to.
    pub agent_id: AgentId,
    /// `pro` or `plus`.
    pub plan: Tier,
}

/// Reads `{agent_id, plan, chain?, asset?}`. `chain` may name the configured
/// chain by name (`base`, `base-sepolia`, `eip155:<id>`) or id (number or
/// string); `asset` must be USDC (any case).
pub fn read_quote(body: &[u8], cfg: &UpgradeConfig) -> Result<QuoteRequest, Refusal> {
    let bad = |why: &str| Refusal::new(R::BadUpgradeRequest, why);
    let v = json::parse(body).map_err(|_| bad("body is not acceptable JSON"))?;
    let members = v
        .as_object()
        .ok_or_else(|| bad("body must be a JSON object"))?;
    if members.iter().any(|(k, _)| !FIELDS.contains(&k.as_str())) {
        return Err(bad(
            "unknown field; a quote request has agent_id, plan, and optionally chain and asset",
        ));
    }
    let agent_id = v
        .get("agent_id")
        .and_then(Json::as_str)
        .and_then(AgentId::parse)
        .ok_or_else(|| bad("agent_id must be 64 lowercase hex"))?;
    let plan = match v.get("plan").and_then(Json::as_str) {
        Some("pro") => Tier::Pro,
        Some("plus") => Tier::Plus,
        _ => {
            return Err(Refusal::new(
                R::UnsupportedPlan,
                "plan must be \"pro\" or \"plus\"",
            ))
        }
    };
    let chain_ok = match v.get("chain") {
        None | Some(Json::Null) => true,
        Some(Json::String(s)) => {
            s.eq_ignore_ascii_case(&chain_name(cfg.chain_id))
                || s.trim() == cfg.chain_id.to_string()
        }
        Some(n) => n.as_safe_u64() == Some(cfg.chain_id),
    };
    if !chain_ok {
        return Err(Refusal::new(
            R::UnsupportedChain,
            format!(
                "this service takes payments on {} (chain id {}) only",
                chain_name(cfg.chain_id),
                cfg.chain_id
            ),
        ));
    }
    match v.get("asset") {
        None | Some(Json::Null) => {}
        Some(Json::String(s)) if s.eq_ignore_ascii_case("USDC") => {}
        _ => return Err(Refusal::new(R::UnsupportedAsset, "asset must be \"USDC\"")),
    }
    Ok(QuoteRequest { agent_id, plan })
}

/// `inv_` + the agent id's first 16 hex + 16 random hex. The prefix lets a
/// claim for another agent's invoice be named as such without a lookup
/// (agent ids are public; the random half is what makes it unguessable).
pub fn invoice_id(agent: &AgentId, random: [u8; 8]) -> String {
    format!("inv_{}{}", &agent.as_str()[..16], hex::encode(random))
}

/// Whether an invoice id was issued to `agent` (see [`invoice_id`]).
pub fn issued_to(invoice_id: &str, agent: &AgentId) -> bool {
    invoice_id
        .strip_prefix("inv_")
        .and_then(|rest| rest.get(..16))
        .is_some_and(|p| p == &agent.as_str()[..16])
}

/// The invoice for `req` at `now_ms`, with its tag (1..=9999, from the
/// price's tag book) and random id half.
pub fn new_invoice(
    req: &QuoteRequest,
    cfg: &UpgradeConfig,
    tag: u16,
    now_ms: u64,
    random: [u8; 8],
) -> Invoice {
    let price = cfg.price(req.plan).unwrap_or(Usdc(0));
    Invoice {
        invoice_id: invoice_id(&req.agent_id, random),
        plan: req.plan,
        days: cfg.days,
        amount_atomic: price.0 + u64::from(tag),
        chain_id: cfg.chain_id,
        token_contract: cfg.usdc.as_str().to_owned(),
        to_address: cfg.treasury.as_str().to_owned(),
        quoted_at_ms: now_ms,
        expires_at_ms: now_ms + INVOICE_TTL_MS,
        paid: None,
    }
}

/// The 200 body of a quote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuoteBody {
    /// Claim with this.
    pub invoice_id: String,
    /// The agent the invoice is bound to.
    pub agent_id: String,
    /// `pro` or `plus`.
    pub plan: Tier,
    /// Days a payment buys.
    pub days: u32,
    /// The exact amount, 6 decimals (`"5.004217"`).
    pub amount: String,
    /// The same in atomic units, as a decimal string (`"5004217"`).
    pub amount_atomic: String,
    /// Always `USDC`.
    pub asset: &'static str,
    /// The chain's name (`base`, `base-sepolia`, `eip155:<id>`).
    pub chain: String,
    /// The chain id.
    pub chain_id: u64,
    /// The USDC contract to pay with (EIP-55).
    pub token_contract: String,
    /// Where to pay (EIP-55).
    pub to_address: String,
    /// How the payment names the invoice.
    pub memo: String,
    /// Pay (be mined) before this, RFC 3339.
    pub expires_at: String,
    /// Where to claim.
    pub claim_url: String,
    /// Confirmations the service waits for before crediting.
    pub min_confirmations: u64,
}

impl QuoteBody {
    /// The body for `inv`. `claim_url` is absolute.
    pub fn new(
        inv: &Invoice,
        agent: &AgentId,
        cfg: &UpgradeConfig,
        claim_url: String,
    ) -> QuoteBody {
        let amount = Usdc(inv.amount_atomic);
        QuoteBody {
            invoice_id: inv.invoice_id.clone(),
            agent_id: agent.to_string(),
            plan: inv.plan,
            days: inv.days,
            amount: amount.to_string(),
            amount_atomic: inv.amount_atomic.to_string(),
            asset: "USDC",
            chain: chain_name(inv.chain_id),
            chain_id: inv.chain_id,
            token_contract: cfg.usdc.checksummed(),
            to_address: cfg.treasury.checksummed(),
            memo: format!(
                "EVM USDC transfers carry no memo: the exact amount {amount} (amount_atomic {}) is this invoice's reference. Send exactly that, in one transfer of token_contract to to_address, mined before expires_at; then claim with the transaction hash.",
                inv.amount_atomic
            ),
            expires_at: rfc3339(inv.expires_at_ms),
            claim_url,
            min_confirmations: cfg.min_confirmations,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::upgrade::config::UpgradeConfig;

    fn cfg() -> UpgradeConfig {
        crate::core::upgrade::config::test_config()
    }

    const ID: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

    fn quote(body: &str) -> Result<QuoteRequest, Refusal> {
        read_quote(body.as_bytes(), &cfg())
    }

    #[test]
    fn requests_name_the_configured_chain_in_any_common_way() {
        for body in [
            format!(r#"{{"agent_id":"{ID}","plan":"pro"}}"#),
            format!(r#"{{"agent_id":"{ID}","plan":"pro","chain":"base","asset":"usdc"}}"#),
            format!(r#"{{"agent_id":"{ID}","plan":"pro","chain":8453}}"#),
            format!(r#"{{"agent_id":"{ID}","plan":"pro","chain":"8453","asset":"USDC"}}"#),
        ] {
            assert_eq!(quote(&body).unwrap().plan, Tier::Pro, "{body}");
        }
        let codes = |body: String| quote(&body).unwrap_err().code;
        assert_eq!(
            codes(format!(r#"{{"agent_id":"{ID}","plan":"free"}}"#)),
            R::UnsupportedPlan
        );
        assert_eq!(
            codes(format!(
                r#"{{"agent_id":"{ID}","plan":"pro","chain":"solana"}}"#
            )),
            R::UnsupportedChain
        );
        assert_eq!(
            codes(format!(r#"{{"agent_id":"{ID}","plan":"pro","chain":1}}"#)),
            R::UnsupportedChain
        );
        assert_eq!(
            codes(format!(
                r#"{{"agent_id":"{ID}","plan":"pro","asset":"DAI"}}"#
            )),
            R::UnsupportedAsset
        );
        assert_eq!(
            codes(format!(r#"{{"agent_id":"{ID}","plan":"pro","x":1}}"#)),
            R::BadUpgradeRequest
        );
        assert_eq!(
            codes(r#"{"agent_id":"nope","plan":"pro"}"#.into()),
            R::BadUpgradeRequest
        );
        assert_eq!(codes("[".into()), R::BadUpgradeRequest);
    }

    #[test]
    fn an_invoice_costs_the_price_plus_its_tag_and_says_how_to_pay() {
        let c = cfg();
        let req = quote(&format!(r#"{{"agent_id":"{ID}","plan":"pro"}}"#)).unwrap();
        let inv = new_invoice(&req, &c, 4217, 1_770_681_600_000, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(inv.amount_atomic, 5_004_217);
        assert!(issued_to(&inv.invoice_id, &req.agent_id));
        assert!(crate::core::upgrade::claim::is_invoice_id(&inv.invoice_id));
        let other = AgentId::parse(&"ab".repeat(32)).unwrap();
        assert!(!issued_to(&inv.invoice_id, &other));
        let body = QuoteBody::new(
            &inv,
            &req.agent_id,
            &c,
            "https://x/api/v1/self/upgrade/claim".into(),
        );
        assert_eq!(body.amount, "5.004217");
        assert_eq!(body.amount_atomic, "5004217");
        assert_eq!(body.chain, "base");
        assert_eq!(
            body.token_contract,
            "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
        );
        assert_eq!(body.expires_at, "2026-02-10T01:00:00Z");
        assert!(body.memo.contains("5.004217"));
    }
}
