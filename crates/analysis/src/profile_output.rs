//! Renderings of a [`FrequencyProfile`]: a table for people, CSV and JSON for tools.

use std::io::{self, Write};

use serde_json::json;

use crate::filter::SpanFilter;
use crate::phase::PhaseChange;
use crate::profile::{FrequencyProfile, Measure, TimeProfile, TimeSeries};
use crate::text_layout::column_width;
use crate::time_format::{duration, rfc3339_utc};

/// The most bucket columns [`write_table`] prints; wider profiles are summarised by adding
/// adjacent buckets together.
pub const TABLE_MAX_COLUMNS: usize = 20;

/// The bucket columns of a table: how many buckets each column sums, and how many columns.
#[derive(Clone, Copy)]
struct Columns {
    per_column: usize,
    count: usize,
}

impl Columns {
    /// At most [`TABLE_MAX_COLUMNS`] columns for `buckets` buckets; says so when buckets are
    /// summed.
    fn fit(buckets: usize, out: &mut dyn Write) -> io::Result<Columns> {
        let per_column = buckets.div_ceil(TABLE_MAX_COLUMNS);
        let columns = buckets.div_ceil(per_column);
        if per_column > 1 {
            writeln!(
                out,
                "({buckets} buckets shown as {columns} columns of {per_column} buckets each; \
                 CSV and JSON carry every bucket)"
            )?;
        }
        Ok(Columns { per_column, count: columns })
    }

    /// Each column's label: the offset of its first bucket from the start.
    fn labels(self, bucket_ns: u64) -> Vec<String> {
        (0..self.count)
            .map(|c| offset_label(bucket_ns.saturating_mul((c * self.per_column) as u64), bucket_ns))
            .collect()
    }
}

/// Writes the profile as a text table: a heading with the absolute start time, then one row per
/// group with a column per bucket (labelled by its offset from the start) and a total column.
///
/// With more than [`TABLE_MAX_COLUMNS`] buckets, adjacent buckets are added together and the
/// heading says so; [`write_csv`] and [`to_json`] always carry every bucket.
pub fn write_table(profile: &FrequencyProfile, out: &mut dyn Write) -> io::Result<()> {
    let buckets = profile.bucket_count();
    if buckets == 0 {
        return writeln!(out, "frequency profile by {}: no spans", profile.group_by);
    }
    writeln!(
        out,
        "frequency profile by {}: {} groups, {} buckets of {} from {} ({} ns)",
        profile.group_by,
        profile.groups.len(),
        buckets,
        offset_label(profile.bucket_ns, profile.bucket_ns).trim_start_matches('+'),
        rfc3339_utc(profile.start_unix_ns),
        profile.start_unix_ns,
    )?;
    let columns = Columns::fit(buckets, out)?;
    let labels = columns.labels(profile.bucket_ns);
    let rows: Vec<Vec<u64>> = profile
        .groups
        .iter()
        .map(|g| g.counts.chunks(columns.per_column).map(|chunk| chunk.iter().sum()).collect())
        .collect();
    let key_width = profile.groups.iter().map(|g| g.key.chars().count()).max().unwrap_or(0);
    let key_width = column_width(key_width, "group".len());
    let widths: Vec<usize> = (0..columns.count)
        .map(|c| {
            let widest = rows.iter().map(|r| digits(r[c])).max().unwrap_or(1);
            widest.max(labels[c].len())
        })
        .collect();
    let total_width = profile.groups.iter().map(|g| digits(g.total)).max().unwrap_or(1).max(5);

    write!(out, "{:<key_width$}", "group")?;
    for (label, width) in labels.iter().zip(&widths) {
        write!(out, "  {label:>width$}")?;
    }
    writeln!(out, "  {:>total_width$}", "total")?;
    for (group, row) in profile.groups.iter().zip(&rows) {
        let pad = key_width.saturating_sub(group.key.chars().count());
        write!(out, "{}{}", group.key, " ".repeat(pad))?;
        for (count, width) in row.iter().zip(&widths) {
            write!(out, "  {count:>width$}")?;
        }
        writeln!(out, "  {:>total_width$}", group.total)?;
    }
    Ok(())
}

