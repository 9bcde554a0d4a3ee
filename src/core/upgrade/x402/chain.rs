//! What the chain says about an authorization, the only word a credit is
//! taken on: whether its nonce is used (`authorizationState`), which
//! transaction used it (`AuthorizationUsed` logs), and whether that
//! transaction's receipt moved the invoice's amount from the payer to the
//! treasury. The facilitator's word is a hint of where to look, nothing
//! more: it can lie about success, and anyone holding the header can
//! front-run it on-chain (the money still reaches the treasury, and is
//! found through the log).

use super::wire::{object_of, PaymentId};
use crate::core::json::Json;
use crate::core::upgrade::evm::{parse_tx_hash, quantity, word_u128, TRANSFER_TOPIC};
use crate::core::upgrade::receipt::{check_payment, Expected, Observed, Verdict};

/// `keccak256("AuthorizationUsed(address,bytes32)")`: EIP-3009's event,
/// `AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)`.
pub const AUTHORIZATION_USED_TOPIC: &str =
    "0x98de503528ee59b575ef0c0a2576a82497bfc029a5685b209e9ec333479b10a5";

/// The selector of `authorizationState(address,bytes32) returns (bool)`.
pub const AUTHORIZATION_STATE_SELECTOR: &str = "0xe94a0102";

/// `eth_call`'s params asking whether the authorization's nonce is used:
/// `[{to: asset, data}, "latest"]`.
pub fn authorization_state_call(id: &PaymentId) -> Json {
    let data = format!(
        "{AUTHORIZATION_STATE_SELECTOR}{}{}",
        &id.from.as_topic()[2..],
        &id.nonce.as_str()[2..]
    );
    Json::Array(vec![
        object_of(vec![
            ("to", Json::from(id.asset.as_str())),
            ("data", Json::from(data)),
        ]),
        Json::from("latest"),
    ])
}

/// The `eth_call` result: one ABI word, 0 or 1. `None` for anything else
/// (a provider fault: decide nothing on it).
pub fn read_authorization_state(result: &Json) -> Option<bool> {
    match result.as_str().and_then(word_u128)? {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// `eth_getLogs`' params for the log of this authorization's use, from
/// `from_block` (the head when settling began, less a margin: providers
/// bound the range).
pub fn authorization_used_filter(id: &PaymentId, from_block: u64) -> Json {
    Json::Array(vec![object_of(vec![
        ("address", Json::from(id.asset.as_str())),
        (
            "topics",
            Json::Array(vec![
                Json::from(AUTHORIZATION_USED_TOPIC),
                Json::from(id.from.as_topic()),
                Json::from(id.nonce.as_str()),
            ]),
        ),
        ("fromBlock", Json::from(format!("0x{from_block:x}"))),
        ("toBlock", Json::from("latest")),
    ])])
}

fn field<'a>(v: &'a Json, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Json::as_str)
}

fn same(a: Option<&str>, b: &str) -> bool {
    a.is_some_and(|a| a.eq_ignore_ascii_case(b))
}

/// Whether `log` is the asset's `AuthorizationUsed(from, nonce)`.
fn is_authorization_used(log: &Json, id: &PaymentId) -> bool {
    let topics = log.get("topics").and_then(Json::as_array).unwrap_or(&[]);
    let want = [
        AUTHORIZATION_USED_TOPIC,
        &id.from.as_topic(),
        id.nonce.as_str(),
    ];
    same(field(log, "address"), id.asset.as_str())
        && !matches!(log.get("removed"), Some(Json::Bool(true)))
        && topics.len() == want.len()
        && topics.iter().zip(want).all(|(t, w)| same(t.as_str(), w))
}

