//! `selfcap upgrade` ([`Client::upgrade`]): decide from `upgrade.json`, quote,
//! pay (balance, nonce, fees, gas, sign, record, broadcast), make sure the
//! chain has the recorded transaction, wait for the confirmations, claim.

use super::now_ms;
use super::quote::{check_quote, Invoice};
use super::record::{archive_record, decide, load_record, save_record, Abandoned, Failure};
use super::record::{Next, Payment, Record};
use super::rpc::{big_quantity, NodeError, Rpc};
use super::service::{refused, timed_out, ClaimWaits};
use super::tx::{address_word, fees, gas_limit, sign_tx, transfer_calldata, Fees, PayerKey};
use super::tx::{TxParams, BALANCE_OF_SELECTOR};
use crate::client::{Client, Error};
use crate::core::limits::Tier;
use crate::core::time::rfc3339;
use crate::core::upgrade::amount::Usdc;
use crate::core::upgrade::evm::{parse_tx_hash, quantity, word_u128};
use serde_json::{json, Value};
use std::time::Duration;

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
    /// How long the claim waits through the service's
    /// `payment_provider_unavailable` before giving up with
    /// [`Error::ClaimLater`] (the payment is safe; claim it later).
    pub provider_timeout: Duration,
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
        let waits = ClaimWaits {
            deadline,
            poll: opts.poll,
            provider: opts.provider_timeout,
        };
        let claimed = self.claim_until(&key, &mut r, &payment.tx_hash, &waits, progress)?;
        Ok(UpgradeDone {
            claimed,
            fresh: true,
        })
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
                NodeError::Node(m) => Error::local(format!(
                    "the transfer would fail ({m}); nothing was paid (does the payer hold ETH for gas?)"
                )),
                NodeError::Fail(e) => e,
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
            Err(NodeError::Node(m)) => {
                progress(&format!("the node answered the broadcast with: {m}"))
            }
            Err(NodeError::Fail(e)) => {
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
            Err(NodeError::Fail(e)) => Err(e),
            Err(NodeError::Node(m)) => {
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

    /// Sleeps `poll`, or fails when the deadline has passed.
    fn wait_or_give_up(&self, deadline: u64, poll: Duration, what: &str) -> Result<(), Error> {
        let left = deadline.saturating_sub(now_ms());
        if left == 0 {
            return Err(timed_out(what, ""));
        }
        (self.sleeper)(poll.min(Duration::from_millis(left)));
        Ok(())
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
