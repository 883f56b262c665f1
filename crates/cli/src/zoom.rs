//! The zoom flags shared by `profile` and `flame`: time range, node, daemon, request and
//! operation.

use clap::Args;
use ringtrace_analysis::{Dataset, SpanFilter};

use crate::parse::parse_nanos;

/// Which spans to keep.
#[derive(Args, Debug, Default, Clone)]
pub struct ZoomArgs {
    /// Keep spans ending after this time: Unix nanoseconds, or +DURATION from the first span's
    /// start (e.g. +1.5s).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub from: Option<TimePoint>,
    /// Keep spans starting before this time: Unix nanoseconds, or +DURATION from the first
    /// span's start.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub to: Option<TimePoint>,
    /// Keep spans of this node.
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
    /// Keep spans of this daemon.
    #[arg(long, value_name = "DAEMON")]
    pub daemon: Option<String>,
    /// Keep spans of this request: its request.id or its trace id (32 hex digits).
    #[arg(long, value_name = "ID")]
    pub request: Option<String>,
    /// Keep spans of this operation: a span name or target::name.
    #[arg(long, value_name = "OP")]
    pub operation: Option<String>,
}

/// A point in time on the command line.
#[derive(Clone, Copy, Debug)]
pub enum TimePoint {
    /// Unix nanoseconds.
    Absolute(u64),
    /// Nanoseconds after the first span's start.
    Offset(u64),
}

fn parse_time(s: &str) -> Result<TimePoint, String> {
    let t = s.trim();
    if let Some(rest) = t.strip_prefix('+') {
        let rest = rest.trim();
        if !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit()) {
            return rest.parse().map(TimePoint::Offset).map_err(|_| format!("{s:?} is not a time"));
        }
        return parse_nanos(rest).map(TimePoint::Offset);
    }
    t.parse()
        .map(TimePoint::Absolute)
        .map_err(|_| format!("{s:?} is not a time: give Unix nanoseconds or +DURATION (e.g. +1.5s)"))
}

impl ZoomArgs {
    /// Whether any of these flags was given.
    pub fn is_set(&self) -> bool {
        self.from.is_some()
            || self.to.is_some()
            || self.node.is_some()
            || self.daemon.is_some()
            || self.request.is_some()
            || self.operation.is_some()
    }

    /// The filter, with offsets resolved against the first span of `data`.
    pub fn filter(&self, data: &Dataset) -> SpanFilter {
        let origin = data.spans.iter().map(|s| s.start_unix_ns).min().unwrap_or(0);
        let resolve = |p: TimePoint| match p {
            TimePoint::Absolute(ns) => ns,
            TimePoint::Offset(ns) => origin.saturating_add(ns),
        };
        SpanFilter {
            from_unix_ns: self.from.map(resolve),
            to_unix_ns: self.to.map(resolve),
            node: self.node.clone(),
            daemon: self.daemon.clone(),
            request: self.request.clone(),
            operation: self.operation.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert!(matches!(parse_time("+1.5s"), Ok(TimePoint::Offset(1_500_000_000))));
        assert!(matches!(parse_time("+0"), Ok(TimePoint::Offset(0))));
        assert!(matches!(
            parse_time("1700000000000000000"),
            Ok(TimePoint::Absolute(1_700_000_000_000_000_000))
        ));
        assert!(parse_time("yesterday").unwrap_err().contains("yesterday"));
        assert!(parse_time("+soon").is_err());
    }
}
