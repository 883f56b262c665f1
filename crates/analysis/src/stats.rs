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

use std::collections::{BTreeMap, HashMap};
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
    match stats.finish() {
        Finished::Done(statistics) => statistics,
        Finished::Pending(_) => unreachable!("a builder made by `new` holds every duration"),
    }
}

/// Builds [`TraceStatistics`] one trace at a time, from traces that need not share a dataset:
/// how the views over the Parquet store ([`crate::engine`]) add each trace as they stream it.
///
/// The exact percentiles need every duration. The builder holds them (8 bytes a span, with at
/// most an eighth more room) up to a number of durations ([`holding`](Self::holding)); past it,
/// it counts them in a histogram instead (a bucket per 1/1,024 of a power of two, exact below
/// 2,048 ns), and [`finish`](Self::finish) asks for a second pass over the same spans
/// ([`PendingStatistics`]) that keeps only the durations in each percentile's bucket, a count
/// per distinct value. Its memory then grows with the groups and the distinct durations in those
/// buckets, not with the spans.
#[derive(Debug)]
pub struct StatisticsBuilder {
    by: StatsGroupBy,
    groups: BTreeMap<(Option<String>, Option<String>), GroupTimes>,
    traces: usize,
    spans: u64,
    trace_duration_ns: u64,
    /// Durations held in the groups.
    held: usize,
    /// The most durations held before the groups count them in histograms.
    most_held: usize,
    /// Whether the groups count their durations in histograms.
    counted: bool,
}

/// What [`StatisticsBuilder::finish`] gives: the statistics, or what the second pass needs.
#[derive(Debug)]
pub enum Finished {
    /// Every duration was held: the statistics.
    Done(TraceStatistics),
    /// The durations were counted: offer them again to [`PendingStatistics`].
    Pending(PendingStatistics),
}

impl StatisticsBuilder {
    /// No traces yet, grouping by `by`; holds every duration.
    pub fn new(by: StatsGroupBy) -> Self {
        StatisticsBuilder::holding(by, usize::MAX)
    }

    /// No traces yet, grouping by `by`; holds up to `most` durations, then counts them (and
    /// [`finish`](Self::finish) asks for a second pass).
    pub fn holding(by: StatsGroupBy, most: usize) -> Self {
        StatisticsBuilder {
            by,
            groups: BTreeMap::new(),
            traces: 0,
            spans: 0,
            trace_duration_ns: 0,
            held: 0,
            most_held: most,
            counted: false,
        }
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
            if !self.counted {
                self.held += times.durations.len();
            }
            let key = (key.service.map(str::to_owned), key.operation.map(str::to_owned));
            match self.groups.get_mut(&key) {
                Some(group) => group.merge(times, self.counted),
                None => {
                    let mut times = times;
                    if self.counted {
                        times.count_durations();
                    }
                    self.groups.insert(key, times);
                }
            }
        }
        if !self.counted && self.held > self.most_held {
            self.counted = true;
            self.held = 0;
            self.groups.values_mut().for_each(GroupTimes::count_durations);
        }
    }

    /// The statistics of every trace added, or, when the durations were counted, what a second
    /// pass over the same spans needs for the percentiles.
    pub fn finish(self) -> Finished {
        if !self.counted {
            return Finished::Done(self.statistics(|_, times| times.held_percentiles()));
        }
        let mut pending = PendingStatistics { builder: self, wanted: HashMap::new(), strangers: 0 };
        pending.clear();
        Finished::Pending(pending)
    }

    /// The rows, with each group's percentiles from `percentiles`.
    fn statistics(
        self,
        mut percentiles: impl FnMut(GroupKey<'_>, &mut GroupTimes) -> [u64; 3],
    ) -> TraceStatistics {
        let trace_duration_ns = self.trace_duration_ns;
        let rows = self
            .groups
            .into_iter()
            .map(|((service, operation), mut times)| {
                let key = GroupKey { service: service.as_deref(), operation: operation.as_deref() };
                let p = percentiles(key, &mut times);
                times.row(key, trace_duration_ns, p)
            })
            .collect();
        TraceStatistics { group_by: self.by, traces: self.traces, spans: self.spans, trace_duration_ns, rows }
    }
}

/// The statistics of spans whose durations were counted, waiting for a second pass over the
/// same spans ([`offer`](Self::offer) or [`offer_tree`](Self::offer_tree) for each) to find
/// the exact percentiles.
#[derive(Debug)]
pub struct PendingStatistics {
    builder: StatisticsBuilder,
    /// By service, then operation; the name not grouped by is empty.
    wanted: HashMap<String, HashMap<String, Wanted>>,
    /// Spans of groups the first pass did not meet.
    strangers: u64,
}

