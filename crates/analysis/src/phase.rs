//! Phase detection: the moments where a node's or a daemon's work changes character.
//!
//! In the frequency-profile paper, the transition from map to reduce showed as a drop in every
//! worker's rate and a new mix of methods. [`detect_phases`] looks for both in each group's
//! profile: at every bucket boundary it compares the `window_buckets` buckets before with the
//! ones after —
//! - the **mix change**: the Jensen–Shannon divergence, in bits, between the method mixes of
//!   the two windows (needs `min_spans / 2` spans on each side);
//! - the **rate change**: `|log2|` of the ratio of the spans started per bucket after and
//!   before, each count plus one so an empty window is finite (needs `min_spans` in the two
//!   windows together). It counts only beyond three standard errors of that log ratio for
//!   Poisson counts, `3·√(1/(n_before+1) + 1/(n_after+1)) / ln 2`, so bursty traffic with few
//!   spans per window does not read as phases.
//!
//! A boundary's strength is the larger of `mix / min_mix_bits` and `rate /
//! min_rate_doublings`; boundaries with strength at least 1 that are the strongest within
//! `window_buckets` on either side are phase changes. Groups are those of the profile's
//! [`GroupBy`] for nodes and daemons; for methods, the mix of every kept span forms a single
//! group named `all`.

use std::collections::{BTreeMap, HashMap};

use crate::divergence::jensen_shannon_bits;
use crate::filter::SpanFilter;
use crate::model::{Dataset, Span};
use crate::profile::{GroupBy, ProfileError, ProfileQuery, MAX_PROFILE_CELLS};

/// How sharp a change must be to mark a phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhaseOptions {
    /// Buckets compared on each side of a boundary.
    pub window_buckets: usize,
    /// Mix divergence, bits, that marks a change on its own.
    pub min_mix_bits: f64,
    /// Rate change, in doublings (1 = twice or half the rate), that marks a change on its own.
    pub min_rate_doublings: f64,
    /// Fewest spans in the two windows together for a boundary to be judged.
    pub min_spans: u64,
}

impl Default for PhaseOptions {
    /// Five buckets a side, 0.3 bits, one doubling, 20 spans.
    fn default() -> Self {
        Self { window_buckets: 5, min_mix_bits: 0.3, min_rate_doublings: 1.0, min_spans: 20 }
    }
}

/// One phase change in one group.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseChange {
    /// The node or daemon (`all` when grouping by method).
    pub group: String,
    /// The first bucket of the new phase.
    pub bucket: usize,
    /// Where the new phase starts, Unix nanoseconds (that bucket's start).
    pub at_unix_ns: u64,
    /// Jensen–Shannon divergence between the mixes before and after, bits.
    pub mix_change_bits: f64,
    /// Spans started per second in the window before.
    pub rate_before_per_s: f64,
    /// Spans started per second in the window after.
    pub rate_after_per_s: f64,
    /// The methods whose share changed most, largest change first (at most three).
    pub shifts: Vec<MethodShift>,
}

/// How a method's share of the spans changed across a phase boundary.
#[derive(Clone, Debug, PartialEq)]
pub struct MethodShift {
    /// The method.
    pub method: String,
    /// Its percentage of the spans before.
    pub percent_before: f64,
    /// Its percentage after.
    pub percent_after: f64,
}

/// The buckets the kept spans fall in.
#[derive(Clone, Copy, Debug)]
struct Grid {
    origin_unix_ns: u64,
    bucket_ns: u64,
    buckets: usize,
}

/// One group's span counts: method → row, row → bucket → count.
#[derive(Debug, Default)]
struct MethodCounts {
    methods: HashMap<String, usize>,
    rows: Vec<Vec<u64>>,
}

/// What one boundary compares: the mix divergence, the rates and the counts per method on
/// each side.
#[derive(Clone)]
struct Boundary {
    mix_bits: f64,
    rate_before_per_s: f64,
    rate_after_per_s: f64,
    before: Vec<f64>,
    after: Vec<f64>,
}

