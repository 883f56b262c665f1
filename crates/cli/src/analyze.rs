//! The request-causality subcommands: `requests`, `critical-path`, `stats`, `deps`, `breakdown`,
//! `bottlenecks` and `diff`. Each reads its inputs into a dataset, builds the request trees and
//! hands them to one analysis; warnings about the data go to stderr, so `--json` output on stdout
//! stays exactly its documented shape.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use crate::duration;
use ringtrace_analysis::deps_output::{self, DotLevel};
use ringtrace_analysis::{
    bottlenecks as rank_bottlenecks, bottlenecks_output, breakdown as charge_breakdown, breakdown_output,
    build_causality, causality_output, dependency_graph, diff as compare, diff_output, fetch_jaeger,
    stats_output, trace_statistics, Causality, CausalityOptions, Dataset, DiffSide, JaegerQuery, Span,
    StatsGroupBy, TraceId,
};
use ringtrace_analysis::{critical_path_output, critical_paths};

/// Where the traces come from, and how their times are treated.
#[derive(Args, Debug, Default)]
pub struct InputArgs {
    /// Recording files or directories, OTLP/JSON lines, or Jaeger JSON.
    #[arg(required_unless_present = "jaeger", conflicts_with = "jaeger", value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Fetch traces from this Jaeger query service instead (e.g. http://localhost:16686).
    #[arg(long, value_name = "URL", requires = "service")]
    pub jaeger: Option<String>,
    /// With --jaeger: the service whose traces to fetch.
    #[arg(long, value_name = "S", requires = "jaeger")]
    pub service: Option<String>,
    /// With --jaeger: how far back to search, e.g. 1h, 30m.
    #[arg(long, default_value = "1h", value_parser = duration::parse_nanos, requires = "jaeger")]
    pub lookback: u64,
    /// With --jaeger: the most traces to fetch.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..), requires = "jaeger")]
    pub limit: u64,
    /// Correct clock skew between nodes before analysing, as Jaeger's adjuster does.
    #[arg(long)]
    pub adjust_skew: bool,
    /// Refuse an input file cut short (as by a crash mid-write) instead of reading its intact
    /// part with a warning.
    #[arg(long, conflicts_with = "jaeger")]
    pub strict: bool,
}

impl InputArgs {
    /// The spans: read from the inputs, or fetched from Jaeger.
    fn dataset(&self) -> anyhow::Result<Dataset> {
        match (&self.jaeger, &self.service) {
            (Some(endpoint), Some(service)) => {
                let mut query = JaegerQuery::new(endpoint.as_str(), service.as_str());
                query.lookback_ns = self.lookback;
                query.limit = usize::try_from(self.limit).unwrap_or(usize::MAX);
                Ok(fetch_jaeger(&query)?)
            }
            _ => {
                use ringtrace_analysis::read::Truncation;
                let truncation = if self.strict { Truncation::Error } else { Truncation::Warn };
                let outcome = crate::load::read_compact_with(&self.inputs, truncation, &mut |_, _| {})?;
                crate::load::print_warnings(&outcome.warnings, &mut std::io::stderr().lock(), true);
                Ok(outcome.data)
            }
        }
        .map(|mut data: Dataset| {
            data.spans.iter_mut().for_each(compact);
            data
        })
    }
}

/// Drops what no causality view reads — attributes (their useful parts are already surfaced as
/// fields: target, request id, location), events and links — so a large input takes a fraction
/// of the memory.
fn compact(span: &mut Span) {
    span.attributes = Vec::new();
    span.events = Vec::new();
    span.links = Vec::new();
}

/// Traces read and arranged as trees.
pub struct Loaded {
    /// The spans.
    pub data: Dataset,
    /// One tree per trace.
    pub causality: Causality,
}

/// Reads the inputs and builds every request's tree; prints what was repaired to stderr.
pub fn load(args: &InputArgs) -> anyhow::Result<Loaded> {
    let data = args.dataset()?;
    let causality = build_causality(&data, &CausalityOptions { adjust_skew: args.adjust_skew });
    report_warnings(&causality);
    Ok(Loaded { data, causality })
}

fn report_warnings(causality: &Causality) {
    let w = &causality.warnings;
    if !w.is_empty() {
        let counts: Vec<String> = w
            .counters()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| format!("{} {n}", name.replace('_', " ")))
            .collect();
        eprintln!("ringtrace: note: repaired or unusual spans: {}", counts.join(", "));
    }
    for skew in causality.clock_skew.iter().filter(|s| s.detected()) {
        eprintln!(
            "ringtrace: note: clock of {} appears {} ns {} {} ({} client/server pairs){}",
            skew.server_node,
            skew.offset_ns.unsigned_abs(),
            if skew.offset_ns >= 0 { "ahead of" } else { "behind" },
            skew.client_node,
            skew.pairs,
            if causality.warnings.skew_adjusted_spans > 0 { "" } else { "; --adjust-skew corrects it" }
        );
    }
}

