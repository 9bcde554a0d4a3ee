//! Where "now" comes from. Production always uses the runtime clock; the e2e
//! tests can pin the time per request (to cross 24-hour windows without
//! waiting), but only when the deployment explicitly opts in. (The Worker
//! hands its "now" to the Durable Objects through `do_wire`.)

use crate::worker::request::Incoming;
use worker::js_sys;

/// Header a test sends to set "now" (unix milliseconds). Honoured only when the
/// `SELFCAP_TEST_CLOCK` var is `"1"`, which only the e2e harness sets.
pub const TEST_NOW_HEADER: &str = "x-selfcap-test-now";

/// Under `SELFCAP_TEST_CLOCK=1`, how long an agent's object waits for what
/// its alarm does a minute later otherwise (refusals mirrored for
/// meta.json, counts sent to the stats shard): an alarm's delay is real
/// time, which the tests cannot move.
#[cfg(feature = "write")]
pub const TEST_CLOCK_ALARM_MS: u64 = 1_000;

/// The runtime clock (Unix ms).
pub fn system_now_ms() -> u64 {
    let now = js_sys::Date::now();
    if now.is_finite() && now > 0.0 {
        now as u64
    } else {
        0
    }
}

/// "Now" for a public request.
pub fn request_now_ms(req: &Incoming, test_clock: bool) -> u64 {
    if test_clock {
        if let Some(ms) = req
            .headers()
            .get(TEST_NOW_HEADER)
            .ok()
            .flatten()
            .and_then(|v| parse_ms(&v))
        {
            return ms;
        }
    }
    system_now_ms()
}

/// A header's Unix ms, kept inside the range where JS numbers and RFC 3339
/// rendering are exact.
pub fn parse_ms(raw: &str) -> Option<u64> {
    let ms: u64 = raw.trim().parse().ok()?;
    (ms <= (1u64 << 53)).then_some(ms)
}
