//! `selfcap upgrade --x402` ([`Client::upgrade_x402`]): decide from
//! `upgrade.json`, ask for the invoice (`POST /api/v1/self/upgrade/x402`, a
//! 402), check it, sign the EIP-3009 authorization, record the header, send
//! it; resend the same header while the outcome is unknown.

use super::now_ms;
use super::record::{archive_record, decide_x402, load_record, save_record, Failure, Record};
use super::record::{X402Dropped, X402Next, X402Sent};
use super::rpc::Rpc;
use super::service::{refusal_parts, refused, service_refusal, timed_out};
use super::tx::PayerKey;
use super::x402::{
    check_offer, decode_header, list_price, read_answer, sign_payment, Answer, Expect, Offer,
    Window, PAYMENT_RESPONSE_HEADER, PAYMENT_SIGNATURE_HEADER,
};
use super::{StopAfter, UpgradeDone};
use crate::client::http::{Request, Response};
use crate::client::{BackoffPolicy, Client, Error};
use crate::core::crypto::AgentId;
use crate::core::limits::Tier;
use crate::core::time::rfc3339;
use crate::core::upgrade::amount::Usdc;
use crate::core::upgrade::config::BASE_CHAIN_ID;
use crate::core::upgrade::evm::Address;
use crate::core::upgrade::x402::wire::PAYMENT_REQUIRED_HEADER;
use crate::core::urls::X402_PATH;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

/// `selfcap upgrade --x402`.
#[derive(Debug, Clone)]
pub struct X402Options {
    /// `pro` or `plus`.
    pub plan: Tier,
    /// The payer's secp256k1 key file (signs the authorization; no gas).
    pub evm_key: PathBuf,
    /// The chain to pay on (the 402 must offer `eip155:<chain_id>`).
    /// `None`: the RPC's `eth_chainId` when `rpc_url` is set, else Base.
    pub chain_id: Option<u64>,
    /// A JSON-RPC URL, only to learn the chain when `chain_id` is `None`.
    pub rpc_url: Option<String>,
    /// The plan's price the invoice must be (plus its tag); `None`: the
    /// list price ([`list_price`]).
    pub price: Option<Usdc>,
    /// The service's treasury, when known: payTo must be it.
    pub pay_to: Option<Address>,
    /// How long to resend while the settlement is pending.
    pub timeout: Duration,
    /// The shortest pause between two sends.
    pub poll: Duration,
    /// Buy again even though the last purchase was credited (`renew=1`).
    pub new: bool,
    /// Test only: [`StopAfter::Sign`] stops after the header is recorded.
    pub stop_after: Option<StopAfter>,
}

/// What asking for the invoice (no payment header) got.
enum Asked {
    /// A 402: the `PAYMENT-REQUIRED` value.
    Offer(String),
    /// A 200: credited already (`repeat`: an earlier request's credit).
    Credited(Value),
}