/// Writes the profile as CSV with the columns `group,bucket_start_unix_ns,count`: one row per
/// group and bucket, zero counts included, groups in profile order.
pub fn write_csv(profile: &FrequencyProfile, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "group,bucket_start_unix_ns,count")?;
    for group in &profile.groups {
        let key = csv_field(&group.key);
        for (i, count) in group.counts.iter().enumerate() {
            writeln!(out, "{key},{},{count}", profile.bucket_start_unix_ns(i))?;
        }
    }
    Ok(())
}

/// Writes [`to_json`], indented, and a newline.
pub fn write_json(profile: &FrequencyProfile, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &to_json(profile))?;
    writeln!(out)
}

/// The profile as JSON:
/// `{"group_by":"node","bucket_ns":N,"start_unix_ns":N,"groups":[{"key":"node-1","total":N,"counts":[…]}]}`.
pub fn to_json(profile: &FrequencyProfile) -> serde_json::Value {
    json!({
        "group_by": profile.group_by.as_str(),
        "bucket_ns": profile.bucket_ns,
        "start_unix_ns": profile.start_unix_ns,
        "groups": profile.groups.iter().map(|g| json!({
            "key": g.key,
            "total": g.total,
            "counts": g.counts,
        })).collect::<Vec<_>>(),
    })
}

/// Writes a zoomed profile as a text table of `measure`, like [`write_table`]: a heading with
/// the filter and the unit, one row per group, one column per bucket (adjacent buckets added
/// together, or averaged for rates, beyond [`TABLE_MAX_COLUMNS`]) and a total column.
pub fn write_time_table(profile: &TimeProfile, measure: Measure, out: &mut dyn Write) -> io::Result<()> {
    let buckets = profile.bucket_count();
    let scope = filter_label(&profile.filter);
    if buckets == 0 {
        return writeln!(out, "profile by {}{scope}: no spans", profile.group_by);
    }
    writeln!(
        out,
        "profile by {}{scope}: {} per bucket; {} groups, {} buckets of {} from {} ({} ns)",
        profile.group_by,
        measure.unit(),
        profile.groups.len(),
        buckets,
        offset_label(profile.bucket_ns, profile.bucket_ns).trim_start_matches('+'),
        rfc3339_utc(profile.start_unix_ns),
        profile.start_unix_ns,
    )?;
    let columns = Columns::fit(buckets, out)?;
    let labels = columns.labels(profile.bucket_ns);
    let rows: Vec<TimeRow> =
        profile.groups.iter().map(|g| TimeRow::of(profile, g, measure, columns.per_column)).collect();
    let total_label = if measure == Measure::Rate { "mean" } else { "total" };
    write_time_rows(profile, &labels, &rows, total_label, out)
}

/// One group's row of a zoomed profile's table, its cells and total as printed.
struct TimeRow {
    cells: Vec<String>,
    total: String,
}

impl TimeRow {
    /// Group `g`'s values in `measure`, `per_column` buckets to a cell: added together, or
    /// averaged for rates.
    fn of(profile: &TimeProfile, g: &TimeSeries, measure: Measure, per_column: usize) -> Self {
        let cell = |x: f64| time_cell(measure, x);
        let values = profile.values(g, measure);
        let cells = values
            .chunks(per_column)
            .map(|chunk| {
                let sum: f64 = chunk.iter().sum();
                cell(if measure == Measure::Rate { sum / chunk.len() as f64 } else { sum })
            })
            .collect();
        let buckets = profile.bucket_count();
        let total = match measure {
            Measure::Count => g.count as f64,
            Measure::Rate => g.count as f64 * 1e9 / (profile.bucket_ns as f64 * buckets as f64),
            Measure::TotalTime => g.total_time_ns as f64,
            Measure::SelfTime => g.self_time_ns as f64,
        };
        TimeRow { cells, total: cell(total) }
    }
}

