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
        Some(store) => return from_store(&args, &store, out),
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

/// `ringtrace breakdown` over a Parquet store, without holding every request's rows: the JSON
/// written as the traces stream by, the table keeping the slowest requests only.
#[cfg(feature = "store")]
fn from_store(
    args: &BreakdownArgs,
    store: &ringtrace_analysis::engine::Store,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let options = args.input.causality_options();
    if args.json {
        let mut json = breakdown_output::JsonOut::new(std::io::BufWriter::new(out));
        let mut output = crate::input::OutputError::default();
        let totals = crate::input::on_store(store, |s| {
            s.breakdown_each(&options, &mut |request| output.keep(json.add(&request)))
        });
        json.finish(&output.check(totals)?)?;
        return Ok(());
    }
    // The slowest requests, slowest first, ties in trace order: as the table orders them all.
    let (mut slowest, mut requests) = (ringtrace_analysis::Slowest::new(args.slowest), 0);
    let mut totals = crate::input::on_store(store, |s| {
        s.breakdown_each(&options, &mut |request| {
            requests += 1;
            slowest.offer(request.latency_ns, request.tree, || request);
            Ok(())
        })
    })?;
    totals.requests = slowest.into_sorted();
    breakdown_output::write_table_of(&totals, requests, args.slowest, out)?;
    Ok(())
}
