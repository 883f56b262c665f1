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

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::causality::{Causality, RequestTree};
use crate::critical_path::critical_path;
use crate::io::{Endpoint, IoRecord};
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

/// The file or peer an I/O call's record works on, as the I/O views name it
/// ([`target_name`](crate::io::views::target_name)).
fn io_target(record: &IoRecord, services: &HashSet<Endpoint>) -> Option<String> {
    let call = crate::io::IoCall {
        span: 0,
        process: 0,
        node: String::new(),
        daemon: String::new(),
        trace_id: ringtrace_core::TraceId::new(1).expect("not zero"),
        in_span: false,
        record: record.clone(),
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
    let mut ranking = BottlenecksBuilder::default();
    ranking.add_services(&crate::io::io_calls(data));
    for &t in &considered {
        ranking.add(data, &causality.traces[t]);
    }
    ranking.finish(causality.traces.len())
}

/// What an I/O call works on: its file, its socket's local and remote ends.
type IoEnds = (Option<String>, Option<Endpoint>, Option<Endpoint>);

/// What one (node, daemon, operation) holds so far.
#[derive(Debug, Default)]
struct Acc {
    ns: u64,
    requests: u64,
    locations: HashMap<String, u64>,
    /// Time on the path by the file or socket ends of the I/O calls: named at the end, when
    /// every service is known.
    io: HashMap<IoEnds, (IoRecord, u64)>,
}

/// Builds [`Bottlenecks`] from requests added one at a time, from datasets of their own: how
/// the views over the Parquet store ([`crate::engine`]) add each trace as they stream it. Which
/// requests count is the caller's choice; the services that name a server's I/O targets come
/// from every request's calls ([`add_services`](Self::add_services)).
#[derive(Debug, Default)]
pub struct BottlenecksBuilder {
    groups: BTreeMap<(String, String, String), Acc>,
    services: HashSet<Endpoint>,
    total: u64,
    requests: usize,
}

impl BottlenecksBuilder {
    /// Adds the critical path of the request `tree` of `data`.
    pub fn add(&mut self, data: &Dataset, tree: &RequestTree) {
        self.requests += 1;
        let mut seen: HashSet<(&str, &str, &str)> = HashSet::new();
        for section in critical_path(data, tree) {
            let span = &data.spans[section.span];
            let key = (span.node.as_str(), span.daemon.as_str(), span.name.as_str());
            let acc = self.groups.entry((key.0.to_owned(), key.1.to_owned(), key.2.to_owned())).or_default();
            acc.ns += section.duration_ns();
            self.total += section.duration_ns();
            if seen.insert(key) {
                acc.requests += 1;
            }
            if let Some(location) = &span.location {
                *acc.locations.entry(location.clone()).or_default() += 1;
            }
            if let Some(record) = crate::io::calls::span_to_record(span, None) {
                let ends = (record.path.clone(), record.local.clone(), record.remote.clone());
                acc.io.entry(ends).or_insert_with(|| (record, 0)).1 += section.duration_ns();
            }
        }
    }

    /// Adds the services (accepted and connected-to endpoints) of `calls`.
    pub fn add_services(&mut self, calls: &[crate::io::IoCall]) {
        self.services.extend(crate::io::views::services(calls));
    }

    /// The ranking of every request added, `requests_total` being how many the input holds.
    pub fn finish(self, requests_total: usize) -> Bottlenecks {
        let (total, services) = (self.total, self.services);
        let mut ranking: Vec<Bottleneck> = self
            .groups
            .into_iter()
            .map(|((node, daemon, operation), acc)| {
                let mut io_targets: HashMap<String, u64> = HashMap::new();
                for (record, ns) in acc.io.into_values() {
                    if let Some(target) = io_target(&record, &services) {
                        *io_targets.entry(target).or_default() += ns;
                    }
                }
                Bottleneck {
                    node,
                    daemon,
                    operation,
                    location: acc
                        .locations
                        .into_iter()
                        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                        .map(|(l, _)| l),
                    critical_path_ns: acc.ns,
                    share: if total == 0 { 0.0 } else { acc.ns as f64 / total as f64 },
                    requests: acc.requests,
                    io_target: io_targets
                        .into_iter()
                        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                        .map(|(t, _)| t),
                }
            })
            .collect();
        // Stable: equal times keep the (node, daemon, operation) order.
        ranking.sort_by_key(|b| std::cmp::Reverse(b.critical_path_ns));
        Bottlenecks { requests: self.requests, requests_total, critical_path_ns: total, ranking }
    }
}
