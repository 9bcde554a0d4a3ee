//! x402's HTTP headers (`specs/transports-v2/http.md`, `transports-v1`):
//! reading a payment header into a typed [`Payment`], writing the 402's
//! requirements and the settlement response.
//!
//! Headers are base64 (standard alphabet; the libraries write padding and
//! accept it missing) of JSON. Only the `exact` scheme's EIP-3009 payload is
//! taken, on the configured chain, token and treasury; everything the payer
//! signed is read strictly (one spelling per value), and what it did not
//! sign (`resource`, `accepted`, `extra`) is only checked where a mismatch
//! would mean the client meant another service.

use super::config::X402Config;
use crate::core::json::{self, Json};
use crate::core::reason::ReasonCode as R;
use crate::core::reason::Refusal;
use crate::core::upgrade::config::{UpgradeConfig, BASE_CHAIN_ID, BASE_SEPOLIA_CHAIN_ID};
use crate::core::upgrade::evm::Address;
use crate::core::upgrade::invoice::Invoice;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use std::fmt;

/// The largest payment header read. A real one is about 1.5 KiB.
pub const MAX_PAYMENT_HEADER: usize = 8 * 1024;

/// Decodes with or without padding, as the libraries' `atob` does.
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The protocol version a payment came in, which names the headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `X-PAYMENT` in, `X-PAYMENT-RESPONSE` out, requirements in the body.
    V1,
    /// `PAYMENT-SIGNATURE` in, `PAYMENT-RESPONSE` out, `PAYMENT-REQUIRED`.
    V2,
}

impl Version {
    /// `x402Version`.
    pub fn number(self) -> u64 {
        match self {
            Version::V1 => 1,
            Version::V2 => 2,
        }
    }
    /// The request header carrying the payment.
    pub const fn payment_header(self) -> &'static str {
        match self {
            Version::V1 => "X-PAYMENT",
            Version::V2 => "PAYMENT-SIGNATURE",
        }
    }
    /// The response header carrying the settlement.
    pub const fn response_header(self) -> &'static str {
        match self {
            Version::V1 => "X-PAYMENT-RESPONSE",
            Version::V2 => "PAYMENT-RESPONSE",
        }
    }
}

/// The 402's requirements header (v2).
pub const PAYMENT_REQUIRED_HEADER: &str = "PAYMENT-REQUIRED";

/// Every x402 header an answer may carry: the 402's requirements and both
/// versions' settlement responses.
pub const ANSWER_HEADERS: [&str; 3] = [
    PAYMENT_REQUIRED_HEADER,
    Version::V2.response_header(),
    Version::V1.response_header(),
];

/// An x402 header's bytes: base64 with or without padding, trimmed.
pub fn header_bytes(value: &str) -> Option<Vec<u8>> {
    LENIENT.decode(value.trim()).ok()
}

/// The chain as v2 names it: CAIP-2 `eip155:<id>`.
pub fn v2_network(chain_id: u64) -> String {
    format!("eip155:{chain_id}")
}

/// The chain as v1 names it, from v1's fixed list; `None`: v2 only (no v1
/// client could sign for it).
pub fn v1_network(chain_id: u64) -> Option<&'static str> {
    match chain_id {
        BASE_CHAIN_ID => Some("base"),
        BASE_SEPOLIA_CHAIN_ID => Some("base-sepolia"),
        _ => None,
    }
}

/// An EIP-3009 nonce: `0x` + 64 lowercase hex. Random, chosen by the payer;
/// single-use per payer and token, on-chain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Nonce(String);

impl Nonce {
    /// Reads `0x` + 64 hex (any case).
    pub fn parse(s: &str) -> Option<Nonce> {
        let hex = s.strip_prefix("0x")?;
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Nonce(format!("0x{}", hex.to_ascii_lowercase())))
    }
    /// `0x` + 64 lowercase hex (also its form as a log topic).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The six signed fields of a `TransferWithAuthorization`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// The payer.
    pub from: Address,
    /// The recipient: must be the treasury.
    pub to: Address,
    /// Atomic units: must be an invoice's amount.
    pub value: u64,
    /// Valid after this Unix second (the v2 client sends 0).
    pub valid_after: u64,
    /// Valid before this Unix second.
    pub valid_before: u64,
    /// Single-use per payer and token.
    pub nonce: Nonce,
}

/// A payment's identity before any transaction exists: an authorization
/// executes at most once per (chain, token, payer, nonce), so this is what
/// binds it to one invoice. Stored and keyed as
/// `x402:{chain}:{asset}:{from}:{nonce}`, all lowercase.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PaymentId {
    /// The chain.
    pub chain_id: u64,
    /// The token contract.
    pub asset: Address,
    /// The payer.
    pub from: Address,
    /// The authorization's nonce.
    pub nonce: Nonce,
}

