//! `upgrade.json`: the crash-safe record of one purchase ([`Record`]), the
//! decision a run takes from it ([`decide`] → [`Next`]), and its load, save
//! and archive to `upgrades/`.

use super::now_ms;
use crate::client::state::{parse_json_file, write_atomic, StateDir};
use crate::client::{Client, Error};
use crate::core::limits::Tier;
use crate::core::time::parse_rfc3339;
use crate::core::upgrade::claim::is_invoice_id;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fs;
use std::io::ErrorKind;

/// The current purchase, in the state directory.
pub const UPGRADE_FILE: &str = "upgrade.json";
/// Where finished or expired purchases are moved when a new one starts.
pub const ARCHIVE_DIR: &str = "upgrades";
/// An invoice this close to `expires_at` is not paid any more (the payment
/// must be mined before it): a new one is quoted instead.
const PAY_MARGIN_MS: u64 = 2 * 60 * 1000;

/// `upgrade.json`: one purchase, from quote to credit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The quote body exactly as the service answered it.
    pub invoice: Value,
    /// The signed payment (persisted before it is broadcast).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment: Option<Payment>,
    /// Earlier transactions for this invoice that paid nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub abandoned: Vec<Abandoned>,
    /// The seq the claim signs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_seq: Option<u64>,
    /// The service's answer once credited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed: Option<Value>,
    /// The claim's final refusal, when it was refused for good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<Failure>,
    /// x402 (`upgrade --x402`): the signed payment header, written before
    /// it is sent; resent byte for byte until the service answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x402: Option<X402Sent>,
    /// x402 authorizations the service said moved nothing
    /// (`x402_settlement_failed`, `x402_invoice_mismatch`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub x402_dropped: Vec<X402Dropped>,
}

/// A signed x402 payment (`PAYMENT-SIGNATURE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct X402Sent {
    /// The header's value exactly as sent (base64 JSON).
    pub header: String,
    /// The payer (EIP-55).
    pub from: String,
    /// The EIP-3009 nonce, `0x` + 64 hex: the authorization's identity.
    pub nonce: String,
    /// Atomic USDC units authorized.
    pub value: String,
    /// The authorization dies at this Unix second.
    pub valid_before: u64,
    /// When it was signed (RFC 3339).
    pub signed_at: String,
}

/// An x402 authorization that moved nothing, by the service's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct X402Dropped {
    /// Its EIP-3009 nonce.
    pub nonce: String,
    /// The reason code that said so.
    pub why: String,
}

/// A signed payment transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    /// `0x` + 64 lowercase hex: keccak-256 of `raw_tx`.
    pub tx_hash: String,
    /// The EIP-2718 encoded signed transaction, `0x` + hex.
    pub raw_tx: String,
    /// The payer's address.
    pub from: String,
    /// The payer's nonce it uses.
    pub nonce: u64,
    /// When it was signed (RFC 3339).
    pub signed_at: String,
}

/// A transaction of this invoice that moved nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Abandoned {
    /// The transaction's hash, kept so a re-run never waits for it again
    /// (and an operator can look it up).
    pub tx_hash: String,
    /// `reverted` or `dropped` (its nonce was used by another transaction).
    pub why: String,
}

/// A claim refused for good (class `request`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The HTTP status of the refusal.
    pub status: u16,
    /// The reason code (`payment_underpaid`, `invoice_expired`, …) that
    /// says why resending the claim cannot help.
    pub code: String,
    /// The service's detail, if it gave one.
    #[serde(default)]
    pub detail: String,
}

impl Record {
    pub(super) fn new(invoice: Value) -> Record {
        Record {
            invoice,
            payment: None,
            abandoned: Vec::new(),
            claim_seq: None,
            claimed: None,
            failed: None,
            x402: None,
            x402_dropped: Vec::new(),
        }
    }

    /// Whether this purchase is paid with x402.
    pub fn is_x402(&self) -> bool {
        self.invoice_str("method") == "x402"
    }

    pub(super) fn invoice_str(&self, k: &str) -> &str {
        self.invoice.get(k).and_then(Value::as_str).unwrap_or("")
    }

    /// The invoice id (empty if the file was edited into nonsense).
    pub fn invoice_id(&self) -> &str {
        self.invoice_str("invoice_id")
    }
}

