//! `SpanExporterSink` with `opentelemetry-otlp` (gRPC) against a real collector (`rotel-agent`):
//! every span arrives with its ids, parent, attributes and the process's resource.
//!
//! Needs `rotel-agent`: `scripts/install-test-deps.sh`. Without it this test fails and says so.

use std::time::Duration;

use opentelemetry_otlp::WithExportConfig;
use ringtrace_subscriber::otel::SpanExporterSink;
use ringtrace_subscriber::{Builder, SpanExt};
use ringtrace_test_support::otlp_collector::Rotel;

#[test]
fn spans_reach_a_real_collector_through_opentelemetry_otlp() {
    let rotel = Rotel::start();
    let endpoint = rotel.grpc_endpoint();
    let sink = SpanExporterSink::new(move || {
        opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build()
            .expect("exporter")
    })
    .unwrap();
    let (subscriber, guard) = Builder::new()
        .node("node-o")
        .daemon("via-otel")
        .no_recording()
        .sink(sink)
        .build_subscriber()
        .unwrap();
    let (root_trace, root_span) = tracing::subscriber::with_default(subscriber, || {
        let root = tracing::info_span!("root", request.id = "req-5", otel.kind = "server");
        let cx = root.trace_context().unwrap();
        root.in_scope(|| {
            for i in 0..20u64 {
                let _c = tracing::info_span!("child", i).entered();
            }
        });
        (cx.trace_id.to_string(), cx.span_id.to_string())
    });
    guard.shutdown().unwrap();
    let spans = rotel.wait_for(Duration::from_secs(30), |s| s.len() >= 21);
    assert_eq!(spans.len(), 21, "{}", rotel.output());
    let root = spans.iter().find(|s| s.name == "root").expect("root");
    assert_eq!((root.trace_id.as_str(), root.span_id.as_str()), (root_trace.as_str(), root_span.as_str()));
    assert_eq!(root.attr("request.id"), Some("req-5"));
    assert_eq!(root.res("service.name"), Some("via-otel"));
    assert_eq!(root.res("host.name"), Some("node-o"));
    let children: Vec<_> = spans.iter().filter(|s| s.name == "child").collect();
    assert_eq!(children.len(), 20);
    assert!(children.iter().all(|c| c.parent_id == root_span && c.trace_id == root_trace));
}
