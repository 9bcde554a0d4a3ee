//! x402, client side (`selfcap upgrade --x402`; docs/PROTOCOL.md §10): the
//! 402's `PAYMENT-REQUIRED` checked against what this client expects
//! ([`check_offer`] → [`Offer`]), the EIP-3009 `TransferWithAuthorization`
//! signed over EIP-712 ([`sign_payment`], alloy's `sol!` struct hash and
//! `Eip712Domain`) into a `PAYMENT-SIGNATURE` header in the official v2
//! clients' wire form, and what an answer to a sent header means
//! ([`read_answer`] → [`Answer`]).
//!
//! All pure: the flow (`x402_flow`) does the requests and the record.

use super::tx::PayerKey;
use crate::client::Error;
use crate::core::crypto::AgentId;
use crate::core::json::{self, Json};
use crate::core::limits::Tier;
use crate::core::upgrade::amount::Usdc;
use crate::core::upgrade::claim::is_invoice_id;
use crate::core::upgrade::config::{canonical_usdc, default_price};
use crate::core::upgrade::evm::Address;
use crate::core::upgrade::invoice::TAGS;
use crate::core::upgrade::quote::issued_to;
use crate::core::upgrade::x402::wire::{header_bytes, object_of, Version};
use alloy_primitives::{B256, U256};
use alloy_sol_types::{Eip712Domain, SolStruct};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use std::borrow::Cow;

alloy_sol_types::sol! {
    /// EIP-3009's signed struct (x402 spec v2 §6.1): the only fields the
    /// payer signs.
    struct TransferWithAuthorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }
}

/// The request header a v2 payment goes in.
pub const PAYMENT_SIGNATURE_HEADER: &str = Version::V2.payment_header();
/// The 200's settlement header.
pub const PAYMENT_RESPONSE_HEADER: &str = Version::V2.response_header();
/// The most an invoice may add to its plan's price (the amount tag:
/// 1..=9999 atomic units below the cent).
pub const MAX_TAG: u64 = TAGS as u64;
/// The longest validity window signed, whatever the 402 asks.
pub const MAX_TIMEOUT_SECONDS: u64 = 3_600;
/// `validAfter` is this far in the past (as @x402/fetch's v1 client signs
/// it: room for a payer clock ahead of the chain's).
pub const VALID_AFTER_SKEW: u64 = 600;

/// The plans' list prices (the service's defaults,
/// `core::upgrade::config::default_price`): what an x402 invoice is checked
/// against unless `--x402-price` says otherwise.
pub fn list_price(plan: Tier) -> Option<Usdc> {
    default_price(plan)
}

/// What this client pays into: an invoice outside it is refused before
/// anything is signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    /// The chain (the network must be `eip155:<chain_id>`).
    pub chain_id: u64,
    /// The plan's price: the amount must be price + 1..=9999 atomic units.
    pub price: Usdc,
    /// The service's treasury, when known: payTo must be it.
    pub pay_to: Option<Address>,
}

/// A 402's invoice, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    /// The decoded `PAYMENT-REQUIRED` (its `resource` is echoed).
    pub required: Json,
    /// The chosen `accepts` entry, echoed as `accepted` exactly as served.
    pub accept: Json,
    pub invoice_id: String,
    pub amount: u64,
    pub asset: Address,
    pub pay_to: Address,
    pub max_timeout_seconds: u64,
    /// The token's EIP-712 domain name and version (`extra`).
    pub name: String,
    pub version: String,
    pub resource_url: String,
}

/// Decodes an x402 header (base64 of JSON; padding optional, as the
/// libraries read it), keeping member order.
pub fn decode_header(value: &str) -> Option<Json> {
    json::parse(&header_bytes(value)?).ok()
}

