//! OpenTelemetry's API and exporters with ringtrace (feature `opentelemetry`): an SDK span
//! parents a ringtrace span and the other way round, the globally installed propagator carries
//! ringtrace's context (with `request.id` in baggage), and an SDK `SpanExporter` gets every
//! span as a sink, its failures counted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::baggage::BaggageExt;
use opentelemetry::propagation::TextMapCompositePropagator;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use ringtrace_subscriber::otel::{self, OpenTelemetrySpanExt, SpanExporterSink};
use ringtrace_subscriber::{Builder, SpanExt};

/// An exporter that keeps what it is handed (failing every export while `fail` is set), and
/// the resource it was given last.
#[derive(Clone, Debug, Default)]
struct Keep {
    spans: Arc<Mutex<Vec<SpanData>>>,
    resource: Arc<Mutex<Option<Resource>>>,
    fail: Arc<std::sync::atomic::AtomicBool>,
}

impl SpanExporter for Keep {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if self.fail.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(OTelSdkError::InternalFailure("refused".into()));
        }
        self.spans.lock().unwrap().extend(batch);
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        *self.resource.lock().unwrap() = Some(resource.clone());
    }
}

/// The SDK's tracer, its spans kept by a `Keep`.
fn sdk() -> (SdkTracerProvider, Keep) {
    let keep = Keep::default();
    let provider = SdkTracerProvider::builder().with_simple_exporter(keep.clone()).build();
    (provider, keep)
}

#[test]
fn sdk_and_ringtrace_spans_parent_each_other_through_contexts() {
    let (provider, sdk_spans) = sdk();
    let tracer = provider.tracer("caller");
    let exported = Keep::default();
    let sink_keep = exported.clone();
    let sink = SpanExporterSink::new(move || sink_keep).unwrap();
    let (subscriber, guard) =
        Builder::new().node("n").daemon("svc").no_recording().sink(sink).build_subscriber().unwrap();

    // An SDK span, with `request.id` in its context's baggage, parents a ringtrace span, which
    // parents an SDK span in turn.
    let outer = tracer.start("sdk-outer");
    let outer_cx = opentelemetry::Context::current_with_span(outer)
        .with_baggage([KeyValue::new("request.id", "req-42")]);
    let ring_ids = tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("ring-middle");
        span.set_parent(&outer_cx);
        let cx = span.context();
        drop(tracer.start_with_context("sdk-inner", &cx));
        assert_eq!(cx.baggage().get("request.id").map(|v| v.as_str().to_owned()), Some("req-42".into()));
        cx.span().span_context().clone()
    });
    outer_cx.span().end();
    guard.shutdown().unwrap();
    let _ = provider.shutdown();

    let sdk_spans = sdk_spans.spans.lock().unwrap().clone();
    let by_name =
        |n: &str| sdk_spans.iter().find(|s| s.name == n).cloned().unwrap_or_else(|| panic!("no {n}"));
    let (outer, inner) = (by_name("sdk-outer"), by_name("sdk-inner"));
    let middle =
        exported.spans.lock().unwrap().iter().find(|s| s.name == "ring-middle").cloned().expect("exported");
    let trace = outer.span_context.trace_id();
    assert_eq!(middle.span_context.trace_id(), trace, "one trace");
    assert_eq!(inner.span_context.trace_id(), trace);
    assert_eq!(middle.parent_span_id, outer.span_context.span_id(), "the SDK span parents ringtrace's");
    assert!(middle.parent_span_is_remote);
    assert_eq!(inner.parent_span_id, middle.span_context.span_id(), "ringtrace's span parents the SDK's");
    assert_eq!(ring_ids.span_id(), middle.span_context.span_id());
    let request =
        middle.attributes.iter().find(|kv| kv.key.as_str() == "request.id").map(|kv| kv.value.to_string());
    assert_eq!(request.as_deref(), Some("req-42"), "request.id from the baggage");
    let resource = exported.resource.lock().unwrap().clone().expect("a resource");
    let service = resource.get(&opentelemetry::Key::new("service.name")).map(|v| v.to_string());
    assert_eq!(service.as_deref(), Some("svc"));
}

/// A handler as services write them: its span from `#[instrument]`, parented on the request's
/// context.
#[tracing::instrument(skip_all)]
fn handle(headers: &HashMap<String, String>) -> ringtrace_core::propagation::TraceContext {
    let span = tracing::Span::current();
    span.set_parent(&otel::extract(headers));
    span.trace_context().unwrap()
}

