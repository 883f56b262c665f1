//! The top-level views never panic, whatever the spans: any times (ends before starts, the
//! extremes of u64), duplicate ids, parent cycles, odd names, and any options.

use proptest::prelude::*;
use ringtrace_analysis::report::{build_report, write_html, ReportOptions};
use ringtrace_analysis::{
    anomalies, anomaly_output, build_causality, detect_phases, flame_graph, flame_output, time_profile,
    AnomalyOptions, CausalityOptions, Dataset, FlameScope, FrameLabel, GroupBy, PhaseOptions, ProfileQuery,
    RequestSelection, Span, SpanFilter, SpanId, SpanKind, StackMode, Status, TraceId,
};

fn arb_span() -> impl Strategy<Value = Span> {
    (
        1u128..4,
        1u64..12,
        prop::option::of(1u64..12),
        0usize..4,
        prop::sample::select(vec!["a", "b", "c;d", "<e>", ""]),
        prop_oneof![0u64..2_000, Just(u64::MAX), Just(u64::MAX - 1), Just(0)],
        prop_oneof![0u64..2_000, Just(u64::MAX), Just(0)],
    )
        .prop_map(|(trace, id, parent, node, name, start, end)| Span {
            trace_id: TraceId::new(trace).unwrap(),
            span_id: SpanId::new(id).unwrap(),
            parent_span_id: parent.map(|p| SpanId::new(p).unwrap()),
            name: name.into(),
            target: (node % 2 == 0).then(|| "t".to_owned()),
            node: format!("n{node}"),
            daemon: if node == 0 { "solo".into() } else { "w".into() },
            kind: SpanKind::Internal,
            status: Status::Unset,
            start_unix_ns: start,
            end_unix_ns: end,
            request_id: Some(format!("r{trace}")),
            location: None,
            attributes: vec![],
            events: vec![],
            links: vec![],
            process: 0,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn no_view_panics(
        spans in prop::collection::vec(arb_span(), 0..40),
        bucket in prop_oneof![Just(1u64), 1u64..5_000, Just(u64::MAX)],
        window in prop_oneof![Just(None), Just(Some(1u64)), (1u64..5_000).prop_map(Some), Just(Some(u64::MAX))],
        min_percent in prop_oneof![Just(0.0), Just(1.0), Just(100.0), Just(f64::NAN), Just(-5.0)],
        from in prop::option::of(0u64..2_000),
    ) {
        let data = Dataset { processes: vec![], spans };
        let filter = SpanFilter { from_unix_ns: from, to_unix_ns: from.map(|f| f + 500), ..Default::default() };
        for by in GroupBy::ALL {
            let q = ProfileQuery { by, bucket_ns: bucket, filter: filter.clone() };
            let _ = time_profile(&data, &q);
            let _ = detect_phases(&data, &q, &PhaseOptions::default());
        }
        if let Ok(a) = anomalies(&data, &AnomalyOptions { window_ns: window, max_reasons: 3 }) {
            prop_assert!(a.anomalies.iter().all(|x| x.score.is_finite()));
            let _ = anomaly_output::to_json(&a);
        }
        let causality = build_causality(&data, &CausalityOptions::default());
        for stacks in [StackMode::Process, StackMode::Request] {
            let scope = FlameScope { stacks, label: FrameLabel::NodeDaemonMethod, requests: RequestSelection::Slowest(50.0), filter: filter.clone() };
            let g = flame_graph(&data, &causality, &scope).prune(min_percent);
            let _ = flame_output::to_d3_json(&g);
            let mut out = Vec::new();
            flame_output::write_svg(&g, "t", &mut out).unwrap();
        }
        let options = ReportOptions { bucket_ns: Some(bucket), anomaly_window_ns: window, ..Default::default() };
        let report = build_report(&data, &options, &mut |_| {});
        let mut html = Vec::new();
        write_html(&report, &mut html).unwrap();
    }
}
