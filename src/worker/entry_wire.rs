//! The contract between the entry Worker and the two Workers behind it (write
//! and extras), both halves in one file (as `do_wire` is for the Durable
//! Objects): what the entry Worker adds to the requests it forwards, what the
//! Worker behind says back, and the cron.
//!
//! - A forwarded request goes as it came, with [`FORWARDED_HEADER`] added.
//!   The entry keeps the location's copies of head.json and capsule.json
//!   (`read_cache`), so the Worker behind neither reads nor makes them for a
//!   forwarded request: when one changed what they say (a write, a key
//!   event, a paid plan), its answer carries [`CHANGED_HEADER`]
//!   (`core::entry::Changed`), which the entry applies to its copies before
//!   answering, and removes. Reached directly (one Worker alone), the write
//!   Worker keeps the copies itself, as it always did.
//! - The cron: the trigger is the extras Worker's (wrangler.extras.toml). A
//!   scheduled event that reaches the entry instead (locally: wrangler dev's
//!   `/__scheduled` test hook reaches the first Worker only) is handed over
//!   as a `POST` of [`CRON_URL`]. No request from outside can carry that
//!   URL: its host is no hostname Cloudflare routes, and its path is no
//!   route, so the entry answers it 404 itself.

/// On every request the entry forwards (the value is `1`).
pub const FORWARDED_HEADER: &str = "x-selfcap-forwarded";

/// On the answer to a forwarded request that changed an
/// agent's head.json or capsule.json: `core::entry::Changed` items.
pub const CHANGED_HEADER: &str = "x-selfcap-changed";

/// The scheduled event, handed from the entry to the extras Worker.
#[cfg(any(feature = "entry", feature = "extras"))]
pub const CRON_URL: &str = "https://cron.self-capsule.internal/scheduled";

/// Extras side: whether a request (its method and URL) is the entry handing
/// over a scheduled event.
#[cfg(feature = "extras")]
pub fn is_cron(method: &str, url: &str) -> bool {
    method == "POST" && url == CRON_URL
}