/// A value of `measure` as a table cell: counts whole, rates to a tenth, times as durations.
fn time_cell(measure: Measure, x: f64) -> String {
    match measure {
        Measure::Count => format!("{x:.0}"),
        Measure::Rate => format!("{x:.1}"),
        Measure::TotalTime | Measure::SelfTime => {
            if x == 0.0 {
                "0".to_owned()
            } else {
                duration(x as u64).replace(' ', "")
            }
        }
    }
}

/// The header line and one line per group of a zoomed profile's table, columns as wide as
/// their widest cell.
fn write_time_rows(
    profile: &TimeProfile,
    labels: &[String],
    rows: &[TimeRow],
    total_label: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    let key_width =
        column_width(profile.groups.iter().map(|g| g.key.chars().count()).max().unwrap_or(0), "group".len());
    let widths: Vec<usize> = (0..labels.len())
        .map(|c| rows.iter().map(|r| r.cells[c].chars().count()).max().unwrap_or(1).max(labels[c].len()))
        .collect();
    let total_width = rows.iter().map(|r| r.total.chars().count()).max().unwrap_or(1).max(5);
    write!(out, "{:<key_width$}", "group")?;
    for (label, width) in labels.iter().zip(&widths) {
        write!(out, "  {label:>width$}")?;
    }
    writeln!(out, "  {total_label:>total_width$}")?;
    for (group, row) in profile.groups.iter().zip(rows) {
        let pad = key_width.saturating_sub(group.key.chars().count());
        write!(out, "{}{}", group.key, " ".repeat(pad))?;
        for (c, width) in row.cells.iter().zip(&widths) {
            write!(out, "  {c:>width$}")?;
        }
        writeln!(out, "  {:>total_width$}", row.total)?;
    }
    Ok(())
}

/// Writes a zoomed profile as CSV with the columns
/// `group,bucket_start_unix_ns,count,rate_per_s,total_ns,self_ns`.
pub fn write_time_csv(profile: &TimeProfile, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "group,bucket_start_unix_ns,count,rate_per_s,total_ns,self_ns")?;
    let per_s = 1e9 / profile.bucket_ns.max(1) as f64;
    for g in &profile.groups {
        let key = csv_field(&g.key);
        for i in 0..g.counts.len() {
            writeln!(
                out,
                "{key},{},{},{},{},{}",
                profile.bucket_start_unix_ns(i),
                g.counts[i],
                g.counts[i] as f64 * per_s,
                g.total_ns[i],
                g.self_ns[i]
            )?;
        }
    }
    Ok(())
}

/// Writes [`to_time_json`], indented, and a newline.
pub fn write_time_json(
    profile: &TimeProfile,
    phases: Option<&[PhaseChange]>,
    out: &mut dyn Write,
) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &to_time_json(profile, phases))?;
    writeln!(out)
}

/// A zoomed profile as JSON: the keys of [`to_json`] (with `total` and `counts` the span
/// counts), plus `"filter"`, and per group `"rates_per_s"`, `"total_ns"`, `"self_ns"` (per
/// bucket), `"total_time_ns"` and `"self_time_ns"`; and `"phases"` when given.
pub fn to_time_json(profile: &TimeProfile, phases: Option<&[PhaseChange]>) -> serde_json::Value {
    let per_s = 1e9 / profile.bucket_ns.max(1) as f64;
    let f = &profile.filter;
    let mut value = json!({
        "group_by": profile.group_by.as_str(),
        "bucket_ns": profile.bucket_ns,
        "start_unix_ns": profile.start_unix_ns,
        "filter": {
            "from_unix_ns": f.from_unix_ns,
            "to_unix_ns": f.to_unix_ns,
            "node": f.node,
            "daemon": f.daemon,
            "request": f.request,
            "operation": f.operation,
        },
        "groups": profile.groups.iter().map(|g| json!({
            "key": g.key,
            "total": g.count,
            "counts": g.counts,
            "rates_per_s": g.counts.iter().map(|&c| c as f64 * per_s).collect::<Vec<_>>(),
            "total_ns": g.total_ns,
            "self_ns": g.self_ns,
            "total_time_ns": g.total_time_ns,
            "self_time_ns": g.self_time_ns,
        })).collect::<Vec<_>>(),
    });
    if let Some(phases) = phases {
        value["phases"] = phases_json(phases);
    }
    value
}