/// Reads `PAYMENT-REQUIRED` and checks it is an invoice for `agent` and
/// `plan` this client agreed to pay: v2, scheme `exact` on the expected
/// network, that chain's USDC, the treasury (when known), an amount of the
/// plan's price plus a tag, a bounded window, the token's EIP-712 name and
/// version, and an invoice id issued to this agent. Anything else is the
/// service's fault (exit 3): nothing is signed.
pub fn check_offer(
    header: &str,
    agent: &AgentId,
    plan: Tier,
    want: &Expect,
) -> Result<Offer, Error> {
    let bad = |why: String| Error::Protocol(format!("the 402's PAYMENT-REQUIRED: {why}"));
    let required =
        decode_header(header).ok_or_else(|| bad("not base64 of a JSON document".into()))?;
    if required.get("x402Version").and_then(Json::as_safe_u64) != Some(2) {
        return Err(bad("x402Version is not 2".into()));
    }
    let network = format!("eip155:{}", want.chain_id);
    let accept = required
        .get("accepts")
        .and_then(Json::as_array)
        .and_then(|a| {
            a.iter().find(|x| {
                x.get("scheme").and_then(Json::as_str) == Some("exact")
                    && x.get("network").and_then(Json::as_str) == Some(network.as_str())
            })
        })
        .ok_or_else(|| bad(format!("no accepts entry with scheme exact on {network}")))?
        .clone();
    let text = |k: &str| {
        accept
            .get(k)
            .and_then(Json::as_str)
            .ok_or_else(|| bad(format!("accepts.{k} is missing or not a string")))
    };
    let usdc = canonical_usdc(want.chain_id).ok_or_else(|| {
        Error::local(format!(
            "chain {} has no USDC this client knows (Base 8453, Base Sepolia 84532): nothing \
             was signed; pay with the classic upgrade (without --x402)",
            want.chain_id
        ))
    })?;
    let asset =
        Address::parse(text("asset")?).ok_or_else(|| bad("asset is not an address".into()))?;
    if asset != usdc {
        return Err(bad(format!(
            "asset {} is not USDC on chain {} ({})",
            asset.checksummed(),
            want.chain_id,
            usdc.checksummed()
        )));
    }
    let pay_to = Address::parse(text("payTo")?)
        .filter(|a| a.as_str() != format!("0x{}", "0".repeat(40)))
        .ok_or_else(|| bad("payTo is not a usable address".into()))?;
    if let Some(t) = &want.pay_to {
        if *t != pay_to {
            return Err(bad(format!(
                "payTo {} is not the treasury {}",
                pay_to.checksummed(),
                t.checksummed()
            )));
        }
    }
    let amount_text = text("amount")?;
    let amount: u64 = amount_text
        .parse()
        .ok()
        .filter(|_| amount_text.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| bad(format!("amount {amount_text:?} is not a decimal integer")))?;
    let price = want.price.0;
    if amount <= price || amount > price.saturating_add(MAX_TAG) {
        return Err(bad(format!(
            "amount {} USDC is not the {} price {} plus an invoice tag (at most {} USDC)",
            Usdc(amount),
            plan.as_str(),
            want.price,
            Usdc(price.saturating_add(MAX_TAG))
        )));
    }
    let max_timeout_seconds = accept
        .get("maxTimeoutSeconds")
        .and_then(Json::as_safe_u64)
        .filter(|t| (1..=MAX_TIMEOUT_SECONDS).contains(t))
        .ok_or_else(|| {
            bad(format!(
                "maxTimeoutSeconds must be 1..={MAX_TIMEOUT_SECONDS}"
            ))
        })?;
    let extra = accept
        .get("extra")
        .ok_or_else(|| bad("extra (the token's EIP-712 name and version) is missing".into()))?;
    let extra_text = |k: &str| {
        extra
            .get(k)
            .and_then(Json::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| bad(format!("extra.{k} is missing")))
    };
    let (name, version) = (extra_text("name")?, extra_text("version")?);
    let invoice_id = extra_text("invoice_id")?;
    if !is_invoice_id(&invoice_id) || !issued_to(&invoice_id, agent) {
        return Err(bad(format!(
            "invoice_id {invoice_id:?} was not issued to this agent"
        )));
    }
    let resource_url = required
        .get("resource")
        .and_then(|r| r.get("url"))
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_owned();
    let query = format!("plan={}&agent_id={}", plan.as_str(), agent.as_str());
    if !resource_url.contains(&query) {
        return Err(bad(format!(
            "resource.url {resource_url:?} is not this agent's {} purchase",
            plan.as_str()
        )));
    }
    Ok(Offer {
        required,
        accept,
        invoice_id,
        amount,
        asset,
        pay_to,
        max_timeout_seconds,
        name,
        version,
        resource_url,
    })
}

