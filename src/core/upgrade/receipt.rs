//! Deciding, from what a JSON-RPC endpoint answered, whether a transaction
//! paid an invoice. Everything the endpoint says is untrusted input: every
//! field is checked for shape, the answers are checked against each other
//! (the receipt is for the asked hash, the block is the receipt's block),
//! and anything that does not add up is a provider fault (503, nothing
//! credited, the claim can be retried) rather than a verdict about the
//! payment.

use super::amount::Usdc;
use super::evm::{quantity, word_u128, Address, TRANSFER_TOPIC};
use crate::core::json::Json;

/// What the invoice requires of a payment.
#[derive(Debug, Clone)]
pub struct Expected {
    /// The invoice's chain.
    pub chain_id: u64,
    /// The invoice's USDC contract: only its logs count.
    pub usdc: Address,
    /// The invoice's treasury: the transfer's `to`.
    pub treasury: Address,
    /// The invoice's exact amount.
    pub amount: Usdc,
    /// The quote time (Unix seconds, rounded down): the payment's block
    /// must not be older.
    pub not_before_sec: u64,
    /// The invoice's expiry (Unix seconds): the block must not be newer.
    pub not_after_sec: u64,
    /// Confirmations needed (the payment's block counts as one).
    pub min_confirmations: u64,
}

/// The endpoint's answers, raw.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The transaction hash that was asked about (normalised).
    pub tx_hash: &'a str,
    /// `eth_chainId`.
    pub chain_id: &'a Json,
    /// `eth_getTransactionReceipt` (`null` when the node knows no such mined tx).
    pub receipt: &'a Json,
    /// `eth_getBlockByNumber(receipt.blockNumber, false)`, once there is a
    /// receipt; `None` when not fetched.
    pub block: Option<&'a Json>,
    /// `eth_blockNumber`.
    pub head_number: &'a Json,
}

/// Why a mined transaction does not pay the invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unpaid {
    /// `status` 0x0: the transfer reverted.
    Reverted,
    /// No ERC-20 `Transfer` log at all.
    NoTransfer,
    /// Transfers to the treasury of the right amount, but from another contract.
    WrongToken,
    /// A USDC transfer of the right amount, to someone else.
    WrongRecipient,
    /// A USDC transfer to the treasury of less than the invoice.
    Underpaid {
        /// What was sent.
        paid: u128,
    },
    /// A USDC transfer to the treasury of more than the invoice (never
    /// credited: the exact amount is what names the invoice).
    Overpaid {
        /// What was sent.
        paid: u128,
    },
    /// Mined before the invoice was quoted.
    BeforeQuote,
    /// Mined after the invoice expired.
    AfterExpiry,
}

/// The decision about one claim's payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Paid, confirmed and in time: credit it (once, keyed by this log).
    Paid {
        /// The matching log's `logIndex` (with chain id and tx hash, the
        /// payment's global identity).
        log_index: u64,
        /// The block it was mined in.
        block_number: u64,
    },
    /// Paid but not yet confirmed enough.
    Pending {
        /// Confirmations so far.
        confirmations: u64,
        /// Confirmations needed.
        needed: u64,
    },
    /// The node knows no mined transaction with this hash (yet).
    NotFound,
    /// Mined, but it does not pay this invoice.
    Refused(Unpaid),
    /// The endpoint's answers are malformed, inconsistent or for another
    /// chain: decide nothing.
    ProviderFault(String),
}

fn text<'a>(v: &'a Json, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Json::as_str)
}

