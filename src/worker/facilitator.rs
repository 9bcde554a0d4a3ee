//! The x402 facilitator over `fetch`, bytes only: `POST {url}/verify` and
//! `POST {url}/settle` with the body `core::upgrade::x402::facilitator`
//! builds, within a deadline. What an answer means (and that it is only a
//! hint: the chain decides a credit) is the core's.

use super::body;
use crate::core::upgrade::x402::config::X402Config;
use futures_util::future::{select, Either};
use std::time::Duration;
use worker::{Delay, Fetch, Headers, Method, Request, RequestInit};

/// An answer: its status and body. `None`: no answer within the deadline,
/// or none at all.
pub type Answer = Option<(u16, Vec<u8>)>;

/// `POST {facilitator}{path}` with `body`, waiting at most `timeout_ms`.
pub async fn post(x: &X402Config, path: &str, body: String, timeout_ms: u64) -> Answer {
    let headers = Headers::new();
    headers.set("Content-Type", "application/json").ok()?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(body.into()));
    let req = Request::new_with_init(&format!("{}{path}", x.facilitator_url), &init).ok()?;
    let call = Box::pin(async move {
        let resp = Fetch::Request(req).send().await.ok()?;
        let status = resp.status_code();
        Some((status, body::response_bytes(resp).await.ok()?))
    });
    let deadline = Delay::from(Duration::from_millis(timeout_ms));
    match select(call, deadline).await {
        Either::Left((answer, _)) => answer,
        Either::Right(_) => None,
    }
}
