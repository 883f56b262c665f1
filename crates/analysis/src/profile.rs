//! Frequency profiles: how many spans start per unit of time, per node, daemon or method.
//!
//! This is the lightweight-monitor view of a distributed system: count executions per time
//! bucket at three granularities, so a developer can zoom from the cluster (which node behaves
//! differently?) to a daemon, then to a method.
//!
//! [`frequency_profile`] counts every span. [`time_profile`] zooms with a [`SpanFilter`] (time
//! range, node, daemon, request, operation) and adds, per bucket, the span time and the self
//! time spent in it; [`Measure`] picks what a rendering shows, including rates per second.
//! [`phase`](crate::phase) finds where a group's mix of methods or its rate changes sharply.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;

use crate::filter::SpanFilter;
use crate::model::{CopyFilter, Dataset, Span};

/// The largest profile [`frequency_profile`] builds, in cells (groups × buckets): 16 Mi cells,
/// 128 MiB of counts. Beyond it, choose a larger bucket.
pub const MAX_PROFILE_CELLS: u64 = 1 << 24;

/// What a frequency profile counts spans by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupBy {
    /// The machine ([`Span::node`]).
    Node,
    /// The process role ([`Span::daemon`]).
    Daemon,
    /// The method ([`Span::qualified_method`]: target and span name, or for spans without a
    /// target — other systems' data — service and span name).
    Method,
}

impl GroupBy {
    /// Every grouping, in zoom order.
    pub const ALL: [GroupBy; 3] = [GroupBy::Node, GroupBy::Daemon, GroupBy::Method];

    /// The lowercase name: `node`, `daemon` or `method`.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupBy::Node => "node",
            GroupBy::Daemon => "daemon",
            GroupBy::Method => "method",
        }
    }

    /// The group `span` belongs to.
    pub fn key(self, span: &Span) -> String {
        match self {
            GroupBy::Node => span.node.clone(),
            GroupBy::Daemon => span.daemon.clone(),
            GroupBy::Method => span.qualified_method(),
        }
    }
}

impl fmt::Display for GroupBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A grouping name that is not `node`, `daemon` or `method`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown grouping {value:?}: expected one of node, daemon, method")]
pub struct ParseGroupByError {
    /// The name given.
    pub value: String,
}

impl FromStr for GroupBy {
    type Err = ParseGroupByError;

    /// Parses `node`, `daemon` or `method`, ignoring ASCII case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GroupBy::ALL
            .into_iter()
            .find(|g| g.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseGroupByError { value: s.to_owned() })
    }
}

/// Why a profile could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// A bucket of zero nanoseconds.
    #[error("the bucket width must be greater than zero")]
    ZeroBucket,
    /// The profile would exceed [`MAX_PROFILE_CELLS`].
    #[error(
        "a profile of {buckets} buckets × {groups} groups exceeds the limit of {limit} cells; \
         choose a larger bucket"
    )]
    TooLarge {
        /// Buckets needed to cover the spans.
        buckets: u64,
        /// Groups found.
        groups: usize,
        /// [`MAX_PROFILE_CELLS`].
        limit: u64,
    },
}

/// Span counts per time bucket for each group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrequencyProfile {
    /// What the groups are.
    pub group_by: GroupBy,
    /// Bucket width, nanoseconds.
    pub bucket_ns: u64,
    /// Start of the first bucket, Unix nanoseconds: the earliest span start floored to a
    /// multiple of `bucket_ns` (0 when there are no spans).
    pub start_unix_ns: u64,
    /// The groups, by total count descending, then key.
    pub groups: Vec<GroupSeries>,
}

impl FrequencyProfile {
    /// Buckets per group (every group has the same number).
    pub fn bucket_count(&self) -> usize {
        self.groups.first().map_or(0, |g| g.counts.len())
    }

    /// Start of bucket `i`, Unix nanoseconds.
    pub fn bucket_start_unix_ns(&self, i: usize) -> u64 {
        self.start_unix_ns.saturating_add(self.bucket_ns.saturating_mul(i as u64))
    }

