//! The facilitator's API (`specs/x402-specification-v2.md` §7): `POST
//! /verify` and `POST /settle`, both `{x402Version, paymentPayload,
//! paymentRequirements}`. Its answers are hints, classified here by what
//! they say about money possibly having moved; only the chain decides a
//! credit ([`super::chain`]).

use super::wire::{object_of, to_text, Payment};
use crate::core::json::{self, Json};
use crate::core::upgrade::evm::parse_tx_hash;

/// The `errorReason` of @x402/evm ≥ 2.27 when it broadcast the transaction
/// but could not wait for its receipt (x402-foundation/x402#3214).
pub const SETTLEMENT_PENDING: &str = "settlement_pending";

/// The body of `/settle` and `/verify`: the payment as it came, and the
/// requirements it was made for (`wire::Offer::requirements_v2`/`_v1`).
pub fn request_body(payment: &Payment, requirements: Json) -> String {
    to_text(&object_of(vec![
        ("x402Version", Json::from(payment.version.number())),
        ("paymentPayload", payment.document.clone()),
        ("paymentRequirements", requirements),
    ]))
}

/// What came back from one call.
#[derive(Debug, Clone, Copy)]
pub enum Reply<'a> {
    /// An HTTP answer.
    Answered {
        /// Its status.
        status: u16,
        /// Its body.
        body: &'a [u8],
    },
    /// None: timeout, connection error.
    Silent,
}

/// What the facilitator says about a `/settle`, by what it means for the
/// money.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settle {
    /// It names a transaction it broadcast: mined successfully (`success`),
    /// or not known yet (`settlement_pending`), or failed after broadcast.
    /// The chain says which.
    Sent {
        /// The transaction, normalised.
        tx_hash: String,
        /// Its `success`.
        success: bool,
        /// Its `errorReason`, when not a success.
        reason: Option<String>,
    },
    /// An explicit refusal naming no transaction, in a non-5xx answer: by
    /// its word, nothing was broadcast. (A 402 is still only answered if
    /// the chain agrees the authorization is unused.)
    Refused {
        /// Its `errorReason`.
        reason: String,
    },
    /// Anything else (no answer, a 5xx, a body that is not a settle
    /// response, a malformed hash): the money may have moved.
    Unknown(String),
}

/// Classifies a `/settle` answer. A 5xx refusal without a transaction is
/// unknown, not a refusal: a facilitator that failed mid-way (before 2.27,
/// a receipt wait that timed out after the broadcast answered so) may have
/// broadcast.
pub fn read_settle(reply: Reply<'_>) -> Settle {
    let (status, body) = match reply {
        Reply::Silent => return Settle::Unknown("no answer".into()),
        Reply::Answered { status, body } => (status, body),
    };
    let unknown = |why: &str| Settle::Unknown(format!("HTTP {status}: {why}"));
    let Ok(v) = json::parse(body) else {
        return unknown("not JSON");
    };
    let Some(success) = v.get("success").and_then(Json::as_bool) else {
        return unknown("not a settle response");
    };
    let reason = v
        .get("errorReason")
        .and_then(Json::as_str)
        .map(str::to_owned);
    match v.get("transaction").and_then(Json::as_str).unwrap_or("") {
        "" if success => unknown("success without a transaction"),
        "" if status >= 500 => unknown("a server error"),
        "" => Settle::Refused {
            reason: reason.unwrap_or_else(|| "unspecified".into()),
        },
        tx => match parse_tx_hash(tx) {
            Some(tx_hash) => Settle::Sent {
                tx_hash,
                success,
                reason: reason.filter(|_| !success),
            },
            None => unknown("a malformed transaction hash"),
        },
    }
}

/// What the facilitator says about a `/verify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verify {
    /// `isValid: true`.
    Valid,
    /// `isValid: false`, with its `invalidReason`: nothing moved.
    Invalid(String),
    /// No usable answer (`x402_facilitator_unavailable`; nothing moved).
    Unknown(String),
}

