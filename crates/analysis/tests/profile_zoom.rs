//! Zoomed profiles (filters, rates, span time and self time per bucket) and phase detection.

use ringtrace_analysis::profile_output::{to_time_json, write_time_csv, write_time_table};
use ringtrace_analysis::{
    detect_phases, frequency_profile, time_profile, Dataset, GroupBy, Measure, PhaseOptions, ProfileQuery,
    Span, SpanFilter, SpanId, SpanKind, Status, TraceId,
};

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const T0: u64 = 1_700_000_000 * S;

#[allow(clippy::too_many_arguments)]
fn span(
    trace: u128,
    id: u64,
    parent: Option<u64>,
    node: &str,
    daemon: &str,
    name: &str,
    start: u64,
    end: u64,
) -> Span {
    Span {
        trace_id: TraceId::new(trace).unwrap(),
        span_id: SpanId::new(id).unwrap(),
        parent_span_id: parent.map(|p| SpanId::new(p).unwrap()),
        name: name.into(),
        target: Some("app".into()),
        node: node.into(),
        daemon: daemon.into(),
        kind: SpanKind::Internal,
        status: Status::Unset,
        start_unix_ns: T0 + start,
        end_unix_ns: T0 + end,
        request_id: Some(format!("req-{trace}")),
        location: None,
        attributes: vec![],
        events: vec![],
        links: vec![],
        process: 0,
    }
}

/// Request 1 on node-1: `handle` [0.5 s, 2.5 s) with child `read` [1.2 s, 1.8 s).
/// Request 2 on node-2: `handle` [1.0 s, 1.5 s).
fn small() -> Dataset {
    Dataset {
        processes: vec![],
        spans: vec![
            span(1, 1, None, "node-1", "worker", "handle", 500 * MS, 2500 * MS),
            span(1, 2, Some(1), "node-1", "worker", "read", 1200 * MS, 1800 * MS),
            span(2, 3, None, "node-2", "worker", "handle", 1000 * MS, 1500 * MS),
        ],
    }
}

fn query(by: GroupBy, filter: SpanFilter) -> ProfileQuery {
    ProfileQuery { by, bucket_ns: S, filter }
}

#[test]
fn span_time_and_self_time_are_split_at_bucket_edges() {
    let p = time_profile(&small(), &query(GroupBy::Method, SpanFilter::default())).unwrap();
    assert_eq!(p.start_unix_ns, T0);
    assert_eq!(p.bucket_count(), 3);
    let handle = p.groups.iter().find(|g| g.key == "app::handle").unwrap();
    assert_eq!(handle.counts, vec![1, 1, 0]);
    // node-1's handle: [0.5, 1) [1, 2) [2, 2.5); node-2's: [1, 1.5).
    assert_eq!(handle.total_ns, vec![500 * MS, 1000 * MS + 500 * MS, 500 * MS]);
    // read covers [1.2, 1.8) of node-1's handle.
    assert_eq!(handle.self_ns, vec![500 * MS, 400 * MS + 500 * MS, 500 * MS]);
    assert_eq!(handle.self_time_ns, 1900 * MS);
    let read = p.groups.iter().find(|g| g.key == "app::read").unwrap();
    assert_eq!((read.total_ns.clone(), read.self_ns.clone()), (vec![0, 600 * MS, 0], vec![0, 600 * MS, 0]));
    assert_eq!(p.values(handle, Measure::Rate), vec![1.0, 1.0, 0.0]);

    // With 500 ms buckets the rate doubles for the same count.
    let half = time_profile(
        &small(),
        &ProfileQuery { bucket_ns: 500 * MS, ..query(GroupBy::Node, SpanFilter::default()) },
    )
    .unwrap();
    let node1 = half.groups.iter().find(|g| g.key == "node-1").unwrap();
    assert_eq!(half.values(node1, Measure::Rate)[1], 2.0);
}

#[test]
fn without_a_filter_the_counts_are_the_frequency_profile() {
    let data = small();
    for by in GroupBy::ALL {
        let mut zoomed = time_profile(&data, &query(by, SpanFilter::default())).unwrap().frequency();
        let plain = frequency_profile(&data, by, S).unwrap();
        // The zoomed profile also covers the buckets where spans end: those count no starts.
        for g in &mut zoomed.groups {
            assert!(g.counts[plain.bucket_count()..].iter().all(|&c| c == 0));
            g.counts.truncate(plain.bucket_count());
        }
        assert_eq!(zoomed.groups, plain.groups, "{by}");
        assert_eq!(zoomed.start_unix_ns, plain.start_unix_ns);
    }
}

#[test]
fn filters_zoom_in() {
    let data = small();
    let keys = |f: SpanFilter, by: GroupBy| -> Vec<(String, u64, u64)> {
        time_profile(&data, &query(by, f))
            .unwrap()
            .groups
            .into_iter()
            .map(|g| (g.key, g.count, g.total_time_ns))
            .collect()
    };
    assert_eq!(
        keys(SpanFilter { node: Some("node-2".into()), ..Default::default() }, GroupBy::Method),
        [("app::handle".into(), 1, 500 * MS)]
    );
    assert_eq!(
        keys(SpanFilter { request: Some("req-1".into()), ..Default::default() }, GroupBy::Node),
        [("node-1".into(), 2, 2600 * MS)]
    );
    assert_eq!(
        keys(SpanFilter { operation: Some("read".into()), ..Default::default() }, GroupBy::Daemon),
        [("worker".into(), 1, 600 * MS)]
    );
    assert!(
        keys(SpanFilter { daemon: Some("master".into()), ..Default::default() }, GroupBy::Node).is_empty()
    );
    // [1.4 s, 2 s): counts take spans starting there (none), times the parts inside it.
    let range = SpanFilter {
        from_unix_ns: Some(T0 + 1400 * MS),
        to_unix_ns: Some(T0 + 2000 * MS),
        ..Default::default()
    };
    let p = time_profile(&data, &query(GroupBy::Method, range)).unwrap();
    assert_eq!(p.start_unix_ns, T0 + S);
    let handle = p.groups.iter().find(|g| g.key == "app::handle").unwrap();
    assert_eq!(handle.count, 0);
    assert_eq!(handle.total_time_ns, 600 * MS + 100 * MS);
    assert_eq!(handle.self_time_ns, 200 * MS + 100 * MS);
}