/// A group's percentiles as the second pass finds them.
#[derive(Debug)]
struct Wanted {
    /// Per percentile: its bucket and its rank among the bucket's durations (from 1).
    targets: [(u32, u64); 3],
    /// Each target bucket: how many durations the first pass counted in it, and those the
    /// second met there, by value (so that many equal durations take one entry).
    met: Vec<(u32, u64, BTreeMap<u64, u64>)>,
    /// What the second pass met: spans and their summed durations, to check that it read the
    /// same spans as the first.
    count: u64,
    total: u64,
}

impl Wanted {
    fn of(times: &GroupTimes) -> Self {
        let targets = PERCENTILES.map(|p| times.histogram_rank(nearest_rank_index(times.count as usize, p)));
        // In order of bucket: the percentiles' buckets never go down.
        let mut met: Vec<(u32, u64, BTreeMap<u64, u64>)> = targets
            .iter()
            .map(|&(b, _)| (b, times.histogram.get(&b).copied().unwrap_or(0), BTreeMap::new()))
            .collect();
        met.dedup_by_key(|(b, _, _)| *b);
        Wanted { targets, met, count: 0, total: 0 }
    }

    /// Whether the second pass met, in each target bucket, as many durations as the first
    /// counted there.
    fn met_all(&self) -> bool {
        self.met.iter().all(|(_, counted, values)| values.values().sum::<u64>() == *counted)
    }

    /// The `rank`-th shortest duration (from 1) of `bucket`, among those met.
    fn nth(&self, bucket: u32, rank: u64) -> u64 {
        let Some((_, _, values)) = self.met.iter().find(|(b, _, _)| *b == bucket) else { return 0 };
        ranked(values, rank).map_or(0, |(value, _)| value)
    }

    fn offer(&mut self, duration_ns: u64) {
        self.count += 1;
        self.total = self.total.saturating_add(duration_ns);
        let b = bucket_of(duration_ns);
        if let Some((_, _, values)) = self.met.iter_mut().find(|(m, _, _)| *m == b) {
            *values.entry(duration_ns).or_default() += 1;
        }
    }
}

impl PendingStatistics {
    /// Offers a span of the first pass: its service (daemon), operation (name) and duration.
    pub fn offer(&mut self, service: &str, operation: &str, duration_ns: u64) {
        let key = GroupKey::of_names(self.builder.by, service, operation);
        let (service, operation) = (key.service.unwrap_or_default(), key.operation.unwrap_or_default());
        match self.wanted.get_mut(service).and_then(|w| w.get_mut(operation)) {
            Some(wanted) => wanted.offer(duration_ns),
            // A group the first pass did not meet: the passes read different spans.
            None => self.strangers += 1,
        }
    }

    /// Offers every span of the trace `tree` of `data`, as [`StatisticsBuilder::add`] read it.
    pub fn offer_tree(&mut self, data: &Dataset, tree: &RequestTree) {
        for s in &tree.spans {
            let span = &data.spans[s.span];
            self.offer(&span.daemon, &span.name, s.duration_ns());
        }
    }

    /// Whether the second pass met the same spans as the first, group by group (their count and
    /// summed durations). When it did not, the percentiles are not known: offer the spans again
    /// after [`clear`](Self::clear).
    pub fn agrees(&self) -> bool {
        self.strangers == 0
            && self.builder.groups.iter().all(|(key, times)| {
                self.wanted_of(key)
                    .is_some_and(|w| (w.count, w.total) == (times.count, times.total) && w.met_all())
            })
    }

    /// Forgets what the second pass met, for another.
    pub fn clear(&mut self) {
        self.strangers = 0;
        self.wanted.clear();
        for ((service, operation), times) in &self.builder.groups {
            let (service, operation) =
                (service.clone().unwrap_or_default(), operation.clone().unwrap_or_default());
            self.wanted.entry(service).or_default().insert(operation, Wanted::of(times));
        }
    }

    fn wanted_of(&self, (service, operation): &(Option<String>, Option<String>)) -> Option<&Wanted> {
        self.wanted.get(service.as_deref().unwrap_or_default())?.get(operation.as_deref().unwrap_or_default())
    }

