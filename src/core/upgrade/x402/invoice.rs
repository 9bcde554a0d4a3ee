//! An agent's x402 invoices: the classic [`Invoice`] (price + unique tag,
//! from the same per-price [`TagBook`](crate::core::upgrade::invoice::TagBook)
//! as quotes, so no x402 invoice and no quote ever share an amount), with
//! where its settlement stands, and the rule that says which invoice an
//! authorization pays.

use super::config::X402Config;
use super::unbound::{Unbound, NO_OPEN_INVOICE};
use super::wire::{Fingerprint, Offer, Payment, PaymentId};
use crate::core::limits::Tier;
use crate::core::reason::ReasonCode as R;
use crate::core::reason::Refusal;
use crate::core::upgrade::config::UpgradeConfig;
use crate::core::upgrade::evm::Address;
use crate::core::upgrade::invoice::{
    Entitlement, Invoice, KEEP_AFTER_EXPIRY_MS, MAX_KEPT_PER_AGENT,
};
use crate::core::upgrade::outcome::{credit, expected, Claimed, Confirmed};
use crate::core::upgrade::quote::{new_invoice, QuoteRequest};
use crate::core::upgrade::receipt::Expected;
use serde::{Deserialize, Serialize};

/// An open invoice is offered again while at least this much of it is left
/// (a fresh one after that: a payer needs time to sign and send).
pub const REOFFER_MIN_LEFT_MS: u64 = 5 * 60 * 1000;
/// Kept back from `maxTimeoutSeconds`, for clocks that differ.
pub const SKEW_SECONDS: u64 = 120;
/// An authorization must stay valid this long after it arrives: the
/// reference facilitator refuses `validBefore < now + 6`.
pub const SETTLE_MARGIN_SECONDS: u64 = 6;

/// An authorization bound to an invoice and being settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settling {
    /// The payment (its payer and nonce within).
    pub id: PaymentId,
    /// The authorization exactly: only it is answered from the store.
    /// `None` in bindings stored before it was kept ([`X402Invoice::answers`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<Fingerprint>,
    /// The authorization's `validBefore`, Unix seconds: after it (and a
    /// margin) an unused authorization can never execute.
    pub valid_before: u64,
    /// When settling began, Unix ms.
    pub started_at_ms: u64,
    /// The transaction to look at first, once one is named (by the
    /// facilitator or an `AuthorizationUsed` log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_hash: Option<String>,
    /// The facilitator refused it naming no transaction and the chain
    /// showed it unused, so the payer was sent a new invoice: it no longer
    /// holds up unpaid requests for the plan (it is still watched).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub declined: bool,
}

/// Where an x402 invoice's payment stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum Stage {
    /// No authorization bound: an authorization for its amount may pay it.
    Open,
    /// One authorization is bound and being settled; no other will be.
    Settling(Settling),
    /// Credited, with this payment.
    Paid {
        /// The payment that credited it.
        by: PaymentId,
        /// Its authorization exactly (`None`: credited before it was kept).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fingerprint: Option<Fingerprint>,
    },
}

/// One x402 invoice. The fields are private so that the stage and the
/// invoice's `paid` move together: `Stage::Paid` exactly when `paid` is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct X402Invoice {
    invoice: Invoice,
    stage: Stage,
}

/// When an invoice quoted at `now_ms` stops being payable (the tag must be
/// reserved in the price's `TagBook` until then).
pub fn expires_at_ms(now_ms: u64, x: &X402Config) -> u64 {
    now_ms + x.invoice_ttl_seconds * 1000
}

impl X402Invoice {
    /// A new open invoice for `req` with `tag` (reserved until
    /// [`expires_at_ms`]) and the id's random half.
    pub fn new(
        req: &QuoteRequest,
        cfg: &UpgradeConfig,
        x: &X402Config,
        tag: u16,
        now_ms: u64,
        random: [u8; 8],
    ) -> X402Invoice {
        let mut invoice = new_invoice(req, cfg, tag, now_ms, random);
        invoice.expires_at_ms = expires_at_ms(now_ms, x);
        X402Invoice {
            invoice,
            stage: Stage::Open,
        }
    }

    /// The invoice (amount, plan, expiry; `paid` once credited).
    pub fn invoice(&self) -> &Invoice {
        &self.invoice
    }

    /// Where its payment stands.
    pub fn stage(&self) -> &Stage {
        &self.stage
    }

