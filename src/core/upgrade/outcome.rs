//! A claim from start to finish, as pure steps the agent's Durable Object
//! runs under its lock: what the stored invoice allows before the chain is
//! asked, what the chain's verdict means, and what crediting changes.
//! Crediting is idempotent: the invoice remembers the payment it was
//! credited with, so the same claim again answers the same body and adds
//! nothing.

use super::claim::Claim;
use super::config::UpgradeConfig;
use super::evm::Address;
use super::invoice::{payment_key, Entitlement, Invoice, PaidWith};
use super::quote::issued_to;
use super::receipt::{Expected, Unpaid, Verdict};
use crate::core::limits::Tier;
use crate::core::reason::ReasonCode as R;
use crate::core::reason::Refusal;
use crate::core::time::rfc3339;
use serde::Serialize;

/// The 200 body of a claim (the same for a repeated claim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claimed {
    /// Always true.
    pub accepted: bool,
    /// The invoice credited.
    pub invoice_id: String,
    /// The agent credited.
    pub agent_id: String,
    /// The plan bought.
    pub plan: Tier,
    /// Days added.
    pub days: u32,
    /// The plan's paid-until after this credit, RFC 3339.
    pub paid_until: String,
    /// The payment.
    pub tx_hash: String,
    /// Its log.
    pub log_index: u64,
    /// Its block.
    pub block_number: u64,
    /// When it was credited, RFC 3339.
    pub credited_at: String,
}

impl Claimed {
    /// The body for an invoice credited with `paid`.
    pub fn of(inv: &Invoice, agent_id: &str, paid: &PaidWith) -> Claimed {
        Claimed {
            accepted: true,
            invoice_id: inv.invoice_id.clone(),
            agent_id: agent_id.to_owned(),
            plan: inv.plan,
            days: inv.days,
            paid_until: rfc3339(paid.paid_until_ms),
            tx_hash: paid.tx_hash.clone(),
            log_index: paid.log_index,
            block_number: paid.block_number,
            credited_at: rfc3339(paid.credited_at_ms),
        }
    }
}

/// What to do before asking the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// Already credited with this very transaction: answer this again.
    Repeat(Claimed),
    /// Ask the chain about the claim's transaction.
    Verify,
}

/// Checks a claim against the agent's stored invoice (`None`: no such
/// invoice in this agent's book).
pub fn before_chain(claim: &Claim, invoice: Option<&Invoice>) -> Result<Before, Refusal> {
    if !issued_to(&claim.invoice_id, &claim.agent_id) {
        return Err(Refusal::new(
            R::InvoiceAgentMismatch,
            "this invoice was quoted for another agent",
        ));
    }
    let Some(inv) = invoice else {
        return Err(Refusal::new(
            R::InvoiceNotFound,
            "no invoice with this id was quoted for this agent",
        ));
    };
    match &inv.paid {
        Some(p) if p.tx_hash == claim.tx_hash => {
            Ok(Before::Repeat(Claimed::of(inv, claim.agent_id.as_str(), p)))
        }
        Some(_) => Err(Refusal::new(
            R::InvoiceAlreadyPaid,
            "this invoice was already credited with another transaction",
        )),
        None => Ok(Before::Verify),
    }
}

/// How far a payment's block may be stamped before its quote: the quote's
/// time is the Worker's clock, the block's the chain's (a sequencer's, or a
/// local node's that stamps a block when it starts building it), and a
/// payer who pays at once must not be refused for their difference. The
/// amount still names the invoice: an earlier payment of the same amount
/// would have to be for a tag no open invoice held, in this minute.
pub const QUOTE_CLOCK_SKEW_SEC: u64 = 60;

/// What an invoice requires of its payment: what its quote said (chain,
/// contract, treasury, amount, window, the quote's time less
/// [`QUOTE_CLOCK_SKEW_SEC`]), with the confirmations configured now.
/// `None` if the stored addresses do not parse (a corrupt invoice).
pub fn expected(inv: &Invoice, cfg: &UpgradeConfig) -> Option<Expected> {
    Some(Expected {
        chain_id: inv.chain_id,
        usdc: Address::parse(&inv.token_contract)?,
        treasury: Address::parse(&inv.to_address)?,
        amount: inv.amount(),
        not_before_sec: (inv.quoted_at_ms / 1000).saturating_sub(QUOTE_CLOCK_SKEW_SEC),
        not_after_sec: inv.expires_at_ms / 1000,
        min_confirmations: cfg.min_confirmations,
    })
}

/// A payment the chain confirmed for an invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmed {
    /// `{chain_id}:{tx_hash}:{log_index}`: credits once, globally.
    pub payment: String,
    /// The matching log.
    pub log_index: u64,
    /// Its block.
    pub block_number: u64,
}