/// Phase changes as JSON: `[{"group","bucket","at_unix_ns","mix_change_bits",
/// "rate_before_per_s","rate_after_per_s","shifts":[{"method","percent_before","percent_after"}]}]`.
fn phases_json(phases: &[PhaseChange]) -> serde_json::Value {
    json!(phases
        .iter()
        .map(|p| json!({
            "group": p.group,
            "bucket": p.bucket,
            "at_unix_ns": p.at_unix_ns,
            "mix_change_bits": p.mix_change_bits,
            "rate_before_per_s": p.rate_before_per_s,
            "rate_after_per_s": p.rate_after_per_s,
            "shifts": p.shifts.iter().map(|s| json!({
                "method": s.method,
                "percent_before": s.percent_before,
                "percent_after": s.percent_after,
            })).collect::<Vec<_>>(),
        }))
        .collect::<Vec<_>>())
}

/// Writes phase changes, one line each with the methods whose share moved most; `origin_unix_ns`
/// is where offsets count from.
pub fn write_phases(phases: &[PhaseChange], origin_unix_ns: u64, out: &mut dyn Write) -> io::Result<()> {
    if phases.is_empty() {
        return writeln!(out, "phase changes: none");
    }
    writeln!(out, "phase changes:")?;
    for p in phases {
        let shifts: Vec<String> = p
            .shifts
            .iter()
            .map(|s| format!("{} {:.0}% → {:.0}%", s.method, s.percent_before, s.percent_after))
            .collect();
        writeln!(
            out,
            "  {} at +{} ({}): mix change {:.2} bits, rate {:.1}/s → {:.1}/s; {}",
            p.group,
            duration(p.at_unix_ns.saturating_sub(origin_unix_ns)),
            rfc3339_utc(p.at_unix_ns),
            p.mix_change_bits,
            p.rate_before_per_s,
            p.rate_after_per_s,
            shifts.join(", ")
        )?;
    }
    Ok(())
}

/// ` (node node-1, daemon worker, …)` for a non-empty filter, else nothing.
fn filter_label(f: &SpanFilter) -> String {
    let mut parts = Vec::new();
    if let Some(n) = &f.node {
        parts.push(format!("node {n}"));
    }
    if let Some(d) = &f.daemon {
        parts.push(format!("daemon {d}"));
    }
    if let Some(r) = &f.request {
        parts.push(format!("request {r}"));
    }
    if let Some(o) = &f.operation {
        parts.push(format!("operation {o}"));
    }
    if let Some(t) = f.from_unix_ns {
        parts.push(format!("from {}", rfc3339_utc(t)));
    }
    if let Some(t) = f.to_unix_ns {
        parts.push(format!("to {}", rfc3339_utc(t)));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// `+{n}{unit}` in the largest unit that divides the bucket width: s, ms, us or ns.
fn offset_label(offset_ns: u64, bucket_ns: u64) -> String {
    let (unit, scale) = [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)]
        .into_iter()
        .find(|&(_, scale)| bucket_ns % scale == 0)
        .unwrap_or(("ns", 1));
    format!("+{}{unit}", offset_ns / scale)
}

fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// A CSV field, quoted when it holds a comma, quote or line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_use_the_bucket_unit() {
        assert_eq!(offset_label(3_000_000_000, 1_000_000_000), "+3s");
        assert_eq!(offset_label(1_500_000_000, 500_000_000), "+1500ms");
        assert_eq!(offset_label(2_000, 1_000), "+2us");
        assert_eq!(offset_label(14, 7), "+14ns");
    }

    #[test]
    fn csv_quotes_only_when_needed() {
        assert_eq!(csv_field("node-1"), "node-1");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn digit_counts() {
        assert_eq!(digits(0), 1);
        assert_eq!(digits(9), 1);
        assert_eq!(digits(10), 2);
        assert_eq!(digits(u64::MAX), 20);
    }
}
