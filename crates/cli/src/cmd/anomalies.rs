//! `ringtrace anomalies`: which node runs a daemon unlike its peers.

use std::io::Write;

use clap::Args;
use ringtrace_analysis::{anomalies, anomaly_output, AnomalyOptions};

use crate::input::FileInputs;
use crate::parse::{parse_window, Window};

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
    #[command(flatten)]
    pub input: FileInputs,
}

/// Runs `ringtrace anomalies`, writing to `out`.
pub fn run(args: AnomaliesArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let options = AnomalyOptions { window_ns: args.window.0, max_reasons: args.reasons };
    let result = match crate::input::store_input(&args.input.inputs)? {
        #[cfg(feature = "store")]
        Some(store) => store.anomalies(&options)?,
        #[cfg(not(feature = "store"))]
        Some(never) => match never {},
        None => anomalies(&args.input.read_compact_showing_progress()?, &options)?,
    };
    if args.json {
        anomaly_output::write_json(&result, out)?;
    } else {
        anomaly_output::write_table(&result, out)?;
    }
    Ok(())
}
