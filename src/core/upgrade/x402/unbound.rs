//! A payment that is not the identical authorization of one of the agent's
//! bound invoices ([`X402Book::find`](super::invoice::X402Book::find)):
//! what must be asked before it is answered, and the answer.
//!
//! Only the identical authorization of a bound invoice is answered from
//! the store. Anything else is somebody else's word until the facilitator's
//! `/verify` (and, where it says no, the chain) has spoken, so no answer
//! that depends on the agent's bound invoices comes before that: a used
//! nonce read off the chain and signed over again, or sent with a
//! signature that does not verify, gets a refusal of its own, never
//! another payment's receipt.

use super::facilitator::Verify;
use super::settle::PENDING_RETRY_AFTER_SEC;
use crate::core::reason::ReasonCode as R;
use crate::core::reason::Refusal;

/// `Retry-After` of `x402_facilitator_unavailable`.
pub const FACILITATOR_RETRY_SEC: u64 = 10;

/// The detail of an amount that is the amount of no open invoice.
pub const NO_OPEN_INVOICE: &str =
    "the authorization's value is the amount of no open invoice of this agent and plan";

/// What a payment that is not a bound authorization is to the agent's
/// invoices for its plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unbound {
    /// Its payer and nonce are bound here to another authorization (another
    /// plan, value or signature): it is not that payment. The invoice bound.
    Claimed(String),
    /// An open invoice of its amount that admits it.
    Open(String),
    /// Only invoices of its amount bound to other authorizations: the
    /// newest, and whether it is still settling (else paid).
    Taken {
        /// The invoice.
        invoice_id: String,
        /// Settling, not paid yet.
        settling: bool,
    },
    /// No invoice it can pay: `x402_invoice_mismatch`, with why.
    Unmatched(Refusal),
}

/// What to ask before answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// Nothing: the answer depends on no bound invoice.
    Nothing,
    /// The facilitator's `/verify` of the payment at its own value; when it
    /// says invalid, the chain's `authorizationState` too.
    Verify,
}

/// What was said: by `/verify`, and by the chain (`Some(true)`: used).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Said {
    /// `/verify`, when asked.
    pub verify: Option<Verify>,
    /// `authorizationState`, when asked and answered.
    pub used: Option<bool>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Bind it to the open invoice ([`Unbound::Open`]), the payment's own
    /// object first, then settle it.
    Bind,
    /// This refusal (never a 402).
    Refuse(Refusal),
    /// 402 with this code and detail, offering the open invoice it matched.
    Challenge(Refusal),
    /// 402 with this code and detail, offering the plan's open invoice (a
    /// new one if none is left).
    Offer(Refusal),
}

/// What to ask about `u`.
pub fn ask(u: &Unbound) -> Ask {
    match u {
        Unbound::Claimed(_) | Unbound::Open(_) | Unbound::Taken { .. } => Ask::Verify,
        Unbound::Unmatched(_) => Ask::Nothing,
    }
}

fn claimed(detail: &str) -> Answer {
    Answer::Refuse(Refusal::new(R::PaymentAlreadyClaimed, detail))
}

fn invalid(reason: &str) -> Refusal {
    Refusal::new(
        R::X402PaymentInvalid,
        format!("the facilitator finds this payment invalid: {reason}"),
    )
}