impl PaymentId {
    /// The key (one payment record per key, as `PaymentRecord` binds it).
    pub fn key(&self) -> String {
        self.to_string()
    }
    /// Reads a key back.
    pub fn parse_key(s: &str) -> Option<PaymentId> {
        let mut parts = s.strip_prefix("x402:")?.split(':');
        let id = PaymentId {
            chain_id: parts.next()?.parse().ok()?,
            asset: Address::parse(parts.next()?)?,
            from: Address::parse(parts.next()?)?,
            nonce: Nonce::parse(parts.next()?)?,
        };
        (parts.next().is_none() && id.key() == s).then_some(id)
    }
}

impl fmt::Display for PaymentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "x402:{}:{}:{}:{}",
            self.chain_id,
            self.asset,
            self.from,
            self.nonce.as_str()
        )
    }
}

impl serde::Serialize for PaymentId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.key())
    }
}

impl<'de> serde::Deserialize<'de> for PaymentId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        PaymentId::parse_key(&s).ok_or_else(|| serde::de::Error::custom("not an x402 payment key"))
    }
}

/// A payment header that decoded and names this service's chain, token and
/// treasury. Whether it pays an invoice is [`super::invoice`]'s call.
#[derive(Debug, Clone, PartialEq)]
pub struct Payment {
    /// The header it came in.
    pub version: Version,
    /// Its identity.
    pub id: PaymentId,
    /// What the payer signed.
    pub authorization: Authorization,
    /// The signature: `0x` + lowercase hex, 65 bytes or more (smart-wallet
    /// signatures are longer). The token checks it, not the service.
    pub signature: String,
    /// v2: the `maxTimeoutSeconds` of the requirements the client accepted
    /// (they vary from one 402 to the next; `/settle` gets the same).
    pub accepted_max_timeout: Option<u64>,
    /// The decoded document, forwarded to the facilitator as it came.
    pub document: Json,
}

/// One authorization exactly: `sha256:` + hex of SHA-256 over its six
/// signed fields and its signature, each in the one spelling
/// [`read_payment`] reads it to (addresses, nonce and signature lowercase,
/// numbers decimal). The envelope around it (v1 or v2, `accepted`,
/// `resource`) is not in it: an authorization resent in another envelope
/// is the same payment, while the same payer and nonce signed again over
/// anything else, or with another signature, is not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Fingerprint(String);

impl Payment {
    /// This payment's authorization, exactly (see [`Fingerprint`]).
    pub fn fingerprint(&self) -> Fingerprint {
        use sha2::{Digest, Sha256};
        let a = &self.authorization;
        // Every part has a fixed alphabet without a newline: the text
        // reads back to one list of parts.
        let text = [
            a.from.as_str(),
            a.to.as_str(),
            &a.value.to_string(),
            &a.valid_after.to_string(),
            &a.valid_before.to_string(),
            a.nonce.as_str(),
            &self.signature,
        ]
        .join("\n");
        Fingerprint(format!("sha256:{}", hex::encode(Sha256::digest(text))))
    }
}

fn bad(detail: impl Into<String>) -> Refusal {
    Refusal::new(R::BadX402Payment, detail)
}

/// Decimal digits of a `uint256` the payer signed, in one spelling (no
/// sign, no leading zeros), within u64.
fn decimal(s: &str) -> Option<u64> {
    let canonical = !s.is_empty()
        && s.len() <= 20
        && s.bytes().all(|b| b.is_ascii_digit())
        && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok()).flatten()
}

fn object<'a>(v: &'a Json, what: &str) -> Result<&'a [(String, Json)], Refusal> {
    v.as_object()
        .ok_or_else(|| bad(format!("{what} must be a JSON object")))
}

/// Exactly these members, no others.
fn exactly(members: &[(String, Json)], names: &[&str], what: &str) -> Result<(), Refusal> {
    let unknown = members.iter().find(|(k, _)| !names.contains(&k.as_str()));
    if unknown.is_some() || members.len() != names.len() {
        return Err(bad(format!(
            "{what} must have exactly {}",
            names.join(", ")
        )));
    }
    Ok(())
}

fn text<'a>(v: &'a Json, key: &str, what: &str) -> Result<&'a str, Refusal> {
    v.get(key)
        .and_then(Json::as_str)
        .ok_or_else(|| bad(format!("{what}.{key} must be a string")))
}

/// An address field that must be `want`.
fn must_be(v: &Json, key: &str, what: &str, want: &Address) -> Result<(), Refusal> {
    match Address::parse(text(v, key, what)?) {
        Some(a) if a == *want => Ok(()),
        Some(_) => Err(bad(format!("{what}.{key} must be {}", want.checksummed()))),
        None => Err(bad(format!("{what}.{key} is not an address"))),
    }
}

