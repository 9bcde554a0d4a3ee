//! The watch's decisions, as a pure state machine (no clock read, no
//! network), so every rule is unit-tested: which channel to use, when to
//! sign, how long to wait before the next attempt, and when to stop.
//!
//! - A WebSocket connection that delivered a frame (a head or a `pong`) was
//!   healthy: the backoff and the failure count start over.
//! - Close 4404, or a `404 capsule_not_found` (upgrade or long-poll): the
//!   capsule is not readable unsigned. Asked once more at once, signed, when
//!   there is a key (we may be a granted reader); then it is final (exit 7).
//!   A long-poll's 404 after the whole wait ("nothing published yet") is
//!   never final, but it too turns signing on when there is a key.
//! - Close 4429 (too many watchers): `auto` falls back to long-poll; a forced
//!   WebSocket waits the longest backoff before trying again.
//! - The upgrade answered with another status (426, 429, 5xx, an old server
//!   without the route): `auto` falls back to long-poll at once.
//! - Any other close, a network error or a dropped connection: reconnect
//!   with capped exponential backoff; `auto` falls back to long-poll after
//!   [`FALLBACK_AFTER`] such failures in a row.
//! - On long-poll, `auto` tries WebSocket again every [`WS_RETRY_EVERY`]; one
//!   failure then sends it straight back.
//! - Long-poll failures (network, 5xx, unexpected answers) back off the same
//!   way; a 429 waits at least its `Retry-After`.
//! - A refusal of the followed document (`Followed::is_refusal`: the
//!   projected feed's `watch_requires_pro`, `watch_not_set`, …, answered to
//!   the upgrade or a long-poll, or named by a close) stops at once: reading
//!   again would be refused the same way.
//!
//! Nothing but "not readable", a refused signature and such a refusal ever
//! stops the watch.

use super::super::backoff::BackoffPolicy;
use std::time::Duration;

/// WebSocket failures in a row (no frame delivered) before `auto` falls back.
pub const FALLBACK_AFTER: u32 = 3;
/// How long `auto` stays on long-poll before trying WebSocket again.
pub const WS_RETRY_EVERY: Duration = Duration::from_secs(300);

/// The reconnect schedule: 1 s doubling to at most 60 s (plus the sleeper's
/// jitter). Only [`BackoffPolicy::delay`] is used: a watch never gives up.
pub fn reconnect_policy() -> BackoffPolicy {
    BackoffPolicy {
        max_attempts: u32::MAX,
        base_delay: Duration::from_secs(1),
        max_delay: Duration::from_secs(60),
        ..BackoffPolicy::default()
    }
}

/// How heads arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// `GET /self/{id}/watch` upgraded: the server pushes each head.
    WebSocket,
    /// `GET head.json?wait=N` with `If-None-Match`, in a loop.
    LongPoll,
}

/// Which channels a watch may use (`--transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChannelChoice {
    /// WebSocket, falling back to long-poll (and back again).
    #[default]
    Auto,
    /// This channel only.
    Only(Channel),
}

/// How a WebSocket attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WsEnd {
    /// The upgrade was answered with another status than 101.
    Refused {
        /// The HTTP status: a 404 or 401 may end the watch (see the module
        /// docs); anything else sends `auto` to long-poll.
        status: u16,
        /// The JSON body's `error`.
        code: Option<String>,
        /// The wait the answer asked for (`retry_after_sec` or
        /// `Retry-After`), if any.
        retry_after: Option<Duration>,
    },
    /// The server closed the connection with this code (`None`: no code).
    Closed {
        /// The close code; the service's own are
        /// [`crate::core::watch::Close`]'s (4404 not readable, 4429 too many
        /// watchers), anything else is reconnected after a backoff.
        code: Option<u16>,
        /// The close frame's reason text, for the progress note.
        reason: String,
    },
    /// No connection, or it broke (network, TLS, timeout, no pong).
    Lost(String),
    /// The followed document's reads are refused (the upgrade answered, or
    /// the socket closed, with one of its refusals).
    Refusal,
}