impl Client {
    /// Buys `opts.plan` with x402, or finishes what an earlier run
    /// recorded: the recorded header is resent, never replaced.
    pub fn upgrade_x402(
        &self,
        opts: &X402Options,
        progress: &dyn Fn(&str),
    ) -> Result<UpgradeDone, Error> {
        let key = self.key()?;
        let agent = key.agent_id();
        let record = load_record(&self.state)?;
        let next = decide_x402(record.as_ref(), opts.new)?;
        let deadline = now_ms().saturating_add(opts.timeout.as_millis() as u64);
        let mut r = match (next, record) {
            (X402Next::Done, Some(r)) => {
                progress(&format!(
                    "invoice {} was credited on an earlier run; nothing to pay (--new buys more time)",
                    r.invoice_id()
                ));
                return Ok(UpgradeDone {
                    claimed: r.claimed.unwrap_or_default(),
                    fresh: false,
                });
            }
            (X402Next::Failed, Some(r)) => {
                let f = r.failed.clone().unwrap_or(Failure {
                    status: 0,
                    code: String::new(),
                    detail: String::new(),
                });
                return Err(refused(
                    &format!("the x402 payment of invoice {} (recorded)", r.invoice_id()),
                    f.status,
                    &f.code,
                    &format!("{} (--new starts a new purchase)", f.detail),
                    None,
                ));
            }
            (X402Next::Resend, Some(r)) => {
                let x = r.x402.as_ref().ok_or_else(|| Error::local("no header"))?;
                progress(&format!(
                    "resending the x402 payment recorded by an earlier run for invoice {} \
                     (authorization {}; it is resent, never replaced)",
                    r.invoice_id(),
                    x.nonce
                ));
                if r.invoice_str("plan") != opts.plan.as_str() {
                    progress(&format!(
                        "finishing the recorded payment for plan {} first (never paid twice)",
                        r.invoice_str("plan")
                    ));
                }
                r
            }
            (X402Next::Request { archive, renew }, old) => {
                // The key file and the chain first: a local mistake fails
                // before anything is asked.
                let payer = PayerKey::load(&opts.evm_key)?;
                let chain_id = match (opts.chain_id, &opts.rpc_url) {
                    (Some(id), _) => id,
                    (None, Some(url)) => Rpc::new(self, url).chain_id()?,
                    (None, None) => BASE_CHAIN_ID,
                };
                let price = opts
                    .price
                    .or_else(|| list_price(opts.plan))
                    .ok_or_else(|| Error::local("free is not sold"))?;
                let want = Expect {
                    chain_id,
                    price,
                    pay_to: opts.pay_to.clone(),
                };
                if let (true, Some(old)) = (archive, &old) {
                    archive_record(&self.state, old)?;
                }
                match self.x402_ask(&agent, opts.plan, renew, deadline, opts.poll, progress)? {
                    Asked::Credited(body) => {
                        let mut r = Record::new(json!({
                            "method": "x402",
                            "invoice_id": body.get("invoice_id").cloned().unwrap_or_default(),
                            "agent_id": agent.as_str(),
                            "plan": opts.plan.as_str(),
                        }));
                        r.claimed = Some(body.clone());
                        save_record(&self.state, &r)?;
                        progress(&format!(
                            "the service answered with a recent x402 credit (repeat): {} until {} \
                             (invoice {}); nothing was paid now",
                            str_of(&body, "plan"),
                            str_of(&body, "paid_until"),
                            str_of(&body, "invoice_id")
                        ));
                        self.refresh_head(&agent, progress);
                        return Ok(UpgradeDone {
                            claimed: body,
                            fresh: false,
                        });
                    }
                    Asked::Offer(header) => {
                        let offer = check_offer(&header, &agent, opts.plan, &want)?;
                        progress(&format!(
                            "x402 invoice {}: {} USDC ({}) to {} on eip155:{chain_id}",
                            offer.invoice_id,
                            Usdc(offer.amount),
                            opts.plan.as_str(),
                            offer.pay_to.checksummed()
                        ));
                        let mut nonce = [0u8; 32];
                        getrandom::getrandom(&mut nonce)
                            .map_err(|e| Error::local(format!("no randomness: {e}")))?;
                        let w = Window::at(now_ms() / 1000, &offer, nonce);
                        let signed = sign_payment(&payer, &offer, chain_id, &w)?;
                        let mut r = Record::new(invoice_of(&offer, &agent, opts.plan, chain_id));
                        r.x402 = Some(X402Sent {
                            header: signed.header,
                            from: signed.from.clone(),
                            nonce: signed.nonce.clone(),
                            value: offer.amount.to_string(),
                            valid_before: w.valid_before,
                            signed_at: rfc3339(now_ms()),
                        });
                        // Recorded before it is sent: from now on this
                        // invoice is paid with this authorization or not at all.
                        save_record(&self.state, &r)?;
                        progress(&format!(
                            "signed an EIP-3009 authorization from {} (nonce {}, valid until {})",
                            signed.from,
                            signed.nonce,
                            rfc3339(w.valid_before.saturating_mul(1000))
                        ));
                        if opts.stop_after == Some(StopAfter::Sign) {
                            return Err(Error::local(
                                "stopped after signing (SELFCAP_TEST_STOP_AFTER=sign)",
                            ));
                        }
                        r
                    }
                }
            }
            (_, None) => unreachable!("decide_x402 answers Request only without a record"),
        };
        self.x402_send(&agent, &mut r, deadline, opts.poll, progress)
    }

