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
use crate::model::Dataset;
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

/// The phase changes of every group, by group then time; see the [module docs](self).
///
/// Uses the spans that `query.filter` keeps and that start in its time range.
pub fn detect_phases(
    data: &Dataset,
    query: &ProfileQuery,
    options: &PhaseOptions,
) -> Result<Vec<PhaseChange>, ProfileError> {
    let bucket_ns = query.bucket_ns;
    if bucket_ns == 0 {
        return Err(ProfileError::ZeroBucket);
    }
    let filter = &query.filter;
    let kept: Vec<&crate::model::Span> = data
        .distinct_spans()
        .map(|(_, s)| s)
        .filter(|s| {
            filter.matches_place(s)
                && filter.matches_request(s)
                && filter.matches_operation(s)
                && filter.from_unix_ns.is_none_or(|f| s.start_unix_ns >= f)
                && filter.to_unix_ns.is_none_or(|t| s.start_unix_ns < t)
        })
        .collect();
    let Some(first) = kept.iter().map(|s| s.start_unix_ns).min() else { return Ok(Vec::new()) };
    let last = kept.iter().map(|s| s.start_unix_ns).max().unwrap_or(first);
    let origin = first - first % bucket_ns;
    let buckets = ((last - origin) / bucket_ns).saturating_add(1);
    if buckets > MAX_PROFILE_CELLS {
        return Err(ProfileError::TooLarge { buckets, groups: 0, limit: MAX_PROFILE_CELLS });
    }
    let buckets = buckets as usize;

    // group → (method → row, row → bucket → count)
    type Counts = (HashMap<String, usize>, Vec<Vec<u64>>);
    let mut groups: BTreeMap<String, Counts> = BTreeMap::new();
    let mut cells: u64 = 0;
    for s in &kept {
        let key = match query.by {
            GroupBy::Method => "all".to_owned(),
            by => by.key(s),
        };
        let (methods, rows) = groups.entry(key).or_default();
        let next = methods.len();
        let m = *methods.entry(s.qualified_method()).or_insert(next);
        if m == rows.len() {
            cells += buckets as u64;
            if cells > MAX_PROFILE_CELLS {
                return Err(ProfileError::TooLarge {
                    buckets: buckets as u64,
                    groups: groups.len(),
                    limit: MAX_PROFILE_CELLS,
                });
            }
            rows.push(vec![0; buckets]);
        }
        rows[m][((s.start_unix_ns - origin) / bucket_ns) as usize] += 1;
    }

    let k = options.window_buckets.max(1);
    let min_side = k.div_ceil(2);
    let per_s = 1e9 / bucket_ns as f64;
    let mut out = Vec::new();
    for (group, (methods, rows)) in groups {
        let names: Vec<&String> = {
            let mut v: Vec<(&String, usize)> = methods.iter().map(|(n, &i)| (n, i)).collect();
            v.sort_by_key(|&(_, i)| i);
            v.into_iter().map(|(n, _)| n).collect()
        };
        // Prefix sums per method over buckets.
        let prefix: Vec<Vec<u64>> = rows
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
        let window =
            |lo: usize, hi: usize| -> Vec<f64> { prefix.iter().map(|p| (p[hi] - p[lo]) as f64).collect() };
        let mut strength = vec![0.0f64; buckets];
        // (mix, rate before, rate after, counts before, counts after) per boundary.
        type Figures = (f64, f64, f64, Vec<f64>, Vec<f64>);
        let mut figures: Vec<Option<Figures>> = vec![None; buckets];
        for b in 1..buckets {
            let (lo, hi) = (b.saturating_sub(k), (b + k).min(buckets));
            if b - lo < min_side || hi - b < min_side {
                continue;
            }
            let before = window(lo, b);
            let after = window(b, hi);
            let (n_before, n_after): (f64, f64) = (before.iter().sum(), after.iter().sum());
            if n_before + n_after < options.min_spans as f64 {
                continue;
            }
            let half = options.min_spans as f64 / 2.0;
            let mix =
                if n_before >= half && n_after >= half { jensen_shannon_bits(&before, &after) } else { 0.0 };
            let rate_before = (n_before + 1.0) / (b - lo) as f64;
            let rate_after = (n_after + 1.0) / (hi - b) as f64;
            let noise =
                3.0 * (1.0 / (n_before + 1.0) + 1.0 / (n_after + 1.0)).sqrt() / std::f64::consts::LN_2;
            let doublings = (rate_after / rate_before).log2().abs();
            let doublings = if doublings > noise { doublings } else { 0.0 };
            strength[b] = (mix / options.min_mix_bits.max(f64::MIN_POSITIVE))
                .max(doublings / options.min_rate_doublings.max(f64::MIN_POSITIVE));
            figures[b] = Some((
                mix,
                n_before / (b - lo) as f64 * per_s,
                n_after / (hi - b) as f64 * per_s,
                before,
                after,
            ));
        }
        for b in 1..buckets {
            if strength[b] < 1.0 || !strength[b].is_finite() {
                continue;
            }
            let lo = b.saturating_sub(k);
            let hi = (b + k + 1).min(buckets);
            let strongest =
                (lo..hi).all(|o| strength[o] < strength[b] || (strength[o] == strength[b] && o >= b));
            if !strongest {
                continue;
            }
            let Some((mix, rate_before_per_s, rate_after_per_s, before, after)) = figures[b].take() else {
                continue;
            };
            let (sb, sa): (f64, f64) =
                (before.iter().sum::<f64>().max(1.0), after.iter().sum::<f64>().max(1.0));
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
            out.push(PhaseChange {
                group: group.clone(),
                bucket: b,
                at_unix_ns: origin.saturating_add(bucket_ns.saturating_mul(b as u64)),
                mix_change_bits: mix,
                rate_before_per_s,
                rate_after_per_s,
                shifts,
            });
        }
    }
    Ok(out)
}