/// How a long-poll round ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollEnd {
    /// 200 (a head) or 304: the next round starts after `pace` (non-zero
    /// only for a server that does not hold requests, see `longpoll::Pacer`:
    /// do not poll it in a tight loop).
    Answered {
        /// The least time before the next round.
        pace: Duration,
    },
    /// `404 capsule_not_found` after the whole wait: nothing published yet.
    NothingYet,
    /// `404 capsule_not_found` at once, or after a head was seen: not
    /// readable (private), or not there.
    NotReadable,
    /// `401 read_signature_*`.
    SignatureRefused,
    /// 429: wait at least `retry_after`.
    Busy {
        /// The service's `retry_after_sec`, if it sent one.
        retry_after: Option<Duration>,
    },
    /// The client's own retries gave up, or an unexpected answer.
    Failed,
    /// One of the followed document's refusals.
    Refusal,
}

/// What the loop does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Go on (on [`Plan::channel`]) after this wait; zero: at once.
    After(Duration),
    /// Stop: the capsule is not readable by this watcher (exit 7).
    NotReadable,
    /// Stop: the service refused the read signature (exit 6).
    SignatureRefused,
    /// Stop: the read is refused (the answer's error, as a read's).
    Refused,
}

/// The watch's state across connections.
#[derive(Debug, Clone)]
pub struct Plan {
    choice: ChannelChoice,
    channel: Channel,
    has_key: bool,
    signed: bool,
    policy: BackoffPolicy,
    /// Failed attempts in a row, either channel (the backoff's exponent).
    failures: u32,
    /// WebSocket attempts in a row that ended before a frame arrived.
    ws_failures: u32,
    /// When `auto` last fell back to long-poll (the caller's clock).
    fell_back_at: Option<Duration>,
}

impl Plan {
    /// `has_key`: a read can be signed. `signed`: sign from the start (our
    /// own capsule, known to be private).
    pub fn new(choice: ChannelChoice, has_key: bool, signed: bool) -> Plan {
        Plan {
            choice,
            channel: match choice {
                ChannelChoice::Only(c) => c,
                ChannelChoice::Auto => Channel::WebSocket,
            },
            has_key,
            signed: signed && has_key,
            policy: reconnect_policy(),
            failures: 0,
            ws_failures: 0,
            fell_back_at: None,
        }
    }

    /// The channel the next attempt uses (fixed by `--channel`, else it
    /// moves between WebSocket and long-poll as attempts fail).
    pub fn channel(&self) -> Channel {
        self.channel
    }

    /// Whether the next request is signed (sticky once needed).
    pub fn signed(&self) -> bool {
        self.signed
    }

    /// Signs every request from now on (when there is a key).
    pub fn sign(&mut self) {
        self.signed |= self.has_key;
    }

    /// Before each attempt: `auto` on long-poll for [`WS_RETRY_EVERY`]
    /// tries WebSocket again. True when it switches.
    pub fn retry_websocket(&mut self, now: Duration) -> bool {
        match (self.choice, self.channel, self.fell_back_at) {
            (ChannelChoice::Auto, Channel::LongPoll, Some(at))
                if now.saturating_sub(at) >= WS_RETRY_EVERY =>
            {
                self.channel = Channel::WebSocket;
                // On probation: one failure and it is back to long-poll.
                self.ws_failures = FALLBACK_AFTER.saturating_sub(1);
                true
            }
            _ => false,
        }
    }

    /// A WebSocket attempt ended. `delivered`: it received at least one frame.
    pub fn ws_ended(&mut self, end: &WsEnd, delivered: bool, now: Duration) -> Step {
        if delivered {
            self.failures = 0;
            self.ws_failures = 0;
        }
        let forced = self.choice != ChannelChoice::Auto;
        match end {
            WsEnd::Refusal => Step::Refused,
            WsEnd::Closed {
                code: Some(4404), ..
            } => self.not_readable(),
            WsEnd::Refused {
                status: 404,
                code: Some(c),
                ..
            } if c == "capsule_not_found" => self.not_readable(),
            WsEnd::Refused { status: 401, .. } => Step::SignatureRefused,
            WsEnd::Closed {
                code: Some(4429), ..
            } => {
                if forced {
                    self.failures = self.failures.saturating_add(1);
                    Step::After(self.policy.max_delay)
                } else {
                    self.fall_back(now)
                }
            }
            WsEnd::Refused { retry_after, .. } => {
                if forced {
                    let wait = self.next_delay();
                    Step::After(wait.max(retry_after.unwrap_or_default()))
                } else {
                    self.fall_back(now)
                }
            }
            WsEnd::Closed { .. } | WsEnd::Lost(_) => {
                if !delivered {
                    self.ws_failures = self.ws_failures.saturating_add(1);
                }
                if !forced && self.ws_failures >= FALLBACK_AFTER {
                    self.fall_back(now)
                } else {
                    Step::After(self.next_delay())
                }
            }
        }
    }

