//! Every response the Worker sends is built here: JSON with the fixed header
//! set (content type, CORS, caching), error bodies (which `failure` picks
//! for each failure), CORS preflight, 405, 503, write rejections, and
//! [`CachedRead`], the one type that answers ETag / 304
//! / HEAD for every read. Statuses for error codes always come from
//! `ReasonCode::http_status`, never from literals here; whether a request is
//! fresh is decided by `core::conditional`.

use crate::core::conditional::{etag_header, Answer};
pub use crate::core::conditional::{NO_STORE, PRIVATE_NO_STORE, READ_CACHE_CONTROL};
use crate::core::reason::{ReasonCode, Refusal};
use crate::core::urls::Method;
#[cfg(feature = "worker")]
use crate::core::write::Rejection;
use crate::worker::request::Incoming;
use serde::Serialize;
use std::cell::RefCell;
use worker::{web_sys, Headers, Response, ResponseBuilder};

/// The content type of every body.
pub const JSON_CONTENT_TYPE: &str = "application/json; charset=utf-8";
/// Seconds a client should wait after a 503.
pub const UNAVAILABLE_RETRY_AFTER_SEC: u64 = 5;

/// Builds a response with the headers every answer carries.
pub fn respond(status: u16, body: Option<Vec<u8>>, cache_control: &'static str) -> Response {
    let headers = base_headers(cache_control, body.is_some());
    let builder = ResponseBuilder::new()
        .with_status(status)
        .with_headers(headers);
    match body {
        Some(bytes) => builder.fixed(bytes),
        None => builder.empty(),
    }
}

/// A JSON body from any serialisable value. Serialising our own plain structs
/// cannot fail in practice; if it ever did, the caller turns the error into a 503.
#[cfg(feature = "worker")]
pub fn json<T: Serialize>(
    status: u16,
    value: &T,
    cache_control: &'static str,
) -> worker::Result<Response> {
    Ok(respond(
        status,
        Some(serde_json::to_vec(value)?),
        cache_control,
    ))
}

/// Whether an error is answering a write: `PUT` clients parse
/// `accepted`/`reason_codes` on every non-2xx, so they get those fields too.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Any other method.
    Read,
    /// `PUT`.
    Write,
}

