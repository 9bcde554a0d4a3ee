//! The request plumbing every read and write shares: the service's URLs
//! (spelled by [`crate::core::urls`], as the Worker routes them), the retry
//! loop under the [`BackoffPolicy`](super::BackoffPolicy), conditional GETs,
//! and the mapping of a failed answer to an [`Error`].

use super::backoff::{Decision, Outcome};
use super::http::{Request, Response};
use super::{Client, Error};
use crate::core::crypto::AgentId;
use crate::core::jcs::cursor_hex;
use crate::core::reason::ReasonCode;
use crate::core::urls::Doc;
use std::time::Duration;

/// A retry about to happen (for progress output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryNote {
    pub method: &'static str,
    pub url: String,
    /// The attempt that just failed (1-based) and the total allowed.
    pub attempt: u32,
    pub max_attempts: u32,
    /// "HTTP 503" or the network error.
    pub reason: String,
    pub wait: Duration,
}

impl Client {
    /// The absolute URL of one of `agent`'s documents.
    pub fn doc_url(&self, agent: &AgentId, doc: Doc) -> Result<String, Error> {
        Ok(format!("{}{}", self.base_url()?, doc.path(agent.as_str())))
    }

    pub fn head_url(&self, agent: &AgentId) -> Result<String, Error> {
        self.doc_url(agent, Doc::Head)
    }

    pub fn capsule_url(&self, agent: &AgentId) -> Result<String, Error> {
        self.doc_url(agent, Doc::Capsule)
    }

    /// The absolute URL of a service route (`urls::BOOTSTRAP_PATH`, …).
    pub(super) fn service_url(&self, path: &str) -> Result<String, Error> {
        Ok(format!("{}{path}", self.base_url()?))
    }

    /// Sends `req` under the retry policy. `Ok` carries the last answer
    /// (which may be a 429 or 5xx the policy gave up on) and whether an
    /// earlier attempt failed in a way that may have applied the request.
    pub(super) fn exchange(&self, req: &Request) -> Result<(Response, bool), Error> {
        let max = self.policy.max_attempts.max(1);
        let mut uncertain = false;
        let mut attempt = 1;
        loop {
            let (decision, reason, result) = match self.transport.send(req) {
                Ok(resp) => {
                    let outcome = Outcome::Status {
                        status: resp.status,
                        retry_after: resp.retry_after(),
                    };
                    let reason = format!("HTTP {}", resp.status);
                    (self.policy.decide(attempt, outcome), reason, Ok(resp))
                }
                Err(e) => (
                    self.policy.decide(attempt, Outcome::Network),
                    e.to_string(),
                    Err(e),
                ),
            };
            match (decision, result) {
                (Decision::Retry(wait), result) => {
                    // A network error or a 5xx may have been applied anyway.
                    uncertain |= result.as_ref().map_or(true, |r| r.status >= 500);
                    if let Some(f) = &self.on_retry {
                        f(&RetryNote {
                            method: req.method,
                            url: req.url.clone(),
                            attempt,
                            max_attempts: max,
                            reason,
                            wait,
                        });
                    }
                    (self.sleeper)(wait);
                    attempt += 1;
                }
                (_, Ok(resp)) => return Ok((resp, uncertain)),
                (_, Err(e)) => {
                    let tries = if attempt == 1 {
                        "1 attempt".to_string()
                    } else {
                        format!("{attempt} attempts")
                    };
                    return Err(Error::Unavailable(format!(
                        "service unreachable: {} {}: {e} ({tries})",
                        req.method, req.url
                    )));
                }
            }
        }
    }

    /// GET that must answer 200; the body.
    pub(super) fn read_ok(&self, req: &Request) -> Result<Vec<u8>, Error> {
        let (resp, _) = self.exchange(req)?;
        if resp.status != 200 {
            return Err(read_error(req, &resp));
        }
        Ok(resp.body)
    }
}

/// A GET of `url`, conditional on `etag` (a cursor's hex) when given.
pub(super) fn conditional_get(url: String, etag: Option<&str>) -> Request {
    let req = Request::get(url);
    match etag {
        Some(tag) => req.header("if-none-match", format!("\"{tag}\"")),
        None => req,
    }
}

/// Whether an `ETag` value (quoted or not, weak or strong) names `cursor`.
pub(super) fn etag_names(tag: &str, cursor: &str) -> bool {
    let tag = tag.trim().trim_start_matches("W/").trim_matches('"');
    cursor_hex(tag) == cursor_hex(cursor)
}

/// Maps a non-success answer of a read to an error.
pub(super) fn read_error(req: &Request, resp: &Response) -> Error {
    let code = serde_json::from_slice::<serde_json::Value>(&resp.body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned));
    match (resp.status, code.as_deref()) {
        (s, _) if s >= 500 => unavailable(req, resp),
        (404, Some("capsule_not_found")) => Error::NotFound(format!(
            "no capsule published yet at {} (capsule_not_found)",
            req.url
        )),
        (404 | 410, Some(c @ ("cursor_not_found" | "snapshot_not_found"))) => {
            Error::NotFound(format!(
                "{c}: {}",
                ReasonCode::from_wire(c).map_or("", ReasonCode::bot_action)
            ))
        }
        (_, Some(c)) if ReasonCode::from_wire(c).is_some() => Error::Protocol(format!(
            "{} {} answered HTTP {} {c}: {}",
            req.method,
            req.url,
            resp.status,
            ReasonCode::from_wire(c).map_or("", ReasonCode::bot_action)
        )),
        _ => protocol_error(req, resp),
    }
}

/// An answer the contract does not describe (status without a known code).
pub(super) fn protocol_error(req: &Request, resp: &Response) -> Error {
    Error::Protocol(format!(
        "{} {} answered HTTP {}: {}",
        req.method,
        req.url,
        resp.status,
        resp.snippet()
    ))
}

/// A 5xx the retry policy gave up on.
pub(super) fn unavailable(req: &Request, resp: &Response) -> Error {
    let wait = resp
        .retry_after()
        .map(|d| format!("; retry after {} s", d.as_secs()))
        .unwrap_or_default();
    Error::Unavailable(format!(
        "service failing: {} {} answered HTTP {}{wait}",
        req.method, req.url, resp.status
    ))
}

/// Sleeps `d` plus up to 20% random jitter (so a fleet does not retry in
/// lockstep); never less than asked.
pub(super) fn sleep_with_jitter(d: Duration) {
    let mut b = [0u8; 2];
    let frac = match getrandom::getrandom(&mut b) {
        Ok(()) => u16::from_le_bytes(b) as f64 / u16::MAX as f64,
        Err(_) => 0.0,
    };
    std::thread::sleep(d + d.mul_f64(0.2 * frac));
}
