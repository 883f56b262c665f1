//! `ringtrace`: analyses of trace recordings, and the demo cluster.
//!
//! A thin command line over `ringtrace-analysis`, and for `demo` over `ringtrace-demo`, whose
//! cluster processes are this binary started again as `ringtrace __demo-node`.
//! Subcommand names, flags and `--json` shapes are a contract other tools script against.
//!
//! This file parses the command line and dispatches; each subcommand lives in its own module
//! under [`cmd`].

/// The views allocate a span's strings by the million: mimalloc does it in about half the time
/// glibc's allocator takes (`benches/README.md`, "Analysis at scale"). Built without transparent
/// huge pages (`no_thp`): with them, its arenas held about twice the memory in use when a view
/// merged many files of a store.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cmd;
mod exit;
mod input;
mod load;
mod parse;
mod progress;
mod zoom;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[cfg(unix)]
use cmd::recover;
use cmd::{
    anomalies, bottlenecks, breakdown, critical_path, demo, demo_node, deps, diff, envelope, export, flame,
    io, predict, profile, report, requests, stats,
};
use input::inputs_required;

#[derive(Parser)]
#[command(
    name = "ringtrace",
    version,
    about = "Analyse ringtrace recordings, OTLP/JSON and Jaeger JSON; run the demo cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Run the views over a Parquet store on the Ballista cluster whose scheduler is at URL
    /// (`df://HOST:PORT`; `ringtrace cluster scheduler` starts one) instead of in this process.
    #[cfg(feature = "distributed")]
    #[arg(long, global = true, value_name = "URL", value_parser = input::parse_scheduler)]
    scheduler: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Span counts per time bucket, grouped by node, daemon or method (`target::name`, or
    /// `daemon: name` for spans without a target, as files from other systems have).
    Profile(profile::ProfileArgs),
    /// Run the demo cluster (master, workers and a client as separate processes on 127.0.0.1)
    /// with ringtrace in every process, then print an analysis of its recordings.
    Demo(demo::DemoArgs),
    /// Each request as a tree of spans across processes: crossings, orphans, repairs, clock skew.
    #[command(mut_arg("inputs", inputs_required))]
    Requests(requests::RequestsArgs),
    /// The critical path of each request, by Jaeger UI's algorithm: what the request waited on.
    #[command(mut_arg("inputs", inputs_required))]
    CriticalPath(critical_path::CriticalPathArgs),
    /// Jaeger UI's trace statistics per service and operation: count, total, self time, percentiles.
    #[command(mut_arg("inputs", inputs_required))]
    Stats(stats::StatsArgs),
    /// Service dependency graph (caller daemon → callee daemon, calls and errors) and node graph.
    #[command(mut_arg("inputs", inputs_required))]
    Deps(deps::DepsArgs),
    /// Which (node, daemon, operation) hold the most critical-path time across requests.
    #[command(mut_arg("inputs", inputs_required))]
    Bottlenecks(bottlenecks::BottlenecksArgs),
    /// Time per (client node, serving node, daemon, operation), per request and in total.
    #[command(mut_arg("inputs", inputs_required))]
    Breakdown(breakdown::BreakdownArgs),
    /// Compare two traces or groups of traces per (daemon, operation): span counts and self time.
    #[command(mut_arg("inputs", inputs_required))]
    Diff(diff::DiffArgs),
    /// Rank (node, daemon) pairs by how unlike their peers they behave: method mix and latency.
    Anomalies(anomalies::AnomaliesArgs),
    /// Flame graph of span time by stack (total and self time): folded stacks, SVG or d3 JSON.
    Flame(flame::FlameArgs),
    /// One self-contained HTML report: frequency over time, top methods, anomalies, critical
    /// paths, dependencies, flame graph, trace volume and losses.
    Report(report::ReportArgs),
    /// Write the inputs' spans as OTLP protobuf, OTLP/JSON lines or Jaeger JSON, for other tools.
    Export(export::ExportArgs),
    /// I/O calls (from `ringtrace::io`, or imported from strace logs of any program) linked to
    /// requests: `import`, `requests`, `breakdown`, `calls`, `sizes`, `stacks`.
    Io(io::IoArgs),
    /// Measure a file system's I/O envelope: create, write and read rates (1-to-1 local and
    /// remote, N-to-1) for each process count and file size.
    Envelope(envelope::EnvelopeArgs),
    /// Predict a many-task stage's I/O time (write or read) from a file system's envelope.
    Predict(predict::PredictArgs),
    /// Run a many-task stage (N tasks on C worker processes, a file each) and measure its I/O
    /// time with ringtrace's own I/O capture.
    Stage(envelope::StageArgs),
    /// One worker of `envelope` or `stage` (started by them).
    #[command(name = envelope::WORKER_SUBCOMMAND, hide = true)]
    IoWorker(envelope::WorkerArgs),
    /// Append to raw recordings what their processes, killed while recording, left in their
    /// ring files (`<dir>/.rings/`), and remove those files. Readers already read it; this makes
    /// the recording whole on its own.
    #[cfg(unix)]
    Recover(recover::RecoverArgs),
    /// A Ballista scheduler or executor, for the views over a Parquet store to run on many
    /// machines (`--scheduler`).
    #[cfg(feature = "distributed")]
    Cluster(cmd::cluster::ClusterArgs),
    /// One process of the demo cluster (started by `ringtrace demo`).
    #[command(name = ringtrace_demo::NODE_SUBCOMMAND, hide = true)]
    DemoNode(demo_node::DemoNodeArgs),
}

