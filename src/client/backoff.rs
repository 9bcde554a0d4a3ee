//! The retry policy, as a pure decision function (no clock, no network), so
//! every rule is unit-tested:
//!
//! - 2xx/3xx: done. Any 4xx except 429: final, never retried (every
//!   rejection is deterministic; resending it only feeds the cooldown).
//! - 429: wait exactly what the service said (`retry_after_sec` /
//!   `Retry-After`) and retry, but only when that wait is within
//!   [`BackoffPolicy::max_quota_wait`] (default 0: report, do not sleep).
//! - 5xx and network errors: capped exponential backoff
//!   (`base_delay * 2^(attempt-1)`, at most `max_delay`), never shorter than
//!   a 5xx's own `retry_after_sec`; a 5xx asking for more than
//!   `max_server_wait` is reported instead.
//! - At most `max_attempts` attempts in all.
//!
//! Also what a retry looks like from outside: the [`RetryNote`] a caller is
//! shown before each one, and the jitter added to each wait
//! ([`with_jitter`]), so a fleet does not retry in lockstep.

use std::time::Duration;

/// How hard to try. See the module docs for the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// Attempts in all, the first included (>= 1).
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubles for each further one.
    pub base_delay: Duration,
    /// Cap on the computed backoff.
    pub max_delay: Duration,
    /// Longest `retry_after_sec` of a 5xx that is waited out.
    pub max_server_wait: Duration,
    /// Longest `retry_after_sec` of a 429 that is waited out (0: never wait).
    pub max_quota_wait: Duration,
}

impl Default for BackoffPolicy {
    /// 4 attempts, 0.5 s doubling to at most 8 s, honour a 5xx's
    /// Retry-After up to 60 s, never sleep on a 429.
    fn default() -> Self {
        BackoffPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_server_wait: Duration::from_secs(60),
            max_quota_wait: Duration::ZERO,
        }
    }
}

/// What one attempt produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// An HTTP answer, with the wait the service asked for, if any.
    Status {
        /// The HTTP status code: it alone decides final, retry or give up.
        status: u16,
        /// The wait the answer asked for (`retry_after_sec` or
        /// `Retry-After`), which a 429 is retried after exactly and a 5xx
        /// never sooner than.
        retry_after: Option<Duration>,
    },
    /// No HTTP answer (connect, TLS, timeout, reset).
    Network,
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Use this answer as it is (success, or a final rejection).
    Final,
    /// Sleep this long, then try again.
    Retry(Duration),
    /// Stop trying; the last answer (if any) stands.
    GiveUp(GiveUp),
}

/// Why a retryable outcome is not retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    /// `max_attempts` reached.
    AttemptsExhausted,
    /// The service asked for a longer wait than the policy allows.
    WaitTooLong(Duration),
}

impl BackoffPolicy {
    /// A policy that never retries anything.
    pub fn no_retries() -> BackoffPolicy {
        BackoffPolicy {
            max_attempts: 1,
            ..BackoffPolicy::default()
        }
    }

    /// The computed backoff after failed attempt number `attempt` (1-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(30);
        self.base_delay
            .saturating_mul(1u32 << doublings)
            .min(self.max_delay)
    }

    /// The decision after attempt number `attempt` (1-based) ended in `outcome`.
    pub fn decide(&self, attempt: u32, outcome: Outcome) -> Decision {
        let last = attempt >= self.max_attempts.max(1);
        match outcome {
            Outcome::Status { status, .. } if status < 400 => Decision::Final,
            Outcome::Status {
                status: 429,
                retry_after,
            } => {
                let wait = retry_after.unwrap_or_else(|| self.delay(attempt));
                if wait > self.max_quota_wait {
                    Decision::GiveUp(GiveUp::WaitTooLong(wait))
                } else if last {
                    Decision::GiveUp(GiveUp::AttemptsExhausted)
                } else {
                    Decision::Retry(wait)
                }
            }
            Outcome::Status { status, .. } if status < 500 => Decision::Final,
            Outcome::Status { retry_after, .. } => {
                let asked = retry_after.unwrap_or(Duration::ZERO);
                if asked > self.max_server_wait.max(self.max_quota_wait) {
                    Decision::GiveUp(GiveUp::WaitTooLong(asked))
                } else if last {
                    Decision::GiveUp(GiveUp::AttemptsExhausted)
                } else {
                    Decision::Retry(self.delay(attempt).max(asked))
                }
            }
            Outcome::Network if last => Decision::GiveUp(GiveUp::AttemptsExhausted),
            Outcome::Network => Decision::Retry(self.delay(attempt)),
        }
    }
}

/// A retry about to happen (for progress output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryNote {
    /// The HTTP method being retried (a `PUT` retry is not a second write:
    /// the same signed envelope is resent).
    pub method: &'static str,
    /// The absolute URL being retried.
    pub url: String,
    /// The attempt that just failed (1-based) and the total allowed.
    pub attempt: u32,
    /// [`BackoffPolicy::max_attempts`] of the policy in force.
    pub max_attempts: u32,
    /// "HTTP 503" or the network error.
    pub reason: String,
    /// How long the client sleeps before the next attempt (jitter not
    /// included: it is added by the sleeper).
    pub wait: Duration,
}