/// What the chain's verdict means for the claim. Waits carry
/// `retry_after_sec`; provider faults are 503s that credit nothing.
pub fn after_chain(claim: &Claim, chain_id: u64, verdict: Verdict) -> Result<Confirmed, Refusal> {
    let refuse = |code, detail: String| Err(Refusal::new(code, detail));
    match verdict {
        Verdict::Paid {
            log_index,
            block_number,
        } => Ok(Confirmed {
            payment: payment_key(chain_id, &claim.tx_hash, log_index),
            log_index,
            block_number,
        }),
        Verdict::Pending {
            confirmations,
            needed,
        } => Err(Refusal::new(
            R::PaymentPending,
            format!("{confirmations} of {needed} confirmations"),
        )
        .retry_after(2 * (needed - confirmations).clamp(1, 30))),
        Verdict::NotFound => Err(Refusal::new(
            R::PaymentNotFound,
            "no mined transaction with this hash on the payment chain (yet)",
        )
        .retry_after(10)),
        Verdict::ProviderFault(why) => Err(Refusal::new(
            R::PaymentProviderUnavailable,
            "the payment could not be verified on-chain just now",
        )
        .retry_after(30)
        .logged(why)),
        Verdict::Refused(r) => match r {
            Unpaid::Reverted => refuse(R::PaymentReverted, "the transaction reverted".into()),
            Unpaid::NoTransfer => refuse(
                R::PaymentNoTransfer,
                "the transaction holds no token transfer".into(),
            ),
            Unpaid::WrongToken => refuse(
                R::PaymentWrongToken,
                "the transfer is of another token than the invoice's USDC".into(),
            ),
            Unpaid::WrongRecipient => refuse(
                R::PaymentWrongRecipient,
                "the USDC transfer went to another address than the invoice's".into(),
            ),
            Unpaid::Underpaid { paid } => refuse(
                R::PaymentUnderpaid,
                format!("{paid} atomic units sent, less than the invoice's amount_atomic"),
            ),
            Unpaid::Overpaid { paid } => refuse(
                R::PaymentOverpaid,
                format!("{paid} atomic units sent, more than the invoice's amount_atomic"),
            ),
            Unpaid::BeforeQuote => refuse(
                R::PaymentBeforeInvoice,
                "the payment was mined before this invoice was quoted".into(),
            ),
            Unpaid::AfterExpiry => refuse(
                R::InvoiceExpired,
                "the payment was mined after the invoice expired".into(),
            ),
        },
    }
}

/// Credits a confirmed payment once the payment's global record names this
/// invoice: adds the plan's days and marks the invoice paid. Returns the body.
pub fn credit(
    paid: &mut Entitlement,
    inv: &mut Invoice,
    agent_id: &str,
    tx_hash: &str,
    c: &Confirmed,
    now_ms: u64,
) -> Claimed {
    let until = paid.credit(inv.plan, inv.days, now_ms);
    let with = PaidWith {
        payment: c.payment.clone(),
        tx_hash: tx_hash.to_owned(),
        log_index: c.log_index,
        block_number: c.block_number,
        credited_at_ms: now_ms,
        paid_until_ms: until,
    };
    let body = Claimed::of(inv, agent_id, &with);
    inv.paid = Some(with);
    body
}

/// The record kept per payment (one Durable Object per payment key): which
/// invoice and agent it credited. Set once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PaymentRecord {
    /// The invoice it credits.
    pub invoice_id: String,
    /// The agent it credits.
    pub agent_id: String,
}

