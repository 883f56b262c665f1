//! `ringtrace stats`: Jaeger UI's trace statistics per service and operation.

use std::io::Write;

use clap::Args;
use ringtrace_analysis::{stats_output, trace_statistics, StatsGroupBy};

use crate::input::{Loaded, TraceInputs};

/// Arguments of `ringtrace stats`.
#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Group spans by service (daemon), operation (span name) or service-operation.
    #[arg(long, default_value = "service-operation")]
    pub by: StatsGroupBy,
    /// Print JSON: {"group_by","traces","spans","trace_duration_ns","rows":[{"service","operation",
    /// "count","total_ns","avg_ns","min_ns","max_ns","self_total_ns","self_avg_ns","self_min_ns",
    /// "self_max_ns","percent","p50_ns","p90_ns","p99_ns"}]}.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub input: TraceInputs,
}

/// Runs `ringtrace stats`.
pub fn run(args: StatsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let stats = match crate::input::store_input(&args.input.inputs)? {
        #[cfg(feature = "store")]
        Some(store) => {
            crate::input::on_store(&store, |s| s.trace_statistics(args.by, &args.input.causality_options()))?
        }
        #[cfg(not(feature = "store"))]
        Some(never) => match never {},
        None => {
            let Loaded { data, causality } = args.input.load()?;
            trace_statistics(&data, &causality, args.by)
        }
    };
    if args.json {
        stats_output::write_json(&stats, out)?;
    } else {
        stats_output::write_table(&stats, out)?;
    }
    Ok(())
}
