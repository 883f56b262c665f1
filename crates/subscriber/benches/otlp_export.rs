//! Sustained OTLP export to a real collector (`rotel-agent`, blackhole exporter) on loopback.
//!
//! Each iteration records `SPANS` spans on one thread and flushes: the time covers recording,
//! the drain (assembly and encoding), the exporter (batching, compression, the network) and the
//! collector's answers, pipelined — so spans/s is the pipeline's sustained rate. Queues and the
//! ring are sized so nothing is dropped (the bench asserts it). After each protocol it prints the
//! CPU time per span of the drain thread, the exporter thread and the collector process, from
//! `/proc` (Linux).
//!
//! `cargo bench -p ringtrace-subscriber --features otlp --bench otlp_export`
//! (needs `rotel-agent`: `scripts/install-test-deps.sh`).

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ringtrace_subscriber::otlp::{Compression, OtlpConfig, OtlpSink, Protocol};
use ringtrace_test_support::{cpu, otlp_collector};
use tracing_subscriber::prelude::*;

const SPANS: u64 = 20_000;

/// CPU nanoseconds of this process's thread named `name` (`/proc/self/task/*/schedstat`).
fn thread_cpu_ns(name: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    let mut total = 0;
    for task in tasks.flatten() {
        let dir = task.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let stat = std::fs::read_to_string(dir.join("schedstat")).unwrap_or_default();
            total += stat.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    total
}

fn export(c: &mut Criterion) {
    let rotel = otlp_collector::Rotel::start_quiet();
    let mut group = c.benchmark_group("otlp_export");
    group.throughput(Throughput::Elements(SPANS));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(8));
    for (name, protocol, compression, endpoint) in [
        ("grpc", Protocol::Grpc, Compression::None, rotel.grpc_endpoint()),
        ("http-protobuf", Protocol::HttpProtobuf, Compression::None, rotel.http_endpoint()),
        ("grpc-gzip", Protocol::Grpc, Compression::Gzip, rotel.grpc_endpoint()),
    ] {
        let sink = OtlpSink::new(
            OtlpConfig::new()
                .endpoint(endpoint)
                .protocol(protocol)
                .compression(compression)
                .max_queue_spans(1 << 20)
                .max_queue_bytes(1 << 30)
                .flush_timeout(Duration::from_secs(60)),
        )
        .unwrap();
        let stats = sink.stats_handle();
        let (layer, guard) = ringtrace_subscriber::Builder::new()
            .node("bench")
            .daemon("otlp-export")
            .no_recording()
            .ring_capacity(1 << 20)
            .flush_timeout(Duration::from_secs(80))
            .sink(sink)
            .build()
            .unwrap();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        let (drain0, exporter0) = (thread_cpu_ns("ringtrace-drain"), thread_cpu_ns("ringtrace-otlp"));
        let collector0 = rotel.pid().map_or(0, cpu::pid_ns);
        let exported0 = stats.stats().exported_spans;
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    tracing::dispatcher::with_default(&dispatch, || {
                        for i in 0..SPANS {
                            let _s = tracing::info_span!("work", i, request.id = "bench").entered();
                        }
                    });
                    // Delivered before the next round: the ring never overflows.
                    guard.flush().unwrap();
                }
                start.elapsed()
            })
        });
        let s = stats.stats();
        let exported = s.exported_spans - exported0;
        // Read before shutdown: it ends both threads.
        let drain = thread_cpu_ns("ringtrace-drain").saturating_sub(drain0);
        let exporter = thread_cpu_ns("ringtrace-otlp").saturating_sub(exporter0);
        let collector = rotel.pid().map_or(0, cpu::pid_ns).saturating_sub(collector0);
        let totals = guard.shutdown().unwrap();
        assert_eq!(
            (s.lost_spans(), totals.dropped_spans),
            (0, 0),
            "{name}: the bench must not drop: {s}; {totals}"
        );
        let per_span = |ns: u64| ns as f64 / exported.max(1) as f64;
        eprintln!(
            "otlp_export/{name}: {exported} spans exported in {} requests; CPU per span: drain {:.0} ns, \
             exporter {:.0} ns, collector {:.0} ns",
            s.requests,
            per_span(drain),
            per_span(exporter),
            per_span(collector),
        );
    }
    group.finish();
}

/// What the application pays per span while the collector is up, and while it is down (the
/// endpoint refuses connections, the exporter retries, the queue is full and drops): recording
/// only, on the application thread. Between rounds (untimed) the drain catches up.
fn record_while_collector_down(c: &mut Criterion) {
    let rotel = otlp_collector::Rotel::start_quiet();
    let down = format!("http://127.0.0.1:{}", otlp_collector::free_port());
    let mut group = c.benchmark_group("otlp_record");
    group.throughput(Throughput::Elements(SPANS));
    group.sample_size(20);
    for (name, endpoint) in [("collector_up", rotel.http_endpoint()), ("collector_down", down)] {
        let sink = OtlpSink::new(
            OtlpConfig::new()
                .endpoint(endpoint)
                .protocol(Protocol::HttpProtobuf)
                .flush_timeout(Duration::ZERO),
        )
        .unwrap();
        let stats = sink.stats_handle();
        let (layer, guard) = ringtrace_subscriber::Builder::new()
            .node("bench")
            .daemon("otlp-record")
            .no_recording()
            .ring_capacity(1 << 18)
            .sink(sink)
            .build()
            .unwrap();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        let mut produced = 0u64;
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    tracing::dispatcher::with_default(&dispatch, || {
                        for i in 0..SPANS {
                            let _s = tracing::info_span!("work", i, request.id = "bench").entered();
                        }
                    });
                    timed += start.elapsed();
                    produced += SPANS;
                    // Untimed: wait until the sink has taken every span (sent, queued or dropped).
                    let deadline = Instant::now() + Duration::from_secs(30);
                    loop {
                        let s = stats.stats();
                        let handed = s.exported_spans + s.lost_spans() + s.queued_spans;
                        if handed >= produced || Instant::now() > deadline {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                timed
            })
        });
        let s = stats.stats();
        drop(dispatch);
        let totals = guard.shutdown().unwrap();
        assert_eq!(totals.dropped_spans, 0, "{name}: the ring must not drop: {totals}");
        eprintln!("otlp_record/{name}: {s}");
    }
    group.finish();
}

criterion_group!(benches, export, record_while_collector_down);
criterion_main!(benches);
