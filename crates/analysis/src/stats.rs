//! Trace statistics: Jaeger UI's "Trace Statistics" table, over one trace or many.
//!
//! Spans are grouped by service (daemon), by operation name alone, or by service then operation.
//! Per group: the count of spans; total, average, minimum and maximum duration; the same of
//! *self time* — a span's duration minus the union of its children's intervals, each clipped
//! to the span (children running in parallel are not subtracted twice; time a child spends
//! outside its parent is not subtracted at all); and the self total as a percentage of the
//! trace's duration (latest end minus earliest start). This is the rule of Jaeger UI's
//! `TraceStatistics` view, reproduced exactly on the reference trace in
//! `tests/oracles/jaeger-trace-stats/`.
//!
//! Over many traces the same numbers are summed per group, the percentage is taken of the summed
//! trace durations, and the 50th, 90th and 99th percentiles of the durations are added
//! (nearest rank).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::causality::{Causality, RequestTree};
use crate::model::{Dataset, Span};

/// What [`trace_statistics`] groups spans by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StatsGroupBy {
    /// The service: the span's daemon.
    Service,
    /// The operation name alone, whatever the service.
    Operation,
    /// The service, then the operation.
    #[default]
    ServiceOperation,
}

impl StatsGroupBy {
    /// Every grouping.
    pub const ALL: [StatsGroupBy; 3] =
        [StatsGroupBy::Service, StatsGroupBy::Operation, StatsGroupBy::ServiceOperation];

    /// `service`, `operation` or `service-operation`.
    pub fn as_str(self) -> &'static str {
        match self {
            StatsGroupBy::Service => "service",
            StatsGroupBy::Operation => "operation",
            StatsGroupBy::ServiceOperation => "service-operation",
        }
    }
}

impl fmt::Display for StatsGroupBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A grouping name that is not `service`, `operation` or `service-operation`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown grouping {value:?}: expected one of service, operation, service-operation")]
pub struct ParseStatsGroupByError {
    /// The name given.
    pub value: String,
}

impl FromStr for StatsGroupBy {
    type Err = ParseStatsGroupByError;

    /// Parses `service`, `operation` or `service-operation`, ignoring ASCII case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StatsGroupBy::ALL
            .into_iter()
            .find(|g| g.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseStatsGroupByError { value: s.to_owned() })
    }
}

/// The statistics of one group of spans.
#[derive(Clone, Debug, PartialEq)]
pub struct StatsRow {
    /// The service (daemon); `None` when grouping by operation alone.
    pub service: Option<String>,
    /// The operation (span name); `None` when grouping by service.
    pub operation: Option<String>,
    /// Spans in the group.
    pub count: u64,
    /// Sum of durations.
    pub total_ns: u64,
    /// Shortest duration.
    pub min_ns: u64,
    /// Longest duration.
    pub max_ns: u64,
    /// Mean duration.
    pub avg_ns: f64,
    /// Sum of self times.
    pub self_total_ns: u64,
    /// Shortest self time.
    pub self_min_ns: u64,
    /// Longest self time.
    pub self_max_ns: u64,
    /// Mean self time.
    pub self_avg_ns: f64,
    /// Self total as a percentage of the traces' summed durations.
    pub percent: f64,
    /// Median duration (nearest rank).
    pub p50_ns: u64,
    /// 90th-percentile duration.
    pub p90_ns: u64,
    /// 99th-percentile duration.
    pub p99_ns: u64,
}

/// Statistics of a set of traces.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceStatistics {
    /// The grouping.
    pub group_by: StatsGroupBy,
    /// Traces included.
    pub traces: usize,
    /// Spans included.
    pub spans: u64,
    /// Sum of the traces' durations.
    pub trace_duration_ns: u64,
    /// One row per group, by service then operation.
    pub rows: Vec<StatsRow>,
}

/// Each span's self time in `tree`, in [`RequestTree::spans`] order: its duration minus the
/// union of its children's intervals clipped to it.
pub fn self_times(tree: &RequestTree) -> Vec<u64> {
    tree.spans
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (start, end) = (s.start_unix_ns, s.end_unix_ns);
            (end - start).saturating_sub(tree.children_covered_ns(i, start, end))
        })
        .collect()
}

/// Each span's self time as [`self_times`] gives it, except for a network wait
/// ([`is_network_wait`](crate::io::is_network_wait): an I/O call receiving, connecting or
/// accepting on a socket) whose parent has children in other processes: the time those children
/// cover within it is theirs — the remote work it waited for — not its own. The same as
/// [`self_times`] for traces without I/O spans (every Jaeger trace).
pub fn self_times_in(data: &Dataset, tree: &RequestTree) -> Vec<u64> {
    let mut own = self_times(tree);
    let mut remote = RemoteCover::default();
    for (i, s) in tree.spans.iter().enumerate() {
        let covered = remote.covered(data, tree, i, s.start_unix_ns, s.end_unix_ns);
        own[i] = own[i].saturating_sub(covered);
    }
    own
}

