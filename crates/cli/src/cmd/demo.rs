//! `ringtrace demo`: runs the demo cluster ([`ringtrace_demo`]), then prints an analysis of its
//! recordings.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use ringtrace_analysis::read_inputs;
use ringtrace_demo::{report, run_demo, DemoOptions, DEFAULT_SLOW_IO_MS};

use crate::exit::quiet_pipe;

/// Arguments of `ringtrace demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Worker daemons, on nodes node-1 … node-N.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub workers: u64,
    /// Client requests.
    #[arg(long, default_value_t = 40)]
    pub requests: usize,
    /// Make this worker's disk I/O slower (e.g. node-2).
    #[arg(long, value_name = "NODE")]
    pub slow_node: Option<String>,
    /// With --slow-node: the delay added to each of its disk reads and writes, milliseconds.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_SLOW_IO_MS, requires = "slow_node")]
    pub slow_io_ms: u64,
    /// Output directory: recordings, logs and the workers' data.
    #[arg(long, default_value = "ringtrace-demo")]
    pub out: PathBuf,
    /// Also export every process's spans to this OTLP endpoint.
    #[arg(long, value_name = "ENDPOINT")]
    pub otlp: Option<String>,
    /// Run the same cluster without ringtrace (no recording, no report): the baseline for
    /// measuring what recording costs. `RINGTRACE_DEMO_TRACING` picks it: `off` (the
    /// default) runs no subscriber at all; `floor` runs in every process the least any
    /// recorder does (registry, level filter, and a layer that timestamps spans and events
    /// into a per-thread buffer and exports nothing); `floor-fields` the same floor copying
    /// every field's value, formatted, into a per-thread buffer too; `floor-disk` that floor
    /// writing its buffers to a file per process in the recordings' directory;
    /// `floor-subscriber-disk` the same without the registry (recording runs ringtrace's
    /// standalone subscriber, which `init()` installs for the default `info` level).
    #[arg(long, conflicts_with = "otlp")]
    pub no_tracing: bool,
}

/// Runs `ringtrace demo`. A closed stdout ends the report quietly; a failure of the cluster's
/// own processes is an error.
pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    let opts = DemoOptions {
        workers: args.workers as usize,
        requests: args.requests,
        slow_node: args.slow_node,
        slow_io_ms: args.slow_io_ms,
        out: args.out,
        otlp: args.otlp,
        tracing: !args.no_tracing,
    };
    let run = run_demo(&opts)?;
    let opts = DemoOptions { out: std::path::absolute(&opts.out)?, ..opts };
    let data = if args.no_tracing {
        None
    } else {
        Some(
            read_inputs(&[&run.recordings])
                .with_context(|| format!("reading the recordings in {}", run.recordings.display()))?,
        )
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    quiet_pipe((|| {
        writeln!(out, "{run}")?;
        if let Some(data) = &data {
            report::write(data, &mut out)?;
            report::write_export_losses(data, opts.otlp.as_deref(), &run.logs, &mut out)?;
            report::write_next_commands(&run.recordings, &opts.out, &mut out)?;
        }
        Ok(())
    })())
}