    /// A long-poll round ended.
    pub fn poll_ended(&mut self, end: &PollEnd) -> Step {
        match end {
            PollEnd::Answered { pace } => {
                self.failures = 0;
                Step::After(*pace)
            }
            PollEnd::NothingYet => {
                self.failures = 0;
                // As every read: a 404 is asked again signed when there is
                // a key (the capsule may be private and this watcher granted).
                self.sign();
                Step::After(Duration::ZERO)
            }
            PollEnd::NotReadable => self.not_readable(),
            PollEnd::SignatureRefused => Step::SignatureRefused,
            PollEnd::Refusal => Step::Refused,
            PollEnd::Busy { retry_after } => {
                let wait = self.next_delay();
                Step::After(wait.max(retry_after.unwrap_or_default()))
            }
            PollEnd::Failed => Step::After(self.next_delay()),
        }
    }

    /// Not readable as asked: once more signed if we can, else final.
    fn not_readable(&mut self) -> Step {
        if self.has_key && !self.signed {
            self.signed = true;
            Step::After(Duration::ZERO)
        } else {
            Step::NotReadable
        }
    }

    fn fall_back(&mut self, now: Duration) -> Step {
        self.channel = Channel::LongPoll;
        self.fell_back_at = Some(now);
        self.ws_failures = 0;
        Step::After(Duration::ZERO)
    }

