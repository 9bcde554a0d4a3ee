//! The long-poll channel: `GET head.json?wait=N` (or the projected head's
//! `…&wait=N`) with `If-None-Match` of the last delivered cursor (the
//! head's ETag: its hex in double quotes). The service answers 200 with the
//! new head as soon as the cursor differs (at once if it already does), 304
//! after N seconds; head.json answers `404 capsule_not_found` when there is
//! still no capsule after N seconds, the projected head any refusal at once.
//!
//! [`classify`] reads an answer into what the plan needs. Time matters in
//! two places, both guarding against a server that does not hold requests
//! (an older one ignores `wait`):
//!
//! - [`Pacer`]: an answer without a change (a 304, or the last head again)
//!   that came in less than half the wait. The service ends a held poll on
//!   every commit, so one such answer is a commit that kept the cursor (an
//!   identical capsule republished, a tier change) and the next round starts
//!   at once; a second one in a row means the server does not hold, and the
//!   next round waits out the rest of the wait.
//! - A `404 capsule_not_found` that came that soon means "not readable"
//!   rather than "nothing published yet".

use super::super::exchange::{conditional_get, error_code};
use super::super::http::{Request, Response};
use super::followed::Followed;
use super::plan::PollEnd;
use crate::core::jcs::cursor_hex;
use std::time::Duration;

/// The seconds each round asks the service to hold the request (it accepts
/// 1..=30): under common 30 s idle timeouts of proxies and load balancers.
pub const POLL_WAIT_SECS: u64 = 25;

// The service takes waits up to this many seconds.
const _: () = assert!(POLL_WAIT_SECS >= 1 && POLL_WAIT_SECS <= crate::core::watch::WAIT_MAX_SEC);

/// A round's request: `doc_url?wait=N` (`&wait=N` after a query),
/// conditional on `last` (the last head's ETag, or its cursor) when a head
/// was delivered already.
pub fn poll_request(doc_url: &str, wait_secs: u64, last: Option<&str>) -> Request {
    let sep = if doc_url.contains('?') { '&' } else { '?' };
    conditional_get(
        format!("{doc_url}{sep}wait={wait_secs}"),
        last.map(cursor_hex),
    )
}

/// What an answer means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Poll<'a> {
    /// 200: this body is a head to check and deliver.
    Head(&'a [u8]),
    /// 304: the cursor is still the one sent.
    NotModified,
    /// Anything else.
    End(PollEnd),
}

/// Reads `resp` to a poll of `followed`, which took `elapsed` for a
/// request asking to wait `wait`. `seen`: a head was delivered before (its
/// capsule existed).
pub fn classify(
    resp: &Response,
    followed: Followed,
    elapsed: Duration,
    wait: Duration,
    seen: bool,
) -> Poll<'_> {
    let held = elapsed >= wait / 2;
    let code = error_code(resp);
    if resp.status >= 400 && code.as_deref().is_some_and(|c| followed.is_refusal(c)) {
        return Poll::End(PollEnd::Refusal);
    }
    match resp.status {
        200 => Poll::Head(&resp.body),
        304 => Poll::NotModified,
        404 if code.as_deref() == Some("capsule_not_found") => {
            // Capsules are never deleted: gone after being seen is "private now".
            if held && !seen {
                Poll::End(PollEnd::NothingYet)
            } else {
                Poll::End(PollEnd::NotReadable)
            }
        }
        401 => Poll::End(PollEnd::SignatureRefused),
        429 => Poll::End(PollEnd::Busy {
            retry_after: resp.retry_after(),
        }),
        _ => Poll::End(PollEnd::Failed),
    }
}

/// How long to wait before the next round (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Pacer {
    /// Answers in a row that came early without a change.
    early: u32,
}

impl Pacer {
    /// A round brought a new head (or a commit): the next starts at once.
    pub fn changed(&mut self) -> Duration {
        self.early = 0;
        Duration::ZERO
    }

