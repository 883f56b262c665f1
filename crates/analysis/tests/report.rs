//! The HTML report's content, without a browser: every section, no external resource, and no
//! way for span names to inject markup. (The browser test is `crates/cli/tests/report.rs`.)

use ringtrace_analysis::report::{build_report, write_html, ReportOptions, ReportStep};
use ringtrace_analysis::{Dataset, Process, Span, SpanId, SpanKind, Status, TraceId};

const MS: u64 = 1_000_000;
const T0: u64 = 1_700_000_000_000_000_000;

fn span(
    trace: u128,
    id: u64,
    parent: Option<u64>,
    process: usize,
    name: &str,
    start_ms: u64,
    end_ms: u64,
) -> Span {
    let (node, daemon) =
        [("client-1", "client"), ("node-1", "worker"), ("node-2", "worker"), ("node-3", "worker")][process];
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
        start_unix_ns: T0 + start_ms * MS,
        end_unix_ns: T0 + end_ms * MS,
        request_id: Some(format!("req-{trace}")),
        location: None,
        attributes: vec![],
        events: vec![],
        links: vec![],
        process,
    }
}

/// 60 requests: the client calls a worker (node-1, -2, -3 in turn), which reads; node-2 reads
/// 10× slower. One span name tries to inject markup.
fn dataset() -> Dataset {
    let mut spans = Vec::new();
    for t in 0..60u64 {
        let worker = 1 + (t % 3) as usize;
        let read = if worker == 2 { 20 } else { 2 };
        let base = t * 30;
        let id = t * 10 + 1;
        spans.push(span(t as u128 + 1, id, None, 0, "request", base, base + read + 6));
        spans.push(span(t as u128 + 1, id + 1, Some(id), worker, "handle", base + 1, base + read + 5));
        let name = if t == 0 { "</script><script>alert(1)</script>" } else { "read" };
        spans.push(span(t as u128 + 1, id + 2, Some(id + 1), worker, name, base + 2, base + 2 + read));
    }
    let processes = ["client", "worker", "worker", "worker"]
        .iter()
        .zip(["client-1", "node-1", "node-2", "node-3"])
        .map(|(d, n)| Process {
            node: n.into(),
            daemon: (*d).into(),
            dropped_spans: u64::from(n == "node-2") * 7,
            ..Default::default()
        })
        .collect();
    Dataset { processes, spans }
}

fn render(data: &Dataset) -> (String, Vec<ReportStep>) {
    let mut steps = Vec::new();
    let report = build_report(data, &ReportOptions::default(), &mut |s| steps.push(s));
    let mut html = Vec::new();
    write_html(&report, &mut html).unwrap();
    (String::from_utf8(html).unwrap(), steps)
}

#[test]
fn every_section_is_there_and_every_step_reported() {
    let data = dataset();
    let (html, steps) = render(&data);
    assert_eq!(steps, ReportStep::ALL);
    for id in
        ["summary", "frequency", "methods", "anomalies", "critical-path", "dependencies", "flame", "volume"]
    {
        assert!(html.contains(&format!("<section id=\"{id}\">")), "section {id}");
    }
    for chart in [
        "data-line-chart=\"by_node\"",
        "data-line-chart=\"by_daemon\"",
        "data-chart=\"critical-paths\"",
        "data-chart=\"dependency-graph\"",
        "data-chart=\"flame-graph\"",
        "data-chart=\"volume-by-node\"",
        "data-chart=\"volume-by-daemon\"",
    ] {
        assert!(html.contains(chart), "{chart}");
    }
    // The ranking puts the slow node first; losses are shown.
    let anomalies = &html[html.find("<section id=\"anomalies\">").unwrap()..];
    let (n1, n2, n3) = (
        anomalies.find("node-1").unwrap(),
        anomalies.find("node-2").unwrap(),
        anomalies.find("node-3").unwrap(),
    );
    assert!(n2 < n1 && n2 < n3, "node-2 ranks first");
    assert!(html.contains("<td class=\"num bad\">7</td>"), "node-2's dropped spans");
    // Axes say what they measure.
    assert!(html.contains("spans started per second"));
}

#[test]
fn the_page_is_self_contained_and_escapes_names() {
    let (html, _) = render(&dataset());
    let lower = html.to_ascii_lowercase();
    for needle in [" src=", "<link", "@import", "url(http", "href=\"http", "href=\"//", "<iframe", "<img"] {
        assert!(!lower.contains(needle), "external resource: {needle}");
    }
    assert!(lower.matches("<script").count() == 2, "the data and the code, nothing injected");
    assert!(html.contains("&lt;/script&gt;&lt;script&gt;alert(1)"), "escaped in the markup");
    let data =
        html.split("id=\"report-data\">").nth(1).and_then(|rest| rest.split("</script>").next()).unwrap();
    assert!(data.starts_with('{') && !data.contains('<'), "no markup can hide in the chart data");
}

#[test]
fn an_empty_dataset_still_makes_a_page_without_empty_charts() {
    let (html, _) = render(&Dataset::default());
    assert!(html.contains("<section id=\"summary\">"));
    assert!(!html.contains("data-chart="), "no chart is drawn without data");
    assert!(!html.contains("data-line-chart="));
}
