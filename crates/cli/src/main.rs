//! `ringtrace`: analyses of trace recordings, and the demo cluster.
//!
//! A thin command line over `ringtrace-analysis` (and, for `demo`, over the library itself).
//! Subcommand names, flags and `--json` shapes are a contract other tools script against.

mod analyze;
mod anomalies_cmd;
mod demo;
mod demo_report;
mod duration;
mod flame_cmd;
mod load;
mod profile_cmd;
mod report_cmd;
mod zoom;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ringtrace_analysis::{
    for_each_batch, list_inputs, profile_output, read_inputs, FrequencyCounter, GroupBy,
};

#[derive(Parser)]
#[command(
    name = "ringtrace",
    version,
    about = "Analyse ringtrace recordings, OTLP/JSON and Jaeger JSON; run the demo cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Span counts per time bucket, grouped by node, daemon or method (`target::name`).
    Profile {
        /// What to group spans by: node, daemon or method.
        #[arg(long, default_value = "node")]
        by: GroupBy,
        /// Bucket width, e.g. 1s, 500ms, 2m.
        #[arg(long, default_value = "1s", value_parser = duration::parse_nanos)]
        bucket: u64,
        /// Print JSON: {"group_by","bucket_ns","start_unix_ns","groups":[{"key","total","counts"}]}.
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Print CSV: group,bucket_start_unix_ns,count.
        #[arg(long)]
        csv: bool,
        /// Recording files or directories, OTLP/JSON lines, or Jaeger JSON.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[command(flatten)]
        more: profile_cmd::ProfileMore,
    },
    /// Run the demo cluster (master, workers and a client as separate processes on 127.0.0.1)
    /// with ringtrace in every process, then print an analysis of its recordings.
    Demo {
        /// Worker daemons, on nodes node-1 … node-N.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=64))]
        workers: u64,
        /// Client requests.
        #[arg(long, default_value_t = 40)]
        requests: usize,
        /// Make this worker's disk I/O slower (e.g. node-2).
        #[arg(long, value_name = "NODE")]
        slow_node: Option<String>,
        /// Output directory: recordings, logs and the workers' data.
        #[arg(long, default_value = "ringtrace-demo")]
        out: PathBuf,
        /// Also export every process's spans to this OTLP endpoint.
        #[arg(long, value_name = "ENDPOINT")]
        otlp: Option<String>,
        /// Run the same cluster without ringtrace (no recording, no report): the baseline for
        /// measuring what recording costs. `RINGTRACE_DEMO_TRACING` picks it: `off` (the
        /// default) runs no subscriber at all; `floor` runs in every process the least any
        /// recorder does (registry, level filter, and a layer that timestamps spans and events
        /// into a per-thread buffer and exports nothing).
        #[arg(long, conflicts_with = "otlp")]
        no_tracing: bool,
    },
    /// Each request as a tree of spans across processes: crossings, orphans, repairs, clock skew.
    Requests(analyze::RequestsArgs),
    /// The critical path of each request, by Jaeger UI's algorithm: what the request waited on.
    CriticalPath(analyze::CriticalPathArgs),
    /// Jaeger UI's trace statistics per service and operation: count, total, self time, percentiles.
    Stats(analyze::StatsArgs),
    /// Service dependency graph (caller daemon → callee daemon, calls and errors) and node graph.
    Deps(analyze::DepsArgs),
    /// Which (node, daemon, operation) hold the most critical-path time across requests.
    Bottlenecks(analyze::BottlenecksArgs),
    /// Time per (client node, serving node, daemon, operation), per request and in total.
    Breakdown(analyze::BreakdownArgs),
    /// Compare two traces or groups of traces per (daemon, operation): span counts and self time.
    Diff(analyze::DiffArgs),
    /// Rank (node, daemon) pairs by how unlike their peers they behave: method mix and latency.
    Anomalies(anomalies_cmd::AnomaliesArgs),
    /// Flame graph of span time by stack (total and self time): folded stacks, SVG or d3 JSON.
    Flame(flame_cmd::FlameArgs),
    /// One self-contained HTML report: frequency over time, top methods, anomalies, critical
    /// paths, dependencies, flame graph, trace volume and losses.
    Report(report_cmd::ReportArgs),
    /// One process of the demo cluster (started by `ringtrace demo`).
    #[command(name = "__demo-node", hide = true)]
    DemoNode {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A closed stdout (`ringtrace … | head`) ends output, not in an error. The demo's own
    // processes are excluded: a broken pipe to a child is a failure to report.
    let result = match cli.command {
        c @ (Command::Demo { .. } | Command::DemoNode { .. }) => run(c),
        c => analyze::quiet_pipe(run(c)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ringtrace: error: {}", error_text(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, each cause once: errors that already quote their source in their
/// own message (as `ReadError` does) would otherwise print it twice.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Profile { by, bucket, json, csv, inputs, more } if more.is_set() => {
            profile_cmd::run(by, bucket, json, csv, &inputs, &more, &mut std::io::stdout().lock())
        }
        Command::Profile { by, bucket, json, csv, inputs, more: _ } => {
            // Streamed: only per-(group, bucket) counts are kept, whatever the input's size.
            let mut counter = FrequencyCounter::new(by, bucket)?;
            for file in list_inputs(&inputs)? {
                for_each_batch(&file, &mut |batch| batch.spans.iter().for_each(|s| counter.add(s)))?;
            }
            let profile = counter.finish()?;
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            if json {
                serde_json::to_writer_pretty(&mut out, &profile_output::to_json(&profile))?;
                writeln!(out)?;
            } else if csv {
                profile_output::write_csv(&profile, &mut out)?;
            } else {
                profile_output::write_table(&profile, &mut out)?;
            }
            Ok(())
        }
        Command::Demo { workers, requests, slow_node, out, otlp, no_tracing } => {
            let opts = demo::DemoOptions {
                workers: workers as usize,
                requests,
                slow_node,
                out,
                otlp,
                tracing: !no_tracing,
            };
            let run = demo::run_demo(&opts)?;
            let data = if no_tracing {
                None
            } else {
                Some(
                    read_inputs(&[&run.recordings])
                        .with_context(|| format!("reading the recordings in {}", run.recordings.display()))?,
                )
            };
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            analyze::quiet_pipe((|| {
                writeln!(out, "{run}")?;
                if let Some(data) = &data {
                    demo_report::write(data, &mut out)?;
                }
                Ok(())
            })())
        }
        Command::Requests(args) => analyze::requests(args, &mut std::io::stdout().lock()),
        Command::CriticalPath(args) => analyze::critical_path(args, &mut std::io::stdout().lock()),
        Command::Stats(args) => analyze::stats(args, &mut std::io::stdout().lock()),
        Command::Deps(args) => analyze::deps(args, &mut std::io::stdout().lock()),
        Command::Bottlenecks(args) => analyze::bottlenecks(args, &mut std::io::stdout().lock()),
        Command::Breakdown(args) => analyze::breakdown(args, &mut std::io::stdout().lock()),
        Command::Diff(args) => analyze::diff(args, &mut std::io::stdout().lock()),
        Command::Anomalies(args) => anomalies_cmd::run(args, &mut std::io::stdout().lock()),
        Command::Flame(args) => flame_cmd::run(args, &mut std::io::stdout().lock()),
        Command::Report(args) => report_cmd::run(args, &mut std::io::stdout().lock()),
        Command::DemoNode { args } => demo::run_node(demo::node_args_from(&args)?),
    }
}
