//! Time of the request-causality views: building the trees, critical paths, statistics,
//! dependencies, breakdown, bottlenecks and diff, on synthetic requests shaped like the demo's
//! (see `ringtrace_test_support::synthetic`): 1,000,000 spans in 23,256 requests of 43 spans,
//! and a single request of 100,000 spans.
//!
//! `cargo bench -p ringtrace-analysis --bench causality`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ringtrace_analysis::critical_paths;
use ringtrace_analysis::{
    bottlenecks, breakdown, build_causality, critical_path, dependency_graph, diff, request_tree,
    trace_statistics, CausalityOptions, DiffSide, StatsGroupBy,
};
use ringtrace_test_support::synthetic;

const MANY_SPANS: usize = 1_000_000;
const FANOUT: usize = 8;

fn one_trace(c: &mut Criterion) {
    let data = synthetic::one_trace(100_000);
    let members: Vec<usize> = (0..data.spans.len()).collect();
    let trace = data.spans[0].trace_id;
    let options = CausalityOptions::default();
    let tree = request_tree(&data, trace, &members, &options);
    let mut g = c.benchmark_group("one_trace_100k_spans");
    g.sample_size(20);
    g.throughput(Throughput::Elements(data.spans.len() as u64));
    g.bench_function("tree", |b| b.iter(|| request_tree(&data, trace, black_box(&members), &options)));
    g.bench_function("critical_path", |b| b.iter(|| critical_path(&data, black_box(&tree))));
    g.finish();
}

fn many_traces(c: &mut Criterion) {
    let traces = MANY_SPANS / (3 + 5 * FANOUT);
    let data = synthetic::dataset(traces, FANOUT, 7);
    let causality = build_causality(&data, &CausalityOptions::default());
    let mut g = c.benchmark_group("1m_spans");
    g.sample_size(10);
    g.throughput(Throughput::Elements(data.spans.len() as u64));
    g.bench_function("causality", |b| {
        b.iter(|| build_causality(black_box(&data), &CausalityOptions::default()))
    });
    g.bench_function("causality_adjust_skew", |b| {
        b.iter(|| build_causality(black_box(&data), &CausalityOptions { adjust_skew: true }))
    });
    g.bench_function("critical_path", |b| b.iter(|| critical_paths(&data, black_box(&causality))));
    g.bench_function("stats", |b| {
        b.iter(|| trace_statistics(&data, black_box(&causality), StatsGroupBy::ServiceOperation))
    });
    g.bench_function("deps", |b| b.iter(|| dependency_graph(&data, black_box(&causality))));
    g.bench_function("breakdown", |b| b.iter(|| breakdown(&data, black_box(&causality))));
    g.bench_function("bottlenecks", |b| b.iter(|| bottlenecks(&data, black_box(&causality), None)));
    g.bench_function("diff_slowest_10pct", |b| {
        b.iter(|| {
            let slow = causality.slowest(10.0);
            let mut is_slow = vec![false; causality.traces.len()];
            slow.iter().for_each(|&i| is_slow[i] = true);
            let a = DiffSide {
                data: &data,
                trees: causality.traces.iter().zip(&is_slow).filter(|(_, s)| !**s).map(|(t, _)| t).collect(),
            };
            let b = DiffSide { data: &data, trees: slow.iter().map(|&i| &causality.traces[i]).collect() };
            diff(&a, &b)
        })
    });
    g.finish();
}

criterion_group!(benches, one_trace, many_traces);
criterion_main!(benches);
