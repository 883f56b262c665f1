//! The views over the Parquet store, run on DataFusion (`ringtrace_analysis::engine`), give the
//! in-memory views' answers on the same spans: random datasets are written to a store, and
//! statistics, dependency graphs, flame graphs and frequency profiles are compared, field by
//! field.

use proptest::prelude::*;
use ringtrace_analysis::engine::Store;
use ringtrace_analysis::store::write_dir;
use ringtrace_analysis::{
    build_causality, dependency_graph, flame_graph, frequency_profile, trace_statistics, CausalityOptions,
    Dataset, FlameScope, FrameLabel, GroupBy, Process, RequestSelection, Span, SpanId, SpanKind, StackMode,
    StatsGroupBy, Status, TraceId, Value,
};

use crate::common::TempDir;

/// 2026-11-26 23:00 UTC: two hours of spans reach into the next day's partition.
const BASE_NS: u64 = 1_764_198_000_000_000_000;

/// One span's choices: (parent: none / an earlier span / a missing one, node, daemon, name,
/// target, start ms, duration µs, kind, error, peer, copied).
type Choice = (u8, usize, usize, usize, usize, u64, u64, u8, bool, bool, bool);

fn choice() -> impl Strategy<Value = Choice> {
    (
        0u8..10,
        0usize..3,
        0usize..3,
        0usize..4,
        0usize..4,
        0u64..7_200_000,
        0u64..50_000,
        0u8..5,
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.05),
    )
}

fn dataset(traces: &[Vec<Choice>]) -> Dataset {
    let mut data = Dataset::default();
    for (t, choices) in traces.iter().enumerate() {
        let trace_id = TraceId::new(0x5eed_0000 + t as u128 * 7919).unwrap();
        for (i, &(parent, node, daemon, name, target, start_ms, len_us, kind, error, peer, copied)) in
            choices.iter().enumerate()
        {
            let (node, daemon) = (format!("node-{node}"), ["master", "worker", "store"][daemon].to_owned());
            let process = match data.processes.iter().position(|p| p.node == node && p.daemon == daemon) {
                Some(p) => p,
                None => {
                    data.processes.push(Process {
                        node: node.clone(),
                        daemon: daemon.clone(),
                        ..Process::default()
                    });
                    data.processes.len() - 1
                }
            };
            let parent_span_id = match parent {
                0..=1 => None,
                2 => Some(SpanId::new(0xdead).unwrap()),
                _ if i > 0 => Some(SpanId::new(1 + (parent as u64 * 31) % i as u64).unwrap()),
                _ => None,
            };
            let start = BASE_NS + start_ms * 1_000_000 / 7;
            let mut span = Span {
                node,
                daemon,
                kind: [
                    SpanKind::Internal,
                    SpanKind::Client,
                    SpanKind::Server,
                    SpanKind::Producer,
                    SpanKind::Unspecified,
                ][kind as usize],
                target: [
                    None,
                    Some(String::new()),
                    Some("demo::worker".to_owned()),
                    Some("demo::rpc".to_owned()),
                ][target]
                    .clone(),
                process,
                ..Span::new(
                    trace_id,
                    SpanId::new(1 + i as u64).unwrap(),
                    parent_span_id,
                    ["read", "write", "GET", "POST"][name],
                    start,
                    start + len_us * 1_000,
                )
            };
            if error {
                span.status = Status::Error { message: "boom".into() };
            }
            if peer {
                span.attributes.push(("peer.service".into(), Value::Str("postgres".into())));
            }
            span.request_id = Some(format!("req-{t}"));
            if copied {
                data.spans.push(span.clone());
            }
            data.spans.push(span);
        }
    }
    data
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn views_over_the_store_equal_the_in_memory_views(
        traces in prop::collection::vec(prop::collection::vec(choice(), 1..25), 1..8),
        bucket_ms in 1u64..600_000,
        slowest in 1.0f64..100.0,
    ) {
        let data = dataset(&traces);
        let dir = TempDir::new("engine");
        write_dir(&data, dir.path()).unwrap();
        let store = Store::open(dir.path()).unwrap();
        let options = CausalityOptions::default();
        let causality = build_causality(&data, &options);

        for by in StatsGroupBy::ALL {
            prop_assert_eq!(store.trace_statistics(by, &options).unwrap(), trace_statistics(&data, &causality, by));
        }
        prop_assert_eq!(store.dependency_graph(&options).unwrap(), dependency_graph(&data, &causality));
        for (stacks, requests) in [
            (StackMode::Request, RequestSelection::All),
            (StackMode::Process, RequestSelection::Slowest(slowest)),
            (StackMode::Request, RequestSelection::AllButSlowest(slowest)),
        ] {
            let scope = FlameScope { stacks, requests, label: FrameLabel::NodeDaemonMethod, ..FlameScope::default() };
            prop_assert_eq!(store.flame_graph(&scope, &options).unwrap(), flame_graph(&data, &causality, &scope));
        }
        for by in GroupBy::ALL {
            let bucket_ns = bucket_ms * 1_000_000;
            prop_assert_eq!(store.frequency_profile(by, bucket_ns).unwrap(), frequency_profile(&data, by, bucket_ns).unwrap());
        }
        let mut spans = 0;
        let traces_read = store.for_each_trace(&mut |trace| {
            spans += trace.spans.len();
            Ok(())
        }).unwrap();
        prop_assert_eq!(traces_read, traces.len());
        prop_assert_eq!(spans as u64, causality.span_count() as u64 + causality.warnings.duplicate_spans_dropped - data.copies().iter().filter(|c| **c).count() as u64);
    }
}

/// A directory without Parquet files is refused with a message that says what it is not.
#[test]
fn a_directory_without_parquet_files_is_not_a_store() {
    let dir = TempDir::new("engine-empty");
    let e = Store::open(dir.path()).unwrap_err().to_string();
    assert!(e.contains("no Parquet files"), "{e}");
}