/// Decides a claim's payment.
pub fn check_payment(want: &Expected, seen: &Observed<'_>) -> Verdict {
    let fault = |why: String| Verdict::ProviderFault(why);
    match seen.chain_id.as_str().and_then(quantity) {
        Some(id) if id == want.chain_id => {}
        Some(id) => {
            return fault(format!(
                "the RPC endpoint is on chain {id}, the service takes payments on {}",
                want.chain_id
            ))
        }
        None => return fault("eth_chainId answer is not a quantity".into()),
    }
    let r = seen.receipt;
    if matches!(r, Json::Null) {
        return Verdict::NotFound;
    }
    if r.as_object().is_none() {
        return fault("receipt is not an object".into());
    }
    match text(r, "transactionHash") {
        Some(h) if h.eq_ignore_ascii_case(seen.tx_hash) => {}
        _ => return fault("the receipt is not for the transaction asked about".into()),
    }
    let Some(block_number) = text(r, "blockNumber").and_then(quantity) else {
        return fault("receipt.blockNumber is not a quantity".into());
    };
    match text(r, "status") {
        Some("0x1") => {}
        Some("0x0") => return Verdict::Refused(Unpaid::Reverted),
        _ => return fault("receipt.status is neither 0x1 nor 0x0".into()),
    }
    let Some(logs) = r.get("logs").and_then(Json::as_array) else {
        return fault("receipt.logs is not an array".into());
    };
    let log_index = match match_transfer(want, logs) {
        Ok(i) => i,
        Err(verdict) => return verdict,
    };
    let Some(head) = seen.head_number.as_str().and_then(quantity) else {
        return fault("eth_blockNumber answer is not a quantity".into());
    };
    if head < block_number {
        return fault("the head block is older than the receipt's block".into());
    }
    let Some(block) = seen.block else {
        return fault("the receipt's block was not fetched".into());
    };
    if text(block, "number").and_then(quantity) != Some(block_number)
        || text(block, "hash").map(str::to_ascii_lowercase)
            != text(r, "blockHash").map(str::to_ascii_lowercase)
    {
        return fault("the block does not match the receipt".into());
    }
    let Some(mined_sec) = text(block, "timestamp").and_then(quantity) else {
        return fault("block.timestamp is not a quantity".into());
    };
    if mined_sec < want.not_before_sec {
        return Verdict::Refused(Unpaid::BeforeQuote);
    }
    if mined_sec > want.not_after_sec {
        return Verdict::Refused(Unpaid::AfterExpiry);
    }
    let confirmations = head - block_number + 1;
    if confirmations < want.min_confirmations {
        return Verdict::Pending {
            confirmations,
            needed: want.min_confirmations,
        };
    }
    Verdict::Paid {
        log_index,
        block_number,
    }
}

/// One decoded `Transfer` log.
struct Transfer<'a> {
    contract: &'a str,
    to: &'a str,
    value: u128,
    log_index: u64,
}

/// The `logIndex` of the log that pays the invoice exactly; otherwise the
/// most telling refusal (or a fault for malformed logs).
fn match_transfer(want: &Expected, logs: &[Json]) -> Result<u64, Verdict> {
    let mut transfers = Vec::new();
    for log in logs {
        let Some(topics) = log.get("topics").and_then(Json::as_array) else {
            return Err(Verdict::ProviderFault("a log has no topics array".into()));
        };
        let topic = |i: usize| topics.get(i).and_then(Json::as_str);
        // Standard ERC-20 Transfer: 3 topics (sig, from, to), value in data.
        if topics.len() != 3 || !topic(0).is_some_and(|t| t.eq_ignore_ascii_case(TRANSFER_TOPIC)) {
            continue;
        }
        if matches!(log.get("removed"), Some(Json::Bool(true))) {
            continue;
        }
        let (Some(contract), Some(to), Some(value), Some(log_index)) = (
            text(log, "address"),
            topic(2),
            text(log, "data").and_then(word_u128),
            text(log, "logIndex").and_then(quantity),
        ) else {
            return Err(Verdict::ProviderFault("a Transfer log is malformed".into()));
        };
        transfers.push(Transfer {
            contract,
            to,
            value,
            log_index,
        });
    }
    let is = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    let usdc = |t: &&Transfer| is(t.contract, want.usdc.as_str());
    let to_treasury = |t: &&Transfer| is(t.to, &want.treasury.as_topic());
    let exact = |t: &&Transfer| t.value == u128::from(want.amount.0);
    if let Some(t) = transfers
        .iter()
        .find(|t| usdc(t) && to_treasury(t) && exact(t))
    {
        return Ok(t.log_index);
    }
    let refusal = if let Some(t) = transfers.iter().find(|t| usdc(t) && to_treasury(t)) {
        if t.value < u128::from(want.amount.0) {
            Unpaid::Underpaid { paid: t.value }
        } else {
            Unpaid::Overpaid { paid: t.value }
        }
    } else if transfers.iter().any(|t| usdc(&t)) {
        Unpaid::WrongRecipient
    } else if !transfers.is_empty() {
        Unpaid::WrongToken
    } else {
        Unpaid::NoTransfer
    };
    Err(Verdict::Refused(refusal))
}
