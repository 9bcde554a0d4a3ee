//! HTTP plumbing shared by every route: JSON responses with the fixed header
//! set (content type, CORS, caching), error bodies, CORS preflight, and
//! `If-None-Match` matching. Statuses for error codes always come from
//! `ReasonCode::http_status`, never from literals here.

use crate::core::reason::ReasonCode;
use serde::Serialize;
use worker::{Headers, Response, ResponseBuilder};

pub const JSON_CONTENT_TYPE: &str = "application/json; charset=utf-8";
/// Read responses: shared caches may keep them for a minute, then must ask
/// again (cheaply, with `If-None-Match`).
pub const READ_CACHE_CONTROL: &str = "public, max-age=60, must-revalidate";
/// Errors, writes and bootstrap answers are never cached: a cached 404 would
/// hide a capsule published a second later.
pub const NO_STORE: &str = "no-store";
/// Seconds a client should wait after a 503.
pub const UNAVAILABLE_RETRY_AFTER_SEC: u64 = 5;

/// Builds a response with the headers every answer carries.
pub fn respond(status: u16, body: Option<Vec<u8>>, cache_control: &str) -> Response {
    let headers = Headers::new();
    if body.is_some() {
        set(&headers, "Content-Type", JSON_CONTENT_TYPE);
    }
    set(&headers, "Cache-Control", cache_control);
    set(&headers, "X-Content-Type-Options", "nosniff");
    add_cors(&headers);
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
pub fn json<T: Serialize>(status: u16, value: &T, cache_control: &str) -> worker::Result<Response> {
    let bytes = serde_json::to_vec(value).map_err(|e| worker::Error::RustError(e.to_string()))?;
    Ok(respond(status, Some(bytes), cache_control))
}

/// Whether an error is answering a write: `PUT` clients parse
/// `accepted`/`reason_codes` on every non-2xx, so they get those fields too.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    Read,
    Write,
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
}

/// `{"error": code}` with the code's own status.
pub fn error(code: ReasonCode, audience: Audience, detail: Option<&str>) -> Response {
    error_body(code, audience, detail, None, None)
}

/// 410 `cursor_not_found`: the cursor was pruned or never existed; the
/// client starts over from the full history.
pub fn cursor_not_found(history_url: &str) -> Response {
    error_body(
        ReasonCode::CursorNotFound,
        Audience::Read,
        None,
        None,
        Some(history_url),
    )
}

fn error_body(
    code: ReasonCode,
    audience: Audience,
    detail: Option<&str>,
    retry_after_sec: Option<u64>,
    history_url: Option<&str>,
) -> Response {
    let write = audience == Audience::Write;
    let body = ErrorBody {
        error: code.as_str(),
        accepted: write.then_some(false),
        reason_codes: write.then_some([code.as_str()]),
        detail,
        retry_after_sec,
        history_url,
    };
    // The body is a fixed struct of strings and numbers; fall back to the bare
    // code rather than failing if serialisation were ever to break.
    let bytes = serde_json::to_vec(&body)
        .unwrap_or_else(|_| format!("{{\"error\":\"{}\"}}", code.as_str()).into_bytes());
    respond(code.http_status(), Some(bytes), NO_STORE)
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
    );
    set(
        resp.headers(),
        "Retry-After",
        &UNAVAILABLE_RETRY_AFTER_SEC.to_string(),
    );
    resp
}

/// CORS preflight answer for a known resource.
pub fn preflight(allow: &str) -> Response {
    let resp = respond(204, None, NO_STORE);
    let h = resp.headers();
    set(h, "Allow", allow);
    set(h, "Access-Control-Allow-Methods", allow);
    set(
        h,
        "Access-Control-Allow-Headers",
        "Content-Type, If-None-Match",
    );
    set(h, "Access-Control-Max-Age", "86400");
    resp
}

/// Everything is public (reads are public, writes are signed), so any origin
/// may call; browsers need `ETag` exposed to revalidate from JS.
fn add_cors(h: &Headers) {
    set(h, "Access-Control-Allow-Origin", "*");
    set(
        h,
        "Access-Control-Expose-Headers",
        "ETag, Retry-After, Allow",
    );
}

/// Header names and values here are constants or digits, which `Headers::set`
/// accepts; nothing useful can be done if it refused, so the error is dropped.
pub fn set(h: &Headers, name: &str, value: &str) {
    let _ = h.set(name, value);
}

/// Does an `If-None-Match` header value match the current entity?
///
/// Accepts what clients and caches actually send: `*`, comma-separated lists,
/// weak tags (`W/"…"`, compared weakly as RFC 9110 requires for
/// `If-None-Match`), quoted or bare tags, and the cursor with or without its
/// `sha256:` prefix, in any case.
pub fn if_none_match(header: &str, cursor_hex: &str) -> bool {
    header.split(',').any(|raw| {
        let tag = raw.trim();
        if tag == "*" {
            return true;
        }
        let tag = tag
            .strip_prefix("W/")
            .or_else(|| tag.strip_prefix("w/"))
            .unwrap_or(tag);
        let tag = tag.trim_matches('"');
        let tag = strip_prefix_ignore_case(tag, "sha256:").unwrap_or(tag);
        !tag.is_empty() && tag.eq_ignore_ascii_case(cursor_hex)
    })
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}
