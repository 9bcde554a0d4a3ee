//! The read path's one Durable Object call: a signed read's nonce, admitted
//! once by its reader's nonce book (`objects::nonces`). Both halves, as for
//! the calls in `do_wire`. The entry Worker makes it through a cross-script
//! binding of `NONCE_DO` to the write Worker's class; the object side is
//! compiled into the write Worker only.
//!
//! The object is not reachable from outside the Workers, so it trusts the
//! call's "now".

use super::config::NONCE_DO_BINDING;
use super::do_json::ask;
#[cfg(feature = "write")]
use super::do_json::{answer, read_posted};
use crate::core::crypto::AgentId;
use crate::core::read_auth::Admit;
use serde::{Deserialize, Serialize};
use worker::Env;
#[cfg(feature = "write")]
use worker::{Request, Response};

const NONCE_URL: &str = "https://nonce.do/check";

/// Admits the nonce of a verified signed read (see `NonceBook::admit`).
#[derive(Serialize, Deserialize)]
pub struct NonceCheck {
    /// The signature's nonce.
    pub nonce: String,
    /// Until when it must be remembered (Unix seconds).
    pub until_s: u64,
    /// "Now" (Unix seconds).
    pub now_s: u64,
}

#[derive(Serialize, Deserialize)]
struct NonceAnswer {
    /// `fresh`, `replayed` or `full`.
    admit: String,
}

impl NonceCheck {
    /// Worker side: the reader's nonce book decides.
    pub async fn send(&self, env: &Env, reader: &AgentId) -> worker::Result<Admit> {
        let a: NonceAnswer = ask(env, NONCE_DO_BINDING, reader.as_str(), NONCE_URL, self).await?;
        Ok(match a.admit.as_str() {
            "fresh" => Admit::Fresh,
            "full" => Admit::Full,
            _ => Admit::Replayed,
        })
    }
    /// Nonce-book side: reads a request.
    #[cfg(feature = "write")]
    pub async fn read(req: Request) -> worker::Result<Option<NonceCheck>> {
        read_posted(req, NONCE_URL).await
    }
    /// Nonce-book side: the answer.
    #[cfg(feature = "write")]
    pub fn answer(admit: Admit) -> worker::Result<Response> {
        let admit = match admit {
            Admit::Fresh => "fresh",
            Admit::Replayed => "replayed",
            Admit::Full => "full",
        };
        answer(&NonceAnswer {
            admit: admit.into(),
        })
    }
}
