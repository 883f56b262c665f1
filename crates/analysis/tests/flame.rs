//! Flame graphs: stacks, total and self time, scoping, pruning and the three renderings.

use ringtrace_analysis::flame_output::{to_d3_json, write_folded, write_svg};
use ringtrace_analysis::{
    build_causality, flame_graph, CausalityOptions, Dataset, FlameGraph, FlameScope, FrameLabel,
    RequestSelection, Span, SpanFilter, SpanId, SpanKind, StackMode, Status, TraceId,
};

const T0: u64 = 1_700_000_000_000_000_000;

struct Trace {
    spans: Vec<Span>,
    trace: u128,
}

impl Trace {
    fn new(trace: u128) -> Self {
        Self { spans: Vec::new(), trace }
    }

    /// Adds a span; times are microseconds after `T0`.
    fn span(
        &mut self,
        id: u64,
        parent: Option<u64>,
        process: usize,
        name: &str,
        start_us: u64,
        end_us: u64,
    ) -> &mut Self {
        let (node, daemon) =
            [("client-1", "client"), ("node-0", "master"), ("node-1", "worker"), ("node-2", "worker")]
                [process];
        self.spans.push(Span {
            trace_id: TraceId::new(self.trace).unwrap(),
            span_id: SpanId::new(id + ((self.trace as u64) << 20)).unwrap(),
            parent_span_id: parent.map(|p| SpanId::new(p + ((self.trace as u64) << 20)).unwrap()),
            name: name.into(),
            target: None,
            node: node.into(),
            daemon: daemon.into(),
            kind: SpanKind::Internal,
            status: Status::Unset,
            start_unix_ns: T0 + start_us * 1_000,
            end_unix_ns: T0 + end_us * 1_000,
            request_id: Some(format!("req-{}", self.trace)),
            location: None,
            attributes: vec![],
            events: vec![],
            links: vec![],
            process,
        });
        self
    }
}

/// One request: client `request` [0, 100) → `call` [10, 90) → master `handle` [20, 80) with two
/// parallel children `a` [30, 60) and `b` [40, 70) on node-1 and node-2, and a `spawned` child of
/// `a` [50, 75) that outlives it.
fn request(trace: u128, scale: u64) -> Vec<Span> {
    let mut t = Trace::new(trace);
    t.span(1, None, 0, "request", 0, 100 * scale)
        .span(2, Some(1), 0, "call", 10, 90 * scale)
        .span(3, Some(2), 1, "handle", 20, 80 * scale)
        .span(4, Some(3), 2, "a", 30, 60)
        .span(5, Some(3), 3, "b", 40, 70)
        .span(6, Some(4), 2, "spawned", 50, 75);
    t.spans
}

fn graph(data: &Dataset, scope: &FlameScope) -> FlameGraph {
    flame_graph(data, &build_causality(data, &CausalityOptions::default()), scope)
}

fn folded(g: &FlameGraph) -> Vec<(String, u64)> {
    g.folded()
}

fn method_scope() -> FlameScope {
    FlameScope { label: FrameLabel::Method, ..Default::default() }
}

#[test]
fn self_time_subtracts_the_union_of_children_clipped_to_the_parent() {
    let data = Dataset { processes: vec![], spans: request(1, 1) };
    let g = graph(&data, &method_scope());
    let us = |n: u64| n * 1_000;
    assert_eq!(
        folded(&g),
        vec![
            ("request".to_owned(), us(20)),
            ("request;call".to_owned(), us(20)),
            // handle [20, 80): a ∪ b = [30, 70).
            ("request;call;handle".to_owned(), us(20)),
            // a [30, 60): spawned covers [50, 60) of it.
            ("request;call;handle;a".to_owned(), us(20)),
            ("request;call;handle;a;spawned".to_owned(), us(25)),
            ("request;call;handle;b".to_owned(), us(30)),
        ]
    );
    // Totals are self plus children: the parallel children make `handle` wider than its 60 µs.
    let handle = g.frames.iter().position(|f| f.name == "handle").unwrap();
    assert_eq!(g.frames[handle].total_ns, us(20 + 20 + 25 + 30));
    assert_eq!(g.total_ns(), us(135));
    assert_eq!(g.span_count(), 6);
    assert_eq!(g.requests, 1);
}