    /// The statistics, with the percentiles the second pass found; `None` when it did not meet
    /// the first pass's spans ([`agrees`](Self::agrees)).
    pub fn finish(self) -> Option<TraceStatistics> {
        if !self.agrees() {
            return None;
        }
        let wanted = self.wanted;
        Some(self.builder.statistics(|key, _| {
            let (service, operation) = (key.service.unwrap_or_default(), key.operation.unwrap_or_default());
            // Every group is there: the passes agree.
            let Some(w) = wanted.get(service).and_then(|w| w.get(operation)) else { return [0; 3] };
            w.targets.map(|(bucket, rank)| w.nth(bucket, rank))
        }))
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
        GroupKey::of_names(by, &span.daemon, &span.name)
    }

    fn of_names(by: StatsGroupBy, daemon: &'a str, name: &'a str) -> Self {
        let (service, operation) = (Some(daemon), Some(name));
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
    /// Every duration, while the builder holds them.
    durations: Vec<u64>,
    /// Durations by bucket ([`bucket_of`]), once the builder counts them.
    histogram: BTreeMap<u32, u64>,
    count: u64,
    total: u64,
    min: u64,
    max: u64,
    self_total: u64,
    self_min: u64,
    self_max: u64,
}

/// The percentiles of [`StatsRow`]: p50, p90 and p99.
const PERCENTILES: [f64; 3] = [50.0, 90.0, 99.0];

impl GroupTimes {
    fn new() -> Self {
        GroupTimes {
            durations: Vec::new(),
            histogram: BTreeMap::new(),
            count: 0,
            total: 0,
            min: u64::MAX,
            max: 0,
            self_total: 0,
            self_min: u64::MAX,
            self_max: 0,
        }
    }

    /// Adds a span of `duration_ns` with `self_ns` of self time.
    fn add(&mut self, duration_ns: u64, self_ns: u64) {
        grow(&mut self.durations, 1);
        self.durations.push(duration_ns);
        self.count += 1;
        self.total = self.total.saturating_add(duration_ns);
        self.min = self.min.min(duration_ns);
        self.max = self.max.max(duration_ns);
        self.self_total = self.self_total.saturating_add(self_ns);
        self.self_min = self.self_min.min(self_ns);
        self.self_max = self.self_max.max(self_ns);
    }

    /// Adds the spans of `other`, holding their durations or, when `counted`, counting them.
    fn merge(&mut self, other: GroupTimes, counted: bool) {
        if counted {
            other.durations.iter().for_each(|&d| self.count_duration(d));
        } else {
            grow(&mut self.durations, other.durations.len());
            self.durations.extend(other.durations);
        }
        self.count += other.count;
        self.total = self.total.saturating_add(other.total);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.self_total = self.self_total.saturating_add(other.self_total);
        self.self_min = self.self_min.min(other.self_min);
        self.self_max = self.self_max.max(other.self_max);
    }

    /// Counts the held durations in the histogram and lets them go.
    fn count_durations(&mut self) {
        for d in std::mem::take(&mut self.durations) {
            self.count_duration(d);
        }
    }

    /// Counts a duration in its histogram bucket.
    fn count_duration(&mut self, duration_ns: u64) {
        *self.histogram.entry(bucket_of(duration_ns)).or_default() += 1;
    }

    /// The percentiles of the held durations.
    fn held_percentiles(&mut self) -> [u64; 3] {
        self.durations.sort_unstable();
        PERCENTILES.map(|p| nearest_rank(&self.durations, p))
    }

    /// The bucket holding the `rank`-th shortest counted duration (from 1), and its rank
    /// within the bucket.
    fn histogram_rank(&self, rank: u64) -> (u32, u64) {
        ranked(&self.histogram, rank).unwrap_or((u32::MAX, 0))
    }