    /// Spans counted over all groups.
    pub fn total(&self) -> u64 {
        self.groups.iter().map(|g| g.total).sum()
    }
}

/// One group's counts over time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSeries {
    /// The node, daemon or method.
    pub key: String,
    /// Spans started in each bucket.
    pub counts: Vec<u64>,
    /// Sum of `counts`.
    pub total: u64,
}

/// Counts the spans of `data` by the bucket of their start time, per group; a copy of a span
/// ([`Span::is_copy_of`]) counts once.
pub fn frequency_profile(
    data: &Dataset,
    by: GroupBy,
    bucket_ns: u64,
) -> Result<FrequencyProfile, ProfileError> {
    let mut counter = FrequencyCounter::new(by, bucket_ns)?;
    for span in &data.spans {
        counter.add(span);
    }
    counter.finish()
}

/// Builds a [`FrequencyProfile`] one span at a time, without keeping the spans: its memory grows
/// with the number of (group, bucket) cells that occur, plus a hash per distinct span to count
/// copies of a span once ([`CopyFilter`]) — about 40 bytes per span, not the span. Feed it from
/// [`for_each_batch`](crate::for_each_batch) to profile recordings of any size.
#[derive(Debug)]
pub struct FrequencyCounter {
    by: GroupBy,
    bucket_ns: u64,
    copies: CopyFilter,
    /// Per group, spans started per absolute bucket index (`start_unix_ns / bucket_ns`).
    cells: HashMap<String, HashMap<u64, u64>>,
    min_bucket: u64,
    max_bucket: u64,
}

impl FrequencyCounter {
    /// A counter grouping by `by` into buckets of `bucket_ns` (which must not be zero).
    pub fn new(by: GroupBy, bucket_ns: u64) -> Result<Self, ProfileError> {
        if bucket_ns == 0 {
            return Err(ProfileError::ZeroBucket);
        }
        Ok(Self {
            by,
            bucket_ns,
            copies: CopyFilter::new(),
            cells: HashMap::new(),
            min_bucket: u64::MAX,
            max_bucket: 0,
        })
    }

    /// Counts `span` in the bucket of its start, unless it is a copy of a span already added.
    pub fn add(&mut self, span: &Span) {
        if !self.copies.first_seen(span) {
            return;
        }
        self.add_cell(self.by.key(span), span.start_unix_ns / self.bucket_ns, 1);
    }

    /// Counts `n` spans of group `key` started in absolute bucket `bucket` (`start_unix_ns /
    /// bucket_ns`): what an engine that has counted them already hands over. Copies are the
    /// caller's to leave out.
    pub fn add_cell(&mut self, key: String, bucket: u64, n: u64) {
        if n == 0 {
            return;
        }
        self.min_bucket = self.min_bucket.min(bucket);
        self.max_bucket = self.max_bucket.max(bucket);
        let group = match self.cells.get_mut(&key) {
            Some(g) => g,
            None => self.cells.entry(key).or_default(),
        };
        *group.entry(bucket).or_insert(0) += n;
    }

    /// The profile of every span added: buckets aligned to the earliest start, groups by total
    /// descending then key. Fails when it would exceed [`MAX_PROFILE_CELLS`].
    pub fn finish(self) -> Result<FrequencyProfile, ProfileError> {
        let (by, bucket_ns) = (self.by, self.bucket_ns);
        if self.cells.is_empty() {
            return Ok(FrequencyProfile { group_by: by, bucket_ns, start_unix_ns: 0, groups: vec![] });
        }
        let buckets = (self.max_bucket - self.min_bucket).saturating_add(1);
        let groups = self.cells.len();
        if buckets.saturating_mul(groups as u64) > MAX_PROFILE_CELLS {
            return Err(ProfileError::TooLarge { buckets, groups, limit: MAX_PROFILE_CELLS });
        }
        let mut series: Vec<GroupSeries> = self
            .cells
            .into_iter()
            .map(|(key, cells)| {
                let mut counts = vec![0u64; buckets as usize];
                for (bucket, n) in cells {
                    counts[(bucket - self.min_bucket) as usize] = n;
                }
                GroupSeries { key, total: counts.iter().sum(), counts }
            })
            .collect();
        series.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.key.cmp(&b.key)));
        Ok(FrequencyProfile {
            group_by: by,
            bucket_ns,
            start_unix_ns: self.min_bucket * bucket_ns,
            groups: series,
        })
    }
}