    /// `maxTimeoutSeconds` for a 402 at `now_ms`: the configured bound, or
    /// less so that an authorization made now dies before the invoice does
    /// (its tag is reused after that), clock skew kept back.
    pub fn max_timeout_seconds(&self, now_ms: u64, x: &X402Config) -> u64 {
        let left = self.invoice.expires_at_ms.saturating_sub(now_ms) / 1000;
        x.max_timeout_seconds.min(left.saturating_sub(SKEW_SECONDS))
    }

    /// Whether a 402 may offer it: open, with time left to pay.
    pub fn offerable(&self, now_ms: u64) -> bool {
        self.stage == Stage::Open
            && self.invoice.expires_at_ms.saturating_sub(now_ms) >= REOFFER_MIN_LEFT_MS
    }

    /// The 402's offer of it at `now_ms`.
    pub fn offer<'a>(&'a self, resource_url: &'a str, now_ms: u64, x: &X402Config) -> Offer<'a> {
        Offer {
            invoice: &self.invoice,
            resource_url,
            description: self.description(),
            max_timeout_seconds: self.max_timeout_seconds(now_ms, x),
        }
    }

    /// The requirements `payment` was made for, for `/settle`: this
    /// offer as the client accepted it (its `maxTimeoutSeconds` differs
    /// from one 402 to the next; the rest is the invoice's).
    pub fn offer_accepted_by<'a>(
        &'a self,
        payment: &Payment,
        resource_url: &'a str,
        now_ms: u64,
        x: &X402Config,
    ) -> Offer<'a> {
        let mut offer = self.offer(resource_url, now_ms, x);
        if let Some(t) = payment.accepted_max_timeout {
            offer.max_timeout_seconds = t;
        }
        offer
    }

    fn description(&self) -> String {
        let plan = match self.invoice.plan {
            Tier::Free => "Free",
            Tier::Pro => "Pro",
            Tier::Plus => "Plus",
        };
        format!(
            "Self Capsule {plan}, {} days (invoice {})",
            self.invoice.days, self.invoice.invoice_id
        )
    }

    /// What the chain must show of its payment: the invoice's chain, token,
    /// treasury, amount and window, at x402's confirmations.
    pub fn expected(&self, cfg: &UpgradeConfig, x: &X402Config) -> Option<Expected> {
        let mut want = expected(&self.invoice, cfg)?;
        want.min_confirmations = x.min_confirmations;
        Some(want)
    }

    /// The authorization bound to it (settling or paid): its payer and nonce,
    /// and its fingerprint when it was kept.
    fn bound(&self) -> Option<(&PaymentId, Option<&Fingerprint>)> {
        match &self.stage {
            Stage::Settling(s) => Some((&s.id, s.fingerprint.as_ref())),
            Stage::Paid { by, fingerprint } => Some((by, fingerprint.as_ref())),
            Stage::Open => None,
        }
    }

    /// Whether this invoice is bound to `p`'s payer and nonce (`None`: it
    /// is not), and if so whether to `p` itself, for `plan`: the only
    /// payment answered from the store.
    pub fn answers(&self, plan: Tier, p: &Payment) -> Option<bool> {
        let (id, fingerprint) = self.bound()?;
        if *id != p.id {
            return None;
        }
        let same = match fingerprint {
            Some(f) => *f == p.fingerprint(),
            None => self.legacy_match(p),
        };
        Some(same && self.invoice.plan == plan)
    }

    /// For a binding stored before fingerprints were kept, which names only
    /// the payer and nonce (settling: and `validBefore`): `p` is taken for
    /// the bound authorization when it agrees with everything stored, the
    /// invoice's amount and treasury included. What it could still differ
    /// in, `validAfter` and the signature, is known only to whoever saw the
    /// authorization: the payer, or a reader of the chain or mempool, where
    /// its settlement put it whole. Any of them could send it unchanged and
    /// be answered anyway, so refusing the rest protects nothing, and would
    /// refuse the payer's own resend. No such binding is made any more;
    /// they go with their invoices.
    fn legacy_match(&self, p: &Payment) -> bool {
        let a = &p.authorization;
        let window = match &self.stage {
            Stage::Settling(s) => s.valid_before == a.valid_before,
            _ => true,
        };
        window
            && a.value == self.invoice.amount_atomic
            && Address::parse(&self.invoice.to_address).as_ref() == Some(&a.to)
    }

    /// This invoice's terms at `p`'s value: the requirements `/verify`
    /// judges `p` against when it is not this invoice's payment (its
    /// signature, funds and window, not its amount).
    pub fn at_value_of(&self, p: &Payment) -> X402Invoice {
        let mut inv = self.clone();
        inv.invoice.amount_atomic = p.authorization.value;
        inv
    }

    /// Whether `p`, of this invoice's amount, may be bound to it at
    /// `now_ms`: it pays the treasury, is valid now with time to settle,
    /// and dies before the invoice does. `Err` says which rule failed.
    fn admits(&self, p: &Payment, cfg: &UpgradeConfig, now_ms: u64) -> Result<(), String> {
        let a = &p.authorization;
        let now = now_ms / 1000;
        let expires = self.invoice.expires_at_ms / 1000;
        if a.to != cfg.treasury {
            return Err(format!(
                "authorization.to must be {}",
                cfg.treasury.checksummed()
            ));
        }
        if a.valid_after > now {
            return Err("authorization.validAfter is in the future".into());
        }
        if now + SETTLE_MARGIN_SECONDS >= a.valid_before {
            return Err("authorization.validBefore is past, or too near to settle".into());
        }
        if a.valid_before > expires {
            return Err(format!(
                "authorization.validBefore is after the invoice's expiry ({expires}); use the 402's maxTimeoutSeconds"
            ));
        }
        Ok(())
    }

    /// Binds `settling`'s authorization to this open invoice.
    pub(crate) fn bind(&mut self, settling: Settling) {
        debug_assert_eq!(self.stage, Stage::Open);
        self.stage = Stage::Settling(settling);
    }

    /// The settling state, to update as facts arrive.
    pub(crate) fn settling_mut(&mut self) -> Option<&mut Settling> {
        match &mut self.stage {
            Stage::Settling(s) => Some(s),
            _ => None,
        }
    }

    /// The bound authorization died unused: the invoice is open again.
    pub(crate) fn release(&mut self) {
        if matches!(self.stage, Stage::Settling(_)) {
            self.stage = Stage::Open;
        }
    }

    /// Credits the bound payment, confirmed on-chain as `c` (whose global
    /// key the Worker has bound to this invoice): adds the plan's days,
    /// marks it paid. Returns the claim body.
    pub(crate) fn credit(
        &mut self,
        paid: &mut Entitlement,
        agent_id: &str,
        tx_hash: &str,
        c: &Confirmed,
        now_ms: u64,
    ) -> Option<Claimed> {
        let Stage::Settling(s) = &self.stage else {
            return None;
        };
        let (by, fingerprint) = (s.id.clone(), s.fingerprint.clone());
        let body = credit(paid, &mut self.invoice, agent_id, tx_hash, c, now_ms);
        self.stage = Stage::Paid { by, fingerprint };
        Some(body)
    }
}

