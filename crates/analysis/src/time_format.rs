//! Human-readable times: RFC 3339 timestamps and short durations.

/// Formats Unix nanoseconds as an RFC 3339 UTC timestamp, such as `2024-03-05T14:07:09Z`.
/// A fractional second is printed in groups of three digits, only as many as needed
/// (`…09.250Z`, `…09.000001Z`).
pub fn rfc3339_utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let nanos = unix_ns % 1_000_000_000;
    let (year, month, day) = civil_from_days(secs / 86_400);
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem / 60 % 60, rem % 60);
    let mut out = format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}");
    if nanos != 0 {
        let mut frac = format!("{nanos:09}");
        while frac.ends_with("000") {
            frac.truncate(frac.len() - 3);
        }
        out.push('.');
        out.push_str(&frac);
    }
    out.push('Z');
    out
}

/// The UTC day of Unix nanoseconds, `YYYY-MM-DD`.
pub fn utc_day(unix_ns: u64) -> String {
    let (year, month, day) = civil_from_days(unix_ns / 86_400_000_000_000);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Formats a duration in the largest fitting unit: `850 ns`, `12.3 µs`, `12.3 ms`, `1.25 s`.
pub fn duration(ns: u64) -> String {
    let x = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", x / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.1} ms", x / 1e6)
    } else {
        format!("{:.2} s", x / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(1_704_067_200_000_000_000), "2024-01-01T00:00:00Z");
        // 2024-02-29 (leap day) 12:34:56.25
        assert_eq!(rfc3339_utc(1_709_210_096_250_000_000), "2024-02-29T12:34:56.250Z");
        assert_eq!(rfc3339_utc(951_782_400_000_000_001), "2000-02-29T00:00:00.000000001Z");
        assert_eq!(rfc3339_utc(4_102_444_799_000_001_000), "2099-12-31T23:59:59.000001Z");
        assert_eq!(rfc3339_utc(u64::MAX), "2554-07-21T23:34:33.709551615Z");
    }

    #[test]
    fn durations() {
        assert_eq!(duration(850), "850 ns");
        assert_eq!(duration(12_345), "12.3 µs");
        assert_eq!(duration(12_345_678), "12.3 ms");
        assert_eq!(duration(1_250_000_000), "1.25 s");
    }
}