impl Audience {
    /// The audience of a request method.
    pub fn of(method: Method) -> Audience {
        if method == Method::Put {
            Audience::Write
        } else {
            Audience::Read
        }
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    accepted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason_codes: Option<[&'a str; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_sec: Option<u64>,
    /// `cursor_not_found`: where to start over.
    #[serde(skip_serializing_if = "Option::is_none")]
    history_url: Option<&'a str>,
    /// A refusal's links (`core::reason::Refusal::links`).
    #[serde(flatten)]
    links: std::collections::BTreeMap<&'a str, &'a str>,
}

/// `{"error": code}` with the code's own status.
fn error(code: ReasonCode, audience: Audience, detail: Option<&str>) -> Response {
    error_body(code, audience, detail, None, None, &[])
}

/// 410 `cursor_not_found`: the cursor was pruned or never existed; the
/// client starts over from the full history.
#[cfg(any(feature = "entry", feature = "extras"))]
pub fn cursor_not_found(history_url: &str) -> Response {
    error_body(
        ReasonCode::CursorNotFound,
        Audience::Read,
        None,
        None,
        Some(history_url),
        &[],
    )
}

fn error_body(
    code: ReasonCode,
    audience: Audience,
    detail: Option<&str>,
    retry_after_sec: Option<u64>,
    history_url: Option<&str>,
    links: &[(&'static str, String)],
) -> Response {
    let write = audience == Audience::Write;
    let body = ErrorBody {
        error: code.as_str(),
        accepted: write.then_some(false),
        reason_codes: write.then_some([code.as_str()]),
        detail,
        retry_after_sec,
        history_url,
        links: links.iter().map(|(k, v)| (*k, v.as_str())).collect(),
    };
    // The body is a fixed struct of strings and numbers; fall back to the bare
    // code rather than failing if serialisation were ever to break.
    let bytes = serde_json::to_vec(&body)
        .unwrap_or_else(|_| format!("{{\"error\":\"{}\"}}", code.as_str()).into_bytes());
    respond(code.http_status(), Some(bytes), NO_STORE)
}

/// The JSON body and status of a rejected write, with `Retry-After` when the
/// core computed a wait.
#[cfg(feature = "worker")]
pub fn rejection(rej: &Rejection) -> worker::Result<Response> {
    let resp = json(rej.status(), rej, NO_STORE)?;
    if let Some(secs) = rej.retry_after_sec {
        set(resp.headers(), "Retry-After", &secs.to_string());
    }
    Ok(resp)
}

/// A refusal (`core::reason::Refusal`): `{"error": code, "detail"?,
/// "retry_after_sec"?}` with the code's status, and `Retry-After` when a
/// wait was computed. Answered only through `failure::Failure::response`.
pub fn refusal(r: &Refusal, audience: Audience) -> Response {
    let resp = error_body(
        r.code,
        audience,
        r.detail.as_deref(),
        r.retry_after_sec,
        None,
        &r.links,
    );
    if let Some(secs) = r.retry_after_sec {
        set(resp.headers(), "Retry-After", &secs.to_string());
    }
    resp
}

/// 405 with the `Allow` header listing what the resource supports.
pub fn method_not_allowed(allow: &str, audience: Audience) -> Response {
    let resp = error(ReasonCode::MethodNotAllowed, audience, None);
    set(resp.headers(), "Allow", allow);
    resp
}

/// The only answer to an internal failure: no stack trace, no detail, a hint
/// when to come back. Never a 500.
pub fn unavailable(audience: Audience) -> Response {
    unavailable_because(audience, None)
}

/// A 503 that names a configuration problem an operator must fix (e.g. a
/// missing signing key); still no internals.
pub fn unavailable_because(audience: Audience, detail: Option<&str>) -> Response {
    let resp = error_body(
        ReasonCode::Unavailable,
        audience,
        detail,
        Some(UNAVAILABLE_RETRY_AFTER_SEC),
        None,
        &[],
    );
    set(
        resp.headers(),
        "Retry-After",
        &UNAVAILABLE_RETRY_AFTER_SEC.to_string(),
    );
    resp
}

/// CORS preflight answer for a known resource: its methods, and the request
/// headers it takes cross-origin (`core::urls` decides which, per route).
pub fn preflight(allow: &str, headers: &str) -> Response {
    let resp = respond(204, None, NO_STORE);
    let h = resp.headers();
    set(h, "Allow", allow);
    set(h, "Access-Control-Allow-Methods", allow);
    set(h, "Access-Control-Allow-Headers", headers);
    set(h, "Access-Control-Max-Age", "86400");
    resp
}

thread_local! {
    /// [`base_headers`]' templates, by `Cache-Control` and body.
    static BASE_HEADERS: RefCell<Vec<(&'static str, bool, Headers)>> = const { RefCell::new(Vec::new()) };
}

/// A fresh copy of the headers every answer carries, for this
/// `Cache-Control` and with or without a body. Each template is built once
/// per isolate and copied in one call: setting five headers one by one is a
/// crossing into JS each, a visible share of a 304's CPU.
fn base_headers(cache_control: &'static str, with_body: bool) -> Headers {
    BASE_HEADERS.with(|bases| {
        let mut bases = bases.borrow_mut();
        if let Some((_, _, h)) = bases
            .iter()
            .find(|(cc, body, _)| *cc == cache_control && *body == with_body)
        {
            return h.clone();
        }
        let h = Headers::new();
        if with_body {
            set(&h, "Content-Type", JSON_CONTENT_TYPE);
        }
        set(&h, "Cache-Control", cache_control);
        set(&h, "X-Content-Type-Options", "nosniff");
        add_cors(&h);
        let copy = h.clone();
        bases.push((cache_control, with_body, h));
        copy
    })
}

/// Everything is public (reads are public, writes are signed), so any origin
/// may call; browsers need `ETag` exposed to revalidate from JS.
fn add_cors(h: &Headers) {
    set(h, "Access-Control-Allow-Origin", "*");
    set(
        h,
        "Access-Control-Expose-Headers",
        "ETag, Retry-After, Allow, PAYMENT-REQUIRED, PAYMENT-RESPONSE, X-PAYMENT-RESPONSE",
    );
}

/// Header names and values here are constants or digits, which `Headers::set`
/// accepts; nothing useful can be done if it refused, so the error is dropped.
pub fn set(h: &Headers, name: &str, value: &str) {
    let _ = h.set(name, value);
}

/// A conditional read of one document: the request's `If-None-Match` and
/// whether it is a `HEAD`. Every read answers through this, so ETag, 304 and
/// HEAD behave the same on every document.
pub struct CachedRead {
    if_none_match: Option<String>,
    head_only: bool,
    cache_control: &'static str,
}

impl CachedRead {
    /// The read a request asks for.
    pub fn of(req: &Incoming, head_only: bool) -> CachedRead {
        CachedRead {
            if_none_match: req.headers().get("If-None-Match").ok().flatten(),
            head_only,
            cache_control: READ_CACHE_CONTROL,
        }
    }

    /// For one reader only (a signed read): `private, no-store`.
    pub fn private(mut self) -> CachedRead {
        self.cache_control = PRIVATE_NO_STORE;
        self
    }

    /// The 304 when the client already holds the entity tagged `etag`
    /// (decidable before the body is built, which is the point).
    pub fn fresh(&self, etag: &str) -> Option<Response> {
        match Answer::of(self.if_none_match.as_deref(), etag) {
            Answer::NotModified => {
                let resp = respond(304, None, self.cache_control);
                set(resp.headers(), "ETag", &etag_header(etag));
                Some(resp)
            }
            Answer::Full => None,
        }
    }

    /// 304 if fresh, else 200 with `body` (HEAD: the same headers, no body).
    pub fn answer(&self, body: Vec<u8>, etag: &str) -> Response {
        if let Some(not_modified) = self.fresh(etag) {
            return not_modified;
        }
        let resp = respond(200, (!self.head_only).then_some(body), self.cache_control);
        let h = resp.headers();
        set(h, "ETag", &etag_header(etag));
        if self.head_only {
            set(h, "Content-Type", JSON_CONTENT_TYPE);
        }
        resp
    }

    /// The same answer from `kept`, a public GET's 200 as [`full_answer`]
    /// built it for the location's copy (`read_cache`): a 304 if fresh, the
    /// headers alone for HEAD, otherwise `kept` itself, sent untouched. On
    /// the polling hot path, copying its body through the Worker and
    /// rebuilding its headers were most of our own CPU.
    pub fn kept(&self, kept: web_sys::Response, etag: &str) -> Reply {
        if let Some(not_modified) = self.fresh(etag) {
            return Reply::Built(not_modified);
        }
        if self.head_only {
            let headers = Headers(kept.headers());
            return Reply::Built(
                ResponseBuilder::new()
                    .with_status(200)
                    .with_headers(headers)
                    .empty(),
            );
        }
        Reply::Kept(kept)
    }
}

/// What a request is answered with: a response built here, or one the
/// location's copy kept, which goes out as the runtime gave it (wrapping it
/// in a `worker::Response` would rebuild it on the way out).
pub enum Reply {
    /// Built by this module.
    Built(Response),
    /// From the location's copy (`read_cache`).
    Kept(web_sys::Response),
}

impl From<Response> for Reply {
    fn from(resp: Response) -> Self {
        Reply::Built(resp)
    }
}

impl Reply {
    /// The runtime's response.
    pub fn into_raw(self) -> web_sys::Response {
        match self {
            Reply::Built(resp) => resp.into(),
            Reply::Kept(raw) => raw,
        }
    }
}

/// A public read's full 200 answer (what an unconditional GET is sent):
/// the entry kept in the location's copy.
pub fn full_answer(body: Vec<u8>, etag: &str) -> Response {
    CachedRead {
        if_none_match: None,
        head_only: false,
        cache_control: READ_CACHE_CONTROL,
    }
    .answer(body, etag)
}
