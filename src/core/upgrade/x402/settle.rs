//! The decisions of one x402 request and of the alarm that finishes a
//! settlement (the steps of `docs/PROTOCOL.md` §10, "Pay with x402"; why
//! they are these: `docs/design/x402.md`, "What was decided, and why"), as
//! pure steps the agent's Durable Object runs under its lock. The Worker
//! does the I/O in between: it persists the invoice before calling
//! `/settle` (so a crash mid-call leaves it settling, and the alarm
//! finishes it), asks the facilitator, and gathers the chain's [`Facts`].
//!
//! Two rules shape everything here. A payment credits only on the chain's
//! word. And once an authorization may have executed, nothing answers 402:
//! a 402 makes clients sign again, and a second authorization would pay
//! twice. So an invoice settles one authorization at most; an unknown
//! outcome is a 503 the payer retries with the same header; and a 402
//! after a failed settlement needs both the facilitator's refusal naming
//! no transaction and the chain showing the authorization unused (even
//! then the old invoice stays bound and its alarm credits it if the
//! authorization executes after all).

use super::chain::Onchain;
use super::config::X402Config;
use super::facilitator::Settle;
use super::invoice::{Settling, Stage, X402Book, X402Invoice};
use super::unbound::Privacy;
use super::wire::Payment;
use crate::core::limits::Tier;
use crate::core::reason::ReasonCode as R;
use crate::core::reason::Refusal;
use crate::core::upgrade::invoice::{payment_key, Entitlement};
use crate::core::upgrade::outcome::{Claimed, Confirmed};

/// `Retry-After` of a settlement whose outcome is not known yet: a Base
/// block is 2 s, a facilitator's receipt wait a few more.
pub const PENDING_RETRY_AFTER_SEC: u64 = 5;
/// How long after `validBefore` an unused authorization is given up on:
/// the token refuses it from `validBefore` on, the margin covers a node
/// that is a few blocks behind.
pub const RELEASE_AFTER_SECONDS: u64 = 60;

/// The answer to a request without a payment header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unpaid<'a> {
    /// This plan was bought with x402 moments ago: the same credit again
    /// (`"repeat": true`), not a second purchase (a framework retrying a
    /// request whose 200 was lost would otherwise pay twice).
    Repeat(Claimed),
    /// An authorization for this plan is being settled: 503
    /// `x402_settlement_pending`; a new invoice now could be paid twice.
    InFlight {
        /// Seconds to wait.
        retry_after_sec: u64,
    },
    /// 402 with this open invoice (the same one to every unpaid request,
    /// so retries and griefers use no tags).
    Offer(&'a X402Invoice),
    /// 402 with a new invoice (the quote's limits apply).
    Quote,
}

/// Decides an unpaid request for `plan`. `renew`: the caller asked for
/// another purchase (`renew=1`), so neither a recent credit nor a
/// settlement in flight stands in for it. A private capsule's unpaid
/// request gets neither either: anyone may send one, and both would tell
/// that the agent exists and paid (§12). It gets the offer an agent never
/// paid for gets; a client that lost its 200 resends its payment header,
/// which is answered from the store.
pub fn on_unpaid<'a>(
    book: &'a X402Book,
    plan: Tier,
    agent_id: &str,
    renew: bool,
    privacy: Privacy,
    now_ms: u64,
    x: &X402Config,
) -> Unpaid<'a> {
    let of_plan = || {
        book.items()
            .iter()
            .filter(move |i| i.invoice().plan == plan)
    };
    if !renew && privacy == Privacy::Public {
        let window = x.invoice_ttl_seconds * 1000;
        let recent = of_plan()
            .filter_map(|i| Some((i, i.invoice().paid.as_ref()?)))
            .filter(|(_, p)| now_ms < p.credited_at_ms.saturating_add(window))
            .max_by_key(|(_, p)| p.credited_at_ms);
        if let Some((inv, paid)) = recent {
            return Unpaid::Repeat(Claimed::of(inv.invoice(), agent_id, paid));
        }
        let in_flight = of_plan().any(|i| matches!(i.stage(), Stage::Settling(s) if !s.declined));
        if in_flight {
            return Unpaid::InFlight {
                retry_after_sec: PENDING_RETRY_AFTER_SEC,
            };
        }
    }
    match of_plan().rev().find(|i| i.offerable(now_ms)) {
        Some(inv) => Unpaid::Offer(inv),
        None => Unpaid::Quote,
    }
}

