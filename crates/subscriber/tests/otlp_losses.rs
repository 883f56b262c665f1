//! OTLP export on a bad day: every span handed to the exporter is counted in exactly one cause,
//! in `Stats` and in the recording; a hanging collector never stalls the recording; messages
//! say whether the collector is unreachable, slow or rejecting; a server that does not speak
//! the protocol is given up at once; a malformed endpoint fails at init.
//!
//! The faults are fake servers on 127.0.0.1 (or nothing listening) and, for the good day,
//! `rotel-agent` (`scripts/install-test-deps.sh`). Timeouts are short so that the fault decides
//! the outcome; the tests assert counts and words, never durations.
#![cfg(feature = "otlp")]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringtrace_subscriber::otlp::{OtlpConfig, OtlpSink, OtlpStats, Protocol, RetryPolicy};
use ringtrace_subscriber::{Builder, Stats};
use ringtrace_test_support::otlp_collector::{
    free_port, http_server, never_answering_server, recorded_spans, recording_counters, Rotel,
};
use tracing_subscriber::prelude::*;

/// The tests take turns: the stall test wants the CPU to itself, and the others are short.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ringtrace-otlp-losses-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Polls `done` until it holds or a generous deadline passes; returns whether it held.
fn eventually(done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Short attempts and a short retry budget: a fault decides each batch's fate quickly.
fn quick(endpoint: &str, protocol: Protocol) -> OtlpConfig {
    OtlpConfig::new()
        .endpoint(endpoint)
        .protocol(protocol)
        .timeout(Duration::from_millis(200))
        .schedule_delay(Duration::from_millis(10))
        .retry(RetryPolicy {
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(20),
            max_elapsed: Duration::from_millis(300),
        })
        // The wait at shutdown ends when every batch is settled, long before this.
        .flush_timeout(Duration::from_secs(60))
}

const SPANS: u64 = 50;

/// Records `SPANS` spans with a recording and `config`'s OTLP sink; returns the final totals,
/// the exporter's counters and the counters of the recording's last frame.
fn run(tag: &str, config: OtlpConfig) -> (Stats, OtlpStats, BTreeMap<String, i64>) {
    let dir = temp_dir(tag);
    let sink = OtlpSink::new(config).unwrap();
    let otlp = sink.stats_handle();
    let (layer, guard) = Builder::new()
        .node("node-losses")
        .daemon(format!("svc-losses-{tag}"))
        .recording_dir(&dir)
        .flush_timeout(Duration::from_secs(90))
        .sink(sink)
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        for i in 0..SPANS {
            tracing::info_span!("lossy", i).in_scope(|| {});
        }
    });
    let stats = guard.shutdown().unwrap();
    let counters = recording_counters(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    (stats, otlp.stats(), counters)
}

/// The sink counters of `stats`, in the order failed, dropped, rejected, unconfirmed, unsent.
fn sink_counts(s: &Stats) -> [u64; 5] {
    [
        s.sink_failed_spans,
        s.sink_dropped_spans,
        s.sink_rejected_spans,
        s.sink_unconfirmed_spans,
        s.sink_unsent_spans,
    ]
}

/// The same counters as the recording's last frame has them.
fn recorded_counts(c: &BTreeMap<String, i64>) -> [u64; 5] {
    ["failed", "dropped", "rejected", "unconfirmed", "unsent"]
        .map(|k| c.get(&format!("ringtrace.sink_{k}_spans")).copied().unwrap_or(-1) as u64)
}

fn check(tag: &str, config: OtlpConfig, expected: [u64; 5], exported: u64) -> OtlpStats {
    let (stats, otlp, counters) = run(tag, config);
    assert_eq!(stats.recorded_spans, SPANS, "{tag}: {stats}");
    assert_eq!(sink_counts(&stats), expected, "{tag}: Stats: {stats}; {otlp:?}");
    assert_eq!(recorded_counts(&counters), expected, "{tag}: the recording's last frame: {counters:?}");
    assert_eq!(otlp.exported_spans, exported, "{tag}: {otlp:?}");
    assert_eq!(otlp.exported_spans + otlp.lost_spans(), SPANS, "{tag}: every span in one cause: {otlp:?}");
    otlp
}

