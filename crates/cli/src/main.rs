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
    for_each_batch_with, list_inputs, profile_output, read_inputs, FrequencyCounter, GroupBy,
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
    /// Span counts per time bucket, grouped by node, daemon or method (`target::name`, or
    /// `daemon: name` for spans without a target, as files from other systems have).
    Profile {
        /// What to group spans by: node, daemon or method.
        #[arg(long, default_value = "node")]
        by: GroupBy,
        /// Bucket width, e.g. 1s, 500ms, 2m (default: a round width — 1, 2 or 5 times a power
        /// of ten — giving 24 to 60 columns over the data's time span).
        #[arg(long, value_parser = duration::parse_nanos)]
        bucket: Option<u64>,
        /// Print JSON: {"group_by","bucket_ns","start_unix_ns","groups":[{"key","total","counts"}]}.
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Print CSV: group,bucket_start_unix_ns,count.
        #[arg(long)]
        csv: bool,
        /// Recording files or directories, OTLP/JSON lines, or Jaeger JSON.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Refuse a file cut short (a crash mid-write) instead of reading it up to the cut with
        /// a warning.
        #[arg(long)]
        strict: bool,
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
        /// With --slow-node: the delay added to each of its disk reads and writes, milliseconds.
        #[arg(long, value_name = "MS", default_value_t = demo::DEFAULT_SLOW_IO_MS, requires = "slow_node")]
        slow_io_ms: u64,
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
    #[command(mut_arg("inputs", inputs_required))]
    Requests(analyze::RequestsArgs),
    /// The critical path of each request, by Jaeger UI's algorithm: what the request waited on.
    #[command(mut_arg("inputs", inputs_required))]
    CriticalPath(analyze::CriticalPathArgs),
    /// Jaeger UI's trace statistics per service and operation: count, total, self time, percentiles.
    #[command(mut_arg("inputs", inputs_required))]
    Stats(analyze::StatsArgs),
    /// Service dependency graph (caller daemon → callee daemon, calls and errors) and node graph.
    #[command(mut_arg("inputs", inputs_required))]
    Deps(analyze::DepsArgs),
    /// Which (node, daemon, operation) hold the most critical-path time across requests.
    #[command(mut_arg("inputs", inputs_required))]
    Bottlenecks(analyze::BottlenecksArgs),
    /// Time per (client node, serving node, daemon, operation), per request and in total.
    #[command(mut_arg("inputs", inputs_required))]
    Breakdown(analyze::BreakdownArgs),
    /// Compare two traces or groups of traces per (daemon, operation): span counts and self time.
    #[command(mut_arg("inputs", inputs_required))]
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

/// Marks the causality views' INPUT required, so `--help` shows `<INPUT>...`: the shared input
/// options make it `required_unless_present = "jaeger"`, which clap renders as optional. It also
/// conflicts with `--jaeger`, and clap excuses a missing required argument when a conflicting one
/// is present — so `--jaeger URL --service S` without an INPUT still parses.
fn inputs_required(arg: clap::Arg) -> clap::Arg {
    arg.required_unless_present(clap::builder::Resettable::<clap::Id>::Reset).required(true)
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

/// The earliest start and latest end of the spans seen.
#[derive(Default)]
struct TimeSpan {
    start_unix_ns: Option<u64>,
    end_unix_ns: u64,
}

impl TimeSpan {
    fn add(&mut self, s: &ringtrace_analysis::Span) {
        self.start_unix_ns = Some(self.start_unix_ns.map_or(s.start_unix_ns, |t| t.min(s.start_unix_ns)));
        self.end_unix_ns = self.end_unix_ns.max(s.end_unix_ns).max(s.start_unix_ns);
    }

    /// `profile`'s bucket when none is given: a 1-2-5 width giving 24 to 60 columns.
    fn auto_bucket_ns(&self) -> u64 {
        let span_ns = self.start_unix_ns.map_or(0, |start| self.end_unix_ns - start);
        ringtrace_analysis::report::auto_bucket_ns(span_ns)
    }
}

fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Profile { by, bucket, json, csv, inputs, strict, more } if more.is_set() => {
            let output = profile_cmd::Output { json, csv };
            profile_cmd::run(by, bucket, output, &inputs, strict, &more, &mut std::io::stdout().lock())
        }
        Command::Profile { by, bucket, json, csv, inputs, strict, more: _ } => {
            let truncation = load::truncation(strict);
            // Streamed: only per-(group, bucket) counts are kept, whatever the input's size.
            let files = list_inputs(&inputs)?;
            let bucket = match bucket {
                Some(b) => b,
                None => {
                    // A first pass for the time span alone, so the stream keeps its small memory.
                    let mut span = TimeSpan::default();
                    for file in &files {
                        for_each_batch_with(file, truncation, &mut |batch| {
                            batch.spans.iter().for_each(|s| span.add(s))
                        })?;
                    }
                    span.auto_bucket_ns()
                }
            };
            let mut counter = FrequencyCounter::new(by, bucket)?;
            let mut warnings = Vec::new();
            for file in files {
                warnings.extend(for_each_batch_with(&file, truncation, &mut |batch| {
                    batch.spans.iter().for_each(|s| counter.add(s))
                })?);
            }
            load::print_warnings(&warnings, &mut std::io::stderr().lock(), true);
            let profile = counter.finish()?;
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            if json {
                profile_output::write_json(&profile, &mut out)?;
            } else if csv {
                profile_output::write_csv(&profile, &mut out)?;
            } else {
                profile_output::write_table(&profile, &mut out)?;
            }
            Ok(())
        }
        Command::Demo { workers, requests, slow_node, slow_io_ms, out, otlp, no_tracing } => {
            let opts = demo::DemoOptions {
                workers: workers as usize,
                requests,
                slow_node,
                slow_io_ms,
                out,
                otlp,
                tracing: !no_tracing,
            };
            let run = demo::run_demo(&opts)?;
            let opts = demo::DemoOptions { out: std::path::absolute(&opts.out)?, ..opts };
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
                    demo_report::write_export_losses(data, opts.otlp.as_deref(), &run.logs, &mut out)?;
                    demo_report::write_next_commands(&run.recordings, &opts.out, &mut out)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
