//! The critical path of an orphan root: ours, where Jaeger UI gives none.

use ringtrace_analysis::{build_causality, critical_path, CausalityOptions, ParentLink};

use crate::views_support::{dataset, span, T0};

#[test]
fn an_orphan_root_gets_its_own_path_after_the_true_root() {
    let p = ("node-1", "svc", 0);
    // Root 1 [0, 100); orphan 2 (parent 99 was never received) [20, 50) with child 3 [30, 40).
    let data = dataset(vec![
        span(1, 1, None, "root", p, 0, 100),
        span(1, 2, Some(99), "orphan", p, 20, 50),
        span(1, 3, Some(2), "child", p, 30, 40),
    ]);
    let causality = build_causality(&data, &CausalityOptions::default());
    let tree = &causality.traces[0];
    let orphan = tree.spans.iter().position(|s| s.span == 1).unwrap();
    assert_eq!(tree.spans[orphan].link, ParentLink::MissingParent);
    let path: Vec<(u64, u64, u64)> = critical_path(&data, tree)
        .iter()
        .map(|s| (data.spans[s.span].span_id.get(), s.start_unix_ns - T0, s.end_unix_ns - T0))
        .collect();
    // Jaeger UI would give only [(1, 0, 100)]: its clipping drops the orphan and its child.
    assert_eq!(path, [(1, 0, 100), (2, 40, 50), (3, 30, 40), (2, 20, 30)]);
}
