//! Invoices: what a quote promises, how its amount names it on-chain, and
//! the per-agent book the agent's Durable Object keeps.
//!
//! EVM USDC transfers carry no memo, so the amount is the reference: an
//! invoice costs its plan's price (whole cents) plus a tag of 1..=9999
//! atomic units below the cent, and no two open invoices at one price share
//! a tag (the [`TagBook`], kept by one object per price). A payment can
//! therefore only ever match the one invoice it was made for: someone who
//! watches the chain and quotes afterwards gets another amount, and an
//! invoice quoted after a payment was mined can never claim it.

use super::amount::{Usdc, CENT};
pub use super::entitlement::Entitlement;
use crate::core::limits::Tier;
use serde::{Deserialize, Serialize};

/// How long a quote stays payable.
pub const INVOICE_TTL_MS: u64 = 60 * 60 * 1000;
/// How long an invoice is kept after it expires, so a payment mined in time
/// can still be claimed late (and a paid one answered again, idempotently).
pub const KEEP_AFTER_EXPIRY_MS: u64 = 30 * 24 * 60 * 60 * 1000;
/// Unpaid, unexpired invoices one agent may hold.
pub const MAX_OPEN_PER_AGENT: usize = 3;
/// Invoices one agent's book keeps at most (oldest expired ones go first).
pub const MAX_KEPT_PER_AGENT: usize = 50;
/// Distinct tags per price: 1..=9999 atomic units.
pub const TAGS: u16 = (CENT - 1) as u16;

/// One quote, as the agent's object stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invoice {
    /// `inv_` + 32 hex.
    pub invoice_id: String,
    /// The plan bought.
    pub plan: Tier,
    /// Days it buys.
    pub days: u32,
    /// Exact amount due, atomic units (price + tag).
    pub amount_atomic: u64,
    /// The chain it must be paid on.
    pub chain_id: u64,
    /// The USDC contract, lowercase.
    pub token_contract: String,
    /// The treasury, lowercase.
    pub to_address: String,
    /// Quote time, Unix ms.
    pub quoted_at_ms: u64,
    /// Payable until, Unix ms.
    pub expires_at_ms: u64,
    /// Set once, when a payment credited it.
    pub paid: Option<PaidWith>,
}

/// The payment an invoice was credited with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaidWith {
    /// `{chain_id}:{tx_hash}:{log_index}`: the payment's global identity.
    pub payment: String,
    /// The transaction.
    pub tx_hash: String,
    /// The matching log in it.
    pub log_index: u64,
    /// The block it was mined in.
    pub block_number: u64,
    /// When it was credited, Unix ms.
    pub credited_at_ms: u64,
    /// The plan's paid-until after this credit, Unix ms.
    pub paid_until_ms: u64,
}

impl Invoice {
    /// The amount due.
    pub fn amount(&self) -> Usdc {
        Usdc(self.amount_atomic)
    }
    /// Unpaid and still payable at `now_ms`.
    pub fn is_open(&self, now_ms: u64) -> bool {
        self.paid.is_none() && now_ms < self.expires_at_ms
    }
}

/// The identity of one payment: each can credit once, across all agents
/// and invoices.
pub fn payment_key(chain_id: u64, tx_hash: &str, log_index: u64) -> String {
    format!("{chain_id}:{tx_hash}:{log_index}")
}

/// One agent's invoices, newest last.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvoiceBook {
    /// The kept invoices.
    pub items: Vec<Invoice>,
}

impl InvoiceBook {
    /// Unpaid, unexpired invoices.
    pub fn open(&self, now_ms: u64) -> usize {
        self.items.iter().filter(|i| i.is_open(now_ms)).count()
    }
    /// Whether another quote may be added (after [`InvoiceBook::prune`]).
    pub fn may_quote(&self, now_ms: u64) -> bool {
        self.open(now_ms) < MAX_OPEN_PER_AGENT
    }
    /// The invoice with this id.
    pub fn find(&self, invoice_id: &str) -> Option<&Invoice> {
        self.items.iter().find(|i| i.invoice_id == invoice_id)
    }
    /// Mutable access by id.
    pub fn find_mut(&mut self, invoice_id: &str) -> Option<&mut Invoice> {
        self.items.iter_mut().find(|i| i.invoice_id == invoice_id)
    }
    /// Drops invoices kept long enough, then the oldest unpaid expired ones
    /// beyond the cap (paid ones stay while they fit: they answer repeated
    /// claims).
    pub fn prune(&mut self, now_ms: u64) {
        self.items
            .retain(|i| now_ms < i.expires_at_ms.saturating_add(KEEP_AFTER_EXPIRY_MS));
        while self.items.len() > MAX_KEPT_PER_AGENT {
            let drop = self
                .items
                .iter()
                .position(|i| i.paid.is_none() && now_ms >= i.expires_at_ms)
                .unwrap_or(0);
            self.items.remove(drop);
        }
    }
}

/// The tags in use at one price: `(tag, expires_at_ms)`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagBook {
    /// Tags held by unexpired invoices.
    pub held: Vec<(u16, u64)>,
}