/// What to do with a payment for its invoice: the one bound to this very
/// authorization ([`Found::Bound`](super::invoice::Found::Bound)), or the
/// open one it was just verified and globally bound for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Paid {
    /// Credited with this very payment: 200, the same body (the same
    /// header twice credits once).
    Repeat(Claimed),
    /// Persist the invoice (now settling this payment), then `/settle`.
    Settle,
    /// This payment's transaction is known: ask the chain, not the
    /// facilitator again.
    Check {
        /// The transaction.
        tx_hash: String,
    },
}

/// Decides a paid request against its invoice, binding the payment to it
/// when it is open. Another authorization of a bound invoice is refused
/// here too, though [`X402Book::find`] never sends one.
pub fn on_payment(
    inv: &mut X402Invoice,
    p: &Payment,
    agent_id: &str,
    now_ms: u64,
) -> Result<Paid, Refusal> {
    match inv.stage() {
        Stage::Paid { by, .. } if *by == p.id => {
            match &inv.invoice().paid {
                Some(paid) => Ok(Paid::Repeat(Claimed::of(inv.invoice(), agent_id, paid))),
                // Unreachable: the stage and `paid` are set together.
                None => Err(Refusal::code(R::Unavailable)
                    .logged("x402 invoice paid without a record".into())),
            }
        }
        Stage::Paid { .. } => Err(Refusal::new(
            R::InvoiceAlreadyPaid,
            "this invoice was already credited with another authorization",
        )),
        Stage::Settling(s) if s.id == p.id => Ok(match &s.tx_hash {
            Some(tx_hash) => Paid::Check {
                tx_hash: tx_hash.clone(),
            },
            // Settling again is safe: the nonce executes at most once.
            None => Paid::Settle,
        }),
        Stage::Settling(_) => Err(Refusal::new(
            R::X402SettlementInProgress,
            "another authorization for this invoice is being settled; this one will not be",
        )
        .retry_after(PENDING_RETRY_AFTER_SEC)),
        Stage::Open => {
            inv.bind(Settling {
                id: p.id.clone(),
                fingerprint: Some(p.fingerprint()),
                valid_before: p.authorization.valid_before,
                started_at_ms: now_ms,
                tx_hash: None,
                declined: false,
            });
            Ok(Paid::Settle)
        }
    }
}

/// What the chain showed, gathered by the Worker: the transaction to check
/// first ([`tx_to_check`]) and its receipt ([`super::chain::check_settlement`]);
/// unless that credits or is confirming, `authorizationState(from, nonce)`,
/// and when it is true the transaction its `AuthorizationUsed` log names,
/// checked the same way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// `authorizationState`: `None` when not asked or not answered.
    pub used: Option<bool>,
    /// The transaction looked at, and what its receipt shows.
    pub seen: Option<(String, Onchain)>,
}

/// The transaction to look at first: the one the facilitator just named,
/// else the one already noted.
pub fn tx_to_check(inv: &X402Invoice, said: Option<&Settle>) -> Option<String> {
    match (said, inv.stage()) {
        (Some(Settle::Sent { tx_hash, .. }), _) => Some(tx_hash.clone()),
        (_, Stage::Settling(s)) => s.tx_hash.clone(),
        _ => None,
    }
}

/// A payment to credit: bind `confirmed.payment` (the transfer's own key,
/// so a classic claim can never reuse it) to the invoice, then [`credit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credit {
    /// The transaction.
    pub tx_hash: String,
    /// Its transfer log and global key.
    pub confirmed: Confirmed,
}