/// What the remote siblings of network waits cover, per parent, made when first needed.
#[derive(Default)]
pub(crate) struct RemoteCover {
    /// Per parent, the merged intervals of its children in other processes.
    by_parent: std::collections::HashMap<usize, Vec<(u64, u64)>>,
}

impl RemoteCover {
    /// The time within `[start, end)` that children of span `i`'s parent in other processes
    /// cover, when span `i` is a network wait; 0 otherwise.
    pub(crate) fn covered(
        &mut self,
        data: &Dataset,
        tree: &RequestTree,
        i: usize,
        start: u64,
        end: u64,
    ) -> u64 {
        let Some(p) = tree.spans[i].parent else { return 0 };
        if !crate::io::is_network_wait(&data.spans[tree.spans[i].span]) {
            return 0;
        }
        let intervals = self.by_parent.entry(p).or_insert_with(|| {
            let parent = &data.spans[tree.spans[p].span];
            let mut v: Vec<(u64, u64)> = tree
                .children(p)
                .iter()
                .map(|&c| &tree.spans[c])
                .filter(|c| {
                    let child = &data.spans[c.span];
                    (&child.node, &child.daemon) != (&parent.node, &parent.daemon)
                })
                .map(|c| (c.start_unix_ns, c.end_unix_ns))
                .collect();
            v.sort_unstable();
            let mut merged: Vec<(u64, u64)> = Vec::with_capacity(v.len());
            for (a, b) in v {
                match merged.last_mut() {
                    Some(last) if a <= last.1 => last.1 = last.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            merged
        });
        let first = intervals.partition_point(|&(_, b)| b <= start);
        intervals[first..]
            .iter()
            .take_while(|&&(a, _)| a < end)
            .map(|&(a, b)| b.min(end).saturating_sub(a.max(start)))
            .sum()
    }
}

/// The statistics of every trace in `causality`, grouped by `by`.
pub fn trace_statistics(data: &Dataset, causality: &Causality, by: StatsGroupBy) -> TraceStatistics {
    statistics_of(data, causality.traces.iter(), by)
}

/// The statistics of the given trees, grouped by `by`.
pub fn statistics_of<'t>(
    data: &Dataset,
    trees: impl IntoIterator<Item = &'t RequestTree>,
    by: StatsGroupBy,
) -> TraceStatistics {
    let mut stats = StatisticsBuilder::new(by);
    for tree in trees {
        stats.add(data, tree);
    }
    stats.finish()
}

/// Builds [`TraceStatistics`] one trace at a time, from traces that need not share a dataset:
/// how the views over the Parquet store ([`crate::engine`]) add each trace as they stream it.
/// Its memory grows with the groups and the spans' durations (8 bytes a span, for the exact
/// percentiles, with at most an eighth more room), not with the spans.
#[derive(Debug)]
pub struct StatisticsBuilder {
    by: StatsGroupBy,
    groups: BTreeMap<(Option<String>, Option<String>), GroupTimes>,
    traces: usize,
    spans: u64,
    trace_duration_ns: u64,
}

impl StatisticsBuilder {
    /// No traces yet, grouping by `by`.
    pub fn new(by: StatsGroupBy) -> Self {
        StatisticsBuilder { by, groups: BTreeMap::new(), traces: 0, spans: 0, trace_duration_ns: 0 }
    }

    /// Adds the trace `tree` of `data`.
    pub fn add(&mut self, data: &Dataset, tree: &RequestTree) {
        self.traces += 1;
        self.trace_duration_ns = self.trace_duration_ns.saturating_add(tree.duration_ns());
        let own = self_times_in(data, tree);
        // Grouped under borrowed names first: a name is copied once per trace, not per span.
        let mut groups: BTreeMap<GroupKey<'_>, GroupTimes> = BTreeMap::new();
        for (i, s) in tree.spans.iter().enumerate() {
            self.spans += 1;
            let key = GroupKey::of(self.by, &data.spans[s.span]);
            groups.entry(key).or_insert_with(GroupTimes::new).add(s.duration_ns(), own[i]);
        }
        for (key, times) in groups {
            let key = (key.service.map(str::to_owned), key.operation.map(str::to_owned));
            match self.groups.get_mut(&key) {
                Some(group) => group.merge(times),
                None => {
                    self.groups.insert(key, times);
                }
            }
        }
    }

