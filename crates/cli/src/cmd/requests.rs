//! `ringtrace requests`: each request as a tree of spans across processes.

use std::io::Write;

use anyhow::bail;
use clap::Args;
use ringtrace_analysis::{causality_output, TraceId};

use crate::input::{Loaded, TraceInputs};
use crate::parse::parse_trace_id;

/// Arguments of `ringtrace requests`.
#[derive(Args, Debug)]
pub struct RequestsArgs {
    /// Print JSON: {"requests":[{"trace_id","request_id","start_unix_ns","latency_ns","spans",
    /// "processes","roots","cross_process_edges","root":{"node","daemon","operation"}}],
    /// "warnings":{...},"clock_skew":[{"client_node","server_node","pairs","offset_ns",
    /// "lower_bound_ns","upper_bound_ns","detected"}]}.
    #[arg(long, conflicts_with = "trees")]
    pub json: bool,
    /// Print this request's span tree instead (hex trace id; repeatable).
    #[arg(long = "tree", value_name = "TRACE_ID", value_parser = parse_trace_id)]
    pub trees: Vec<TraceId>,
    #[command(flatten)]
    pub input: TraceInputs,
}

/// Runs `ringtrace requests`.
pub fn run(args: RequestsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let Loaded { data, causality } = args.input.load()?;
    if args.json {
        causality_output::write_json(&data, &causality, out)?;
    } else if args.trees.is_empty() {
        causality_output::write_table(&data, &causality, out)?;
    } else {
        for (n, id) in args.trees.iter().enumerate() {
            let Some(tree) = causality.tree(*id) else { bail!("trace {id} is not in the inputs") };
            if n > 0 {
                writeln!(out)?;
            }
            causality_output::write_tree(&data, tree, out)?;
        }
    }
    Ok(())
}