/// The authorization's window and nonce (chosen by the caller: the clock
/// and 32 random bytes; fixed in tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub valid_after: u64,
    pub valid_before: u64,
    pub nonce: [u8; 32],
}

impl Window {
    /// `validAfter` = now − 600 s, `validBefore` = now + maxTimeoutSeconds.
    pub fn at(now_s: u64, offer: &Offer, nonce: [u8; 32]) -> Window {
        Window {
            valid_after: now_s.saturating_sub(VALID_AFTER_SKEW),
            valid_before: now_s.saturating_add(offer.max_timeout_seconds),
            nonce,
        }
    }
}

/// A signed payment.
#[derive(Debug, Clone, PartialEq)]
pub struct Signed {
    /// The `PAYMENT-SIGNATURE` value: base64 of the JSON document.
    pub header: String,
    /// The document.
    pub document: Json,
    /// `0x` + 64 lowercase hex.
    pub nonce: String,
    /// The payer, EIP-55.
    pub from: String,
    /// `0x` + 65 bytes of hex.
    pub signature: String,
    /// The EIP-712 digest signed, `0x` + hex.
    pub digest: String,
}

fn alloy_address(a: &Address) -> alloy_primitives::Address {
    a.as_str()
        .parse()
        .expect("an Address is 0x + 40 hex digits")
}

/// The EIP-712 digest of the authorization: domain {name, version,
/// chainId, verifyingContract = asset}, struct `TransferWithAuthorization`.
pub fn digest(offer: &Offer, chain_id: u64, from: &Address, w: &Window) -> B256 {
    let domain = Eip712Domain::new(
        Some(Cow::Owned(offer.name.clone())),
        Some(Cow::Owned(offer.version.clone())),
        Some(U256::from(chain_id)),
        Some(alloy_address(&offer.asset)),
        None,
    );
    TransferWithAuthorization {
        from: alloy_address(from),
        to: alloy_address(&offer.pay_to),
        value: U256::from(offer.amount),
        validAfter: U256::from(w.valid_after),
        validBefore: U256::from(w.valid_before),
        nonce: B256::from(w.nonce),
    }
    .eip712_signing_hash(&domain)
}

/// Signs `offer` with `key` over `w` and writes the v2 payment in the
/// official client's form (@x402/fetch 2.27: `{x402Version, payload:
/// {authorization, signature}, resource, accepted}`, `resource` and
/// `accepted` echoed as served), byte for byte what it sends for the same
/// fields.
pub fn sign_payment(
    key: &PayerKey,
    offer: &Offer,
    chain_id: u64,
    w: &Window,
) -> Result<Signed, Error> {
    let from = key.address();
    let hash = digest(offer, chain_id, &from, w);
    let sig = key.sign_hash(&hash)?;
    let signature = format!("0x{}", hex::encode(sig.as_bytes()));
    let nonce = format!("0x{}", hex::encode(w.nonce));
    let authorization = object_of(vec![
        ("from", Json::from(from.checksummed())),
        ("to", Json::from(offer.pay_to.checksummed())),
        ("value", Json::from(offer.amount.to_string())),
        ("validAfter", Json::from(w.valid_after.to_string())),
        ("validBefore", Json::from(w.valid_before.to_string())),
        ("nonce", Json::from(nonce.as_str())),
    ]);
    let document = object_of(vec![
        ("x402Version", Json::from(2u64)),
        (
            "payload",
            object_of(vec![
                ("authorization", authorization),
                ("signature", Json::from(signature.as_str())),
            ]),
        ),
        (
            "resource",
            offer
                .required
                .get("resource")
                .cloned()
                .unwrap_or(Json::Null),
        ),
        ("accepted", offer.accept.clone()),
    ]);
    let text = serde_json::to_string(&document)
        .map_err(|e| Error::local(format!("cannot encode the payment: {e}")))?;
    Ok(Signed {
        header: STANDARD.encode(text),
        document,
        nonce,
        from: from.checksummed(),
        signature,
        digest: format!("{hash:#x}"),
    })
}