/// Treats a closed stdout (`ringtrace … | head`) as success.
pub fn quiet_pipe(result: anyhow::Result<()>) -> anyhow::Result<()> {
    match result {
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Parses a trace id given on the command line; the error names the value.
fn parse_trace_id(s: &str) -> Result<TraceId, String> {
    let hex = s.trim().to_ascii_lowercase();
    let padded = if hex.len() < 32 { format!("{hex:0>32}") } else { hex };
    TraceId::from_hex(&padded).map_err(|e| format!("{s:?} is not a trace id: {e}"))
}

/// `ringtrace requests`.
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
    pub input: InputArgs,
}

/// Runs `ringtrace requests`.
pub fn requests(args: RequestsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let Loaded { data, causality } = load(&args.input)?;
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

/// `ringtrace critical-path`.
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
    pub input: InputArgs,
}

/// Runs `ringtrace critical-path`.
pub fn critical_path(args: CriticalPathArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let Loaded { data, causality } = load(&args.input)?;
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

/// `ringtrace stats`.
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
    pub input: InputArgs,
}

/// Runs `ringtrace stats`.
pub fn stats(args: StatsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let Loaded { data, causality } = load(&args.input)?;
    let stats = trace_statistics(&data, &causality, args.by);
    if args.json {
        stats_output::write_json(&stats, out)?;
    } else {
        stats_output::write_table(&stats, out)?;
    }
    Ok(())
}

/// Which graph `deps --dot` draws.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum GraphLevel {
    /// Daemon → daemon.
    Daemon,
    /// Node → node.
    Node,
}

/// `ringtrace deps`.
#[derive(Args, Debug)]
pub struct DepsArgs {
    /// Print JSON: {"services":[{"parent","child","call_count","error_count"}],"nodes":[...]}.
    #[arg(long, conflicts_with = "dot")]
    pub json: bool,
    /// Print a Graphviz digraph of the daemon graph (or the node graph with --level node).
    #[arg(long)]
    pub dot: bool,
    /// The graph --dot draws.
    #[arg(long, value_enum, default_value = "daemon", requires = "dot")]
    pub level: GraphLevel,
    #[command(flatten)]
    pub input: InputArgs,
}

/// Runs `ringtrace deps`.
pub fn deps(args: DepsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let Loaded { data, causality } = load(&args.input)?;
    let graph = dependency_graph(&data, &causality);
    if args.json {
        deps_output::write_json(&graph, out)?;
    } else if args.dot {
        let level = match args.level {
            GraphLevel::Daemon => DotLevel::Daemon,
            GraphLevel::Node => DotLevel::Node,
        };
        deps_output::write_dot(&graph, level, out)?;
    } else {
        deps_output::write_table(&graph, out)?;
    }
    Ok(())
}

/// Parses a share of requests: `10%`, `10` or `2.5%`, more than 0 and at most 100.
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let number = t.strip_suffix('%').unwrap_or(t).trim();
    match number.parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 100.0 => Ok(p),
        Ok(_) => Err(format!("{s:?} must be more than 0% and at most 100%")),
        Err(_) => Err(format!("{s:?} is not a percentage such as 10%")),
    }
}

/// `ringtrace bottlenecks`.
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
    pub input: InputArgs,
}

/// Runs `ringtrace bottlenecks`.
pub fn bottlenecks(args: BottlenecksArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let Loaded { data, causality } = load(&args.input)?;
    let result = rank_bottlenecks(&data, &causality, args.slowest);
    if args.json {
        bottlenecks_output::write_json(&result, out)?;
    } else {
        bottlenecks_output::write_table(&result, Some(args.top), out)?;
    }
    Ok(())
}

/// `ringtrace breakdown`.
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
    pub input: InputArgs,
}

/// Runs `ringtrace breakdown`.
pub fn breakdown(args: BreakdownArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let Loaded { data, causality } = load(&args.input)?;
    let result = charge_breakdown(&data, &causality);
    if args.json {
        breakdown_output::write_json(&data, &causality, &result, out)?;
    } else {
        breakdown_output::write_table(&data, &causality, &result, args.slowest, out)?;
    }
    Ok(())
}

/// `ringtrace diff`.
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
    pub input: InputArgs,
}

/// Runs `ringtrace diff`.
pub fn diff(args: DiffArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if !args.traces.is_empty() && args.traces.len() != 2 {
        bail!("--trace takes exactly two traces, A and B; {} given", args.traces.len());
    }
    let options = CausalityOptions { adjust_skew: args.input.adjust_skew };
    let result;
    let labels: (String, String);
    if let Some(percent) = args.slowest {
        let Loaded { data, causality } = load(&args.input)?;
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
        result = compare(&a, &b);
        labels = ("the other requests".into(), format!("the slowest {percent}%"));
    } else if let [ta, tb] = args.traces[..] {
        let Loaded { data, causality } = load(&args.input)?;
        let side = |id: TraceId| -> anyhow::Result<DiffSide<'_>> {
            let tree = causality.tree(id).with_context(|| format!("trace {id} is not in the inputs"))?;
            Ok(DiffSide { data: &data, trees: vec![tree] })
        };
        result = compare(&side(ta)?, &side(tb)?);
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
            load(&InputArgs {
                inputs: vec![path.clone()],
                adjust_skew: options.adjust_skew,
                ..Default::default()
            })
        };
        let (la, lb) = (one(a)?, one(b)?);
        fn side(l: &Loaded) -> DiffSide<'_> {
            DiffSide { data: &l.data, trees: l.causality.traces.iter().collect() }
        }
        result = compare(&side(&la), &side(&lb));
        labels = (a.display().to_string(), b.display().to_string());
    }
    if args.json {
        diff_output::write_json(&result, out)?;
    } else {
        diff_output::write_table(&result, (&labels.0, &labels.1), Some(args.top), out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{parse_percent, parse_trace_id};

    #[test]
    fn percentages_and_errors_name_the_value() {
        assert_eq!(parse_percent("10%"), Ok(10.0));
        assert_eq!(parse_percent("2.5"), Ok(2.5));
        assert_eq!(parse_percent("100 %"), Ok(100.0));
        for bad in ["0%", "101", "ten", "-5%", "NaN"] {
            let e = parse_percent(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn trace_ids_are_padded_and_errors_name_the_value() {
        assert_eq!(parse_trace_id("ff").unwrap().get(), 0xff);
        for bad in ["xyz", "0", &"f".repeat(33)] {
            let e = parse_trace_id(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }
}
