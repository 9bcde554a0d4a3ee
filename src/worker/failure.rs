//! Why a request is not answered with what it asked for, and the one place
//! that turns it into a response. Every handler and the data halves they
//! share return `Result<_, Failure>`, so `?` carries a refusal, a write's
//! rejection and a runtime error alike to [`Failure::response`]; the MCP
//! door turns the same value into a tool error instead (`handlers::mcp`).
//!
//! What a refusal means (its status, its class, what a bot does) is decided
//! by its code in `core::reason`; this file only chooses the body's shape.

use crate::core::reason::{ReasonCode, Refusal};
#[cfg(feature = "worker")]
use crate::core::write::Rejection;
use crate::worker::http::{self, Audience};
use crate::worker::log;
use worker::Response;

/// A request that ends without the answer it asked for.
#[derive(Debug)]
pub enum Failure {
    /// Refused with a reason code: `{"error": code, "detail"?,
    /// "retry_after_sec"?}` with the code's own status (and, to a PUT, the
    /// write's `accepted`/`reason_codes`).
    Refused(Refusal),
    /// A write refused: the write's own body (`core::write::Rejection`;
    /// the write Worker's only).
    #[cfg(feature = "worker")]
    Rejected(Rejection),
    /// 410 `cursor_not_found`, with where to start over (a history read's:
    /// the write Worker answers none).
    #[cfg(any(feature = "entry", feature = "extras"))]
    CursorNotFound {
        /// The agent's history.json path.
        history_url: String,
    },
    /// Ours, and already logged where it was found (a stored value we cannot
    /// use, a missing key): a 503, with a detail when an operator can act on
    /// it.
    Unavailable(Option<&'static str>),
    /// The runtime failed (storage, a Durable Object, serialisation): logged
    /// by whoever answers, then a 503 without internals.
    Runtime(worker::Error),
}

impl Failure {
    /// Refused with `code` and nothing more to say.
    pub fn code(code: ReasonCode) -> Failure {
        Failure::Refused(Refusal::code(code))
    }

    /// Refused with `code` and a detail for the client.
    pub fn refused(code: ReasonCode, detail: impl Into<String>) -> Failure {
        Failure::Refused(Refusal::new(code, detail))
    }

    /// 503 `upgrades_not_configured`: this deployment takes no payments.
    #[cfg(feature = "worker")]
    pub fn upgrades_not_configured() -> Failure {
        Failure::refused(
            ReasonCode::UpgradesNotConfigured,
            "this deployment takes no payments; the free tier works as always",
        )
    }

    /// The reason code this failure answers with (an MCP tool error's).
    #[cfg(feature = "extras")]
    pub fn reason(&self) -> ReasonCode {
        match self {
            Failure::Refused(r) => r.code,
            #[cfg(feature = "worker")]
            Failure::Rejected(rej) => rej
                .reason_codes
                .first()
                .copied()
                .unwrap_or(ReasonCode::InvalidCapsule),
            #[cfg(any(feature = "entry", feature = "extras"))]
            Failure::CursorNotFound { .. } => ReasonCode::CursorNotFound,
            Failure::Unavailable(_) | Failure::Runtime(_) => ReasonCode::Unavailable,
        }
    }

    /// Whether this is the miss of an agent that has published nothing (or
    /// nothing this reader may read, which must look the same).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Failure::Refused(r) if r.code == ReasonCode::CapsuleNotFound)
    }

    /// The HTTP answer. `audience`: whether the request was a write, whose
    /// clients read `accepted`/`reason_codes` on every error. A runtime
    /// error is logged here with `path`, the only context left by now.
    pub fn response(self, audience: Audience, path: &str) -> Response {
        match self {
            Failure::Refused(r) => http::refusal(&r, audience),
            #[cfg(feature = "worker")]
            Failure::Rejected(rej) => http::rejection(&rej).unwrap_or_else(|e| {
                log::event(
                    "internal_error",
                    &[("path", path), ("error", &e.to_string())],
                );
                http::unavailable(audience)
            }),
            #[cfg(any(feature = "entry", feature = "extras"))]
            Failure::CursorNotFound { history_url } => http::cursor_not_found(&history_url),
            Failure::Unavailable(detail) => http::unavailable_because(audience, detail),
            Failure::Runtime(e) => {
                log::event(
                    "internal_error",
                    &[("path", path), ("error", &e.to_string())],
                );
                http::unavailable(audience)
            }
        }
    }
}

impl From<Refusal> for Failure {
    fn from(r: Refusal) -> Failure {
        Failure::Refused(r)
    }
}

#[cfg(feature = "worker")]
impl From<Rejection> for Failure {
    fn from(rej: Rejection) -> Failure {
        Failure::Rejected(rej)
    }
}

impl From<worker::Error> for Failure {
    fn from(e: worker::Error) -> Failure {
        Failure::Runtime(e)
    }
}

/// An invariant broken in our own code (`ok_or("…")?`): a runtime error.
impl From<&str> for Failure {
    fn from(why: &str) -> Failure {
        Failure::Runtime(why.into())
    }
}

/// As for `&str`.
impl From<String> for Failure {
    fn from(why: String) -> Failure {
        Failure::Runtime(why.into())
    }
}

impl From<serde_json::Error> for Failure {
    fn from(e: serde_json::Error) -> Failure {
        Failure::Runtime(e.into())
    }
}

/// A Durable Object's answer from its handler's result: a failure becomes
/// its response here, except a runtime error, which stays an error of the
/// object's fetch (the Worker's call then answers the 503, as for any
/// failed call into an object).
#[cfg(feature = "write")]
pub fn settle(result: Result<Response, Failure>, audience: Audience) -> worker::Result<Response> {
    match result {
        Ok(resp) => Ok(resp),
        Err(Failure::Runtime(e)) => Err(e),
        Err(f) => Ok(f.response(audience, "durable object")),
    }
}
