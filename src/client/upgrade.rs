//! The paid upgrade, client side (docs/PROTOCOL.md §10): quote an invoice,
//! pay it with an ERC-20 `transfer` signed here and sent over JSON-RPC, wait
//! for the confirmations, then claim it with the identity's Ed25519 key.
//!
//! The one rule is **never pay twice**. Every step is recorded in the state
//! directory before the next one can move money:
//!
//! ```text
//! upgrade.json           the current purchase, rewritten atomically at each step:
//!   invoice              the quote body as served (written before anything is paid)
//!   payment              {tx_hash, raw_tx, from, nonce, signed_at}: the signed
//!                        transaction, written before it is broadcast
//!   abandoned            earlier transactions of this invoice that paid nothing
//!                        (reverted, or provably never mined)
//!   claim_seq            the seq the claim signs (so a resent claim is identical)
//!   claimed              the service's answer once credited
//!   failed               {status, code, detail} when the claim was refused for good
//! upgrades/<invoice_id>.json   earlier purchases, moved aside when a new one starts
//! ```
//!
//! A re-run reads `upgrade.json` first ([`decide`]): a recorded transaction
//! is finished (re-broadcast byte for byte if the chain does not know it,
//! waited for, claimed), never replaced; a credited purchase is a no-op that
//! answers the stored result; an open invoice with nothing signed is paid; a
//! new invoice is quoted only when none is pending.
//!
//! Everything that needs no network is a pure function, unit-tested below:
//! [`decide`], [`check_quote`], [`transfer_calldata`], [`fees`],
//! [`sign_tx`], [`tier_view`]. JSON-RPC goes over the client's own
//! [`Transport`](super::http::Transport) (no provider library, no async
//! runtime); the key file is read once, never printed, and zeroed after use.

use super::exchange::unavailable;
use super::http::{Request, Response};
use super::state::{parse_json_file, write_atomic, StateDir};
use super::wire::{Head, Rejected};
use super::{backoff, Client, Error};
use crate::core::crypto::{AgentId, AgentKey};
use crate::core::jcs;
use crate::core::limits::Tier;
use crate::core::reason::{Class, ReasonCode};
use crate::core::time::rfc3339;
use crate::core::upgrade::amount::Usdc;
use crate::core::upgrade::claim::{is_invoice_id, sign_claim};
use crate::core::upgrade::config::canonical_usdc;
use crate::core::upgrade::evm::{self, parse_tx_hash, quantity, word_u128};
use crate::core::upgrade::quote::issued_to;
use crate::core::urls::{CLAIM_PATH, QUOTE_PATH};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use zeroize::Zeroizing;

/// The current purchase, in the state directory.
pub const UPGRADE_FILE: &str = "upgrade.json";
/// Where finished or expired purchases are moved when a new one starts.
pub const ARCHIVE_DIR: &str = "upgrades";
/// An invoice this close to `expires_at` is not paid any more (the payment
/// must be mined before it): a new one is quoted instead.
pub const PAY_MARGIN_MS: u64 = 2 * 60 * 1000;
/// Gas limit over the node's estimate, in percent.
pub const GAS_HEADROOM_PERCENT: u64 = 20;
/// The priority fee when the node suggests none (1 gwei).
pub const FALLBACK_PRIORITY_FEE: u128 = 1_000_000_000;
/// `transfer(address,uint256)`.
pub const TRANSFER_SELECTOR: [u8; 4] = [0xa9, 0x05, 0x9c, 0xbb];
/// `balanceOf(address)`.
pub const BALANCE_OF_SELECTOR: [u8; 4] = [0x70, 0xa0, 0x82, 0x31];

// ---------------------------------------------------------------------------
// The record

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
    pub tx_hash: String,
    /// `reverted` or `dropped` (its nonce was used by another transaction).
    pub why: String,
}

/// A claim refused for good (class `request`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub status: u16,
    pub code: String,
    #[serde(default)]
    pub detail: String,
}

impl Record {
    fn new(invoice: Value) -> Record {
        Record {
            invoice,
            payment: None,
            abandoned: Vec::new(),
            claim_seq: None,
            claimed: None,
            failed: None,
        }
    }

    fn invoice_str(&self, k: &str) -> &str {
        self.invoice.get(k).and_then(Value::as_str).unwrap_or("")
    }

    /// The invoice id (empty if the file was edited into nonsense).
    pub fn invoice_id(&self) -> &str {
        self.invoice_str("invoice_id")
    }
}

/// What a run does, given what is recorded ([`decide`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
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
pub fn decide(record: Option<&Record>, plan: Tier, now_ms: u64, new: bool) -> Result<Next, Error> {
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
    if r.payment.is_some() {
        return Ok(Next::Resume);
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

// ---------------------------------------------------------------------------
// The quote, checked

/// A quote body, checked against what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invoice {
    pub invoice_id: String,
    pub plan: Tier,
    pub days: u64,
    pub amount: Usdc,
    pub chain: String,
    pub chain_id: u64,
    pub token: evm::Address,
    pub to: evm::Address,
    pub expires_at: String,
    pub expires_at_ms: u64,
    pub min_confirmations: u64,
}

/// Reads a quote body and checks it is an invoice for `agent` and `plan`
/// that can be paid as the protocol says (exact amount, known USDC on a
/// known chain). Anything else is the service's fault: nothing is paid.
pub fn check_quote(body: &Value, agent: &AgentId, plan: Tier) -> Result<Invoice, Error> {
    let bad = |why: String| Error::Protocol(format!("quote answer: {why}"));
    let text = |k: &str| {
        body.get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("{k} is missing or not a string")))
    };
    let number = |k: &str| {
        body.get(k)
            .and_then(Value::as_u64)
            .ok_or_else(|| bad(format!("{k} is missing or not an integer")))
    };
    let invoice_id = text("invoice_id")?;
    if !is_invoice_id(invoice_id) || !issued_to(invoice_id, agent) {
        return Err(bad(format!(
            "invoice_id {invoice_id:?} was not issued to this agent"
        )));
    }
    if text("agent_id")? != agent.as_str() {
        return Err(bad("the invoice is for another agent".into()));
    }
    if text("plan")? != plan.as_str() {
        return Err(bad(format!(
            "plan {:?}, asked {}",
            text("plan")?,
            plan.as_str()
        )));
    }
    if text("asset")? != "USDC" {
        return Err(bad(format!("asset {:?}, not USDC", text("asset")?)));
    }
    let atomic: u64 = text("amount_atomic")?
        .parse()
        .map_err(|_| bad("amount_atomic is not a decimal integer".into()))?;
    let amount = Usdc(atomic);
    if atomic == 0 || Usdc::parse(text("amount")?) != Some(amount) {
        return Err(bad(format!(
            "amount {:?} does not match amount_atomic {atomic}",
            text("amount")?
        )));
    }
    let chain_id = number("chain_id")?;
    let token = evm::Address::parse(text("token_contract")?)
        .ok_or_else(|| bad("token_contract is not an address".into()))?;
    if let Some(usdc) = canonical_usdc(chain_id) {
        if usdc != token {
            return Err(bad(format!(
                "token_contract {token} is not USDC on chain {chain_id} ({usdc})"
            )));
        }
    }
    let to = evm::Address::parse(text("to_address")?)
        .filter(|a| a.as_str() != format!("0x{}", "0".repeat(40)))
        .ok_or_else(|| bad("to_address is not a usable address".into()))?;
    let expires_at = text("expires_at")?;
    let expires_at_ms =
        parse_rfc3339(expires_at).ok_or_else(|| bad("expires_at is not RFC 3339".into()))?;
    Ok(Invoice {
        invoice_id: invoice_id.to_owned(),
        plan,
        days: number("days")?,
        amount,
        chain: text("chain")?.to_owned(),
        chain_id,
        token,
        to,
        expires_at: expires_at.to_owned(),
        expires_at_ms,
        min_confirmations: number("min_confirmations")?.max(1),
    })
}