/// The transaction that used the authorization, from `eth_getLogs`' answer:
/// `Ok(None)` when no log names it; `Err` when the answer is malformed.
pub fn tx_of_authorization(logs: &Json, id: &PaymentId) -> Result<Option<String>, String> {
    let logs = logs
        .as_array()
        .ok_or("eth_getLogs answer is not an array")?;
    match logs.iter().find(|l| is_authorization_used(l, id)) {
        None => Ok(None),
        Some(log) => field(log, "transactionHash")
            .and_then(parse_tx_hash)
            .map(Some)
            .ok_or_else(|| "an AuthorizationUsed log has no transaction hash".into()),
    }
}

/// What the chain shows about one transaction said to settle a payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Onchain {
    /// It executed this authorization, paid the invoice and is deep enough:
    /// credit (once, keyed by this log as well as by the payment id).
    Credit {
        /// The transaction.
        tx_hash: String,
        /// The payer's `Transfer` to the treasury in it.
        log_index: u64,
        /// Its block.
        block_number: u64,
    },
    /// It did, but is not yet deep enough.
    Confirming {
        /// Confirmations so far.
        confirmations: u64,
        /// Confirmations needed.
        needed: u64,
    },
    /// The node knows no mined transaction with this hash (yet).
    NotFound,
    /// Mined, but it is not this payment (reverted, another transfer, a
    /// facilitator's made-up hash): it credits nothing.
    NotThisPayment(String),
    /// The node's answers are malformed or inconsistent: decide nothing.
    ProviderFault(String),
}

/// Whether the transaction `seen` describes settled `id` for the invoice
/// `want` describes: status 1; the asset's `Transfer(from → treasury)` of
/// exactly the invoice's amount and its `AuthorizationUsed(from, nonce)`;
/// `want.min_confirmations` deep. The receipt is read (and checked against
/// the block and head) as a claim's is.
pub fn check_settlement(want: &Expected, id: &PaymentId, seen: &Observed<'_>) -> Onchain {
    match check_payment(want, seen) {
        Verdict::Paid { block_number, .. } => match executes(want, id, seen.receipt) {
            Ok(log_index) => Onchain::Credit {
                tx_hash: seen.tx_hash.to_owned(),
                log_index,
                block_number,
            },
            Err(why) => Onchain::NotThisPayment(why),
        },
        Verdict::Pending {
            confirmations,
            needed,
        } => match executes(want, id, seen.receipt) {
            Ok(_) => Onchain::Confirming {
                confirmations,
                needed,
            },
            Err(why) => Onchain::NotThisPayment(why),
        },
        Verdict::NotFound => Onchain::NotFound,
        Verdict::Refused(why) => Onchain::NotThisPayment(format!("{why:?}")),
        Verdict::ProviderFault(why) => Onchain::ProviderFault(why),
    }
}