#[test]
fn process_stacks_start_at_each_process_and_labels_name_daemons() {
    let data = Dataset { processes: vec![], spans: request(1, 1) };
    let g = graph(
        &data,
        &FlameScope { stacks: StackMode::Process, label: FrameLabel::DaemonMethod, ..Default::default() },
    );
    let stacks: Vec<String> = folded(&g).into_iter().map(|(s, _)| s).collect();
    assert_eq!(
        stacks,
        [
            "client/request",
            "client/request;client/call",
            "master/handle",
            "worker/a",
            "worker/a;worker/spawned",
            "worker/b"
        ]
    );
    let g = graph(&data, &FlameScope { label: FrameLabel::NodeDaemonMethod, ..Default::default() });
    assert!(folded(&g).iter().any(|(s, _)| s.ends_with("node-0/master/handle;node-2/worker/b")));
}

#[test]
fn scopes_select_daemon_node_time_request_operation_and_slowest() {
    let mut spans = request(1, 1);
    spans.extend(request(2, 10)); // ten times slower at the top: 1000 µs
    let data = Dataset { processes: vec![], spans };
    let us = |n: u64| n * 1_000;

    // One daemon: only worker time counts, under the full request stack.
    let scope = FlameScope {
        label: FrameLabel::Method,
        filter: SpanFilter { daemon: Some("worker".into()), ..Default::default() },
        ..Default::default()
    };
    let g = graph(&data, &scope);
    assert_eq!(g.total_ns(), 2 * us(20 + 25 + 30));
    assert!(folded(&g).iter().all(|(s, _)| s.starts_with("request;call;handle;")));

    // One node.
    let scope = FlameScope {
        label: FrameLabel::Method,
        filter: SpanFilter { node: Some("node-2".into()), ..Default::default() },
        ..Default::default()
    };
    assert_eq!(graph(&data, &scope).total_ns(), 2 * us(30));

    // A time range clips: [45, 55) µs covers a's [45, 50) (spawned covers the rest), spawned
    // [50, 55) and b [45, 55), in both requests; handle is fully covered by its children there.
    let filter =
        SpanFilter { from_unix_ns: Some(T0 + us(45)), to_unix_ns: Some(T0 + us(55)), ..Default::default() };
    let g = graph(&data, &FlameScope { label: FrameLabel::Method, filter, ..Default::default() });
    let request_self = folded(&g).iter().find(|(s, _)| s == "request;call;handle;a").map(|x| x.1);
    assert_eq!(request_self, Some(2 * us(5)));
    assert_eq!(
        g.total_ns(),
        2 * us(5 + 5 + 10),
        "request, call and handle are covered by their children there"
    );

    // One request, by request id and by trace id.
    let by_id = FlameScope {
        label: FrameLabel::Method,
        filter: SpanFilter { request: Some("req-2".into()), ..Default::default() },
        ..Default::default()
    };
    let by_trace = FlameScope {
        label: FrameLabel::Method,
        filter: SpanFilter { request: Some(format!("{:032x}", 2)), ..Default::default() },
        ..Default::default()
    };
    assert_eq!(graph(&data, &by_id), graph(&data, &by_trace));
    assert_eq!(graph(&data, &by_id).requests, 1);
    // request 110 + call 110 + handle 780 − 40 + a 20 + spawned 25 + b 30.
    assert_eq!(graph(&data, &by_id).total_ns(), us(1035));

    // An operation and everything under it.
    let scope = FlameScope {
        label: FrameLabel::Method,
        filter: SpanFilter { operation: Some("a".into()), ..Default::default() },
        ..Default::default()
    };
    assert_eq!(graph(&data, &scope).total_ns(), 2 * us(20 + 25));

    // The slowest request against the rest.
    let slow = graph(
        &data,
        &FlameScope {
            label: FrameLabel::Method,
            requests: RequestSelection::Slowest(50.0),
            ..Default::default()
        },
    );
    let rest = graph(
        &data,
        &FlameScope {
            label: FrameLabel::Method,
            requests: RequestSelection::AllButSlowest(50.0),
            ..Default::default()
        },
    );
    let all = graph(&data, &method_scope());
    assert_eq!((slow.requests, rest.requests), (1, 1));
    assert_eq!(slow.total_ns() + rest.total_ns(), all.total_ns());
    assert_eq!(rest.total_ns(), us(135));
}