// ---------------------------------------------------------------------------
// The payer's key, the transfer, the fees, the signed transaction

/// A secp256k1 key from `--evm-key FILE`. Never printed (`Debug` shows the
/// address only); zeroed on drop.
pub struct PayerKey(k256::ecdsa::SigningKey);

impl std::fmt::Debug for PayerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PayerKey({})", self.address())
    }
}

impl PayerKey {
    /// Reads the key file: 64 hex characters (`0x` optional, surrounding
    /// whitespace ignored). Refuses a file others can read, like the
    /// identity's own key. Errors never quote the file's content.
    pub fn load(path: &Path) -> Result<PayerKey, Error> {
        let bad = |why: &str| Error::local(format!("bad EVM key file {}: {why}", path.display()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = fs::metadata(path).map_err(|e| {
                Error::local(format!("cannot read EVM key file {}: {e}", path.display()))
            })?;
            let mode = meta.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(Error::local(format!(
                    "EVM key file {} is accessible by others (mode {:04o}): run `chmod 600 {}`",
                    path.display(),
                    mode & 0o7777,
                    path.display()
                )));
            }
        }
        let bytes = Zeroizing::new(fs::read(path).map_err(|e| {
            Error::local(format!("cannot read EVM key file {}: {e}", path.display()))
        })?);
        let text = std::str::from_utf8(&bytes).map_err(|_| bad("not text"))?;
        PayerKey::parse(text)
            .ok_or_else(|| bad("expected a secp256k1 private key: 64 hex characters, 0x optional"))
    }

    /// Parses the key text (see [`PayerKey::load`]).
    pub fn parse(text: &str) -> Option<PayerKey> {
        let t = text.trim();
        let hex_key = t.strip_prefix("0x").unwrap_or(t);
        let mut raw = Zeroizing::new([0u8; 32]);
        if hex_key.len() != 64 || hex::decode_to_slice(hex_key, &mut raw[..]).is_err() {
            return None;
        }
        k256::ecdsa::SigningKey::from_slice(&raw[..])
            .ok()
            .map(PayerKey)
    }

    /// The address that pays.
    pub fn address(&self) -> evm::Address {
        let a = alloy_primitives::Address::from_private_key(&self.0);
        evm::Address::parse(&format!("{a:#x}")).expect("alloy spells addresses as 0x + 40 hex")
    }

    fn sign_hash(
        &self,
        hash: &alloy_primitives::B256,
    ) -> Result<alloy_primitives::Signature, Error> {
        let (sig, recid) = self
            .0
            .sign_prehash_recoverable(hash.as_slice())
            .map_err(|e| Error::local(format!("cannot sign the transaction: {e}")))?;
        Ok(alloy_primitives::Signature::from((sig, recid)))
    }
}

/// The calldata of ERC-20 `transfer(to, amount)`: the selector, then the
/// address and the amount as 32-byte words.
pub fn transfer_calldata(to: &evm::Address, amount: u128) -> Vec<u8> {
    let mut data = TRANSFER_SELECTOR.to_vec();
    data.extend_from_slice(&address_word(to));
    data.extend_from_slice(&[0u8; 16]);
    data.extend_from_slice(&amount.to_be_bytes());
    data
}

fn address_word(a: &evm::Address) -> [u8; 32] {
    let mut w = [0u8; 32];
    hex::decode_to_slice(&a.as_str()[2..], &mut w[12..]).expect("an Address is 40 hex digits");
    w
}

/// How the transaction pays for gas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fees {
    /// EIP-1559 (type 2): the chain has a base fee.
    Eip1559 { max_fee: u128, priority_fee: u128 },
    /// Legacy (EIP-155 signed): the chain has no base fee.
    Legacy { gas_price: u128 },
}

/// The fees from the latest block's base fee (`None`: the chain has none),
/// the node's suggested priority fee and its gas price: EIP-1559 with
/// `max_fee = 2 * base + priority` (room for the base fee to double), else
/// legacy at the node's gas price.
pub fn fees(
    base_fee: Option<u128>,
    suggested_priority: Option<u128>,
    gas_price: Option<u128>,
) -> Result<Fees, String> {
    match base_fee {
        Some(base) => {
            let priority_fee = suggested_priority
                .or_else(|| gas_price.map(|g| g.saturating_sub(base)).filter(|p| *p > 0))
                .unwrap_or(FALLBACK_PRIORITY_FEE);
            Ok(Fees::Eip1559 {
                max_fee: base.saturating_mul(2).saturating_add(priority_fee),
                priority_fee,
            })
        }
        None => gas_price
            .map(|gas_price| Fees::Legacy { gas_price })
            .ok_or_else(|| "the chain has no base fee and the node gave no gas price".into()),
    }
}

/// The gas limit for a node's estimate: [`GAS_HEADROOM_PERCENT`] more.
pub fn gas_limit(estimate: u64) -> u64 {
    estimate.saturating_add(estimate.saturating_mul(GAS_HEADROOM_PERCENT) / 100)
}

/// An unsigned call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxParams {
    pub chain_id: u64,
    pub nonce: u64,
    pub gas_limit: u64,
    pub fees: Fees,
    pub to: evm::Address,
    /// Wei sent along (0 for a token transfer).
    pub value: u128,
    pub data: Vec<u8>,
}

/// A signed transaction: its EIP-2718 bytes and their hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedTx {
    pub raw: Vec<u8>,
    /// `0x` + 64 lowercase hex.
    pub hash: String,
}

/// Builds and signs `p` (alloy's transaction types and encoding).
pub fn sign_tx(p: &TxParams, key: &PayerKey) -> Result<SignedTx, Error> {
    use alloy_consensus::{SignableTransaction, TxEip1559, TxEnvelope, TxLegacy};
    use alloy_eips::eip2718::Encodable2718;
    use alloy_primitives::{Bytes, TxKind, U256};
    let to = TxKind::Call(alloy_primitives::Address::from_slice(
        &address_word(&p.to)[12..],
    ));
    let input = Bytes::from(p.data.clone());
    let value = U256::from(p.value);
    let envelope: TxEnvelope = match p.fees {
        Fees::Eip1559 {
            max_fee,
            priority_fee,
        } => {
            let tx = TxEip1559 {
                chain_id: p.chain_id,
                nonce: p.nonce,
                gas_limit: p.gas_limit,
                max_fee_per_gas: max_fee,
                max_priority_fee_per_gas: priority_fee,
                to,
                value,
                access_list: Default::default(),
                input,
            };
            let sig = key.sign_hash(&tx.signature_hash())?;
            tx.into_signed(sig).into()
        }
        Fees::Legacy { gas_price } => {
            let tx = TxLegacy {
                chain_id: Some(p.chain_id),
                nonce: p.nonce,
                gas_price,
                gas_limit: p.gas_limit,
                to,
                value,
                input,
            };
            let sig = key.sign_hash(&tx.signature_hash())?;
            tx.into_signed(sig).into()
        }
    };
    let raw = envelope.encoded_2718();
    let hash = format!("0x{}", hex::encode(alloy_primitives::keccak256(&raw)));
    Ok(SignedTx { raw, hash })
}

// ---------------------------------------------------------------------------
// The tier, for `status`

/// The tier as best known locally, for `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierView {
    /// `free`, `pro` or `plus`.
    pub tier: String,
    /// When the paid time ends (`None` on free).
    pub paid_until: Option<String>,
    /// When this was true (a head's `generated_at`, a claim's `credited_at`).
    pub as_of: String,
}

