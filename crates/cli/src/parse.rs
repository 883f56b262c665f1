//! Values given on the command line: durations (`1s`, `500ms`, `250us`, `100ns`, `2m`, `1h`),
//! windows, percentages, trace ids and sizes (`4K`, `1M`, `8MiB`). Every error names the value.

use ringtrace_analysis::TraceId;

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

/// A window width, or the whole range (`all`).
#[derive(Clone, Copy, Debug)]
pub struct Window(pub Option<u64>);

/// Parses a window width (`5s`, `500ms`) or `all`.
pub fn parse_window(s: &str) -> Result<Window, String> {
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(Window(None));
    }
    parse_nanos(s).map(|ns| Window(Some(ns)))
}

/// Parses a share of requests: `10%`, `10` or `2.5%`, more than 0 and at most 100.
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let number = t.strip_suffix('%').unwrap_or(t).trim();
    match number.parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 100.0 => Ok(p),
        Ok(_) => Err(format!("{s:?} must be more than 0% and at most 100%")),
        Err(_) => Err(format!("{s:?} is not a percentage such as 10%")),
    }
}

/// Parses a positive size in bytes: a number with an optional unit `K`, `M`, `G` (or `KiB`,
/// `MiB`, `GiB`; powers of 1024) or `B`; the error names the value.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        u => return Err(format!("{s:?} has unknown unit {u:?}; use K, M or G (powers of 1024)")),
    };
    let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a size such as 4K, 1M or 4096"))?;
    match n.checked_mul(scale) {
        Some(0) => Err(format!("{s:?} must be positive")),
        Some(b) => Ok(b),
        None => Err(format!("{s:?} is too large")),
    }
}

/// A comma-separated list of sizes, as one value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sizes(pub Vec<u64>);

/// A comma-separated list of positive counts, as one value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counts(pub Vec<u32>);

/// Parses a comma-separated list of sizes (`1K,128K,1M`).
pub fn parse_byte_list(s: &str) -> Result<Sizes, String> {
    s.split(',').map(parse_bytes).collect::<Result<_, _>>().map(Sizes)
}

/// Parses a comma-separated list of positive counts (`1,2,4,8`).
pub fn parse_count_list(s: &str) -> Result<Counts, String> {
    s.split(',')
        .map(|c| match c.trim().parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{c:?} in {s:?} is not a positive count")),
        })
        .collect::<Result<_, _>>()
        .map(Counts)
}

/// Parses a trace id given on the command line; the error names the value.
pub fn parse_trace_id(s: &str) -> Result<TraceId, String> {
    let hex = s.trim().to_ascii_lowercase();
    let padded = if hex.len() < 32 { format!("{hex:0>32}") } else { hex };
    TraceId::from_hex(&padded).map_err(|e| format!("{s:?} is not a trace id: {e}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes() {
        use super::{parse_byte_list, parse_bytes, parse_count_list};
        assert_eq!(parse_bytes("4K"), Ok(4096));
        assert_eq!(parse_bytes("8MiB"), Ok(8 << 20));
        assert_eq!(parse_bytes("100"), Ok(100));
        assert_eq!(parse_byte_list("1K,128K,1M"), Ok(super::Sizes(vec![1024, 128 << 10, 1 << 20])));
        assert!(parse_bytes("0").unwrap_err().contains("positive"));
        assert!(parse_bytes("4X").unwrap_err().contains("\"X\""));
        assert!(parse_bytes("-4K").is_err());
        assert!(parse_bytes("99999999999G").unwrap_err().contains("too large"));
        assert_eq!(parse_count_list("1,2,4"), Ok(super::Counts(vec![1, 2, 4])));
        assert!(parse_count_list("1,0").is_err());
    }

    use super::{parse_nanos, parse_percent, parse_trace_id};

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

    #[test]
    fn percentages_and_errors_name_the_value() {
        assert_eq!(parse_percent("10%"), Ok(10.0));
        assert_eq!(parse_percent("2.5"), Ok(2.5));
        assert_eq!(parse_percent("100 %"), Ok(100.0));
        for bad in ["0%", "101", "ten", "-5%", "NaN"] {
            let e = parse_percent(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn trace_ids_are_padded_and_errors_name_the_value() {
        assert_eq!(parse_trace_id("ff").unwrap().get(), 0xff);
        for bad in ["xyz", "0", &"f".repeat(33)] {
            let e = parse_trace_id(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }
}
