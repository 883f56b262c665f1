//! OTLP export against a real collector (`rotel-agent`): delivery over gRPC and HTTP with the
//! right resource and attributes, the flush at shutdown, and a collector outage.
//!
//! Needs `rotel-agent`: `scripts/install-test-deps.sh`. Without it these tests fail and say so.
#![cfg(feature = "otlp")]

use std::collections::{BTreeSet, HashMap, HashSet};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringtrace_subscriber::otlp::{Compression, OtlpConfig, OtlpSink, Protocol, RetryPolicy, LOSS_SPAN_NAME};
use ringtrace_subscriber::{Builder, FnSink, ResourceInfo, SpanData};
use ringtrace_test_support::otlp_collector::{ReceivedSpan, Rotel};
use tracing_subscriber::prelude::*;

/// Resource attributes are process-wide, and the outage test wants the machine to itself: the
/// in-process tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// (trace id, span id, parent id) in the collector's hex form, as recorded.
type Ids = (String, String, String);

fn recorded_ids() -> (Arc<Mutex<Vec<Ids>>>, impl ringtrace_subscriber::Sink) {
    let store: Arc<Mutex<Vec<Ids>>> = Arc::default();
    let s = store.clone();
    let sink = FnSink(move |batch: &[SpanData], _: &ResourceInfo| {
        s.lock().unwrap().extend(batch.iter().map(|d| {
            (
                d.trace_id.to_string(),
                d.span_id.to_string(),
                d.parent_span_id.map(|p| p.to_string()).unwrap_or_default(),
            )
        }))
    });
    (store, sink)
}

fn of_service<'a>(spans: &'a [ReceivedSpan], service: &str) -> Vec<&'a ReceivedSpan> {
    spans.iter().filter(|s| s.res("service.name") == Some(service) && s.name != LOSS_SPAN_NAME).collect()
}

const REQUESTS: usize = 20;
/// Per request: the root, five steps, one failing span.
const SPANS_PER_REQUEST: usize = 7;

fn record_requests(tag: &str) {
    for r in 0..REQUESTS {
        let request_id = format!("req-{tag}-{r}");
        let root = tracing::info_span!("handle_request", request.id = %request_id, otel.kind = "server", r);
        let _root = root.enter();
        for step in 0..5 {
            let span = tracing::info_span!("step", step, otel.name = tracing::field::Empty);
            if step == 0 {
                span.record("otel.name", "first_step");
            }
            let _s = span.enter();
            tracing::info!(bytes = 512, "step done");
        }
        let failing = tracing::info_span!("call_backend", otel.kind = "client");
        failing.in_scope(|| tracing::error!("backend unavailable"));
    }
}

