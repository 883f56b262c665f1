//! Renderings of [`Anomalies`]: a ranked table for people, JSON for tools.

use std::io::{self, Write};

use serde_json::json;

use crate::anomaly::Anomalies;
use crate::text_layout::column_width;
use crate::time_format::duration;

/// Writes [`to_json`], indented, and a newline.
pub fn write_json(result: &Anomalies, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &to_json(result))?;
    writeln!(out)
}

/// The anomalies as JSON, exactly
/// `{"anomalies":[{"node":"…","daemon":"…","score":F,"reasons":[{"method":"…","detail":"…"}]}]}`,
/// highest score first. Scores are rounded to four decimals.
pub fn to_json(result: &Anomalies) -> serde_json::Value {
    json!({
        "anomalies": result.anomalies.iter().map(|a| json!({
            "node": a.node,
            "daemon": a.daemon,
            "score": round4(a.score),
            "reasons": a.reasons.iter().map(|r| json!({
                "method": r.method,
                "detail": r.detail(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// Writes the ranking as a table: rank, node, daemon, score and its two parts, then each
/// reason on its own indented line.
pub fn write_table(result: &Anomalies, out: &mut dyn Write) -> io::Result<()> {
    let window = match result.window_ns {
        Some(w) => format!("windows of {}", duration(w)),
        None => "the whole time range as one window".to_owned(),
    };
    if result.anomalies.is_empty() {
        writeln!(out, "anomalies: no daemon runs on two nodes or more, so there are no peers to compare")?;
    } else {
        writeln!(
            out,
            "anomalies: {} (node, daemon) pairs compared with their peers in {window}; \
             score = mix divergence (bits) + latency (weighted doublings)",
            result.anomalies.len()
        )?;
        let node_width =
            column_width(result.anomalies.iter().map(|a| a.node.chars().count()).max().unwrap_or(0), 4);
        let daemon_width =
            column_width(result.anomalies.iter().map(|a| a.daemon.chars().count()).max().unwrap_or(0), 6);
        writeln!(
            out,
            "{:>4}  {:<node_width$}  {:<daemon_width$}  {:>8}  {:>8}  {:>8}  {:>8}",
            "rank", "node", "daemon", "score", "mix", "latency", "spans"
        )?;
        for (i, a) in result.anomalies.iter().enumerate() {
            writeln!(
                out,
                "{:>4}  {:<node_width$}  {:<daemon_width$}  {:>8.3}  {:>8.3}  {:>8.3}  {:>8}",
                i + 1,
                a.node,
                a.daemon,
                a.score,
                a.mix_bits,
                a.latency,
                a.spans
            )?;
            for r in &a.reasons {
                writeln!(out, "        {}: {}", r.method, r.detail())?;
            }
        }
    }
    if !result.unpaired_daemons.is_empty() {
        writeln!(out, "not compared (on one node only): {}", result.unpaired_daemons.join(", "))?;
    }
    Ok(())
}

fn round4(x: f64) -> f64 {
    if x.is_finite() {
        (x * 10_000.0).round() / 10_000.0
    } else {
        0.0
    }
}