    /// A round that took `elapsed` of `wait` brought no change.
    pub fn unchanged(&mut self, elapsed: Duration, wait: Duration) -> Duration {
        if elapsed >= wait / 2 {
            self.early = 0;
            return Duration::ZERO;
        }
        self.early = self.early.saturating_add(1);
        if self.early >= 2 {
            wait - elapsed
        } else {
            Duration::ZERO
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;
    const WAIT: Duration = Duration::from_secs(POLL_WAIT_SECS);
    const URL: &str = "http://svc.test/self/aa/head.json";
    const HEAD: Followed = Followed::Head;

    fn resp(status: u16, body: &str) -> Response {
        Response {
            status,
            headers: vec![],
            body: body.as_bytes().to_vec(),
        }
    }

    fn inm(req: &Request) -> Option<&str> {
        req.headers
            .iter()
            .find(|(k, _)| k == "if-none-match")
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn if_none_match_is_the_cursor_hex_in_double_quotes() {
        let hex = "0123456789abcdef".repeat(4);
        let r = poll_request(URL, 25, Some(&format!("sha256:{hex}")));
        assert_eq!(r.method, "GET");
        assert_eq!(r.url, format!("{URL}?wait=25"));
        assert_eq!(inm(&r), Some(format!("\"{hex}\"").as_str()));
        assert!(!r.signed);
        // A bare hex cursor is spelled the same.
        assert_eq!(inm(&poll_request(URL, 25, Some(&hex))), inm(&r));
        // Nothing delivered yet: unconditional (answered at once).
        let first = poll_request(URL, 7, None);
        assert_eq!(first.url, format!("{URL}?wait=7"));
        assert_eq!(inm(&first), None);
    }

    #[test]
    fn the_projected_heads_poll_adds_wait_to_its_query() {
        let url = "http://svc.test/api/v1/watch/head?agent_id=aa";
        let hex = "ab".repeat(32);
        let r = poll_request(url, 25, Some(&hex));
        assert_eq!(r.url, format!("{url}&wait=25"));
        assert_eq!(inm(&r), Some(format!("\"{hex}\"").as_str()));
    }

    #[test]
    fn a_feeds_refusal_ends_its_watch_and_is_only_a_failure_for_head_json() {
        const FEED: Followed = Followed::FeedHead;
        for (status, code) in [
            (402, "watch_requires_pro"),
            (404, "watch_not_set"),
            (503, "watch_not_configured"),
        ] {
            let r = resp(status, &format!(r#"{{"error":"{code}"}}"#));
            assert_eq!(
                classify(&r, FEED, S(0), WAIT, true),
                Poll::End(PollEnd::Refusal)
            );
            assert_eq!(
                classify(&r, HEAD, S(0), WAIT, true),
                Poll::End(PollEnd::Failed)
            );
        }
        // Anything else reads as for head.json: retried, or decided apart.
        let busy = resp(503, r#"{"error":"upstream_unavailable"}"#);
        assert_eq!(
            classify(&busy, FEED, S(0), WAIT, true),
            Poll::End(PollEnd::Failed)
        );
        let nf = resp(404, r#"{"error":"capsule_not_found"}"#);
        assert_eq!(
            classify(&nf, FEED, S(0), WAIT, false),
            Poll::End(PollEnd::NotReadable)
        );
        assert_eq!(
            classify(&resp(304, ""), FEED, S(25), WAIT, true),
            Poll::NotModified
        );
    }

    #[test]
    fn answers() {
        let head = resp(200, "{}");
        assert_eq!(classify(&head, HEAD, S(0), WAIT, true), Poll::Head(b"{}"));
        let busy = Response {
            headers: vec![("retry-after".into(), "12".into())],
            ..resp(429, "")
        };
        assert_eq!(
            classify(&busy, HEAD, S(0), WAIT, true),
            Poll::End(PollEnd::Busy {
                retry_after: Some(S(12))
            })
        );
        for status in [500, 503, 400, 405, 302] {
            assert_eq!(
                classify(&resp(status, ""), HEAD, S(1), WAIT, true),
                Poll::End(PollEnd::Failed),
                "{status}"
            );
        }
        let sig = resp(401, r#"{"error":"read_signature_invalid"}"#);
        assert_eq!(
            classify(&sig, HEAD, S(0), WAIT, false),
            Poll::End(PollEnd::SignatureRefused)
        );
        // A 404 that is not capsule_not_found (a server without the route).
        assert_eq!(
            classify(
                &resp(404, r#"{"error":"not_found"}"#),
                HEAD,
                S(0),
                WAIT,
                false
            ),
            Poll::End(PollEnd::Failed)
        );
    }

    #[test]
    fn early_answers_without_a_change_are_paced_from_the_second_in_a_row() {
        assert_eq!(
            classify(&resp(304, ""), HEAD, S(0), WAIT, true),
            Poll::NotModified
        );
        let mut p = Pacer::default();
        // Held for the wait: never paced.
        assert_eq!(p.unchanged(WAIT, WAIT), S(0));
        assert_eq!(p.unchanged(S(13), WAIT), S(0));
        // One early answer: a commit that kept the cursor. At once.
        assert_eq!(p.unchanged(S(0), WAIT), S(0));
        // Two in a row: a server that does not hold. The rest of the wait.
        assert_eq!(p.unchanged(S(2), WAIT), S(23));
        assert_eq!(p.unchanged(S(0), WAIT), WAIT);
        // A held answer or a change starts over.
        assert_eq!(p.unchanged(WAIT, WAIT), S(0));
        assert_eq!(p.unchanged(S(1), WAIT), S(0));
        assert_eq!(p.changed(), S(0));
        assert_eq!(p.unchanged(S(1), WAIT), S(0));
    }

    #[test]
    fn a_404_is_nothing_yet_only_after_the_wait_and_before_any_head() {
        let nf = resp(404, r#"{"error":"capsule_not_found","detail":"x"}"#);
        assert_eq!(
            classify(&nf, HEAD, WAIT, WAIT, false),
            Poll::End(PollEnd::NothingYet)
        );
        assert_eq!(
            classify(&nf, HEAD, S(1), WAIT, false),
            Poll::End(PollEnd::NotReadable)
        );
        assert_eq!(
            classify(&nf, HEAD, WAIT, WAIT, true),
            Poll::End(PollEnd::NotReadable)
        );
    }
}
