//! `ringtrace requests`: each request as a tree of spans across processes.

use std::io::Write;

use anyhow::bail;
use clap::Args;
use ringtrace_analysis::causality_output::{self, Requests};
use ringtrace_analysis::TraceId;

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
    match crate::input::store_input(&args.input.inputs)? {
        #[cfg(feature = "store")]
        Some(store) => return on_store(&args, &store, out),
        #[cfg(not(feature = "store"))]
        Some(never) => match never {},
        None => {}
    }
    let Loaded { data, causality } = args.input.load()?;
    if args.trees.is_empty() {
        return write_requests(&args, &Requests::of(&data, &causality), out);
    }
    for (n, id) in args.trees.iter().enumerate() {
        let Some(tree) = causality.tree(*id) else { bail!("trace {id} is not in the inputs") };
        if n > 0 {
            writeln!(out)?;
        }
        causality_output::write_tree(&data, tree, out)?;
    }
    Ok(())
}

fn write_requests(args: &RequestsArgs, requests: &Requests, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.json {
        causality_output::write_json(requests, out)?;
    } else {
        causality_output::write_table(requests, out)?;
    }
    Ok(())
}

/// `ringtrace requests` over a Parquet store: the lines as the traces stream; `--tree` reads
/// only the traces it names.
#[cfg(feature = "store")]
fn on_store(
    args: &RequestsArgs,
    store: &ringtrace_analysis::engine::Store,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let options = args.input.causality_options();
    if args.json {
        // Streamed: the requests of a large store are not held.
        let mut json = causality_output::JsonRequests::begin(out)?;
        let mut output = crate::input::OutputError::default();
        let streamed = crate::input::on_store(store, |s| {
            s.for_each_request(&options, &mut |data, tree| {
                output.keep(json.line(&causality_output::RequestLine::of(data, tree)))
            })
        });
        output.check(streamed)?;
        json.end(&store.repairs(), &store.clock_skew())?;
        return Ok(());
    }
    if args.trees.is_empty() {
        // The table's header counts the requests: its rows wait in a temporary file, not in
        // memory, until every request is read.
        let mut rows = std::io::BufWriter::new(tempfile::tempfile()?);
        let mut totals = causality_output::TableTotals::default();
        let mut output = crate::input::OutputError::default();
        let streamed = crate::input::on_store(store, |s| {
            s.for_each_request(&options, &mut |data, tree| {
                let line = causality_output::RequestLine::of(data, tree);
                totals.add(&line);
                output.keep(causality_output::write_table_row(&line, &mut rows))
            })
        });
        output.check(streamed)?;
        let mut rows = rows.into_inner().map_err(std::io::IntoInnerError::into_error)?;
        std::io::Seek::rewind(&mut rows)?;
        causality_output::write_table_header(&totals, out)?;
        std::io::copy(&mut rows, out)?;
        causality_output::write_warnings(&store.repairs(), &store.clock_skew(), out)?;
        return Ok(());
    }
    let mut drawn = std::collections::HashMap::new();
    crate::input::on_store(store, |s| {
        s.for_each_request_of(Some(&args.trees), &options, &mut |data, tree| {
            let mut text = Vec::new();
            causality_output::write_tree(data, tree, &mut text).map_err(|e| {
                ringtrace_analysis::store::StoreError::Format(format!("drawing trace {}: {e}", tree.trace_id))
            })?;
            drawn.insert(tree.trace_id, text);
            Ok(())
        })
    })?;
    for (n, id) in args.trees.iter().enumerate() {
        let Some(text) = drawn.get(id) else { bail!("trace {id} is not in the inputs") };
        if n > 0 {
            writeln!(out)?;
        }
        out.write_all(text)?;
    }
    Ok(())
}
