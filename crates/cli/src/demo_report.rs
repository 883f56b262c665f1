//! What `ringtrace demo` prints after the run: profiles, top methods, loss, two request trees.

use std::collections::BTreeSet;
use std::io::{self, Write};

use ringtrace_analysis::time_format::duration;
use ringtrace_analysis::{
    frequency_profile, profile_output, render_tree, top_methods, trace_tree, Dataset, GroupBy,
};

const BUCKET_NS: u64 = 100_000_000;

/// Writes the demo's analysis of `data`.
pub fn write(data: &Dataset, out: &mut dyn Write) -> io::Result<()> {
    let traces = data.traces();
    writeln!(
        out,
        "\n== Recordings: {} spans in {} traces from {} processes",
        data.spans.len(),
        traces.len(),
        data.processes.len()
    )?;
    for p in &data.processes {
        writeln!(
            out,
            "  {:<10} {:<8} pid {:<8} dropped spans {}, dropped events {}, unclosed {}",
            p.node,
            p.daemon,
            p.pid.map(|p| p.to_string()).unwrap_or_default(),
            p.dropped_spans,
            p.dropped_events,
            p.unclosed_spans
        )?;
    }
    for by in [GroupBy::Node, GroupBy::Daemon] {
        writeln!(out, "\n== Frequency profile by {by} (spans started per 100 ms)")?;
        match frequency_profile(data, by, BUCKET_NS) {
            Ok(p) => profile_output::write_table(&p, out)?,
            Err(e) => writeln!(out, "  (no profile: {e})")?,
        }
    }
    writeln!(out, "\n== Top methods")?;
    writeln!(out, "  {:>7} {:>12}  method", "spans", "total time")?;
    for (method, count, total) in top_methods(data, 12) {
        writeln!(out, "  {count:>7} {:>12}  {method}", duration(total))?;
    }
    // The two requests that crossed the most processes, as trees.
    let mut ranked: Vec<_> = traces
        .iter()
        .map(|(trace, spans)| {
            let processes: BTreeSet<usize> = spans.iter().map(|&i| data.spans[i].process).collect();
            (processes.len(), spans.len(), *trace)
        })
        .collect();
    ranked.sort_by(|a, b| b.cmp(a));
    for (processes, spans, trace) in ranked.into_iter().take(2) {
        let request = data
            .spans
            .iter()
            .find(|s| s.trace_id == trace && s.request_id.is_some())
            .and_then(|s| s.request_id.clone())
            .unwrap_or_else(|| "-".into());
        writeln!(out, "\n== Request {request}: trace {trace}, {spans} spans across {processes} processes")?;
        render_tree(data, &trace_tree(data, trace), out)?;
    }
    Ok(())
}