/// The tier from the last head.json seen, or from the last credited
/// purchase when that is newer (a head read before the claim, or none);
/// a plan whose `paid_until` has passed shows as `free`.
pub fn tier_view(head: Option<&Head>, record: Option<&Record>, now_ms: u64) -> Option<TierView> {
    let claimed = record.and_then(|r| r.claimed.as_ref()).and_then(|c| {
        let s = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
        Some((s("plan")?, s("paid_until")?, s("credited_at")?))
    });
    let (tier, paid_until, as_of) = match (head, claimed) {
        (Some(h), c) if c.as_ref().is_none_or(|(_, _, at)| h.generated_at >= *at) => (
            h.tier.as_str().to_owned(),
            h.paid_until.clone(),
            h.generated_at.clone(),
        ),
        (_, Some((plan, until, at))) => (plan, Some(until), at),
        (None, None) => return None,
        (Some(_), None) => unreachable!("matched by the first arm"),
    };
    let lapsed = paid_until
        .as_deref()
        .and_then(parse_rfc3339)
        .is_some_and(|until| until <= now_ms);
    Some(if lapsed || tier == "free" {
        TierView {
            tier: "free".into(),
            paid_until: None,
            as_of,
        }
    } else {
        TierView {
            tier,
            paid_until,
            as_of,
        }
    })
}

// ---------------------------------------------------------------------------
// Time

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Unix ms of `YYYY-MM-DDTHH:MM:SS[.fff]Z` (the service's form).
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 || !s.ends_with('Z') || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let frac = &s[19..s.len() - 1];
    let ms = match frac.strip_prefix('.') {
        None if frac.is_empty() => 0,
        Some(f) if !f.is_empty() && f.bytes().all(|c| c.is_ascii_digit()) => {
            format!("{:0<3}", &f[..f.len().min(3)]).parse().ok()?
        }
        _ => return None,
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    // Howard Hinnant's days-from-civil.
    let (y, m) = (y as i64 - i64::from(mo <= 2), mo as i64);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = u64::try_from(days).ok()? * 86_400 + h * 3600 + mi * 60 + sec;
    Some(secs * 1000 + ms)
}

// ---------------------------------------------------------------------------
// JSON-RPC

/// A JSON-RPC endpoint, spoken over the client's transport. The URL may
/// hold an API key, so messages name its origin only.
struct Rpc<'a> {
    client: &'a Client,
    url: String,
    shown: String,
}

/// A failed JSON-RPC call.
enum RpcError {
    /// The node answered with an `error` member.
    Node(String),
    /// No usable answer.
    Fail(Error),
}

impl From<Error> for RpcError {
    fn from(e: Error) -> Self {
        RpcError::Fail(e)
    }
}

impl RpcError {
    fn into_error(self, what: &str) -> Error {
        match self {
            RpcError::Node(m) => Error::Unavailable(format!("{what}: the node refused: {m}")),
            RpcError::Fail(e) => e,
        }
    }
}

/// `scheme://host[:port]` of a URL, for messages.
fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or(host);
    if scheme.is_empty() {
        host.to_owned()
    } else {
        format!("{scheme}://{host}")
    }
}

impl<'a> Rpc<'a> {
    fn new(client: &'a Client, url: &str) -> Rpc<'a> {
        Rpc {
            client,
            url: url.to_owned(),
            shown: origin(url),
        }
    }

    /// One call under the client's retry policy (network errors and 5xx).
    fn call(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let req = Request::json("POST", self.url.clone(), body.to_string().into_bytes());
        let resp = self.send(&req, method)?;
        if resp.status != 200 {
            return Err(RpcError::Fail(Error::Unavailable(format!(
                "JSON-RPC {} ({method}) answered HTTP {}",
                self.shown, resp.status
            ))));
        }
        let v: Value = serde_json::from_slice(&resp.body).map_err(|_| {
            Error::Unavailable(format!(
                "JSON-RPC {} ({method}) answered something that is not JSON",
                self.shown
            ))
        })?;
        if let Some(e) = v.get("error") {
            let msg = e
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| e.to_string(), str::to_owned);
            return Err(RpcError::Node(msg.chars().take(300).collect()));
        }
        v.get("result").cloned().ok_or_else(|| {
            RpcError::Fail(Error::Unavailable(format!(
                "JSON-RPC {} ({method}) answered no result",
                self.shown
            )))
        })
    }

    /// The retry loop of `Client::exchange`, without naming the URL.
    fn send(&self, req: &Request, method: &str) -> Result<Response, Error> {
        let c = self.client;
        let mut attempt = 1;
        loop {
            let sent = c.transport.send(req);
            let outcome = match &sent {
                Ok(r) => backoff::Outcome::Status {
                    status: r.status,
                    retry_after: r.retry_after(),
                },
                Err(_) => backoff::Outcome::Network,
            };
            match (c.policy.decide(attempt, outcome), sent) {
                (backoff::Decision::Retry(wait), _) => {
                    (c.sleeper)(wait);
                    attempt += 1;
                }
                (_, Ok(r)) => return Ok(r),
                (_, Err(e)) => {
                    return Err(Error::Unavailable(format!(
                        "JSON-RPC {} ({method}) unreachable: {e} ({attempt} attempt{})",
                        self.shown,
                        if attempt == 1 { "" } else { "s" }
                    )))
                }
            }
        }
    }

    /// A call that must answer a quantity.
    fn quantity(&self, method: &str, params: Value) -> Result<u128, Error> {
        let v = self
            .call(method, params)
            .map_err(|e| e.into_error(method))?;
        v.as_str().and_then(big_quantity).ok_or_else(|| {
            Error::Unavailable(format!(
                "JSON-RPC {} ({method}) answered {v}, not a quantity",
                self.shown
            ))
        })
    }

    fn chain_id(&self) -> Result<u64, Error> {
        let id = self.quantity("eth_chainId", json!([]))?;
        u64::try_from(id).map_err(|_| Error::Unavailable("eth_chainId is out of range".into()))
    }

    fn block_number(&self) -> Result<u64, Error> {
        let n = self.quantity("eth_blockNumber", json!([]))?;
        u64::try_from(n).map_err(|_| Error::Unavailable("eth_blockNumber is out of range".into()))
    }

    /// `None`: the chain does not know it (or it is not mined yet).
    fn lookup(&self, method: &str, hash: &str) -> Result<Option<Value>, Error> {
        let v = self
            .call(method, json!([hash]))
            .map_err(|e| e.into_error(method))?;
        Ok((!v.is_null()).then_some(v))
    }
}

/// A quantity (`0x` + hex) as a u128.
fn big_quantity(s: &str) -> Option<u128> {
    let h = s.strip_prefix("0x")?;
    if h.is_empty() || h.len() > 32 {
        return None;
    }
    u128::from_str_radix(h, 16).ok()
}

// ---------------------------------------------------------------------------
// The flow

/// Test-only: where `upgrade` stops as if the process had died (the CLI
/// honours `SELFCAP_TEST_STOP_AFTER` in debug builds only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopAfter {
    /// The transaction is signed and recorded, not broadcast.
    Sign,
    /// The transaction is broadcast, not waited for.
    Broadcast,
}

/// `selfcap upgrade`.
#[derive(Debug, Clone)]
pub struct UpgradeOptions {
    /// `pro` or `plus`.
    pub plan: Tier,
    /// The payer's secp256k1 key file.
    pub evm_key: std::path::PathBuf,
    /// The chain's JSON-RPC URL.
    pub rpc_url: String,
    /// How long to wait for the receipt, the confirmations and the claim.
    pub timeout: Duration,
    /// Between two polls of the chain.
    pub poll: Duration,
    /// Start a new purchase even though the last one finished.
    pub new: bool,
    /// Test only (see [`StopAfter`]).
    pub stop_after: Option<StopAfter>,
}

/// What `upgrade` ended with.
#[derive(Debug, Clone, PartialEq)]
pub struct UpgradeDone {
    /// The claim's 200 answer (stored, or just received).
    pub claimed: Value,
    /// False when it was credited on an earlier run and nothing was done now.
    pub fresh: bool,
}

impl Client {
    /// The recorded purchase, if any.
    pub fn upgrade_record(&self) -> Result<Option<Record>, Error> {
        load_record(&self.state)
    }

