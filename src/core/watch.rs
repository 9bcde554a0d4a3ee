//! Push on change (docs/PROTOCOL.md §13): who may hold a WebSocket watch on
//! an agent, what a watcher may send, how a watch is closed, and the
//! long-poll parameter of head.json. Pure decisions; the agent's Durable
//! Object holds the sockets and the waiting polls.
//!
//! A watch is public like every read (a private capsule's watch follows the
//! same access rule as its head.json, decided per frame). Every frame the
//! service sends is exactly a head.json body. Watchers send nothing but the
//! text `ping`, answered `pong` by the runtime without waking the object;
//! anything else closes the socket.

use crate::core::history::QueryError;

/// Watchers one agent may have at once (every address together).
pub const WATCHERS_PER_AGENT: usize = 1_000;
/// Watchers of one agent from one client address bucket
/// (`core::quota::ip_bucket`).
pub const WATCHERS_PER_ADDRESS: usize = 20;
/// Largest message a watcher may send (the runtime's own limit is 32 MiB;
/// a watcher has nothing to say but `ping`).
pub const CLIENT_MESSAGE_MAX_BYTES: usize = 128;
/// What a watcher sends to check the connection, and the answer.
pub const PING: &str = "ping";
/// The runtime's answer to [`PING`].
pub const PONG: &str = "pong";
/// Longest `head.json?wait=` in seconds.
pub const WAIT_MAX_SEC: u64 = 30;
/// Long-polls one agent's object holds at once; past it a poll is answered
/// at once, as without `wait`.
pub const HELD_POLLS_PER_AGENT: usize = 200;

/// Why the service closes a watch: a WebSocket close code and reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// [`WATCHERS_PER_AGENT`] reached.
    TooManyWatchers,
    /// [`WATCHERS_PER_ADDRESS`] reached.
    TooManyFromAddress,
    /// The capsule is no longer readable by this watcher (it became
    /// private, or a grant expired): as if it did not exist.
    NotReadable,
    /// A message over [`CLIENT_MESSAGE_MAX_BYTES`].
    TooBig,
    /// A binary message.
    Binary,
    /// A text message other than [`PING`].
    NotPing,
    /// A projected feed's watcher whose agent no longer has a `watch`.
    WatchNotSet,
    /// A projected feed's watcher whose agent's plan lapsed.
    WatchRequiresPro,
}

impl Close {
    /// The close code (4000-4999 are the application's own; 4429 and 4404
    /// echo the HTTP statuses of a quota and a miss).
    pub fn code(self) -> u16 {
        match self {
            Close::TooManyWatchers | Close::TooManyFromAddress => 4429,
            Close::NotReadable | Close::WatchNotSet => 4404,
            Close::WatchRequiresPro => 4402,
            Close::TooBig => 1009,
            Close::Binary => 1003,
            Close::NotPing => 1008,
        }
    }

    /// The close reason (at most 123 bytes, as WebSocket requires).
    pub fn reason(self) -> &'static str {
        match self {
            Close::TooManyWatchers => "too many watchers of this agent; retry later",
            Close::TooManyFromAddress => {
                "too many watchers of this agent from this address; retry later"
            }
            Close::NotReadable => "capsule_not_found",
            Close::TooBig => "message too big: watchers send only \"ping\"",
            Close::Binary => "binary message: watchers send only \"ping\"",
            Close::NotPing => "watchers send only \"ping\"",
            Close::WatchNotSet => "watch_not_set",
            Close::WatchRequiresPro => "watch_requires_pro",
        }
    }
}

/// Whether one more watcher is taken, given how many the agent has and how
/// Whether an `Upgrade` header value asks for a WebSocket.
pub fn asks_websocket(upgrade: Option<&str>) -> bool {
    upgrade.is_some_and(|u| u.trim().eq_ignore_ascii_case("websocket"))
}

/// Whether a request that asks for `Upgrade: websocket` is an opening
/// handshake the runtime can complete (RFC 6455 §4.1: a `Sec-WebSocket-Key`
/// of 16 bytes in base64, `Sec-WebSocket-Version: 13`). Anything else is
/// answered by the service (426) rather than handed to the runtime, which
/// would answer it with a plain-text 400 or 500 of its own.
pub fn is_handshake(key: Option<&str>, version: Option<&str>) -> bool {
    use base64::Engine as _;
    let key_ok = key.is_some_and(|k| {
        let k = k.trim();
        k.len() == 24
            && base64::engine::general_purpose::STANDARD
                .decode(k)
                .is_ok_and(|b| b.len() == 16)
    });
    key_ok && version.map(str::trim) == Some("13")
}

/// many of those came from the same address.
pub fn admit(watching: usize, from_address: usize) -> Result<(), Close> {
    if watching >= WATCHERS_PER_AGENT {
        Err(Close::TooManyWatchers)
    } else if from_address >= WATCHERS_PER_ADDRESS {
        Err(Close::TooManyFromAddress)
    } else {
        Ok(())
    }
}

/// A message from a watcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incoming<'a> {
    /// Text.
    Text(&'a str),
    /// Binary, of this many bytes.
    Binary(usize),
}

/// What to do with a watcher's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Send [`PONG`] (a ping the runtime did not answer itself, which it
    /// does for the exact text while the auto-response is set).
    Pong,
    /// Close the socket.
    Close(Close),
}