/// The outcome of a paid request after settling (or checking).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Paid on-chain: credit, 200 with the settlement response header.
    Credit(Credit),
    /// Not known yet: 503 `x402_settlement_pending`; the alarm goes on.
    Pending {
        /// Seconds to wait.
        retry_after_sec: u64,
    },
    /// Nothing moved: 402 `x402_settlement_failed` with a new invoice (this
    /// one stays bound to the authorization until its alarm releases it).
    Failed {
        /// The facilitator's `errorReason`.
        reason: String,
    },
}

/// What the facts say, noting the transaction worth checking again.
enum Judged {
    Credit(Credit),
    Confirming { retry_after_sec: u64 },
    Unsettled,
}

fn judge(inv: &mut X402Invoice, facts: &Facts) -> Judged {
    let Some(s) = inv.settling_mut() else {
        return Judged::Unsettled;
    };
    let Some((tx_hash, onchain)) = &facts.seen else {
        return Judged::Unsettled;
    };
    match onchain {
        // A made-up or unrelated hash: forget it, the logs lead further.
        Onchain::NotThisPayment(_) => s.tx_hash = None,
        _ => s.tx_hash = Some(tx_hash.clone()),
    }
    match onchain {
        Onchain::Credit {
            tx_hash,
            log_index,
            block_number,
        } => Judged::Credit(Credit {
            tx_hash: tx_hash.clone(),
            confirmed: Confirmed {
                payment: payment_key(s.id.chain_id, tx_hash, *log_index),
                log_index: *log_index,
                block_number: *block_number,
            },
        }),
        Onchain::Confirming {
            confirmations,
            needed,
        } => Judged::Confirming {
            retry_after_sec: (2 * needed.saturating_sub(*confirmations)).clamp(2, 30),
        },
        _ => Judged::Unsettled,
    }
}

/// Decides a paid request after `/settle` answered `said` (`None`: not
/// called, [`Paid::Check`]) and the chain showed `facts`.
pub fn after_settle(inv: &mut X402Invoice, said: Option<&Settle>, facts: &Facts) -> Outcome {
    match judge(inv, facts) {
        Judged::Credit(c) => Outcome::Credit(c),
        Judged::Confirming { retry_after_sec } => Outcome::Pending { retry_after_sec },
        Judged::Unsettled => match (said, facts.used, inv.settling_mut()) {
            (Some(Settle::Refused { reason }), Some(false), Some(s)) => {
                s.declined = true;
                Outcome::Failed {
                    reason: reason.clone(),
                }
            }
            _ => Outcome::Pending {
                retry_after_sec: PENDING_RETRY_AFTER_SEC,
            },
        },
    }
}

/// The alarm's decision about a settling invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Alarm {
    /// Paid on-chain: credit.
    Credit(Credit),
    /// Look again at this time, Unix ms.
    CheckAt(u64),
    /// The authorization can no longer execute and did not: the invoice
    /// is open again (already released here; persist it).
    Released,
    /// The invoice is not being settled: nothing to watch.
    Idle,
}

/// Decides what the alarm does with `inv` at `now_ms` given `facts`. It
/// checks every 5 s for the first minute, then every 30 s, then every
/// 5 min: a used authorization whose transaction is not found yet is money
/// that moved, and is never given up on.
pub fn on_alarm(inv: &mut X402Invoice, facts: &Facts, now_ms: u64) -> Alarm {
    let judged = judge(inv, facts);
    let Some(s) = inv.settling_mut() else {
        return Alarm::Idle;
    };
    let (valid_before, started) = (s.valid_before, s.started_at_ms);
    match judged {
        Judged::Credit(c) => Alarm::Credit(c),
        Judged::Confirming { retry_after_sec } => Alarm::CheckAt(now_ms + retry_after_sec * 1000),
        Judged::Unsettled
            if facts.used == Some(false)
                && now_ms / 1000 > valid_before.saturating_add(RELEASE_AFTER_SECONDS) =>
        {
            inv.release();
            Alarm::Released
        }
        Judged::Unsettled => {
            let age = now_ms.saturating_sub(started);
            let every = match age {
                a if a < 60_000 => 5_000,
                a if a < 3_600_000 => 30_000,
                _ => 300_000,
            };
            Alarm::CheckAt(now_ms + every)
        }
    }
}

