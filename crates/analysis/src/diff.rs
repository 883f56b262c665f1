//! Trace comparison: how two traces, or two groups of traces, differ per (daemon, operation).
//!
//! Each side is a set of request trees, possibly from different datasets — two recordings, two
//! traces, or the slowest requests against the rest (see [`Causality::slowest`]). Per
//! (daemon, operation), each side gets the number of spans and their self time
//! ([`self_times_in`]) *per request* — the mean over the side's requests, which for a side of one
//! trace is simply its totals — so groups of different sizes compare. Rows are ordered by the
//! size of the self-time difference, then of the count difference: the operations that explain
//! why B is slower (or faster) than A come first.
//!
//! [`Causality::slowest`]: crate::causality::Causality::slowest

use std::collections::BTreeMap;

use crate::causality::RequestTree;
use crate::model::Dataset;
use crate::stats::self_times_in;

/// One side of a comparison: request trees and the dataset their spans live in.
#[derive(Clone, Debug)]
pub struct DiffSide<'a> {
    /// The spans.
    pub data: &'a Dataset,
    /// The requests on this side.
    pub trees: Vec<&'a RequestTree>,
}

/// One side's summary.
#[derive(Clone, Debug, PartialEq)]
pub struct SideSummary {
    /// Requests on the side.
    pub traces: usize,
    /// Spans on the side.
    pub spans: u64,
    /// Mean request latency.
    pub mean_latency_ns: f64,
}

/// One (daemon, operation) on both sides, as means per request.
#[derive(Clone, Debug, PartialEq)]
pub struct DiffRow {
    /// The daemon.
    pub daemon: String,
    /// The operation (span name).
    pub operation: String,
    /// Spans per request on side A.
    pub count_a: f64,
    /// Spans per request on side B.
    pub count_b: f64,
    /// Self time per request on side A.
    pub self_ns_a: f64,
    /// Self time per request on side B.
    pub self_ns_b: f64,
}

impl DiffRow {
    /// `count_b − count_a`.
    pub fn count_delta(&self) -> f64 {
        self.count_b - self.count_a
    }

    /// `self_ns_b − self_ns_a`.
    pub fn self_ns_delta(&self) -> f64 {
        self.self_ns_b - self.self_ns_a
    }
}

/// The comparison of side A with side B.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceDiff {
    /// Side A.
    pub a: SideSummary,
    /// Side B.
    pub b: SideSummary,
    /// Rows, largest self-time difference first.
    pub rows: Vec<DiffRow>,
}

/// Compares side `a` with side `b`. An empty side counts as zero everywhere.
pub fn diff(a: &DiffSide<'_>, b: &DiffSide<'_>) -> TraceDiff {
    // Integer sums per side (count, self time), divided once by the side's request count.
    let mut sums: BTreeMap<(String, String), [u64; 4]> = BTreeMap::new();
    let (sa, sb) = (accumulate(a, &mut sums, 0), accumulate(b, &mut sums, 2));
    let mean = |sum: u64, n: usize| if n == 0 { 0.0 } else { sum as f64 / n as f64 };
    let rows = sums.into_iter().map(|(key, v)| {
        (key, [mean(v[0], sa.traces), mean(v[1], sa.traces), mean(v[2], sb.traces), mean(v[3], sb.traces)])
    });
    let mut rows: Vec<DiffRow> = rows
        .into_iter()
        .map(|((daemon, operation), v)| DiffRow {
            daemon,
            operation,
            count_a: v[0],
            self_ns_a: v[1],
            count_b: v[2],
            self_ns_b: v[3],
        })
        .collect();
    rows.sort_by(|x, y| {
        let key = |r: &DiffRow| (r.self_ns_delta().abs(), r.count_delta().abs());
        let (kx, ky) = (key(x), key(y));
        ky.0.total_cmp(&kx.0).then(ky.1.total_cmp(&kx.1))
    });
    TraceDiff { a: sa, b: sb, rows }
}

fn accumulate(
    side: &DiffSide<'_>,
    sums: &mut BTreeMap<(String, String), [u64; 4]>,
    at: usize,
) -> SideSummary {
    let mut spans = 0u64;
    let mut latency = 0u128;
    for tree in &side.trees {
        latency += u128::from(tree.duration_ns());
        for (s, own) in tree.spans.iter().zip(self_times_in(side.data, tree)) {
            spans += 1;
            let span = &side.data.spans[s.span];
            let v = sums.entry((span.daemon.clone(), span.name.clone())).or_default();
            v[at] += 1;
            v[at + 1] = v[at + 1].saturating_add(own);
        }
    }
    let n = side.trees.len();
    SideSummary { traces: n, spans, mean_latency_ns: if n == 0 { 0.0 } else { latency as f64 / n as f64 } }
}