/// mimalloc v3's `mi_option_purge_delay` (its place in `mi_option_e`, `mimalloc.h`, which the
/// bindings do not name).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory goes back to the system after 100 ms rather than mimalloc v3's 1 s, unless
/// `MIMALLOC_PURGE_DELAY` says otherwise. The views over a store free record batches on
/// another thread than the one that made them, and with the default their memory lingered:
/// `diff --slowest 10` on 50 M spans peaked at 835–923 MB, and at 701 MB with 100 ms, for 3%
/// more time on `stats` (`benches/README.md`).
fn return_freed_memory_sooner() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one of mimalloc's options, which it reads atomically; no memory is touched.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 100) }
    }
}

fn main() -> ExitCode {
    return_freed_memory_sooner();
    let cli = Cli::parse();
    #[cfg(feature = "distributed")]
    input::on_scheduler(cli.scheduler);
    let result = match cli.command {
        Command::Profile(args) => to_stdout(|out| profile::run(args, out)),
        Command::Demo(args) => demo::run(args),
        Command::Requests(args) => to_stdout(|out| requests::run(args, out)),
        Command::CriticalPath(args) => to_stdout(|out| critical_path::run(args, out)),
        Command::Stats(args) => to_stdout(|out| stats::run(args, out)),
        Command::Deps(args) => to_stdout(|out| deps::run(args, out)),
        Command::Bottlenecks(args) => to_stdout(|out| bottlenecks::run(args, out)),
        Command::Breakdown(args) => to_stdout(|out| breakdown::run(args, out)),
        Command::Diff(args) => to_stdout(|out| diff::run(args, out)),
        Command::Anomalies(args) => to_stdout(|out| anomalies::run(args, out)),
        Command::Flame(args) => to_stdout(|out| flame::run(args, out)),
        Command::Report(args) => to_stdout(|out| report::run(args, out)),
        Command::Export(args) => to_stdout(|out| export::run(args, out)),
        Command::Io(args) => to_stdout(|out| io::run(args, out)),
        Command::Predict(args) => to_stdout(|out| predict::run(args, out)),
        Command::Envelope(args) => to_stdout(|out| envelope::run(args, out)),
        Command::Stage(args) => to_stdout(|out| envelope::run_stage(args, out)),
        Command::IoWorker(args) => envelope::run_worker(args),
        #[cfg(feature = "distributed")]
        Command::Cluster(args) => cmd::cluster::run(args),
        #[cfg(unix)]
        Command::Recover(args) => to_stdout(|out| recover::run(args, out)),
        Command::DemoNode(args) => demo_node::run(args),
    };
    exit::code(result)
}

/// Runs an analysis that prints to stdout. A closed stdout (`ringtrace … | head`) ends its
/// output, not in an error. Not for the demo's processes: a broken pipe to a child is a failure
/// to report.
fn to_stdout(run: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>) -> anyhow::Result<()> {
    exit::quiet_pipe(run(&mut std::io::stdout().lock()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The option set is mimalloc's purge delay: its default, 1 s, is no other option's.
    #[test]
    fn freed_memory_goes_back_after_100_ms() {
        // SAFETY: reads one of mimalloc's options.
        let delay = || unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(delay(), 1000);
            return_freed_memory_sooner();
            assert_eq!(delay(), 100);
        }
    }
}