#[test]
fn grpc_and_http_deliver_every_span_with_resource_and_attributes() {
    let _serial = serial();
    let rotel = Rotel::start();
    let cases = [
        ("grpc", Protocol::Grpc, Compression::None, rotel.grpc_endpoint()),
        ("grpc-gzip", Protocol::Grpc, Compression::Gzip, rotel.grpc_endpoint()),
        ("http", Protocol::HttpProtobuf, Compression::None, rotel.http_endpoint()),
        ("http-gzip", Protocol::HttpProtobuf, Compression::Gzip, rotel.http_endpoint()),
    ];
    for (tag, protocol, compression, endpoint) in cases {
        let service = format!("svc-{tag}");
        let node = format!("node-{tag}");
        let sink = OtlpSink::new(
            OtlpConfig::new()
                .endpoint(&endpoint)
                .protocol(protocol)
                .compression(compression)
                .schedule_delay(Duration::from_millis(20)),
        )
        .unwrap();
        let stats = sink.stats_handle();
        let (recorded, ids_sink) = recorded_ids();
        let (layer, guard) = Builder::new()
            .node(&node)
            .daemon(&service)
            .no_recording()
            .resource_attribute("deployment.environment", "test")
            .sink(ids_sink)
            .sink(sink)
            .build()
            .unwrap();
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            record_requests(tag)
        });
        let totals = guard.shutdown().unwrap();
        let expected = REQUESTS * SPANS_PER_REQUEST;
        assert_eq!(totals.recorded_spans as usize, expected, "{tag}: {totals}");
        let s = stats.stats();
        assert_eq!((s.exported_spans as usize, s.lost_spans()), (expected, 0), "{tag}: {s}");

        let all = rotel.wait_for(Duration::from_secs(20), |all| of_service(all, &service).len() >= expected);
        let spans = of_service(&all, &service);
        let received: BTreeSet<Ids> =
            spans.iter().map(|s| (s.trace_id.clone(), s.span_id.clone(), s.parent_id.clone())).collect();
        let recorded: BTreeSet<Ids> = recorded.lock().unwrap().iter().cloned().collect();
        assert_eq!(spans.len(), expected, "{tag}: every span once");
        assert_eq!(received, recorded, "{tag}: the same trace ids, span ids and parents as recorded");

        let pid = std::process::id().to_string();
        let by_id: HashMap<&str, &ReceivedSpan> = spans.iter().map(|s| (s.span_id.as_str(), *s)).collect();
        for s in &spans {
            assert_eq!(s.res("host.name"), Some(node.as_str()), "{tag}");
            assert_eq!(s.res("process.pid"), Some(pid.as_str()));
            assert_eq!(s.res("telemetry.sdk.name"), Some("ringtrace"));
            assert_eq!(s.res("deployment.environment"), Some("test"));
            assert_eq!(s.res("service.instance.id").map(str::len), Some(36));
            assert_eq!(s.res("ringtrace.otlp_dropped_spans"), Some("0"));
            for key in ["code.filepath", "code.lineno", "code.namespace", "thread.id", "level", "target"] {
                assert!(s.attr(key).is_some(), "{tag}: {} lacks {key}: {:?}", s.name, s.attributes);
            }
            assert!(s.attr("code.filepath").unwrap().ends_with("otlp_export.rs"));
            // request.id on every span, the root's.
            let mut root = *s;
            while let Some(parent) = by_id.get(root.parent_id.as_str()) {
                root = parent;
            }
            assert_eq!(root.name, "handle_request");
            assert!(root.parent_id.is_empty());
            assert_eq!(s.trace_id, root.trace_id);
            assert_eq!(s.attr("request.id"), Some(format!("req-{tag}-{}", root.attr("r").unwrap()).as_str()));
            match s.name.as_str() {
                "handle_request" => assert_eq!(s.kind, "SPAN_KIND_SERVER"),
                "first_step" | "step" => {
                    assert_eq!(s.events, ["step done"]);
                    assert_eq!(s.name == "first_step", s.attr("step") == Some("0"), "otel.name renames");
                    assert_eq!(s.kind, "SPAN_KIND_INTERNAL");
                }
                "call_backend" => {
                    assert_eq!(s.kind, "SPAN_KIND_CLIENT");
                    assert_eq!(s.status_code, "STATUS_CODE_ERROR", "an error event sets the status");
                    assert_eq!(s.events, ["backend unavailable"]);
                }
                other => panic!("unexpected span {other}"),
            }
        }
    }
}

/// Spans the child records and exits.
const SHORT_SPANS: usize = 2000;
const CHILD_ENV: &str = "RINGTRACE_OTLP_TEST_CHILD";
/// Set: the child runs on one CPU (its threads, the drain and the exporter included).
const ONE_CPU_ENV: &str = "RINGTRACE_OTLP_TEST_ONE_CPU";

fn pin_to_one_cpu() {
    // SAFETY: `set` is a zeroed cpu_set_t, a plain bit set, valid for CPU_ZERO/CPU_SET and for
    // sched_setaffinity, which reads `size_of` bytes of it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(rc, 0, "sched_setaffinity: {}", std::io::Error::last_os_error());
}

/// The short program of `shutdown_flush_delivers_every_span`: run only as its child process.
#[test]
#[ignore = "run as a child process by shutdown_flush_delivers_every_span"]
fn short_program() {
    assert_eq!(std::env::var(CHILD_ENV).as_deref(), Ok("1"), "run by shutdown_flush_delivers_every_span");
    if std::env::var_os(ONE_CPU_ENV).is_some() {
        pin_to_one_cpu();
    }
    let guard = ringtrace_subscriber::init().expect("init from the environment");
    for i in 0..SHORT_SPANS / 2 {
        let outer = tracing::info_span!("short_outer", i);
        let _o = outer.enter();
        tracing::info_span!("short_inner", i).in_scope(|| {});
    }
    drop(guard);
}