/// Sleeps `d` plus up to 20% random jitter (so a fleet does not retry in
/// lockstep); never less than asked.
pub(super) fn sleep_with_jitter(d: Duration) {
    std::thread::sleep(with_jitter(d));
}

/// `d` plus up to 20% random jitter: how long the default sleeper waits
/// when asked for `d` (a sleeper of one's own, e.g. one that can be woken
/// early, waits this long to back off the same way).
pub fn with_jitter(d: Duration) -> Duration {
    let mut b = [0u8; 2];
    let frac = match getrandom::getrandom(&mut b) {
        Ok(()) => u16::from_le_bytes(b) as f64 / u16::MAX as f64,
        Err(_) => 0.0,
    };
    d + d.mul_f64(0.2 * frac)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;
    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn status(status: u16, retry_after: Option<u64>) -> Outcome {
        Outcome::Status {
            status,
            retry_after: retry_after.map(S),
        }
    }

    #[test]
    fn success_and_not_modified_are_final() {
        let p = BackoffPolicy::default();
        for s in [200, 204, 304] {
            assert_eq!(p.decide(1, status(s, None)), Decision::Final);
        }
    }

    #[test]
    fn client_errors_other_than_429_are_never_retried() {
        let p = BackoffPolicy {
            max_quota_wait: S(3600),
            ..BackoffPolicy::default()
        };
        for s in [400, 401, 404, 405, 409, 413, 422] {
            assert_eq!(p.decide(1, status(s, None)), Decision::Final, "{s}");
            // Even when a retry_after is (oddly) present.
            assert_eq!(p.decide(1, status(s, Some(1))), Decision::Final, "{s}");
        }
    }

    #[test]
    fn a_429_is_reported_not_slept_on_by_default() {
        let p = BackoffPolicy::default();
        assert_eq!(
            p.decide(1, status(429, Some(86_399))),
            Decision::GiveUp(GiveUp::WaitTooLong(S(86_399)))
        );
        assert_eq!(
            p.decide(1, status(429, Some(1))),
            Decision::GiveUp(GiveUp::WaitTooLong(S(1)))
        );
    }

    #[test]
    fn a_429_within_the_allowed_wait_is_retried_after_exactly_that_wait() {
        let p = BackoffPolicy {
            max_quota_wait: S(120),
            ..BackoffPolicy::default()
        };
        assert_eq!(p.decide(1, status(429, Some(90))), Decision::Retry(S(90)));
        assert_eq!(p.decide(1, status(429, Some(120))), Decision::Retry(S(120)));
        assert_eq!(
            p.decide(1, status(429, Some(121))),
            Decision::GiveUp(GiveUp::WaitTooLong(S(121)))
        );
        // Without a retry_after the backoff applies.
        assert_eq!(p.decide(2, status(429, None)), Decision::Retry(S(1)));
        // The attempt cap still holds.
        assert_eq!(
            p.decide(4, status(429, Some(5))),
            Decision::GiveUp(GiveUp::AttemptsExhausted)
        );
    }

    #[test]
    fn server_errors_back_off_exponentially_with_a_cap() {
        let p = BackoffPolicy {
            max_attempts: 10,
            ..BackoffPolicy::default()
        };
        let waits: Vec<Decision> = (1..=6).map(|a| p.decide(a, status(503, None))).collect();
        assert_eq!(
            waits,
            [MS(500), S(1), S(2), S(4), S(8), S(8)].map(Decision::Retry)
        );
        assert_eq!(p.decide(1, status(500, None)), Decision::Retry(MS(500)));
    }

    #[test]
    fn a_5xx_retry_after_is_a_floor_and_too_long_waits_are_reported() {
        let p = BackoffPolicy::default();
        assert_eq!(p.decide(1, status(503, Some(3))), Decision::Retry(S(3)));
        assert_eq!(p.decide(3, status(503, Some(1))), Decision::Retry(S(2)));
        assert_eq!(p.decide(1, status(503, Some(60))), Decision::Retry(S(60)));
        assert_eq!(
            p.decide(1, status(503, Some(61))),
            Decision::GiveUp(GiveUp::WaitTooLong(S(61)))
        );
    }

    #[test]
    fn network_errors_retry_until_the_attempt_cap() {
        let p = BackoffPolicy::default();
        assert_eq!(p.decide(1, Outcome::Network), Decision::Retry(MS(500)));
        assert_eq!(p.decide(2, Outcome::Network), Decision::Retry(S(1)));
        assert_eq!(p.decide(3, Outcome::Network), Decision::Retry(S(2)));
        assert_eq!(
            p.decide(4, Outcome::Network),
            Decision::GiveUp(GiveUp::AttemptsExhausted)
        );
        let once = BackoffPolicy::no_retries();
        assert_eq!(
            once.decide(1, Outcome::Network),
            Decision::GiveUp(GiveUp::AttemptsExhausted)
        );
        assert_eq!(
            once.decide(1, status(503, None)),
            Decision::GiveUp(GiveUp::AttemptsExhausted)
        );
    }

    #[test]
    fn delays_never_overflow() {
        let p = BackoffPolicy {
            base_delay: S(u64::MAX / 4),
            max_delay: S(30),
            ..BackoffPolicy::default()
        };
        assert_eq!(p.delay(u32::MAX), S(30));
        assert_eq!(BackoffPolicy::default().delay(0), MS(500));
    }
}
