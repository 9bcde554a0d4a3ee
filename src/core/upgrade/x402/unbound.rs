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
//!
//! A private capsule's payments are its own business (docs/PROTOCOL.md
//! §12: its tier and `paid_until` are in head.json, which only granted
//! readers see). So for a private capsule an amount of an invoice bound to
//! another authorization is answered as an amount of no invoice, whatever
//! the payment: the answer depends on the payment and the chain only. The
//! one thing that can change it is money: an authorization the chain shows
//! used is never answered 402 (a 402 makes a client sign again).

use super::facilitator::Verify;
use super::settle::PENDING_RETRY_AFTER_SEC;
use crate::core::access;
use crate::core::json::Json;
use crate::core::reason::ReasonCode as R;
use crate::core::reason::Refusal;

/// `Retry-After` of `x402_facilitator_unavailable`.
pub const FACILITATOR_RETRY_SEC: u64 = 10;
/// `Retry-After` of `payment_provider_unavailable` when the chain did not
/// answer whether an authorization is used.
pub const PROVIDER_RETRY_SEC: u64 = 10;

/// The detail of an amount that is the amount of no open invoice. The same
/// words whether it matches nothing or, on a private capsule, an invoice
/// bound to another authorization.
pub const NO_OPEN_INVOICE: &str =
    "the authorization's value is the amount of no open invoice of this agent and plan";

/// Whether the door may speak of the agent's payments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Privacy {
    /// The current capsule is public, or there is none yet: answers may
    /// name the agent's credits and settlements.
    Public,
    /// The current capsule is private: answers to whoever proves nothing
    /// say nothing of them.
    Private,
}

