//! Every view counts a span read twice — the same file read twice, a retried batch — once.

use ringtrace_analysis::report::{build_report, ReportOptions};
use ringtrace_analysis::{
    anomalies, build_causality, dependency_graph, detect_phases, flame_graph, frequency_profile,
    time_profile, top_methods, trace_statistics, trace_tree, AnomalyOptions, CausalityOptions, Dataset,
    FlameScope, FrequencyCounter, GroupBy, PhaseOptions, ProfileQuery, SpanFilter, StatsGroupBy, TraceId,
};

use crate::views_support::{dataset, span};

/// Two requests over a frontend and an api daemon on two nodes.
fn once() -> Dataset {
    let (f1, a1, a2) = (("node-1", "frontend", 0), ("node-1", "api", 1), ("node-2", "api", 2));
    let mut spans = Vec::new();
    for t in 1..=2u128 {
        let base = t as u64 * 100;
        let off = t as u64 * 1_000_000_000;
        spans.push(span(t, base + 1, None, "GET /", f1, off, off + 900));
        spans.push(span(t, base + 2, Some(base + 1), "POST", a1, off + 100, off + 400));
        spans.push(span(t, base + 3, Some(base + 1), "POST", a2, off + 450, off + 800));
        spans.push(span(t, base + 4, Some(base + 3), "store", a2, off + 500, off + 700));
    }
    dataset(spans)
}

/// `once` with every span read again as from a second copy of each file (new process numbers),
/// and one span repeated inside its own process (a collector's retry).
fn twice() -> Dataset {
    let once = once();
    let mut spans = once.spans.clone();
    let n = once.processes.len();
    spans.extend(once.spans.iter().map(|s| ringtrace_analysis::Span { process: s.process + n, ..s.clone() }));
    spans.push(once.spans[3].clone());
    dataset(spans)
}

#[test]
fn copies_are_found_by_one_rule() {
    let twice = twice();
    let copies = twice.copies();
    assert_eq!(copies.iter().filter(|&&c| c).count(), once().spans.len() + 1);
    assert!(copies[..once().spans.len()].iter().all(|&c| !c));
    // Same ids, different content: not a copy.
    let mut other = twice.spans[0].clone();
    other.end_unix_ns += 1;
    assert!(!other.is_copy_of(&twice.spans[0]));
    assert!(twice.spans[8].is_copy_of(&twice.spans[0]));
}

#[test]
fn profiles_count_a_span_read_twice_once() {
    let (once, twice) = (once(), twice());
    for by in GroupBy::ALL {
        assert_eq!(
            frequency_profile(&twice, by, 1_000_000).unwrap(),
            frequency_profile(&once, by, 1_000_000).unwrap()
        );
        // Streamed, as `ringtrace profile` reads.
        let mut counter = FrequencyCounter::new(by, 1_000_000).unwrap();
        twice.spans.iter().for_each(|s| counter.add(s));
        assert_eq!(counter.finish().unwrap(), frequency_profile(&once, by, 1_000_000).unwrap());
        let query = ProfileQuery { by, bucket_ns: 1_000_000, filter: SpanFilter::default() };
        assert_eq!(time_profile(&twice, &query).unwrap(), time_profile(&once, &query).unwrap());
        assert_eq!(
            detect_phases(&twice, &query, &PhaseOptions::default()).unwrap(),
            detect_phases(&once, &query, &PhaseOptions::default()).unwrap()
        );
    }
    assert_eq!(top_methods(&twice, 10), top_methods(&once, 10));
    let options = AnomalyOptions::default();
    assert_eq!(anomalies(&twice, &options).unwrap(), anomalies(&once, &options).unwrap());
}

#[test]
fn trees_and_request_views_count_a_span_read_twice_once() {
    let (once, twice) = (once(), twice());
    let trace = TraceId::new(1).unwrap();
    assert_eq!(trace_tree(&twice, trace).len(), trace_tree(&once, trace).len());

    let options = CausalityOptions::default();
    let (c1, c2) = (build_causality(&once, &options), build_causality(&twice, &options));
    assert_eq!(c2.span_count(), c1.span_count());
    assert_eq!(c2.warnings.duplicate_spans_dropped, once.spans.len() as u64 + 1);
    assert_eq!(c2.warnings.duplicate_span_ids, 0);
    for by in StatsGroupBy::ALL {
        assert_eq!(trace_statistics(&twice, &c2, by), trace_statistics(&once, &c1, by));
    }
    assert_eq!(dependency_graph(&twice, &c2), dependency_graph(&once, &c1));
    let scope = FlameScope::default();
    assert_eq!(flame_graph(&twice, &c2, &scope), flame_graph(&once, &c1, &scope));

    let (r1, r2) = (
        build_report(&once, &ReportOptions::default(), &mut |_| {}),
        build_report(&twice, &ReportOptions::default(), &mut |_| {}),
    );
    assert_eq!(r2.summary.spans, r1.summary.spans);
    assert_eq!(r2.top_methods, r1.top_methods);
    assert_eq!(r2.flame, r1.flame);
    assert_eq!(r2.by_node, r1.by_node);
}