#[test]
fn pruning_folds_small_frames_into_their_parent_and_keeps_widths() {
    let data = Dataset { processes: vec![], spans: request(1, 1) };
    let g = graph(&data, &method_scope());
    // spawned is 25/135 = 18.5 %, b 22 %, a (with spawned) 33 %: at 25 % spawned and b go.
    let p = g.prune(25.0);
    assert_eq!(p.total_ns(), g.total_ns());
    assert_eq!(p.span_count(), g.span_count());
    let names: Vec<&str> = p.frames.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["all", "request", "call", "handle", "a"]);
    let a = &p.frames[4];
    assert_eq!((a.self_ns, a.total_ns), (45_000, 45_000));
    let handle = &p.frames[3];
    assert_eq!(handle.self_ns, 20_000 + 30_000, "b's time stays in handle");
    assert_eq!(p.folded().iter().map(|x| x.1).sum::<u64>(), g.total_ns());
    assert_eq!(g.prune(0.0), g);
    assert_eq!(g.prune(f64::NAN), g);
    assert_eq!(g.prune(100.0).frames.len(), 2, "only the root and its child of 100 % stay");
}

#[test]
fn renderings_agree() {
    let data = Dataset { processes: vec![], spans: request(1, 1) };
    let g = graph(&data, &method_scope());
    let mut text = Vec::new();
    write_folded(&g, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert_eq!(text.lines().count(), 6);
    assert!(text.contains("request;call;handle;b 30000\n"), "{text}");

    let json = to_d3_json(&g);
    assert_eq!(json["name"], "all");
    assert_eq!(json["value"], 135_000);
    // Every node's value is at least the sum of its children's (the rest is self time).
    fn check(v: &serde_json::Value) -> u64 {
        let children: u64 = v["children"].as_array().unwrap().iter().map(check).sum();
        let value = v["value"].as_u64().unwrap();
        assert!(value >= children, "{v}");
        value
    }
    check(&json);
    assert_eq!(json["children"][0]["children"][0]["children"][0]["name"], "handle");

    let mut svg = Vec::new();
    write_svg(&g, "test", &mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.contains("<svg") && svg.contains("spawned"), "{}", &svg[..200.min(svg.len())]);
}

#[test]
fn empty_and_odd_inputs_do_not_panic() {
    let empty = graph(&Dataset::default(), &FlameScope::default());
    assert_eq!(empty.total_ns(), 0);
    assert_eq!(to_d3_json(&empty)["value"], 0);
    let mut svg = Vec::new();
    write_svg(&empty, "empty", &mut svg).unwrap();
    assert!(String::from_utf8(svg).unwrap().contains("no span time"));
    // A span ending before it starts, a name with the folded separator and a line break.
    let mut t = Trace::new(9);
    t.span(1, None, 0, "odd;name\nhere", 50, 10).span(2, Some(1), 0, "child", 0, u64::MAX / 2_000);
    let data = Dataset { processes: vec![], spans: t.spans };
    let g = graph(&data, &FlameScope::default());
    for (stack, _) in g.folded() {
        assert!(!stack.contains('\n'));
        assert_eq!(stack.matches(';').count(), stack.matches('/').count() - 1, "{stack}");
    }
}