/// The `n` most frequent methods ([`Span::qualified_method`]) as `(method, span count, total
/// duration ns)`, by count descending, then total duration descending, then name. A copy of a
/// span counts once.
pub fn top_methods(data: &Dataset, n: usize) -> Vec<(String, u64, u64)> {
    let mut by_method: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (_, span) in data.distinct_spans() {
        let entry = by_method.entry(span.qualified_method()).or_default();
        entry.0 += 1;
        entry.1 = entry.1.saturating_add(span.duration_ns());
    }
    let mut methods: Vec<(String, u64, u64)> =
        by_method.into_iter().map(|(m, (count, total))| (m, count, total)).collect();
    methods.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.2.cmp(&a.2)).then_with(|| a.0.cmp(&b.0)));
    methods.truncate(n);
    methods
}

/// What a zoomed profile shows per bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Measure {
    /// Spans started in the bucket.
    #[default]
    Count,
    /// Spans started per second.
    Rate,
    /// Span time inside the bucket (spans cut at the bucket's edges), nanoseconds.
    TotalTime,
    /// Self time inside the bucket: span time not covered by the span's children, nanoseconds.
    SelfTime,
}

impl Measure {
    /// Every measure.
    pub const ALL: [Measure; 4] = [Measure::Count, Measure::Rate, Measure::TotalTime, Measure::SelfTime];

    /// `count`, `rate`, `total` or `self`.
    pub fn as_str(self) -> &'static str {
        match self {
            Measure::Count => "count",
            Measure::Rate => "rate",
            Measure::TotalTime => "total",
            Measure::SelfTime => "self",
        }
    }

    /// What a cell holds, for headings: `spans`, `spans/s`, `ns of span time`, `ns of self time`.
    pub fn unit(self) -> &'static str {
        match self {
            Measure::Count => "spans started",
            Measure::Rate => "spans started per second",
            Measure::TotalTime => "span time, ns",
            Measure::SelfTime => "self time, ns",
        }
    }
}

impl fmt::Display for Measure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A measure name that is not `count`, `rate`, `total` or `self`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown measure {value:?}: expected one of count, rate, total, self")]
pub struct ParseMeasureError {
    /// The name given.
    pub value: String,
}

impl FromStr for Measure {
    type Err = ParseMeasureError;

    /// Parses `count`, `rate`, `total` or `self`, ignoring ASCII case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Measure::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseMeasureError { value: s.to_owned() })
    }
}

/// A zoomed profile: which spans, grouped how, in which buckets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileQuery {
    /// What the groups are.
    pub by: GroupBy,
    /// Bucket width, nanoseconds.
    pub bucket_ns: u64,
    /// Which spans count. Counts take spans that start in the time range; times take the part
    /// of each span inside it.
    pub filter: SpanFilter,
}

/// Counts, span time and self time per bucket for each group: [`FrequencyProfile`] zoomed and
/// extended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeProfile {
    /// What the groups are.
    pub group_by: GroupBy,
    /// Bucket width, nanoseconds.
    pub bucket_ns: u64,
    /// Start of the first bucket, Unix nanoseconds (a multiple of `bucket_ns`; 0 when empty).
    pub start_unix_ns: u64,
    /// The filter applied.
    pub filter: SpanFilter,
    /// The groups, by span count descending, then key.
    pub groups: Vec<TimeSeries>,
}

