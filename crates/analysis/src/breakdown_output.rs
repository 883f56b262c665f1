//! Renderings of a [`Breakdown`]: JSON for tools, tables for people.

use std::io::{self, Write};

use serde::Serialize;

use crate::breakdown::{Breakdown, BreakdownRow, OperationTotal, RequestBreakdown};
use crate::time_format::duration;

/// Writes `{"requests":[{"trace_id","request_id","client_node","latency_ns","rows":
/// [{"serving_node","daemon","operation","count","total_ns","self_ns"}]}],
/// "aggregate":[{"client_node","serving_node","daemon","operation","count","total_ns",
/// "self_ns"}],"operations":[{"operation","count","total_ns","self_ns"}]}` on one line; rows
/// largest self time first.
pub fn write_json(breakdown: &Breakdown, out: &mut dyn Write) -> io::Result<()> {
    let mut json = JsonOut::new(out);
    for r in &breakdown.requests {
        json.add(r)?;
    }
    json.finish(breakdown)
}

/// [`write_json`]'s document written a request at a time, then the totals: for requests that
/// stream by (a store's), none of them kept.
#[derive(Debug)]
pub struct JsonOut<W: Write> {
    out: W,
    requests: usize,
}

impl<W: Write> JsonOut<W> {
    /// Nothing written yet.
    pub fn new(out: W) -> Self {
        JsonOut { out, requests: 0 }
    }

    /// Writes `request`'s entry of `requests`.
    pub fn add(&mut self, request: &RequestBreakdown) -> io::Result<()> {
        self.out.write_all(if self.requests == 0 { b"{\"requests\":[" } else { b"," })?;
        self.requests += 1;
        serde_json::to_writer(&mut self.out, &JsonRequest::of(request))?;
        Ok(())
    }

    /// Ends `requests`, then writes `totals`' aggregate and operations (its requests are not
    /// written).
    pub fn finish(mut self, totals: &Breakdown) -> io::Result<()> {
        #[derive(Serialize)]
        struct Totals<'a> {
            aggregate: Vec<JsonRow<'a>>,
            operations: Vec<JsonOperation<'a>>,
        }
        if self.requests == 0 {
            self.out.write_all(b"{\"requests\":[")?;
        }
        self.out.write_all(b"],")?;
        let totals = Totals {
            aggregate: totals.aggregate.iter().map(|r| JsonRow::of(r, true)).collect(),
            operations: totals.operations.iter().map(JsonOperation::of).collect(),
        };
        // The totals' object without its opening brace: the document's continues.
        let text = serde_json::to_vec(&totals)?;
        self.out.write_all(&text[1..])?;
        writeln!(self.out)
    }
}

#[derive(Serialize)]
struct JsonRequest<'a> {
    trace_id: String,
    request_id: Option<&'a str>,
    client_node: Option<&'a str>,
    latency_ns: u64,
    rows: Vec<JsonRow<'a>>,
}

impl<'a> JsonRequest<'a> {
    fn of(r: &'a RequestBreakdown) -> Self {
        JsonRequest {
            trace_id: r.trace_id.to_string(),
            request_id: r.request_id.as_deref(),
            client_node: r.rows.first().map(|row| row.client_node.as_str()),
            latency_ns: r.latency_ns,
            rows: r.rows.iter().map(|row| JsonRow::of(row, false)).collect(),
        }
    }
}

#[derive(Serialize)]
struct JsonRow<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    client_node: Option<&'a str>,
    serving_node: &'a str,
    daemon: &'a str,
    operation: &'a str,
    count: u64,
    total_ns: u64,
    self_ns: u64,
}

impl<'a> JsonRow<'a> {
    /// The row, with its client node for the aggregate (a request's rows share theirs).
    fn of(r: &'a BreakdownRow, with_client: bool) -> Self {
        JsonRow {
            client_node: with_client.then_some(r.client_node.as_str()),
            serving_node: &r.serving_node,
            daemon: &r.daemon,
            operation: &r.operation,
            count: r.count,
            total_ns: r.total_ns,
            self_ns: r.self_ns,
        }
    }
}

#[derive(Serialize)]
struct JsonOperation<'a> {
    operation: &'a str,
    count: u64,
    total_ns: u64,
    self_ns: u64,
}

impl<'a> JsonOperation<'a> {
    fn of(o: &'a OperationTotal) -> Self {
        JsonOperation { operation: &o.operation, count: o.count, total_ns: o.total_ns, self_ns: o.self_ns }
    }
}

/// Writes the aggregated rows, the operation totals, then the rows of the `slowest` slowest
/// requests.
pub fn write_table(breakdown: &Breakdown, slowest: usize, out: &mut dyn Write) -> io::Result<()> {
    write_table_of(breakdown, breakdown.requests.len(), slowest, out)
}

/// [`write_table`] of a breakdown that kept only some requests (at least the `slowest`
/// slowest) of the `requests` it was built from.
pub fn write_table_of(
    breakdown: &Breakdown,
    requests: usize,
    slowest: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let total_self: u64 = breakdown.aggregate.iter().map(|r| r.self_ns).sum();
    writeln!(out, "time by client node → serving node / daemon / operation, over {requests} requests")?;
    write_rows(&breakdown.aggregate, total_self, out)?;

    writeln!(out, "\ntime by operation type:")?;
    writeln!(out, "  {:>6} {:>8} {:>10} {:>10}  operation", "share", "spans", "total", "self")?;
    for o in &breakdown.operations {
        writeln!(
            out,
            "  {:>5.1}% {:>8} {:>10} {:>10}  {}",
            percent(o.self_ns, total_self),
            o.count,
            duration(o.total_ns),
            duration(o.self_ns),
            o.operation
        )?;
    }

    let mut order: Vec<usize> = (0..breakdown.requests.len()).collect();
    order.sort_by(|&a, &b| breakdown.requests[b].latency_ns.cmp(&breakdown.requests[a].latency_ns));
    for &i in order.iter().take(slowest) {
        let r = &breakdown.requests[i];
        let request = r.request_id.as_deref().map(|id| format!(" (request {id})")).unwrap_or_default();
        writeln!(out, "\ntrace {}{request}: latency {}", r.trace_id, duration(r.latency_ns))?;
        let own: u64 = r.rows.iter().map(|x| x.self_ns).sum();
        write_rows(&r.rows, own, out)?;
    }
    Ok(())
}

fn write_rows(rows: &[BreakdownRow], total_self: u64, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "  {:>6} {:>8} {:>10} {:>10}  client → serving node / daemon / operation",
        "share", "spans", "total", "self"
    )?;
    for r in rows {
        writeln!(
            out,
            "  {:>5.1}% {:>8} {:>10} {:>10}  {} → {} / {} / {}",
            percent(r.self_ns, total_self),
            r.count,
            duration(r.total_ns),
            duration(r.self_ns),
            r.client_node,
            r.serving_node,
            r.daemon,
            r.operation
        )?;
    }
    Ok(())
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}
