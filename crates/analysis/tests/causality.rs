//! The causality model and the views over it, on hostile input: random parents (missing, self,
//! cycles), duplicate ids, negative and zero durations, producer/consumer kinds. Nothing panics,
//! every span is placed once, and the critical path tiles each root exactly.

use crate::common::{model_span, oracle};
use proptest::prelude::*;
use ringtrace_analysis::{
    build_causality, critical_path, dependency_graph, read_inputs, self_times, time_on_path,
    trace_statistics, CausalityOptions, Dataset, ParentLink, SpanId, SpanKind, StatsGroupBy, TraceId,
};

fn kind(k: u8) -> SpanKind {
    [SpanKind::Internal, SpanKind::Client, SpanKind::Server, SpanKind::Producer, SpanKind::Consumer]
        [k as usize % 5]
}

/// (id, parent id, start, end, kind, process).
type RawSpan = (u64, Option<u64>, u64, u64, SpanKind, usize);

prop_compose! {
    /// (id, parent id, start, end, kind, process) with ids from a small range so that
    /// duplicates, self-parents and cycles happen.
    fn raw_span()(id in 1u64..24, parent in prop::option::of(1u64..28), start in 0u64..1000,
                  len in -50i64..400, k in 0u8..5, process in 0usize..3)
                  -> RawSpan {
        let end = (start as i64 + len).max(0) as u64;
        (id, parent, start, end, kind(k), process)
    }
}

fn dataset(raw: &[RawSpan], traces: u128) -> Dataset {
    let spans = raw
        .iter()
        .enumerate()
        .map(|(i, &(id, parent, start, end, kind, process))| {
            let mut s =
                model_span(id, parent, &format!("node-{process}"), "d", None, "op", start, 0, process);
            s.end_unix_ns = end;
            s.kind = kind;
            s.trace_id = TraceId::new(1 + i as u128 % traces).unwrap();
            s
        })
        .collect();
    Dataset { processes: vec![], spans }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn trees_place_every_span_once_and_paths_tile_each_root(
        raw in prop::collection::vec(raw_span(), 0..40),
        traces in 1u128..3,
        adjust_skew: bool,
    ) {
        let data = dataset(&raw, traces);
        let causality = build_causality(&data, &CausalityOptions { adjust_skew });
        let placed: usize = causality.span_count();
        prop_assert_eq!(placed as u64 + causality.warnings.duplicate_spans_dropped, data.spans.len() as u64);

        for tree in &causality.traces {
            let mut seen = vec![false; data.spans.len()];
            for (i, s) in tree.spans.iter().enumerate() {
                prop_assert!(!seen[s.span]);
                seen[s.span] = true;
                prop_assert_eq!(data.spans[s.span].trace_id, tree.trace_id);
                prop_assert!(s.start_unix_ns <= s.end_unix_ns);
                match s.parent {
                    Some(p) => {
                        prop_assert!(p < i, "parents come first in depth-first order");
                        prop_assert_eq!(s.depth, tree.spans[p].depth + 1);
                        prop_assert!(tree.children(p).contains(&i));
                        prop_assert!(matches!(s.link, ParentLink::Local | ParentLink::CrossProcess));
                    }
                    None => {
                        prop_assert!(s.link.is_root());
                        prop_assert!(tree.roots.contains(&i));
                        prop_assert_eq!(s.depth, 0);
                    }
                }
            }

            let sections = critical_path(&data, tree);
            for s in &sections {
                prop_assert!(s.start_unix_ns < s.end_unix_ns);
                let span = &tree.spans[s.tree_index];
                prop_assert_eq!(span.span, s.span);
            }
            // Each root's sections, latest first, tile the root's interval without gaps.
            let mut root_ranges = tree.roots.clone();
            root_ranges.push(tree.spans.len());
            for w in root_ranges.windows(2) {
                let (root, next) = (w[0], w[1]);
                let run: Vec<_> = sections.iter().filter(|s| (root..next).contains(&s.tree_index)).collect();
                let r = &tree.spans[root];
                let mut at = r.end_unix_ns;
                for s in &run {
                    prop_assert_eq!(s.end_unix_ns, at);
                    at = s.start_unix_ns;
                }
                prop_assert_eq!(at, r.start_unix_ns);
            }
            let on_path: u64 = time_on_path(tree, &sections).iter().sum();
            let roots_total: u64 = tree.roots.iter().map(|&r| tree.spans[r].duration_ns()).sum();
            prop_assert_eq!(on_path, roots_total);

            for (own, s) in self_times(tree).iter().zip(&tree.spans) {
                prop_assert!(*own <= s.duration_ns());
            }
        }

        let graph = dependency_graph(&data, &causality);
        let calls: u64 = graph.services.iter().map(|l| l.call_count).sum();
        let with_parent = causality.traces.iter().flat_map(|t| &t.spans).filter(|s| s.parent.is_some()).count();
        prop_assert_eq!(calls, with_parent as u64);
        let stats = trace_statistics(&data, &causality, StatsGroupBy::Service);
        prop_assert_eq!(stats.rows.iter().map(|r| r.count).sum::<u64>(), placed as u64);
    }
}

#[test]
fn self_times_of_the_jaeger_statistics_fixture() {
    let data = read_inputs(&[oracle("jaeger-trace-stats/testTraceNormal.json")]).unwrap();
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(oracle("jaeger-trace-stats/testTraceNormal.json")).unwrap())
            .unwrap();
    let causality = build_causality(&data, &CausalityOptions::default());
    let tree = &causality.traces[0];
    let own = self_times(tree);
    for (i, s) in tree.spans.iter().enumerate() {
        let id = data.spans[s.span].span_id.to_string();
        let want = doc["expected_self_time_us"][&id].as_u64().unwrap() * 1000;
        assert_eq!(own[i], want, "span {id}");
    }
}

#[test]
fn a_request_across_processes_is_one_tree_with_marked_crossings() {
    let client = |id, parent, name, start, dur| {
        let mut s = model_span(id, parent, "client-1", "client", None, name, start, dur, 0);
        s.kind = SpanKind::Client;
        s
    };
    let server = |id, parent, name, start, dur| {
        let mut s = model_span(id, parent, "node-1", "worker", None, name, start, dur, 1);
        s.kind = SpanKind::Server;
        s
    };
    let data = Dataset {
        processes: vec![],
        spans: vec![
            server(3, Some(2), "handle", 20, 60),
            client(1, None, "request", 0, 100),
            client(2, Some(1), "rpc.call", 10, 80),
        ],
    };
    let causality = build_causality(&data, &CausalityOptions::default());
    let tree = causality.tree(TraceId::new(0xabc).unwrap()).unwrap();
    assert_eq!(tree.roots, [0]);
    let links: Vec<_> = tree.spans.iter().map(|s| (data.spans[s.span].span_id, s.link)).collect();
    let id = |n| SpanId::new(n).unwrap();
    assert_eq!(
        links,
        [(id(1), ParentLink::Root), (id(2), ParentLink::Local), (id(3), ParentLink::CrossProcess)]
    );
    assert_eq!(tree.processes(&data), [0, 1]);
    assert_eq!(tree.cross_process_edges(), 1);
    assert!(causality.warnings.is_empty());
    assert_eq!(causality.clock_skew.len(), 1);
    assert!(!causality.clock_skew[0].detected());
}