/// Credits `inv` with `c` (after binding `c.confirmed.payment` to it) and
/// returns the 200 body. `None` when it is not settling (already paid or
/// released: nothing to credit).
pub fn credit(
    inv: &mut X402Invoice,
    paid: &mut Entitlement,
    agent_id: &str,
    c: &Credit,
    now_ms: u64,
) -> Option<Claimed> {
    inv.credit(paid, agent_id, &c.tx_hash, &c.confirmed, now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::json::Json;
    use crate::core::upgrade::x402::config::test_x402_config;
    use crate::core::upgrade::x402::invoice::tests::{agent, open_invoice, payment, SIGNED_AT};
    use crate::core::upgrade::x402::invoice::Found;
    use crate::core::upgrade::x402::unbound::Unbound;

    const T: u64 = SIGNED_AT * 1000 + 10_000;

    fn tx(n: u8) -> String {
        format!("0x{}", format!("{n:02x}").repeat(32))
    }

    fn credited(n: u8) -> Facts {
        Facts {
            used: Some(true),
            seen: Some((
                tx(n),
                Onchain::Credit {
                    tx_hash: tx(n),
                    log_index: 0,
                    block_number: 7,
                },
            )),
        }
    }

    fn settled(n: u8) -> Settle {
        Settle::Sent {
            tx_hash: tx(n),
            success: true,
            reason: None,
        }
    }

    fn refused() -> Settle {
        Settle::Refused {
            reason: "insufficient_funds".into(),
        }
    }

    fn unused() -> Facts {
        Facts {
            used: Some(false),
            seen: None,
        }
    }

    #[test]
    fn the_same_header_twice_credits_once() {
        let (p, id) = (payment(), agent());
        let mut inv = open_invoice(60);
        assert_eq!(on_payment(&mut inv, &p, id.as_str(), T), Ok(Paid::Settle));
        assert!(matches!(inv.stage(), Stage::Settling(s) if s.id == p.id && s.started_at_ms == T));
        let Outcome::Credit(c) = after_settle(&mut inv, Some(&settled(0xab)), &credited(0xab))
        else {
            panic!()
        };
        assert_eq!(c.confirmed.payment, format!("8453:{}:0", tx(0xab)));
        let mut e = Entitlement::default();
        let body = credit(&mut inv, &mut e, id.as_str(), &c, T + 2000).unwrap();
        assert_eq!(e.tier_at(T + 2000), Tier::Pro);
        assert_eq!(
            (body.tx_hash.as_str(), body.invoice_id.as_str()),
            (tx(0xab).as_str(), inv.invoice().invoice_id.as_str())
        );
        // Again, even after the authorization expired: the same body.
        assert_eq!(
            on_payment(&mut inv, &p, id.as_str(), T + 3_600_000),
            Ok(Paid::Repeat(body))
        );
        assert_eq!(
            credit(&mut inv, &mut e, id.as_str(), &c, T + 5000),
            None,
            "nothing twice"
        );
        // Another authorization for the paid invoice: refused, not settled.
        let mut other = p.clone();
        other.id.nonce = crate::core::upgrade::x402::wire::Nonce::parse(&tx(1)).unwrap();
        assert_eq!(
            on_payment(&mut inv, &other, id.as_str(), T)
                .unwrap_err()
                .code,
            R::InvoiceAlreadyPaid
        );
    }

    #[test]
    fn one_invoice_never_settles_two_authorizations() {
        let (p, id) = (payment(), agent());
        let mut inv = open_invoice(60);
        on_payment(&mut inv, &p, id.as_str(), T).unwrap();
        let mut second = p.clone();
        second.id.nonce = crate::core::upgrade::x402::wire::Nonce::parse(&tx(2)).unwrap();
        let e = on_payment(&mut inv, &second, id.as_str(), T).unwrap_err();
        assert_eq!(
            (e.code, e.retry_after_sec),
            (R::X402SettlementInProgress, Some(5))
        );
        // The first one again resumes: settle again until a tx is known,
        // then only ask the chain.
        assert_eq!(
            on_payment(&mut inv, &p, id.as_str(), T + 1),
            Ok(Paid::Settle)
        );
        let pending = Settle::Sent {
            tx_hash: tx(3),
            success: false,
            reason: Some("settlement_pending".into()),
        };
        let facts = Facts {
            used: None,
            seen: Some((tx(3), Onchain::NotFound)),
        };
        assert_eq!(
            after_settle(&mut inv, Some(&pending), &facts),
            Outcome::Pending { retry_after_sec: 5 }
        );
        assert_eq!(tx_to_check(&inv, None), Some(tx(3)));
        assert_eq!(
            on_payment(&mut inv, &p, id.as_str(), T + 2),
            Ok(Paid::Check { tx_hash: tx(3) })
        );
    }

    #[test]
    fn never_a_402_after_money_may_have_moved() {
        let p = payment();
        let settling = || {
            let mut inv = open_invoice(60);
            on_payment(&mut inv, &p, agent().as_str(), T).unwrap();
            inv
        };
        let failed = |o: &Outcome| matches!(o, Outcome::Failed { .. });
        // Refused, and the chain shows the nonce unused: a 402.
        let mut inv = settling();
        let o = after_settle(&mut inv, Some(&refused()), &unused());
        assert_eq!(
            o,
            Outcome::Failed {
                reason: "insufficient_funds".into()
            }
        );
        assert!(
            matches!(inv.stage(), Stage::Settling(s) if s.declined),
            "still bound"
        );
        // Everything else is pending.
        for (said, facts) in [
            (
                Some(refused()),
                Facts {
                    used: None,
                    seen: None,
                },
            ),
            (
                Some(refused()),
                Facts {
                    used: Some(true),
                    seen: None,
                },
            ),
            (Some(Settle::Unknown("timeout".into())), unused()),
            (
                Some(settled(9)),
                Facts {
                    used: Some(false),
                    seen: Some((tx(9), Onchain::NotThisPayment("fake".into()))),
                },
            ),
            (
                Some(settled(9)),
                Facts {
                    used: None,
                    seen: Some((tx(9), Onchain::ProviderFault("rpc".into()))),
                },
            ),
            (None, unused()),
        ] {
            let o = after_settle(&mut settling(), said.as_ref(), &facts);
            assert!(!failed(&o), "{said:?} {facts:?}: {o:?}");
        }
        // Mined but shallow: pending, with a wait by the blocks missing.
        let facts = Facts {
            used: Some(true),
            seen: Some((
                tx(4),
                Onchain::Confirming {
                    confirmations: 1,
                    needed: 3,
                },
            )),
        };
        assert_eq!(
            after_settle(&mut settling(), Some(&settled(4)), &facts),
            Outcome::Pending { retry_after_sec: 4 }
        );
        // A front-run found through the log credits with its own tx.
        let o = after_settle(&mut settling(), Some(&refused()), &credited(0x77));
        assert!(matches!(o, Outcome::Credit(c) if c.tx_hash == tx(0x77)));
    }

    #[test]
    fn the_alarm_credits_or_releases_and_never_gives_up_on_used_money() {
        let p = payment();
        let mut inv = open_invoice(60);
        on_payment(&mut inv, &p, agent().as_str(), T).unwrap();
        assert_eq!(
            on_alarm(&mut inv, &Facts::default(), T + 5_000),
            Alarm::CheckAt(T + 10_000)
        );
        assert_eq!(
            on_alarm(&mut inv, &unused(), T + 120_000),
            Alarm::CheckAt(T + 150_000)
        );
        let vb_ms = p.authorization.valid_before * 1000;
        // Unused, but not yet 60 s past validBefore: wait.
        assert!(matches!(
            on_alarm(&mut inv, &unused(), vb_ms + 60_000),
            Alarm::CheckAt(_)
        ));
        // Used, tx not found: never released.
        let used = Facts {
            used: Some(true),
            seen: None,
        };
        assert_eq!(
            on_alarm(&mut inv, &used, T + 7_200_000),
            Alarm::CheckAt(T + 7_500_000)
        );
        let mut later = inv.clone();
        assert!(matches!(
            on_alarm(&mut later, &credited(5), vb_ms + 3_600_000),
            Alarm::Credit(_)
        ));
        assert_eq!(
            on_alarm(&mut inv, &unused(), vb_ms + 61_000),
            Alarm::Released
        );
        assert_eq!(inv.stage(), &Stage::Open);
        assert_eq!(on_alarm(&mut inv, &unused(), vb_ms + 62_000), Alarm::Idle);
    }

    #[test]
    fn unpaid_requests_get_the_open_invoice_a_recent_credit_or_a_wait() {
        let x = test_x402_config();
        let id = agent();
        let mut book = X402Book::default();
        assert_eq!(
            on_unpaid(&book, Tier::Pro, id.as_str(), false, Privacy::Public, T, &x),
            Unpaid::Quote
        );
        book.add(open_invoice(60));
        let offered = |book: &X402Book, now| match on_unpaid(
            book,
            Tier::Pro,
            id.as_str(),
            false,
            Privacy::Public,
            now,
            &x,
        ) {
            Unpaid::Offer(i) => Some(i.invoice().invoice_id.clone()),
            _ => None,
        };
        assert!(offered(&book, T).is_some());
        assert_eq!(
            on_unpaid(
                &book,
                Tier::Plus,
                id.as_str(),
                false,
                Privacy::Public,
                T,
                &x
            ),
            Unpaid::Quote
        );
        // Under 5 minutes left: a new one.
        let expires = book.items()[0].invoice().expires_at_ms;
        assert_eq!(
            on_unpaid(
                &book,
                Tier::Pro,
                id.as_str(),
                false,
                Privacy::Public,
                expires - 299_999,
                &x
            ),
            Unpaid::Quote
        );
        // Settling: wait, unless renewing.
        let p = payment();
        let inv_id = book.items()[0].invoice().invoice_id.clone();
        let inv = book.find_mut(&inv_id).unwrap();
        on_payment(inv, &p, id.as_str(), T).unwrap();
        assert_eq!(
            on_unpaid(&book, Tier::Pro, id.as_str(), false, Privacy::Public, T, &x),
            Unpaid::InFlight { retry_after_sec: 5 }
        );
        assert_eq!(
            on_unpaid(&book, Tier::Pro, id.as_str(), true, Privacy::Public, T, &x),
            Unpaid::Quote
        );
        // A private capsule's unpaid request is told nothing of it: the
        // answer of an agent never paid for.
        assert_eq!(
            on_unpaid(
                &book,
                Tier::Pro,
                id.as_str(),
                false,
                Privacy::Private,
                T,
                &x
            ),
            on_unpaid(
                &X402Book::default(),
                Tier::Pro,
                id.as_str(),
                false,
                Privacy::Public,
                T,
                &x
            ),
        );
        // Credited: the same credit for 15 minutes, unless renewing.
        let inv = book.find_mut(&inv_id).unwrap();
        let Outcome::Credit(c) = after_settle(inv, None, &credited(1)) else {
            panic!()
        };
        let body = credit(inv, &mut Entitlement::default(), id.as_str(), &c, T).unwrap();
        assert_eq!(
            on_unpaid(
                &book,
                Tier::Pro,
                id.as_str(),
                false,
                Privacy::Public,
                T + 899_999,
                &x
            ),
            Unpaid::Repeat(body)
        );
        assert_eq!(
            on_unpaid(
                &book,
                Tier::Pro,
                id.as_str(),
                false,
                Privacy::Private,
                T + 1,
                &x
            ),
            Unpaid::Quote
        );
        assert_eq!(
            on_unpaid(
                &book,
                Tier::Pro,
                id.as_str(),
                false,
                Privacy::Public,
                T + 900_000,
                &x
            ),
            Unpaid::Quote
        );
        assert_eq!(
            on_unpaid(&book, Tier::Pro, id.as_str(), true, Privacy::Public, T, &x),
            Unpaid::Quote
        );
        // A declined settlement does not hold the plan up.
        let mut book = X402Book::default();
        book.add(open_invoice(60));
        let inv = book.find_mut(&inv_id).unwrap();
        on_payment(inv, &p, id.as_str(), T).unwrap();
        after_settle(inv, Some(&refused()), &unused());
        assert_eq!(
            on_unpaid(&book, Tier::Pro, id.as_str(), false, Privacy::Public, T, &x),
            Unpaid::Quote
        );
    }

    #[test]
    fn a_purchase_from_the_libraries_formats_to_the_settlement_header() {
        use crate::core::upgrade::config::test_config;
        use crate::core::upgrade::x402::chain::tests::{check, recorded, with_authorization_used};
        use crate::core::upgrade::x402::chain::{read_authorization_state, tx_of_authorization};
        use crate::core::upgrade::x402::facilitator::{read_settle, Reply};
        use crate::core::upgrade::x402::wire::payment_response;
        use base64::engine::general_purpose::STANDARD;
        use base64::Engine as _;
        let cfg = test_config();
        let (p, id) = (payment(), agent());
        let mut book = X402Book::default();
        book.add(open_invoice(60));
        let Found::Unbound(Unbound::Open(inv_id)) = book.find(Tier::Pro, &p, &cfg, T) else {
            panic!("no open invoice")
        };
        let inv = book.find_mut(&inv_id).unwrap();
        assert_eq!(on_payment(inv, &p, id.as_str(), T), Ok(Paid::Settle));
        // The facilitator (the library's) says success with its hash...
        let answers: serde_json::Value = serde_json::from_str(include_str!(
            "../../../../tests/vectors/x402/facilitator-answers.json"
        ))
        .unwrap();
        let said = read_settle(Reply::Answered {
            status: 200,
            body: answers["answers"]["settle_success"]["body"]
                .to_string()
                .as_bytes(),
        });
        let named = tx_to_check(inv, Some(&said)).unwrap();
        // ...which the node does not know; the nonce is used, and its log
        // names the transaction that did it (the recorded anvil receipt
        // with the token's AuthorizationUsed): a front-run, or a lie.
        let word_one = Json::from(format!("0x{:064x}", 1));
        let used = read_authorization_state(&word_one);
        let rpc = with_authorization_used(recorded().get("rpc").cloned().unwrap(), &p.id);
        let logs = rpc.get("receipt").and_then(|r| r.get("logs")).unwrap();
        let found = tx_of_authorization(logs, &p.id).unwrap().unwrap();
        assert_ne!(found, named);
        let facts = Facts {
            used,
            seen: Some((found.clone(), check(&rpc, &p.id, 1))),
        };
        let Outcome::Credit(c) = after_settle(inv, Some(&said), &facts) else {
            panic!()
        };
        let body = credit(inv, &mut Entitlement::default(), id.as_str(), &c, T + 3000).unwrap();
        assert_eq!(body.tx_hash, found);
        let (name, value) = payment_response(&p, &body.tx_hash);
        assert_eq!(name, "PAYMENT-RESPONSE");
        let decoded: serde_json::Value =
            serde_json::from_slice(&STANDARD.decode(value).unwrap()).unwrap();
        assert_eq!(decoded["transaction"], found.as_str());
        assert_eq!(
            decoded["payer"],
            "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
        );
    }
}
