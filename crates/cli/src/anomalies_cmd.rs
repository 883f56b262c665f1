//! `ringtrace anomalies`: which node runs a daemon unlike its peers.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use ringtrace_analysis::{anomalies, anomaly_output, AnomalyOptions};

use crate::{duration, load};

/// Arguments of `ringtrace anomalies`.
#[derive(Args, Debug)]
pub struct AnomaliesArgs {
    /// Window width for comparing method mixes, e.g. 5s, 500ms; `all` compares the whole time
    /// range as one window.
    #[arg(long, default_value = "5s", value_parser = parse_window)]
    pub window: Window,
    /// The most reasons listed per (node, daemon).
    #[arg(long, default_value_t = 3)]
    pub reasons: usize,
    /// Print JSON: {"anomalies":[{"node","daemon","score","reasons":[{"method","detail"}]}]}.
    #[arg(long)]
    pub json: bool,
    /// Recording files or directories, OTLP/JSON lines, or Jaeger JSON.
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Refuse a file cut short (a crash mid-write) instead of reading it up to the cut with a
    /// warning.
    #[arg(long)]
    pub strict: bool,
}

/// A window width, or the whole range (`all`).
#[derive(Clone, Copy, Debug)]
pub struct Window(pub Option<u64>);

/// Parses a window width (`5s`, `500ms`) or `all`.
pub fn parse_window(s: &str) -> Result<Window, String> {
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(Window(None));
    }
    duration::parse_nanos(s).map(|ns| Window(Some(ns)))
}

/// Runs `ringtrace anomalies`, writing to `out`.
pub fn run(args: AnomaliesArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let data = load::read_compact(&args.inputs, args.strict, &mut |_, _| {})?;
    let options = AnomalyOptions { window_ns: args.window.0, max_reasons: args.reasons };
    let result = anomalies(&data, &options)?;
    if args.json {
        anomaly_output::write_json(&result, out)?;
    } else {
        anomaly_output::write_table(&result, out)?;
    }
    Ok(())
}