impl Privacy {
    /// Of the capsule the agent's last accepted write holds (`None`: it
    /// never published).
    pub fn of(capsule: Option<&Json>) -> Privacy {
        match capsule {
            Some(c) if !access::is_public(c) => Privacy::Private,
            _ => Privacy::Public,
        }
    }
}

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
    /// The chain's `authorizationState` only.
    Chain,
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
pub fn ask(u: &Unbound, privacy: Privacy) -> Ask {
    match (u, privacy) {
        (Unbound::Claimed(_) | Unbound::Open(_), _) => Ask::Verify,
        (Unbound::Taken { .. }, Privacy::Public) => Ask::Verify,
        (Unbound::Taken { .. } | Unbound::Unmatched(_), Privacy::Private) => Ask::Chain,
        (Unbound::Unmatched(_), Privacy::Public) => Ask::Nothing,
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
pub fn answer(u: &Unbound, privacy: Privacy, said: &Said) -> Answer {
    let used = said.used == Some(true);
    if matches!(ask(u, privacy), Ask::Chain) {
        let why = match u {
            Unbound::Unmatched(r) => r.clone(),
            _ => Refusal::new(R::X402InvoiceMismatch, NO_OPEN_INVOICE),
        };
        return match said.used {
            // Its money moved, and it pays no open invoice here: not a 402.
            Some(true) => claimed(
                "this authorization was already used on chain, and pays no open invoice of this agent and plan",
            ),
            Some(false) => Answer::Offer(why),
            None => Answer::Refuse(
                Refusal::new(
                    R::PaymentProviderUnavailable,
                    "the chain could not say whether this authorization was used; nothing was bound: resend it",
                )
                .retry_after(PROVIDER_RETRY_SEC),
            ),
        };
    }
    if let Unbound::Unmatched(r) = u {
        // A public capsule's: it depends on no bound invoice.
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
    fn chain(used: Option<bool>) -> Said {
        Said { verify: None, used }
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
    fn privacy_is_the_current_capsules() {
        let capsule = |ac: Option<&str>| {
            let text = match ac {
                Some(ac) => format!(r#"{{"self_motto":"x","access_control":{ac}}}"#),
                None => r#"{"self_motto":"x"}"#.to_owned(),
            };
            crate::core::json::parse(text.as_bytes()).unwrap()
        };
        assert_eq!(Privacy::of(None), Privacy::Public, "never published");
        assert_eq!(Privacy::of(Some(&capsule(None))), Privacy::Public);
        assert_eq!(
            Privacy::of(Some(&capsule(Some(r#"{"public":true}"#)))),
            Privacy::Public
        );
        assert_eq!(
            Privacy::of(Some(&capsule(Some(
                r#"{"public":false,"authorized_readers":[]}"#
            )))),
            Privacy::Private
        );
    }

    #[test]
    fn everything_but_a_public_amount_of_no_invoice_is_asked_about_first() {
        use Privacy::*;
        for p in [Public, Private] {
            assert_eq!(ask(&open(), p), Ask::Verify);
            assert_eq!(ask(&claimed_here(), p), Ask::Verify);
        }
        assert_eq!(ask(&taken(true), Public), Ask::Verify);
        assert_eq!(ask(&unmatched("x"), Public), Ask::Nothing);
        // A private capsule: the same question whether an invoice of the
        // amount is bound or there is none.
        assert_eq!(ask(&taken(false), Private), Ask::Chain);
        assert_eq!(ask(&unmatched("x"), Private), Ask::Chain);
    }

    #[test]
    fn a_payment_of_an_open_invoice_is_bound_once_verified_or_found_used() {
        for p in [Privacy::Public, Privacy::Private] {
            assert_eq!(answer(&open(), p, &valid()), Answer::Bind);
            // A front-run: refused by /verify, used on chain.
            let front_run = invalid(Some(true));
            assert_eq!(answer(&open(), p, &front_run), Answer::Bind);
            for unused in [Some(false), None] {
                assert_eq!(
                    said(answer(&open(), p, &invalid(unused))),
                    ("challenge", R::X402PaymentInvalid)
                );
            }
            let silent = Said {
                verify: Some(Verify::Unknown("timeout".into())),
                used: None,
            };
            let Answer::Refuse(r) = answer(&open(), p, &silent) else {
                panic!()
            };
            assert_eq!(
                (r.code, r.retry_after_sec),
                (R::X402FacilitatorUnavailable, Some(10))
            );
        }
    }

    #[test]
    fn a_nonce_bound_here_to_another_authorization_is_claimed_never_its_receipt() {
        for p in [Privacy::Public, Privacy::Private] {
            let c = claimed_here();
            // Re-signed by the payer (valid, nonce still unused), or
            // anything over a used nonce, forged or not: 409.
            assert_eq!(
                said(answer(&c, p, &valid())),
                ("refuse", R::PaymentAlreadyClaimed)
            );
            assert_eq!(
                said(answer(&c, p, &invalid(Some(true)))),
                ("refuse", R::PaymentAlreadyClaimed)
            );
            // A signature that does not verify on an unused nonce.
            assert_eq!(
                said(answer(&c, p, &invalid(Some(false)))),
                ("offer", R::X402PaymentInvalid)
            );
            // The chain did not say: its money may have moved, so no 402.
            assert_eq!(
                said(answer(&c, p, &invalid(None))),
                ("refuse", R::PaymentAlreadyClaimed)
            );
        }
    }

    #[test]
    fn a_public_capsule_keeps_its_409s_for_an_amount_bound_to_another_authorization() {
        let p = Privacy::Public;
        let Answer::Refuse(r) = answer(&taken(true), p, &valid()) else {
            panic!()
        };
        assert_eq!(
            (r.code, r.retry_after_sec),
            (R::X402SettlementInProgress, Some(5))
        );
        assert_eq!(
            said(answer(&taken(false), p, &valid())),
            ("refuse", R::InvoiceAlreadyPaid)
        );
        // Its money moved (used on chain): still the 409, never a 402.
        assert_eq!(
            said(answer(&taken(false), p, &invalid(Some(true)))),
            ("refuse", R::InvoiceAlreadyPaid)
        );
        assert_eq!(
            said(answer(&taken(false), p, &invalid(Some(false)))),
            ("offer", R::X402PaymentInvalid)
        );
        assert_eq!(
            said(answer(&taken(false), p, &invalid(None))),
            ("refuse", R::InvoiceAlreadyPaid)
        );
        assert_eq!(
            answer(&unmatched("why"), p, &Said::default()),
            Answer::Offer(Refusal::new(R::X402InvoiceMismatch, "why"))
        );
    }

    #[test]
    fn a_private_capsule_answers_a_bound_amount_as_an_amount_of_no_invoice() {
        let p = Privacy::Private;
        let none = unmatched(NO_OPEN_INVOICE);
        for used in [Some(false), Some(true), None] {
            for u in [taken(true), taken(false)] {
                assert_eq!(
                    answer(&u, p, &chain(used)),
                    answer(&none, p, &chain(used)),
                    "{used:?}"
                );
            }
        }
        assert_eq!(
            answer(&taken(true), p, &chain(Some(false))),
            Answer::Offer(Refusal::new(R::X402InvoiceMismatch, NO_OPEN_INVOICE))
        );
        // Money moved: never a 402.
        assert_eq!(
            said(answer(&taken(false), p, &chain(Some(true)))),
            ("refuse", R::PaymentAlreadyClaimed)
        );
        let Answer::Refuse(r) = answer(&none, p, &chain(None)) else {
            panic!()
        };
        assert_eq!(
            (r.code, r.retry_after_sec),
            (R::PaymentProviderUnavailable, Some(10))
        );
        // An open invoice's own rule (public knowledge) keeps its words.
        assert_eq!(
            answer(&unmatched("validBefore is past"), p, &chain(Some(false))),
            Answer::Offer(Refusal::new(R::X402InvoiceMismatch, "validBefore is past"))
        );
    }
}