    /// Quote, pay and claim `opts.plan`, or finish what an earlier run
    /// recorded (see the module docs). `progress` gets one line per step.
    pub fn upgrade(
        &self,
        opts: &UpgradeOptions,
        progress: &dyn Fn(&str),
    ) -> Result<UpgradeDone, Error> {
        let key = self.key()?;
        let agent = key.agent_id();
        let mut record = load_record(&self.state)?;
        let next = decide(record.as_ref(), opts.plan, now_ms(), opts.new)?;
        match (&next, &record) {
            (Next::Done, Some(r)) => {
                let claimed = r.claimed.clone().unwrap_or_default();
                progress(&format!(
                    "invoice {} was credited on an earlier run; nothing to pay (--new buys more time)",
                    r.invoice_id()
                ));
                return Ok(UpgradeDone {
                    claimed,
                    fresh: false,
                });
            }
            (Next::Failed, Some(r)) => {
                let f = r.failed.clone().unwrap_or(Failure {
                    status: 0,
                    code: String::new(),
                    detail: String::new(),
                });
                return Err(refused(
                    &format!("the claim of invoice {} (recorded)", r.invoice_id()),
                    f.status,
                    &f.code,
                    &format!("{} (--new starts a new purchase)", f.detail),
                    None,
                ));
            }
            _ => {}
        }
        // The key file first: a local mistake fails before any network.
        let payer = match next {
            Next::Pay | Next::Quote { .. } => Some(PayerKey::load(&opts.evm_key)?),
            _ => None,
        };
        let rpc = Rpc::new(self, &opts.rpc_url);
        let chain_id = rpc.chain_id()?;
        let mut r = match (next, record.take()) {
            (Next::Resume, Some(r)) => {
                progress(&format!(
                    "resuming invoice {}: transaction {} was recorded by an earlier run \
                     (it is finished, never replaced)",
                    r.invoice_id(),
                    r.payment.as_ref().map_or("?", |p| p.tx_hash.as_str())
                ));
                let plan = r.invoice_str("plan");
                if plan != opts.plan.as_str() {
                    progress(&format!(
                        "finishing the recorded payment for plan {plan} first (never paid twice)"
                    ));
                }
                if opts.new {
                    progress("a payment is in flight: finishing it first; run again with --new to buy more");
                }
                r
            }
            (Next::Pay, Some(r)) => {
                let inv = check_quote(&r.invoice, &agent, opts.plan)?;
                progress(&format!(
                    "paying the open invoice {} recorded earlier: {} USDC ({}, {} days), until {}",
                    inv.invoice_id,
                    inv.amount,
                    inv.plan.as_str(),
                    inv.days,
                    inv.expires_at
                ));
                let payer = payer.as_ref().ok_or_else(|| Error::local("no payer key"))?;
                self.pay(&rpc, chain_id, r, &inv, payer, opts, progress)?
            }
            (Next::Quote { archive }, old) => {
                let payer = payer.as_ref().ok_or_else(|| Error::local("no payer key"))?;
                if let (true, Some(old)) = (archive, old) {
                    archive_record(&self.state, &old)?;
                }
                let body = self.quote(&agent, opts.plan)?;
                let inv = check_quote(&body, &agent, opts.plan)?;
                // Recorded before anything is paid.
                let r = Record::new(body);
                save_record(&self.state, &r)?;
                progress(&format!(
                    "quoted invoice {}: {} USDC ({}, {} days) to {} on {} (chain {}), pay before {}",
                    inv.invoice_id,
                    inv.amount,
                    inv.plan.as_str(),
                    inv.days,
                    inv.to.checksummed(),
                    inv.chain,
                    inv.chain_id,
                    inv.expires_at
                ));
                self.pay(&rpc, chain_id, r, &inv, payer, opts, progress)?
            }
            (_, None) => {
                unreachable!("decide answers Pay, Resume, Done and Failed only for a record")
            }
            (Next::Done | Next::Failed, Some(_)) => unreachable!("answered above"),
        };
        let inv = check_quote(&r.invoice, &agent, invoice_plan(&r)?)?;
        if inv.chain_id != chain_id {
            // Only a recorded payment gets here (`pay` checks before signing).
            return Err(Error::local(format!(
                "the RPC endpoint is chain {chain_id}; the recorded payment of invoice {} is on \
                 chain {}: pass --rpc for chain {}",
                inv.invoice_id, inv.chain_id, inv.chain_id
            )));
        }
        let payment = r
            .payment
            .clone()
            .ok_or_else(|| Error::local("no payment recorded"))?;
        let deadline = now_ms().saturating_add(opts.timeout.as_millis() as u64);
        self.ensure_broadcast(&rpc, &mut r, &payment, progress)?;
        if opts.stop_after == Some(StopAfter::Broadcast) {
            return Err(Error::local(
                "stopped after broadcasting (SELFCAP_TEST_STOP_AFTER=broadcast)",
            ));
        }
        self.wait_confirmed(&rpc, &mut r, &payment, &inv, deadline, opts.poll, progress)?;
        let claimed = self.claim_until(
            &key,
            &mut r,
            &payment.tx_hash,
            deadline,
            opts.poll,
            progress,
        )?;
        Ok(UpgradeDone {
            claimed,
            fresh: true,
        })
    }

    /// `selfcap upgrade claim`: claims `invoice_id` with a payment made
    /// elsewhere, waiting while the service says it is pending.
    pub fn upgrade_claim(
        &self,
        invoice_id: &str,
        tx_hash: &str,
        timeout: Duration,
        poll: Duration,
        progress: &dyn Fn(&str),
    ) -> Result<Value, Error> {
        let key = self.key()?;
        if !is_invoice_id(invoice_id) {
            return Err(Error::local(format!(
                "not an invoice id: {invoice_id:?} (expected inv_ + 32 hex, as a quote returned it)"
            )));
        }
        let tx = parse_tx_hash(tx_hash).ok_or_else(|| {
            Error::local(format!(
                "not a transaction hash: {tx_hash:?} (expected 0x + 64 hex)"
            ))
        })?;
        // The recorded purchase, when this is its invoice; else a record of
        // its own that is never saved.
        let recorded = load_record(&self.state)?.filter(|r| r.invoice_id() == invoice_id);
        let keep = recorded.is_some();
        let mut r = recorded.unwrap_or_else(|| Record::new(json!({"invoice_id": invoice_id})));
        let deadline = now_ms().saturating_add(timeout.as_millis() as u64);
        self.claim_inner(&key, &mut r, &tx, deadline, poll, progress, keep)
    }

    /// POST the quote.
    fn quote(&self, agent: &AgentId, plan: Tier) -> Result<Value, Error> {
        let body = json!({"agent_id": agent.as_str(), "plan": plan.as_str()});
        let req = Request::json(
            "POST",
            self.service_url(QUOTE_PATH)?,
            body.to_string().into_bytes(),
        );
        let (resp, _) = self.exchange(&req)?;
        if resp.status != 200 {
            return Err(service_refusal("the quote", &req, &resp));
        }
        serde_json::from_slice(&resp.body)
            .map_err(|e| Error::Protocol(format!("quote answer is not JSON: {e}")))
    }