    /// One more failure in a row, and the backoff it earns.
    fn next_delay(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.policy.delay(self.failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;
    const NOW: Duration = Duration::from_secs(1000);

    fn closed(code: u16) -> WsEnd {
        WsEnd::Closed {
            code: Some(code),
            reason: String::new(),
        }
    }

    fn refused(status: u16, code: Option<&str>) -> WsEnd {
        WsEnd::Refused {
            status,
            code: code.map(str::to_string),
            retry_after: None,
        }
    }

    fn lost() -> WsEnd {
        WsEnd::Lost("connection reset".into())
    }

    #[test]
    fn auto_starts_on_websocket_forced_choices_stay_put() {
        assert_eq!(
            Plan::new(ChannelChoice::Auto, false, false).channel(),
            Channel::WebSocket
        );
        for c in [Channel::WebSocket, Channel::LongPoll] {
            let mut p = Plan::new(ChannelChoice::Only(c), false, false);
            for end in [refused(426, None), closed(4429), lost(), lost(), lost()] {
                let _ = p.ws_ended(&end, false, NOW);
                assert_eq!(p.channel(), c);
            }
            assert!(!p.retry_websocket(NOW + S(3600)));
        }
    }

    #[test]
    fn other_closes_reconnect_with_exponential_backoff_reset_by_a_frame() {
        let mut p = Plan::new(ChannelChoice::Only(Channel::WebSocket), false, false);
        let waits: Vec<Step> = [closed(1006), closed(1001), lost(), closed(1011), lost()]
            .iter()
            .map(|e| p.ws_ended(e, false, NOW))
            .collect();
        assert_eq!(waits, [S(1), S(2), S(4), S(8), S(16)].map(Step::After));
        // A connection that delivered a frame starts the schedule over.
        assert_eq!(p.ws_ended(&closed(1001), true, NOW), Step::After(S(1)));
        assert_eq!(p.ws_ended(&closed(1006), false, NOW), Step::After(S(2)));
        // Capped.
        for _ in 0..20 {
            let _ = p.ws_ended(&lost(), false, NOW);
        }
        assert_eq!(p.ws_ended(&lost(), false, NOW), Step::After(S(60)));
        // Normal closure or no code at all: the same.
        let mut q = Plan::new(ChannelChoice::Auto, false, false);
        let end = WsEnd::Closed {
            code: None,
            reason: String::new(),
        };
        assert_eq!(q.ws_ended(&end, true, NOW), Step::After(S(1)));
        assert_eq!(q.ws_ended(&closed(1000), true, NOW), Step::After(S(1)));
        assert_eq!(q.channel(), Channel::WebSocket);
    }

    #[test]
    fn close_4404_is_not_found_after_one_signed_try_when_there_is_a_key() {
        let mut p = Plan::new(ChannelChoice::Auto, true, false);
        assert!(!p.signed());
        assert_eq!(p.ws_ended(&closed(4404), true, NOW), Step::After(S(0)));
        assert!(p.signed(), "asked again signed, at once");
        assert_eq!(p.ws_ended(&closed(4404), false, NOW), Step::NotReadable);
        // No key: final at once.
        let mut anon = Plan::new(ChannelChoice::Auto, false, false);
        assert_eq!(anon.ws_ended(&closed(4404), true, NOW), Step::NotReadable);
        assert!(!anon.signed());
        // Signed from the start (our own private capsule): final at once.
        let mut own = Plan::new(ChannelChoice::Auto, true, true);
        assert!(own.signed());
        assert_eq!(own.ws_ended(&closed(4404), true, NOW), Step::NotReadable);
        // "signed" without a key is impossible.
        assert!(!Plan::new(ChannelChoice::Auto, false, true).signed());
    }

    #[test]
    fn an_upgrade_refused_404_or_401_stops_anything_else_falls_back() {
        let mut p = Plan::new(ChannelChoice::Auto, false, false);
        let nf = refused(404, Some("capsule_not_found"));
        assert_eq!(p.ws_ended(&nf, false, NOW), Step::NotReadable);
        let mut k = Plan::new(ChannelChoice::Auto, true, false);
        assert_eq!(k.ws_ended(&nf, false, NOW), Step::After(S(0)));
        assert!(k.signed());
        assert_eq!(k.channel(), Channel::WebSocket);
        assert_eq!(k.ws_ended(&nf, false, NOW), Step::NotReadable);
        let sig = refused(401, Some("read_signature_invalid"));
        assert_eq!(k.ws_ended(&sig, false, NOW), Step::SignatureRefused);
        // A 404 that is not capsule_not_found (a server without the route),
        // 426, 429, 5xx: long-poll, at once.
        for end in [
            refused(404, Some("not_found")),
            refused(404, None),
            refused(426, Some("websocket_required")),
            refused(429, None),
            refused(400, None),
            refused(503, Some("service_unavailable")),
        ] {
            let mut p = Plan::new(ChannelChoice::Auto, true, false);
            assert_eq!(p.ws_ended(&end, false, NOW), Step::After(S(0)), "{end:?}");
            assert_eq!(p.channel(), Channel::LongPoll, "{end:?}");
        }
    }

    #[test]
    fn a_refusal_stops_on_either_channel_with_or_without_a_key() {
        for (choice, key) in [
            (ChannelChoice::Auto, true),
            (ChannelChoice::Auto, false),
            (ChannelChoice::Only(Channel::WebSocket), true),
        ] {
            let mut p = Plan::new(choice, key, false);
            assert_eq!(p.ws_ended(&WsEnd::Refusal, true, NOW), Step::Refused);
            assert!(!p.signed(), "never asked again signed");
        }
        let mut p = Plan::new(ChannelChoice::Only(Channel::LongPoll), true, false);
        assert_eq!(p.poll_ended(&PollEnd::Failed), Step::After(S(1)));
        assert_eq!(p.poll_ended(&PollEnd::Refusal), Step::Refused);
    }

    #[test]
    fn forced_websocket_backs_off_instead_of_falling_back() {
        let mut p = Plan::new(ChannelChoice::Only(Channel::WebSocket), false, false);
        assert_eq!(
            p.ws_ended(&refused(426, None), false, NOW),
            Step::After(S(1))
        );
        let busy = WsEnd::Refused {
            status: 429,
            code: None,
            retry_after: Some(S(30)),
        };
        assert_eq!(p.ws_ended(&busy, false, NOW), Step::After(S(30)));
        // 4429: the longest backoff.
        assert_eq!(p.ws_ended(&closed(4429), true, NOW), Step::After(S(60)));
    }

    #[test]
    fn close_4429_falls_back_to_long_poll_and_websocket_is_tried_again_later() {
        let mut p = Plan::new(ChannelChoice::Auto, false, false);
        assert_eq!(p.ws_ended(&closed(4429), true, NOW), Step::After(S(0)));
        assert_eq!(p.channel(), Channel::LongPoll);
        assert!(!p.retry_websocket(NOW + WS_RETRY_EVERY - S(1)));
        assert_eq!(p.channel(), Channel::LongPoll);
        assert!(p.retry_websocket(NOW + WS_RETRY_EVERY));
        assert_eq!(p.channel(), Channel::WebSocket);
        // On probation: one failure and it is back on long-poll.
        let later = NOW + WS_RETRY_EVERY;
        assert_eq!(p.ws_ended(&lost(), false, later), Step::After(S(0)));
        assert_eq!(p.channel(), Channel::LongPoll);
        assert!(!p.retry_websocket(later + S(10)));
        assert!(p.retry_websocket(later + WS_RETRY_EVERY));
        // A healthy connection ends the probation.
        assert_eq!(p.ws_ended(&closed(1001), true, later), Step::After(S(1)));
        assert_eq!(p.channel(), Channel::WebSocket);
    }

    #[test]
    fn repeated_websocket_failures_fall_back() {
        let mut p = Plan::new(ChannelChoice::Auto, false, false);
        assert_eq!(p.ws_ended(&lost(), false, NOW), Step::After(S(1)));
        assert_eq!(p.ws_ended(&closed(1006), false, NOW), Step::After(S(2)));
        assert_eq!(p.channel(), Channel::WebSocket);
        assert_eq!(p.ws_ended(&lost(), false, NOW), Step::After(S(0)));
        assert_eq!(p.channel(), Channel::LongPoll);
        // Failures with frames in between never add up.
        let mut q = Plan::new(ChannelChoice::Auto, false, false);
        for _ in 0..10 {
            assert_eq!(q.ws_ended(&closed(1006), true, NOW), Step::After(S(1)));
        }
        assert_eq!(q.channel(), Channel::WebSocket);
    }

    #[test]
    fn long_poll_rounds() {
        let mut p = Plan::new(ChannelChoice::Only(Channel::LongPoll), true, false);
        let zero = PollEnd::Answered {
            pace: Duration::ZERO,
        };
        assert_eq!(p.poll_ended(&zero), Step::After(S(0)));
        let paced = PollEnd::Answered { pace: S(20) };
        assert_eq!(p.poll_ended(&paced), Step::After(S(20)));
        assert_eq!(p.poll_ended(&PollEnd::NothingYet), Step::After(S(0)));
        assert!(p.signed(), "a held 404 is asked again signed, with a key");
        assert_eq!(p.poll_ended(&PollEnd::NothingYet), Step::After(S(0)));
        let mut anon = Plan::new(ChannelChoice::Only(Channel::LongPoll), false, false);
        assert_eq!(anon.poll_ended(&PollEnd::NothingYet), Step::After(S(0)));
        assert!(!anon.signed());
        p = Plan::new(ChannelChoice::Only(Channel::LongPoll), true, false);
        assert_eq!(p.poll_ended(&PollEnd::Failed), Step::After(S(1)));
        assert_eq!(p.poll_ended(&PollEnd::Failed), Step::After(S(2)));
        let busy = PollEnd::Busy {
            retry_after: Some(S(45)),
        };
        assert_eq!(p.poll_ended(&busy), Step::After(S(45)));
        assert_eq!(
            p.poll_ended(&PollEnd::Busy { retry_after: None }),
            Step::After(S(8))
        );
        assert_eq!(p.poll_ended(&zero), Step::After(S(0)));
        assert_eq!(p.poll_ended(&PollEnd::Failed), Step::After(S(1)), "reset");
        // Not readable: signed once, then final.
        assert_eq!(p.poll_ended(&PollEnd::NotReadable), Step::After(S(0)));
        assert!(p.signed());
        assert_eq!(p.poll_ended(&PollEnd::NotReadable), Step::NotReadable);
        assert_eq!(
            p.poll_ended(&PollEnd::SignatureRefused),
            Step::SignatureRefused
        );
        assert_eq!(p.channel(), Channel::LongPoll);
    }
}
