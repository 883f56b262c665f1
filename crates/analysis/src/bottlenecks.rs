//! Bottlenecks: which operations hold the most critical-path time across many requests.
//!
//! For every request considered — all of them, or only the slowest N % — the
//! [critical path](mod@crate::critical_path) says which spans the request waited on and for how
//! long. Summing those sections per (node, daemon, operation) across requests ranks the places
//! where latency is spent: a slow disk on one node shows up as that node's read operation at
//! the top, even when it is a small fraction of all the spans recorded.
//!
//! A group's `share` is its critical-path time divided by the summed critical-path time of the
//! requests considered; for a request with a single root that sum is the root span's duration,
//! the request's latency. The location is the `file:line` most of the group's spans on the path
//! carry.

use std::collections::{BTreeMap, HashMap};

use crate::causality::Causality;
use crate::critical_path::critical_path;
use crate::model::Dataset;

/// One (node, daemon, operation) and the critical-path time it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Bottleneck {
    /// The machine.
    pub node: String,
    /// The process role.
    pub daemon: String,
    /// The operation (span name).
    pub operation: String,
    /// The code location (`file:line`) of the group's spans, the most frequent one.
    pub location: Option<String>,
    /// Critical-path time summed over the requests considered.
    pub critical_path_ns: u64,
    /// `critical_path_ns` over the summed critical-path time of the requests considered.
    pub share: f64,
    /// Requests in which the group is on the critical path.
    pub requests: u64,
    /// When the group's spans are I/O calls (`docs/io-records.md`): the file or peer
    /// (`address:port`) most of its time on the path went to.
    pub io_target: Option<String>,
}

/// The bottleneck ranking of a set of requests.
#[derive(Clone, Debug, PartialEq)]
pub struct Bottlenecks {
    /// Requests considered.
    pub requests: usize,
    /// Requests in the input.
    pub requests_total: usize,
    /// Summed critical-path time of the requests considered.
    pub critical_path_ns: u64,
    /// Groups by critical-path time, largest first (ties by node, daemon, operation).
    pub ranking: Vec<Bottleneck>,
}

/// The file or peer of an I/O call's span, as the I/O views name it
/// ([`target_name`](crate::io::views::target_name)).
fn io_target(
    span: &crate::model::Span,
    services: &std::collections::HashSet<crate::io::Endpoint>,
) -> Option<String> {
    let call = crate::io::IoCall {
        span: 0,
        process: 0,
        node: String::new(),
        daemon: String::new(),
        trace_id: span.trace_id,
        in_span: false,
        record: crate::io::calls::span_to_record(span, None)?,
    };
    crate::io::views::target_name(&call, services)
}

/// Ranks (node, daemon, operation) by critical-path time over all requests, or over the slowest
/// `slowest_percent` % of them (see [`Causality::slowest`]).
pub fn bottlenecks(data: &Dataset, causality: &Causality, slowest_percent: Option<f64>) -> Bottlenecks {
    let considered: Vec<usize> = match slowest_percent {
        Some(p) => causality.slowest(p),
        None => (0..causality.traces.len()).collect(),
    };
    #[derive(Default)]
    struct Acc<'d> {
        ns: u64,
        requests: u64,
        last_request: Option<usize>,
        locations: HashMap<&'d str, u64>,
        io_targets: HashMap<String, u64>,
    }
    let mut groups: BTreeMap<(&str, &str, &str), Acc> = BTreeMap::new();
    let services = crate::io::views::services(&crate::io::io_calls(data));
    let mut total = 0u64;
    for &t in &considered {
        let tree = &causality.traces[t];
        for section in critical_path(data, tree) {
            let span = &data.spans[section.span];
            let acc = groups.entry((&span.node, &span.daemon, &span.name)).or_default();
            acc.ns += section.duration_ns();
            total += section.duration_ns();
            if acc.last_request != Some(t) {
                acc.last_request = Some(t);
                acc.requests += 1;
            }
            if let Some(location) = &span.location {
                *acc.locations.entry(location).or_default() += 1;
            }
            if let Some(target) = io_target(span, &services) {
                *acc.io_targets.entry(target).or_default() += section.duration_ns();
            }
        }
    }
    let mut ranking: Vec<Bottleneck> = groups
        .into_iter()
        .map(|((node, daemon, operation), acc)| Bottleneck {
            node: node.to_owned(),
            daemon: daemon.to_owned(),
            operation: operation.to_owned(),
            location: acc
                .locations
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
                .map(|(l, _)| l.to_owned()),
            critical_path_ns: acc.ns,
            share: if total == 0 { 0.0 } else { acc.ns as f64 / total as f64 },
            requests: acc.requests,
            io_target: acc
                .io_targets
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                .map(|(t, _)| t),
        })
        .collect();
    // Stable: equal times keep the (node, daemon, operation) order.
    ranking.sort_by_key(|b| std::cmp::Reverse(b.critical_path_ns));
    Bottlenecks {
        requests: considered.len(),
        requests_total: causality.traces.len(),
        critical_path_ns: total,
        ranking,
    }
}
