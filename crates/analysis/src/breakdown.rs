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
    /// Index into [`Causality::traces`].
    pub tree: usize,
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
    let mut all: BTreeMap<Key<'_>, [u64; 3]> = BTreeMap::new();
    let mut operations: BTreeMap<&str, [u64; 3]> = BTreeMap::new();
    let mut requests = Vec::with_capacity(causality.traces.len());
    for (t, tree) in causality.traces.iter().enumerate() {
        let one = charge(data, tree);
        for (key, v) in &one {
            add(all.entry(*key).or_default(), v);
            add(operations.entry(key.3).or_default(), v);
        }
        requests.push(RequestBreakdown { tree: t, latency_ns: tree.duration_ns(), rows: rows(one) });
    }
    let mut operations: Vec<OperationTotal> = operations
        .into_iter()
        .map(|(operation, [count, total_ns, self_ns])| OperationTotal {
            operation: operation.to_owned(),
            count,
            total_ns,
            self_ns,
        })
        .collect();
    operations.sort_by_key(|o| std::cmp::Reverse(o.self_ns));
    Breakdown { requests, aggregate: rows(all), operations }
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

fn rows(map: BTreeMap<Key<'_>, [u64; 3]>) -> Vec<BreakdownRow> {
    let mut rows: Vec<BreakdownRow> = map
        .into_iter()
        .map(|((client, serving, daemon, operation), [count, total_ns, self_ns])| BreakdownRow {
            client_node: client.to_owned(),
            serving_node: serving.to_owned(),
            daemon: daemon.to_owned(),
            operation: operation.to_owned(),
            count,
            total_ns,
            self_ns,
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.self_ns));
    rows
}