#[test]
fn every_span_ends_in_one_cause_in_stats_and_in_the_recording() {
    let _serial = serial();
    let n = SPANS;
    for (tag, protocol) in [("grpc", Protocol::Grpc), ("http", Protocol::HttpProtobuf)] {
        // (a) Nothing listening: refused until the retry budget runs out: failed.
        let nothing = format!("http://127.0.0.1:{}", free_port());
        check(&format!("{tag}-unreachable"), quick(&nothing, protocol), [n, 0, 0, 0, 0], 0);

        // (b) Connected, never answered: the collector may have stored them: unconfirmed.
        let hanging = format!("http://127.0.0.1:{}", never_answering_server());
        let s = check(&format!("{tag}-hanging"), quick(&hanging, protocol), [0, 0, 0, n, 0], 0);
        assert!(s.failed_attempts >= 1, "{tag}: {s:?}");

        // (e) Still queued when the wait at shutdown runs out: unsent (the batch whose request
        // is under way at that moment is unconfirmed: it may have arrived).
        let config = quick(&hanging, protocol)
            .timeout(Duration::from_secs(600))
            .max_export_batch_spans(10)
            .flush_timeout(Duration::from_millis(300));
        let (stats, otlp, counters) = run(&format!("{tag}-unsent"), config);
        let [failed, dropped, rejected, unconfirmed, unsent] = sink_counts(&stats);
        assert_eq!((failed, dropped, rejected), (0, 0, 0), "{tag}: {stats}");
        assert_eq!(unconfirmed + unsent, n, "{tag}: {stats}");
        assert!(unconfirmed <= 10 && unsent >= n - 10, "{tag}: at most one batch was under way: {stats}");
        assert_eq!(recorded_counts(&counters), sink_counts(&stats), "{tag}: {counters:?}");
        assert_eq!((otlp.unconfirmed_spans, otlp.unsent_spans), (unconfirmed, unsent));
    }

    // (c) A real collector: everything exported, nothing lost.
    let rotel = Rotel::start();
    check("grpc-rotel", quick(&rotel.grpc_endpoint(), Protocol::Grpc), [0; 5], n);
    check("http-rotel", quick(&rotel.http_endpoint(), Protocol::HttpProtobuf), [0; 5], n);

    // (d) A collector refusing with a permanent status: rejected, not retried.
    let (port, answered) = http_server(BAD_REQUEST);
    let config = quick(&format!("http://127.0.0.1:{port}"), Protocol::HttpProtobuf);
    let s = check("http-rejecting", config, [0, 0, n, 0, 0], 0);
    assert_eq!(s.failed_attempts, answered.load(Ordering::SeqCst), "no batch retried: {s:?}");

    // (d') A partial success: the rejected part is rejected, the rest exported.
    let (port, _) = http_server(PARTIAL_SUCCESS);
    let s = run("http-partial", quick(&format!("http://127.0.0.1:{port}"), Protocol::HttpProtobuf)).1;
    assert!(s.rejected_spans >= 1 && s.exported_spans + s.rejected_spans == n, "{s:?}");
}

/// An OTLP/HTTP 400: a `google.rpc.Status` (code 3, message "span too old").
const BAD_REQUEST: &str = "HTTP/1.1 400 Bad Request\r\ncontent-type: application/x-protobuf\r\ncontent-length: 16\r\n\r\n\x08\x03\x12\x0cspan too old";

/// An OTLP/HTTP success with `partial_success { rejected_spans: 1, error_message: "dup" }`.
const PARTIAL_SUCCESS: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 9\r\n\r\n\x0a\x07\x08\x01\x12\x03dup";

/// Records per thread ring: a stall of the drain of well under a second overflows it at the
/// recorder's pace (a span, two records, about every millisecond).
const STALL_RING: usize = 1024;