/// One group's measures over time. Every vector has one entry per bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeSeries {
    /// The node, daemon or method.
    pub key: String,
    /// Spans started in each bucket.
    pub counts: Vec<u64>,
    /// Span time in each bucket, nanoseconds: each span's interval cut at bucket edges.
    pub total_ns: Vec<u64>,
    /// Self time in each bucket, nanoseconds: the parts of each span's interval that none of
    /// its children covers.
    pub self_ns: Vec<u64>,
    /// Sum of `counts`.
    pub count: u64,
    /// Sum of `total_ns`.
    pub total_time_ns: u64,
    /// Sum of `self_ns`.
    pub self_time_ns: u64,
}

impl TimeProfile {
    /// Buckets per group.
    pub fn bucket_count(&self) -> usize {
        self.groups.first().map_or(0, |g| g.counts.len())
    }

    /// Start of bucket `i`, Unix nanoseconds.
    pub fn bucket_start_unix_ns(&self, i: usize) -> u64 {
        self.start_unix_ns.saturating_add(self.bucket_ns.saturating_mul(i as u64))
    }

    /// `group`'s value of `measure` in every bucket (rates in spans per second).
    pub fn values(&self, group: &TimeSeries, measure: Measure) -> Vec<f64> {
        let per_s = 1e9 / self.bucket_ns.max(1) as f64;
        match measure {
            Measure::Count => group.counts.iter().map(|&c| c as f64).collect(),
            Measure::Rate => group.counts.iter().map(|&c| c as f64 * per_s).collect(),
            Measure::TotalTime => group.total_ns.iter().map(|&t| t as f64).collect(),
            Measure::SelfTime => group.self_ns.iter().map(|&t| t as f64).collect(),
        }
    }

    /// The counts alone, as a [`FrequencyProfile`] (for its table, CSV and JSON writers).
    pub fn frequency(&self) -> FrequencyProfile {
        let mut groups: Vec<GroupSeries> = self
            .groups
            .iter()
            .map(|g| GroupSeries { key: g.key.clone(), counts: g.counts.clone(), total: g.count })
            .collect();
        groups.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.key.cmp(&b.key)));
        FrequencyProfile {
            group_by: self.group_by,
            bucket_ns: self.bucket_ns,
            start_unix_ns: self.start_unix_ns,
            groups,
        }
    }
}

/// Counts, span time and self time per bucket and group, of the spans `query.filter` keeps; a
/// copy of a span ([`Span::is_copy_of`]) counts once.
///
/// A span's children are the spans of its trace that name it as parent (whatever the filter);
/// its self time is its interval minus the union of theirs, as in
/// [`stats::self_times`](crate::stats::self_times), here split over buckets.
pub fn time_profile(data: &Dataset, query: &ProfileQuery) -> Result<TimeProfile, ProfileError> {
    let bucket_ns = query.bucket_ns;
    if bucket_ns == 0 {
        return Err(ProfileError::ZeroBucket);
    }
    let filter = &query.filter;
    let kept = overlapping_spans(data, filter);
    let Some((start_unix_ns, buckets)) = bucket_range(data, &kept, filter, bucket_ns) else {
        return Ok(TimeProfile {
            group_by: query.by,
            bucket_ns,
            start_unix_ns: 0,
            filter: filter.clone(),
            groups: vec![],
        });
    };
    let mut builder = TimeProfileBuilder::new(query.by, bucket_ns, start_unix_ns, buckets)?;
    builder.filter = filter.clone();
    builder.add_kept(data, &kept);
    builder.finish()
}

/// A [`time_profile`] of every span (no filter) built a dataset at a time — from a store,
/// a trace at a time — over a time range known beforehand. A span's children are looked for
/// in the dataset it comes with, so each trace must come whole.
#[derive(Debug)]
pub struct TimeProfileBuilder {
    by: GroupBy,
    filter: SpanFilter,
    /// Group key → its index in `keys`.
    index: HashMap<String, usize>,
    keys: Vec<String>,
    sums: BucketSums,
    /// More cells than [`MAX_PROFILE_CELLS`] were asked for: nothing more is added.
    too_large: Option<ProfileError>,
    /// Scratch space for a span's children's intervals.
    intervals: Vec<(u64, u64)>,
}

