//! `ringtrace diff`: two traces or groups of traces compared per (daemon, operation).

use std::collections::HashSet;
use std::io::Write;

use anyhow::{bail, Context};
use clap::Args;
use ringtrace_analysis::{diff_output, slowest_of, DiffBuilder, RequestTree, TraceDiff, TraceId};

use crate::input::{Loaded, TraceInputs};
use crate::parse::{parse_percent, parse_trace_id};

/// Arguments of `ringtrace diff`.
#[derive(Args, Debug)]
#[command(after_help = "Groups: `diff A B` compares the traces of input A with those of input B \
(each a file or directory); `diff --slowest 10% INPUT...` the slowest requests with the rest; \
`diff --trace ID_A --trace ID_B INPUT...` two traces.")]
pub struct DiffArgs {
    /// Print JSON: {"a":{"traces","spans","mean_latency_ns"},"b":{...},"rows":[{"daemon",
    /// "operation","count_a","count_b","count_delta","self_ns_a","self_ns_b","self_ns_delta"}]},
    /// values per request, deltas B minus A.
    #[arg(long)]
    pub json: bool,
    /// Compare the slowest share of the inputs' requests (B) against the rest (A), e.g. 10%.
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent, conflicts_with = "traces")]
    pub slowest: Option<f64>,
    /// Compare two traces of the inputs: give --trace A --trace B.
    #[arg(long = "trace", value_name = "TRACE_ID", value_parser = parse_trace_id)]
    pub traces: Vec<TraceId>,
    /// Rows in the table (JSON has every row).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    #[command(flatten)]
    pub input: TraceInputs,
}

/// Runs `ringtrace diff`.
pub fn run(args: DiffArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if !args.traces.is_empty() && args.traces.len() != 2 {
        bail!("--trace takes exactly two traces, A and B; {} given", args.traces.len());
    }
    let result;
    let labels: (String, String);
    if let Some(percent) = args.slowest {
        result = within(&args.input, &mut |add| add_slowest(add, percent))?;
        if result.a.traces == 0 {
            bail!(
                "--slowest {percent}% takes all {} requests: nothing left to compare with",
                result.b.traces
            );
        }
        labels = ("the other requests".into(), format!("the slowest {percent}%"));
    } else if let [ta, tb] = args.traces[..] {
        result = within(&args.input, &mut |add| add_traces(add, ta, tb))?;
        labels = (format!("trace {ta}"), format!("trace {tb}"));
    } else {
        if args.input.jaeger.is_some() {
            bail!("with --jaeger, diff compares --slowest PERCENT against the rest, or --trace A --trace B");
        }
        let [a, b] = &args.input.inputs[..] else {
            bail!(
                "diff compares two inputs A B ({} given), or --slowest PERCENT / --trace A --trace B \
                 within the inputs",
                args.input.inputs.len()
            );
        };
        let mut builder = DiffBuilder::default();
        for (path, to_b) in [(a, false), (b, true)] {
            let one = TraceInputs {
                inputs: vec![path.clone()],
                adjust_skew: args.input.adjust_skew,
                strict: args.input.strict,
                ..Default::default()
            };
            let mut add = |requests: &mut dyn Requests| -> anyhow::Result<()> {
                requests.each(None, &mut |data, tree| {
                    if to_b {
                        builder.add_b(data, tree);
                    } else {
                        builder.add_a(data, tree);
                    }
                })
            };
            on_requests(&one, &mut add)?;
        }
        result = builder.finish();
        labels = (a.display().to_string(), b.display().to_string());
    }
    if args.json {
        diff_output::write_json(&result, out)?;
    } else {
        diff_output::write_table(&result, (&labels.0, &labels.1), Some(args.top), out)?;
    }
    Ok(())
}

/// The requests of one input — loaded in memory, or streamed from a store — handed to a
/// visitor: every one, or those of the traces given.
trait Requests {
    fn each(
        &mut self,
        traces: Option<&[TraceId]>,
        f: &mut dyn FnMut(&ringtrace_analysis::Dataset, &RequestTree),
    ) -> anyhow::Result<()>;
}

impl Requests for Loaded {
    fn each(
        &mut self,
        traces: Option<&[TraceId]>,
        f: &mut dyn FnMut(&ringtrace_analysis::Dataset, &RequestTree),
    ) -> anyhow::Result<()> {
        for tree in &self.causality.traces {
            if traces.is_none_or(|t| t.contains(&tree.trace_id)) {
                f(&self.data, tree);
            }
        }
        Ok(())
    }
}

#[cfg(feature = "store")]
impl Requests for (&ringtrace_analysis::engine::Store, ringtrace_analysis::CausalityOptions) {
    fn each(
        &mut self,
        traces: Option<&[TraceId]>,
        f: &mut dyn FnMut(&ringtrace_analysis::Dataset, &RequestTree),
    ) -> anyhow::Result<()> {
        let (store, options) = self;
        store.for_each_request_of(traces, options, &mut |data, tree| {
            f(data, tree);
            Ok(())
        })?;
        Ok(())
    }
}

/// Runs `view` over the requests of `input`: a store's as they stream, or the inputs' loaded.
fn on_requests(
    input: &TraceInputs,
    view: &mut dyn FnMut(&mut dyn Requests) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    match crate::input::store_input(&input.inputs)? {
        #[cfg(feature = "store")]
        Some(store) => crate::input::on_store(&store, |s| view(&mut (s, input.causality_options()))),
        #[cfg(not(feature = "store"))]
        Some(never) => match never {},
        None => view(&mut input.load()?),
    }
}

/// The comparison `add` makes of the requests of `input`.
fn within(
    input: &TraceInputs,
    add: &mut dyn FnMut(&mut dyn Requests) -> anyhow::Result<TraceDiff>,
) -> anyhow::Result<TraceDiff> {
    let mut result = None;
    on_requests(input, &mut |requests| {
        result = Some(add(requests)?);
        Ok(())
    })?;
    result.context("no comparison was made")
}

/// The slowest `percent` % of the requests (B) against the rest (A): a first pass for the
/// latencies, a second for the figures.
fn add_slowest(requests: &mut dyn Requests, percent: f64) -> anyhow::Result<TraceDiff> {
    let mut latencies = Vec::new();
    requests.each(None, &mut |_, tree| latencies.push((tree.trace_id, tree.duration_ns())))?;
    let slow: HashSet<TraceId> =
        slowest_of(&latencies, percent).into_iter().map(|i| latencies[i].0).collect();
    let mut builder = DiffBuilder::default();
    requests.each(None, &mut |data, tree| {
        if slow.contains(&tree.trace_id) {
            builder.add_b(data, tree);
        } else {
            builder.add_a(data, tree);
        }
    })?;
    Ok(builder.finish())
}

/// Trace `ta` (A) against trace `tb` (B).
fn add_traces(requests: &mut dyn Requests, ta: TraceId, tb: TraceId) -> anyhow::Result<TraceDiff> {
    let mut builder = DiffBuilder::default();
    let mut found = (false, false);
    requests.each(Some(&[ta, tb]), &mut |data, tree| {
        if tree.trace_id == ta {
            builder.add_a(data, tree);
            found.0 = true;
        }
        if tree.trace_id == tb {
            builder.add_b(data, tree);
            found.1 = true;
        }
    })?;
    for (id, found) in [(ta, found.0), (tb, found.1)] {
        if !found {
            bail!("trace {id} is not in the inputs");
        }
    }
    Ok(builder.finish())
}