fn scheme_is_exact(v: &Json, what: &str) -> Result<(), Refusal> {
    match text(v, "scheme", what)? {
        "exact" => Ok(()),
        _ => Err(bad(format!("{what}.scheme must be \"exact\""))),
    }
}

fn network_is(v: &Json, what: &str, want: &str) -> Result<(), Refusal> {
    if text(v, "network", what)? != want {
        return Err(bad(format!("{what}.network must be {want:?}")));
    }
    Ok(())
}

/// Reads a payment header as it arrived in `version`'s header.
pub fn read_payment(
    version: Version,
    header: &str,
    cfg: &UpgradeConfig,
) -> Result<Payment, Refusal> {
    if header.len() > MAX_PAYMENT_HEADER {
        return Err(bad("the payment header is over 8 KiB"));
    }
    let bytes = header_bytes(header).ok_or_else(|| bad("the payment header is not base64"))?;
    let document =
        json::parse(&bytes).map_err(|e| bad(format!("the payment header's JSON: {e}")))?;
    let members = object(&document, "the payment")?;
    if document.get("x402Version").and_then(Json::as_safe_u64) != Some(version.number()) {
        return Err(bad(format!(
            "{} carries x402Version {}",
            version.payment_header(),
            version.number()
        )));
    }
    let accepted_max_timeout = match version {
        Version::V2 => {
            let names = [
                "x402Version",
                "resource",
                "accepted",
                "payload",
                "extensions",
            ];
            if let Some((k, _)) = members.iter().find(|(k, _)| !names.contains(&k.as_str())) {
                return Err(bad(format!(
                    "unknown member {:?} in the payment",
                    k.chars().take(32).collect::<String>()
                )));
            }
            let accepted = document
                .get("accepted")
                .ok_or_else(|| bad("a v2 payment names the requirements it accepted"))?;
            object(accepted, "accepted")?;
            scheme_is_exact(accepted, "accepted")?;
            network_is(accepted, "accepted", &v2_network(cfg.chain_id))?;
            must_be(accepted, "asset", "accepted", &cfg.usdc)?;
            must_be(accepted, "payTo", "accepted", &cfg.treasury)?;
            let timeout = accepted
                .get("maxTimeoutSeconds")
                .and_then(Json::as_safe_u64)
                .ok_or_else(|| bad("accepted.maxTimeoutSeconds must be a positive integer"))?;
            Some(timeout)
        }
        Version::V1 => {
            exactly(
                members,
                &["x402Version", "scheme", "network", "payload"],
                "a v1 payment",
            )?;
            scheme_is_exact(&document, "the payment")?;
            let Some(name) = v1_network(cfg.chain_id) else {
                return Err(bad(format!(
                    "chain {} has no x402 v1 name: pay with v2 (PAYMENT-SIGNATURE)",
                    cfg.chain_id
                )));
            };
            network_is(&document, "the payment", name)?;
            None
        }
    };
    let payload = document
        .get("payload")
        .ok_or_else(|| bad("the payment has no payload"))?;
    exactly(
        object(payload, "payload")?,
        &["authorization", "signature"],
        "payload (an EIP-3009 authorization; Permit2 is not taken)",
    )?;
    let auth = payload.get("authorization").unwrap_or(&Json::Null);
    let what = "payload.authorization";
    exactly(
        object(auth, what)?,
        &["from", "to", "value", "validAfter", "validBefore", "nonce"],
        what,
    )?;
    let address = |k: &str| {
        Address::parse(text(auth, k, what)?).ok_or_else(|| {
            bad(format!(
                "{what}.{k} must be an address (0x + 40 hex, EIP-55 when mixed-case)"
            ))
        })
    };
    let number = |k: &str| {
        decimal(text(auth, k, what)?).ok_or_else(|| {
            bad(format!(
                "{what}.{k} must be a decimal string (digits, no leading zeros)"
            ))
        })
    };
    let authorization = Authorization {
        from: address("from")?,
        to: address("to")?,
        value: number("value")?,
        valid_after: number("validAfter")?,
        valid_before: number("validBefore")?,
        nonce: Nonce::parse(text(auth, "nonce", what)?)
            .ok_or_else(|| bad(format!("{what}.nonce must be 0x + 64 hex")))?,
    };
    let signature = text(payload, "signature", "payload")?;
    let sig_hex = signature.strip_prefix("0x").unwrap_or("");
    if sig_hex.len() < 130
        || sig_hex.len() % 2 != 0
        || !sig_hex.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err(bad(
            "payload.signature must be 0x + hex of 65 bytes or more",
        ));
    }
    Ok(Payment {
        version,
        id: PaymentId {
            chain_id: cfg.chain_id,
            asset: cfg.usdc.clone(),
            from: authorization.from.clone(),
            nonce: authorization.nonce.clone(),
        },
        authorization,
        signature: format!("0x{}", sig_hex.to_ascii_lowercase()),
        accepted_max_timeout,
        document,
    })
}

