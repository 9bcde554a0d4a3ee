//! JSON-RPC over `fetch`, for verifying payments on the configured chain.
//! The endpoint is a provider like any other: its transport failures and
//! error objects become [`ProviderError`] (the claim answers 503 and credits
//! nothing); what its results mean is decided in `core::upgrade::receipt`.

use super::body;
use crate::core::json::{self, Json};
use crate::core::upgrade::evm::quantity;
use crate::core::upgrade::receipt::{check_payment, Expected, Observed, Verdict};
use crate::core::upgrade::x402::chain::{self, Onchain};
use crate::core::upgrade::x402::wire::PaymentId;
use serde_json::json;
use worker::{Fetch, Headers, Method, Request, RequestInit};

/// Why a call to the chain provider produced no result (transport, HTTP
/// status, or its JSON-RPC error object): a `Verdict::ProviderFault`.
#[derive(Debug)]
pub struct ProviderError(pub String);

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Calls `method` with `params` at `url`; the `result` member of the answer.
pub async fn call(
    url: &str,
    method: &str,
    params: serde_json::Value,
) -> Result<Json, ProviderError> {
    let fail = |what: String| ProviderError(format!("{method}: {what}"));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let headers = Headers::new();
    headers
        .set("Content-Type", "application/json")
        .map_err(|e| fail(e.to_string()))?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(body.into()));
    let req = Request::new_with_init(url, &init).map_err(|e| fail(e.to_string()))?;
    let resp = Fetch::Request(req)
        .send()
        .await
        .map_err(|e| fail(format!("unreachable ({e})")))?;
    if resp.status_code() != 200 {
        return Err(fail(format!("HTTP {}", resp.status_code())));
    }
    let bytes = body::response_bytes(resp)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let answer = json::parse(&bytes).map_err(|e| fail(format!("answer is not JSON ({e})")))?;
    if let Some(err) = answer.get("error") {
        let message = err.get("message").and_then(Json::as_str).unwrap_or("?");
        return Err(fail(format!("error {message}")));
    }
    answer
        .get("result")
        .cloned()
        .ok_or_else(|| fail("answer has no result".into()))
}

/// Asks the chain about `tx_hash` and decides whether it pays `want`: the
/// chain id, the receipt, the head block number and (once mined) the
/// receipt's block. A transport or RPC error is a provider fault.
pub async fn verify_payment(url: &str, want: &Expected, tx_hash: &str) -> Verdict {
    match observe(url, tx_hash).await {
        Ok(answers) => check_payment(want, &answers.observed(tx_hash)),
        Err(e) => Verdict::ProviderFault(e.0),
    }
}

/// What the chain said about one transaction (for `receipt::Observed`).
struct Answers {
    chain_id: Json,
    receipt: Json,
    head: Json,
    block: Option<Json>,
}

impl Answers {
    fn observed<'a>(&'a self, tx_hash: &'a str) -> Observed<'a> {
        Observed {
            tx_hash,
            chain_id: &self.chain_id,
            receipt: &self.receipt,
            block: self.block.as_ref(),
            head_number: &self.head,
        }
    }
}

async fn observe(url: &str, tx_hash: &str) -> Result<Answers, ProviderError> {
    let chain_id = call(url, "eth_chainId", json!([])).await?;
    let receipt = call(url, "eth_getTransactionReceipt", json!([tx_hash])).await?;
    let head = call(url, "eth_blockNumber", json!([])).await?;
    let block = match receipt.get("blockNumber").and_then(Json::as_str) {
        Some(n) => Some(call(url, "eth_getBlockByNumber", json!([n, false])).await?),
        None => None,
    };
    Ok(Answers {
        chain_id,
        receipt,
        head,
        block,
    })
}

/// `authorizationState(from, nonce)` of the payment's token: whether its
/// authorization was used. `None` when the provider gave no usable answer.
pub async fn authorization_state(url: &str, id: &PaymentId) -> Option<bool> {
    let params = serde_json::to_value(chain::authorization_state_call(id)).ok()?;
    let result = call(url, "eth_call", params).await.ok()?;
    chain::read_authorization_state(&result)
}

/// Blocks searched back for an authorization's `AuthorizationUsed` log
/// (providers bound `eth_getLogs` ranges; on Base, about 5.5 hours).
const LOG_WINDOW_BLOCKS: u64 = 10_000;

/// The transaction that used the payment's authorization, by the token's
/// `AuthorizationUsed(from, nonce)` log in the last [`LOG_WINDOW_BLOCKS`].
pub async fn authorization_tx(url: &str, id: &PaymentId) -> Result<Option<String>, ProviderError> {
    let head = call(url, "eth_blockNumber", json!([])).await?;
    let head = head
        .as_str()
        .and_then(quantity)
        .ok_or_else(|| ProviderError("eth_blockNumber: not a quantity".into()))?;
    let filter = chain::authorization_used_filter(id, head.saturating_sub(LOG_WINDOW_BLOCKS));
    let params = serde_json::to_value(filter).map_err(|e| ProviderError(e.to_string()))?;
    let logs = call(url, "eth_getLogs", params).await?;
    chain::tx_of_authorization(&logs, id).map_err(ProviderError)
}

/// What the chain shows of `tx_hash` as the settlement of `id` for `want`.
pub async fn settlement(url: &str, want: &Expected, id: &PaymentId, tx_hash: &str) -> Onchain {
    match observe(url, tx_hash).await {
        Ok(answers) => chain::check_settlement(want, id, &answers.observed(tx_hash)),
        Err(e) => Onchain::ProviderFault(e.0),
    }
}