impl TimeProfileBuilder {
    /// A profile grouped `by`, in `buckets` buckets of `bucket_ns` from `start_unix_ns` (a
    /// multiple of `bucket_ns`), as [`time_profile`] lays them out for spans from the first
    /// start to the latest end.
    ///
    /// # Errors
    /// A zero bucket; more buckets than [`MAX_PROFILE_CELLS`].
    pub fn new(by: GroupBy, bucket_ns: u64, start_unix_ns: u64, buckets: u64) -> Result<Self, ProfileError> {
        if bucket_ns == 0 {
            return Err(ProfileError::ZeroBucket);
        }
        if buckets > MAX_PROFILE_CELLS {
            return Err(ProfileError::TooLarge { buckets, groups: 1, limit: MAX_PROFILE_CELLS });
        }
        Ok(TimeProfileBuilder {
            by,
            filter: SpanFilter::default(),
            index: HashMap::new(),
            keys: Vec::new(),
            sums: BucketSums::new(0, buckets as usize, start_unix_ns, bucket_ns),
            too_large: None,
            intervals: Vec::new(),
        })
    }

    /// The first bucket's start and the number of buckets [`time_profile`] takes for spans that
    /// start from `first_start_unix_ns` to `last_start_unix_ns` and end by `last_end_unix_ns`.
    pub fn range(
        first_start_unix_ns: u64,
        last_start_unix_ns: u64,
        last_end_unix_ns: u64,
        bucket_ns: u64,
    ) -> (u64, u64) {
        let bucket_ns = bucket_ns.max(1);
        let last = last_end_unix_ns.max(last_start_unix_ns).saturating_sub(1).max(last_start_unix_ns);
        let start_unix_ns = first_start_unix_ns - first_start_unix_ns % bucket_ns;
        (start_unix_ns, ((last - start_unix_ns) / bucket_ns).saturating_add(1))
    }

    /// Adds the distinct spans of `data`, which holds every child of each of them.
    pub fn add(&mut self, data: &Dataset) {
        let kept = overlapping_spans(data, &SpanFilter::default());
        self.add_kept(data, &kept);
    }

    fn add_kept(&mut self, data: &Dataset, kept: &[usize]) {
        if self.too_large.is_some() {
            return;
        }
        let (keys, group_of) = intern_groups(data, kept, self.by);
        let new = keys.iter().filter(|k| !self.index.contains_key(*k)).count();
        let groups = self.keys.len() + new;
        if (groups as u64).saturating_mul(self.sums.buckets as u64) > MAX_PROFILE_CELLS {
            let buckets = self.sums.buckets as u64;
            self.too_large = Some(ProfileError::TooLarge { buckets, groups, limit: MAX_PROFILE_CELLS });
            return;
        }
        let global: Vec<usize> = keys
            .into_iter()
            .map(|key| {
                *self.index.entry(key).or_insert_with_key(|key| {
                    self.sums.push_group();
                    self.keys.push(key.clone());
                    self.keys.len() - 1
                })
            })
            .collect();
        let children = Children::new(data);
        for (&i, &g) in kept.iter().zip(&group_of) {
            self.sums.add(data, &children, &self.filter, i, global[g], &mut self.intervals);
        }
    }

    /// The profile, groups by span count descending, then key.
    ///
    /// # Errors
    /// More cells than [`MAX_PROFILE_CELLS`].
    pub fn finish(self) -> Result<TimeProfile, ProfileError> {
        if let Some(e) = self.too_large {
            return Err(e);
        }
        let (start_unix_ns, bucket_ns) = (self.sums.start_unix_ns, self.sums.bucket_ns);
        let mut series = self.sums.into_series(self.keys);
        series.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        Ok(TimeProfile { group_by: self.by, bucket_ns, start_unix_ns, filter: self.filter, groups: series })
    }
}