/// One invoice offered in a 402.
#[derive(Debug, Clone)]
pub struct Offer<'a> {
    /// The invoice: its amount is the price the payer signs.
    pub invoice: &'a Invoice,
    /// The request URL (`…/upgrade/x402?plan=…&agent_id=…`).
    pub resource_url: &'a str,
    /// What is bought, for the payer's logs and wallets.
    pub description: String,
    /// Seconds the authorization may stay valid ([`super::invoice::max_timeout_seconds`]).
    pub max_timeout_seconds: u64,
}

/// A JSON object with its members in this order (the order the libraries
/// write them in, so a 402 reads the same in every client's logs).
pub(crate) fn object_of(members: Vec<(&str, Json)>) -> Json {
    Json::Object(
        members
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}

/// A JSON document as text.
pub(crate) fn to_text(v: &Json) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

impl Offer<'_> {
    fn extra(&self, x: &X402Config) -> Json {
        // name/version: the token's EIP-712 domain, which clients need to
        // sign; invoice_id: so a client can also pay by transfer and claim.
        object_of(vec![
            ("name", Json::from(x.token_name.as_str())),
            ("version", Json::from(x.token_version.as_str())),
            ("invoice_id", Json::from(self.invoice.invoice_id.as_str())),
        ])
    }

    /// The v2 `accepts[0]` (also `/settle`'s requirements for a v2 payment).
    pub fn requirements_v2(&self, cfg: &UpgradeConfig, x: &X402Config) -> Json {
        object_of(vec![
            ("scheme", Json::from("exact")),
            ("network", Json::from(v2_network(cfg.chain_id))),
            ("amount", Json::from(self.invoice.amount_atomic.to_string())),
            ("asset", Json::from(cfg.usdc.checksummed())),
            ("payTo", Json::from(cfg.treasury.checksummed())),
            ("maxTimeoutSeconds", Json::from(self.max_timeout_seconds)),
            ("extra", self.extra(x)),
        ])
    }

    /// The v1 `accepts[0]`, where the chain has a v1 name (also `/settle`'s
    /// requirements for a v1 payment).
    pub fn requirements_v1(&self, cfg: &UpgradeConfig, x: &X402Config) -> Option<Json> {
        Some(object_of(vec![
            ("scheme", Json::from("exact")),
            ("network", Json::from(v1_network(cfg.chain_id)?)),
            (
                "maxAmountRequired",
                Json::from(self.invoice.amount_atomic.to_string()),
            ),
            ("resource", Json::from(self.resource_url)),
            ("description", Json::from(self.description.as_str())),
            ("mimeType", Json::from("application/json")),
            ("payTo", Json::from(cfg.treasury.checksummed())),
            ("maxTimeoutSeconds", Json::from(self.max_timeout_seconds)),
            ("asset", Json::from(cfg.usdc.checksummed())),
            ("extra", self.extra(x)),
        ]))
    }

    /// The 402: the `PAYMENT-REQUIRED` header and, where the chain has a v1
    /// name, the v1 body's members (`x402Version`, `error`, `accepts`; the
    /// Worker adds `detail`). `error` is the 402's reason code. v2 clients
    /// read the header first, v1 clients the body: one answer serves both.
    pub fn challenge(&self, error: R, cfg: &UpgradeConfig, x: &X402Config) -> Challenge {
        let required = object_of(vec![
            ("x402Version", Json::from(2u64)),
            ("error", Json::from(error.as_str())),
            (
                "resource",
                object_of(vec![
                    ("url", Json::from(self.resource_url)),
                    ("description", Json::from(self.description.as_str())),
                    ("mimeType", Json::from("application/json")),
                ]),
            ),
            ("accepts", Json::Array(vec![self.requirements_v2(cfg, x)])),
        ]);
        Challenge {
            payment_required: STANDARD.encode(to_text(&required)),
            v1_body: self.requirements_v1(cfg, x).map(|accept| {
                object_of(vec![
                    ("x402Version", Json::from(1u64)),
                    ("error", Json::from(error.as_str())),
                    ("accepts", Json::Array(vec![accept])),
                ])
            }),
        }
    }
}

/// A 402's x402 parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Challenge {
    /// The `PAYMENT-REQUIRED` header's value.
    pub payment_required: String,
    /// The v1 body's members, when the chain has a v1 name.
    pub v1_body: Option<Json>,
}