/// Judges the boundaries of one group's counts.
struct Judge<'a> {
    /// Per method, the prefix sums of its counts over the buckets.
    prefix: Vec<Vec<u64>>,
    buckets: usize,
    /// Buckets a side.
    k: usize,
    /// Fewest buckets a side for a boundary to be judged.
    min_side: usize,
    per_s: f64,
    options: &'a PhaseOptions,
}

/// The phase changes of every group, by group then time; see the [module docs](self).
///
/// Uses the spans that `query.filter` keeps and that start in its time range.
pub fn detect_phases(
    data: &Dataset,
    query: &ProfileQuery,
    options: &PhaseOptions,
) -> Result<Vec<PhaseChange>, ProfileError> {
    if query.bucket_ns == 0 {
        return Err(ProfileError::ZeroBucket);
    }
    let kept = kept_spans(data, &query.filter);
    let (Some(first), Some(last)) =
        (kept.iter().map(|s| s.start_unix_ns).min(), kept.iter().map(|s| s.start_unix_ns).max())
    else {
        return Ok(Vec::new());
    };
    let mut counter = PhaseCounter::new(query.by, query.bucket_ns, first, last)?;
    for s in kept {
        counter.add(&counter.group_key(s), &s.qualified_method(), s.start_unix_ns, 1)?;
    }
    Ok(counter.finish(options))
}

/// The span counts [`detect_phases`] judges — per group, method and bucket — added a cell at
/// a time: from spans, or from a store's aggregation.
#[derive(Debug)]
pub struct PhaseCounter {
    by: GroupBy,
    grid: Grid,
    groups: BTreeMap<String, MethodCounts>,
    cells: u64,
}

impl PhaseCounter {
    /// Counts grouped `by`, in buckets of `bucket_ns` from the one holding `first_start_unix_ns`
    /// to the one holding `last_start_unix_ns`.
    ///
    /// # Errors
    /// A zero bucket; more buckets than [`MAX_PROFILE_CELLS`].
    pub fn new(
        by: GroupBy,
        bucket_ns: u64,
        first_start_unix_ns: u64,
        last_start_unix_ns: u64,
    ) -> Result<Self, ProfileError> {
        if bucket_ns == 0 {
            return Err(ProfileError::ZeroBucket);
        }
        let origin_unix_ns = first_start_unix_ns - first_start_unix_ns % bucket_ns;
        let buckets =
            ((last_start_unix_ns.max(origin_unix_ns) - origin_unix_ns) / bucket_ns).saturating_add(1);
        if buckets > MAX_PROFILE_CELLS {
            return Err(ProfileError::TooLarge { buckets, groups: 0, limit: MAX_PROFILE_CELLS });
        }
        let grid = Grid { origin_unix_ns, bucket_ns, buckets: buckets as usize };
        Ok(PhaseCounter { by, grid, groups: BTreeMap::new(), cells: 0 })
    }

    /// The group `span` counts in: its node or daemon, or `all` when grouping by method.
    pub fn group_key(&self, span: &Span) -> String {
        match self.by {
            GroupBy::Method => "all".to_owned(),
            by => by.key(span),
        }
    }

