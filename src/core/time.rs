//! Time as the service sees it: Unix milliseconds in, RFC 3339 UTC text out.
//! (No clock is read here; callers pass `now`, which keeps the core testable
//! and lets the end-to-end tests inject a clock.)

/// `YYYY-MM-DDTHH:MM:SSZ` for a Unix time in milliseconds (sub-seconds dropped).
pub fn rfc3339(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Whole seconds from `now_ms` until `until_ms`, rounded up (0 if past).
pub fn secs_until(now_ms: u64, until_ms: u64) -> u64 {
    until_ms.saturating_sub(now_ms).div_ceil(1000)
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_770_681_599_999), "2026-02-09T23:59:59Z");
        assert_eq!(rfc3339(4_102_444_800_000), "2100-01-01T00:00:00Z");
    }

    #[test]
    fn rounds_waits_up() {
        assert_eq!(secs_until(1000, 1000), 0);
        assert_eq!(secs_until(1000, 1001), 1);
        assert_eq!(secs_until(5000, 1000), 0);
        assert_eq!(secs_until(0, 10_000), 10);
    }
}
