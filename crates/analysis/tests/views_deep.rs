//! Deep requests: no view recurses over a span tree (each runs on a 2 MiB stack, in a debug
//! build), and flame graphs are built in time linear in the depth.

use ringtrace_analysis::critical_paths;
use ringtrace_analysis::flame_output::{to_d3_json, write_d3_json, write_folded};
use ringtrace_analysis::report::write_html;
use ringtrace_analysis::report::{build_report, ReportOptions};
use ringtrace_analysis::{
    anomalies, bottlenecks, breakdown, build_causality, dependency_graph, detect_phases, diff, flame_graph,
    render_tree, self_times, time_profile, trace_statistics, trace_tree, AnomalyOptions, CausalityOptions,
    DiffSide, FlameScope, FrameLabel, GroupBy, PhaseOptions, ProfileQuery, SpanFilter, StackMode,
    StatsGroupBy, TraceId,
};

use crate::views_support::{deep_chain, on_small_stack};

const DEEP: u64 = 200_000;

#[test]
fn request_views_of_a_200k_deep_chain_need_no_recursion() {
    on_small_stack(|| {
        let data = deep_chain(DEEP);
        let causality = build_causality(&data, &CausalityOptions::default());
        let tree = &causality.traces[0];
        assert_eq!(tree.spans.iter().map(|s| s.depth).max(), Some(DEEP as usize));
        let paths = critical_paths(&data, &causality);
        // The root after the chain, then the deepest span (the chain covers the root's start).
        assert_eq!(paths[0].sections.len(), 2);
        assert_eq!(paths[0].sections[1].span, DEEP as usize);
        assert_eq!(self_times(tree).iter().filter(|&&t| t > 0).count(), 2);
        let stats = trace_statistics(&data, &causality, StatsGroupBy::ServiceOperation);
        assert_eq!(stats.spans, DEEP + 1);
        assert_eq!(dependency_graph(&data, &causality).services.len(), 1);
        assert_eq!(breakdown(&data, &causality).aggregate.len(), 2);
        assert!(!bottlenecks(&data, &causality, None).ranking.is_empty());
        let side = DiffSide { data: &data, trees: vec![tree] };
        assert_eq!(diff(&side, &side).rows.len(), 2);
        let lines = trace_tree(&data, TraceId::new(1).unwrap());
        assert_eq!(lines.last().map(|l| l.depth), Some(DEEP as usize));
        let mut out = Vec::new();
        render_tree(&data, &lines, &mut out).unwrap();
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), DEEP as usize + 1);
    });
}

#[test]
fn top_views_and_report_of_a_200k_deep_chain_need_no_recursion() {
    on_small_stack(|| {
        let data = deep_chain(DEEP);
        let query = ProfileQuery { by: GroupBy::Method, bucket_ns: 1_000, filter: SpanFilter::default() };
        let profile = time_profile(&data, &query).unwrap();
        assert_eq!(profile.groups.iter().map(|g| g.count).sum::<u64>(), DEEP + 1);
        detect_phases(&data, &query, &PhaseOptions::default()).unwrap();
        anomalies(&data, &AnomalyOptions::default()).unwrap();
        let report = build_report(&data, &ReportOptions::default(), &mut |_| {});
        // The chain is 0.1 % of the time: pruned into the root, its spans still counted.
        assert_eq!(report.flame.frames.len(), 1 + 1);
        assert_eq!(report.flame.span_count(), DEEP + 1);
        let mut html = Vec::new();
        write_html(&report, &mut html).unwrap();
        assert!(html.len() < 10 << 20);
    });
}

#[test]
fn flame_graph_of_a_200k_deep_chain_is_right_and_linear() {
    on_small_stack(|| {
        let data = deep_chain(DEEP);
        let causality = build_causality(&data, &CausalityOptions::default());
        let scope =
            FlameScope { stacks: StackMode::Request, label: FrameLabel::Method, ..Default::default() };
        let graph = flame_graph(&data, &causality, &scope);
        // "all", the root, then one frame per level of the chain.
        assert_eq!(graph.frames.len(), DEEP as usize + 2);
        assert_eq!(graph.total_ns(), 1_000_000);
        assert_eq!(graph.frames.last().unwrap().self_ns, 1_000);
        let folded = graph.folded();
        assert_eq!(folded.len(), 2);
        let deepest = folded.iter().find(|(_, ns)| *ns == 1_000).unwrap();
        assert_eq!(deepest.0.split(';').count(), DEEP as usize + 1);
        assert!(deepest.0.starts_with("all;op;op;"));
        let mut out = Vec::new();
        write_folded(&graph, &mut out).unwrap();
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 2);

        let mut json = Vec::new();
        write_d3_json(&graph, &mut json).unwrap();
        let json = String::from_utf8(json).unwrap();
        assert_eq!(json.matches(r#""children":["#).count(), DEEP as usize + 2);
        assert!(json.starts_with(r#"{"name":"all","value":1000000,"children":[{"name":"#));
        assert!(json.ends_with(&("]}".repeat(DEEP as usize + 2) + "\n")));

        let pruned = graph.prune(1.0);
        assert_eq!(pruned.frames.len(), 2);
        assert_eq!(pruned.frames[1].self_ns, 1_000_000);
        assert_eq!(pruned.span_count(), DEEP + 1);
    });
}

#[test]
fn streamed_d3_json_is_the_json_of_the_value() {
    let data = deep_chain(50);
    let causality = build_causality(&data, &CausalityOptions::default());
    let graph = flame_graph(&data, &causality, &FlameScope::default());
    let mut streamed = Vec::new();
    write_d3_json(&graph, &mut streamed).unwrap();
    assert_eq!(
        String::from_utf8(streamed).unwrap(),
        serde_json::to_string(&to_d3_json(&graph)).unwrap() + "\n"
    );
    let empty = ringtrace_analysis::FlameGraph { frames: vec![], requests: 0 };
    let mut streamed = Vec::new();
    write_d3_json(&empty, &mut streamed).unwrap();
    assert_eq!(
        String::from_utf8(streamed).unwrap(),
        serde_json::to_string(&to_d3_json(&empty)).unwrap() + "\n"
    );
}
