//! `ringtrace bottlenecks`: which (node, daemon, operation) hold the most critical-path time.

use std::io::Write;

use clap::Args;
use ringtrace_analysis::{bottlenecks, bottlenecks_output};

use crate::input::{Loaded, TraceInputs};
use crate::parse::parse_percent;

/// Arguments of `ringtrace bottlenecks`.
#[derive(Args, Debug)]
pub struct BottlenecksArgs {
    /// Print JSON: {"bottlenecks":[{"node","daemon","operation","critical_path_ns","share",
    /// "location"}]}, largest critical-path time first.
    #[arg(long)]
    pub json: bool,
    /// Only the slowest share of requests by latency, e.g. 10%.
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
    pub slowest: Option<f64>,
    /// Rows in the table (JSON has every row).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    #[command(flatten)]
    pub input: TraceInputs,
}

/// Runs `ringtrace bottlenecks`.
pub fn run(args: BottlenecksArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let result = match crate::input::store_input(&args.input.inputs)? {
        #[cfg(feature = "store")]
        Some(store) => {
            crate::input::on_store(&store, |s| s.bottlenecks(args.slowest, &args.input.causality_options()))?
        }
        #[cfg(not(feature = "store"))]
        Some(never) => match never {},
        None => {
            let Loaded { data, causality } = args.input.load()?;
            bottlenecks(&data, &causality, args.slowest)
        }
    };
    if args.json {
        bottlenecks_output::write_json(&result, out)?;
    } else {
        bottlenecks_output::write_table(&result, Some(args.top), out)?;
    }
    Ok(())
}
