//! Which OTLP exporter, measured in one run against one real collector (`rotel-agent`, blackhole
//! exporter, gRPC on loopback): ringtrace's own exporter (`OtlpSink`), `opentelemetry-otlp`'s
//! through `SpanExporterSink`, and the peer stack users run today, `tracing-opentelemetry` with the
//! SDK's batch processor and `opentelemetry-otlp`.
//!
//! Each configuration records `SPANS` spans (one integer field, one thread, as fast as it can)
//! and waits until they are delivered, `ROUNDS` times. Printed per configuration: spans
//! delivered (counted by the exporter, or by ringtrace's exporter's statistics), wall time per
//! round (the pipeline's sustained rate), and CPU per delivered span of the whole process (every
//! thread: application, drain, assembler, exporter, runtime) and of the collector.
//!
//! Then the same three with the collector down: what recording costs the application thread,
//! how long shutdown takes, and which spans are accounted for.
//!
//! `cargo bench -p ringtrace-subscriber --features otlp,opentelemetry --bench exporters`
//! (needs `rotel-agent`: `scripts/install-test-deps.sh`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter,
};
use opentelemetry_sdk::Resource;
use ringtrace_subscriber::otel::SpanExporterSink;
use ringtrace_subscriber::otlp::{OtlpConfig, OtlpSink, Protocol};
use ringtrace_subscriber::Sink;
use ringtrace_test_support::{cpu, otlp_collector};
use tracing_subscriber::prelude::*;

const SPANS: u64 = 50_000;
const ROUNDS: usize = 5;

/// An exporter that counts the spans its inner exporter delivered.
#[derive(Debug)]
struct Counting<E> {
    inner: E,
    delivered: Arc<AtomicU64>,
}

impl<E: SpanExporter> SpanExporter for Counting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let r = self.inner.export(batch).await;
        if r.is_ok() {
            self.delivered.fetch_add(n, Ordering::Relaxed);
        }
        r
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

fn otlp_exporter(endpoint: &str) -> opentelemetry_otlp::SpanExporter {
    opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .expect("exporter")
}

/// Records `SPANS` spans under `dispatch`.
fn record(dispatch: &tracing::Dispatch) {
    tracing::dispatcher::with_default(dispatch, || {
        for i in 0..SPANS {
            let _s = tracing::info_span!("work", i).entered();
        }
    });
}

/// Runs `ROUNDS` rounds of `record` then `deliver` (which waits until every span so far is
/// delivered and returns how many were); prints the figures.
fn measure(name: &str, collector: Option<u32>, dispatch: &tracing::Dispatch, deliver: &dyn Fn() -> u64) {
    let (cpu0, col0) = (cpu::process_ns(), collector.map_or(0, cpu::pid_ns));
    let mut walls = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        record(dispatch);
        deliver();
        walls.push(start.elapsed());
    }
    let delivered = deliver();
    let cpu = cpu::process_ns() - cpu0;
    let col = collector.map_or(0, cpu::pid_ns) - col0;
    walls.sort();
    let produced = SPANS * ROUNDS as u64;
    println!(
        "| {name} | {delivered} of {produced} | {:.0} | {:.0} | {:.0} |",
        walls[ROUNDS / 2].as_secs_f64() * 1e9 / SPANS as f64,
        cpu as f64 / delivered.max(1) as f64,
        col as f64 / delivered.max(1) as f64,
    );
}

/// The collector down (nothing listens on the endpoint): what recording costs the application
/// thread, how long shutdown takes, and what is accounted for.
fn outage(name: &str, dispatch: &tracing::Dispatch, shutdown: &dyn Fn() -> String) {
    let start = Instant::now();
    record(dispatch);
    let recording = start.elapsed();
    let start = Instant::now();
    let accounted = shutdown();
    println!(
        "| {name} | {:.0} | {:.1} | {accounted} |",
        recording.as_secs_f64() * 1e9 / SPANS as f64,
        start.elapsed().as_secs_f64()
    );
}

/// `RingLayer` under the registry, its spans to `sink` only, with rings and waits large enough
/// that the bench itself drops nothing.
fn ring_layer(sink: impl Sink) -> (tracing::Dispatch, ringtrace_subscriber::Guard) {
    let (layer, guard) = ringtrace_subscriber::Builder::new()
        .node("bench")
        .daemon("exporters")
        .no_recording()
        .ring_capacity(1 << 20)
        .flush_timeout(Duration::from_secs(80))
        .quiet(true)
        .sink(sink)
        .build()
        .unwrap();
    (tracing::Dispatch::new(tracing_subscriber::registry().with(layer)), guard)
}

/// The peer stack: `tracing-opentelemetry` with the SDK's batch processor (queue large enough
/// to drop nothing) and `opentelemetry-otlp` to `endpoint`, made inside the `tokio` runtime its
/// gRPC client needs (returned, to keep it running); `delivered` counts what it delivers.
fn peer_stack(
    endpoint: &str,
    delivered: &Arc<AtomicU64>,
) -> (tokio::runtime::Runtime, SdkTracerProvider, tracing::Dispatch) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let exporter = {
        let _in = runtime.enter();
        Counting { inner: otlp_exporter(endpoint), delivered: delivered.clone() }
    };
    let config =
        BatchConfigBuilder::default().with_max_queue_size(1 << 20).with_max_export_batch_size(512).build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(exporter).with_batch_config(config).build())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("bench"));
    (runtime, provider, tracing::Dispatch::new(tracing_subscriber::registry().with(layer)))
}

