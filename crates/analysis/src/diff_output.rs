//! Renderings of a [`TraceDiff`]: JSON for tools, a table for people.

use std::io::{self, Write};

use serde::Serialize;

use crate::diff::{SideSummary, TraceDiff};
use crate::time_format::duration;

/// Writes `{"a":{"traces","spans","mean_latency_ns"},"b":{...},"rows":[{"daemon","operation",
/// "count_a","count_b","count_delta","self_ns_a","self_ns_b","self_ns_delta"}]}` on one line.
/// Counts and self times are means per request of each side (floats); deltas are B minus A;
/// rows largest self-time difference first.
pub fn write_json(diff: &TraceDiff, out: &mut dyn Write) -> io::Result<()> {
    #[derive(Serialize)]
    struct Doc<'a> {
        a: Side,
        b: Side,
        rows: Vec<Row<'a>>,
    }
    #[derive(Serialize)]
    struct Side {
        traces: usize,
        spans: u64,
        mean_latency_ns: f64,
    }
    #[derive(Serialize)]
    struct Row<'a> {
        daemon: &'a str,
        operation: &'a str,
        count_a: f64,
        count_b: f64,
        count_delta: f64,
        self_ns_a: f64,
        self_ns_b: f64,
        self_ns_delta: f64,
    }
    let side =
        |s: &SideSummary| Side { traces: s.traces, spans: s.spans, mean_latency_ns: s.mean_latency_ns };
    let doc = Doc {
        a: side(&diff.a),
        b: side(&diff.b),
        rows: diff
            .rows
            .iter()
            .map(|r| Row {
                daemon: &r.daemon,
                operation: &r.operation,
                count_a: r.count_a,
                count_b: r.count_b,
                count_delta: r.count_delta(),
                self_ns_a: r.self_ns_a,
                self_ns_b: r.self_ns_b,
                self_ns_delta: r.self_ns_delta(),
            })
            .collect(),
    };
    serde_json::to_writer(&mut *out, &doc)?;
    writeln!(out)
}

/// Writes both sides' summaries and the rows, per request means, B minus A.
pub fn write_table(
    diff: &TraceDiff,
    labels: (&str, &str),
    top: Option<usize>,
    out: &mut dyn Write,
) -> io::Result<()> {
    for (name, label, s) in [("A", labels.0, &diff.a), ("B", labels.1, &diff.b)] {
        writeln!(
            out,
            "{name}: {label}: {} requests, {} spans, mean latency {}",
            s.traces,
            s.spans,
            signed(s.mean_latency_ns).trim_start_matches('+')
        )?;
    }
    writeln!(out, "per request, B minus A, largest self-time difference first:")?;
    writeln!(
        out,
        "  {:>11} {:>10} {:>10} {:>8} {:>7} {:>7}  daemon / operation",
        "Δself", "self A", "self B", "Δspans", "spans A", "spans B"
    )?;
    let rows = &diff.rows[..top.unwrap_or(usize::MAX).min(diff.rows.len())];
    for r in rows {
        writeln!(
            out,
            "  {:>11} {:>10} {:>10} {:>+8.2} {:>7.2} {:>7.2}  {} / {}",
            signed(r.self_ns_delta()),
            duration(r.self_ns_a.round() as u64),
            duration(r.self_ns_b.round() as u64),
            r.count_delta(),
            r.count_a,
            r.count_b,
            r.daemon,
            r.operation
        )?;
    }
    if rows.len() < diff.rows.len() {
        writeln!(out, "  ({} more; --top to show more, --json for all)", diff.rows.len() - rows.len())?;
    }
    Ok(())
}

/// A signed duration: `+1.2 ms`, `-850 ns`.
fn signed(ns: f64) -> String {
    let sign = if ns < 0.0 { "-" } else { "+" };
    format!("{sign}{}", duration(ns.abs().round() as u64))
}
