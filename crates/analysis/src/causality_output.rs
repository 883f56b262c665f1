//! Renderings of the [causality model](crate::causality): one line per request, a request's tree
//! with its process crossings, warnings and clock skew.

use std::io::{self, Write};

use serde::Serialize;

use crate::causality::{Causality, CausalityWarnings, ClockSkew, ParentLink, RequestTree};
use crate::model::{Dataset, Status};
use crate::text_layout::Indent;
use crate::time_format::{duration, rfc3339_utc};

/// A request's summary line, as [`write_json`] and [`write_table`] write it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RequestLine {
    /// The trace, in hex.
    pub trace_id: String,
    /// The application request, when the spans carry one.
    pub request_id: Option<String>,
    /// The request's first start.
    pub start_unix_ns: u64,
    /// Its latency.
    pub latency_ns: u64,
    /// Its spans, copies dropped.
    pub spans: usize,
    /// The processes it ran in.
    pub processes: usize,
    /// Its roots (more than one when parents are missing).
    pub roots: usize,
    /// Parent → child edges between processes.
    pub cross_process_edges: usize,
    /// Where its root ran, and the root's operation.
    pub root: Option<Place>,
}

/// Where a span ran, and its operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Place {
    /// The node.
    pub node: String,
    /// The daemon.
    pub daemon: String,
    /// The span's name.
    pub operation: String,
}

impl RequestLine {
    /// The summary of `tree`, a request of `data`.
    pub fn of(data: &Dataset, t: &RequestTree) -> Self {
        RequestLine {
            trace_id: t.trace_id.to_string(),
            request_id: t.request_id(data).map(str::to_owned),
            start_unix_ns: t.start_unix_ns(),
            latency_ns: t.duration_ns(),
            spans: t.spans.len(),
            processes: t.processes(data).len(),
            roots: t.roots.len(),
            cross_process_edges: t.cross_process_edges(),
            root: t.root().map(|r| {
                let s = t.span(data, r);
                Place { node: s.node.clone(), daemon: s.daemon.clone(), operation: s.name.clone() }
            }),
        }
    }
}

/// What `ringtrace requests` prints: a line per request (in trace order), what building the
/// trees repaired, and the clock skew between nodes. The in-memory path and the store's stream
/// both fill it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Requests {
    /// One line per request, by trace id.
    pub lines: Vec<RequestLine>,
    /// The sum of the trees' repairs.
    pub warnings: CausalityWarnings,
    /// Per (client node, server node) pair.
    pub clock_skew: Vec<ClockSkew>,
}

impl Requests {
    /// The requests of `causality`, built from `data`.
    pub fn of(data: &Dataset, causality: &Causality) -> Self {
        Requests {
            lines: causality.traces.iter().map(|t| RequestLine::of(data, t)).collect(),
            warnings: causality.warnings,
            clock_skew: causality.clock_skew.clone(),
        }
    }
}

#[derive(Serialize)]
struct SkewJson<'a> {
    client_node: &'a str,
    server_node: &'a str,
    pairs: u64,
    offset_ns: i64,
    lower_bound_ns: i64,
    upper_bound_ns: i64,
    detected: bool,
}

/// Writes `{"requests":[{"trace_id","request_id","start_unix_ns","latency_ns","spans",
/// "processes","roots","cross_process_edges","root":{"node","daemon","operation"}}],
/// "warnings":{"orphans":N,...},"clock_skew":[{"client_node","server_node","pairs","offset_ns",
/// "lower_bound_ns","upper_bound_ns","detected"}]}` on one line.
pub fn write_json(requests: &Requests, out: &mut dyn Write) -> io::Result<()> {
    let mut json = JsonRequests::begin(out)?;
    for line in &requests.lines {
        json.line(line)?;
    }
    json.end(&requests.warnings, &requests.clock_skew)
}

/// Writes [`write_json`]'s document a request at a time, as the requests come: the views over
/// a Parquet store stream them without holding them. The repairs and the clock skew, known only
/// once every request is read, come last, as they do in the document.
pub struct JsonRequests<'w> {
    out: &'w mut dyn Write,
    first: bool,
}

impl<'w> JsonRequests<'w> {
    /// Starts the document on `out`.
    ///
    /// # Errors
    /// An error writing to `out`.
    pub fn begin(out: &'w mut dyn Write) -> io::Result<Self> {
        out.write_all(b"{\"requests\":[")?;
        Ok(JsonRequests { out, first: true })
    }

    /// Writes the next request.
    ///
    /// # Errors
    /// An error writing to `out`.
    pub fn line(&mut self, line: &RequestLine) -> io::Result<()> {
        if !std::mem::take(&mut self.first) {
            self.out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *self.out, line)?;
        Ok(())
    }

    /// Ends the document with the repairs counted and the clock-skew estimates.
    ///
    /// # Errors
    /// An error writing to `out`.
    pub fn end(self, warnings: &CausalityWarnings, clock_skew: &[ClockSkew]) -> io::Result<()> {
        let warnings: serde_json::Map<String, serde_json::Value> =
            warnings.counters().iter().map(|(k, v)| ((*k).to_owned(), (*v).into())).collect();
        let clock_skew: Vec<SkewJson<'_>> = clock_skew.iter().map(skew_json).collect();
        self.out.write_all(b"],\"warnings\":")?;
        serde_json::to_writer(&mut *self.out, &warnings)?;
        self.out.write_all(b",\"clock_skew\":")?;
        serde_json::to_writer(&mut *self.out, &clock_skew)?;
        self.out.write_all(b"}\n")
    }
}

