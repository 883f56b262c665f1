//! Text writers stay bounded: a 70,000-character name (beyond `std::fmt`'s width limit of
//! 65,535) goes through every table writer whole, without a panic and without padding the other
//! rows to its width; a 40,000-deep request prints without a huge indentation.

use ringtrace_analysis::causality_output;
use ringtrace_analysis::{
    anomalies, anomaly_output, bottlenecks, bottlenecks_output, breakdown, breakdown_output, build_causality,
    dependency_graph, deps_output, diff, diff_output, frequency_profile, profile_output, render_tree,
    stats_output, time_profile, trace_statistics, trace_tree, AnomalyOptions, CausalityOptions, DiffSide,
    GroupBy, Measure, ProfileQuery, SpanFilter, StatsGroupBy, TraceId,
};
use ringtrace_analysis::{critical_path_output, critical_paths};

use crate::views_support::{dataset, deep_chain, on_small_stack, span};

fn long_named() -> (ringtrace_analysis::Dataset, String) {
    let long = "x".repeat(70_000);
    let mut spans = Vec::new();
    // The long name as operation, daemon and node; a daemon on two nodes for the anomalies.
    for (t, node) in [(1u128, long.as_str()), (2, "node-2")] {
        for i in 0..6u64 {
            let id = t as u64 * 100 + i;
            let place = (node, long.as_str(), t as usize - 1);
            let start = i * 1_000_000;
            spans.push(span(
                t,
                id,
                (i > 0).then_some(t as u64 * 100),
                &long,
                place,
                start,
                start + 500_000 + i,
            ));
        }
        let peer = (node, "short", t as usize + 1);
        spans.push(span(t, t as u64 * 100 + 50, Some(t as u64 * 100), "call", peer, 10, 20));
    }
    (dataset(spans), long)
}

/// Every line but those holding the long name stays short: the columns were not padded to it.
fn check(what: &str, out: Vec<u8>, long: &str) {
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains(long), "{what}: the long name is shown whole");
    for line in text.lines().filter(|l| !l.contains(long)) {
        assert!(line.chars().count() < 1_000, "{what}: a line of {} characters", line.chars().count());
    }
}

#[test]
fn profile_tables_take_a_name_longer_than_the_width_limit() {
    let (data, long) = long_named();
    for by in GroupBy::ALL {
        let mut out = Vec::new();
        profile_output::write_table(&frequency_profile(&data, by, 1_000_000).unwrap(), &mut out).unwrap();
        check("profile", out, &long);
        let query = ProfileQuery { by, bucket_ns: 1_000_000, filter: SpanFilter::default() };
        let profile = time_profile(&data, &query).unwrap();
        for measure in Measure::ALL {
            let mut out = Vec::new();
            profile_output::write_time_table(&profile, measure, &mut out).unwrap();
            check("zoomed profile", out, &long);
        }
    }
}

#[test]
fn stats_deps_and_anomaly_tables_take_a_name_longer_than_the_width_limit() {
    let (data, long) = long_named();
    let causality = build_causality(&data, &CausalityOptions::default());
    for by in StatsGroupBy::ALL {
        let mut out = Vec::new();
        stats_output::write_table(&trace_statistics(&data, &causality, by), &mut out).unwrap();
        check("stats", out, &long);
    }
    let mut out = Vec::new();
    deps_output::write_table(&dependency_graph(&data, &causality), &mut out).unwrap();
    check("deps", out, &long);
    let result = anomalies(&data, &AnomalyOptions::default()).unwrap();
    assert!(!result.anomalies.is_empty());
    let mut out = Vec::new();
    anomaly_output::write_table(&result, &mut out).unwrap();
    check("anomalies", out, &long);
}

#[test]
fn request_tables_and_trees_take_a_name_longer_than_the_width_limit() {
    let (data, long) = long_named();
    let causality = build_causality(&data, &CausalityOptions::default());
    let mut out = Vec::new();
    causality_output::write_table(&causality_output::Requests::of(&data, &causality), &mut out).unwrap();
    causality_output::write_tree(&data, &causality.traces[0], &mut out).unwrap();
    render_tree(&data, &trace_tree(&data, TraceId::new(1).unwrap()), &mut out).unwrap();
    check("requests", out, &long);
    let mut out = Vec::new();
    critical_path_output::write_table(&data, &causality, &critical_paths(&data, &causality), &mut out)
        .unwrap();
    breakdown_output::write_table(&breakdown(&data, &causality), 2, &mut out).unwrap();
    bottlenecks_output::write_table(&bottlenecks(&data, &causality, None), None, &mut out).unwrap();
    let a = DiffSide { data: &data, trees: vec![&causality.traces[0]] };
    let b = DiffSide { data: &data, trees: vec![&causality.traces[1]] };
    diff_output::write_table(&diff(&a, &b), ("a", "b"), None, &mut out).unwrap();
    check("critical path, breakdown, bottlenecks, diff", out, &long);
}

#[test]
fn printed_trees_of_a_40k_deep_chain_stay_bounded() {
    on_small_stack(|| {
        let depth = 40_000u64;
        let data = deep_chain(depth);
        let causality = build_causality(&data, &CausalityOptions::default());
        let mut out = Vec::new();
        causality_output::write_tree(&data, &causality.traces[0], &mut out).unwrap();
        assert!(out.len() < 200 * depth as usize, "{} bytes", out.len());
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), depth as usize + 2);
        assert!(text.lines().last().unwrap().contains(&format!("… (depth {depth}) ")));

        let mut out = Vec::new();
        render_tree(&data, &trace_tree(&data, TraceId::new(1).unwrap()), &mut out).unwrap();
        assert!(out.len() < 200 * depth as usize, "{} bytes", out.len());
        assert!(String::from_utf8(out).unwrap().contains(&format!("… (depth {depth}) ")));
    });
}
