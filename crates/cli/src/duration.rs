//! Durations on the command line: `1s`, `500ms`, `250us`, `100ns`, `2m`, `1h`.

/// Parses a positive duration with a unit into nanoseconds; the error names the value.
pub fn parse_nanos(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        "" => return Err(format!("{s:?} has no unit; write e.g. 1s, 500ms, 2m")),
        u => return Err(format!("{s:?} has unknown unit {u:?}; use ns, us, ms, s, m or h")),
    };
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a number followed by a unit"))?;
    let ns = n * scale;
    if !(ns >= 1.0 && ns < u64::MAX as f64) {
        return Err(format!("{s:?} must be at least 1ns"));
    }
    Ok(ns as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_nanos;

    #[test]
    fn units() {
        assert_eq!(parse_nanos("1s"), Ok(1_000_000_000));
        assert_eq!(parse_nanos("500ms"), Ok(500_000_000));
        assert_eq!(parse_nanos("2.5s"), Ok(2_500_000_000));
        assert_eq!(parse_nanos("2m"), Ok(120_000_000_000));
        assert_eq!(parse_nanos("10us"), Ok(10_000));
    }

    #[test]
    fn errors_name_the_value() {
        for bad in ["1", "0s", "1 parsec", "s", "-1s", "1e9"] {
            let e = parse_nanos(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
    }
}
