//! Frequency profiles: how many spans start per unit of time, per node, daemon or method.
//!
//! This is the lightweight-monitor view of a distributed system: count executions per time
//! bucket at three granularities, so a developer can zoom from the cluster (which node behaves
//! differently?) to a daemon, then to a method.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::model::{Dataset, Span};

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
    /// The method ([`Span::method`]: target and span name).
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
            GroupBy::Method => span.method(),
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

/// Counts the spans of `data` by the bucket of their start time, per group.
pub fn frequency_profile(
    data: &Dataset,
    by: GroupBy,
    bucket_ns: u64,
) -> Result<FrequencyProfile, ProfileError> {
    if bucket_ns == 0 {
        return Err(ProfileError::ZeroBucket);
    }
    let empty = FrequencyProfile { group_by: by, bucket_ns, start_unix_ns: 0, groups: vec![] };
    let Some(first) = data.spans.iter().map(|s| s.start_unix_ns).min() else {
        return Ok(empty);
    };
    let last = data.spans.iter().map(|s| s.start_unix_ns).max().unwrap_or(first);
    let start_unix_ns = first - first % bucket_ns;
    let buckets = (last - start_unix_ns) / bucket_ns + 1;

    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let group_of: Vec<usize> = data
        .spans
        .iter()
        .map(|span| {
            let next = index.len();
            *index.entry(by.key(span)).or_insert(next)
        })
        .collect();
    let groups = index.len();
    if buckets.saturating_mul(groups as u64) > MAX_PROFILE_CELLS {
        return Err(ProfileError::TooLarge { buckets, groups, limit: MAX_PROFILE_CELLS });
    }

    let mut counts = vec![vec![0u64; buckets as usize]; groups];
    for (span, &g) in data.spans.iter().zip(&group_of) {
        let bucket = (span.start_unix_ns - start_unix_ns) / bucket_ns;
        counts[g][bucket as usize] += 1;
    }
    let mut series: Vec<GroupSeries> = index
        .into_iter()
        .map(|(key, g)| {
            let counts = std::mem::take(&mut counts[g]);
            GroupSeries { key, total: counts.iter().sum(), counts }
        })
        .collect();
    series.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.key.cmp(&b.key)));
    Ok(FrequencyProfile { group_by: by, bucket_ns, start_unix_ns, groups: series })
}

/// The `n` most frequent methods as `(method, span count, total duration ns)`, by count
/// descending, then total duration descending, then name.
pub fn top_methods(data: &Dataset, n: usize) -> Vec<(String, u64, u64)> {
    let mut by_method: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for span in &data.spans {
        let entry = by_method.entry(span.method()).or_default();
        entry.0 += 1;
        entry.1 = entry.1.saturating_add(span.duration_ns());
    }
    let mut methods: Vec<(String, u64, u64)> =
        by_method.into_iter().map(|(m, (count, total))| (m, count, total)).collect();
    methods.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.2.cmp(&a.2)).then_with(|| a.0.cmp(&b.0)));
    methods.truncate(n);
    methods
}