    fn x402_url(&self, agent: &AgentId, plan: &str, renew: bool) -> Result<String, Error> {
        Ok(format!(
            "{}?plan={plan}&agent_id={}{}",
            self.service_url(X402_PATH)?,
            agent.as_str(),
            if renew { "&renew=1" } else { "" }
        ))
    }

    /// Answers this loop waits out itself.
    fn x402_policy(&self) -> BackoffPolicy {
        BackoffPolicy {
            max_server_wait: Duration::ZERO,
            max_quota_wait: Duration::ZERO,
            ..self.policy().clone()
        }
    }

    /// Waits `wait` (at least `poll`), or fails when the deadline passed.
    fn x402_wait(
        &self,
        deadline: u64,
        poll: Duration,
        wait: Option<Duration>,
        what: &str,
        invoice_id: &str,
        progress: &dyn Fn(&str),
    ) -> Result<(), Error> {
        let left = Duration::from_millis(deadline.saturating_sub(now_ms()));
        if left.is_zero() {
            return Err(timed_out(what, invoice_id));
        }
        let wait = wait.unwrap_or(Duration::from_secs(2)).max(poll).min(left);
        progress(&format!(
            "the service says {what}; asking again in {} s",
            wait.as_secs().max(1)
        ));
        (self.sleeper)(wait);
        Ok(())
    }

    /// POST without a payment: the 402's requirements, or a recent credit.
    fn x402_ask(
        &self,
        agent: &AgentId,
        plan: Tier,
        renew: bool,
        deadline: u64,
        poll: Duration,
        progress: &dyn Fn(&str),
    ) -> Result<Asked, Error> {
        let req = post(self.x402_url(agent, plan.as_str(), renew)?);
        let policy = self.x402_policy();
        loop {
            let (resp, _) = self.exchange_with(&req, &policy)?;
            if resp.status == 200 {
                let body = claim_body(&resp, agent, plan.as_str(), None)?;
                return Ok(Asked::Credited(body));
            }
            let (code, detail, wait) = refusal_parts(&resp);
            if resp.status == 402 && code.as_deref() == Some("x402_payment_required") {
                let header = resp.header(PAYMENT_REQUIRED_HEADER).ok_or_else(|| {
                    Error::Protocol("the 402 carries no PAYMENT-REQUIRED header".into())
                })?;
                return Ok(Asked::Offer(header.to_owned()));
            }
            // A settlement for this plan is in flight (paid from elsewhere,
            // or a record lost): never sign another one; wait for it.
            if code.as_deref() == Some("x402_settlement_pending") {
                self.x402_wait(
                    deadline,
                    poll,
                    wait,
                    &format!("x402_settlement_pending ({detail})"),
                    "",
                    progress,
                )?;
                continue;
            }
            return Err(service_refusal("the x402 request", &req, &resp));
        }
    }

