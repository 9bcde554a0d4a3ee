//! The request plumbing every read and write shares: the service's URLs
//! (spelled by [`crate::core::urls`], as the Worker routes them), the retry
//! loop under the [`BackoffPolicy`](super::BackoffPolicy), conditional GETs,
//! and the mapping of a failed answer to an [`Error`].

use super::backoff::{BackoffPolicy, Decision, Outcome, RetryNote};
use super::http::{Request, Response};
use super::identity::Signer;
use super::{read_sign, Client, Error};
use crate::core::crypto::AgentId;
use crate::core::jcs::cursor_hex;
use crate::core::reason::ReasonCode;
use crate::core::urls::Doc;

impl Client {
    /// The absolute URL of one of `agent`'s documents.
    pub fn doc_url(&self, agent: &AgentId, doc: Doc) -> Result<String, Error> {
        Ok(format!("{}{}", self.base_url()?, doc.path(agent.as_str())))
    }

    /// `agent`'s head.json: the small document every poll and conditional
    /// read starts from.
    pub fn head_url(&self, agent: &AgentId) -> Result<String, Error> {
        self.doc_url(agent, Doc::Head)
    }

    /// `agent`'s capsule.json: the current capsule itself.
    pub fn capsule_url(&self, agent: &AgentId) -> Result<String, Error> {
        self.doc_url(agent, Doc::Capsule)
    }

    /// `agent`'s keys.json: its key log, and where key events are posted.
    pub fn keys_url(&self, agent: &AgentId) -> Result<String, Error> {
        self.doc_url(agent, Doc::KeyLog)
    }

    /// The absolute URL of a service route (`urls::BOOTSTRAP_PATH`, …).
    pub(super) fn service_url(&self, path: &str) -> Result<String, Error> {
        Ok(format!("{}{path}", self.base_url()?))
    }

    /// Sends `req` under the retry policy. `Ok` carries the last answer
    /// (which may be a 429 or 5xx the policy gave up on) and whether an
    /// earlier attempt failed in a way that may have applied the request.
    ///
    /// A `signed` request is signed afresh on every attempt (new nonce, new
    /// `created`): the service refuses a nonce it has seen, and a lost answer
    /// does not tell whether the first one arrived.
    pub(super) fn exchange(&self, req: &Request) -> Result<(Response, bool), Error> {
        self.exchange_with(req, &self.policy)
    }

