//! Where "now" comes from. Production always uses the runtime clock; the e2e
//! tests can pin the time per request (to cross 24-hour windows without
//! waiting), but only when the deployment explicitly opts in.

use worker::{js_sys, Request};

/// Header a test sends to set "now" (unix milliseconds). Honoured only when the
/// `SELFCAP_TEST_CLOCK` var is `"1"`, which only the e2e harness sets.
pub const TEST_NOW_HEADER: &str = "x-selfcap-test-now";
/// Header the Worker uses to hand its "now" to a Durable Object, so both
/// halves of one request agree on the time (the DO is not publicly reachable,
/// so it can trust this header).
pub const INTERNAL_NOW_HEADER: &str = "x-selfcap-now";

pub fn system_now_ms() -> u64 {
    let now = js_sys::Date::now();
    if now.is_finite() && now > 0.0 {
        now as u64
    } else {
        0
    }
}

/// "Now" for a public request.
pub fn request_now_ms(req: &Request, test_clock: bool) -> u64 {
    if test_clock {
        if let Some(ms) = header_ms(req, TEST_NOW_HEADER) {
            return ms;
        }
    }
    system_now_ms()
}

/// "Now" inside a Durable Object: the Worker's value, else the runtime clock.
pub fn internal_now_ms(req: &Request) -> u64 {
    header_ms(req, INTERNAL_NOW_HEADER).unwrap_or_else(system_now_ms)
}

fn header_ms(req: &Request, name: &str) -> Option<u64> {
    let raw = req.headers().get(name).ok().flatten()?;
    let ms: u64 = raw.trim().parse().ok()?;
    // Stay inside the range where JS numbers and RFC 3339 rendering are exact.
    (ms <= (1u64 << 53)).then_some(ms)
}