impl PaymentRecord {
    /// Binds a payment: the first binding wins; the same binding again is
    /// fine (a retried claim); any other is refused. `Ok(true)` when
    /// `stored` must be written.
    pub fn bind(stored: Option<&PaymentRecord>, want: &PaymentRecord) -> Result<bool, Refusal> {
        match stored {
            None => Ok(true),
            Some(s) if s == want => Ok(false),
            Some(_) => Err(Refusal::new(
                R::PaymentAlreadyClaimed,
                "this payment already credited another invoice",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::crypto::AgentKey;
    use crate::core::upgrade::quote::{new_invoice, QuoteRequest};

    fn cfg() -> UpgradeConfig {
        crate::core::upgrade::config::test_config()
    }

    const T0: u64 = 1_770_681_600_000;

    fn setup() -> (Claim, Invoice) {
        let k = AgentKey::from_seed(&[5; 32]);
        let inv = new_invoice(
            &QuoteRequest {
                agent_id: k.agent_id(),
                plan: Tier::Pro,
            },
            &cfg(),
            42,
            T0,
            [1; 8],
        );
        let claim = Claim {
            invoice_id: inv.invoice_id.clone(),
            agent_id: k.agent_id(),
            signer: k.public_key(),
            tx_hash: format!("0x{}", "ab".repeat(32)),
            seq: 1,
        };
        (claim, inv)
    }

    fn paid() -> Verdict {
        Verdict::Paid {
            log_index: 2,
            block_number: 9,
        }
    }

    #[test]
    fn a_credit_is_once_and_a_repeat_answers_the_same() {
        let (claim, mut inv) = setup();
        assert_eq!(before_chain(&claim, Some(&inv)), Ok(Before::Verify));
        let c = after_chain(&claim, 8453, paid()).unwrap();
        assert_eq!(c.payment, format!("8453:{}:2", claim.tx_hash));
        let mut e = Entitlement::default();
        let body = credit(
            &mut e,
            &mut inv,
            claim.agent_id.as_str(),
            &claim.tx_hash,
            &c,
            T0 + 1000,
        );
        assert_eq!(e.tier_at(T0 + 1000), Tier::Pro);
        // The same claim again: the same body, and nothing to credit.
        assert_eq!(before_chain(&claim, Some(&inv)), Ok(Before::Repeat(body)));
        // Another transaction for the paid invoice: refused.
        let mut other = claim.clone();
        other.tx_hash = format!("0x{}", "cd".repeat(32));
        assert_eq!(
            before_chain(&other, Some(&inv)).unwrap_err().code,
            R::InvoiceAlreadyPaid
        );
    }

    #[test]
    fn invoices_of_other_agents_and_unknown_ones_are_named() {
        let (claim, inv) = setup();
        let mut thief = claim.clone();
        thief.agent_id = AgentKey::from_seed(&[6; 32]).agent_id();
        assert_eq!(
            before_chain(&thief, None).unwrap_err().code,
            R::InvoiceAgentMismatch
        );
        assert_eq!(
            before_chain(&claim, None).unwrap_err().code,
            R::InvoiceNotFound
        );
        let _ = inv;
    }

    #[test]
    fn every_chain_verdict_has_its_code() {
        let (claim, _) = setup();
        let code = |v: Verdict| after_chain(&claim, 8453, v).unwrap_err();
        let pending = code(Verdict::Pending {
            confirmations: 1,
            needed: 5,
        });
        assert_eq!(
            (pending.code, pending.retry_after_sec),
            (R::PaymentPending, Some(8))
        );
        assert_eq!(code(Verdict::NotFound).code, R::PaymentNotFound);
        let fault = code(Verdict::ProviderFault("rpc down".into()));
        assert_eq!(fault.code, R::PaymentProviderUnavailable);
        assert_eq!(fault.log.as_deref(), Some("rpc down"));
        assert!(
            !fault.detail_or_code().contains("rpc down"),
            "provider details stay in the log"
        );
        for (r, want) in [
            (Unpaid::Reverted, R::PaymentReverted),
            (Unpaid::NoTransfer, R::PaymentNoTransfer),
            (Unpaid::WrongToken, R::PaymentWrongToken),
            (Unpaid::WrongRecipient, R::PaymentWrongRecipient),
            (Unpaid::Underpaid { paid: 1 }, R::PaymentUnderpaid),
            (Unpaid::Overpaid { paid: 1 }, R::PaymentOverpaid),
            (Unpaid::BeforeQuote, R::PaymentBeforeInvoice),
            (Unpaid::AfterExpiry, R::InvoiceExpired),
        ] {
            assert_eq!(code(Verdict::Refused(r)).code, want);
        }
    }

    #[test]
    fn a_payment_binds_to_its_first_invoice_only() {
        let a = PaymentRecord {
            invoice_id: "inv_a".into(),
            agent_id: "a".into(),
        };
        let b = PaymentRecord {
            invoice_id: "inv_b".into(),
            agent_id: "b".into(),
        };
        assert_eq!(PaymentRecord::bind(None, &a), Ok(true));
        assert_eq!(PaymentRecord::bind(Some(&a), &a), Ok(false));
        assert_eq!(
            PaymentRecord::bind(Some(&a), &b).unwrap_err().code,
            R::PaymentAlreadyClaimed
        );
    }

    #[test]
    fn the_expected_payment_is_what_the_quote_said() {
        let (_, inv) = setup();
        let e = expected(&inv, &cfg()).unwrap();
        assert_eq!(e.amount.0, 5_000_042);
        // A minute of clock difference between the Worker and the chain.
        assert_eq!(e.not_before_sec, T0 / 1000 - 60);
        assert_eq!(e.not_after_sec, inv.expires_at_ms / 1000);
        assert_eq!(e.treasury.as_str(), inv.to_address);
        assert_eq!(e.min_confirmations, 5);
    }
}
