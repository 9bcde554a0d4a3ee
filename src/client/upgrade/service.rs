//! What the service is asked: the quote request, the claim (also
//! `selfcap upgrade claim` for a payment made elsewhere), and its refusals
//! as [`Error`]s whose exit code is the reason code's class.

use super::now_ms;
use super::record::{load_record, save_record, Failure, Record};
use crate::client::exchange::{protocol_error, unavailable};
use crate::client::http::{Request, Response};
use crate::client::identity::Signer;
use crate::client::wire::Rejected;
use crate::client::{BackoffPolicy, Client, Error};
use crate::core::crypto::AgentId;
use crate::core::jcs;
use crate::core::limits::Tier;
use crate::core::reason::{Class, ReasonCode};
use crate::core::upgrade::claim::{is_invoice_id, sign_claim_as};
use crate::core::upgrade::evm::parse_tx_hash;
use crate::core::urls::{CLAIM_PATH, QUOTE_PATH};
use serde_json::{json, Value};
use std::time::Duration;

/// How long a claim waits, and for what.
#[derive(Debug, Clone, Copy)]
pub struct ClaimWaits {
    /// When waiting for `payment_pending` / `payment_not_found` ends (Unix ms).
    pub deadline: u64,
    /// The shortest pause between two claims.
    pub poll: Duration,
    /// How long the service may answer `payment_provider_unavailable` (it
    /// cannot reach the chain) before the claim gives up with
    /// [`Error::ClaimLater`]: nothing is credited then, the payment is safe,
    /// and the same claim can be sent any time later.
    pub provider: Duration,
}

/// The default `--provider-timeout`: long enough for a provider's blip, short
/// enough that a bot is told to come back rather than left hanging.
pub const PROVIDER_TIMEOUT: Duration = Duration::from_secs(60);

impl Client {
    /// `selfcap upgrade claim`: claims `invoice_id` with a payment made
    /// elsewhere, waiting while the service says it is pending (until
    /// `timeout`) or cannot verify it (until `provider`).
    pub fn upgrade_claim(
        &self,
        invoice_id: &str,
        tx_hash: &str,
        timeout: Duration,
        poll: Duration,
        provider: Duration,
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
        let waits = ClaimWaits {
            deadline: now_ms().saturating_add(timeout.as_millis() as u64),
            poll,
            provider,
        };
        self.claim_inner(&key, &mut r, &tx, &waits, progress, keep)
    }

    /// A checked quote for `plan` (an invoice the service now holds open);
    /// nothing is recorded or paid. For paying elsewhere, then
    /// [`Client::upgrade_claim`].
    pub fn upgrade_quote(&self, plan: Tier) -> Result<Value, Error> {
        let agent = self.agent_id()?;
        let body = self.quote(&agent, plan)?;
        super::quote::check_quote(&body, &agent, plan)?;
        Ok(body)
    }

    /// POST the quote.
    pub(super) fn quote(&self, agent: &AgentId, plan: Tier) -> Result<Value, Error> {
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

    /// Claims (signed with the identity's key), resending the same claim
    /// while the service answers that the payment is pending.
    pub(super) fn claim_until(
        &self,
        key: &Signer,
        r: &mut Record,
        tx_hash: &str,
        waits: &ClaimWaits,
        progress: &dyn Fn(&str),
    ) -> Result<Value, Error> {
        self.claim_inner(key, r, tx_hash, waits, progress, true)
    }

    fn claim_inner(
        &self,
        key: &Signer,
        r: &mut Record,
        tx_hash: &str,
        waits: &ClaimWaits,
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
        // As the agent, with its current key (the service checks it against
        // the agent's key log).
        let body = jcs::canonical_bytes(&sign_claim_as(
            key.key(),
            &key.agent_id(),
            &invoice_id,
            tx_hash,
            seq,
        ));
        let req = Request::json("POST", self.service_url(CLAIM_PATH)?, body);
        progress(&format!("claiming invoice {invoice_id} with {tx_hash}"));
        // This loop waits out the service's own "try again" answers, each
        // under its bound; the exchange underneath only retries what never
        // got an answer (a network error, a 5xx without a wait).
        let policy = BackoffPolicy {
            max_server_wait: Duration::ZERO,
            max_quota_wait: Duration::ZERO,
            ..self.policy().clone()
        };
        // When the current run of payment_provider_unavailable began.
        let mut outage_since: Option<u64> = None;
        loop {
            let (resp, _) = self.exchange_with(&req, &policy)?;
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
            let now = now_ms();
            let mut until = waits.deadline;
            if code.as_deref() == Some("payment_provider_unavailable") {
                let since = *outage_since.get_or_insert(now);
                until = until.min(since.saturating_add(waits.provider.as_millis() as u64));
                if now >= until {
                    return Err(claim_later(
                        &invoice_id,
                        tx_hash,
                        Duration::from_millis(now - since),
                        &detail,
                    ));
                }
            } else {
                outage_since = None;
            }
            match code.as_deref() {
                Some("payment_pending" | "payment_not_found" | "payment_provider_unavailable") => {
                    let wait = wait.unwrap_or(Duration::from_secs(2)).max(waits.poll);
                    let left = Duration::from_millis(until.saturating_sub(now));
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
    pub(super) fn refresh_head(&self, agent: &AgentId, progress: &dyn Fn(&str)) {
        match self.fetch_head(agent, None) {
            Ok(Some(crate::client::HeadOutcome::Changed { head })) => {
                let cache = crate::client::state::HeadCache {
                    etag: head.etag(),
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
}

/// The provider stayed unavailable past `--provider-timeout` (exit 9): what
/// happened, that the payment is safe, and the exact command to claim later.
fn claim_later(invoice_id: &str, tx_hash: &str, waited: Duration, detail: &str) -> Error {
    Error::ClaimLater(format!(
        "the service could not verify the payment on-chain for {} s \
         (payment_provider_unavailable: {detail}); nothing was credited and the payment is safe: \
         it stays on-chain and the invoice can still be claimed with it. Claim it later with: \
         selfcap upgrade claim --invoice {invoice_id} --tx {tx_hash}",
        waited.as_secs()
    ))
}

/// Waiting ran out: class back_off (exit 5); the next run goes on.
pub(super) fn timed_out(what: &str, invoice_id: &str) -> Error {
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
pub(super) fn refusal_parts(resp: &Response) -> (Option<String>, String, Option<Duration>) {
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
pub(super) fn service_refusal(what: &str, req: &Request, resp: &Response) -> Error {
    let (code, detail, wait) = refusal_parts(resp);
    match code {
        Some(code) if ReasonCode::from_wire(&code).is_some() => {
            refused(what, resp.status, &code, &detail, wait)
        }
        _ if resp.status >= 500 => unavailable(req, resp),
        _ => protocol_error(req, resp),
    }
}

pub(super) fn refused(
    what: &str,
    status: u16,
    code: &str,
    detail: &str,
    wait: Option<Duration>,
) -> Error {
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

#[cfg(test)]
mod tests {
    use super::*;

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