impl TagBook {
    /// Reserves a tag until `expires_at_ms`, starting the search at a
    /// position taken from `random` (so tags are not guessable in order).
    /// `None` when all 9999 are held.
    pub fn allocate(&mut self, now_ms: u64, expires_at_ms: u64, random: u32) -> Option<u16> {
        self.held.retain(|(_, until)| *until > now_ms);
        if self.held.len() >= usize::from(TAGS) {
            return None;
        }
        let start = (random % u32::from(TAGS)) as u16;
        let tag = (0..TAGS)
            .map(|i| (start + i) % TAGS + 1)
            .find(|t| !self.held.iter().any(|(h, _)| h == t))?;
        self.held.push((tag, expires_at_ms));
        Some(tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 24 * 60 * 60 * 1000;

    #[test]
    fn tags_are_unique_among_held_and_free_again_after_expiry() {
        let mut b = TagBook::default();
        let mut seen = std::collections::HashSet::new();
        for i in 0..u32::from(TAGS) {
            let t = b.allocate(0, 1000, i.wrapping_mul(2_654_435_761)).unwrap();
            assert!((1..=TAGS).contains(&t));
            assert!(seen.insert(t), "tag {t} handed out twice");
        }
        assert_eq!(b.allocate(0, 1000, 7), None, "all held");
        assert!(
            b.allocate(1000, 2000, 7).is_some(),
            "expired tags come back"
        );
    }

    #[test]
    fn renewals_stack_and_expiry_returns_to_free() {
        let mut e = Entitlement::default();
        assert_eq!(e.tier_at(0), Tier::Free);
        let t0 = 1_000 * DAY;
        assert_eq!(e.credit(Tier::Pro, 30, t0), t0 + 30 * DAY);
        assert_eq!(e.credit(Tier::Pro, 30, t0 + DAY), t0 + 60 * DAY, "stacks");
        assert_eq!(e.tier_at(t0 + 59 * DAY), Tier::Pro);
        assert_eq!(e.paid_until(t0), Some(t0 + 60 * DAY));
        assert_eq!(
            e.tier_at(t0 + 60 * DAY),
            Tier::Free,
            "ends exactly at until"
        );
        // After a lapse the next credit counts from now, not from the past.
        let later = t0 + 100 * DAY;
        assert_eq!(e.credit(Tier::Pro, 30, later), later + 30 * DAY);
        // Plus on top of pro: plus while it lasts, then all the pro time
        // that was left (30 days), none of it lost.
        e.credit(Tier::Plus, 10, later);
        assert_eq!(e.tier_at(later + DAY), Tier::Plus);
        assert_eq!(e.paid_until(later + DAY), Some(later + 10 * DAY));
        assert_eq!(e.tier_at(later + 11 * DAY), Tier::Pro);
        assert_eq!(e.paid_until(later + 11 * DAY), Some(later + 40 * DAY));
        assert_eq!(e.tier_at(later + 40 * DAY), Tier::Free);
        // Plus longer than the pro time left: still none lost.
        let mut e = Entitlement::default();
        e.credit(Tier::Pro, 5, t0);
        e.credit(Tier::Plus, 30, t0 + DAY);
        assert_eq!(e.paid_until(t0 + 2 * DAY), Some(t0 + 31 * DAY));
        assert_eq!(e.tier_at(t0 + 31 * DAY), Tier::Pro);
        assert_eq!(e.paid_until(t0 + 31 * DAY), Some(t0 + 35 * DAY));
        // Pro bought during plus starts when plus ends.
        let mut e = Entitlement::default();
        e.credit(Tier::Plus, 10, t0);
        assert_eq!(e.credit(Tier::Pro, 30, t0 + DAY), t0 + 40 * DAY);
        assert_eq!(e.tier_at(t0 + 9 * DAY), Tier::Plus);
        assert_eq!(e.tier_at(t0 + 39 * DAY), Tier::Pro);
        assert_eq!(e.credit(Tier::Free, 30, t0), t0);
    }

    fn invoice(n: u8, quoted: u64, paid: bool) -> Invoice {
        Invoice {
            invoice_id: format!("inv_{n:032x}"),
            plan: Tier::Pro,
            days: 30,
            amount_atomic: 5_000_000 + u64::from(n),
            chain_id: 8453,
            token_contract: "0x".into(),
            to_address: "0x".into(),
            quoted_at_ms: quoted,
            expires_at_ms: quoted + INVOICE_TTL_MS,
            paid: paid.then(|| PaidWith {
                payment: "p".into(),
                tx_hash: "t".into(),
                log_index: 0,
                block_number: 1,
                credited_at_ms: quoted,
                paid_until_ms: quoted,
            }),
        }
    }

    #[test]
    fn the_book_bounds_open_quotes_and_keeps_paid_ones() {
        let mut b = InvoiceBook::default();
        for n in 0..3 {
            assert!(b.may_quote(0));
            b.items.push(invoice(n, 0, false));
        }
        assert!(!b.may_quote(0), "three open");
        assert!(b.may_quote(INVOICE_TTL_MS), "expired ones do not count");
        // Many old invoices: unpaid expired ones are dropped first.
        let mut b = InvoiceBook::default();
        b.items.push(invoice(200, 0, true));
        for n in 0..60 {
            b.items.push(invoice(n, 10, false));
        }
        b.prune(2 * INVOICE_TTL_MS);
        assert_eq!(b.items.len(), MAX_KEPT_PER_AGENT);
        assert!(b.find(&format!("inv_{:032x}", 200)).is_some(), "paid kept");
        // Past the keeping time everything goes.
        b.prune(KEEP_AFTER_EXPIRY_MS + 2 * INVOICE_TTL_MS);
        assert!(b.items.is_empty());
    }
}
