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
    let mut builder = DiffBuilder::default();
    a.trees.iter().for_each(|tree| builder.add_a(a.data, tree));
    b.trees.iter().for_each(|tree| builder.add_b(b.data, tree));
    builder.finish()
}

/// A [`diff`] built a request at a time: from two datasets in memory, or from traces as a
/// store streams them. The result does not depend on the order requests are added in.
#[derive(Debug, Default)]
pub struct DiffBuilder {
    /// Per (daemon, operation): side A's span count and self time, then side B's.
    sums: BTreeMap<(String, String), [u64; 4]>,
    sides: [SideSums; 2],
}

/// A side's requests so far.
#[derive(Debug, Default)]
struct SideSums {
    traces: usize,
    spans: u64,
    latency_ns: u128,
}

impl DiffBuilder {
    /// Adds `tree`, a request of `data`, to side A.
    pub fn add_a(&mut self, data: &Dataset, tree: &RequestTree) {
        self.add(0, data, tree);
    }

    /// Adds `tree`, a request of `data`, to side B.
    pub fn add_b(&mut self, data: &Dataset, tree: &RequestTree) {
        self.add(1, data, tree);
    }

    fn add(&mut self, side: usize, data: &Dataset, tree: &RequestTree) {
        let sums = &mut self.sides[side];
        sums.traces += 1;
        sums.latency_ns += u128::from(tree.duration_ns());
        for (s, own) in tree.spans.iter().zip(self_times_in(data, tree)) {
            sums.spans += 1;
            let span = &data.spans[s.span];
            let v = self.sums.entry((span.daemon.clone(), span.name.clone())).or_default();
            v[2 * side] += 1;
            v[2 * side + 1] = v[2 * side + 1].saturating_add(own);
        }
    }

    /// The comparison of the two sides, integer sums divided once by each side's requests.
    pub fn finish(self) -> TraceDiff {
        let [sa, sb] = self.sides.map(|s| SideSummary {
            traces: s.traces,
            spans: s.spans,
            mean_latency_ns: if s.traces == 0 { 0.0 } else { s.latency_ns as f64 / s.traces as f64 },
        });
        let mean = |sum: u64, n: usize| if n == 0 { 0.0 } else { sum as f64 / n as f64 };
        let mut rows: Vec<DiffRow> = self
            .sums
            .into_iter()
            .map(|((daemon, operation), v)| DiffRow {
                daemon,
                operation,
                count_a: mean(v[0], sa.traces),
                self_ns_a: mean(v[1], sa.traces),
                count_b: mean(v[2], sb.traces),
                self_ns_b: mean(v[3], sb.traces),
            })
            .collect();
        rows.sort_by(|x, y| {
            let key = |r: &DiffRow| (r.self_ns_delta().abs(), r.count_delta().abs());
            let (kx, ky) = (key(x), key(y));
            ky.0.total_cmp(&kx.0).then(ky.1.total_cmp(&kx.1))
        });
        TraceDiff { a: sa, b: sb, rows }
    }
}