/// Decides what a watcher's message gets.
pub fn answer(message: Incoming<'_>) -> Answer {
    match message {
        Incoming::Binary(n) if n > CLIENT_MESSAGE_MAX_BYTES => Answer::Close(Close::TooBig),
        Incoming::Binary(_) => Answer::Close(Close::Binary),
        Incoming::Text(t) if t.len() > CLIENT_MESSAGE_MAX_BYTES => Answer::Close(Close::TooBig),
        Incoming::Text(PING) => Answer::Pong,
        Incoming::Text(_) => Answer::Close(Close::NotPing),
    }
}

/// The close code to send back when a watcher closes with `code`: the same
/// one when it may be sent on the wire, none (a bare close) for the codes
/// that only ever describe a connection (1005 no code, 1006 dropped, 1015
/// TLS) or are reserved.
pub fn echo(code: u16) -> Option<u16> {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999).then_some(code)
}

/// `head.json`'s long-poll parameter: `Some(seconds)` for `wait=N` with N
/// in 1..=[`WAIT_MAX_SEC`], `None` without it or for `wait=0`. Other
/// parameters are ignored, as on every read.
pub fn parse_wait<K: AsRef<str>, V: AsRef<str>>(
    pairs: impl IntoIterator<Item = (K, V)>,
) -> Result<Option<u64>, QueryError> {
    let mut wait = None;
    for (k, v) in pairs {
        if k.as_ref() != "wait" {
            continue;
        }
        if wait.is_some() {
            return Err(QueryError::Bad("wait is given twice".into()));
        }
        let v = v.as_ref();
        let n = v
            .parse::<u64>()
            .ok()
            .filter(|n| *n <= WAIT_MAX_SEC && v.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| {
                QueryError::Bad(format!(
                    "wait is a whole number of seconds, 0..={WAIT_MAX_SEC}"
                ))
            })?;
        wait = Some(n);
    }
    Ok(wait.filter(|n| *n > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_complete_opening_handshake_is_handed_to_the_runtime() {
        // RFC 6455 §1.3's sample key.
        let key = Some("dGhlIHNhbXBsZSBub25jZQ==");
        assert!(is_handshake(key, Some("13")));
        assert!(!is_handshake(None, Some("13")));
        assert!(!is_handshake(key, None));
        assert!(!is_handshake(key, Some("8")));
        assert!(!is_handshake(Some("not base64 at all!!!!!!!"), Some("13")));
        assert!(
            !is_handshake(Some("dGhlIHNhbXBsZQ=="), Some("13")),
            "not 16 bytes"
        );
    }

    #[test]
    fn caps_count_the_agent_first_then_the_address() {
        assert_eq!(admit(0, 0), Ok(()));
        assert_eq!(
            admit(WATCHERS_PER_AGENT - 1, WATCHERS_PER_ADDRESS - 1),
            Ok(())
        );
        assert_eq!(admit(WATCHERS_PER_AGENT, 0), Err(Close::TooManyWatchers));
        assert_eq!(
            admit(5, WATCHERS_PER_ADDRESS),
            Err(Close::TooManyFromAddress)
        );
        assert_eq!(
            admit(WATCHERS_PER_AGENT, WATCHERS_PER_ADDRESS),
            Err(Close::TooManyWatchers)
        );
    }

    #[test]
    fn a_watcher_may_only_ping() {
        assert_eq!(answer(Incoming::Text("ping")), Answer::Pong);
        assert_eq!(
            answer(Incoming::Text("PING")),
            Answer::Close(Close::NotPing)
        );
        assert_eq!(answer(Incoming::Text("")), Answer::Close(Close::NotPing));
        assert_eq!(
            answer(Incoming::Text(&"x".repeat(CLIENT_MESSAGE_MAX_BYTES + 1))),
            Answer::Close(Close::TooBig)
        );
        assert_eq!(answer(Incoming::Binary(4)), Answer::Close(Close::Binary));
        assert_eq!(
            answer(Incoming::Binary(1 << 20)),
            Answer::Close(Close::TooBig)
        );
    }

    #[test]
    fn close_codes_are_sendable_and_reasons_fit_a_close_frame() {
        for c in [
            Close::TooManyWatchers,
            Close::TooManyFromAddress,
            Close::NotReadable,
            Close::TooBig,
            Close::Binary,
            Close::NotPing,
        ] {
            assert_eq!(echo(c.code()), Some(c.code()), "{c:?}");
            assert!(c.reason().len() <= 123, "{c:?}");
        }
    }

    #[test]
    fn echo_never_sends_a_code_that_only_describes_a_connection() {
        for code in [1004, 1005, 1006, 1015, 0, 999, 2000, 5000] {
            assert_eq!(echo(code), None, "{code}");
        }
        assert_eq!(echo(1000), Some(1000));
        assert_eq!(echo(4999), Some(4999));
    }

    #[test]
    fn wait_is_a_small_whole_number_of_seconds() {
        let p = |q: &[(&str, &str)]| parse_wait(q.iter().copied());
        assert_eq!(p(&[]), Ok(None));
        assert_eq!(p(&[("wait", "0")]), Ok(None));
        assert_eq!(p(&[("wait", "1")]), Ok(Some(1)));
        assert_eq!(p(&[("x", "y"), ("wait", "30")]), Ok(Some(30)));
        for bad in ["31", "-1", "+5", "1.5", "", "ten", "99999999999999999999"] {
            assert!(
                matches!(p(&[("wait", bad)]), Err(QueryError::Bad(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            p(&[("wait", "1"), ("wait", "2")]),
            Err(QueryError::Bad(_))
        ));
    }
}