#[test]
fn a_flush_while_the_collector_hangs_never_stalls_the_recording() {
    let _serial = serial();
    let dir = temp_dir("stall");
    let hanging = format!("http://127.0.0.1:{}", never_answering_server());
    // Before, each flush waited up to `flush_timeout` on the drain thread: 2 s, over 1800 spans
    // at the recorder's pace, against a ring holding 512.
    let config = OtlpConfig::new()
        .endpoint(&hanging)
        .protocol(Protocol::HttpProtobuf)
        .timeout(Duration::from_secs(600))
        .flush_timeout(Duration::from_secs(2));
    let (layer, guard) = Builder::new()
        .node("node-losses")
        .daemon("svc-stall")
        .recording_dir(&dir)
        .ring_capacity(STALL_RING)
        .sink(OtlpSink::new(config).unwrap())
        .build()
        .unwrap();
    let handle = guard.handle();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let done = Arc::new(AtomicBool::new(false));
    let stop = done.clone();
    let recorder = std::thread::spawn(move || {
        tracing::dispatcher::with_default(&dispatch, || {
            let mut recorded = 0u64;
            while !stop.load(Ordering::SeqCst) {
                tracing::info_span!("during_flush", i = recorded).in_scope(|| {});
                recorded += 1;
                // A steady pace the drain keeps up with easily, unless it is held up.
                std::thread::sleep(Duration::from_millis(1));
            }
            recorded
        })
    });
    // Whether each flush's answer came within its bound depends on the machine's load; what
    // is checked is that the rings and the recording never waited meanwhile.
    for _ in 0..3 {
        let _ = handle.flush(Duration::from_secs(1));
    }
    done.store(true, Ordering::SeqCst);
    let recorded = recorder.join().unwrap();
    let stats = guard.shutdown().unwrap();
    assert_eq!(stats.dropped_spans, 0, "the rings never overflowed while flushes waited: {stats}");
    assert_eq!(stats.recorded_spans, recorded, "{stats}");
    let in_recording = recorded_spans(&dir).iter().filter(|s| s.name == "during_flush").count() as u64;
    assert_eq!(in_recording, recorded, "every span recorded during the flushes is in the recording");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sink with a long schedule delay and batches larger than `SPANS` (nothing is sent before a
/// flush asks); `SPANS` spans queued in it. Returns the guard, the
/// sink's waiter and counters.
fn queued(
    tag: &str,
    config: OtlpConfig,
) -> (
    ringtrace_subscriber::Guard,
    ringtrace_subscriber::FlushWaiter,
    ringtrace_subscriber::otlp::OtlpStatsHandle,
) {
    let config = config.schedule_delay(Duration::from_secs(600)).max_export_batch_spans(1000);
    let sink = OtlpSink::new(config).unwrap();
    let waiter = ringtrace_subscriber::Sink::flush_waiter(&sink).expect("an OTLP sink waits for delivery");
    let stats = sink.stats_handle();
    let (layer, guard) = Builder::new()
        .node("node-losses")
        .daemon(format!("svc-{tag}"))
        .no_recording()
        .sink(sink)
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        for i in 0..SPANS {
            tracing::info_span!("queued", i).in_scope(|| {});
        }
    });
    assert!(eventually(|| stats.stats().queued_spans == SPANS), "{tag}: the drain hands the spans over");
    (guard, waiter, stats)
}

fn patient(endpoint: &str, protocol: Protocol) -> OtlpConfig {
    OtlpConfig::new()
        .endpoint(endpoint)
        .protocol(protocol)
        .timeout(Duration::from_millis(200))
        .retry(RetryPolicy {
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(100),
            max_elapsed: Duration::from_secs(600),
        })
        .flush_timeout(Duration::from_millis(100))
}

/// An OTLP/HTTP 503: the collector is there and answers, with an error.
const UNAVAILABLE: &str =
    "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 11\r\n\r\noverloaded!";

#[test]
fn flush_messages_say_whether_the_collector_is_unreachable_slow_or_rejecting() {
    let _serial = serial();
    let nothing = format!("http://127.0.0.1:{}", free_port());
    let hanging = format!("http://127.0.0.1:{}", never_answering_server());
    let (port, _) = http_server(UNAVAILABLE);
    let overloaded = format!("http://127.0.0.1:{port}");
    let cases = [
        ("grpc-unreachable", &nothing, Protocol::Grpc, ["unreachable", "refused"], ["slow", "rejecting"]),
        (
            "http-unreachable",
            &nothing,
            Protocol::HttpProtobuf,
            ["unreachable", "refused"],
            ["slow", "rejecting"],
        ),
        (
            "grpc-slow",
            &hanging,
            Protocol::Grpc,
            ["slow", "no answer within 200ms"],
            ["unreachable", "rejecting"],
        ),
        (
            "http-slow",
            &hanging,
            Protocol::HttpProtobuf,
            ["slow", "no answer within 200ms"],
            ["unreachable", "rejecting"],
        ),
        (
            "http-rejecting",
            &overloaded,
            Protocol::HttpProtobuf,
            ["rejecting", "503"],
            ["unreachable", "slow"],
        ),
    ];
    for (tag, endpoint, protocol, said, not_said) in cases {
        let (guard, waiter, stats) = queued(tag, patient(endpoint, protocol));
        // Asks for the send; the fault shows in the first attempt.
        let _ = waiter(Duration::ZERO);
        assert!(eventually(|| stats.stats().failed_attempts >= 1), "{tag}: {:?}", stats.stats());
        let msg = waiter(Duration::from_millis(50)).expect_err("nothing can be delivered").to_string();
        assert!(msg.contains(&format!("{SPANS} spans still queued")), "{tag}: {msg}");
        for word in said {
            assert!(msg.contains(word), "{tag}: {msg:?} should say {word:?}");
        }
        for word in not_said {
            assert!(!msg.contains(word), "{tag}: {msg:?} should not say {word:?}");
        }
        drop(guard);
    }
}

