//! `ringtrace flame`: flame graphs of span time, with self time, scoped and pruned.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use ringtrace_analysis::flame::DEFAULT_MIN_PERCENT;
use ringtrace_analysis::{
    build_causality, flame_graph, flame_output, CausalityOptions, FlameScope, FrameLabel, RequestSelection,
    StackMode,
};

use crate::input::FileInputs;
use crate::zoom::ZoomArgs;

/// Output formats of `ringtrace flame`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FlameFormat {
    /// `frame;frame;frame self_ns` lines, as flamegraph.pl and inferno read them.
    Folded,
    /// An interactive SVG flame graph.
    Svg,
    /// d3-flame-graph JSON: nested {"name","value","children"}, value = total ns.
    Json,
}

/// Arguments of `ringtrace flame`.
#[derive(Args, Debug)]
pub struct FlameArgs {
    /// Output format.
    #[arg(long, value_enum, default_value = "folded")]
    pub format: FlameFormat,
    /// Fold frames under this percentage of the total into their parent (0 keeps all).
    #[arg(long, default_value_t = DEFAULT_MIN_PERCENT)]
    pub min_percent: f64,
    /// Where stacks begin: request (from the request's root, across processes) or process
    /// (within each span's own process).
    #[arg(long, default_value = "request")]
    pub stacks: StackMode,
    /// Frame names: method (target::name), daemon (daemon/method) or node (node/daemon/method).
    #[arg(long, default_value = "daemon")]
    pub frame: FrameLabel,
    /// Only the slowest PERCENT % of requests.
    #[arg(long, value_name = "PERCENT", conflicts_with = "except_slowest")]
    pub slowest: Option<f64>,
    /// Every request except the slowest PERCENT %.
    #[arg(long, value_name = "PERCENT")]
    pub except_slowest: Option<f64>,
    /// Correct clock skew between nodes first, as Jaeger's adjuster does.
    #[arg(long)]
    pub adjust_skew: bool,
    #[command(flatten)]
    pub zoom: ZoomArgs,
    /// Write here instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub input: FileInputs,
}

/// Runs `ringtrace flame`, writing to `out` unless `--output` is given.
pub fn run(args: FlameArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    for p in [args.slowest, args.except_slowest].into_iter().flatten() {
        if !(p > 0.0 && p <= 100.0) {
            bail!("a percentage of requests must be in (0, 100], got {p}");
        }
    }
    if !(args.min_percent >= 0.0 && args.min_percent <= 100.0) {
        bail!("--min-percent must be between 0 and 100, got {}", args.min_percent);
    }
    let options = CausalityOptions { adjust_skew: args.adjust_skew };
    let requests = match (args.slowest, args.except_slowest) {
        (Some(p), _) => RequestSelection::Slowest(p),
        (_, Some(p)) => RequestSelection::AllButSlowest(p),
        _ => RequestSelection::All,
    };
    let graph = match crate::input::store_input(&args.input.inputs)? {
        #[cfg(feature = "store")]
        Some(store) => {
            if args.zoom.is_set() {
                bail!("--from, --to, --node, --daemon, --request and --operation do not read a Parquet store yet: draw its recordings' graph, or leave them out");
            }
            let scope = FlameScope { stacks: args.stacks, label: args.frame, requests, ..FlameScope::default() };
            crate::input::on_store(&store, |s| s.flame_graph(&scope, &options))?
        }
        #[cfg(not(feature = "store"))]
        Some(never) => match never {},
        None => {
            let data = args.input.read_compact_showing_progress()?;
            let causality = build_causality(&data, &options);
            let scope =
                FlameScope { stacks: args.stacks, label: args.frame, requests, filter: args.zoom.filter(&data) };
            flame_graph(&data, &causality, &scope)
        }
    }
    .prune(args.min_percent);

    let mut file;
    let out: &mut dyn Write = match &args.output {
        Some(path) => {
            file = std::io::BufWriter::new(
                std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
            );
            &mut file
        }
        None => out,
    };
    match args.format {
        FlameFormat::Folded => flame_output::write_folded(&graph, out)?,
        FlameFormat::Json => flame_output::write_d3_json(&graph, out)?,
        FlameFormat::Svg => flame_output::write_svg(&graph, "ringtrace: span time by stack", out)?,
    }
    out.flush()?;
    Ok(())
}