/// What a run does, given what is recorded ([`decide`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Next {
    /// Quote a new invoice (`archive`: move the recorded one aside first).
    Quote { archive: bool },
    /// Pay the recorded invoice: open, nothing signed for it yet.
    Pay,
    /// A transaction is recorded: make sure the chain has it, wait, claim.
    /// Never pays again.
    Resume,
    /// Credited already: answer the stored result.
    Done,
    /// Refused for good after paying: report it (`--new` starts over).
    Failed,
}

/// What to do on this run. `new`: the caller asked for a new purchase even
/// though the last one finished (it never abandons a recorded payment).
pub(super) fn decide(
    record: Option<&Record>,
    plan: Tier,
    now_ms: u64,
    new: bool,
) -> Result<Next, Error> {
    let Some(r) = record else {
        return Ok(Next::Quote { archive: false });
    };
    if r.claimed.is_some() {
        return Ok(if new {
            Next::Quote { archive: true }
        } else {
            Next::Done
        });
    }
    if r.failed.is_some() {
        return Ok(if new {
            Next::Quote { archive: true }
        } else {
            Next::Failed
        });
    }
    if let Some(x) = &r.x402 {
        return Err(Error::local(format!(
            "an x402 payment (authorization {}) is recorded for invoice {}: finish it with \
             `selfcap upgrade --x402 --plan {}` (it is resent, never replaced)",
            x.nonce,
            r.invoice_id(),
            r.invoice_str("plan")
        )));
    }
    if r.payment.is_some() {
        return Ok(Next::Resume);
    }
    if r.is_x402() {
        // x402 authorizations that moved nothing: a transfer needs a quote.
        return Ok(Next::Quote { archive: true });
    }
    // Nothing was ever signed for this invoice: no money can have moved.
    let expires = parse_rfc3339(r.invoice_str("expires_at")).unwrap_or(0);
    if now_ms.saturating_add(PAY_MARGIN_MS) >= expires || new {
        return Ok(Next::Quote { archive: true });
    }
    if r.invoice_str("plan") != plan.as_str() {
        return Err(Error::local(format!(
            "an unpaid invoice for plan {} is open ({}, until {}); nothing was paid for it: \
             run `selfcap upgrade --plan {}` to pay it, or pass --new to drop it and quote {}",
            r.invoice_str("plan"),
            r.invoice_id(),
            r.invoice_str("expires_at"),
            r.invoice_str("plan"),
            plan.as_str()
        )));
    }
    Ok(Next::Pay)
}

/// What an x402 run does ([`decide_x402`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum X402Next {
    /// Ask for the invoice (`archive`: move the recorded purchase aside
    /// first; `renew`: buy again even though a credit is recent).
    Request { archive: bool, renew: bool },
    /// A header is recorded: send it again, byte for byte.
    Resend,
    /// Credited already.
    Done,
    /// Refused for good: report it (`--new` starts over).
    Failed,
}

/// What to do on an x402 run (the same one-purchase rule as [`decide`]).
pub(super) fn decide_x402(record: Option<&Record>, new: bool) -> Result<X402Next, Error> {
    let Some(r) = record else {
        return Ok(X402Next::Request {
            archive: false,
            renew: false,
        });
    };
    let again = X402Next::Request {
        archive: true,
        renew: true,
    };
    if r.claimed.is_some() {
        return Ok(if new { again } else { X402Next::Done });
    }
    if r.failed.is_some() {
        return Ok(if new { again } else { X402Next::Failed });
    }
    if r.x402.is_some() {
        return Ok(X402Next::Resend);
    }
    if let Some(p) = &r.payment {
        return Err(Error::local(format!(
            "a transfer (transaction {}) is recorded for invoice {}: finish it with \
             `selfcap upgrade --plan {}` without --x402 (it is finished, never replaced)",
            p.tx_hash,
            r.invoice_id(),
            r.invoice_str("plan")
        )));
    }
    // Nothing signed that can still move money: an unpaid classic invoice,
    // or x402 authorizations the service said moved nothing.
    Ok(X402Next::Request {
        archive: true,
        renew: false,
    })
}

impl Client {
    /// The recorded purchase, if any.
    pub fn upgrade_record(&self) -> Result<Option<Record>, Error> {
        load_record(&self.state)
    }
}

// ---------------------------------------------------------------------------
// upgrade.json