/// What a payment is to an agent's x402 invoices ([`X402Book::find`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The invoice bound to this very authorization, for this plan.
    Bound(String),
    /// Anything else, checked before it is answered.
    Unbound(Unbound),
}

/// One agent's x402 invoices, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct X402Book {
    items: Vec<X402Invoice>,
}

impl X402Book {
    /// The invoices, oldest first.
    pub fn items(&self) -> &[X402Invoice] {
        &self.items
    }

    /// Adds a new invoice.
    pub fn add(&mut self, inv: X402Invoice) {
        self.items.push(inv);
    }

    /// The invoice with this id.
    pub fn find_mut(&mut self, invoice_id: &str) -> Option<&mut X402Invoice> {
        self.items
            .iter_mut()
            .find(|i| i.invoice.invoice_id == invoice_id)
    }

    /// The invoice with this id.
    pub fn get(&self, invoice_id: &str) -> Option<&X402Invoice> {
        self.items
            .iter()
            .find(|i| i.invoice.invoice_id == invoice_id)
    }

    /// What `p` is to this agent's invoices for `plan`: the invoice bound to
    /// this very authorization for this plan (answered from the store,
    /// whatever the time), else what the payment must be checked as
    /// ([`super::unbound`]): its payer and nonce bound here to something
    /// else; an open invoice of its amount that admits it; only invoices of
    /// its amount bound to other authorizations; or none (why: an open
    /// invoice of its amount that does not admit it says which rule).
    pub fn find(&self, plan: Tier, p: &Payment, cfg: &UpgradeConfig, now_ms: u64) -> Found {
        let id = |i: &X402Invoice| i.invoice.invoice_id.clone();
        let mut claimed = None;
        for i in &self.items {
            match i.answers(plan, p) {
                Some(true) => return Found::Bound(id(i)),
                Some(false) => claimed = claimed.or(Some(i)),
                None => {}
            }
        }
        if let Some(i) = claimed {
            return Found::Unbound(Unbound::Claimed(id(i)));
        }
        let of_amount = |i: &X402Invoice| {
            i.invoice.plan == plan && i.invoice.amount_atomic == p.authorization.value
        };
        let mut why = None;
        let open = self.items.iter().find(|i| {
            of_amount(i)
                && i.stage == Stage::Open
                && match i.admits(p, cfg, now_ms) {
                    Ok(()) => true,
                    Err(w) => {
                        why.get_or_insert(w);
                        false
                    }
                }
        });
        if let Some(i) = open {
            return Found::Unbound(Unbound::Open(id(i)));
        }
        let taken = self
            .items
            .iter()
            .rev()
            .find(|i| of_amount(i) && i.stage != Stage::Open);
        Found::Unbound(match (why, taken) {
            (None, Some(i)) => Unbound::Taken {
                invoice_id: id(i),
                settling: matches!(i.stage, Stage::Settling(_)),
            },
            (why, _) => Unbound::Unmatched(Refusal::new(
                R::X402InvoiceMismatch,
                why.unwrap_or_else(|| NO_OPEN_INVOICE.into()),
            )),
        })
    }