/// Classifies a `/verify` answer (any status: the libraries send a failed
/// verification as 400 with the same body).
pub fn read_verify(reply: Reply<'_>) -> Verify {
    let (status, body) = match reply {
        Reply::Silent => return Verify::Unknown("no answer".into()),
        Reply::Answered { status, body } => (status, body),
    };
    let v = json::parse(body).ok();
    match v
        .as_ref()
        .and_then(|v| v.get("isValid"))
        .and_then(Json::as_bool)
    {
        Some(true) if (200..300).contains(&status) => Verify::Valid,
        Some(false) => Verify::Invalid(
            v.as_ref()
                .and_then(|v| v.get("invalidReason"))
                .and_then(Json::as_str)
                .unwrap_or("unspecified")
                .to_owned(),
        ),
        _ => Verify::Unknown(format!("HTTP {status}: not a verify response")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::upgrade::config::test_config;
    use crate::core::upgrade::x402::config::test_x402_config;
    use crate::core::upgrade::x402::wire::tests::{case, invoice};
    use crate::core::upgrade::x402::wire::{read_payment, Offer, Version};
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;

    fn answered(status: u16, body: &str) -> Settle {
        read_settle(Reply::Answered {
            status,
            body: body.as_bytes(),
        })
    }

    #[test]
    fn the_request_carries_the_payment_as_it_came() {
        let c = case(8453);
        let header = c["v2"]["payment_signature_header"].as_str().unwrap();
        let p = read_payment(Version::V2, header, &test_config()).unwrap();
        let inv = invoice();
        let offer = Offer {
            invoice: &inv,
            resource_url: "https://x",
            description: "d".into(),
            max_timeout_seconds: 300,
        };
        let body = request_body(
            &p,
            offer.requirements_v2(&test_config(), &test_x402_config()),
        );
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["x402Version"], 2);
        // Exactly what the client encoded (the library's own decoding).
        assert_eq!(v["paymentPayload"], c["v2"]["payment_payload"]);
        // And the requirements it accepted.
        assert_eq!(
            v["paymentRequirements"],
            c["v2"]["payment_payload"]["accepted"]
        );
        let decoded: serde_json::Value =
            serde_json::from_slice(&STANDARD.decode(header).unwrap()).unwrap();
        assert_eq!(v["paymentPayload"], decoded);
    }

    /// What a facilitator on the official library answers
    /// (make-facilitator-answers.mjs).
    fn library(name: &str) -> (u16, String) {
        let v: serde_json::Value = serde_json::from_str(include_str!(
            "../../../../tests/vectors/x402/facilitator-answers.json"
        ))
        .unwrap();
        let a = &v["answers"][name];
        (a["status"].as_u64().unwrap() as u16, a["body"].to_string())
    }

    #[test]
    fn settle_answers_by_what_they_say_about_money() {
        let tx = format!("0x{}", "cd".repeat(32));
        let settle = |name: &str| {
            let (status, body) = library(name);
            answered(status, &body)
        };
        assert_eq!(
            settle("settle_success"),
            Settle::Sent {
                tx_hash: tx.clone(),
                success: true,
                reason: None
            }
        );
        // Broadcast, receipt not awaited (2.27): the chain will say.
        assert_eq!(
            settle("settle_pending"),
            Settle::Sent {
                tx_hash: tx.clone(),
                success: false,
                reason: Some(SETTLEMENT_PENDING.into())
            }
        );
        assert_eq!(
            settle("settle_reverted"),
            Settle::Sent {
                tx_hash: tx.clone(),
                success: false,
                reason: Some("invalid_exact_evm_transaction_failed".into())
            }
        );
        // Refused before any broadcast, by its word. (A write that threw
        // reads the same: which is why a 402 also needs the chain to show
        // the authorization unused, and the invoice stays bound.)
        for (name, reason) in [
            ("settle_bad_signature", "invalid_exact_evm_signature"),
            (
                "settle_expired",
                "invalid_exact_evm_payload_authorization_valid_before",
            ),
            (
                "settle_write_failed",
                "invalid_exact_evm_transaction_failed",
            ),
        ] {
            assert_eq!(
                settle(name),
                Settle::Refused {
                    reason: reason.into()
                },
                "{name}"
            );
        }
        // specs/transports-v2/http.md's settlement examples.
        assert_eq!(
            answered(
                200,
                r#"{"success":true,"transaction":"0x1234567890abcdef1234567890abcdef1234567890abcdef1234567890abcdef","network":"eip155:84532","payer":"0x857b06519E91e3A54538791bDbb0E22373e36b66"}"#
            ),
            Settle::Sent {
                tx_hash: "0x1234567890abcdef1234567890abcdef1234567890abcdef1234567890abcdef"
                    .into(),
                success: true,
                reason: None
            }
        );
        let failure = r#"{"success":false,"errorReason":"insufficient_funds","transaction":"","network":"eip155:84532","payer":"0x857b06519E91e3A54538791bDbb0E22373e36b66"}"#;
        assert_eq!(
            answered(400, failure),
            Settle::Refused {
                reason: "insufficient_funds".into()
            }
        );
        // The example facilitator's hook abort: 200, no transaction member.
        assert_eq!(
            answered(
                200,
                r#"{"success":false,"errorReason":"verification_timeout","network":"unknown"}"#
            ),
            Settle::Refused {
                reason: "verification_timeout".into()
            }
        );
        // A server error may have broadcast: unknown, even with a refusal.
        assert!(matches!(answered(500, failure), Settle::Unknown(_)));
        for (status, body) in [
            (500, r#"{"error":"Unknown error"}"#),
            (200, "<html>"),
            (502, "Bad Gateway"),
            (200, r#"{"isValid":true}"#),
            (200, r#"{"success":true,"transaction":""}"#),
            (200, r#"{"success":true,"transaction":"0x12"}"#),
        ] {
            assert!(
                matches!(answered(status, body), Settle::Unknown(_)),
                "{status} {body}"
            );
        }
        assert!(matches!(read_settle(Reply::Silent), Settle::Unknown(_)));
    }

    #[test]
    fn verify_answers() {
        let v = |status, body: &str| {
            read_verify(Reply::Answered {
                status,
                body: body.as_bytes(),
            })
        };
        let (status, body) = library("verify_valid");
        assert_eq!(v(status, &body), Verify::Valid);
        let (status, body) = library("verify_bad_signature");
        assert_eq!(
            v(status, &body),
            Verify::Invalid("invalid_exact_evm_signature".into())
        );
        // HTTPFacilitatorClient's reading of a 400 carrying isValid.
        assert_eq!(
            v(
                400,
                r#"{"isValid":false,"invalidReason":"invalid_exact_evm_payload_signature"}"#
            ),
            Verify::Invalid("invalid_exact_evm_payload_signature".into())
        );
        assert!(matches!(
            v(500, r#"{"error":"Unknown error"}"#),
            Verify::Unknown(_)
        ));
        assert!(matches!(read_verify(Reply::Silent), Verify::Unknown(_)));
    }
}