pub(super) fn load_record(state: &StateDir) -> Result<Option<Record>, Error> {
    let path = state.file(UPGRADE_FILE);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::local(format!("cannot read {}: {e}", path.display()))),
    };
    parse_json_file(&path, &bytes)?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::local(format!("{} is malformed: {e}", path.display())))
}

pub(super) fn save_record(state: &StateDir, r: &Record) -> Result<(), Error> {
    let mut text = serde_json::to_string_pretty(r)
        .map_err(|e| Error::local(format!("cannot encode {UPGRADE_FILE}: {e}")))?;
    text.push('\n');
    write_atomic(&state.file(UPGRADE_FILE), text.as_bytes())
}

/// Moves a finished (or expired, unpaid) purchase to `upgrades/`.
pub(super) fn archive_record(state: &StateDir, r: &Record) -> Result<(), Error> {
    let id = r.invoice_id();
    let name = if is_invoice_id(id) {
        id.to_owned()
    } else {
        format!("unknown-{}", now_ms())
    };
    let mut text = serde_json::to_string_pretty(r)
        .map_err(|e| Error::local(format!("cannot encode {UPGRADE_FILE}: {e}")))?;
    text.push('\n');
    write_atomic(
        &state.file(ARCHIVE_DIR).join(format!("{name}.json")),
        text.as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::upgrade::fixtures::*;
    use crate::core::time::rfc3339;
    use serde_json::json;

    #[test]
    fn nothing_recorded_quotes() {
        assert_eq!(
            decide(None, Tier::Pro, NOW, false).unwrap(),
            Next::Quote { archive: false }
        );
    }

    #[test]
    fn an_open_unpaid_invoice_is_paid_not_quoted_again() {
        let r = record("pro", LATER);
        assert_eq!(decide(Some(&r), Tier::Pro, NOW, false).unwrap(), Next::Pay);
        // Another plan: refused (nothing paid), unless --new drops it.
        let e = decide(Some(&r), Tier::Plus, NOW, false).unwrap_err();
        assert_eq!(e.exit_code(), crate::client::ExitCode::Local);
        assert!(e.to_string().contains("--plan pro"), "{e}");
        assert_eq!(
            decide(Some(&r), Tier::Plus, NOW, true).unwrap(),
            Next::Quote { archive: true }
        );
    }

    #[test]
    fn an_expired_or_nearly_expired_unpaid_invoice_is_replaced() {
        let r = record("pro", "2026-02-09T23:00:00Z");
        assert_eq!(
            decide(Some(&r), Tier::Pro, NOW, false).unwrap(),
            Next::Quote { archive: true }
        );
        // Within the margin: too late to pay safely.
        let r = record("pro", "2026-02-10T00:01:59Z");
        assert_eq!(
            decide(Some(&r), Tier::Pro, NOW, false).unwrap(),
            Next::Quote { archive: true }
        );
        let r = record("pro", "2026-02-10T00:02:01Z");
        assert_eq!(decide(Some(&r), Tier::Pro, NOW, false).unwrap(), Next::Pay);
    }

    #[test]
    fn a_recorded_payment_is_always_finished_never_replaced() {
        let mut r = record("pro", "2026-02-09T23:00:00Z");
        r.payment = Some(payment());
        // Expired, another plan, --new: still only resumed.
        for (plan, new) in [(Tier::Pro, false), (Tier::Plus, false), (Tier::Pro, true)] {
            assert_eq!(decide(Some(&r), plan, NOW, new).unwrap(), Next::Resume);
        }
        // A reverted or dropped transaction paid nothing: pay again.
        r.payment = None;
        r.abandoned.push(Abandoned {
            tx_hash: payment().tx_hash,
            why: "reverted".into(),
        });
        let mut open = r.clone();
        open.invoice = quote_body("pro", LATER);
        assert_eq!(
            decide(Some(&open), Tier::Pro, NOW, false).unwrap(),
            Next::Pay
        );
    }

    #[test]
    fn a_credited_purchase_is_a_no_op_until_new() {
        let mut r = record("pro", LATER);
        r.payment = Some(payment());
        r.claimed = Some(json!({"accepted": true}));
        assert_eq!(decide(Some(&r), Tier::Pro, NOW, false).unwrap(), Next::Done);
        assert_eq!(
            decide(Some(&r), Tier::Plus, NOW, false).unwrap(),
            Next::Done
        );
        assert_eq!(
            decide(Some(&r), Tier::Pro, NOW, true).unwrap(),
            Next::Quote { archive: true }
        );
        let mut f = record("pro", LATER);
        f.payment = Some(payment());
        f.failed = Some(Failure {
            status: 410,
            code: "invoice_expired".into(),
            detail: String::new(),
        });
        assert_eq!(
            decide(Some(&f), Tier::Pro, NOW, false).unwrap(),
            Next::Failed
        );
        assert_eq!(
            decide(Some(&f), Tier::Pro, NOW, true).unwrap(),
            Next::Quote { archive: true }
        );
    }

    fn x402_sent() -> X402Sent {
        X402Sent {
            header: "eyJ4NDAyVmVyc2lvbiI6Mn0=".into(),
            from: ACCOUNT_1.into(),
            nonce: format!("0x{}", "07".repeat(32)),
            value: "5004217".into(),
            valid_before: NOW / 1000 + 300,
            signed_at: rfc3339(NOW),
        }
    }

    #[test]
    fn an_x402_header_is_resent_never_replaced() {
        let fresh = X402Next::Request {
            archive: false,
            renew: false,
        };
        assert_eq!(decide_x402(None, false).unwrap(), fresh);
        let mut r = record("pro", LATER);
        r.invoice["method"] = json!("x402");
        r.x402 = Some(x402_sent());
        // Recorded: resent, with --new too.
        assert_eq!(decide_x402(Some(&r), false).unwrap(), X402Next::Resend);
        assert_eq!(decide_x402(Some(&r), true).unwrap(), X402Next::Resend);
        // The classic path refuses to quote over it (exit 1), --new too.
        for new in [false, true] {
            let e = decide(Some(&r), Tier::Pro, NOW, new).unwrap_err();
            assert_eq!(e.exit_code(), crate::client::ExitCode::Local);
            assert!(e.to_string().contains("--x402"), "{e}");
        }
        // The service said it moved nothing: a new invoice is asked for.
        r.x402 = None;
        r.x402_dropped.push(X402Dropped {
            nonce: format!("0x{}", "07".repeat(32)),
            why: "x402_settlement_failed".into(),
        });
        assert_eq!(
            decide_x402(Some(&r), false).unwrap(),
            X402Next::Request {
                archive: true,
                renew: false
            }
        );
        // …and the classic path may quote (nothing is in flight).
        assert_eq!(
            decide(Some(&r), Tier::Pro, NOW, false).unwrap(),
            Next::Quote { archive: true }
        );
    }

    #[test]
    fn x402_keeps_one_purchase_per_state_directory() {
        // Credited (either way): done until --new, which renews.
        let mut r = record("pro", LATER);
        r.x402 = Some(x402_sent());
        r.claimed = Some(json!({"accepted": true}));
        assert_eq!(decide_x402(Some(&r), false).unwrap(), X402Next::Done);
        assert_eq!(
            decide_x402(Some(&r), true).unwrap(),
            X402Next::Request {
                archive: true,
                renew: true
            }
        );
        r.claimed = None;
        r.failed = Some(Failure {
            status: 402,
            code: "x402_payment_invalid".into(),
            detail: String::new(),
        });
        assert_eq!(decide_x402(Some(&r), false).unwrap(), X402Next::Failed);
        // A classic transfer in flight is finished by the classic path.
        let mut c = record("pro", LATER);
        c.payment = Some(payment());
        let e = decide_x402(Some(&c), false).unwrap_err();
        assert_eq!(e.exit_code(), crate::client::ExitCode::Local);
        assert!(e.to_string().contains("without --x402"), "{e}");
        // An unpaid classic invoice: nothing signed, set aside.
        c.payment = None;
        assert_eq!(
            decide_x402(Some(&c), false).unwrap(),
            X402Next::Request {
                archive: true,
                renew: false
            }
        );
    }

    #[test]
    fn the_record_round_trips_through_json() {
        let mut r = record("plus", LATER);
        r.payment = Some(payment());
        r.claim_seq = Some(7);
        r.x402 = Some(x402_sent());
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
        // Empty parts are left out.
        let bare = serde_json::to_value(record("pro", LATER)).unwrap();
        assert_eq!(bare.as_object().unwrap().len(), 1);
    }
}