    /// The group's row, with `percentiles` (p50, p90, p99); its percentage is of
    /// `trace_duration_ns`.
    fn row(self, key: GroupKey<'_>, trace_duration_ns: u64, percentiles: [u64; 3]) -> StatsRow {
        let n = self.count as f64;
        let [p50_ns, p90_ns, p99_ns] = percentiles;
        StatsRow {
            service: key.service.map(str::to_owned),
            operation: key.operation.map(str::to_owned),
            count: self.count,
            total_ns: self.total,
            min_ns: if self.count == 0 { 0 } else { self.min },
            max_ns: self.max,
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
            p50_ns,
            p90_ns,
            p99_ns,
        }
    }
}

/// The key holding the `rank`-th smallest of the values that `counts` counts by key (rank from
/// 1), and the rank among that key's; `None` when there are fewer.
fn ranked<K: Copy>(counts: &BTreeMap<K, u64>, rank: u64) -> Option<(K, u64)> {
    let mut below = 0;
    for (&key, &n) in counts {
        if below + n >= rank {
            return Some((key, rank - below));
        }
        below += n;
    }
    None
}

/// Bits of a duration a histogram bucket keeps: durations below 2^11 ns have a bucket each;
/// above, each power of two has 1,024 buckets.
const BUCKET_BITS: u32 = 11;

/// The histogram bucket of `duration_ns`: buckets are in the order of their durations.
fn bucket_of(duration_ns: u64) -> u32 {
    if duration_ns < 1 << BUCKET_BITS {
        return duration_ns as u32;
    }
    let shift = 63 - duration_ns.leading_zeros() - (BUCKET_BITS - 1);
    (shift << (BUCKET_BITS - 1)) + (duration_ns >> shift) as u32
}

/// The shortest and the longest duration of `bucket`.
#[cfg(test)]
fn bucket_range(bucket: u32) -> (u64, u64) {
    if bucket < 1 << BUCKET_BITS {
        return (u64::from(bucket), u64::from(bucket));
    }
    let shift = (bucket >> (BUCKET_BITS - 1)) - 1;
    let low = u64::from(bucket - (shift << (BUCKET_BITS - 1))) << shift;
    (low, low + ((1u64 << shift) - 1))
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
    sorted[nearest_rank_index(sorted.len(), p) as usize - 1]
}

/// The rank (from 1) of the `p`-th percentile of `n` values by the nearest-rank method; 1 when
/// there are none.
fn nearest_rank_index(n: usize, p: f64) -> u64 {
    ((p / 100.0 * n as f64).ceil() as usize).clamp(1, n.max(1)) as u64
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
    fn buckets_hold_their_durations_in_order() {
        let mut last = 0;
        let mut d = 0u64;
        while d < u64::MAX / 3 {
            for x in [d, d + 1, d * 2 + 1] {
                let (low, high) = bucket_range(bucket_of(x));
                assert!(low <= x && x <= high, "{x} in bucket {} = {low}..={high}", bucket_of(x));
                assert!(high - low <= low / 1024, "{x}: a bucket within 1/1,024 of its durations");
            }
            assert!(bucket_of(d) >= last, "{d}");
            last = bucket_of(d);
            d += d / 8 + 1;
        }
        assert_eq!(bucket_range(bucket_of(u64::MAX)).1, u64::MAX);
        assert_eq!(bucket_range(bucket_of(2047)), (2047, 2047));
    }

    /// Holding no duration at all, the builder counts them and a second pass over the same
    /// spans finds the percentiles that holding them gives; a pass over other spans is refused.
    #[test]
    fn counted_durations_give_the_held_percentiles_after_a_second_pass() {
        use crate::causality::{build_causality, CausalityOptions};
        use crate::{SpanId, TraceId};
        let mut data = Dataset::default();
        for t in 0..40u64 {
            for i in 0..25u64 {
                let start = 1_000_000 * t + i;
                // Durations over eight orders of magnitude, some equal.
                let len = (t * 7919 + i * 104_729).pow(2) % 100_000_000_000 / (1 + i % 5);
                let parent = (i > 0).then(|| SpanId::new(1).unwrap());
                let name = ["read", "write", "GET"][(i % 3) as usize];
                let trace = TraceId::new(1 + u128::from(t)).unwrap();
                let mut span =
                    Span::new(trace, SpanId::new(1 + i).unwrap(), parent, name, start, start + len);
                span.daemon = ["master", "worker"][(t % 2) as usize].into();
                data.spans.push(span);
            }
        }
        let causality = build_causality(&data, &CausalityOptions::default());
        let counted = |by| {
            let mut builder = StatisticsBuilder::holding(by, 0);
            causality.traces.iter().for_each(|tree| builder.add(&data, tree));
            match builder.finish() {
                Finished::Pending(pending) => pending,
                Finished::Done(_) => panic!("the durations were held"),
            }
        };
        for by in StatsGroupBy::ALL {
            let held = statistics_of(&data, &causality.traces, by);
            let mut pending = counted(by);
            causality.traces.iter().for_each(|tree| pending.offer_tree(&data, tree));
            assert!(pending.agrees());
            assert_eq!(pending.finish(), Some(held.clone()), "{by}");

            let mut pending = counted(by);
            causality.traces[1..].iter().for_each(|tree| pending.offer_tree(&data, tree));
            assert!(!pending.agrees(), "a trace short");
            pending.clear();
            causality.traces.iter().for_each(|tree| pending.offer_tree(&data, tree));
            pending.offer("nobody", "nothing", 5);
            assert!(!pending.agrees(), "a stranger");
            pending.clear();
            causality.traces.iter().for_each(|tree| pending.offer_tree(&data, tree));
            assert_eq!(pending.finish(), Some(held), "{by}");
        }
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