    /// [`Client::exchange`] under another policy (a caller that waits out
    /// some answers itself, with its own bound).
    pub(super) fn exchange_with(
        &self,
        req: &Request,
        policy: &BackoffPolicy,
    ) -> Result<(Response, bool), Error> {
        let max = policy.max_attempts.max(1);
        let key = if req.signed { Some(self.key()?) } else { None };
        let mut uncertain = false;
        let mut attempt = 1;
        loop {
            let attempt_req;
            let sent = match &key {
                Some(k) => {
                    attempt_req = with_read_signature(req, k)?;
                    &attempt_req
                }
                None => req,
            };
            let (decision, reason, result) = match self.transport.send(sent) {
                Ok(resp) => {
                    let outcome = Outcome::Status {
                        status: resp.status,
                        retry_after: resp.retry_after(),
                    };
                    let reason = format!("HTTP {}", resp.status);
                    (policy.decide(attempt, outcome), reason, Ok(resp))
                }
                Err(e) => (
                    policy.decide(attempt, Outcome::Network),
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
        answer_ok(req, resp)
    }

    /// A read of one of `agent`'s documents, signed when it needs to be
    /// (docs/PROTOCOL.md §12). Signed from the start: our own documents
    /// while the state directory says our capsule is private. Otherwise
    /// unsigned first (a public read stays cacheable and anonymous), and a
    /// `404 capsule_not_found` is asked once more, signed, when this client
    /// has a key: a private capsule answers exactly like a missing one, and
    /// we may be a granted reader (or our own capsule went private from
    /// elsewhere). Returns the request last sent, for error messages.
    pub(super) fn read_doc(
        &self,
        agent: &AgentId,
        req: Request,
    ) -> Result<(Request, Response), Error> {
        self.read_doc_unless(agent, req, is_capsule_not_found)
    }

    /// [`Client::read_doc`], asking once more, signed, also when `unsigned`
    /// says the unsigned answer may not be all a signer would get.
    fn read_doc_unless(
        &self,
        agent: &AgentId,
        req: Request,
        unsigned: impl Fn(&Response) -> bool,
    ) -> Result<(Request, Response), Error> {
        let first = self.signs_reads_of(agent);
        let req = req.signed(first);
        let (resp, _) = self.exchange(&req)?;
        if first || !unsigned(&resp) || self.key().is_err() {
            return Ok((req, resp));
        }
        let req = req.signed(true);
        let (resp, _) = self.exchange(&req)?;
        Ok((req, resp))
    }

    /// [`Client::read_doc`] of a history document (history.json,
    /// export.json) that must answer 200; the body. An unsigned answer that
    /// withholds versions (written private, docs/PROTOCOL.md §9) is asked
    /// once more, signed, like a 404, when this client has a key, in case
    /// they were written for it (or by it).
    pub(super) fn read_history_ok(&self, agent: &AgentId, req: Request) -> Result<Vec<u8>, Error> {
        let withholds = |r: &Response| {
            r.status == 200
                && r.body
                    .windows(WITHHELD_MARK.len())
                    .any(|w| w == WITHHELD_MARK)
        };
        let (sent, resp) =
            self.read_doc_unless(agent, req, |r| is_capsule_not_found(r) || withholds(r))?;
        answer_ok(&sent, resp)
    }

    /// Whether reads of `agent` are signed from the first attempt: only our
    /// own, and only when the last accepted or the desired capsule is
    /// private. Best effort: unreadable local state just means "unsigned
    /// first", which the 404 retry in [`Client::read_doc`] makes up for.
    pub(super) fn signs_reads_of(&self, agent: &AgentId) -> bool {
        if self.agent_id().ok().as_ref() != Some(agent) {
            return false;
        }
        let published = self.state.published().ok().flatten().map(|p| p.capsule);
        let desired = self.state.desired().ok().flatten();
        [published, desired]
            .iter()
            .flatten()
            .any(super::access::is_private)
    }
}

/// How a withheld version reads in a history document's compact JSON.
const WITHHELD_MARK: &[u8] = b"\"withheld\":true";

/// The body of a 200, or the error the answer means.
fn answer_ok(req: &Request, resp: Response) -> Result<Vec<u8>, Error> {
    if resp.status != 200 {
        return Err(read_error(req, &resp));
    }
    Ok(resp.body)
}

/// `req` with a fresh read signature (§12) over its method and URL.
fn with_read_signature(req: &Request, key: &Signer) -> Result<Request, Error> {
    let mut signed = req.clone();
    signed
        .headers
        .extend(read_sign::sign_read(key, req.method, &req.url)?);
    Ok(signed)
}

/// The error code of a JSON error body.
pub(super) fn error_code(resp: &Response) -> Option<String> {
    serde_json::from_slice::<serde_json::Value>(&resp.body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
}

/// `404 {"error":"capsule_not_found"}`: nothing published, or private.
fn is_capsule_not_found(resp: &Response) -> bool {
    resp.status == 404 && error_code(resp).as_deref() == Some("capsule_not_found")
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
    let code = error_code(resp);
    match (resp.status, code.as_deref()) {
        (s, _) if s >= 500 => unavailable(req, resp),
        // Signed, it may also be a private capsule we may not read: the
        // service answers both alike on purpose (§12).
        (404, Some("capsule_not_found")) if req.signed => Error::NotFound(format!(
            "no capsule at {}, or it is private and this identity is not granted that read (capsule_not_found)",
            req.url
        )),
        (404, Some("capsule_not_found")) => Error::NotFound(format!(
            "no capsule published yet at {} (capsule_not_found)",
            req.url
        )),
        (401, Some(c)) if c.starts_with("read_signature_") => Error::ReadSignature(format!(
            "the service refused this read's signature: {} {} answered HTTP 401 {c}: {}",
            req.method,
            req.url,
            read_signature_action(c)
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

/// What to do about a refused read signature (§12's three codes).
fn read_signature_action(code: &str) -> &'static str {
    match code {
        "read_signature_expired" => {
            "its created time is outside the service's 300 s window: check this machine's clock"
        }
        "read_signature_replayed" => "its nonce was used before: send the read again",
        _ => "check the key file and that the URL signed is the URL sent",
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
