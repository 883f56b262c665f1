//! Renderings of [`Bottlenecks`]: JSON for tools, a ranked table for people.

use std::io::{self, Write};

use serde::Serialize;

use crate::bottlenecks::Bottlenecks;
use crate::time_format::duration;

/// Writes `{"bottlenecks":[{"node","daemon","operation","critical_path_ns","share","location",
/// "io_target"},...]}` on one line, sorted by critical-path time, largest first; `location` is
/// `"file:line"`, or `null` when no span of the group carries one; `io_target` is the file or peer
/// of a group of I/O calls, else `null`.
pub fn write_json(result: &Bottlenecks, out: &mut dyn Write) -> io::Result<()> {
    #[derive(Serialize)]
    struct Doc<'a> {
        bottlenecks: Vec<Row<'a>>,
    }
    #[derive(Serialize)]
    struct Row<'a> {
        node: &'a str,
        daemon: &'a str,
        operation: &'a str,
        critical_path_ns: u64,
        share: f64,
        location: Option<&'a str>,
        io_target: Option<&'a str>,
    }
    let bottlenecks = result
        .ranking
        .iter()
        .map(|b| Row {
            node: &b.node,
            daemon: &b.daemon,
            operation: &b.operation,
            critical_path_ns: b.critical_path_ns,
            share: b.share,
            location: b.location.as_deref(),
            io_target: b.io_target.as_deref(),
        })
        .collect();
    serde_json::to_writer(&mut *out, &Doc { bottlenecks })?;
    writeln!(out)
}

/// Writes the first `top` groups of the ranking (all with `None`): share, critical-path time,
/// requests on whose path the group lies, node, daemon, operation and location.
pub fn write_table(result: &Bottlenecks, top: Option<usize>, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "bottlenecks over {} of {} requests: {} of critical path",
        result.requests,
        result.requests_total,
        duration(result.critical_path_ns)
    )?;
    let rows = &result.ranking[..top.unwrap_or(usize::MAX).min(result.ranking.len())];
    writeln!(
        out,
        "{:>4} {:>6} {:>10} {:>8}  node / daemon / operation  location",
        "rank", "share", "on path", "requests"
    )?;
    for (i, b) in rows.iter().enumerate() {
        writeln!(
            out,
            "{:>4} {:>5.1}% {:>10} {:>8}  {} / {} / {}  {}",
            i + 1,
            b.share * 100.0,
            duration(b.critical_path_ns),
            b.requests,
            b.node,
            b.daemon,
            match &b.io_target {
                Some(target) => format!("{} {target}", b.operation),
                None => b.operation.clone(),
            },
            b.location.as_deref().unwrap_or("-")
        )?;
    }
    if rows.len() < result.ranking.len() {
        writeln!(out, "({} more; --top to show more, --json for all)", result.ranking.len() - rows.len())?;
    }
    Ok(())
}
