//! `ringtrace report`: every top-level view in one self-contained HTML file.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ringtrace_analysis::markup::escape;
use ringtrace_analysis::report::{build_report, write_html, ReportOptions, ReportStep};

use crate::input::FileInputs;
use crate::parse::{parse_nanos, parse_window, Window};

/// Arguments of `ringtrace report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The HTML file to write.
    #[arg(short, long, value_name = "FILE", default_value = "report.html")]
    pub output: PathBuf,
    /// The page's title.
    #[arg(long, default_value = "ringtrace report")]
    pub title: String,
    /// A file system's I/O envelope (`ringtrace envelope --json`): the I/O section shows the
    /// bandwidth it predicts for write and read stages.
    #[arg(long, value_name = "FILE")]
    pub envelope: Option<PathBuf>,
    /// Bucket width of the time series, e.g. 100ms (default: a round width giving at most 60
    /// buckets).
    #[arg(long, value_parser = parse_nanos)]
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
    #[command(flatten)]
    pub input: FileInputs,
}

/// Runs `ringtrace report`; the closing line goes to `out`.
pub fn run(args: ReportArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let target = if args.quiet { ProgressDrawTarget::hidden() } else { crate::progress::on_stderr() };
    let steps = ReportStep::ALL.len() as u64 + 1;
    let bar = ProgressBar::with_draw_target(Some(steps), target);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    bar.set_message("reading inputs");

    let options = ReportOptions {
        title: args.title.clone(),
        bucket_ns: args.bucket,
        anomaly_window_ns: args.window.0,
        slowest_requests: args.slowest,
        adjust_skew: args.adjust_skew,
        envelope: match &args.envelope {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("reading the envelope {}: {e}", path.display()))?;
                Some(
                    ringtrace_analysis::envelope::Envelope::from_json(&text)
                        .map_err(|e| anyhow::anyhow!("reading the envelope {}: {e}", path.display()))?,
                )
            }
            None => None,
        },
        ..Default::default()
    };
    let mut first = true;
    let mut on_step = |step: ReportStep| {
        if !first {
            bar.inc(1);
        }
        first = false;
        bar.set_message(step.label());
    };
    let report = match crate::input::store_input(&args.input.inputs)? {
        #[cfg(feature = "store")]
        Some(store) => {
            bar.inc(1);
            // No notes on standard error: the page shows what the trees repaired, as over recordings.
            match store.report(&options, &mut on_step)? {
                Some(report) => report,
                None => {
                    bar.finish_and_clear();
                    return write_empty(&args, 0, out);
                }
            }
        }
        #[cfg(not(feature = "store"))]
        Some(never) => match never {},
        None => {
            let data = args.input.read_compact(&mut |done, total| {
                bar.set_message(format!("reading inputs ({done}/{total} files)"));
            })?;
            bar.inc(1);
            if data.spans.is_empty() {
                bar.finish_and_clear();
                return write_empty(&args, data.processes.len(), out);
            }
            build_report(&data, &options, &mut on_step)
        }
    };
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

/// No spans in the inputs: a warning on stderr, and a page that says so — not charts of nothing
/// dated 1970.
fn write_empty(args: &ReportArgs, processes: usize, out: &mut dyn Write) -> anyhow::Result<()> {
    let inputs: Vec<String> = args.input.inputs.iter().map(|p| p.display().to_string()).collect();
    eprintln!(
        "ringtrace: warning: no spans in {} ({} processes): the report says only that",
        inputs.join(", "),
        processes
    );
    let mut items = String::new();
    for input in &inputs {
        items.push_str(&format!("<li><code>{}</code></li>", escape(input)));
    }
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\
         <style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}}</style>\
         </head>\n<body data-charts=\"0\" data-rendered=\"no-data\" data-errors=\"0\" data-empty-charts=\"\">\
         <h1>{title}</h1>\n<section id=\"summary\"><h2>No spans</h2>\
         <p>The inputs hold no spans ({processes} processes), so there is nothing to chart: no time \
         range, no frequency, no requests.</p><ul>{items}</ul>\
         <p>Check that the paths are the recordings you meant, and that the traced processes shut down \
         cleanly (dropping the ringtrace guard flushes their spans).</p></section>\n</body></html>\n",
        title = escape(&args.title),
        processes = processes,
    );
    std::fs::write(&args.output, &html).with_context(|| format!("writing {}", args.output.display()))?;
    if !args.quiet {
        writeln!(out, "report: {} ({} KB) — no spans", args.output.display(), html.len().div_ceil(1024))?;
    }
    Ok(())
}
