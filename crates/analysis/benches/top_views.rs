//! Time and peak memory of the top-level views — frequency profiles, zoomed profiles with self
//! time, phase detection, anomalies across nodes, flame graphs and the whole HTML report — on
//! 1,023,220 synthetic spans shaped like the demo's (see `ringtrace_test_support::synthetic`: 23,255 requests of
//! 44 spans over 47 s, three workers, node-2's disk ten times slower).
//!
//! `cargo bench -p ringtrace-analysis --bench top_views`
//!
//! Before timing, each view runs once with the peak-RSS counter reset (`/proc/self/clear_refs`)
//! and the table of peak resident memory (`VmHWM`) above the dataset's own is printed.

use std::hint::black_box;

use criterion::{criterion_group, Criterion, Throughput};
use ringtrace_analysis::report::{build_report, write_html, ReportOptions};
use ringtrace_analysis::{
    anomalies, build_causality, detect_phases, flame_graph, frequency_profile, time_profile, AnomalyOptions,
    CausalityOptions, Dataset, FlameScope, GroupBy, PhaseOptions, ProfileQuery, SpanFilter,
};
use ringtrace_test_support::synthetic;

const MANY_SPANS: usize = 1_000_000;
const FANOUT: usize = 8;
const SECOND: u64 = 1_000_000_000;

fn dataset() -> Dataset {
    synthetic::dataset(MANY_SPANS / (3 + 5 * FANOUT), FANOUT, 7)
}

fn query(by: GroupBy) -> ProfileQuery {
    ProfileQuery { by, bucket_ns: SECOND, filter: SpanFilter::default() }
}

/// A named view: a closure over the dataset returning something small, so it is not optimised out.
type View = (&'static str, Box<dyn Fn(&Dataset) -> usize>);

/// The views.
fn views() -> Vec<View> {
    vec![
        (
            "profile_by_node",
            Box::new(|d: &Dataset| frequency_profile(d, GroupBy::Node, SECOND).map_or(0, |p| p.groups.len())),
        ),
        (
            "profile_by_method",
            Box::new(|d: &Dataset| {
                frequency_profile(d, GroupBy::Method, SECOND).map_or(0, |p| p.groups.len())
            }),
        ),
        (
            "time_profile_by_method",
            Box::new(|d: &Dataset| time_profile(d, &query(GroupBy::Method)).map_or(0, |p| p.groups.len())),
        ),
        (
            "phases_by_node",
            Box::new(|d: &Dataset| {
                detect_phases(d, &query(GroupBy::Node), &PhaseOptions::default()).map_or(0, |p| p.len())
            }),
        ),
        (
            "anomalies_5s",
            Box::new(|d: &Dataset| anomalies(d, &AnomalyOptions::default()).map_or(0, |a| a.anomalies.len())),
        ),
        (
            "flame_with_causality",
            Box::new(|d: &Dataset| {
                let causality = build_causality(d, &CausalityOptions::default());
                flame_graph(d, &causality, &FlameScope::default()).prune(1.0).frames.len()
            }),
        ),
        (
            "report_html",
            Box::new(|d: &Dataset| {
                let report = build_report(d, &ReportOptions::default(), &mut |_| {});
                let mut html = Vec::new();
                write_html(&report, &mut html).map_or(0, |()| html.len())
            }),
        ),
    ]
}

/// A line of `/proc/self/status`, in KiB.
fn status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn memory_report(data: &Dataset) {
    let base = status_kib("VmRSS:").unwrap_or(0);
    println!("peak memory on {} spans (dataset resident: {} MiB)", data.spans.len(), base / 1024);
    println!("{:<24} {:>16} {:>12}", "view", "peak above data", "time (1 run)");
    for (name, view) in views() {
        // Writing 5 resets the peak-RSS counter (Linux ≥ 4.0).
        if std::fs::write("/proc/self/clear_refs", "5").is_err() {
            println!("(cannot reset the peak-RSS counter here; skipping memory figures)");
            return;
        }
        let started = std::time::Instant::now();
        black_box(view(data));
        let elapsed = started.elapsed();
        let peak = status_kib("VmHWM:").unwrap_or(0);
        println!("{name:<24} {:>12} MiB {:>10.2} s", peak.saturating_sub(base) / 1024, elapsed.as_secs_f64());
    }
}

fn timings(c: &mut Criterion) {
    let data = dataset();
    memory_report(&data);
    let mut g = c.benchmark_group("1m_spans");
    g.sample_size(10);
    g.throughput(Throughput::Elements(data.spans.len() as u64));
    for (name, view) in views() {
        g.bench_function(name, |b| b.iter(|| view(black_box(&data))));
    }
    g.finish();
}

criterion_group!(benches, timings);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