    /// Sends the recorded header until the service answers for it.
    fn x402_send(
        &self,
        agent: &AgentId,
        r: &mut Record,
        deadline: u64,
        poll: Duration,
        progress: &dyn Fn(&str),
    ) -> Result<UpgradeDone, Error> {
        let x = r
            .x402
            .clone()
            .ok_or_else(|| Error::local("no x402 payment recorded"))?;
        let plan = r.invoice_str("plan").to_owned();
        let invoice_id = r.invoice_id().to_owned();
        let req = post(self.x402_url(agent, &plan, false)?)
            .header(PAYMENT_SIGNATURE_HEADER, x.header.clone());
        let policy = self.x402_policy();
        progress(&format!(
            "sending the x402 payment for invoice {invoice_id}"
        ));
        loop {
            let (resp, _) = self.exchange_with(&req, &policy)?;
            let (code, detail, wait) = refusal_parts(&resp);
            match read_answer(resp.status, code.as_deref()) {
                Answer::Credited => {
                    let body = claim_body(&resp, agent, &plan, Some(&invoice_id))?;
                    r.claimed = Some(body.clone());
                    save_record(&self.state, r)?;
                    let tx = resp
                        .header(PAYMENT_RESPONSE_HEADER)
                        .and_then(decode_header)
                        .and_then(|s| {
                            s.get("transaction")
                                .and_then(|t| t.as_str().map(str::to_owned))
                        })
                        .unwrap_or_else(|| str_of(&body, "tx_hash").to_owned());
                    progress(&format!(
                        "credited: {} until {} (invoice {invoice_id}, settled in {tx})",
                        str_of(&body, "plan"),
                        str_of(&body, "paid_until")
                    ));
                    self.refresh_head(agent, progress);
                    return Ok(UpgradeDone {
                        claimed: body,
                        fresh: true,
                    });
                }
                Answer::Resend => {
                    let what = format!(
                        "{} ({detail})",
                        code.unwrap_or_else(|| format!("HTTP {}", resp.status))
                    );
                    self.x402_wait(deadline, poll, wait, &what, &invoice_id, progress)?;
                }
                Answer::Dropped => {
                    let code = code.unwrap_or_default();
                    r.x402_dropped.push(X402Dropped {
                        nonce: x.nonce.clone(),
                        why: code.clone(),
                    });
                    r.x402 = None;
                    save_record(&self.state, r)?;
                    return Err(refused(
                        &format!("the x402 payment of invoice {invoice_id}"),
                        resp.status,
                        &code,
                        &format!(
                            "{detail}; authorization {} moved nothing: run the same command \
                             again to pay the new invoice",
                            x.nonce
                        ),
                        None,
                    ));
                }
                Answer::Failed => {
                    r.failed = Some(Failure {
                        status: resp.status,
                        code: code.unwrap_or_default(),
                        detail,
                    });
                    save_record(&self.state, r)?;
                    return Err(service_refusal("the x402 payment", &req, &resp));
                }
                Answer::Other => {
                    return Err(service_refusal("the x402 payment", &req, &resp));
                }
            }
        }
    }
}

fn post(url: String) -> Request {
    Request {
        method: "POST",
        url,
        headers: Vec::new(),
        body: None,
        signed: false,
    }
}

fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// A 200's body: the claim body of this agent's credit (of `invoice_id`
/// when one was paid here).
fn claim_body(
    resp: &Response,
    agent: &AgentId,
    plan: &str,
    invoice_id: Option<&str>,
) -> Result<Value, Error> {
    let v: Value = serde_json::from_slice(&resp.body)
        .map_err(|e| Error::Protocol(format!("the x402 answer is not JSON: {e}")))?;
    if v.get("accepted") != Some(&Value::Bool(true))
        || str_of(&v, "agent_id") != agent.as_str()
        || str_of(&v, "plan") != plan
        || invoice_id.is_some_and(|id| str_of(&v, "invoice_id") != id)
    {
        return Err(Error::Protocol(format!(
            "the x402 answer does not match the purchase: {}",
            resp.snippet()
        )));
    }
    Ok(v)
}

/// `upgrade.json`'s `invoice` for an x402 purchase: the 402's invoice as
/// this client read it.
fn invoice_of(offer: &Offer, agent: &AgentId, plan: Tier, chain_id: u64) -> Value {
    json!({
        "method": "x402",
        "invoice_id": offer.invoice_id,
        "agent_id": agent.as_str(),
        "plan": plan.as_str(),
        "amount": Usdc(offer.amount).to_string(),
        "amount_atomic": offer.amount.to_string(),
        "asset": "USDC",
        "chain_id": chain_id,
        "network": format!("eip155:{chain_id}"),
        "token_contract": offer.asset.checksummed(),
        "to_address": offer.pay_to.checksummed(),
        "max_timeout_seconds": offer.max_timeout_seconds,
        "resource_url": offer.resource_url,
    })
}