/// The distinct spans that `filter` keeps and that overlap its time range.
fn overlapping_spans(data: &Dataset, filter: &SpanFilter) -> Vec<usize> {
    let copies = data.copies();
    (0..data.spans.len())
        .filter(|&i| {
            let s = &data.spans[i];
            !copies[i]
                && filter.matches_place(s)
                && filter.matches_request(s)
                && filter.matches_operation(s)
                && filter.overlaps(s.start_unix_ns, s.end_unix_ns)
        })
        .collect()
}

/// A span's interval cut to the filter's time range (a negative duration read as zero).
fn clip(s: &Span, filter: &SpanFilter) -> (u64, u64) {
    let end = s.end_unix_ns.max(s.start_unix_ns);
    (s.start_unix_ns.max(filter.from_unix_ns.unwrap_or(0)), end.min(filter.to_unix_ns.unwrap_or(u64::MAX)))
}

/// The start of the first bucket and the number of buckets that cover the kept spans' clipped
/// intervals; `None` without spans.
fn bucket_range(data: &Dataset, kept: &[usize], filter: &SpanFilter, bucket_ns: u64) -> Option<(u64, u64)> {
    let first = kept.iter().map(|&i| clip(&data.spans[i], filter).0).min()?;
    let last = kept
        .iter()
        .map(|&i| clip(&data.spans[i], filter))
        .map(|(s, e)| e.saturating_sub(1).max(s))
        .max()
        .unwrap_or(first);
    let start_unix_ns = first - first % bucket_ns;
    Some((start_unix_ns, ((last - start_unix_ns) / bucket_ns).saturating_add(1)))
}

/// Counts, span time and self time per group and bucket, while they are summed.
#[derive(Debug)]
struct BucketSums {
    start_unix_ns: u64,
    bucket_ns: u64,
    buckets: usize,
    counts: Vec<Vec<u64>>,
    total: Vec<Vec<u64>>,
    own: Vec<Vec<u64>>,
}

impl BucketSums {
    fn new(groups: usize, buckets: usize, start_unix_ns: u64, bucket_ns: u64) -> Self {
        BucketSums {
            start_unix_ns,
            bucket_ns,
            buckets,
            counts: vec![vec![0u64; buckets]; groups],
            total: vec![vec![0u64; buckets]; groups],
            own: vec![vec![0u64; buckets]; groups],
        }
    }

    /// Adds a group, with nothing in its buckets yet.
    fn push_group(&mut self) {
        for rows in [&mut self.counts, &mut self.total, &mut self.own] {
            rows.push(vec![0u64; self.buckets]);
        }
    }

    /// Adds span `i` to group `g`: its start, when the filter's time range holds it, and its
    /// span and self time inside that range. `intervals` is scratch space.
    fn add(
        &mut self,
        data: &Dataset,
        children: &Children,
        filter: &SpanFilter,
        i: usize,
        g: usize,
        intervals: &mut Vec<(u64, u64)>,
    ) {
        let (origin, bucket_ns) = (self.start_unix_ns, self.bucket_ns);
        let span = &data.spans[i];
        if filter.from_unix_ns.is_none_or(|from| span.start_unix_ns >= from)
            && filter.to_unix_ns.is_none_or(|to| span.start_unix_ns < to)
        {
            self.counts[g][((span.start_unix_ns.max(origin) - origin) / bucket_ns) as usize] += 1;
        }
        let (s, e) = clip(span, filter);
        if s >= e {
            return;
        }
        spread(&mut self.total[g], origin, bucket_ns, s, e);
        // Self segments: [s, e) minus the union of the children's intervals.
        intervals.clear();
        intervals.extend(children.of(i).iter().filter_map(|&c| {
            let child = &data.spans[c as usize];
            let (cs, ce) = (child.start_unix_ns.max(s), child.end_unix_ns.min(e));
            (cs < ce).then_some((cs, ce))
        }));
        intervals.sort_unstable();
        let mut at = s;
        for &(cs, ce) in intervals.iter() {
            if cs > at {
                spread(&mut self.own[g], origin, bucket_ns, at, cs);
            }
            at = at.max(ce);
        }
        if at < e {
            spread(&mut self.own[g], origin, bucket_ns, at, e);
        }
    }