#[test]
fn shutdown_flush_delivers_every_span() {
    let rotel = Rotel::start();
    let dir = std::env::temp_dir().join(format!("ringtrace-otlp-short-{}", std::process::id()));
    for (protocol, endpoint, one_cpu) in [
        ("grpc", rotel.grpc_endpoint(), false),
        ("http/protobuf", rotel.http_endpoint(), false),
        ("grpc", rotel.grpc_endpoint(), true),
    ] {
        let service =
            format!("short-{}{}", protocol.replace('/', "-"), if one_cpu { "-one-cpu" } else { "" });
        let mut child = Command::new(std::env::current_exe().unwrap());
        if one_cpu {
            child.env(ONE_CPU_ENV, "1");
        }
        let out = child
            .args(["--exact", "short_program", "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, "1")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
            .env("OTEL_SERVICE_NAME", &service)
            .env("RINGTRACE_NODE", "node-short")
            .env("RINGTRACE_DIR", &dir)
            .env("RINGTRACE_RING_CAPACITY", "65536")
            .env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=short%20run,team=tracing")
            // Only full batches go before shutdown: the rest rides on the flush at exit.
            .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
            .env("RUST_LOG", "info")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{service}: child failed: {stderr}");
        assert!(!stderr.contains("lost") && !stderr.contains("dropped"), "{service}: {stderr}");
        let all =
            rotel.wait_for(Duration::from_secs(20), |all| of_service(all, &service).len() >= SHORT_SPANS);
        let spans = of_service(&all, &service);
        let ids: HashSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
        assert_eq!((spans.len(), ids.len()), (SHORT_SPANS, SHORT_SPANS), "{service}: all spans, once each");
        assert!(spans.iter().all(|s| s.res("host.name") == Some("node-short")
            && s.res("deployment.environment") == Some("short run")
            && s.res("team") == Some("tracing")));
        let inner: Vec<_> = spans.iter().filter(|s| s.name == "short_inner").collect();
        assert_eq!(inner.len(), SHORT_SPANS / 2);
        assert!(inner.iter().all(|s| ids.contains(s.parent_id.as_str())), "parents delivered too");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Polls `done` until it holds or `timeout` passes; returns whether it held.
fn wait_until(timeout: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while !done() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn exports_from_inside_a_current_thread_tokio_runtime() {
    let _serial = serial();
    let rotel = Rotel::start();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (stats, totals) = runtime.block_on(async {
        let sink = OtlpSink::new(OtlpConfig::new().endpoint(rotel.grpc_endpoint()).protocol(Protocol::Grpc))
            .unwrap();
        let stats = sink.stats_handle();
        let (layer, guard) =
            Builder::new().node("node-tokio").daemon("svc-tokio").no_recording().sink(sink).build().unwrap();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        for i in 0..100 {
            let span = tracing::dispatcher::with_default(&dispatch, || tracing::info_span!("async_step", i));
            // The span stays open across an await: the runtime's one thread is busy elsewhere.
            tokio::time::sleep(Duration::from_micros(10)).await;
            tracing::dispatcher::with_default(&dispatch, || span.in_scope(|| tracing::info!("resumed")));
            drop(span);
        }
        drop(dispatch);
        (stats, guard.shutdown().unwrap())
    });
    assert_eq!(totals.recorded_spans, 100);
    assert_eq!(stats.stats().exported_spans, 100, "{}", stats.stats());
    let all = rotel.wait_for(Duration::from_secs(20), |all| of_service(all, "svc-tokio").len() >= 100);
    let spans = of_service(&all, "svc-tokio");
    assert_eq!(spans.len(), 100);
    assert!(spans.iter().all(|s| s.events == ["resumed"]));
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

const QUEUE_SPANS: usize = 1000;
const QUEUE_BYTES: usize = 512 * 1024;
/// A generous bound on the whole test process while the collector is down.
const RSS_BOUND: u64 = 256 << 20;

#[test]
fn collector_outage_never_blocks_counts_every_loss_and_export_resumes() {
    let _serial = serial();
    for (tag, protocol) in [("grpc", Protocol::Grpc), ("http", Protocol::HttpProtobuf)] {
        outage(tag, protocol);
    }
}

fn outage(tag: &str, protocol: Protocol) {
    let first = Rotel::start();
    let (grpc_port, http_port) = (first.grpc_port, first.http_port);
    let endpoint = match protocol {
        Protocol::Grpc => first.grpc_endpoint(),
        _ => first.http_endpoint(),
    };
    let service = format!("svc-outage-{tag}");
    let sink = OtlpSink::new(
        OtlpConfig::new()
            .endpoint(endpoint)
            .protocol(protocol)
            .max_queue_spans(QUEUE_SPANS)
            .max_queue_bytes(QUEUE_BYTES)
            .max_export_batch_spans(200)
            .schedule_delay(Duration::from_millis(20))
            .timeout(Duration::from_secs(2))
            .retry(RetryPolicy {
                initial_backoff: Duration::from_millis(50),
                max_backoff: Duration::from_millis(400),
                max_elapsed: Duration::from_secs(600),
            }),
    )
    .unwrap();
    let stats = sink.stats_handle();
    let (layer, guard) = Builder::new()
        .node("node-outage")
        .daemon(&service)
        .no_recording()
        .ring_capacity(1 << 16)
        .flush_timeout(Duration::from_secs(10))
        .sink(sink)
        .build()
        .unwrap();
    let handle = guard.handle();
    let mut second = None;
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        // A: collector up.
        for i in 0..1000 {
            tracing::info_span!("phase_a", i).in_scope(|| {});
        }
        handle.flush(Duration::from_secs(15)).unwrap();
        let seen = first.wait_for(Duration::from_secs(20), |all| {
            of_service(all, &service).iter().filter(|s| s.name == "phase_a").count() >= 1000
        });
        assert_eq!(of_service(&seen, &service).len(), 1000, "{tag}: phase A delivered");

        // B: collector killed. Recording goes on; the queue stays within its bounds.
        let mut first = first;
        first.kill();
        let mut peak_rss = 0;
        for burst in 0..40 {
            for i in 0..500 {
                tracing::info_span!("phase_b", burst, i).in_scope(|| {});
            }
            // Let the drain keep up so the OTLP queue, not the ring, is what overflows.
            std::thread::sleep(Duration::from_millis(5));
            let s = stats.stats();
            assert!(
                s.queued_spans <= QUEUE_SPANS as u64 && s.queued_bytes <= QUEUE_BYTES as u64,
                "{tag}: {s:?}"
            );
            peak_rss = peak_rss.max(rss_bytes());
        }
        let during = stats.stats();
        assert!(
            during.dropped_spans > 0 && during.failed_attempts > 0,
            "{tag}: the outage shows: {during:?}"
        );
        assert!(during.peak_queued_spans <= QUEUE_SPANS as u64, "{tag}: {during:?}");
        assert!(during.peak_queued_bytes <= QUEUE_BYTES as u64, "{tag}: {during:?}");
        assert!(peak_rss < RSS_BOUND, "{tag}: resident memory {peak_rss} B during the outage");

        // C: collector back on the same ports; the application was never restarted.
        let back = Rotel::start_on(grpc_port, http_port);
        handle.flush(Duration::from_secs(15)).unwrap();
        assert!(
            wait_until(Duration::from_secs(30), || stats.stats().queued_spans == 0),
            "{tag}: the queue drains once the collector is back: {:?}",
            stats.stats()
        );
        for i in 0..1000 {
            tracing::info_span!("phase_c", i).in_scope(|| {});
        }
        handle.flush(Duration::from_secs(15)).unwrap();
        back.wait_for(Duration::from_secs(30), |all| {
            of_service(all, &service).iter().filter(|s| s.name == "phase_c").count() >= 1000
        });
        second = Some((first, back));
    });
    let totals = guard.shutdown().unwrap();
    let (first, back) = second.unwrap();
    let s = stats.stats();
    let mut received: Vec<ReceivedSpan> = first.spans();
    received.extend(back.spans());
    let ours: Vec<&ReceivedSpan> = of_service(&received, &service);
    let unique: HashSet<&str> = ours.iter().map(|s| s.span_id.as_str()).collect();
    let count = |name: &str| ours.iter().filter(|s| s.name == name).count();
    assert_eq!(totals.recorded_spans, 1000 + 20_000 + 1000, "{tag}: the ring kept everything: {totals}");
    assert_eq!((count("phase_a"), count("phase_c")), (1000, 1000), "{tag}: before and after the outage");
    assert_eq!(unique.len(), ours.len(), "{tag}: no span delivered twice");
    assert_eq!(ours.len() as u64, s.exported_spans, "{tag}: {s}");
    assert_eq!(
        totals.recorded_spans - ours.len() as u64,
        s.lost_spans(),
        "{tag}: the loss counters equal the spans not delivered: {s}"
    );
    assert_eq!(s.lost_spans(), s.dropped_spans, "{tag}: only queue-full drops: {s}");
    assert_eq!(count("phase_b") as u64, 20_000 - s.dropped_spans);
    // The backend is told: the counters ride on the resource, and a loss span reports them.
    let last = ours.iter().rev().find(|s| s.name == "phase_c").unwrap();
    assert_eq!(last.res("ringtrace.otlp_dropped_spans"), Some(s.dropped_spans.to_string().as_str()));
    let reported = received
        .iter()
        .filter(|r| r.name == LOSS_SPAN_NAME && r.res("service.name") == Some(service.as_str()))
        .filter_map(|r| r.attr("ringtrace.otlp_dropped_spans")?.parse::<u64>().ok())
        .max();
    assert_eq!(reported, Some(s.dropped_spans), "{tag}: a ringtrace.loss span carries the final count");
}