/// What a plain HTTP/1.1 server says to a gRPC client's HTTP/2 preface.
const HTTP1_BAD_REQUEST: &str =
    "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: 11\r\nconnection: close\r\n\r\nBad Request";
/// A web server that is not an OTLP endpoint.
const HTML_NOT_FOUND: &str =
    "HTTP/1.1 404 Not Found\r\ncontent-type: text/html\r\ncontent-length: 22\r\n\r\n<h1>404 Not Found</h1>";

#[test]
fn a_server_that_does_not_speak_the_protocol_is_given_up_at_once() {
    let _serial = serial();
    let (http1, _) = http_server(HTTP1_BAD_REQUEST);
    let (web, _) = http_server(HTML_NOT_FOUND);
    let cases = [
        ("grpc-to-http1", http1, Protocol::Grpc, "does not speak gRPC"),
        ("http-to-web-page", web, Protocol::HttpProtobuf, "not an OTLP/HTTP endpoint"),
    ];
    for (tag, port, protocol, said) in cases {
        // A retry would come after a second at the soonest and go on for ten minutes.
        let config = OtlpConfig::new().endpoint(format!("http://127.0.0.1:{port}")).protocol(protocol).retry(
            RetryPolicy {
                initial_backoff: Duration::from_secs(1),
                max_backoff: Duration::from_secs(5),
                max_elapsed: Duration::from_secs(600),
            },
        );
        let (guard, waiter, stats) = queued(tag, config);
        let msg = waiter(Duration::from_secs(60)).expect_err("nothing was delivered").to_string();
        let s = stats.stats();
        assert_eq!((s.failed_spans, s.failed_attempts, s.exported_spans), (SPANS, 1, 0), "{tag}: {s:?}");
        assert!(msg.contains(&format!("{SPANS} spans given up")) && msg.contains(said), "{tag}: {msg}");
        assert!(msg.contains("wrong port or protocol?"), "{tag}: {msg}");
        let totals = guard.shutdown().unwrap();
        assert_eq!(totals.sink_failed_spans, SPANS, "{tag}: {totals}");
    }
}

const CHILD_ENV: &str = "RINGTRACE_OTLP_LOSSES_CHILD";

/// Run by `a_malformed_endpoint_is_an_error_when_the_collector_is_built` with the variable set.
#[test]
#[ignore = "run as a child process by a_malformed_endpoint_is_an_error_when_the_collector_is_built"]
fn build_with_the_endpoint_from_the_environment() {
    let var = std::env::var(CHILD_ENV)
        .expect("run by a_malformed_endpoint_is_an_error_when_the_collector_is_built");
    let value = std::env::var(&var).unwrap();
    let err =
        Builder::new().no_recording().build().map(drop).expect_err("a malformed endpoint fails the build");
    let msg = err.to_string();
    assert!(msg.contains(&var) && msg.contains(&format!("{value:?}")), "{msg}");
}

#[test]
fn a_malformed_endpoint_is_an_error_when_the_collector_is_built() {
    let err = Builder::new()
        .no_recording()
        .otlp_endpoint("notaurl")
        .build()
        .map(drop)
        .expect_err("rejected in code");
    let msg = err.to_string();
    assert!(msg.contains("otlp_endpoint") && msg.contains("\"notaurl\""), "{msg}");
    for var in ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "build_with_the_endpoint_from_the_environment",
                "--ignored",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, var)
            .env(var, "notaurl")
            .output()
            .unwrap();
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "{var}=notaurl: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