#[test]
fn renderings_carry_every_measure() {
    let p = time_profile(
        &small(),
        &query(GroupBy::Node, SpanFilter { daemon: Some("worker".into()), ..Default::default() }),
    )
    .unwrap();
    let mut table = Vec::new();
    write_time_table(&p, Measure::SelfTime, &mut table).unwrap();
    let table = String::from_utf8(table).unwrap();
    assert!(table.starts_with("profile by node (daemon worker): self time, ns per bucket"), "{table}");
    assert!(table.contains("500.0ms"), "{table}");
    let mut csv = Vec::new();
    write_time_csv(&p, &mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    assert_eq!(csv.lines().next(), Some("group,bucket_start_unix_ns,count,rate_per_s,total_ns,self_ns"));
    assert_eq!(csv.lines().count(), 1 + 2 * 3);
    let json = to_time_json(&p, None);
    assert_eq!(json["filter"]["daemon"], "worker");
    let g = &json["groups"][0];
    for key in
        ["key", "total", "counts", "rates_per_s", "total_ns", "self_ns", "total_time_ns", "self_time_ns"]
    {
        assert!(!g[key].is_null(), "{key} in {g}");
    }
    assert!(json.get("phases").is_none());
    assert!(time_profile(
        &small(),
        &ProfileQuery { bucket_ns: 0, ..query(GroupBy::Node, SpanFilter::default()) }
    )
    .is_err());
}

/// Two workers: 20 s of a map phase (`map` and `read`, 10 spans/s) then 20 s of a reduce phase
/// (`reduce` and `write`, 3 spans/s), switching at 20 s and 22 s.
fn map_reduce() -> Dataset {
    let mut spans = Vec::new();
    let mut id = 1;
    for (node, switch_s) in [("node-1", 20), ("node-2", 22)] {
        let mut t = 0;
        while t < 42 * S {
            let map = t < switch_s * S;
            let name = match (map, id % 2) {
                (true, 0) => "map",
                (true, _) => "read",
                (false, 0) => "reduce",
                (false, _) => "write",
            };
            spans.push(span(id as u128, id, None, node, "worker", name, t, t + 10 * MS));
            id += 1;
            t += if map { S / 10 } else { S / 3 };
        }
    }
    Dataset { processes: vec![], spans }
}

#[test]
fn phases_mark_the_map_to_reduce_transition_on_each_node() {
    let data = map_reduce();
    let phases =
        detect_phases(&data, &query(GroupBy::Node, SpanFilter::default()), &PhaseOptions::default()).unwrap();
    let found: Vec<(&str, u64)> =
        phases.iter().map(|p| (p.group.as_str(), (p.at_unix_ns - T0) / S)).collect();
    assert_eq!(found, [("node-1", 20), ("node-2", 22)], "{phases:#?}");
    let p = &phases[0];
    assert!(p.mix_change_bits > 0.99, "disjoint mixes: {p:?}");
    assert!(p.rate_before_per_s > 9.0 && p.rate_after_per_s < 4.0, "{p:?}");
    assert_eq!(p.shifts.len(), 3);
    assert!(p.shifts[0].percent_before == 0.0 || p.shifts[0].percent_after == 0.0);

    // A steady stretch has no phase: the first 20 s alone.
    let steady = SpanFilter { to_unix_ns: Some(T0 + 19 * S), ..Default::default() };
    assert!(detect_phases(&data, &query(GroupBy::Node, steady), &PhaseOptions::default())
        .unwrap()
        .is_empty());
    // By method, the cluster's whole mix is one group.
    let all = detect_phases(&data, &query(GroupBy::Method, SpanFilter::default()), &PhaseOptions::default())
        .unwrap();
    assert!(!all.is_empty() && all.iter().all(|p| p.group == "all"));
    // A rate change alone is a phase: the same mix, ten times slower after 20 s.
    let slow: Vec<Span> = data
        .spans
        .iter()
        .filter(|s| s.node == "node-1" && s.start_unix_ns < T0 + 20 * S)
        .filter(|s| s.start_unix_ns < T0 + 10 * S || (s.span_id.get() % 10 < 2))
        .cloned()
        .collect();
    let phases = detect_phases(
        &Dataset { processes: vec![], spans: slow },
        &query(GroupBy::Node, SpanFilter::default()),
        &PhaseOptions::default(),
    )
    .unwrap();
    assert_eq!(phases.iter().map(|p| (p.at_unix_ns - T0) / S).collect::<Vec<_>>(), [10], "{phases:#?}");
}

#[test]
fn phases_of_nothing() {
    assert!(detect_phases(
        &Dataset::default(),
        &query(GroupBy::Node, SpanFilter::default()),
        &PhaseOptions::default()
    )
    .unwrap()
    .is_empty());
    assert!(detect_phases(
        &small(),
        &ProfileQuery { bucket_ns: 0, ..query(GroupBy::Node, SpanFilter::default()) },
        &PhaseOptions::default()
    )
    .is_err());
}