#[test]
fn the_global_propagator_carries_ringtrace_context_and_request_id() {
    opentelemetry::global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ]));
    let (subscriber, guard) = Builder::new().node("n").daemon("d").no_recording().build_subscriber().unwrap();
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("client", request.id = "req-7");
        let mut headers = HashMap::new();
        otel::inject(&span, &mut headers);
        let cx = span.trace_context().unwrap();
        assert_eq!(headers.get("traceparent"), Some(&cx.traceparent()), "{headers:?}");
        assert!(headers.get("baggage").is_some_and(|b| b.contains("request.id=req-7")), "{headers:?}");

        // The callee side: extract, parent a new span on it.
        let extracted = otel::extract(&headers);
        let server = tracing::info_span!("server");
        server.set_parent(&extracted);
        let got = server.trace_context().unwrap();
        assert_eq!(got.trace_id, cx.trace_id);
        assert_eq!(got.request_id.as_deref(), Some("req-7"));
        // An `#[instrument]`ed handler parents its own span the same way.
        let handled = handle(&headers);
        assert_eq!(handled.trace_id, cx.trace_id);
        assert_eq!(handled.request_id.as_deref(), Some("req-7"));
        // A carrier without a context changes nothing.
        let lone = tracing::info_span!("lone");
        let before = lone.trace_context().unwrap();
        lone.set_parent(&otel::extract(&HashMap::<String, String>::new()));
        assert_eq!(lone.trace_context().unwrap().trace_id, before.trace_id);
    });
    guard.shutdown().unwrap();
}

#[test]
fn an_exporter_gets_every_span_with_kind_status_and_events_and_its_failures_are_counted() {
    let keep = Keep::default();
    let sink_keep = keep.clone();
    let sink = SpanExporterSink::new(move || sink_keep).unwrap();
    let (subscriber, guard) =
        Builder::new().node("n").daemon("d").no_recording().sink(sink).build_subscriber().unwrap();
    let handle = guard.handle();
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..100u64 {
            let _s = tracing::info_span!("work", i, otel.kind = "server").entered();
            if i == 7 {
                tracing::error!(code = 3, "failed");
            }
        }
        handle.flush(Duration::from_secs(30)).unwrap();
        let spans = keep.spans.lock().unwrap().clone();
        assert_eq!(spans.len(), 100);
        assert!(spans.iter().all(|s| s.span_kind == SpanKind::Server && s.name == "work"));
        let failed: Vec<_> = spans.iter().filter(|s| matches!(s.status, Status::Error { .. })).collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].events.events.len(), 1);
        assert_eq!(failed[0].events.events[0].name, "failed");

        // An exporter that fails: its spans are counted, not lost silently.
        keep.fail.store(true, std::sync::atomic::Ordering::Relaxed);
        for i in 0..20u64 {
            drop(tracing::info_span!("refused", i).entered());
        }
    });
    let stats = guard.shutdown().unwrap();
    assert_eq!(stats.sink_failed_spans, 20, "{stats}");
    assert_eq!(keep.spans.lock().unwrap().len(), 100);
}

#[test]
fn spans_the_exporter_queue_cannot_hold_are_dropped_and_counted() {
    let keep = Keep::default();
    let sink_keep = keep.clone();
    let sink = SpanExporterSink::new(move || sink_keep).unwrap().max_queue_spans(0);
    let (subscriber, guard) =
        Builder::new().node("n").daemon("d").no_recording().sink(sink).build_subscriber().unwrap();
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..50u64 {
            drop(tracing::info_span!("work", i).entered());
        }
    });
    let stats = guard.shutdown().unwrap();
    assert_eq!(stats.sink_dropped_spans, 50, "{stats}");
    assert!(keep.spans.lock().unwrap().is_empty());
}

/// An exporter whose exports never finish (a collector that accepts and never answers).
#[derive(Debug)]
struct Hang;

impl SpanExporter for Hang {
    async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
        std::future::pending().await
    }
}

#[test]
fn an_exporter_that_never_answers_does_not_hold_up_shutdown_and_its_spans_are_counted() {
    let sink = SpanExporterSink::new(|| Hang).unwrap().stop_timeout(Duration::from_millis(200));
    let (subscriber, guard) =
        Builder::new().node("n").daemon("d").no_recording().sink(sink).build_subscriber().unwrap();
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..300u64 {
            drop(tracing::info_span!("work", i).entered());
        }
    });
    // The guard waits 5 s at most; the sink gives up after 200 ms. Whether a batch was being
    // exported then (unconfirmed) or still queued (unsent) depends on timing; the sum does not.
    let stats = guard.shutdown().unwrap();
    assert_eq!(stats.sink_unconfirmed_spans + stats.sink_unsent_spans, 300, "{stats}");
}