    /// Builds, signs, records and broadcasts the transfer that pays `inv`.
    #[allow(clippy::too_many_arguments)]
    fn pay(
        &self,
        rpc: &Rpc,
        chain_id: u64,
        mut r: Record,
        inv: &Invoice,
        payer: &PayerKey,
        opts: &UpgradeOptions,
        progress: &dyn Fn(&str),
    ) -> Result<Record, Error> {
        if chain_id != inv.chain_id {
            return Err(wrong_chain(chain_id, inv));
        }
        let from = payer.address();
        let token = inv.token.as_str();
        // The balance first: a clear message rather than a failed estimate.
        let mut call = BALANCE_OF_SELECTOR.to_vec();
        call.extend_from_slice(&address_word(&from));
        let balance = rpc
            .call(
                "eth_call",
                json!([{"to": token, "data": format!("0x{}", hex::encode(&call))}, "latest"]),
            )
            .map_err(|e| e.into_error("eth_call balanceOf"))?;
        let balance = balance.as_str().and_then(word_u128).ok_or_else(|| {
            Error::Unavailable(format!("balanceOf({from}) answered {balance}, not a word"))
        })?;
        if balance < u128::from(inv.amount.0) {
            return Err(Error::local(format!(
                "the payer {} holds {} USDC, the invoice needs {}; nothing was paid (invoice {} \
                 stays open until {}: fund the payer and run again)",
                from.checksummed(),
                Usdc(u64::try_from(balance).unwrap_or(u64::MAX)),
                inv.amount,
                inv.invoice_id,
                inv.expires_at
            )));
        }
        let data = transfer_calldata(&inv.to, u128::from(inv.amount.0));
        let data_hex = format!("0x{}", hex::encode(&data));
        let nonce = rpc.quantity("eth_getTransactionCount", json!([from.as_str(), "pending"]))?;
        let nonce =
            u64::try_from(nonce).map_err(|_| Error::Unavailable("nonce out of range".into()))?;
        let latest = rpc
            .call("eth_getBlockByNumber", json!(["latest", false]))
            .map_err(|e| e.into_error("eth_getBlockByNumber"))?;
        let base_fee = latest
            .get("baseFeePerGas")
            .and_then(Value::as_str)
            .and_then(big_quantity);
        let priority = match base_fee {
            Some(_) => rpc.quantity("eth_maxPriorityFeePerGas", json!([])).ok(),
            None => None,
        };
        let gas_price = match (base_fee, priority) {
            (Some(_), Some(_)) => None,
            _ => Some(rpc.quantity("eth_gasPrice", json!([]))?),
        };
        let fees = fees(base_fee, priority, gas_price).map_err(Error::Unavailable)?;
        let estimate = rpc
            .call(
                "eth_estimateGas",
                json!([{"from": from.as_str(), "to": token, "data": data_hex}]),
            )
            .map_err(|e| match e {
                RpcError::Node(m) => Error::local(format!(
                    "the transfer would fail ({m}); nothing was paid (does the payer hold ETH for gas?)"
                )),
                RpcError::Fail(e) => e,
            })?;
        let estimate = estimate
            .as_str()
            .and_then(quantity)
            .ok_or_else(|| Error::Unavailable(format!("eth_estimateGas answered {estimate}")))?;
        let params = TxParams {
            chain_id,
            nonce,
            gas_limit: gas_limit(estimate),
            fees,
            to: inv.token.clone(),
            value: 0,
            data,
        };
        let signed = sign_tx(&params, payer)?;
        // Recorded before it is broadcast: from now on this invoice is paid
        // with this transaction or not at all.
        r.payment = Some(Payment {
            tx_hash: signed.hash.clone(),
            raw_tx: format!("0x{}", hex::encode(&signed.raw)),
            from: from.as_str().to_owned(),
            nonce,
            signed_at: rfc3339(now_ms()),
        });
        save_record(&self.state, &r)?;
        progress(&format!(
            "signed transaction {} from {} (nonce {nonce}, {})",
            signed.hash,
            from.checksummed(),
            match fees {
                Fees::Eip1559 {
                    max_fee,
                    priority_fee,
                } => format!("EIP-1559, max fee {max_fee} wei/gas, priority {priority_fee}"),
                Fees::Legacy { gas_price } => format!("legacy, gas price {gas_price} wei"),
            }
        ));
        if opts.stop_after == Some(StopAfter::Sign) {
            return Err(Error::local(
                "stopped after signing (SELFCAP_TEST_STOP_AFTER=sign)",
            ));
        }
        let sent = rpc.call(
            "eth_sendRawTransaction",
            json!([r.payment.as_ref().map(|p| p.raw_tx.clone())]),
        );
        match sent {
            Ok(h)
                if h.as_str().and_then(parse_tx_hash).as_deref() == Some(signed.hash.as_str()) =>
            {
                progress(&format!("sent transaction {}", signed.hash));
            }
            Ok(h) => {
                return Err(Error::Unavailable(format!(
                    "eth_sendRawTransaction answered {h}, not the transaction's hash {}; run again \
                     to check it (it will not be paid twice)",
                    signed.hash
                )))
            }
            // Checked on the way on: the chain may have it anyway.
            Err(RpcError::Node(m)) => {
                progress(&format!("the node answered the broadcast with: {m}"))
            }
            Err(RpcError::Fail(e)) => {
                progress(&format!("the broadcast may have failed ({e}); checking"));
            }
        }
        Ok(r)
    }

    /// Makes sure the chain knows the recorded transaction: sends the same
    /// bytes again when it does not. A transaction that can never be mined
    /// (its nonce went to another one) is set aside, so the next run pays.
    fn ensure_broadcast(
        &self,
        rpc: &Rpc,
        r: &mut Record,
        p: &Payment,
        progress: &dyn Fn(&str),
    ) -> Result<(), Error> {
        if rpc
            .lookup("eth_getTransactionByHash", &p.tx_hash)?
            .is_some()
            || rpc
                .lookup("eth_getTransactionReceipt", &p.tx_hash)?
                .is_some()
        {
            return Ok(());
        }
        match rpc.call("eth_sendRawTransaction", json!([p.raw_tx])) {
            Ok(_) => {
                progress(&format!(
                    "sent the recorded transaction {} (the chain did not know it)",
                    p.tx_hash
                ));
                Ok(())
            }
            Err(RpcError::Fail(e)) => Err(e),
            Err(RpcError::Node(m)) => {
                if rpc
                    .lookup("eth_getTransactionByHash", &p.tx_hash)?
                    .is_some()
                {
                    return Ok(());
                }
                let used = rpc.quantity("eth_getTransactionCount", json!([p.from, "latest"]))?;
                if used > u128::from(p.nonce) {
                    r.abandoned.push(Abandoned {
                        tx_hash: p.tx_hash.clone(),
                        why: "dropped".into(),
                    });
                    r.payment = None;
                    save_record(&self.state, r)?;
                    return Err(Error::local(format!(
                        "the recorded transaction {} can never be mined: the payer's nonce {} went \
                         to another transaction ({m}). It paid nothing; run again to pay invoice {} anew",
                        p.tx_hash,
                        p.nonce,
                        r.invoice_id()
                    )));
                }
                Err(Error::Unavailable(format!(
                    "the node refused the recorded transaction {} ({m}); nothing else will be \
                     sent for this invoice: fix the cause (e.g. ETH for gas) and run again",
                    p.tx_hash
                )))
            }
        }
    }

    /// Waits for the receipt, then for `min_confirmations`.
    #[allow(clippy::too_many_arguments)]
    fn wait_confirmed(
        &self,
        rpc: &Rpc,
        r: &mut Record,
        p: &Payment,
        inv: &Invoice,
        deadline: u64,
        poll: Duration,
        progress: &dyn Fn(&str),
    ) -> Result<(), Error> {
        let receipt = loop {
            if let Some(receipt) = rpc.lookup("eth_getTransactionReceipt", &p.tx_hash)? {
                break receipt;
            }
            self.wait_or_give_up(
                deadline,
                poll,
                &format!("transaction {} is not mined yet", p.tx_hash),
            )?;
        };
        let field = |k: &str| receipt.get(k).and_then(Value::as_str).and_then(quantity);
        let block = field("blockNumber")
            .ok_or_else(|| Error::Unavailable("the receipt has no blockNumber".into()))?;
        if field("status") == Some(0) {
            r.abandoned.push(Abandoned {
                tx_hash: p.tx_hash.clone(),
                why: "reverted".into(),
            });
            r.payment = None;
            save_record(&self.state, r)?;
            return Err(Error::NotFound(format!(
                "the payment transaction {} reverted in block {block}: nothing was paid. Run again \
                 to pay invoice {} anew before {}",
                p.tx_hash, inv.invoice_id, inv.expires_at
            )));
        }
        progress(&format!("mined in block {block}"));
        let need = inv.min_confirmations;
        let mut shown = 0;
        loop {
            let head = rpc.block_number()?;
            let have = head.saturating_sub(block).saturating_add(1).min(need);
            if have != shown {
                progress(&format!("confirmations {have}/{need}"));
                shown = have;
            }
            if have >= need {
                return Ok(());
            }
            self.wait_or_give_up(deadline, poll, &format!("{have} of {need} confirmations"))?;
        }
    }

