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

/// Unix ms of `YYYY-MM-DDTHH:MM:SS[.fff]Z`, the service's form (the inverse
/// of [`rfc3339`]; more than three fractional digits are truncated to the
/// millisecond). `None` for any other spelling, a month, day (1–31), hour,
/// minute or second out of range, or an instant before 1970.
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 || !s.ends_with('Z') || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let frac = &s[19..s.len() - 1];
    let ms = match frac.strip_prefix('.') {
        None if frac.is_empty() => 0,
        Some(f) if !f.is_empty() && f.bytes().all(|c| c.is_ascii_digit()) => {
            format!("{:0<3}", &f[..f.len().min(3)]).parse().ok()?
        }
        _ => return None,
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    // Howard Hinnant's days-from-civil.
    let (y, m) = (y as i64 - i64::from(mo <= 2), mo as i64);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = u64::try_from(days).ok()? * 86_400 + h * 3600 + mi * 60 + sec;
    Some(secs * 1000 + ms)
}

/// At most this many fraction-of-second digits in a capsule timestamp: nanoseconds, the most
/// common clients write (JavaScript `toISOString` writes 3, Python `isoformat` 6, Go
/// `RFC3339Nano` up to 9).
pub const TIMESTAMP_FRACTION_DIGITS_MAX: usize = 9;

/// Whether `s` is a timestamp as capsules carry them (`updated_at`, `expires_at`, ...): an
/// RFC 3339 date-time `YYYY-MM-DDTHH:MM:SS[.f]` followed by `Z` or `±HH:MM`, with an
/// upper-case `T` and `Z` (what clients write), 1 to [`TIMESTAMP_FRACTION_DIGITS_MAX`]
/// fraction digits when there is a fraction, a day that exists in that month (proleptic
/// Gregorian), hour 0–23, minute 0–59, second 0–60 (a leap second) and an offset up to
/// ±23:59. Lexical and calendrical only: the instant is never computed (unlike
/// [`parse_rfc3339`], which reads the service's own `Z` spelling), so any year 0000–9999 is
/// fine.
pub fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let fields = [(0, 4), (5, 2), (8, 2), (11, 2), (14, 2), (17, 2)].map(|(i, n)| digits(b, i, n));
    let [Some(y), Some(mo), Some(d), Some(h), Some(mi), Some(sec)] = fields else {
        return false;
    };
    if !(at(4, b'-') && at(7, b'-') && at(10, b'T') && at(13, b':') && at(16, b':')) {
        return false;
    }
    // Bytes 0..19 were just checked to be ASCII, so 19 is a char boundary.
    let mut zone = &b[19..];
    if let Some(frac) = zone.strip_prefix(b".") {
        let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if !(1..=TIMESTAMP_FRACTION_DIGITS_MAX).contains(&n) {
            return false;
        }
        zone = &frac[n..];
    }
    let zone_ok = zone == b"Z"
        || (zone.len() == 6
            && matches!(zone[0], b'+' | b'-')
            && zone[3] == b':'
            && digits(zone, 1, 2).is_some_and(|zh| zh <= 23)
            && digits(zone, 4, 2).is_some_and(|zm| zm <= 59));
    zone_ok
        && (1..=12).contains(&mo)
        && (1..=days_in_month(y, mo)).contains(&d)
        && h <= 23
        && mi <= 59
        && sec <= 60
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
    fn rounds_waits_up() {
        assert_eq!(secs_until(1000, 1000), 0);
        assert_eq!(secs_until(1000, 1001), 1);
        assert_eq!(secs_until(5000, 1000), 0);
        assert_eq!(secs_until(0, 10_000), 10);
    }
}