/// What a ringtrace collector with one sink accounted for at shutdown.
fn lost_by_cause(guard: &std::cell::RefCell<Option<ringtrace_subscriber::Guard>>) -> String {
    let s = guard.borrow_mut().take().unwrap().shutdown().unwrap();
    format!(
        "{} lost, counted by cause (failed {}, dropped {}, unsent {}, unconfirmed {})",
        s.sink_lost_spans(),
        s.sink_failed_spans,
        s.sink_dropped_spans,
        s.sink_unsent_spans,
        s.sink_unconfirmed_spans
    )
}

fn outages() {
    let endpoint = format!("http://127.0.0.1:{}", otlp_collector::free_port());
    println!("\n| exporter, collector down | app thread ns per span | shutdown s | spans accounted for (of {SPANS}) |");
    println!("|---|---:|---:|---|");
    let sink = OtlpSink::new(
        OtlpConfig::new()
            .endpoint(endpoint.clone())
            .protocol(Protocol::Grpc)
            .flush_timeout(Duration::from_secs(2)),
    )
    .unwrap();
    let (dispatch, guard) = ring_layer(sink);
    let guard = std::cell::RefCell::new(Some(guard));
    outage("ringtrace's `OtlpSink`", &dispatch, &|| lost_by_cause(&guard));

    let e = endpoint.clone();
    let sink = SpanExporterSink::new(move || otlp_exporter(&e)).unwrap().max_queue_spans(1 << 20);
    let (dispatch, guard) = ring_layer(sink);
    let guard = std::cell::RefCell::new(Some(guard));
    outage("`opentelemetry-otlp` via `SpanExporterSink`", &dispatch, &|| lost_by_cause(&guard));

    let delivered = Arc::new(AtomicU64::new(0));
    let (runtime, provider, dispatch) = peer_stack(&endpoint, &delivered);
    outage("`tracing-opentelemetry`, batch processor, `opentelemetry-otlp`", &dispatch, &|| {
        let r = provider.shutdown();
        format!(
            "{} delivered; the rest not counted anywhere (shutdown: {r:?})",
            delivered.load(Ordering::Relaxed)
        )
    });
    drop(runtime);
}

fn main() {
    outages();
    let rotel = otlp_collector::Rotel::start_quiet();
    let endpoint = rotel.grpc_endpoint();
    let pid = rotel.pid();
    println!("\n| exporter (gRPC to rotel) | delivered | wall ns per span (median round) | process CPU ns per span | collector CPU ns per span |");
    println!("|---|---:|---:|---:|---:|");

    // ringtrace, its own exporter.
    let sink = OtlpSink::new(
        OtlpConfig::new()
            .endpoint(endpoint.clone())
            .protocol(Protocol::Grpc)
            .max_queue_spans(1 << 20)
            .max_queue_bytes(1 << 30)
            .flush_timeout(Duration::from_secs(60)),
    )
    .unwrap();
    let stats = sink.stats_handle();
    let (dispatch, guard) = ring_layer(sink);
    measure("registry + `RingLayer`, ringtrace's `OtlpSink`", pid, &dispatch, &|| {
        guard.flush().unwrap();
        stats.stats().exported_spans
    });
    drop(dispatch);
    guard.shutdown().unwrap();

    // ringtrace, opentelemetry-otlp through `SpanExporterSink`.
    let delivered = Arc::new(AtomicU64::new(0));
    let counted = delivered.clone();
    let e = endpoint.clone();
    let sink = SpanExporterSink::new(move || Counting { inner: otlp_exporter(&e), delivered: counted })
        .unwrap()
        .max_queue_spans(1 << 20);
    let (dispatch, guard) = ring_layer(sink);
    let handle = guard.handle();
    measure("registry + `RingLayer`, `opentelemetry-otlp` via `SpanExporterSink`", pid, &dispatch, &|| {
        handle.flush(Duration::from_secs(60)).unwrap();
        delivered.load(Ordering::Relaxed)
    });
    drop(dispatch);
    let stats = guard.shutdown().unwrap();
    eprintln!("SpanExporterSink: {stats}");

    // The peer: tracing-opentelemetry, the SDK's batch processor, opentelemetry-otlp.
    let delivered = Arc::new(AtomicU64::new(0));
    let (runtime, provider, dispatch) = peer_stack(&endpoint, &delivered);
    measure(
        "registry + `tracing-opentelemetry`, batch processor, `opentelemetry-otlp`",
        pid,
        &dispatch,
        &|| {
            provider.force_flush().unwrap();
            delivered.load(Ordering::Relaxed)
        },
    );
    drop(dispatch);
    let _ = provider.shutdown();
    drop(runtime);
}
