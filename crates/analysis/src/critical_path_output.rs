//! Renderings of critical paths: JSON for tools, a table for people.

use std::io::{self, Write};

use serde::Serialize;

use crate::causality::{Causality, RequestTree};
use crate::critical_path::{time_on_path, PathSection, TraceCriticalPath};
use crate::model::Dataset;
use crate::time_format::duration;

/// Writes `{"traces":[{"trace_id":"<hex>","critical_path":[{"span_id":"<hex>",
/// "start_unix_ns":N,"end_unix_ns":N},...]}]}` on one line: sections latest first, unmerged, in
/// nanoseconds.
pub fn write_json(
    data: &Dataset,
    causality: &Causality,
    paths: &[TraceCriticalPath],
    out: &mut dyn Write,
) -> io::Result<()> {
    write_each(data, causality, paths, PathsOut::new(true, io::BufWriter::new(out)))?.finish()?.flush()
}

/// Each request's path of `paths` added to `written`.
fn write_each<W: Write>(
    data: &Dataset,
    causality: &Causality,
    paths: &[TraceCriticalPath],
    mut written: PathsOut<W>,
) -> io::Result<PathsOut<W>> {
    for p in paths {
        if let Some(tree) = causality.traces.get(p.tree) {
            written.add(data, tree, &p.sections)?;
        }
    }
    Ok(written)
}

/// Critical paths written one request at a time to `out`, as [`write_json`] or [`write_table`]
/// writes them all: for requests whose datasets do not outlive them (a store's traces,
/// streamed).
#[derive(Debug)]
pub struct PathsOut<W: Write> {
    json: bool,
    requests: usize,
    out: W,
}

impl<W: Write> PathsOut<W> {
    /// Nothing yet, as JSON or as the table, to `out`.
    pub fn new(json: bool, out: W) -> Self {
        PathsOut { json, requests: 0, out }
    }

    /// Adds the request `tree` of `data`, whose critical path is `sections`.
    pub fn add(&mut self, data: &Dataset, tree: &RequestTree, sections: &[PathSection]) -> io::Result<()> {
        let out = &mut self.out;
        match (self.requests, self.json) {
            (0, true) => out.write_all(b"{\"traces\":[")?,
            (0, false) => {}
            (_, true) => out.write_all(b",")?,
            (_, false) => out.write_all(b"\n")?,
        }
        self.requests += 1;
        if self.json {
            write_json_trace(data, tree, sections, out)
        } else {
            write_table_trace(data, tree, sections, out)
        }
    }

    /// Ends the document; gives back the writer.
    pub fn finish(mut self) -> io::Result<W> {
        if self.json {
            if self.requests == 0 {
                self.out.write_all(b"{\"traces\":[")?;
            }
            self.out.write_all(b"]}\n")?;
        }
        Ok(self.out)
    }
}

/// Writes one trace's entry of [`write_json`]'s `traces` array: `{"trace_id","critical_path"}`.
fn write_json_trace(
    data: &Dataset,
    tree: &RequestTree,
    sections: &[PathSection],
    out: &mut dyn Write,
) -> io::Result<()> {
    #[derive(Serialize)]
    struct Trace {
        trace_id: String,
        critical_path: Vec<Section>,
    }
    #[derive(Serialize)]
    struct Section {
        span_id: String,
        start_unix_ns: u64,
        end_unix_ns: u64,
    }
    let critical_path = sections
        .iter()
        .map(|s| Section {
            span_id: data.spans[s.span].span_id.to_string(),
            start_unix_ns: s.start_unix_ns,
            end_unix_ns: s.end_unix_ns,
        })
        .collect();
    serde_json::to_writer(&mut *out, &Trace { trace_id: tree.trace_id.to_string(), critical_path })?;
    Ok(())
}

/// Writes each request's path in time order — offset from the request's start, length, share
/// of the request's latency, node, daemon and operation — then the time on the path per span,
/// largest first, with the span's code location.
pub fn write_table(
    data: &Dataset,
    causality: &Causality,
    paths: &[TraceCriticalPath],
    out: &mut dyn Write,
) -> io::Result<()> {
    write_each(data, causality, paths, PathsOut::new(false, io::BufWriter::new(out)))?.finish()?.flush()
}

/// Writes one request's part of [`write_table`] (without the blank line between requests).
fn write_table_trace(
    data: &Dataset,
    tree: &RequestTree,
    sections: &[PathSection],
    out: &mut dyn Write,
) -> io::Result<()> {
    let latency = tree.duration_ns();
    let on_path: u64 = sections.iter().map(PathSection::duration_ns).sum();
    let request = tree.request_id(data).map(|r| format!(" (request {r})")).unwrap_or_default();
    writeln!(
        out,
        "trace {}{request}: latency {}, critical path {} in {} sections",
        tree.trace_id,
        duration(latency),
        duration(on_path),
        sections.len()
    )?;
    let share = |ns: u64| if latency == 0 { 0.0 } else { ns as f64 * 100.0 / latency as f64 };
    let origin = tree.start_unix_ns();
    writeln!(out, "  {:>10} {:>10} {:>6}  node / daemon / operation", "at", "length", "share")?;
    for s in sections.iter().rev() {
        let span = &data.spans[s.span];
        writeln!(
            out,
            "  {:>10} {:>10} {:>5.1}%  {} / {} / {}",
            format!("+{}", duration(s.start_unix_ns.saturating_sub(origin))),
            duration(s.duration_ns()),
            share(s.duration_ns()),
            span.node,
            span.daemon,
            span.name
        )?;
    }
    let mut ranked: Vec<(usize, u64)> =
        time_on_path(tree, sections).into_iter().enumerate().filter(|&(_, ns)| ns > 0).collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    writeln!(out, "  by span:")?;
    for (i, ns) in ranked {
        let span = tree.span(data, i);
        let location = span.location.as_deref().map(|l| format!("  {l}")).unwrap_or_default();
        writeln!(
            out,
            "  {:>10} {:>5.1}%  {} / {} / {}  span {}{location}",
            duration(ns),
            share(ns),
            span.node,
            span.daemon,
            span.name,
            span.span_id
        )?;
    }
    Ok(())
}
