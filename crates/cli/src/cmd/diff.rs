//! `ringtrace diff`: two traces or groups of traces compared per (daemon, operation).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use ringtrace_analysis::{diff, diff_output, DiffSide, TraceId};

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
        let Loaded { data, causality } = args.input.load()?;
        let slow = causality.slowest(percent);
        let mut is_slow = vec![false; causality.traces.len()];
        slow.iter().for_each(|&i| is_slow[i] = true);
        let rest: Vec<_> =
            causality.traces.iter().zip(&is_slow).filter(|(_, s)| !**s).map(|(t, _)| t).collect();
        if rest.is_empty() {
            bail!("--slowest {percent}% takes all {} requests: nothing left to compare with", slow.len());
        }
        let a = DiffSide { data: &data, trees: rest };
        let b = DiffSide { data: &data, trees: slow.iter().map(|&i| &causality.traces[i]).collect() };
        result = diff(&a, &b);
        labels = ("the other requests".into(), format!("the slowest {percent}%"));
    } else if let [ta, tb] = args.traces[..] {
        let Loaded { data, causality } = args.input.load()?;
        let side = |id: TraceId| -> anyhow::Result<DiffSide<'_>> {
            let tree = causality.tree(id).with_context(|| format!("trace {id} is not in the inputs"))?;
            Ok(DiffSide { data: &data, trees: vec![tree] })
        };
        result = diff(&side(ta)?, &side(tb)?);
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
        let one = |path: &PathBuf| -> anyhow::Result<Loaded> {
            TraceInputs {
                inputs: vec![path.clone()],
                adjust_skew: args.input.adjust_skew,
                strict: args.input.strict,
                ..Default::default()
            }
            .load()
        };
        let (la, lb) = (one(a)?, one(b)?);
        fn side(l: &Loaded) -> DiffSide<'_> {
            DiffSide { data: &l.data, trees: l.causality.traces.iter().collect() }
        }
        result = diff(&side(&la), &side(&lb));
        labels = (a.display().to_string(), b.display().to_string());
    }
    if args.json {
        diff_output::write_json(&result, out)?;
    } else {
        diff_output::write_table(&result, (&labels.0, &labels.1), Some(args.top), out)?;
    }
    Ok(())
}