/// The `logIndex` of the payer's `Transfer` of the amount to the treasury,
/// when the receipt also holds the authorization's `AuthorizationUsed`.
/// (`check_payment` found a transfer of the amount to the treasury; this
/// one must also come from the payer.)
fn executes(want: &Expected, id: &PaymentId, receipt: &Json) -> Result<u64, String> {
    let logs = receipt.get("logs").and_then(Json::as_array).unwrap_or(&[]);
    let live = |log: &&Json| {
        same(field(log, "address"), want.usdc.as_str())
            && !matches!(log.get("removed"), Some(Json::Bool(true)))
    };
    let from_payer = logs.iter().filter(live).find_map(|log| {
        let topics = log.get("topics").and_then(Json::as_array)?;
        let is_it = topics.len() == 3
            && same(topics[0].as_str(), TRANSFER_TOPIC)
            && same(topics[1].as_str(), &id.from.as_topic())
            && same(topics[2].as_str(), &want.treasury.as_topic())
            && field(log, "data").and_then(word_u128) == Some(u128::from(want.amount.0));
        is_it.then(|| field(log, "logIndex").and_then(quantity))?
    });
    let log_index = from_payer.ok_or("no Transfer of the amount from the payer")?;
    if !logs.iter().any(|l| is_authorization_used(l, id)) {
        return Err("no AuthorizationUsed for this payer and nonce".into());
    }
    Ok(log_index)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core::json;
    use crate::core::upgrade::amount::Usdc;
    use crate::core::upgrade::config::test_config;
    use crate::core::upgrade::evm::Address;
    use crate::core::upgrade::x402::wire::{read_payment, tests::case, Version};
    use sha3::{Digest, Keccak256};

    fn keccak_hex(s: &str) -> String {
        format!("0x{}", hex::encode(Keccak256::digest(s.as_bytes())))
    }

    /// The Base vector's payment id (anvil account 1 paying anvil account 2).
    fn id() -> PaymentId {
        let header = case(8453)["v2"]["payment_signature_header"]
            .as_str()
            .unwrap()
            .to_owned();
        read_payment(Version::V2, &header, &test_config())
            .unwrap()
            .id
    }

    #[test]
    fn topic_and_selector_are_the_keccak_of_their_signatures() {
        assert_eq!(
            keccak_hex("AuthorizationUsed(address,bytes32)"),
            AUTHORIZATION_USED_TOPIC
        );
        assert_eq!(
            &keccak_hex("authorizationState(address,bytes32)")[..10],
            AUTHORIZATION_STATE_SELECTOR
        );
    }

    #[test]
    fn the_encodings_are_viems() {
        // viem 2.57.20: encodeFunctionData / encodeEventTopics for the same
        // authorizer and nonce.
        let call = authorization_state_call(&id());
        assert_eq!(
            call.as_array().unwrap()[0].get("data").and_then(Json::as_str),
            Some("0xe94a010200000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c81f262d343b424950575e656c737a81888f969da4abb2b9c0c7ced5dce3eaf1f8")
        );
        assert_eq!(
            call.as_array().unwrap()[0].get("to").and_then(Json::as_str),
            Some("0x833589fcd6edb6e08f4c7c32d4f71b54bda02913")
        );
        let filter = authorization_used_filter(&id(), 0x1234);
        let f = &filter.as_array().unwrap()[0];
        let topics: Vec<&str> = f
            .get("topics")
            .and_then(Json::as_array)
            .unwrap()
            .iter()
            .filter_map(Json::as_str)
            .collect();
        assert_eq!(
            topics,
            [
                "0x98de503528ee59b575ef0c0a2576a82497bfc029a5685b209e9ec333479b10a5",
                "0x00000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c8",
                "0x1f262d343b424950575e656c737a81888f969da4abb2b9c0c7ced5dce3eaf1f8"
            ]
        );
        assert_eq!(f.get("fromBlock").and_then(Json::as_str), Some("0x1234"));
    }

    #[test]
    fn authorization_state_answers() {
        let word = |n: u8| Json::from(format!("0x{:064x}", n));
        assert_eq!(read_authorization_state(&word(0)), Some(false));
        assert_eq!(read_authorization_state(&word(1)), Some(true));
        assert_eq!(read_authorization_state(&word(2)), None);
        assert_eq!(read_authorization_state(&Json::from("0x")), None);
        assert_eq!(read_authorization_state(&Json::Null), None);
    }

    /// The recorded anvil receipt of a plain `transfer` of 5.004217 USDC
    /// from anvil account 1 to the treasury (tests/fixtures/receipts).
    pub(crate) fn recorded() -> json::Json {
        json::parse(include_bytes!(
            "../../../../tests/fixtures/receipts/good_transfer.json"
        ))
        .unwrap()
    }

    /// The same receipt as `transferWithAuthorization` leaves it: EIP-3009
    /// tokens emit `AuthorizationUsed` before the `Transfer`.
    pub(crate) fn with_authorization_used(rpc: json::Json, id: &PaymentId) -> json::Json {
        let mut v = serde_json::to_value(&rpc).unwrap();
        let tx = v["receipt"]["transactionHash"].clone();
        let log = serde_json::json!({
            "address": id.asset.as_str(),
            "topics": [AUTHORIZATION_USED_TOPIC, id.from.as_topic(), id.nonce.as_str()],
            "data": "0x",
            "transactionHash": tx,
            "logIndex": "0x1",
            "removed": false,
        });
        v["receipt"]["logs"].as_array_mut().unwrap().push(log);
        json::parse(v.to_string().as_bytes()).unwrap()
    }

    pub(crate) fn expected(min_confirmations: u64) -> Expected {
        let cfg = test_config();
        Expected {
            chain_id: 8453,
            usdc: cfg.usdc,
            treasury: cfg.treasury,
            amount: Usdc(5_004_217),
            not_before_sec: 1_767_225_000,
            not_after_sec: 1_767_226_000,
            min_confirmations,
        }
    }

    pub(crate) fn check(rpc: &Json, id: &PaymentId, min: u64) -> Onchain {
        let tx = rpc
            .get("receipt")
            .and_then(|r| r.get("transactionHash"))
            .and_then(Json::as_str)
            .unwrap();
        check_settlement(
            &expected(min),
            id,
            &Observed {
                tx_hash: tx,
                chain_id: rpc.get("eth_chainId").unwrap(),
                receipt: rpc.get("receipt").unwrap(),
                block: rpc.get("block"),
                head_number: rpc.get("block_number").unwrap(),
            },
        )
    }

    #[test]
    fn a_receipt_credits_only_with_the_payers_transfer_and_the_authorizations_log() {
        let rpc = recorded().get("rpc").cloned().unwrap();
        let id = id();
        // A plain transfer of the right amount is not this authorization.
        assert!(matches!(check(&rpc, &id, 1), Onchain::NotThisPayment(_)));
        let settled = with_authorization_used(rpc.clone(), &id);
        assert_eq!(
            check(&settled, &id, 1),
            Onchain::Credit {
                tx_hash: "0x5cb00a26287e65b400653eeb2480091011265ceed0987f64c39c881cb438dbb4"
                    .into(),
                log_index: 0,
                block_number: 7
            }
        );
        // Mined at 7, head 12: six confirmations.
        assert_eq!(
            check(&settled, &id, 7),
            Onchain::Confirming {
                confirmations: 6,
                needed: 7
            }
        );
        // Another payer's nonce (the same nonce, another authorizer): no.
        let mut other = id.clone();
        other.from = Address::parse("0x90f79bf6eb2c4f870365e785982e1f101e93b906").unwrap();
        let theirs = with_authorization_used(rpc.clone(), &other);
        assert!(
            matches!(check(&theirs, &other, 1), Onchain::NotThisPayment(_)),
            "the Transfer is from account 1"
        );
        assert!(
            matches!(check(&theirs, &id, 1), Onchain::NotThisPayment(_)),
            "the log is for account 3"
        );
        // The logs lead to the transaction.
        let logs = settled
            .get("receipt")
            .and_then(|r| r.get("logs"))
            .cloned()
            .unwrap();
        assert_eq!(
            tx_of_authorization(&logs, &id),
            Ok(Some(
                "0x5cb00a26287e65b400653eeb2480091011265ceed0987f64c39c881cb438dbb4".into()
            ))
        );
        assert_eq!(tx_of_authorization(&logs, &other), Ok(None));
        assert!(tx_of_authorization(&Json::Null, &id).is_err());
        // No receipt: not found.
        let mut gone = settled.clone();
        if let Json::Object(m) = &mut gone {
            m.retain(|(k, _)| k != "receipt");
            m.push(("receipt".into(), Json::Null));
        }
        let tx = "0x5cb00a26287e65b400653eeb2480091011265ceed0987f64c39c881cb438dbb4";
        let seen = Observed {
            tx_hash: tx,
            chain_id: gone.get("eth_chainId").unwrap(),
            receipt: gone.get("receipt").unwrap(),
            block: None,
            head_number: gone.get("block_number").unwrap(),
        };
        assert_eq!(
            check_settlement(&expected(1), &id, &seen),
            Onchain::NotFound
        );
    }
}
