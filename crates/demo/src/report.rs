//! What `ringtrace demo` prints after the run: profiles, top methods, loss, two request trees,
//! what the OTLP export lost, and the commands to try next.

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::Path;

use ringtrace_analysis::time_format::duration;
use ringtrace_analysis::{
    frequency_profile, profile_output, render_tree, top_methods, trace_tree, Dataset, GroupBy, Process, Value,
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

/// The export loss counters a recording's resource carries (cumulative; the last frame holds the
/// totals), in the order [`write_export_losses`] names them.
const SINK_COUNTERS: [(&str, &str); 5] = [
    ("ringtrace.sink_failed_spans", "failed"),
    ("ringtrace.sink_dropped_spans", "dropped"),
    ("ringtrace.sink_rejected_spans", "rejected"),
    ("ringtrace.sink_unconfirmed_spans", "unconfirmed"),
    ("ringtrace.sink_unsent_spans", "unsent"),
];

/// A process's export losses by cause, from its recording's resource attributes.
fn sink_losses(p: &Process) -> Vec<(&'static str, u64)> {
    SINK_COUNTERS
        .iter()
        .map(|&(key, cause)| {
            let n = p.attributes.iter().find(|(k, _)| k == key).map_or(0, |(_, v)| match v {
                Value::Int(n) => u64::try_from(*n).unwrap_or(0),
                _ => 0,
            });
            (cause, n)
        })
        .collect()
}

/// Says, per process, how many spans did not reach their destinations beyond the recording (the
/// OTLP collector of `--otlp`): the children's `Stats::sink_*_spans`, as their recordings carry
/// them. Silent when nothing was exported and nothing lost.
pub fn write_export_losses(
    data: &Dataset,
    otlp: Option<&str>,
    logs: &Path,
    out: &mut dyn Write,
) -> io::Result<()> {
    let per_process: Vec<(&Process, Vec<(&str, u64)>)> =
        data.processes.iter().map(|p| (p, sink_losses(p))).collect();
    let lost = |losses: &[(&str, u64)]| losses.iter().map(|(_, n)| n).sum::<u64>();
    let total: u64 = per_process.iter().map(|(_, l)| lost(l)).sum();
    if total == 0 {
        if let Some(endpoint) = otlp {
            writeln!(out, "\n== OTLP export to {endpoint}: no span lost")?;
        }
        return Ok(());
    }
    let processes = per_process.iter().filter(|(_, l)| lost(l) > 0).count();
    let to = otlp.map(|e| format!(" to {e}")).unwrap_or_default();
    writeln!(
        out,
        "\n== Export{to}: {total} spans LOST in {processes} of {} processes (the recordings hold them)",
        data.processes.len()
    )?;
    for (p, losses) in &per_process {
        let causes: Vec<String> =
            losses.iter().filter(|(_, n)| *n > 0).map(|(cause, n)| format!("{n} {cause}")).collect();
        let n = lost(losses);
        if n > 0 {
            writeln!(out, "  {:<10} {:<8} {n} spans lost: {}", p.node, p.daemon, causes.join(", "))?;
        }
    }
    writeln!(out, "  why: the processes' logs in {}", logs.display())?;
    Ok(())
}

/// The commands to try next on this run's recordings, with its real paths.
pub fn write_next_commands(recordings: &Path, out_dir: &Path, out: &mut dyn Write) -> io::Result<()> {
    let rec = shell_word(recordings);
    writeln!(out, "\n== Next: try these on the recordings")?;
    for command in [
        format!("ringtrace profile --by method {rec}"),
        format!("ringtrace requests {rec}"),
        format!("ringtrace bottlenecks {rec}"),
        format!("ringtrace anomalies {rec}"),
        format!("ringtrace flame --format svg -o {} {rec}", shell_word(&out_dir.join("flame.svg"))),
        format!("ringtrace report -o {} {rec}", shell_word(&out_dir.join("report.html"))),
    ] {
        writeln!(out, "  {command}")?;
    }
    Ok(())
}

/// A path as one shell word: as it is when it holds only safe characters, else single-quoted.
fn shell_word(path: &Path) -> String {
    let s = path.display().to_string();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@".contains(&b)) {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_one_shell_word() {
        assert_eq!(shell_word(Path::new("/tmp/ringtrace-demo/recordings")), "/tmp/ringtrace-demo/recordings");
        assert_eq!(shell_word(Path::new("/tmp/my demo")), "'/tmp/my demo'");
        assert_eq!(shell_word(Path::new("/tmp/it's")), r"'/tmp/it'\''s'");
    }
}