/// What an answer to the x402 request means for the recorded header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// 200: credited (the claim body).
    Credited,
    /// The outcome is not known yet, or another attempt is being settled:
    /// resend the SAME header after the wait (never sign again).
    Resend,
    /// The service says nothing moved for this header (402
    /// `x402_settlement_failed` / `x402_invoice_mismatch`): it is dropped,
    /// and a new authorization may be signed for the 402's invoice.
    Dropped,
    /// Refused for good (`x402_payment_invalid`, `payment_already_claimed`,
    /// `invoice_already_paid`, `bad_x402_payment`, ...): recorded as failed;
    /// `--new` starts over.
    Failed,
    /// Anything else: kept, reported; the next run resends the same header.
    Other,
}

/// Reads the status and reason code of an answer to a sent header.
pub fn read_answer(status: u16, code: Option<&str>) -> Answer {
    match (status, code) {
        (200, _) => Answer::Credited,
        (402, Some("x402_settlement_failed" | "x402_invoice_mismatch")) => Answer::Dropped,
        (_, Some("x402_settlement_pending" | "x402_facilitator_unavailable"))
        | (_, Some("x402_settlement_in_progress")) => Answer::Resend,
        (
            _,
            Some(
                "x402_payment_invalid"
                | "payment_already_claimed"
                | "invoice_already_paid"
                | "bad_x402_payment",
            ),
        ) => Answer::Failed,
        (s, _) if s >= 500 || s == 429 => Answer::Resend,
        _ => Answer::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// A JSON object's members.
    type Members = Vec<(String, Json)>;

    fn vectors() -> Value {
        serde_json::from_str(include_str!("../../../tests/vectors/x402/payments.json")).unwrap()
    }

    /// The agent of the vectors' resource URL (a1 × 32).
    fn vector_agent() -> AgentId {
        AgentId::parse(&"a1".repeat(32)).unwrap()
    }

    /// The vectors' invoice id is not issued to an agent: a copy of the
    /// 402 with one that is (unsigned echo only; the signed fields stay).
    fn vector_offer(v: &Value) -> Offer {
        let header = v["payment_required"]["header_value"].as_str().unwrap();
        let agent = vector_agent();
        let mut required = decode_header(header).unwrap();
        let id = format!("inv_{}{}", &agent.as_str()[..16], "0".repeat(16));
        if let Json::Object(m) = &mut required {
            for (k, val) in m.iter_mut() {
                if k == "accepts" {
                    if let Json::Array(a) = val {
                        if let Json::Object(acc) = &mut a[0] {
                            for (k2, v2) in acc.iter_mut() {
                                if k2 == "extra" {
                                    if let Json::Object(e) = v2 {
                                        e[2].1 = Json::from(id.as_str());
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        let text = serde_json::to_string(&required).unwrap();
        check_offer(&STANDARD.encode(text), &agent, Tier::Pro, &expect(v)).unwrap()
    }

    fn expect(v: &Value) -> Expect {
        Expect {
            chain_id: 8453,
            price: Usdc(5_000_000),
            pay_to: Address::parse(v["treasury"].as_str().unwrap()),
        }
    }

    fn nonce_of(s: &str) -> [u8; 32] {
        let mut n = [0u8; 32];
        hex::decode_to_slice(&s[2..], &mut n).unwrap();
        n
    }

    fn vector(v: &Value, name: &str) -> Value {
        v["vectors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == name)
            .unwrap()
            .clone()
    }

    #[test]
    fn the_v2_header_is_byte_for_byte_x402_fetch() {
        let v = vectors();
        let case = vector(&v, "v2_x402_fetch");
        let key = PayerKey::parse(v["payer"]["private_key"].as_str().unwrap()).unwrap();
        let header = v["payment_required"]["header_value"].as_str().unwrap();
        // The vector's own 402 as served (its invoice id names no agent):
        // checked without the issued-to rule by hand, signed as-is.
        let required = decode_header(header).unwrap();
        let accept = required.get("accepts").unwrap().as_array().unwrap()[0].clone();
        let offer = Offer {
            required: required.clone(),
            accept,
            invoice_id: "inv_x402_vector_1".into(),
            amount: 5_004_217,
            asset: Address::parse(v["asset"].as_str().unwrap()).unwrap(),
            pay_to: Address::parse(v["treasury"].as_str().unwrap()).unwrap(),
            max_timeout_seconds: 300,
            name: "USD Coin".into(),
            version: "2".into(),
            resource_url: String::new(),
        };
        let auth = &case["payload"]["payload"]["authorization"];
        let w = Window {
            valid_after: auth["validAfter"].as_str().unwrap().parse().unwrap(),
            valid_before: auth["validBefore"].as_str().unwrap().parse().unwrap(),
            nonce: nonce_of(auth["nonce"].as_str().unwrap()),
        };
        let s = sign_payment(&key, &offer, 8453, &w).unwrap();
        assert_eq!(s.digest, case["eip712_digest"].as_str().unwrap());
        assert_eq!(
            s.signature,
            case["payload"]["payload"]["signature"].as_str().unwrap()
        );
        assert_eq!(s.from, v["payer"]["address"].as_str().unwrap());
        // The whole header, byte for byte.
        assert_eq!(s.header, case["header_value"].as_str().unwrap());
        // And Window::at signs @x402/fetch v1's window (now − 600, now + 300).
        let v1 = vector(&v, "v1_x402_fetch");
        let a1 = &v1["payload"]["payload"]["authorization"];
        let now = v["clock_unix"].as_u64().unwrap();
        let w1 = Window::at(now, &offer, nonce_of(a1["nonce"].as_str().unwrap()));
        assert_eq!(
            w1.valid_after.to_string(),
            a1["validAfter"].as_str().unwrap()
        );
        assert_eq!(
            w1.valid_before.to_string(),
            a1["validBefore"].as_str().unwrap()
        );
        let s1 = sign_payment(&key, &offer, 8453, &w1).unwrap();
        assert_eq!(s1.digest, v1["eip712_digest"].as_str().unwrap());
        assert_eq!(
            s1.signature,
            v1["payload"]["payload"]["signature"].as_str().unwrap()
        );
    }

    #[test]
    fn the_worker_reads_what_is_signed() {
        // The Worker's own header reader takes the signed payment.
        use crate::core::upgrade::x402::wire::{read_payment, Version};
        let v = vectors();
        let offer = vector_offer(&v);
        let key = PayerKey::parse(v["payer"]["private_key"].as_str().unwrap()).unwrap();
        let w = Window::at(1_767_225_600, &offer, [7u8; 32]);
        let s = sign_payment(&key, &offer, 8453, &w).unwrap();
        let cfg = crate::core::upgrade::x402::wire::tests::config_for(8453);
        let p = read_payment(Version::V2, &s.header, &cfg).unwrap();
        assert_eq!(p.authorization.value, 5_004_217);
        assert_eq!(p.authorization.nonce.as_str(), s.nonce);
        assert_eq!(p.signature, s.signature);
    }

    #[test]
    fn offers_outside_what_was_agreed_are_refused_before_signing() {
        let v = vectors();
        let good = vector_offer(&v);
        assert_eq!(good.amount, 5_004_217);
        let agent = vector_agent();
        let with = |f: &dyn Fn(&mut Members)| {
            let mut req = good.required.clone();
            if let Json::Object(m) = &mut req {
                for (k, val) in m.iter_mut() {
                    if k == "accepts" {
                        if let Json::Array(a) = val {
                            if let Json::Object(acc) = &mut a[0] {
                                f(acc);
                            }
                        }
                    }
                }
            }
            STANDARD.encode(serde_json::to_string(&req).unwrap())
        };
        let set = |key: &'static str, value: Json| {
            with(&move |acc: &mut Members| {
                for (k, v) in acc.iter_mut() {
                    if k == key {
                        *v = value.clone();
                    }
                }
            })
        };
        let e = expect(&v);
        for (what, header, plan, want) in [
            (
                "amount = price",
                set("amount", Json::from("5000000")),
                Tier::Pro,
                e.clone(),
            ),
            (
                "amount over the tag",
                set("amount", Json::from("5010000")),
                Tier::Pro,
                e.clone(),
            ),
            (
                "plus price for pro",
                set("amount", Json::from("15000001")),
                Tier::Pro,
                e.clone(),
            ),
            (
                "asset",
                set("asset", Json::from(v["treasury"].as_str().unwrap())),
                Tier::Pro,
                e.clone(),
            ),
            (
                "payTo",
                set(
                    "payTo",
                    Json::from("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"),
                ),
                Tier::Pro,
                e.clone(),
            ),
            (
                "network",
                set("network", Json::from("eip155:1")),
                Tier::Pro,
                e.clone(),
            ),
            (
                "scheme",
                set("scheme", Json::from("upto")),
                Tier::Pro,
                e.clone(),
            ),
            (
                "timeout",
                set("maxTimeoutSeconds", Json::from(86_400u64)),
                Tier::Pro,
                e.clone(),
            ),
            (
                "plan",
                with(&|_| {}),
                Tier::Plus,
                Expect {
                    price: Usdc(15_000_000),
                    ..e.clone()
                },
            ),
            (
                "chain",
                with(&|_| {}),
                Tier::Pro,
                Expect {
                    chain_id: 84532,
                    ..e.clone()
                },
            ),
            ("not base64", "%%%".to_owned(), Tier::Pro, e.clone()),
        ] {
            assert!(check_offer(&header, &agent, plan, &want).is_err(), "{what}");
        }
        // Another agent's invoice id.
        let other = AgentId::parse(&"b2".repeat(32)).unwrap();
        assert!(check_offer(&with(&|_| {}), &other, Tier::Pro, &e).is_err());
        // Without a known treasury, any payTo within the price is taken.
        let open = Expect {
            pay_to: None,
            ..e.clone()
        };
        let h = set(
            "payTo",
            Json::from("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"),
        );
        assert!(check_offer(&h, &agent, Tier::Pro, &open).is_ok());
        // A chain without a known USDC is a local refusal (exit 1).
        let e31337 = Expect {
            chain_id: 31337,
            ..e.clone()
        };
        let h = set("network", Json::from("eip155:31337"));
        assert_eq!(
            check_offer(&h, &agent, Tier::Pro, &e31337)
                .unwrap_err()
                .exit_code(),
            crate::client::ExitCode::Local
        );
    }

    #[test]
    fn answers_to_a_sent_header() {
        assert_eq!(read_answer(200, None), Answer::Credited);
        assert_eq!(
            read_answer(503, Some("x402_settlement_pending")),
            Answer::Resend
        );
        assert_eq!(
            read_answer(503, Some("x402_facilitator_unavailable")),
            Answer::Resend
        );
        assert_eq!(
            read_answer(409, Some("x402_settlement_in_progress")),
            Answer::Resend
        );
        assert_eq!(read_answer(502, None), Answer::Resend);
        assert_eq!(
            read_answer(402, Some("x402_settlement_failed")),
            Answer::Dropped
        );
        assert_eq!(
            read_answer(402, Some("x402_invoice_mismatch")),
            Answer::Dropped
        );
        assert_eq!(
            read_answer(402, Some("x402_payment_invalid")),
            Answer::Failed
        );
        assert_eq!(
            read_answer(409, Some("invoice_already_paid")),
            Answer::Failed
        );
        assert_eq!(
            read_answer(409, Some("payment_already_claimed")),
            Answer::Failed
        );
        // A 402 that is not one of the "nothing moved" answers never
        // lets a second authorization be signed.
        assert_eq!(
            read_answer(402, Some("x402_payment_required")),
            Answer::Other
        );
        assert_eq!(read_answer(402, None), Answer::Other);
    }
}