    /// Adds `n` spans of `method` ([`Span::qualified_method`]) in `group` that start at
    /// `start_unix_ns` (or anywhere in its bucket); a start outside the grid is not counted.
    ///
    /// # Errors
    /// More cells than [`MAX_PROFILE_CELLS`].
    pub fn add(&mut self, group: &str, method: &str, start_unix_ns: u64, n: u64) -> Result<(), ProfileError> {
        let grid = self.grid;
        let Some(bucket) = start_unix_ns
            .checked_sub(grid.origin_unix_ns)
            .map(|d| (d / grid.bucket_ns) as usize)
            .filter(|&b| b < grid.buckets)
        else {
            return Ok(());
        };
        if !self.groups.contains_key(group) {
            self.groups.insert(group.to_owned(), MethodCounts::default());
        }
        let groups = self.groups.len();
        let MethodCounts { methods, rows } = self.groups.get_mut(group).expect("inserted above");
        let m = match methods.get(method) {
            Some(&m) => m,
            None => {
                self.cells += grid.buckets as u64;
                if self.cells > MAX_PROFILE_CELLS {
                    return Err(ProfileError::TooLarge {
                        buckets: grid.buckets as u64,
                        groups,
                        limit: MAX_PROFILE_CELLS,
                    });
                }
                methods.insert(method.to_owned(), rows.len());
                rows.push(vec![0; grid.buckets]);
                rows.len() - 1
            }
        };
        rows[m][bucket] += n;
        Ok(())
    }

    /// The phase changes of every group, by group then time. Methods are taken in name order,
    /// whatever order they were added in.
    pub fn finish(self, options: &PhaseOptions) -> Vec<PhaseChange> {
        let grid = self.grid;
        let mut out = Vec::new();
        for (group, counts) in self.groups {
            let counts = counts.by_name();
            let judge = Judge::new(&counts.rows, grid, options);
            let mut strength = vec![0.0f64; grid.buckets];
            let mut boundaries: Vec<Option<Boundary>> = vec![None; grid.buckets];
            for b in 1..grid.buckets {
                if let Some((s, boundary)) = judge.boundary(b) {
                    strength[b] = s;
                    boundaries[b] = Some(boundary);
                }
            }
            let names = names_by_row(&counts.methods);
            for b in 1..grid.buckets {
                if strength[b] < 1.0 || !strength[b].is_finite() || !strongest(&strength, b, judge.k) {
                    continue;
                }
                let Some(boundary) = boundaries[b].take() else { continue };
                out.push(PhaseChange {
                    group: group.clone(),
                    bucket: b,
                    at_unix_ns: grid.origin_unix_ns.saturating_add(grid.bucket_ns.saturating_mul(b as u64)),
                    mix_change_bits: boundary.mix_bits,
                    rate_before_per_s: boundary.rate_before_per_s,
                    rate_after_per_s: boundary.rate_after_per_s,
                    shifts: method_shifts(&names, &boundary.before, &boundary.after),
                });
            }
        }
        out
    }
}

impl MethodCounts {
    /// The same counts with the rows in method-name order.
    fn by_name(self) -> MethodCounts {
        let mut named: Vec<(String, usize)> = self.methods.into_iter().collect();
        named.sort_unstable();
        let mut rows = self.rows;
        let sorted = named.iter().map(|(_, i)| std::mem::take(&mut rows[*i])).collect();
        let methods = named.into_iter().enumerate().map(|(new, (name, _))| (name, new)).collect();
        MethodCounts { methods, rows: sorted }
    }
}

/// The distinct spans that `filter` keeps and that start in its time range.
fn kept_spans<'a>(data: &'a Dataset, filter: &SpanFilter) -> Vec<&'a Span> {
    data.distinct_spans()
        .map(|(_, s)| s)
        .filter(|s| {
            filter.matches_place(s)
                && filter.matches_request(s)
                && filter.matches_operation(s)
                && filter.from_unix_ns.is_none_or(|f| s.start_unix_ns >= f)
                && filter.to_unix_ns.is_none_or(|t| s.start_unix_ns < t)
        })
        .collect()
}

/// The method names in row order.
fn names_by_row(methods: &HashMap<String, usize>) -> Vec<&String> {
    let mut v: Vec<(&String, usize)> = methods.iter().map(|(n, &i)| (n, i)).collect();
    v.sort_by_key(|&(_, i)| i);
    v.into_iter().map(|(n, _)| n).collect()
}

