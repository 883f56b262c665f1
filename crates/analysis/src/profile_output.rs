//! Renderings of a [`FrequencyProfile`]: a table for people, CSV and JSON for tools.

use std::io::{self, Write};

use serde_json::json;

use crate::profile::FrequencyProfile;
use crate::time_format::rfc3339_utc;

/// The most bucket columns [`write_table`] prints; wider profiles are summarised by adding
/// adjacent buckets together.
pub const TABLE_MAX_COLUMNS: usize = 20;

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
    let per_column = buckets.div_ceil(TABLE_MAX_COLUMNS);
    let columns = buckets.div_ceil(per_column);
    if per_column > 1 {
        writeln!(
            out,
            "({buckets} buckets shown as {columns} columns of {per_column} buckets each; \
             CSV and JSON carry every bucket)"
        )?;
    }

    let labels: Vec<String> = (0..columns)
        .map(|c| {
            let offset = profile.bucket_ns.saturating_mul((c * per_column) as u64);
            offset_label(offset, profile.bucket_ns)
        })
        .collect();
    let rows: Vec<Vec<u64>> = profile
        .groups
        .iter()
        .map(|g| g.counts.chunks(per_column).map(|chunk| chunk.iter().sum()).collect())
        .collect();
    let key_width = profile.groups.iter().map(|g| g.key.chars().count()).max().unwrap_or(0);
    let key_width = key_width.max("group".len());
    let widths: Vec<usize> = (0..columns)
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
        let pad = key_width - group.key.chars().count();
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
