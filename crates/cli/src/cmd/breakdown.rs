//! `ringtrace breakdown`: time per (client node, serving node, daemon, operation).

use std::io::Write;

use clap::Args;
use ringtrace_analysis::{breakdown, breakdown_output};

use crate::input::{Loaded, TraceInputs};

/// Arguments of `ringtrace breakdown`.
#[derive(Args, Debug)]
pub struct BreakdownArgs {
    /// Print JSON: {"requests":[{"trace_id","request_id","client_node","latency_ns","rows":
    /// [{"serving_node","daemon","operation","count","total_ns","self_ns"}]}],"aggregate":
    /// [{"client_node","serving_node","daemon","operation","count","total_ns","self_ns"}],
    /// "operations":[{"operation","count","total_ns","self_ns"}]}.
    #[arg(long)]
    pub json: bool,
    /// Also show the breakdown of this many slowest requests (table only; JSON has all).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub slowest: usize,
    #[command(flatten)]
    pub input: TraceInputs,
}

/// Runs `ringtrace breakdown`.
pub fn run(args: BreakdownArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let result = match crate::input::store_input(&args.input.inputs)? {
        #[cfg(feature = "store")]
        Some(store) => crate::input::on_store(&store, |s| s.breakdown(&args.input.causality_options()))?,
        #[cfg(not(feature = "store"))]
        Some(never) => match never {},
        None => {
            let Loaded { data, causality } = args.input.load()?;
            breakdown(&data, &causality)
        }
    };
    if args.json {
        breakdown_output::write_json(&result, out)?;
    } else {
        breakdown_output::write_table(&result, args.slowest, out)?;
    }
    Ok(())
}
