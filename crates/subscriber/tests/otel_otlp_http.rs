//! `SpanExporterSink` with `opentelemetry-otlp` over HTTP/protobuf (its hyper client) against a
//! real collector (`rotel-agent`), the exporter configured the way operators do it: by
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` alone. A file of its own, as the variable is the whole
//! process's.
//!
//! Needs `rotel-agent`: `scripts/install-test-deps.sh`. Without it this test fails and says so.

use std::time::Duration;

use opentelemetry_otlp::WithHttpConfig;
use ringtrace_subscriber::otel::SpanExporterSink;
use ringtrace_subscriber::{Builder, SpanExt};
use ringtrace_test_support::otlp_collector::Rotel;

#[test]
fn spans_reach_a_real_collector_over_otlp_http_configured_by_env() {
    let rotel = Rotel::start();
    let endpoint = format!("http://127.0.0.1:{}/v1/traces", rotel.http_port);
    // SAFETY: set before any thread of this test binary reads the environment (the only test
    // here, before the sink's thread starts).
    unsafe { std::env::set_var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &endpoint) };
    let sink = SpanExporterSink::new(|| {
        opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_headers([("x-test".to_owned(), "ringtrace".to_owned())].into())
            .build()
            .expect("exporter")
    })
    .unwrap();
    let (subscriber, guard) = Builder::new()
        .node("node-h")
        .daemon("via-otel-http")
        .no_recording()
        .sink(sink)
        .build_subscriber()
        .unwrap();
    let (root_trace, root_span) = tracing::subscriber::with_default(subscriber, || {
        let root = tracing::info_span!("root", request.id = "req-h");
        let cx = root.trace_context().unwrap();
        root.in_scope(|| {
            for i in 0..30u64 {
                let _c = tracing::info_span!("child", i).entered();
            }
        });
        (cx.trace_id.to_string(), cx.span_id.to_string())
    });
    let stats = guard.shutdown().unwrap();
    let spans = rotel.wait_for(Duration::from_secs(30), |s| s.len() >= 31);
    assert_eq!(spans.len(), 31, "{stats:?}\n{}", rotel.output());
    let root = spans.iter().find(|s| s.name == "root").expect("root");
    assert_eq!((root.trace_id.as_str(), root.span_id.as_str()), (root_trace.as_str(), root_span.as_str()));
    assert_eq!(root.attr("request.id"), Some("req-h"));
    assert_eq!(root.res("service.name"), Some("via-otel-http"));
    assert_eq!(root.res("host.name"), Some("node-h"));
    let children: Vec<_> = spans.iter().filter(|s| s.name == "child").collect();
    assert_eq!(children.len(), 30);
    assert!(children.iter().all(|c| c.parent_id == root_span && c.trace_id == root_trace));
}
