//! Renderings of [`TraceStatistics`]: JSON for tools, a table for people.

use std::io::{self, Write};

use serde::Serialize;

use crate::stats::{StatsRow, TraceStatistics};
use crate::text_layout::column_width;
use crate::time_format::duration;

/// Writes `{"group_by","traces","spans","trace_duration_ns","rows":[{"service","operation",
/// "count","total_ns","avg_ns","min_ns","max_ns","self_total_ns","self_avg_ns","self_min_ns",
/// "self_max_ns","percent","p50_ns","p90_ns","p99_ns"}]}` on one line; rows by service then
/// operation, `service` absent when grouping by operation and `operation` absent when grouping
/// by service. Averages and `percent` are floats; everything else is an integer.
pub fn write_json(stats: &TraceStatistics, out: &mut dyn Write) -> io::Result<()> {
    #[derive(Serialize)]
    struct Doc<'a> {
        group_by: &'a str,
        traces: usize,
        spans: u64,
        trace_duration_ns: u64,
        rows: Vec<Row<'a>>,
    }
    #[derive(Serialize)]
    struct Row<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        service: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        operation: Option<&'a str>,
        count: u64,
        total_ns: u64,
        avg_ns: f64,
        min_ns: u64,
        max_ns: u64,
        self_total_ns: u64,
        self_avg_ns: f64,
        self_min_ns: u64,
        self_max_ns: u64,
        percent: f64,
        p50_ns: u64,
        p90_ns: u64,
        p99_ns: u64,
    }
    let rows = stats
        .rows
        .iter()
        .map(|r| Row {
            service: r.service.as_deref(),
            operation: r.operation.as_deref(),
            count: r.count,
            total_ns: r.total_ns,
            avg_ns: r.avg_ns,
            min_ns: r.min_ns,
            max_ns: r.max_ns,
            self_total_ns: r.self_total_ns,
            self_avg_ns: r.self_avg_ns,
            self_min_ns: r.self_min_ns,
            self_max_ns: r.self_max_ns,
            percent: r.percent,
            p50_ns: r.p50_ns,
            p90_ns: r.p90_ns,
            p99_ns: r.p99_ns,
        })
        .collect();
    let doc = Doc {
        group_by: stats.group_by.as_str(),
        traces: stats.traces,
        spans: stats.spans,
        trace_duration_ns: stats.trace_duration_ns,
        rows,
    };
    serde_json::to_writer(&mut *out, &doc)?;
    writeln!(out)
}

fn label(r: &StatsRow) -> String {
    match (&r.service, &r.operation) {
        (Some(s), Some(o)) => format!("{s} / {o}"),
        (Some(s), None) => s.clone(),
        (None, Some(o)) => o.clone(),
        (None, None) => String::new(),
    }
}

/// Writes the statistics as a table, the group with the largest self total first.
pub fn write_table(stats: &TraceStatistics, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "trace statistics by {}: {} traces, {} spans, {} of trace time",
        stats.group_by,
        stats.traces,
        stats.spans,
        duration(stats.trace_duration_ns)
    )?;
    let mut rows: Vec<&StatsRow> = stats.rows.iter().collect();
    rows.sort_by(|a, b| b.self_total_ns.cmp(&a.self_total_ns).then_with(|| label(a).cmp(&label(b))));
    let width = column_width(rows.iter().map(|r| label(r).chars().count()).max().unwrap_or(0), 5);
    writeln!(
        out,
        "{:<width$} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>10} {:>10} {:>10}",
        "group",
        "count",
        "total",
        "avg",
        "min",
        "max",
        "self",
        "self avg",
        "self min",
        "self max",
        "% trace",
        "p50",
        "p90",
        "p99",
    )?;
    let d = |ns: f64| duration(ns.round() as u64);
    for r in rows {
        writeln!(
            out,
            "{:<width$} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6.2}% {:>10} {:>10} {:>10}",
            label(r),
            r.count,
            duration(r.total_ns),
            d(r.avg_ns),
            duration(r.min_ns),
            duration(r.max_ns),
            duration(r.self_total_ns),
            d(r.self_avg_ns),
            duration(r.self_min_ns),
            duration(r.self_max_ns),
            r.percent,
            duration(r.p50_ns),
            duration(r.p90_ns),
            duration(r.p99_ns),
        )?;
    }
    Ok(())
}