    /// One series per group, named by `keys`, in group order.
    fn into_series(self, keys: Vec<String>) -> Vec<TimeSeries> {
        keys.into_iter()
            .zip(self.counts)
            .zip(self.total.into_iter().zip(self.own))
            .map(|((key, counts), (total_ns, self_ns))| TimeSeries {
                key,
                count: counts.iter().sum(),
                total_time_ns: total_ns.iter().fold(0u64, |a, &x| a.saturating_add(x)),
                self_time_ns: self_ns.iter().fold(0u64, |a, &x| a.saturating_add(x)),
                counts,
                total_ns,
                self_ns,
            })
            .collect()
    }
}

/// The group of each kept span, and each group's key, without building a key per span.
fn intern_groups(data: &Dataset, kept: &[usize], by: GroupBy) -> (Vec<String>, Vec<usize>) {
    let mut index: HashMap<(&str, &str, &str), usize> = HashMap::new();
    let mut keys = Vec::new();
    let group_of = kept
        .iter()
        .map(|&i| {
            let s = &data.spans[i];
            let id = match by {
                GroupBy::Node => ("", "", s.node.as_str()),
                GroupBy::Daemon => ("", "", s.daemon.as_str()),
                // As `Span::qualified_method`: the daemon counts only without a target.
                GroupBy::Method => match s.target.as_deref() {
                    Some(t) if !t.is_empty() => (t, "", s.name.as_str()),
                    _ => ("", s.daemon.as_str(), s.name.as_str()),
                },
            };
            *index.entry(id).or_insert_with(|| {
                keys.push(by.key(s));
                keys.len() - 1
            })
        })
        .collect();
    (keys, group_of)
}

/// Each span's children, in compressed rows: the spans of the same trace naming it as parent
/// (when several spans share an id, the first one read is the parent).
struct Children {
    offsets: Vec<u32>,
    children: Vec<u32>,
}

impl Children {
    fn new(data: &Dataset) -> Self {
        let n = data.spans.len();
        let key = |i: u32| (data.spans[i as usize].trace_id, data.spans[i as usize].span_id, i);
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_unstable_by_key(|&i| key(i));
        let mut parent_of: Vec<u32> = vec![u32::MAX; n];
        for (i, s) in data.spans.iter().enumerate() {
            let Some(p) = s.parent_span_id else { continue };
            let at = order.partition_point(|&o| {
                (data.spans[o as usize].trace_id, data.spans[o as usize].span_id) < (s.trace_id, p)
            });
            if let Some(&o) = order.get(at) {
                let owner = &data.spans[o as usize];
                if owner.trace_id == s.trace_id && owner.span_id == p && o as usize != i {
                    parent_of[i] = o;
                }
            }
        }
        drop(order);
        let mut offsets = vec![0u32; n + 1];
        for &p in &parent_of {
            if p != u32::MAX {
                offsets[p as usize + 1] += 1;
            }
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut children = vec![0u32; offsets[n] as usize];
        for (i, &p) in parent_of.iter().enumerate() {
            if p != u32::MAX {
                children[fill[p as usize] as usize] = i as u32;
                fill[p as usize] += 1;
            }
        }
        Children { offsets, children }
    }

    fn of(&self, span: usize) -> &[u32] {
        match (self.offsets.get(span), self.offsets.get(span + 1)) {
            (Some(&a), Some(&b)) => &self.children[a as usize..b as usize],
            _ => &[],
        }
    }
}

/// Adds `[s, e)` to the buckets it overlaps.
fn spread(row: &mut [u64], origin: u64, bucket_ns: u64, s: u64, e: u64) {
    let mut at = s.max(origin);
    while at < e {
        let bucket = ((at - origin) / bucket_ns) as usize;
        let Some(cell) = row.get_mut(bucket) else { break };
        let bucket_end = origin.saturating_add((bucket as u64 + 1).saturating_mul(bucket_ns));
        let next = bucket_end.min(e);
        *cell = cell.saturating_add(next - at);
        if next <= at {
            break;
        }
        at = next;
    }
}