/// Answers `u` after [`ask`]'s questions (`said`).
pub fn answer(u: &Unbound, said: &Said) -> Answer {
    let used = said.used == Some(true);
    if let Unbound::Unmatched(r) = u {
        // It depends on no bound invoice.
        return Answer::Offer(r.clone());
    }
    let reason = match &said.verify {
        Some(Verify::Valid) => None,
        Some(Verify::Invalid(reason)) => Some(reason.as_str()),
        Some(Verify::Unknown(_)) | None => {
            return Answer::Refuse(
                Refusal::new(
                    R::X402FacilitatorUnavailable,
                    "the payment facilitator did not answer; nothing was charged: resend the same payment",
                )
                .retry_after(FACILITATOR_RETRY_SEC),
            )
        }
    };
    // Refused by /verify, and the chain shows its nonce unused: nothing of
    // it moved, nor can as it stands. For an open invoice an unanswered
    // chain counts as unused, as it always has: the payment is bound to
    // nothing yet. Where its nonce or amount is bound already, only the
    // chain's own "unused" earns a 402.
    let refused = reason.filter(|_| !used);
    let refused_unused = reason.filter(|_| said.used == Some(false));
    match u {
        // Used but refused: a front-run (money moved for this invoice's
        // amount); bound and credited from the chain.
        Unbound::Open(_) => match refused {
            None => Answer::Bind,
            Some(reason) => Answer::Challenge(invalid(reason)),
        },
        Unbound::Claimed(_) => match refused_unused {
            None => claimed(
                "this payer's nonce is bound here to another authorization; one nonce pays once",
            ),
            Some(reason) => Answer::Offer(invalid(reason)),
        },
        Unbound::Taken { settling, .. } => match (refused_unused, settling) {
            (Some(reason), _) => Answer::Offer(invalid(reason)),
            (None, true) => Answer::Refuse(
                Refusal::new(
                    R::X402SettlementInProgress,
                    "another authorization for this invoice is being settled; this one will not be",
                )
                .retry_after(PENDING_RETRY_AFTER_SEC),
            ),
            (None, false) => Answer::Refuse(Refusal::new(
                R::InvoiceAlreadyPaid,
                "this invoice was already credited with another authorization",
            )),
        },
        Unbound::Unmatched(r) => Answer::Offer(r.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> Unbound {
        Unbound::Open("inv_o".into())
    }
    fn claimed_here() -> Unbound {
        Unbound::Claimed("inv_c".into())
    }
    fn taken(settling: bool) -> Unbound {
        Unbound::Taken {
            invoice_id: "inv_t".into(),
            settling,
        }
    }
    fn unmatched(why: &str) -> Unbound {
        Unbound::Unmatched(Refusal::new(R::X402InvoiceMismatch, why))
    }

    fn valid() -> Said {
        Said {
            verify: Some(Verify::Valid),
            used: None,
        }
    }
    fn invalid(used: Option<bool>) -> Said {
        Said {
            verify: Some(Verify::Invalid("invalid_exact_evm_signature".into())),
            used,
        }
    }

    /// The answer's kind and code: `refuse`, `challenge`, `offer`.
    fn said(a: Answer) -> (&'static str, R) {
        match a {
            Answer::Bind => panic!("bound"),
            Answer::Refuse(r) => ("refuse", r.code),
            Answer::Challenge(r) => ("challenge", r.code),
            Answer::Offer(r) => ("offer", r.code),
        }
    }

    #[test]
    fn everything_but_an_amount_of_no_invoice_is_verified_first() {
        assert_eq!(ask(&open()), Ask::Verify);
        assert_eq!(ask(&claimed_here()), Ask::Verify);
        assert_eq!(ask(&taken(true)), Ask::Verify);
        assert_eq!(ask(&unmatched("x")), Ask::Nothing);
    }

    #[test]
    fn a_payment_of_an_open_invoice_is_bound_once_verified_or_found_used() {
        assert_eq!(answer(&open(), &valid()), Answer::Bind);
        // A front-run: refused by /verify, used on chain.
        assert_eq!(answer(&open(), &invalid(Some(true))), Answer::Bind);
        for unused in [Some(false), None] {
            assert_eq!(
                said(answer(&open(), &invalid(unused))),
                ("challenge", R::X402PaymentInvalid)
            );
        }
        let silent = Said {
            verify: Some(Verify::Unknown("timeout".into())),
            used: None,
        };
        let Answer::Refuse(r) = answer(&open(), &silent) else {
            panic!()
        };
        assert_eq!(
            (r.code, r.retry_after_sec),
            (R::X402FacilitatorUnavailable, Some(10))
        );
    }

    #[test]
    fn a_nonce_bound_here_to_another_authorization_is_claimed_never_its_receipt() {
        let c = claimed_here();
        // Re-signed by the payer (valid, nonce still unused), or anything
        // over a used nonce, forged or not: 409.
        assert_eq!(
            said(answer(&c, &valid())),
            ("refuse", R::PaymentAlreadyClaimed)
        );
        assert_eq!(
            said(answer(&c, &invalid(Some(true)))),
            ("refuse", R::PaymentAlreadyClaimed)
        );
        // A signature that does not verify on an unused nonce.
        assert_eq!(
            said(answer(&c, &invalid(Some(false)))),
            ("offer", R::X402PaymentInvalid)
        );
        // The chain did not say: its money may have moved, so no 402.
        assert_eq!(
            said(answer(&c, &invalid(None))),
            ("refuse", R::PaymentAlreadyClaimed)
        );
    }

    #[test]
    fn an_amount_bound_to_another_authorization_keeps_its_409s_once_verified() {
        let Answer::Refuse(r) = answer(&taken(true), &valid()) else {
            panic!()
        };
        assert_eq!(
            (r.code, r.retry_after_sec),
            (R::X402SettlementInProgress, Some(5))
        );
        assert_eq!(
            said(answer(&taken(false), &valid())),
            ("refuse", R::InvoiceAlreadyPaid)
        );
        // Its money moved (used on chain), or the chain did not say: still
        // the 409, never a 402.
        for used in [Some(true), None] {
            assert_eq!(
                said(answer(&taken(false), &invalid(used))),
                ("refuse", R::InvoiceAlreadyPaid)
            );
        }
        assert_eq!(
            said(answer(&taken(false), &invalid(Some(false)))),
            ("offer", R::X402PaymentInvalid)
        );
        assert_eq!(
            answer(&unmatched("why"), &Said::default()),
            Answer::Offer(Refusal::new(R::X402InvoiceMismatch, "why"))
        );
    }
}
