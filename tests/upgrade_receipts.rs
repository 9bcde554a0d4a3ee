//! The payment checker against receipts recorded from a real anvil node
//! (`tests/fixtures/receipts/`, made by `tests/fixtures/record-receipts.mjs`:
//! a Solidity ERC-20 compiled with solc, real transfers, the node's own
//! JSON-RPC answers). What each case should conclude comes from what was
//! done on-chain (its `facts`) and the rules of docs/PROTOCOL.md §10, never from the checker.

use self_capsule::core::json::{parse_str, Json};
use self_capsule::core::upgrade::amount::Usdc;
use self_capsule::core::upgrade::evm::{quantity, Address};
use self_capsule::core::upgrade::receipt::{check_payment, Expected, Observed, Unpaid, Verdict};
use std::path::PathBuf;

struct Case {
    rpc: Json,
    facts: Json,
}

fn case(name: &str) -> Case {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/receipts")
        .join(format!("{name}.json"));
    let v = parse_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    Case {
        rpc: v.get("rpc").unwrap().clone(),
        facts: v.get("facts").unwrap().clone(),
    }
}

fn fact<'a>(c: &'a Case, k: &str) -> &'a str {
    c.facts
        .get(k)
        .and_then(Json::as_str)
        .unwrap_or_else(|| panic!("facts.{k}"))
}

/// The block's time, for quote windows around it.
fn mined_sec(c: &Case) -> u64 {
    quantity(
        c.rpc
            .get("block")
            .unwrap()
            .get("timestamp")
            .unwrap()
            .as_str()
            .unwrap(),
    )
    .unwrap()
}

/// What an invoice for the good payment requires: the configured Base USDC,
/// the treasury the payer paid, 5.004217, quoted a minute before the block.
struct Want {
    usdc: Address,
    treasury: Address,
    amount: u64,
    not_before: u64,
    not_after: u64,
    confirmations: u64,
}

fn want_for(c: &Case) -> Want {
    let good = case("good_transfer");
    Want {
        usdc: Address::parse(fact(&good, "usdc")).unwrap(),
        treasury: Address::parse(fact(&good, "treasury")).unwrap(),
        amount: fact(&good, "amount_atomic").parse().unwrap(),
        not_before: mined_sec(c) - 60,
        not_after: mined_sec(c) + 3600,
        confirmations: 5,
    }
}

fn check(c: &Case, w: &Want, tweak: impl FnOnce(&mut Json)) -> Verdict {
    let mut rpc = c.rpc.clone();
    tweak(&mut rpc);
    let tx = fact(c, "tx_hash").to_owned();
    let expected = Expected {
        chain_id: 8453,
        usdc: w.usdc.clone(),
        treasury: w.treasury.clone(),
        amount: Usdc(w.amount),
        not_before_sec: w.not_before,
        not_after_sec: w.not_after,
        min_confirmations: w.confirmations,
    };
    let seen = Observed {
        tx_hash: &tx,
        chain_id: rpc.get("eth_chainId").unwrap(),
        receipt: rpc.get("receipt").unwrap(),
        block: rpc.get("block"),
        head_number: rpc.get("block_number").unwrap(),
    };
    check_payment(&expected, &seen)
}

fn verdict(name: &str) -> Verdict {
    let c = case(name);
    let w = want_for(&c);
    check(&c, &w, |_| {})
}

fn set(v: &mut Json, path: &[&str], value: Json) {
    let mut at = v;
    for k in &path[..path.len() - 1] {
        let Json::Object(m) = at else { panic!() };
        at = &mut m.iter_mut().find(|(n, _)| n == k).unwrap().1;
    }
    let Json::Object(m) = at else { panic!() };
    m.iter_mut()
        .find(|(n, _)| n == path[path.len() - 1])
        .unwrap()
        .1 = value;
}

#[test]
fn the_exact_payment_credits_its_transfer_log() {
    let c = case("good_transfer");
    let log = c
        .facts
        .get("log_index_of_transfer")
        .unwrap()
        .as_safe_u64()
        .unwrap();
    match verdict("good_transfer") {
        Verdict::Paid { log_index, .. } => assert_eq!(log_index, log),
        other => panic!("{other:?}"),
    }
    // In a transaction with two transfers, the one to the treasury counts.
    let c = case("two_transfers_in_one_tx");
    let log = c
        .facts
        .get("log_index_of_transfer")
        .unwrap()
        .as_safe_u64()
        .unwrap();
    assert!(
        matches!(verdict("two_transfers_in_one_tx"), Verdict::Paid { log_index, .. } if log_index == log)
    );
}