    /// Claims (signed with the identity's key), resending the same claim
    /// while the service answers that the payment is pending.
    fn claim_until(
        &self,
        key: &AgentKey,
        r: &mut Record,
        tx_hash: &str,
        deadline: u64,
        poll: Duration,
        progress: &dyn Fn(&str),
    ) -> Result<Value, Error> {
        self.claim_inner(key, r, tx_hash, deadline, poll, progress, true)
    }

    #[allow(clippy::too_many_arguments)]
    fn claim_inner(
        &self,
        key: &AgentKey,
        r: &mut Record,
        tx_hash: &str,
        deadline: u64,
        poll: Duration,
        progress: &dyn Fn(&str),
        keep: bool,
    ) -> Result<Value, Error> {
        let invoice_id = r.invoice_id().to_owned();
        let seq = match r.claim_seq {
            Some(s) => s,
            None => {
                let s = now_ms() / 1000;
                r.claim_seq = Some(s);
                if keep {
                    save_record(&self.state, r)?;
                }
                s
            }
        };
        let body = jcs::canonical_bytes(&sign_claim(key, &invoice_id, tx_hash, seq));
        let req = Request::json("POST", self.service_url(CLAIM_PATH)?, body);
        progress(&format!("claiming invoice {invoice_id} with {tx_hash}"));
        loop {
            let (resp, _) = self.exchange(&req)?;
            if resp.status == 200 {
                let v: Value = serde_json::from_slice(&resp.body)
                    .map_err(|e| Error::Protocol(format!("claim answer is not JSON: {e}")))?;
                let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
                if v.get("accepted") != Some(&Value::Bool(true))
                    || s("invoice_id") != invoice_id
                    || s("agent_id") != key.agent_id().as_str()
                    || parse_tx_hash(s("tx_hash")).as_deref() != Some(tx_hash)
                {
                    return Err(Error::Protocol(format!(
                        "the claim answer does not match the claim: {}",
                        resp.snippet()
                    )));
                }
                r.claimed = Some(v.clone());
                if keep {
                    save_record(&self.state, r)?;
                }
                progress(&format!(
                    "credited: {} until {} (invoice {invoice_id})",
                    s("plan"),
                    s("paid_until")
                ));
                self.refresh_head(&key.agent_id(), progress);
                return Ok(v);
            }
            let (code, detail, wait) = refusal_parts(&resp);
            match code.as_deref() {
                Some("payment_pending" | "payment_not_found" | "payment_provider_unavailable") => {
                    let wait = wait.unwrap_or(Duration::from_secs(2)).max(poll);
                    let left = Duration::from_millis(deadline.saturating_sub(now_ms()));
                    let code = code.unwrap_or_default();
                    if left.is_zero() {
                        return Err(timed_out(&format!("{code}: {detail}"), &invoice_id));
                    }
                    let wait = wait.min(left);
                    progress(&format!(
                        "the service says {code} ({detail}); claiming again in {} s",
                        wait.as_secs().max(1)
                    ));
                    (self.sleeper)(wait);
                }
                _ => {
                    let class = code
                        .as_deref()
                        .and_then(ReasonCode::from_wire)
                        .map(ReasonCode::class);
                    if class == Some(Class::Request) && keep {
                        r.failed = Some(Failure {
                            status: resp.status,
                            code: code.clone().unwrap_or_default(),
                            detail: detail.clone(),
                        });
                        save_record(&self.state, r)?;
                    }
                    return Err(service_refusal("the claim", &req, &resp));
                }
            }
        }
    }

    /// After a credit: the head as the service now shows it, cached for
    /// `status` (unconditionally: a credit does not move the ETag).
    fn refresh_head(&self, agent: &AgentId, progress: &dyn Fn(&str)) {
        match self.fetch_head(agent, None) {
            Ok(Some(super::HeadOutcome::Changed { head })) => {
                let cache = super::state::HeadCache {
                    etag: jcs::cursor_hex(&head.cursor).to_string(),
                    head: Some(head),
                };
                if let Err(e) = self.state.save_head_cache(&cache) {
                    progress(&format!("could not store head.json: {e}"));
                }
            }
            Ok(_) => {}
            Err(e) => progress(&format!("could not read head.json after the credit: {e}")),
        }
    }

    /// Sleeps `poll`, or fails when the deadline has passed.
    fn wait_or_give_up(&self, deadline: u64, poll: Duration, what: &str) -> Result<(), Error> {
        let left = deadline.saturating_sub(now_ms());
        if left == 0 {
            return Err(timed_out(what, ""));
        }
        (self.sleeper)(poll.min(Duration::from_millis(left)));
        Ok(())
    }

    /// The tier for `status` (see [`tier_view`]).
    pub fn tier(&self) -> Result<Option<TierView>, Error> {
        let head = self.state.head_cache()?.and_then(|c| c.head);
        let record = load_record(&self.state)?;
        Ok(tier_view(head.as_ref(), record.as_ref(), now_ms()))
    }
}

fn invoice_plan(r: &Record) -> Result<Tier, Error> {
    match r.invoice_str("plan") {
        "pro" => Ok(Tier::Pro),
        "plus" => Ok(Tier::Plus),
        other => Err(Error::local(format!(
            "upgrade.json names plan {other:?}; expected pro or plus"
        ))),
    }
}

fn wrong_chain(rpc_chain: u64, inv: &Invoice) -> Error {
    Error::local(format!(
        "the RPC endpoint is chain {rpc_chain}, the invoice is payable on {} (chain {}); nothing \
         was paid: pass --rpc for chain {}",
        inv.chain, inv.chain_id, inv.chain_id
    ))
}

/// Waiting ran out: class back_off (exit 5); the next run goes on.
fn timed_out(what: &str, invoice_id: &str) -> Error {
    let inv = if invoice_id.is_empty() {
        String::new()
    } else {
        format!(" for invoice {invoice_id}")
    };
    Error::from(Rejected {
        status: 409,
        reason_codes: vec![ReasonCode::PaymentPending.as_str().into()],
        detail: Some(format!(
            "still waiting{inv} ({what}) when --confirmations-timeout ran out; run the same \
             command again later to go on (the payment is recorded: nothing is paid twice)"
        )),
        retry_after_sec: None,
        next_write_at: None,
        findings: vec![],
        max_bytes: None,
        observed_bytes: None,
        local: true,
    })
}