fn skew_json(s: &ClockSkew) -> SkewJson<'_> {
    SkewJson {
        client_node: &s.client_node,
        server_node: &s.server_node,
        pairs: s.pairs,
        offset_ns: s.offset_ns,
        lower_bound_ns: s.lower_bound_ns,
        upper_bound_ns: s.upper_bound_ns,
        detected: s.detected(),
    }
}

/// Writes one line per request (start, latency, spans, processes, roots, crossings, the root
/// span), then the warnings and the clock-skew estimates.
pub fn write_table(requests: &Requests, out: &mut dyn Write) -> io::Result<()> {
    let lines = &requests.lines;
    let mut totals = TableTotals::default();
    lines.iter().for_each(|r| totals.add(r));
    write_table_header(&totals, out)?;
    for r in lines {
        write_table_row(r, out)?;
    }
    write_warnings(&requests.warnings, &requests.clock_skew, out)
}

/// What [`write_table`]'s header counts: requests, their spans, and those that are one tree.
#[derive(Clone, Copy, Debug, Default)]
pub struct TableTotals {
    requests: usize,
    spans: usize,
    single: usize,
}

impl TableTotals {
    /// Counts `line`.
    pub fn add(&mut self, line: &RequestLine) {
        self.requests += 1;
        self.spans += line.spans;
        self.single += usize::from(line.roots == 1);
    }
}

/// [`write_table`]'s first two lines: the totals and the column names.
pub fn write_table_header(totals: &TableTotals, out: &mut dyn Write) -> io::Result<()> {
    let TableTotals { requests, spans, single } = totals;
    writeln!(out, "{requests} requests, {spans} spans; {single} are a single tree")?;
    writeln!(
        out,
        "{:<32}  {:<24} {:>10} {:>6} {:>5} {:>5} {:>6}  request / root",
        "trace", "start", "latency", "spans", "procs", "roots", "hops"
    )
}

/// [`write_table`]'s line of one request.
pub fn write_table_row(r: &RequestLine, out: &mut dyn Write) -> io::Result<()> {
    let root =
        r.root.as_ref().map(|p| format!("{} / {} / {}", p.node, p.daemon, p.operation)).unwrap_or_default();
    writeln!(
        out,
        "{:<32}  {:<24} {:>10} {:>6} {:>5} {:>5} {:>6}  {}{root}",
        r.trace_id,
        rfc3339_utc(r.start_unix_ns),
        duration(r.latency_ns),
        r.spans,
        r.processes,
        r.roots,
        r.cross_process_edges,
        r.request_id.as_ref().map(|id| format!("{id}: ")).unwrap_or_default(),
    )
}

/// Writes the repairs counted and the clock-skew estimates, if any.
pub fn write_warnings(
    warnings: &CausalityWarnings,
    clock_skew: &[ClockSkew],
    out: &mut dyn Write,
) -> io::Result<()> {
    let counted = warnings.described();
    if !counted.is_empty() {
        writeln!(out, "warnings: {}", counted.join("; "))?;
    }
    if !clock_skew.is_empty() {
        writeln!(out, "clock skew, from client → server span pairs (server clock minus client clock):")?;
        writeln!(
            out,
            "  {:<12} {:<12} {:>6} {:>12} {:>27}",
            "client", "server", "pairs", "offset", "bounds"
        )?;
        for s in clock_skew {
            let bounds = if s.consistent() {
                format!("[{} ns, {} ns]", s.lower_bound_ns, s.upper_bound_ns)
            } else {
                "inconsistent".to_owned()
            };
            writeln!(
                out,
                "  {:<12} {:<12} {:>6} {:>9} ns {:>27}{}",
                s.client_node,
                s.server_node,
                s.pairs,
                s.offset_ns,
                bounds,
                if s.detected() { "  skewed" } else { "" }
            )?;
        }
    }
    Ok(())
}

/// Writes a request's tree, one span per line indented by depth (past 64 levels, by 64 and the
/// depth written out, so a deep request cannot make a line huge), with its offset from the
/// request's start and its duration; a span whose parent ran in another process is marked `⇢`
/// and names the process it came from (`(from master@node-0)`), and roots say why they are roots.
pub fn write_tree(data: &Dataset, tree: &RequestTree, out: &mut dyn Write) -> io::Result<()> {
    let origin = tree.start_unix_ns();
    let request = tree.request_id(data).map(|r| format!(" (request {r})")).unwrap_or_default();
    writeln!(
        out,
        "trace {}{request}: {} spans, latency {}",
        tree.trace_id,
        tree.spans.len(),
        duration(tree.duration_ns())
    )?;
    for (i, s) in tree.spans.iter().enumerate() {
        let span = tree.span(data, i);
        let note = match s.link {
            ParentLink::CrossProcess => match s.parent {
                Some(p) => {
                    let parent = tree.span(data, p);
                    format!("  (from {}@{})", parent.daemon, parent.node)
                }
                None => String::new(),
            },
            ParentLink::MissingParent => "  (orphan: parent missing)".to_owned(),
            ParentLink::CycleBroken => "  (parent cycle cut here)".to_owned(),
            ParentLink::Root | ParentLink::Local => String::new(),
        };
        let marker = if s.link == ParentLink::CrossProcess { "⇢ " } else { "" };
        let error = match &span.status {
            Status::Error { message } if message.is_empty() => "  ERROR".to_owned(),
            Status::Error { message } => format!("  ERROR: {message}"),
            _ => String::new(),
        };
        writeln!(
            out,
            "{}{marker}{}@{} {}  +{}  {}{note}{error}",
            Indent(s.depth),
            span.daemon,
            span.node,
            span.name,
            duration(s.start_unix_ns.saturating_sub(origin)),
            duration(s.duration_ns()),
        )?;
    }
    Ok(())
}
