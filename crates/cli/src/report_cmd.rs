//! `ringtrace report`: every top-level view in one self-contained HTML file.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ringtrace_analysis::report::{build_report, write_html, ReportOptions, ReportStep};

use crate::anomalies_cmd::{parse_window, Window};
use crate::{duration, load};

/// Arguments of `ringtrace report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The HTML file to write.
    #[arg(short, long, value_name = "FILE", default_value = "report.html")]
    pub output: PathBuf,
    /// The page's title.
    #[arg(long, default_value = "ringtrace report")]
    pub title: String,
    /// Bucket width of the time series, e.g. 100ms (default: a round width giving at most 60
    /// buckets).
    #[arg(long, value_parser = duration::parse_nanos)]
    pub bucket: Option<u64>,
    /// Anomaly window, e.g. 5s, or `all` for the whole time range.
    #[arg(long, default_value = "5s", value_parser = parse_window)]
    pub window: Window,
    /// How many of the slowest requests show their critical path.
    #[arg(long, default_value_t = 5)]
    pub slowest: usize,
    /// Correct clock skew between nodes first, as Jaeger's adjuster does.
    #[arg(long)]
    pub adjust_skew: bool,
    /// No progress bar and no closing line.
    #[arg(short, long)]
    pub quiet: bool,
    /// Recording files or directories, OTLP/JSON lines, or Jaeger JSON.
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
}

/// Runs `ringtrace report`; the closing line goes to `out`.
pub fn run(args: ReportArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let target = if args.quiet || !std::io::stderr().is_terminal() {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    };
    let steps = ReportStep::ALL.len() as u64 + 1;
    let bar = ProgressBar::with_draw_target(Some(steps), target);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    bar.set_message("reading inputs");

    let data = load::read_compact(&args.inputs, &mut |done, total| {
        bar.set_message(format!("reading inputs ({done}/{total} files)"));
    })?;
    bar.inc(1);
    let options = ReportOptions {
        title: args.title.clone(),
        bucket_ns: args.bucket,
        anomaly_window_ns: args.window.0,
        slowest_requests: args.slowest,
        adjust_skew: args.adjust_skew,
        ..Default::default()
    };
    let mut first = true;
    let report = build_report(&data, &options, &mut |step| {
        if !first {
            bar.inc(1);
        }
        first = false;
        bar.set_message(step.label());
    });
    bar.inc(1);
    bar.set_message("writing HTML");
    let mut html = Vec::with_capacity(256 * 1024);
    write_html(&report, &mut html)?;
    std::fs::write(&args.output, &html).with_context(|| format!("writing {}", args.output.display()))?;
    bar.finish_and_clear();
    if !args.quiet {
        writeln!(
            out,
            "report: {} ({} KB) — {} spans, {} requests, {} processes",
            args.output.display(),
            html.len().div_ceil(1024),
            report.summary.spans,
            report.summary.traces,
            report.summary.processes
        )?;
    }
    Ok(())
}
