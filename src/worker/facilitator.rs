//! The x402 facilitator over `fetch`, bytes only: `POST {url}/verify` and
//! `POST {url}/settle` with the body `core::upgrade::x402::facilitator`
//! builds, within a deadline. What an answer means (and that it is only a
//! hint: the chain decides a credit) is the core's.
//!
//! With `X402_FACILITATOR_AUTH=cdp` each request carries
//! `Authorization: Bearer <jwt>`, a fresh token for that request's method
//! and URL (`core::upgrade::x402::cdp`), made from the system clock and a
//! random nonce. The token is never logged.

use super::body;
use super::clock;
use crate::core::upgrade::x402::cdp::{CdpKey, NONCE_BYTES};
use crate::core::upgrade::x402::config::{FacilitatorAuth, X402Config};
use crate::core::urls::host_and_path;
use futures_util::future::{select, Either};
use std::time::Duration;
use worker::{Delay, Fetch, Headers, Method, Request, RequestInit};

/// An answer: its status and body. `None`: no answer within the deadline,
/// or none at all.
pub type Answer = Option<(u16, Vec<u8>)>;

/// `POST {facilitator}{path}` with `body`, waiting at most `timeout_ms`.
pub async fn post(x: &X402Config, path: &str, body: String, timeout_ms: u64) -> Answer {
    let url = format!("{}{path}", x.facilitator_url);
    let headers = Headers::new();
    headers.set("Content-Type", "application/json").ok()?;
    if let FacilitatorAuth::Cdp(key) = &x.auth {
        headers
            .set(
                "Authorization",
                &format!("Bearer {}", bearer(key, "POST", &url)?),
            )
            .ok()?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(body.into()));
    let req = Request::new_with_init(&url, &init).ok()?;
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

/// The CDP token for `method` to `url`: bound to the URL's host (with its
/// port when not the scheme's default, as `new URL(u).host` in the SDK's
/// callers) and path, as the URL the request goes to is normalized.
/// `None` when no randomness could be drawn (the call is then not made).
fn bearer(key: &CdpKey, method: &str, url: &str) -> Option<String> {
    let host_path = host_and_path(url)?;
    let mut nonce = [0u8; NONCE_BYTES];
    getrandom::getrandom(&mut nonce).ok()?;
    let now = clock::system_now_ms() / 1000;
    Some(key.jwt(method, &host_path, now, &nonce))
}
