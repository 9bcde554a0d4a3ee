//! Time as the service sees it: Unix milliseconds in, RFC 3339 UTC text out
//! (and that text read back, for the client).
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

/// Unix ms of a timestamp the service reads back (its own `Z` spelling, or
/// any other [`parse_timestamp`] accepts); `None` for anything else or an
/// instant before 1970.
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    parse_timestamp(s).and_then(|ms| u64::try_from(ms).ok())
}

/// At most this many fraction-of-second digits in a capsule timestamp: nanoseconds, the most
/// common clients write (JavaScript `toISOString` writes 3, Python `isoformat` 6, Go
/// `RFC3339Nano` up to 9).
pub const TIMESTAMP_FRACTION_DIGITS_MAX: usize = 9;

/// Whether `s` is a timestamp as capsules carry them (`updated_at`, `expires_at`, ...): one
/// [`parse_timestamp`] accepts. What the schema accepts is exactly what the service can
/// evaluate, so a grant's `expires_at` that passed validation is never an unreadable date.
pub fn is_timestamp(s: &str) -> bool {
    parse_timestamp(s).is_some()
}

/// The one RFC 3339 parser: Unix milliseconds (negative before 1970, fractions beyond the
/// millisecond truncated) of `YYYY-MM-DDTHH:MM:SS[.f]` followed by `Z` or `±HH:MM`, with
/// an upper-case `T` and `Z` (what clients write), 1 to [`TIMESTAMP_FRACTION_DIGITS_MAX`]
/// fraction digits when there is a fraction, a day that exists in that month (proleptic
/// Gregorian), hour 0–23, minute 0–59, second 0–60 (a leap second counts as the next
/// minute's first) and an offset up to ±23:59. Any year 0000–9999. `None` for anything else.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let fields = [(0, 4), (5, 2), (8, 2), (11, 2), (14, 2), (17, 2)].map(|(i, n)| digits(b, i, n));
    let [Some(y), Some(mo), Some(d), Some(h), Some(mi), Some(sec)] = fields else {
        return None;
    };
    if !(at(4, b'-') && at(7, b'-') && at(10, b'T') && at(13, b':') && at(16, b':')) {
        return None;
    }
    // Bytes 0..19 were just checked to be ASCII, so 19 is a char boundary.
    let mut zone = &b[19..];
    let mut ms = 0;
    if let Some(frac) = zone.strip_prefix(b".") {
        let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if !(1..=TIMESTAMP_FRACTION_DIGITS_MAX).contains(&n) {
            return None;
        }
        ms = frac[..n.min(3)]
            .iter()
            .chain(std::iter::repeat(&b'0'))
            .take(3)
            .fold(0, |n, c| n * 10 + i64::from(c - b'0'));
        zone = &frac[n..];
    }
    let offset_min: i64 = if zone == b"Z" {
        0
    } else if zone.len() == 6 && matches!(zone[0], b'+' | b'-') && zone[3] == b':' {
        let (zh, zm) = (digits(zone, 1, 2)?, digits(zone, 4, 2)?);
        if zh > 23 || zm > 59 {
            return None;
        }
        let m = i64::from(zh * 60 + zm);
        if zone[0] == b'-' {
            -m
        } else {
            m
        }
    } else {
        return None;
    };
    if !(1..=12).contains(&mo) || !(1..=days_in_month(y, mo)).contains(&d) {
        return None;
    }
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let days = days_from_civil(i64::from(y), mo, d);
    let local_s = days * 86_400 + i64::from(h * 3600 + mi * 60 + sec);
    Some((local_s - offset_min * 60) * 1000 + ms)
}

/// Howard Hinnant's days-from-civil (proleptic Gregorian): days since 1970-01-01.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = y - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The `len` ASCII digits at `b[at..]` as a number; `None` if any is not an ASCII digit.
fn digits(b: &[u8], at: usize, len: usize) -> Option<u32> {
    let d = b.get(at..at + len)?;
    d.iter()
        .all(u8::is_ascii_digit)
        .then(|| d.iter().fold(0, |n, c| n * 10 + u32::from(c - b'0')))
}

