//! Breakdown: where a client's requests spend their time — which serving node, daemon and
//! operation absorb it.
//!
//! The I/O-bottleneck view of the system-call tracing work, in span terms: every span of a
//! request is charged to (client node, serving node, daemon, operation), where the client node
//! is the node of the request's first root span and the serving node is the span's own node.
//! Each row carries the number of spans, their total duration and their total self time (see
//! [`self_times_in`]); self times of a request add up to the time its
//! spans cover without double counting nested spans, so they are what to compare across rows.
//! Rows are given per request and summed over all requests, together with the totals per
//! operation type (the operation name, across daemons and nodes).

use std::collections::BTreeMap;

use ringtrace_core::TraceId;

use crate::causality::{Causality, RequestTree};
use crate::model::Dataset;
use crate::stats::self_times_in;

/// Time charged to one (client node, serving node, daemon, operation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BreakdownRow {
    /// The node the request came from (its first root span's node).
    pub client_node: String,
    /// The node the spans ran on.
    pub serving_node: String,
    /// The spans' daemon.
    pub daemon: String,
    /// The spans' operation (span name).
    pub operation: String,
    /// Spans.
    pub count: u64,
    /// Summed durations.
    pub total_ns: u64,
    /// Summed self times.
    pub self_ns: u64,
}

/// The breakdown of one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestBreakdown {
    /// Index into [`Causality::traces`] (the order requests were added in).
    pub tree: usize,
    /// The request's trace.
    pub trace_id: TraceId,
    /// Its request id ([`RequestTree::request_id`]).
    pub request_id: Option<String>,
    /// The request's latency ([`RequestTree::duration_ns`]).
    pub latency_ns: u64,
    /// Rows, largest self time first.
    pub rows: Vec<BreakdownRow>,
}

/// Totals of one operation type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationTotal {
    /// The operation (span name).
    pub operation: String,
    /// Spans.
    pub count: u64,
    /// Summed durations.
    pub total_ns: u64,
    /// Summed self times.
    pub self_ns: u64,
}

/// Per-request and aggregated breakdowns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Breakdown {
    /// One per request, in [`Causality::traces`] order.
    pub requests: Vec<RequestBreakdown>,
    /// Rows summed over every request, largest self time first.
    pub aggregate: Vec<BreakdownRow>,
    /// Totals per operation type, largest self time first.
    pub operations: Vec<OperationTotal>,
}

type Key<'d> = (&'d str, &'d str, &'d str, &'d str);

/// The breakdown of every request in `causality`.
pub fn breakdown(data: &Dataset, causality: &Causality) -> Breakdown {
    let mut all = BreakdownBuilder::default();
    for tree in &causality.traces {
        all.add(data, tree);
    }
    all.finish()
}

/// Builds a [`Breakdown`] from requests added one at a time, from datasets of their own: how
/// the views over the Parquet store ([`crate::engine`]) add each trace as they stream it. It
/// keeps every request's rows (they are part of the result), unless they are taken as they come
/// ([`add_totals`](Self::add_totals)).
#[derive(Debug, Default)]
pub struct BreakdownBuilder {
    all: BTreeMap<(String, String, String, String), [u64; 3]>,
    operations: BTreeMap<String, [u64; 3]>,
    requests: Vec<RequestBreakdown>,
    /// Requests added, kept or not.
    added: usize,
}

impl BreakdownBuilder {
    /// Adds the request `tree` of `data`.
    pub fn add(&mut self, data: &Dataset, tree: &RequestTree) {
        let request = self.add_totals(data, tree);
        self.requests.push(request);
    }

    /// Adds the request `tree` of `data` to the totals only, and gives its rows back (for a
    /// caller that writes them as they come, rather than keep every request's).
    pub fn add_totals(&mut self, data: &Dataset, tree: &RequestTree) -> RequestBreakdown {
        let one = charge(data, tree);
        for (key, v) in &one {
            let owned = (key.0.to_owned(), key.1.to_owned(), key.2.to_owned(), key.3.to_owned());
            add(self.all.entry(owned).or_default(), v);
            match self.operations.get_mut(key.3) {
                Some(o) => add(o, v),
                None => add(self.operations.entry(key.3.to_owned()).or_default(), v),
            }
        }
        self.added += 1;
        RequestBreakdown {
            tree: self.added - 1,
            trace_id: tree.trace_id,
            request_id: tree.request_id(data).map(str::to_owned),
            latency_ns: tree.duration_ns(),
            rows: rows(
                one.into_iter()
                    .map(|((c, s, d, o), v)| ((c.to_owned(), s.to_owned(), d.to_owned(), o.to_owned()), v)),
            ),
        }
    }

    /// The breakdown of every request added.
    pub fn finish(self) -> Breakdown {
        let mut operations: Vec<OperationTotal> = self
            .operations
            .into_iter()
            .map(|(operation, [count, total_ns, self_ns])| OperationTotal {
                operation,
                count,
                total_ns,
                self_ns,
            })
            .collect();
        operations.sort_by_key(|o| std::cmp::Reverse(o.self_ns));
        Breakdown { requests: self.requests, aggregate: rows(self.all.into_iter()), operations }
    }
}

fn charge<'d>(data: &'d Dataset, tree: &RequestTree) -> BTreeMap<Key<'d>, [u64; 3]> {
    let mut out = BTreeMap::new();
    let Some(root) = tree.root() else { return out };
    let client = data.spans[tree.spans[root].span].node.as_str();
    for (s, own) in tree.spans.iter().zip(self_times_in(data, tree)) {
        let span = &data.spans[s.span];
        let key = (client, span.node.as_str(), span.daemon.as_str(), span.name.as_str());
        add(out.entry(key).or_default(), &[1, s.duration_ns(), own]);
    }
    out
}

fn add(acc: &mut [u64; 3], v: &[u64; 3]) {
    for (a, b) in acc.iter_mut().zip(v) {
        *a = a.saturating_add(*b);
    }
}

/// Rows of (client, serving node, daemon, operation) → (count, total, self), largest self time
/// first (ties in key order).
fn rows(map: impl Iterator<Item = ((String, String, String, String), [u64; 3])>) -> Vec<BreakdownRow> {
    let mut rows: Vec<BreakdownRow> =
        map.map(|((client_node, serving_node, daemon, operation), [count, total_ns, self_ns])| {
            BreakdownRow { client_node, serving_node, daemon, operation, count, total_ns, self_ns }
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.self_ns));
    rows
}