/// The settlement response header (`PAYMENT-RESPONSE`, v1
/// `X-PAYMENT-RESPONSE`) of a credited payment: name and value.
pub fn payment_response(payment: &Payment, tx_hash: &str) -> (&'static str, String) {
    let network = match payment.version {
        Version::V2 => v2_network(payment.id.chain_id),
        Version::V1 => v1_network(payment.id.chain_id)
            .unwrap_or_default()
            .to_owned(),
    };
    let body = object_of(vec![
        ("success", Json::from(true)),
        ("transaction", Json::from(tx_hash)),
        ("network", Json::from(network)),
        (
            "payer",
            Json::from(payment.authorization.from.checksummed()),
        ),
    ]);
    (
        payment.version.response_header(),
        STANDARD.encode(to_text(&body)),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core::upgrade::config::{
        test_config, CHAIN_ID_VAR, RPC_URL_VAR, TREASURY_VAR, USDC_CONTRACT_VAR,
    };
    use crate::core::upgrade::x402::config::test_x402_config;
    use serde_json::{json, Value};

    /// What the official client libraries produced (make-vectors.mjs).
    pub(crate) fn vectors() -> Value {
        serde_json::from_str(include_str!(
            "../../../../tests/vectors/x402/client-payloads.json"
        ))
        .unwrap()
    }

    /// The vectors' case for `chain_id`.
    pub(crate) fn case(chain_id: u64) -> Value {
        vectors()["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["chain_id"] == chain_id)
            .unwrap()
            .clone()
    }

    /// The upgrade config of a vector chain (treasury: anvil's account 2).
    pub(crate) fn config_for(chain_id: u64) -> UpgradeConfig {
        let usdc = case(chain_id)["v2"]["payment_required"]["accepts"][0]["asset"]
            .as_str()
            .unwrap()
            .to_owned();
        UpgradeConfig::from_vars(|k| match k {
            TREASURY_VAR => Some("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc".into()),
            RPC_URL_VAR => Some("http://127.0.0.1:8545".into()),
            CHAIN_ID_VAR => Some(chain_id.to_string()),
            USDC_CONTRACT_VAR => Some(usdc.clone()),
            _ => None,
        })
        .unwrap()
    }

    fn reencode(doc: &Value) -> String {
        STANDARD.encode(doc.to_string())
    }

    #[test]
    fn the_official_clients_headers_read_back() {
        let v = vectors();
        for chain in [8453, 84532, 31337] {
            let c = case(chain);
            let cfg = config_for(chain);
            let p = read_payment(
                Version::V2,
                c["v2"]["payment_signature_header"].as_str().unwrap(),
                &cfg,
            )
            .unwrap();
            let signed = &c["v2"]["payment_payload"]["payload"]["authorization"];
            assert_eq!(
                p.authorization.from.checksummed(),
                v["payer"].as_str().unwrap()
            );
            assert_eq!(p.authorization.to, cfg.treasury);
            assert_eq!(p.authorization.value, 5_004_217);
            assert_eq!(
                p.authorization.valid_after, 0,
                "the v2 client signs validAfter 0"
            );
            assert_eq!(
                p.authorization.valid_before,
                v["now"].as_u64().unwrap() + 300
            );
            assert_eq!(
                p.authorization.nonce.as_str(),
                signed["nonce"].as_str().unwrap()
            );
            assert_eq!(p.accepted_max_timeout, Some(300));
            assert_eq!(p.signature.len(), 2 + 130);
            assert_eq!(
                p.id.key(),
                format!(
                    "x402:{chain}:{}:0x70997970c51812dc3a010c7d01b50e0d17dc79c8:{}",
                    cfg.usdc,
                    signed["nonce"].as_str().unwrap()
                )
            );
            assert_eq!(PaymentId::parse_key(&p.id.key()), Some(p.id.clone()));
            // The v2 header in the v1 slot: refused, never read as v1.
            let wrong = read_payment(
                Version::V1,
                c["v2"]["payment_signature_header"].as_str().unwrap(),
                &cfg,
            );
            assert_eq!(wrong.unwrap_err().code, R::BadX402Payment);
            match chain {
                31337 => assert!(c.get("v1").is_none()),
                _ => {
                    let p1 = read_payment(
                        Version::V1,
                        c["v1"]["x_payment_header"].as_str().unwrap(),
                        &cfg,
                    )
                    .unwrap();
                    assert_eq!(p1.version, Version::V1);
                    assert_eq!(
                        p1.authorization.valid_after,
                        v["now"].as_u64().unwrap() - 600
                    );
                    assert_eq!(p1.accepted_max_timeout, None);
                    assert_ne!(p1.id, p.id, "another nonce, another payment");
                }
            }
        }
    }

    #[test]
    fn the_specs_own_example_reads_on_its_chain_and_not_elsewhere() {
        // specs/transports-v2/http.md, "Payment Payload Transmission".
        let header = "eyJ4NDAyVmVyc2lvbiI6MiwicmVzb3VyY2UiOnsidXJsIjoiaHR0cHM6Ly9hcGkuZXhhbXBsZS5jb20vcHJlbWl1bS1kYXRhIiwiZGVzY3JpcHRpb24iOiJBY2Nlc3MgdG8gcHJlbWl1bSBtYXJrZXQgZGF0YSIsIm1pbWVUeXBlIjoiYXBwbGljYXRpb24vanNvbiJ9LCJhY2NlcHRlZCI6eyJzY2hlbWUiOiJleGFjdCIsIm5ldHdvcmsiOiJlaXAxNTU6ODQ1MzIiLCJhbW91bnQiOiIxMDAwMCIsImFzc2V0IjoiMHgwMzZDYkQ1Mzg0MmM1NDI2NjM0ZTc5Mjk1NDFlQzIzMThmM2RDRjdlIiwicGF5VG8iOiIweDIwOTY5M0JjNmFmYzBDNTMyOGJBMzZGYUYwM0M1MTRFRjMxMjI4N0MiLCJtYXhUaW1lb3V0U2Vjb25kcyI6NjAsImV4dHJhIjp7Im5hbWUiOiJVU0RDIiwidmVyc2lvbiI6IjIifX0sInBheWxvYWQiOnsic2lnbmF0dXJlIjoiMHgyZDZhNzU4OGQ2YWNjYTUwNWNiZjBkOWE0YTIyN2UwYzUyYzZjMzQwMDhjOGU4OTg2YTEyODMyNTk3NjQxNzM2MDhhMmNlNjQ5NjY0MmUzNzdkNmRhOGRiYmY1ODM2ZTliZDE1MDkyZjllY2FiMDVkZWQzZDYyOTNhZjE0OGI1NzFjIiwiYXV0aG9yaXphdGlvbiI6eyJmcm9tIjoiMHg4NTdiMDY1MTlFOTFlM0E1NDUzODc5MWJEYmIwRTIyMzczZTM2YjY2IiwidG8iOiIweDIwOTY5M0JjNmFmYzBDNTMyOGJBMzZGYUYwM0M1MTRFRjMxMjI4N0MiLCJ2YWx1ZSI6IjEwMDAwIiwidmFsaWRBZnRlciI6IjE3NDA2NzIwODkiLCJ2YWxpZEJlZm9yZSI6IjE3NDA2NzIxNTQiLCJub25jZSI6IjB4ZjM3NDY2MTNjMmQ5MjBiNWZkYWJjMDg1NmYyYWViMmQ0Zjg4ZWU2MDM3YjhjYzVkMDRhNzFhNDQ2MmYxMzQ4MCJ9fX0=";
        let spec = UpgradeConfig::from_vars(|k| match k {
            TREASURY_VAR => Some("0x209693Bc6afc0C5328bA36FaF03C514EF312287C".into()),
            RPC_URL_VAR => Some("https://rpc.example".into()),
            CHAIN_ID_VAR => Some("84532".into()),
            _ => None,
        })
        .unwrap();
        let p = read_payment(Version::V2, header, &spec).unwrap();
        assert_eq!(p.authorization.value, 10_000);
        assert_eq!(
            (p.authorization.valid_after, p.authorization.valid_before),
            (1_740_672_089, 1_740_672_154)
        );
        assert_eq!(
            p.authorization.from.checksummed(),
            "0x857b06519E91e3A54538791bDbb0E22373e36b66"
        );
        // Our Base config: another network, token and treasury.
        let e = read_payment(Version::V2, header, &test_config()).unwrap_err();
        assert_eq!(e.code, R::BadX402Payment);
        assert!(e.detail_or_code().contains("eip155:8453"), "{e:?}");
    }

    /// One change to a payment document.
    type Change = Box<dyn Fn(&mut Value)>;

    /// The v2 vector of Base with one part of its document changed.
    fn altered(change: impl Fn(&mut Value)) -> Result<Payment, Refusal> {
        let mut doc = case(8453)["v2"]["payment_payload"].clone();
        change(&mut doc);
        read_payment(Version::V2, &reencode(&doc), &test_config())
    }

    #[test]
    fn what_the_payer_signed_is_read_strictly() {
        assert!(altered(|_| {}).is_ok(), "unchanged, re-encoded");
        let auth = |k: &'static str, v: Value| {
            move |d: &mut Value| d["payload"]["authorization"][k] = v.clone()
        };
        let cases: Vec<(Change, &str)> = vec![
            (Box::new(auth("value", json!(5004217))), "value"),
            (Box::new(auth("value", json!("05004217"))), "value"),
            (Box::new(auth("value", json!("-1"))), "value"),
            (
                Box::new(auth("value", json!("99999999999999999999999"))),
                "value",
            ),
            (Box::new(auth("validBefore", json!("1e9"))), "validBefore"),
            (Box::new(auth("nonce", json!("0x1234"))), "nonce"),
            (
                Box::new(auth(
                    "from",
                    json!("0x70997970C51812dc3A010C7d01b50e0d17dc79c8"),
                )),
                "from",
            ),
            (Box::new(auth("extra", json!("1"))), "exactly"),
            (
                Box::new(|d: &mut Value| d["payload"]["signature"] = json!("0x1234")),
                "signature",
            ),
            (
                Box::new(|d: &mut Value| d["payload"]["permit2Authorization"] = json!({})),
                "Permit2",
            ),
            (
                Box::new(|d: &mut Value| d["accepted"]["scheme"] = json!("upto")),
                "scheme",
            ),
            (
                Box::new(|d: &mut Value| d["accepted"]["network"] = json!("base")),
                "network",
            ),
            (
                Box::new(|d: &mut Value| {
                    d["accepted"]["asset"] = json!("0x036CbD53842c5426634e7929541eC2318f3dCF7e")
                }),
                "asset",
            ),
            (
                Box::new(|d: &mut Value| {
                    d["accepted"]["payTo"] = json!("0x209693Bc6afc0C5328bA36FaF03C514EF312287C")
                }),
                "payTo",
            ),
            (
                Box::new(|d: &mut Value| d["x402Version"] = json!(3)),
                "x402Version",
            ),
            (
                Box::new(|d: &mut Value| d["surprise"] = json!(1)),
                "unknown member",
            ),
        ];
        for (change, needle) in cases {
            let e = altered(change).unwrap_err();
            assert_eq!(e.code, R::BadX402Payment);
            assert!(e.detail_or_code().contains(needle), "{needle}: {e:?}");
        }
        // Extensions (unsigned, optional) are let through; an upper-case
        // signature is the same signature.
        let p = altered(|d| {
            d["extensions"] = json!({"payment-identifier": {"id": "x"}});
            let s = d["payload"]["signature"]
                .as_str()
                .unwrap()
                .to_ascii_uppercase()
                .replacen("0X", "0x", 1);
            d["payload"]["signature"] = json!(s);
        })
        .unwrap();
        assert_eq!(
            p.signature,
            case(8453)["v2"]["payment_payload"]["payload"]["signature"]
        );
    }

    #[test]
    fn a_fingerprint_is_the_authorization_not_its_envelope() {
        let c = case(8453);
        let cfg = test_config();
        let v2 = read_payment(
            Version::V2,
            c["v2"]["payment_signature_header"].as_str().unwrap(),
            &cfg,
        )
        .unwrap();
        let f = v2.fingerprint();
        assert!(f.0.starts_with("sha256:") && f.0.len() == 7 + 64, "{f:?}");
        // The same authorization and signature in a v1 envelope, and in a
        // v2 one naming another resource and timeout: the same.
        let doc = &c["v2"]["payment_payload"];
        let v1 = json!({"x402Version": 1, "scheme": "exact", "network": "base", "payload": doc["payload"]});
        let v1 = read_payment(Version::V1, &reencode(&v1), &cfg).unwrap();
        assert_eq!(v1.fingerprint(), f);
        let rewrapped = altered(|d| {
            d["resource"]["url"] = json!("https://elsewhere.example/x");
            d["accepted"]["maxTimeoutSeconds"] = json!(60);
        })
        .unwrap();
        assert_eq!(rewrapped.fingerprint(), f);
        // An upper-case signature reads to the same one.
        let upper = altered(|d| {
            let s = d["payload"]["signature"]
                .as_str()
                .unwrap()
                .to_ascii_uppercase();
            d["payload"]["signature"] = json!(s.replacen("0X", "0x", 1));
        })
        .unwrap();
        assert_eq!(upper.fingerprint(), f);
        // Any signed field, or the signature, changed: another one.
        let auth = |k: &'static str, v: Value| {
            move |d: &mut Value| d["payload"]["authorization"][k] = v.clone()
        };
        let changes: Vec<Change> = vec![
            Box::new(auth("value", json!("5004218"))),
            Box::new(auth("validAfter", json!("1"))),
            Box::new(auth("validBefore", json!("1770681899"))),
            Box::new(auth("nonce", json!(format!("0x{}", "ab".repeat(32))))),
            Box::new(auth(
                "to",
                json!("0x90f79bf6eb2c4f870365e785982e1f101e93b906"),
            )),
            Box::new(|d: &mut Value| {
                d["payload"]["signature"] = json!(format!("0x{}1b", "5a".repeat(64)))
            }),
        ];
        for change in changes {
            let p = altered(change).unwrap();
            assert_ne!(p.fingerprint(), f, "{:?}", p.authorization);
        }
    }

    #[test]
    fn headers_that_are_not_payments() {
        let cfg = test_config();
        let header = case(8453)["v2"]["payment_signature_header"]
            .as_str()
            .unwrap()
            .to_owned();
        let unpadded = header.trim_end_matches('=');
        assert!(
            read_payment(Version::V2, unpadded, &cfg).is_ok(),
            "padding is optional"
        );
        for h in [
            "",
            "%%%",
            &STANDARD.encode("not json"),
            &STANDARD.encode("[]"),
            &STANDARD.encode(r#"{"x402Version":2,"x402Version":2}"#),
            &"A".repeat(MAX_PAYMENT_HEADER + 4),
            &format!("{}-{}", &header[..8], &header[8..]),
        ] {
            assert_eq!(
                read_payment(Version::V2, h, &cfg).unwrap_err().code,
                R::BadX402Payment,
                "{h:.40}"
            );
        }
        // A v1 payment on a chain without a v1 name.
        let local = config_for(31337);
        let v1 = case(8453)["v1"]["x_payment_header"]
            .as_str()
            .unwrap()
            .to_owned();
        let e = read_payment(Version::V1, &v1, &local).unwrap_err();
        assert!(e.detail_or_code().contains("v2"), "{e:?}");
    }

    /// The vectors' invoice: Pro, 5.004217 USDC.
    pub(crate) fn invoice() -> Invoice {
        Invoice {
            invoice_id: vectors()["invoice_id"].as_str().unwrap().to_owned(),
            plan: crate::core::limits::Tier::Pro,
            days: 30,
            amount_atomic: 5_004_217,
            chain_id: 8453,
            token_contract: test_config().usdc.as_str().to_owned(),
            to_address: test_config().treasury.as_str().to_owned(),
            quoted_at_ms: 1_770_681_540_000,
            expires_at_ms: 1_770_682_440_000,
            paid: None,
        }
    }

    /// A Json value as serde_json's, to compare with the vectors.
    fn value(j: &Json) -> Value {
        serde_json::to_value(j).unwrap()
    }

    #[test]
    fn our_402_is_what_the_client_signed_against() {
        let x = test_x402_config();
        for chain in [8453u64, 84532, 31337] {
            let cfg = config_for(chain);
            let mut x = x.clone();
            if chain == 84532 {
                x.token_name = "USDC".into();
            }
            let c = case(chain);
            let want = &c["v2"]["payment_required"];
            let inv = invoice();
            let offer = Offer {
                invoice: &inv,
                resource_url: want["resource"]["url"].as_str().unwrap(),
                description: want["resource"]["description"].as_str().unwrap().to_owned(),
                max_timeout_seconds: 300,
            };
            let ch = offer.challenge(R::X402PaymentRequired, &cfg, &x);
            let decoded: Value =
                serde_json::from_slice(&STANDARD.decode(&ch.payment_required).unwrap()).unwrap();
            assert_eq!(&decoded, want, "chain {chain}");
            // Byte for byte what the library's encoder makes of the same object.
            assert_eq!(
                ch.payment_required,
                c["v2"]["payment_required_header"].as_str().unwrap()
            );
            match c.get("v1") {
                Some(v1) => assert_eq!(
                    ch.v1_body.as_ref().map(value),
                    Some(v1["payment_required_body"].clone())
                ),
                None => assert_eq!(ch.v1_body, None),
            }
        }
    }

    #[test]
    fn the_settlement_response_is_the_librarys() {
        let c = case(8453);
        let p = read_payment(
            Version::V2,
            c["v2"]["payment_signature_header"].as_str().unwrap(),
            &test_config(),
        )
        .unwrap();
        let want = &c["v2"]["payment_response"];
        let (name, value) = payment_response(&p, want["transaction"].as_str().unwrap());
        assert_eq!(name, "PAYMENT-RESPONSE");
        assert_eq!(value, c["v2"]["payment_response_header"].as_str().unwrap());
        let p1 = read_payment(
            Version::V1,
            c["v1"]["x_payment_header"].as_str().unwrap(),
            &test_config(),
        )
        .unwrap();
        let (name, value) = payment_response(&p1, want["transaction"].as_str().unwrap());
        assert_eq!(name, "X-PAYMENT-RESPONSE");
        let decoded: Value = serde_json::from_slice(&STANDARD.decode(value).unwrap()).unwrap();
        assert_eq!(decoded["network"], "base");
    }
}