    /// Drops what is no longer needed: invoices kept long enough after
    /// expiry, then the oldest unpaid expired ones beyond the cap. An
    /// invoice being settled is always kept (its alarm finishes it).
    pub fn prune(&mut self, now_ms: u64) {
        let settling = |i: &X402Invoice| matches!(i.stage, Stage::Settling(_));
        self.items.retain(|i| {
            settling(i) || now_ms < i.invoice.expires_at_ms.saturating_add(KEEP_AFTER_EXPIRY_MS)
        });
        while self.items.len() > MAX_KEPT_PER_AGENT {
            let Some(drop) = self
                .items
                .iter()
                .position(|i| i.stage == Stage::Open && now_ms >= i.invoice.expires_at_ms)
                .or_else(|| self.items.iter().position(|i| !settling(i)))
            else {
                return;
            };
            self.items.remove(drop);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core::crypto::AgentId;
    use crate::core::upgrade::config::test_config;
    use crate::core::upgrade::x402::config::test_x402_config;
    use crate::core::upgrade::x402::wire::tests::case;
    use crate::core::upgrade::x402::wire::{read_payment, Version};

    /// The vectors' clock: the Base payment was signed at this second.
    pub(crate) const SIGNED_AT: u64 = 1_770_681_600;

    /// The Base v2 vector: 5.004217 USDC, valid before SIGNED_AT + 300.
    pub(crate) fn payment() -> Payment {
        let h = case(8453)["v2"]["payment_signature_header"]
            .as_str()
            .unwrap()
            .to_owned();
        read_payment(Version::V2, &h, &test_config()).unwrap()
    }

    pub(crate) fn agent() -> AgentId {
        AgentId::parse(&"0f".repeat(32)).unwrap()
    }

    /// An open Pro invoice of 5.004217 (tag 4217) quoted `ago_s` seconds
    /// before the vector was signed.
    pub(crate) fn open_invoice(ago_s: u64) -> X402Invoice {
        let req = QuoteRequest {
            agent_id: agent(),
            plan: Tier::Pro,
        };
        X402Invoice::new(
            &req,
            &test_config(),
            &test_x402_config(),
            4217,
            (SIGNED_AT - ago_s) * 1000,
            [1, 2, 3, 4, 5, 6, 7, 8],
        )
    }

    #[test]
    fn an_invoice_lives_15_minutes_and_is_offered_until_5_are_left() {
        let x = test_x402_config();
        let inv = open_invoice(0);
        let t0 = SIGNED_AT * 1000;
        assert_eq!(inv.invoice().amount_atomic, 5_004_217);
        assert_eq!(inv.invoice().expires_at_ms, t0 + 900_000);
        assert_eq!(inv.max_timeout_seconds(t0, &x), 300);
        // 6 minutes left: 360 - 120.
        assert_eq!(inv.max_timeout_seconds(t0 + 540_000, &x), 240);
        assert!(inv.offerable(t0 + 600_000));
        assert!(!inv.offerable(t0 + 600_001));
        assert_eq!(inv.max_timeout_seconds(t0 + 900_000, &x), 0);
        let offer = inv.offer("https://h/api/v1/self/upgrade/x402?plan=pro", t0, &x);
        assert_eq!(
            offer.description,
            "Self Capsule Pro, 30 days (invoice inv_0f0f0f0f0f0f0f0f0102030405060708)"
        );
        // Settling later, the requirements are the ones the client accepted.
        let late = t0 + 600_000;
        assert_eq!(inv.offer("u", late, &x).max_timeout_seconds, 180);
        assert_eq!(
            inv.offer_accepted_by(&payment(), "u", late, &x)
                .max_timeout_seconds,
            300
        );
        let want = inv.expected(&test_config(), &x).unwrap();
        assert_eq!((want.amount.0, want.min_confirmations), (5_004_217, 1));
        assert_eq!(want.not_after_sec, SIGNED_AT + 900);
    }

    /// The invoice `find` names, or why none.
    fn found(book: &X402Book, plan: Tier, p: &Payment, now_ms: u64) -> Result<Found, (R, String)> {
        match book.find(plan, p, &test_config(), now_ms) {
            Found::Unbound(Unbound::Unmatched(r)) => Err((r.code, r.detail.unwrap_or_default())),
            f => Ok(f),
        }
    }

    fn open_id(id: &str) -> Result<Found, (R, String)> {
        Ok(Found::Unbound(Unbound::Open(id.to_owned())))
    }

    #[test]
    fn a_payment_matches_only_the_invoice_whose_amount_it_signed() {
        let cfg = test_config();
        let p = payment();
        let now = (SIGNED_AT + 10) * 1000;
        let mut book = X402Book::default();
        book.add(open_invoice(60));
        let id = book.items()[0].invoice().invoice_id.clone();
        assert_eq!(found(&book, Tier::Pro, &p, now), open_id(&id));
        // The same header on another plan, or for another agent's book
        // (whose invoices have other amounts): no invoice.
        let (code, why) = found(&book, Tier::Plus, &p, now).unwrap_err();
        assert_eq!(
            (code, why.as_str()),
            (R::X402InvoiceMismatch, NO_OPEN_INVOICE)
        );
        let mut other = X402Book::default();
        let req = QuoteRequest {
            agent_id: AgentId::parse(&"ab".repeat(32)).unwrap(),
            plan: Tier::Pro,
        };
        other.add(X402Invoice::new(
            &req,
            &cfg,
            &test_x402_config(),
            4218,
            (SIGNED_AT - 60) * 1000,
            [9; 8],
        ));
        assert_eq!(
            found(&other, Tier::Pro, &p, now).unwrap_err().0,
            R::X402InvoiceMismatch
        );
    }

    #[test]
    fn the_time_window_and_recipient_rules() {
        let mut book = X402Book::default();
        book.add(open_invoice(60));
        let code = |book: &X402Book, p: &Payment, now_s: u64| {
            found(book, Tier::Pro, p, now_s * 1000).err()
        };
        let p = payment();
        assert_eq!(code(&book, &p, SIGNED_AT), None);
        // validBefore = SIGNED_AT + 300: 6 s of margin needed.
        assert_eq!(code(&book, &p, SIGNED_AT + 293), None);
        assert!(code(&book, &p, SIGNED_AT + 294)
            .unwrap()
            .1
            .contains("validBefore"));
        let mut later = p.clone();
        later.authorization.valid_after = SIGNED_AT + 1;
        assert!(code(&book, &later, SIGNED_AT)
            .unwrap()
            .1
            .contains("validAfter"));
        // An authorization outliving the invoice (quoted 14 min before).
        let mut late = X402Book::default();
        late.add(open_invoice(14 * 60));
        let (c, why) = code(&late, &p, SIGNED_AT).unwrap();
        assert_eq!(c, R::X402InvoiceMismatch);
        assert!(why.contains("expiry"), "{why}");
        let mut elsewhere = p.clone();
        elsewhere.authorization.to =
            Address::parse("0x90f79bf6eb2c4f870365e785982e1f101e93b906").unwrap();
        assert!(code(&book, &elsewhere, SIGNED_AT)
            .unwrap()
            .1
            .contains("authorization.to"));
    }

    /// `p` bound to a Pro invoice of its amount, settling; with its
    /// fingerprint, or (`legacy`) as bindings were stored before it was kept.
    pub(crate) fn settling_with(p: &Payment, legacy: bool) -> X402Invoice {
        let mut inv = open_invoice(60);
        inv.bind(Settling {
            id: p.id.clone(),
            fingerprint: (!legacy).then(|| p.fingerprint()),
            valid_before: p.authorization.valid_before,
            started_at_ms: SIGNED_AT * 1000,
            tx_hash: None,
            declined: false,
        });
        inv
    }

    /// `inv`, settling, now paid (as the credit leaves it).
    fn paid(mut inv: X402Invoice) -> X402Invoice {
        let Stage::Settling(s) = inv.stage.clone() else {
            panic!("not settling")
        };
        inv.stage = Stage::Paid {
            by: s.id,
            fingerprint: s.fingerprint,
        };
        inv
    }

    /// `p` signed again by its payer over the same nonce: `change` applied.
    fn resigned(p: &Payment, change: impl Fn(&mut Payment)) -> Payment {
        let mut q = p.clone();
        change(&mut q);
        assert_eq!(q.id, p.id, "the same payer and nonce");
        q
    }

    #[test]
    fn only_the_identical_authorization_of_the_plan_is_bound() {
        let p = payment();
        let now = (SIGNED_AT + 10) * 1000;
        for stage in ["settling", "paid"] {
            let inv = match stage {
                "settling" => settling_with(&p, false),
                _ => paid(settling_with(&p, false)),
            };
            let id = inv.invoice().invoice_id.clone();
            let mut book = X402Book::default();
            book.add(inv);
            let bound = Ok(Found::Bound(id.clone()));
            let claimed = Ok(Found::Unbound(Unbound::Claimed(id.clone())));
            assert_eq!(found(&book, Tier::Pro, &p, now), bound, "{stage}");
            // Another envelope (v1) around the same authorization: the same.
            let v1 = resigned(&p, |q| {
                q.version = super::super::wire::Version::V1;
                q.accepted_max_timeout = None;
            });
            assert_eq!(found(&book, Tier::Pro, &v1, now), bound, "{stage}");
            // Whatever the time: the store answers.
            assert_eq!(
                found(&book, Tier::Pro, &p, now + 86_400_000),
                bound,
                "{stage}"
            );
            // The same authorization for another plan, or the same payer
            // and nonce over another value, window or recipient, or with
            // another signature: not that payment.
            assert_eq!(found(&book, Tier::Plus, &p, now), claimed, "{stage}");
            for q in [
                resigned(&p, |q| q.authorization.value = 15_000_017),
                resigned(&p, |q| q.authorization.valid_before += 1),
                resigned(&p, |q| q.authorization.valid_after = 1),
                resigned(&p, |q| q.signature = format!("0x{}1b", "5a".repeat(64))),
            ] {
                assert_eq!(found(&book, Tier::Pro, &q, now), claimed, "{stage} {q:?}");
                assert_eq!(found(&book, Tier::Plus, &q, now), claimed, "{stage} {q:?}");
            }
        }
    }

    #[test]
    fn bindings_stored_without_a_fingerprint_match_on_what_they_stored() {
        let p = payment();
        let now = (SIGNED_AT + 10) * 1000;
        // As stored before fingerprints: no `fingerprint` member.
        let text = serde_json::to_string(&settling_with(&p, true)).unwrap();
        assert!(!text.contains("fingerprint"), "{text}");
        let legacy: X402Invoice = serde_json::from_str(&text).unwrap();
        for inv in [legacy.clone(), paid(legacy)] {
            let id = inv.invoice().invoice_id.clone();
            let settling = matches!(inv.stage(), Stage::Settling(_));
            let mut book = X402Book::default();
            book.add(inv);
            let bound = Ok(Found::Bound(id.clone()));
            let claimed = Ok(Found::Unbound(Unbound::Claimed(id.clone())));
            // The resend, also in another envelope, and what differs only
            // where nothing was stored (validAfter, the signature): bound.
            assert_eq!(found(&book, Tier::Pro, &p, now), bound);
            for q in [
                resigned(&p, |q| q.version = super::super::wire::Version::V1),
                resigned(&p, |q| q.authorization.valid_after = 1),
                resigned(&p, |q| q.signature = format!("0x{}1b", "5a".repeat(64))),
            ] {
                assert_eq!(found(&book, Tier::Pro, &q, now), bound);
            }
            // Another plan, value or recipient (settling: also another
            // validBefore): not that payment.
            assert_eq!(found(&book, Tier::Plus, &p, now), claimed);
            let elsewhere = Address::parse("0x90f79bf6eb2c4f870365e785982e1f101e93b906").unwrap();
            for q in [
                resigned(&p, |q| q.authorization.value = 15_000_017),
                resigned(&p, |q| q.authorization.to = elsewhere.clone()),
            ] {
                assert_eq!(found(&book, Tier::Pro, &q, now), claimed);
            }
            let window = resigned(&p, |q| q.authorization.valid_before += 1);
            let want = if settling { &claimed } else { &bound };
            assert_eq!(&found(&book, Tier::Pro, &window, now), want);
        }
    }

    #[test]
    fn an_amount_bound_to_another_authorization_is_taken() {
        let p = payment();
        let now = (SIGNED_AT + 10) * 1000;
        let other = resigned(&p, |_| {});
        let mut other = other;
        other.id.nonce =
            super::super::wire::Nonce::parse(&format!("0x{}", "cd".repeat(32))).unwrap();
        other.authorization.nonce = other.id.nonce.clone();
        let inv = settling_with(&p, false);
        let id = inv.invoice().invoice_id.clone();
        let mut book = X402Book::default();
        book.add(inv.clone());
        assert_eq!(
            found(&book, Tier::Pro, &other, now),
            Ok(Found::Unbound(Unbound::Taken {
                invoice_id: id.clone(),
                settling: true
            }))
        );
        let mut book = X402Book::default();
        book.add(paid(inv));
        assert_eq!(
            found(&book, Tier::Pro, &other, now),
            Ok(Found::Unbound(Unbound::Taken {
                invoice_id: id,
                settling: false
            }))
        );
        // Its terms at another value, for /verify.
        let odd = resigned(&other, |q| q.authorization.value = 42);
        assert_eq!(
            book.items()[0].at_value_of(&odd).invoice().amount_atomic,
            42
        );
    }

    #[test]
    fn pruning_keeps_what_is_being_settled() {
        let mut book = X402Book::default();
        let mut settling = open_invoice(0);
        settling.bind(Settling {
            id: payment().id,
            fingerprint: Some(payment().fingerprint()),
            valid_before: SIGNED_AT + 300,
            started_at_ms: SIGNED_AT * 1000,
            tx_hash: None,
            declined: false,
        });
        book.add(settling);
        for n in 0..60u16 {
            let mut i = open_invoice(0);
            i.invoice.invoice_id = format!("inv_{n:032x}");
            book.add(i);
        }
        let later = SIGNED_AT * 1000 + 900_000;
        book.prune(later);
        assert_eq!(book.items().len(), MAX_KEPT_PER_AGENT);
        assert!(matches!(book.items()[0].stage(), Stage::Settling(_)));
        book.prune(later + KEEP_AFTER_EXPIRY_MS);
        assert_eq!(book.items().len(), 1, "only the settling one");
    }

    #[test]
    fn stages_are_stored_tagged() {
        let mut inv = open_invoice(0);
        inv.bind(Settling {
            id: payment().id,
            fingerprint: Some(payment().fingerprint()),
            valid_before: 1,
            started_at_ms: 2,
            tx_hash: None,
            declined: false,
        });
        let text = serde_json::to_string(&inv).unwrap();
        assert!(text.contains(r#""stage":{"stage":"settling","id":"x402:8453:0x833589fcd6edb6e08f4c7c32d4f71b54bda02913:0x70997970c51812dc3a010c7d01b50e0d17dc79c8:0x1f26"#), "{text}");
        assert!(text.contains(r#""fingerprint":"sha256:"#), "{text}");
        assert_eq!(serde_json::from_str::<X402Invoice>(&text).unwrap(), inv);
        // A paid stage stored before fingerprints were kept still reads.
        let id = payment().id.key();
        let legacy = text.replace(
            &text[text.find(r#""stage":{"#).unwrap()..],
            &format!(r#""stage":{{"stage":"paid","by":"{id}"}}}}"#),
        );
        let read: X402Invoice = serde_json::from_str(&legacy).unwrap();
        assert_eq!(
            read.stage(),
            &Stage::Paid {
                by: payment().id,
                fingerprint: None
            }
        );
    }
}
