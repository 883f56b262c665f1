//! `ringtrace critical-path`: what each request waited on, by Jaeger UI's algorithm.

use std::io::Write;

use anyhow::bail;
use clap::Args;
use ringtrace_analysis::TraceId;
use ringtrace_analysis::{critical_path_output, critical_paths};

use crate::input::{Loaded, TraceInputs};
use crate::parse::parse_trace_id;

/// Arguments of `ringtrace critical-path`.
#[derive(Args, Debug)]
pub struct CriticalPathArgs {
    /// Print JSON: {"traces":[{"trace_id","critical_path":[{"span_id","start_unix_ns","end_unix_ns"}]}]},
    /// sections latest first as Jaeger finds them.
    #[arg(long)]
    pub json: bool,
    /// Only this trace (hex id; repeatable).
    #[arg(long = "trace", value_name = "TRACE_ID", value_parser = parse_trace_id)]
    pub traces: Vec<TraceId>,
    #[command(flatten)]
    pub input: TraceInputs,
}

/// Runs `ringtrace critical-path`.
pub fn run(args: CriticalPathArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    #[cfg(feature = "store")]
    if let Some(store) = crate::input::store_input(&args.input.inputs)? {
        return from_store(&args, &store, out);
    }
    let Loaded { data, causality } = args.input.load()?;
    let mut paths = critical_paths(&data, &causality);
    if !args.traces.is_empty() {
        for id in &args.traces {
            if causality.tree(*id).is_none() {
                bail!("trace {id} is not in the inputs");
            }
        }
        paths.retain(|p| args.traces.contains(&causality.traces[p.tree].trace_id));
    }
    if args.json {
        critical_path_output::write_json(&data, &causality, &paths, out)?;
    } else {
        critical_path_output::write_table(&data, &causality, &paths, out)?;
    }
    Ok(())
}

/// The critical paths of the requests of a Parquet store, written as each trace streams by:
/// straight out, or with `--trace` into a buffer (a trace asked for and missing is an error,
/// never a document cut short).
#[cfg(feature = "store")]
fn from_store(
    args: &CriticalPathArgs,
    store: &ringtrace_analysis::engine::Store,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut found = std::collections::HashSet::new();
    if args.traces.is_empty() {
        let written = critical_path_output::PathsOut::new(args.json, std::io::BufWriter::new(out));
        paths_from_store_found(args, store, written, &mut found)?.finish()?.flush()?;
        return Ok(());
    }
    let written = critical_path_output::PathsOut::new(args.json, Vec::new());
    let written = paths_from_store_found(args, store, written, &mut found)?;
    if let Some(id) = args.traces.iter().find(|id| !found.contains(id)) {
        bail!("trace {id} is not in the inputs");
    }
    out.write_all(&written.finish()?)?;
    Ok(())
}

/// Adds the critical path of each request of `store` (of `--trace`'s, when given) to `written`,
/// noting in `found` the traces met when `--trace` names some.
#[cfg(feature = "store")]
fn paths_from_store_found<W: Write>(
    args: &CriticalPathArgs,
    store: &ringtrace_analysis::engine::Store,
    mut written: critical_path_output::PathsOut<W>,
    found: &mut std::collections::HashSet<TraceId>,
) -> anyhow::Result<critical_path_output::PathsOut<W>> {
    use ringtrace_analysis::critical_path;
    let options = args.input.causality_options();
    let traces = (!args.traces.is_empty()).then_some(&args.traces[..]);
    let mut output = crate::input::OutputError::default();
    let streamed = crate::input::on_store(store, |s| {
        s.for_each_request_of(traces, &options, &mut |data, tree| {
            if traces.is_some() {
                found.insert(tree.trace_id);
            }
            output.keep(written.add(data, tree, &critical_path(data, tree)))
        })
    });
    output.check(streamed)?;
    Ok(written)
}