    /// The statistics of every trace added.
    pub fn finish(self) -> TraceStatistics {
        let trace_duration_ns = self.trace_duration_ns;
        let rows = self
            .groups
            .into_iter()
            .map(|((service, operation), times)| {
                let key = GroupKey { service: service.as_deref(), operation: operation.as_deref() };
                times.row(key, trace_duration_ns)
            })
            .collect();
        TraceStatistics { group_by: self.by, traces: self.traces, spans: self.spans, trace_duration_ns, rows }
    }
}

/// A group of spans: its service and operation, each `None` when not grouped by.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey<'a> {
    service: Option<&'a str>,
    operation: Option<&'a str>,
}

impl<'a> GroupKey<'a> {
    fn of(by: StatsGroupBy, span: &'a Span) -> Self {
        let (service, operation) = (Some(span.daemon.as_str()), Some(span.name.as_str()));
        match by {
            StatsGroupBy::Service => GroupKey { service, operation: None },
            StatsGroupBy::Operation => GroupKey { service: None, operation },
            StatsGroupBy::ServiceOperation => GroupKey { service, operation },
        }
    }
}

/// The durations and self times of a group's spans, as they are added.
#[derive(Debug)]
struct GroupTimes {
    durations: Vec<u64>,
    total: u64,
    self_total: u64,
    self_min: u64,
    self_max: u64,
}

impl GroupTimes {
    fn new() -> Self {
        GroupTimes { durations: Vec::new(), total: 0, self_total: 0, self_min: u64::MAX, self_max: 0 }
    }

    /// Adds a span of `duration_ns` with `self_ns` of self time.
    fn add(&mut self, duration_ns: u64, self_ns: u64) {
        grow(&mut self.durations, 1);
        self.durations.push(duration_ns);
        self.total = self.total.saturating_add(duration_ns);
        self.self_total = self.self_total.saturating_add(self_ns);
        self.self_min = self.self_min.min(self_ns);
        self.self_max = self.self_max.max(self_ns);
    }

    /// Adds the spans of `other`.
    fn merge(&mut self, other: GroupTimes) {
        grow(&mut self.durations, other.durations.len());
        self.durations.extend(other.durations);
        self.total = self.total.saturating_add(other.total);
        self.self_total = self.self_total.saturating_add(other.self_total);
        self.self_min = self.self_min.min(other.self_min);
        self.self_max = self.self_max.max(other.self_max);
    }

    /// The group's row; its percentage is of `trace_duration_ns`.
    fn row(mut self, key: GroupKey<'_>, trace_duration_ns: u64) -> StatsRow {
        self.durations.sort_unstable();
        let count = self.durations.len() as u64;
        let n = count as f64;
        StatsRow {
            service: key.service.map(str::to_owned),
            operation: key.operation.map(str::to_owned),
            count,
            total_ns: self.total,
            min_ns: self.durations.first().copied().unwrap_or(0),
            max_ns: self.durations.last().copied().unwrap_or(0),
            avg_ns: self.total as f64 / n,
            self_total_ns: self.self_total,
            self_min_ns: self.self_min,
            self_max_ns: self.self_max,
            self_avg_ns: self.self_total as f64 / n,
            percent: if trace_duration_ns == 0 {
                0.0
            } else {
                self.self_total as f64 * 100.0 / trace_duration_ns as f64
            },
            p50_ns: nearest_rank(&self.durations, 50.0),
            p90_ns: nearest_rank(&self.durations, 90.0),
            p99_ns: nearest_rank(&self.durations, 99.0),
        }
    }
}

/// Makes room in `v` for `more` values, growing it by an eighth at a time (16 values at least)
/// rather than doubling it: over a store of 50 million spans the durations are most of the
/// memory, and doubling would leave up to as much again unused.
fn grow(v: &mut Vec<u64>, more: usize) {
    let needed = v.len().saturating_add(more);
    if needed > v.capacity() {
        let step = (v.len() / 8).max(16);
        v.reserve_exact(needed.max(v.len().saturating_add(step)) - v.len());
    }
}

/// The `p`-th percentile of sorted `values` by the nearest-rank method (0 when empty).
pub fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_parse_and_errors_name_the_value() {
        assert_eq!("Service-Operation".parse(), Ok(StatsGroupBy::ServiceOperation));
        assert_eq!("operation".parse(), Ok(StatsGroupBy::Operation));
        let e = "method".parse::<StatsGroupBy>().unwrap_err();
        assert!(e.to_string().contains("\"method\""));
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 50.0), 50);
        assert_eq!(nearest_rank(&v, 90.0), 90);
        assert_eq!(nearest_rank(&v, 99.0), 99);
        assert_eq!(nearest_rank(&[7], 99.0), 7);
        assert_eq!(nearest_rank(&[], 50.0), 0);
        assert_eq!(nearest_rank(&[1, 2, 3], 0.0), 1);
    }
}