#[test]
fn payments_that_do_not_pay_the_invoice_are_refused_with_the_reason() {
    let paid = |name: &str| -> u128 { fact(&case(name), "amount_atomic").parse().unwrap() };
    assert_eq!(
        verdict("wrong_amount"),
        Verdict::Refused(Unpaid::Underpaid {
            paid: paid("wrong_amount")
        })
    );
    assert_eq!(verdict("wrong_token"), Verdict::Refused(Unpaid::WrongToken));
    assert_eq!(
        verdict("wrong_recipient"),
        Verdict::Refused(Unpaid::WrongRecipient)
    );
    assert_eq!(verdict("reverted"), Verdict::Refused(Unpaid::Reverted));
    assert_eq!(
        verdict("non_transfer_tx"),
        Verdict::Refused(Unpaid::NoTransfer)
    );
    // Paying in two parts is not the invoice's amount in any one transfer.
    assert!(matches!(
        verdict("split_transfer_in_one_tx"),
        Verdict::Refused(Unpaid::Underpaid { .. })
    ));
    // A bigger payment is not the invoice's either (the exact amount is what
    // names an invoice): ask for less than was sent.
    let c = case("good_transfer");
    let mut w = want_for(&c);
    w.amount -= 1;
    assert!(matches!(
        check(&c, &w, |_| {}),
        Verdict::Refused(Unpaid::Overpaid { .. })
    ));
}

#[test]
fn an_rpc_on_another_chain_decides_nothing() {
    assert!(matches!(
        verdict("other_chain_id"),
        Verdict::ProviderFault(_)
    ));
}

#[test]
fn confirmations_and_the_invoice_window() {
    let c = case("good_transfer");
    let after = c
        .facts
        .get("blocks_mined_after")
        .unwrap()
        .as_safe_u64()
        .unwrap();
    let mut w = want_for(&c);
    w.confirmations = after + 2;
    assert_eq!(
        check(&c, &w, |_| {}),
        Verdict::Pending {
            confirmations: after + 1,
            needed: after + 2
        }
    );
    w.confirmations = after + 1;
    assert!(matches!(check(&c, &w, |_| {}), Verdict::Paid { .. }));
    let mut w = want_for(&c);
    w.not_before = mined_sec(&c) + 1;
    assert_eq!(check(&c, &w, |_| {}), Verdict::Refused(Unpaid::BeforeQuote));
    let mut w = want_for(&c);
    w.not_after = mined_sec(&c) - 1;
    assert_eq!(check(&c, &w, |_| {}), Verdict::Refused(Unpaid::AfterExpiry));
}

/// A change to the recorded RPC answers.
type Tweak = Box<dyn FnOnce(&mut Json)>;

#[test]
fn a_lying_or_broken_provider_is_a_fault_not_a_verdict() {
    let c = case("good_transfer");
    let w = want_for(&c);
    let other_hash = Json::from(format!("0x{}", "11".repeat(32)));
    let faults: Vec<(&str, Tweak)> = vec![
        (
            "receipt for another tx",
            Box::new(move |r: &mut Json| set(r, &["receipt", "transactionHash"], other_hash)),
        ),
        (
            "block is another block",
            Box::new(|r: &mut Json| {
                set(
                    r,
                    &["block", "hash"],
                    Json::from(format!("0x{}", "22".repeat(32))),
                )
            }),
        ),
        (
            "head behind the receipt",
            Box::new(|r: &mut Json| set(r, &["block_number"], Json::from("0x1"))),
        ),
        (
            "status is garbage",
            Box::new(|r: &mut Json| set(r, &["receipt", "status"], Json::from("0x2"))),
        ),
        (
            "chain id not hex",
            Box::new(|r: &mut Json| set(r, &["eth_chainId"], Json::from(8453u64))),
        ),
        (
            "logs not an array",
            Box::new(|r: &mut Json| set(r, &["receipt", "logs"], Json::Null)),
        ),
        (
            "receipt not an object",
            Box::new(|r: &mut Json| set(r, &["receipt"], Json::from("ok"))),
        ),
    ];
    for (what, tweak) in faults {
        assert!(
            matches!(check(&c, &w, tweak), Verdict::ProviderFault(_)),
            "{what}"
        );
    }
    // No receipt: the node knows no mined transaction with that hash.
    assert_eq!(
        check(&c, &w, |r| set(r, &["receipt"], Json::Null)),
        Verdict::NotFound
    );
}