/// `(error code, detail, wait)` of a refusal body.
fn refusal_parts(resp: &Response) -> (Option<String>, String, Option<Duration>) {
    let v: Option<Value> = serde_json::from_slice(&resp.body).ok();
    let s = |k: &str| {
        v.as_ref()
            .and_then(|v| v.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    (
        s("error"),
        s("detail").unwrap_or_default(),
        resp.retry_after(),
    )
}

/// A refused quote or claim as an [`Error`] whose exit code is its reason
/// code's class: request → 7, server → 3, the others as for writes.
fn service_refusal(what: &str, req: &Request, resp: &Response) -> Error {
    let (code, detail, wait) = refusal_parts(resp);
    match code {
        Some(code) if ReasonCode::from_wire(&code).is_some() => {
            refused(what, resp.status, &code, &detail, wait)
        }
        _ if resp.status >= 500 => unavailable(req, resp),
        _ => Error::Protocol(format!(
            "{} {} answered HTTP {}: {}",
            req.method,
            req.url,
            resp.status,
            resp.snippet()
        )),
    }
}

fn refused(what: &str, status: u16, code: &str, detail: &str, wait: Option<Duration>) -> Error {
    let rc = ReasonCode::from_wire(code);
    let action = rc.map_or("", ReasonCode::bot_action);
    let line = format!("{what} was refused (HTTP {status} {code}): {detail}. {action}");
    match rc.map(ReasonCode::class) {
        Some(Class::Request) => Error::NotFound(line),
        Some(Class::Server) => Error::Unavailable(line),
        _ => Error::from(Rejected {
            status,
            reason_codes: vec![code.to_owned()],
            detail: Some(format!("{what}: {detail}")),
            retry_after_sec: wait.map(|w| w.as_secs()),
            next_write_at: None,
            findings: vec![],
            max_bytes: None,
            observed_bytes: None,
            local: false,
        }),
    }
}

// ---------------------------------------------------------------------------
// upgrade.json

fn load_record(state: &StateDir) -> Result<Option<Record>, Error> {
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

fn save_record(state: &StateDir, r: &Record) -> Result<(), Error> {
    let mut text = serde_json::to_string_pretty(r)
        .map_err(|e| Error::local(format!("cannot encode {UPGRADE_FILE}: {e}")))?;
    text.push('\n');
    write_atomic(&state.file(UPGRADE_FILE), text.as_bytes())
}

/// Moves a finished (or expired, unpaid) purchase to `upgrades/`.
fn archive_record(state: &StateDir, r: &Record) -> Result<(), Error> {
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
    use crate::core::crypto::AgentKey;

    const NOW: u64 = 1_770_681_600_000; // 2026-02-10T00:00:00Z
                                        // anvil's dev account 0 (its well-known key) and account 1.
    const ANVIL_KEY: &str = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
    const ANVIL_ADDR: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
    const ACCOUNT_1: &str = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

    fn agent() -> AgentId {
        AgentKey::from_seed(&[5; 32]).agent_id()
    }

    fn quote_body(plan: &str, expires_at: &str) -> Value {
        let a = agent();
        json!({
            "invoice_id": format!("inv_{}0123456789abcdef", &a.as_str()[..16]),
            "agent_id": a.as_str(), "plan": plan, "days": 30,
            "amount": "5.004217", "amount_atomic": "5004217", "asset": "USDC",
            "chain": "base", "chain_id": 8453,
            "token_contract": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
            "to_address": ACCOUNT_1, "memo": "…", "expires_at": expires_at,
            "claim_url": "http://svc.test/api/v1/self/upgrade/claim", "min_confirmations": 5
        })
    }

    fn record(plan: &str, expires_at: &str) -> Record {
        Record::new(quote_body(plan, expires_at))
    }

    fn payment() -> Payment {
        Payment {
            tx_hash: format!("0x{}", "ab".repeat(32)),
            raw_tx: "0x02".into(),
            from: ANVIL_ADDR.to_ascii_lowercase(),
            nonce: 0,
            signed_at: rfc3339(NOW),
        }
    }

    const LATER: &str = "2026-02-10T01:00:00Z";

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

    #[test]
    fn the_record_round_trips_through_json() {
        let mut r = record("plus", LATER);
        r.payment = Some(payment());
        r.claim_seq = Some(7);
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
        // Empty parts are left out.
        let bare = serde_json::to_value(record("pro", LATER)).unwrap();
        assert_eq!(bare.as_object().unwrap().len(), 1);
    }

    #[test]
    fn quotes_are_checked_before_anything_is_paid() {
        let a = agent();
        let inv = check_quote(&quote_body("pro", LATER), &a, Tier::Pro).unwrap();
        assert_eq!(inv.amount, Usdc(5_004_217));
        assert_eq!(inv.chain_id, 8453);
        assert_eq!(inv.to.checksummed(), ACCOUNT_1);
        assert_eq!(inv.expires_at_ms, NOW + 3_600_000);
        assert_eq!(inv.min_confirmations, 5);
        let set = |k: &str, v: Value| {
            let mut b = quote_body("pro", LATER);
            b[k] = v;
            b
        };
        for bad in [
            set("plan", json!("plus")),
            set("agent_id", json!("ab".repeat(32))),
            set("invoice_id", json!(format!("inv_{}", "0".repeat(32)))),
            set("amount", json!("5.004218")),
            set("amount_atomic", json!("0")),
            set("asset", json!("DAI")),
            // Not Circle's USDC on Base.
            set("token_contract", json!(ACCOUNT_1)),
            set("to_address", json!(format!("0x{}", "0".repeat(40)))),
            set(
                "to_address",
                json!("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"),
            ),
            set("expires_at", json!("soon")),
            set("chain_id", json!("8453")),
        ] {
            let e = check_quote(&bad, &a, Tier::Pro).unwrap_err();
            assert_eq!(e.exit_code(), crate::client::ExitCode::Unavailable, "{bad}");
        }
        // On a chain without a known USDC, the quoted contract is taken.
        let other = set("chain_id", json!(31337));
        let other = {
            let mut o = other;
            o["token_contract"] = json!(ACCOUNT_1);
            o
        };
        assert!(check_quote(&other, &a, Tier::Pro).is_ok());
    }

    #[test]
    fn transfer_calldata_matches_the_abi() {
        // keccak256("transfer(address,uint256)")[..4].
        use sha3::{Digest, Keccak256};
        let h = Keccak256::digest(b"transfer(address,uint256)");
        assert_eq!(h[..4], TRANSFER_SELECTOR);
        let h = Keccak256::digest(b"balanceOf(address)");
        assert_eq!(h[..4], BALANCE_OF_SELECTOR);
        // transfer(account 1, 5004217): what solc / ethers / viem encode.
        let to = evm::Address::parse(ACCOUNT_1).unwrap();
        assert_eq!(
            hex::encode(transfer_calldata(&to, 5_004_217)),
            "a9059cbb\
             00000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c8\
             00000000000000000000000000000000000000000000000000000000004c5bb9"
        );
        assert_eq!(
            hex::encode(&transfer_calldata(&to, u128::MAX)[36..]),
            format!("{}{}", "0".repeat(32), "f".repeat(32))
        );
    }

    #[test]
    fn fees_follow_the_chain() {
        assert_eq!(
            fees(Some(100), Some(7), None),
            Ok(Fees::Eip1559 {
                max_fee: 207,
                priority_fee: 7
            })
        );
        // No suggestion: the gas price over the base fee, else the fallback.
        assert_eq!(
            fees(Some(100), None, Some(150)),
            Ok(Fees::Eip1559 {
                max_fee: 250,
                priority_fee: 50
            })
        );
        assert_eq!(
            fees(Some(100), None, Some(90)),
            Ok(Fees::Eip1559 {
                max_fee: 200 + FALLBACK_PRIORITY_FEE,
                priority_fee: FALLBACK_PRIORITY_FEE
            })
        );
        assert_eq!(fees(None, None, Some(5)), Ok(Fees::Legacy { gas_price: 5 }));
        assert!(fees(None, Some(1), None).is_err());
        assert_eq!(
            fees(Some(u128::MAX), Some(1), None),
            Ok(Fees::Eip1559 {
                max_fee: u128::MAX,
                priority_fee: 1
            })
        );
        assert_eq!(gas_limit(50_000), 60_000);
        assert_eq!(gas_limit(u64::MAX), u64::MAX);
    }

    #[test]
    fn the_payer_key_parses_and_never_shows() {
        let k = PayerKey::parse(ANVIL_KEY).unwrap();
        assert_eq!(k.address().checksummed(), ANVIL_ADDR);
        let k2 = PayerKey::parse(&format!("  {}\n", &ANVIL_KEY[2..])).unwrap();
        assert_eq!(k2.address(), k.address());
        let shown = format!("{k:?}");
        assert!(
            !shown.contains(&ANVIL_KEY[2..]) && shown.contains("f39fd6e5"),
            "{shown}"
        );
        for bad in ["", "0x", &ANVIL_KEY[..64], "zz", &"0".repeat(64)] {
            assert!(PayerKey::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_legacy_transaction_matches_the_eip155_example() {
        // EIP-155's own example: nonce 9, 20 gwei, 21000 gas, 1 ether to
        // 0x3535…35 on chain 1, signed with the key 0x4646…46.
        let key = PayerKey::parse(&"46".repeat(32)).unwrap();
        let p = TxParams {
            chain_id: 1,
            nonce: 9,
            gas_limit: 21_000,
            fees: Fees::Legacy {
                gas_price: 20_000_000_000,
            },
            to: evm::Address::parse(&format!("0x{}", "35".repeat(20))).unwrap(),
            value: 1_000_000_000_000_000_000,
            data: vec![],
        };
        let s = sign_tx(&p, &key).unwrap();
        assert_eq!(
            hex::encode(&s.raw),
            "f86c098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a76400008025a028ef61340bd939bc2195fe537567866003e1a15d3c71ff63e1590620aa636276a067cbe9d8997f761aecb703304b3800ccf555c9f3dc64214b297fb1966a3b6d83"
        );
        assert_eq!(
            s.hash,
            format!("0x{}", hex::encode(alloy_primitives::keccak256(&s.raw)))
        );
    }

    #[test]
    fn an_eip1559_transfer_is_type_2_and_recovers_to_the_payer() {
        use alloy_consensus::transaction::SignerRecoverable;
        use alloy_consensus::TxEnvelope;
        use alloy_eips::eip2718::Decodable2718;
        let key = PayerKey::parse(ANVIL_KEY).unwrap();
        let to = evm::Address::parse(ACCOUNT_1).unwrap();
        let usdc = evm::Address::parse("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913").unwrap();
        let p = TxParams {
            chain_id: 8453,
            nonce: 3,
            gas_limit: gas_limit(50_000),
            fees: fees(Some(1_000_000_000), Some(1_000_000), None).unwrap(),
            to: usdc.clone(),
            value: 0,
            data: transfer_calldata(&to, 5_004_217),
        };
        let s = sign_tx(&p, &key).unwrap();
        assert_eq!(s.raw[0], 0x02, "EIP-2718 type 2");
        // Deterministic (RFC 6979): the same bytes every time.
        assert_eq!(sign_tx(&p, &key).unwrap(), s);
        let env = TxEnvelope::decode_2718(&mut s.raw.as_slice()).unwrap();
        assert_eq!(format!("{:#x}", env.tx_hash()), s.hash);
        let signer = env.recover_signer().unwrap();
        assert_eq!(format!("{signer:#x}"), ANVIL_ADDR.to_ascii_lowercase());
        let TxEnvelope::Eip1559(signed) = env else {
            panic!("not 1559")
        };
        let tx = signed.tx();
        assert_eq!((tx.chain_id, tx.nonce, tx.gas_limit), (8453, 3, 60_000));
        assert_eq!(tx.max_fee_per_gas, 2_001_000_000);
        assert_eq!(tx.max_priority_fee_per_gas, 1_000_000);
        assert_eq!(format!("{:#x}", tx.to.to().unwrap()), usdc.as_str());
        assert_eq!(tx.input.as_ref(), p.data.as_slice());
        // Legacy where the chain has no base fee: EIP-155 (v = 2 * 8453 + 35/36).
        let legacy = TxParams {
            fees: Fees::Legacy { gas_price: 7 },
            ..p
        };
        let s = sign_tx(&legacy, &key).unwrap();
        let env = TxEnvelope::decode_2718(&mut s.raw.as_slice()).unwrap();
        assert!(matches!(env, TxEnvelope::Legacy(ref t) if t.tx().chain_id == Some(8453)));
        assert_eq!(
            format!("{:#x}", env.recover_signer().unwrap()),
            ANVIL_ADDR.to_ascii_lowercase()
        );
    }

    #[test]
    fn rfc3339_reads_the_services_spelling() {
        for ms in [0, NOW, 951_782_400_000, 4_102_444_800_000, NOW + 3_599_000] {
            assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms));
        }
        assert_eq!(parse_rfc3339("2026-02-10T00:00:00.25Z"), Some(NOW + 250));
        for bad in [
            "",
            "2026-02-10",
            "2026-02-10T00:00:00",
            "2026-13-10T00:00:00Z",
            "2026-02-10T00:00:00.Z",
            "2026-02-10 00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    fn head(tier: Tier, paid_until: Option<&str>, generated_at: &str) -> Head {
        let mut h: Head = serde_json::from_value(json!({
            "agent_id": agent().as_str(), "cursor": format!("sha256:{}", "0".repeat(64)),
            "prev_cursor": null, "changed": true, "seq": 1, "generated_at": generated_at,
            "ttl_sec": 600, "capsule_url": "/self/x/capsule.json",
            "writes": {"limit_24h": 5, "used_24h": 1, "remaining_24h": 4, "reset_at": null}
        }))
        .unwrap();
        h.tier = tier;
        h.paid_until = paid_until.map(str::to_owned);
        h
    }

    #[test]
    fn status_shows_the_newest_tier_known_locally() {
        assert_eq!(tier_view(None, None, NOW), None);
        let until = "2026-03-12T00:00:00Z";
        let h = head(Tier::Pro, Some(until), "2026-02-10T00:00:00Z");
        let v = tier_view(Some(&h), None, NOW).unwrap();
        assert_eq!(
            (v.tier.as_str(), v.paid_until.as_deref()),
            ("pro", Some(until))
        );
        // A head read before the credit loses to the credit.
        let old = head(Tier::Free, None, "2026-02-09T00:00:00Z");
        let mut r = record("plus", LATER);
        r.claimed = Some(
            json!({"plan": "plus", "paid_until": until, "credited_at": "2026-02-09T12:00:00Z"}),
        );
        let v = tier_view(Some(&old), Some(&r), NOW).unwrap();
        assert_eq!(
            (v.tier.as_str(), v.as_of.as_str()),
            ("plus", "2026-02-09T12:00:00Z")
        );
        // A later head wins (e.g. Plus bought during Pro).
        let v = tier_view(Some(&h), Some(&r), NOW).unwrap();
        assert_eq!(v.tier, "pro");
        // Lapsed: free, no paid_until.
        let v = tier_view(Some(&h), None, parse_rfc3339(until).unwrap()).unwrap();
        assert_eq!((v.tier.as_str(), v.paid_until), ("free", None));
    }

    #[test]
    fn rpc_urls_are_shown_without_their_path_or_credentials() {
        assert_eq!(
            origin("https://base.example/v2/SECRETKEY"),
            "https://base.example"
        );
        assert_eq!(
            origin("http://user:pw@127.0.0.1:8545"),
            "http://127.0.0.1:8545"
        );
        assert_eq!(
            origin("http://127.0.0.1:8545?key=x"),
            "http://127.0.0.1:8545"
        );
    }

    #[test]
    fn refusals_exit_by_their_class() {
        use crate::client::ExitCode;
        let code = |c: &str, s: u16| refused("the claim", s, c, "d", None).exit_code();
        assert_eq!(code("payment_underpaid", 422), ExitCode::NotFound);
        assert_eq!(code("invoice_expired", 410), ExitCode::NotFound);
        assert_eq!(
            code("payment_provider_unavailable", 503),
            ExitCode::Unavailable
        );
        assert_eq!(code("upgrades_not_configured", 503), ExitCode::Unavailable);
        assert_eq!(code("quote_rate_exceeded", 429), ExitCode::BackOff);
        assert_eq!(code("too_many_open_invoices", 429), ExitCode::BackOff);
        assert_eq!(code("bad_signature", 401), ExitCode::Signature);
        assert_eq!(code("bad_upgrade_request", 400), ExitCode::FixPayload);
        assert_eq!(timed_out("x", "inv").exit_code(), ExitCode::BackOff);
    }
}