impl<'a> Judge<'a> {
    fn new(rows: &[Vec<u64>], grid: Grid, options: &'a PhaseOptions) -> Self {
        let prefix = rows
            .iter()
            .map(|r| {
                let mut p = Vec::with_capacity(r.len() + 1);
                p.push(0);
                for &c in r {
                    p.push(p[p.len() - 1] + c);
                }
                p
            })
            .collect();
        let k = options.window_buckets.max(1);
        Judge {
            prefix,
            buckets: grid.buckets,
            k,
            min_side: k.div_ceil(2),
            per_s: 1e9 / grid.bucket_ns as f64,
            options,
        }
    }

    /// Counts per method in buckets `lo..hi`.
    fn window(&self, lo: usize, hi: usize) -> Vec<f64> {
        self.prefix.iter().map(|p| (p[hi] - p[lo]) as f64).collect()
    }

    /// The strength of the boundary before bucket `b` and its figures, when it can be judged.
    fn boundary(&self, b: usize) -> Option<(f64, Boundary)> {
        let options = self.options;
        let (lo, hi) = (b.saturating_sub(self.k), (b + self.k).min(self.buckets));
        if b - lo < self.min_side || hi - b < self.min_side {
            return None;
        }
        let before = self.window(lo, b);
        let after = self.window(b, hi);
        let (n_before, n_after): (f64, f64) = (before.iter().sum(), after.iter().sum());
        if n_before + n_after < options.min_spans as f64 {
            return None;
        }
        let half = options.min_spans as f64 / 2.0;
        let mix_bits =
            if n_before >= half && n_after >= half { jensen_shannon_bits(&before, &after) } else { 0.0 };
        let rate_before = (n_before + 1.0) / (b - lo) as f64;
        let rate_after = (n_after + 1.0) / (hi - b) as f64;
        let noise = 3.0 * (1.0 / (n_before + 1.0) + 1.0 / (n_after + 1.0)).sqrt() / std::f64::consts::LN_2;
        let doublings = (rate_after / rate_before).log2().abs();
        let doublings = if doublings > noise { doublings } else { 0.0 };
        let strength = (mix_bits / options.min_mix_bits.max(f64::MIN_POSITIVE))
            .max(doublings / options.min_rate_doublings.max(f64::MIN_POSITIVE));
        let boundary = Boundary {
            mix_bits,
            rate_before_per_s: n_before / (b - lo) as f64 * self.per_s,
            rate_after_per_s: n_after / (hi - b) as f64 * self.per_s,
            before,
            after,
        };
        Some((strength, boundary))
    }
}

/// Whether boundary `b` is the strongest within `k` buckets on either side (the earliest of
/// equals).
fn strongest(strength: &[f64], b: usize, k: usize) -> bool {
    let lo = b.saturating_sub(k);
    let hi = (b + k + 1).min(strength.len());
    (lo..hi).all(|o| strength[o] < strength[b] || (strength[o] == strength[b] && o >= b))
}

/// The (at most three) methods whose share changed most between `before` and `after`.
fn method_shifts(names: &[&String], before: &[f64], after: &[f64]) -> Vec<MethodShift> {
    let (sb, sa): (f64, f64) = (before.iter().sum::<f64>().max(1.0), after.iter().sum::<f64>().max(1.0));
    let mut shifts: Vec<MethodShift> = names
        .iter()
        .enumerate()
        .map(|(m, name)| MethodShift {
            method: (*name).clone(),
            percent_before: before[m] / sb * 100.0,
            percent_after: after[m] / sa * 100.0,
        })
        .filter(|s| s.percent_before != s.percent_after)
        .collect();
    shifts.sort_by(|a, b| {
        (b.percent_after - b.percent_before)
            .abs()
            .total_cmp(&(a.percent_after - a.percent_before).abs())
            .then_with(|| a.method.cmp(&b.method))
    });
    shifts.truncate(3);
    shifts
}