/// Days in month `m` (1–12) of year `y`, proleptic Gregorian.
fn days_in_month(y: u32, m: u32) -> u32 {
    match m {
        2 if y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
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
    fn rfc3339_reads_the_services_spelling() {
        const NOW: u64 = 1_770_681_600_000; // 2026-02-10T00:00:00Z
        for ms in [0, NOW, 951_782_400_000, 4_102_444_800_000, NOW + 3_599_000] {
            assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms));
        }
        assert_eq!(parse_rfc3339("2026-02-10T00:00:00.25Z"), Some(NOW + 250));
        for bad in [
            "",
            "2026-02-10",
            "2026-02-10T00:00:00",
            "2026-13-10T00:00:00Z",
            "2026-02-10T00:00:00.Z",
            "2026-02-10 00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn timestamps_as_clients_write_them() {
        for ok in [
            "2026-02-10T00:00:00Z",
            "2026-02-10T12:34:56.789Z",         // JavaScript toISOString()
            "2026-02-10T12:34:56.123456+00:00", // Python isoformat(), aware datetime
            "2026-02-10T12:34:56.123456789-07:00", // Go RFC3339Nano
            "2024-02-29T23:59:60Z",             // leap day, leap second
            "2000-02-29T00:00:00+23:59",        // 400-year rule
            "1969-12-31T23:59:59Z",
        ] {
            assert!(is_timestamp(ok), "{ok}");
        }
        for bad in [
            "",
            "2026-02-10",
            "2026-02-10T00:00:00",             // no zone
            "2026-02-10t00:00:00z",            // lower case
            "2026-02-10 00:00:00Z",            // space
            "2026-02-10T00:00:00+0000",        // offset without colon
            "2026-02-10T00:00:00+24:00",       // offset hour
            "2026-02-10T00:00:00.Z",           // empty fraction
            "2026-02-10T00:00:00.1234567890Z", // 10 fraction digits
            "2026-02-30T00:00:00Z",            // no such day
            "2025-02-29T00:00:00Z",            // not a leap year
            "1900-02-29T00:00:00Z",            // century rule
            "2026-13-10T00:00:00Z",
            "2026-02-10T24:00:00Z",
            "2026-02-10T00:60:00Z",
            "2026-02-10T00:00:61Z",
            "2026-02-10T00:00:00Z ",
            "+2026-02-10T00:00:00Z",
            "2026-02-10T00:00:0\u{ff10}Z", // fullwidth digit
            "\u{0662}026-02-10T00:00:00Z", // Arabic-Indic digit
        ] {
            assert!(!is_timestamp(bad), "{bad}");
        }
    }

    #[test]
    fn every_accepted_timestamp_evaluates_to_its_instant() {
        // Expected instants from Python's datetime.fromisoformat (an independent parser).
        for (s, ms) in [
            ("2026-11-28T17:00:28.185043+00:00", 1_795_885_228_185),
            ("2026-02-10T12:34:56.123456789-07:00", 1_770_752_096_123),
            ("2026-02-10T05:30:00+05:30", 1_770_681_600_000),
            ("1969-12-31T23:59:59.5Z", -500),
            ("0001-01-01T00:00:00Z", -62_135_596_800_000),
            ("2026-01-01T00:00:00-23:59", 1_767_311_940_000),
            ("9999-12-31T23:59:59.999+23:59", 253_402_214_459_999),
        ] {
            assert_eq!(parse_timestamp(s), Some(ms), "{s}");
        }
        // A leap second is the next minute's first.
        assert_eq!(
            parse_timestamp("2016-12-31T23:59:60Z"),
            parse_timestamp("2017-01-01T00:00:00Z")
        );
        // The schema and the evaluation are one function: nothing passes one and fails the other.
        for s in [
            "2026-02-30T00:00:00Z",
            "2026-02-10T00:00:00+24:00",
            "2026-02-10T00:00:00",
        ] {
            assert!(!is_timestamp(s) && parse_timestamp(s).is_none(), "{s}");
        }
    }

    #[test]
    fn rounds_waits_up() {
        assert_eq!(secs_until(1000, 1000), 0);
        assert_eq!(secs_until(1000, 1001), 1);
        assert_eq!(secs_until(5000, 1000), 0);
        assert_eq!(secs_until(0, 10_000), 10);
    }
}
