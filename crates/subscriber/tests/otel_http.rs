//! One trace across three processes over HTTP on 127.0.0.1: this test process, instrumented
//! with the OpenTelemetry SDK, calls a process instrumented with ringtrace, which calls a third
//! process instrumented with the SDK again. Every hop injects and extracts through the
//! propagator the process installed globally — W3C trace context with baggage, then B3 (multiple
//! headers) with baggage — and `request.id` travels in the baggage end to end. The ringtrace
//! process's spans are read from what its collector exported, so their parents are the ones it
//! recorded.
//!
//! The test binary starts itself again for the two other processes (`http_child`, ignored in
//! normal runs). HTTP is HTTP/1.1 over `std::net`, one request per process.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use opentelemetry::baggage::BaggageExt;
use opentelemetry::propagation::{TextMapCompositePropagator, TextMapPropagator};
use opentelemetry::trace::{Span as _, TraceContextExt, Tracer, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::SdkTracerProvider;
use ringtrace_subscriber::otel::{self, OpenTelemetrySpanExt};
use ringtrace_subscriber::{Builder, FnSink, SpanData};

/// Installs the propagator named `name` globally: `w3c` or `b3`, each with baggage. (The zipkin
/// crate, deprecated as an exporter, is where the SDK's B3 propagator lives.)
#[allow(deprecated)]
fn install_propagator(name: &str) {
    let first: Box<dyn TextMapPropagator + Send + Sync> = match name {
        "w3c" => Box::new(TraceContextPropagator::new()),
        "b3" => Box::new(opentelemetry_zipkin::Propagator::with_encoding(
            opentelemetry_zipkin::B3Encoding::MultipleHeader,
        )),
        other => panic!("unknown propagator {other}"),
    };
    opentelemetry::global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
        first,
        Box::new(BaggagePropagator::new()),
    ]));
}

/// Accepts one request on `listener`; answers with what `handle` makes of its headers.
fn serve_one(listener: &TcpListener, handle: impl FnOnce(&HashMap<String, String>) -> String) {
    let (stream, _) = listener.accept().unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut headers = HashMap::new();
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("GET / HTTP/1.1"), "{line:?}");
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').unwrap();
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
    }
    let body = handle(&headers);
    let mut out = stream;
    write!(out, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
        .unwrap();
}

/// Sends one request with `headers` to 127.0.0.1:`port`; the response's body.
fn call(port: u16, headers: &HashMap<String, String>) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut request = String::from("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    s.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

/// `key=value` lines as a map.
fn fields(text: &str) -> HashMap<String, String> {
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

#[test]
#[ignore = "entry point of the processes started by `one_trace_across_sdk_ringtrace_sdk_over_http`"]
fn http_child() {
    let Ok(role) = std::env::var("RINGTRACE_TEST_ROLE") else { return };
    install_propagator(&std::env::var("RINGTRACE_TEST_PROPAGATOR").unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    println!("port {}", listener.local_addr().unwrap().port());
    std::io::stdout().flush().unwrap();
    match role.as_str() {
        // The third process: the SDK, extracting what ringtrace injected.
        "sdk" => {
            let provider = SdkTracerProvider::builder().build();
            let tracer = provider.tracer("callee");
            serve_one(&listener, |headers| {
                let parent = otel::extract(headers);
                let span = tracer.start_with_context("c-handle", &parent);
                let sc = span.span_context().clone();
                format!(
                    "trace={}\nspan={}\nparent={}\nrequest={}\n",
                    sc.trace_id(),
                    sc.span_id(),
                    parent.span().span_context().span_id(),
                    parent.baggage().get("request.id").map_or(String::new(), |v| v.to_string()),
                )
            });
        }
        // The middle process: ringtrace, its spans written to a file once exported.
        "ring" => {
            let callee: u16 = std::env::var("RINGTRACE_TEST_CALLEE").unwrap().parse().unwrap();
            let kept: Arc<Mutex<Vec<SpanData>>> = Arc::default();
            let sink_kept = kept.clone();
            let sink = FnSink(move |batch: &[SpanData], _: &ringtrace_subscriber::ResourceInfo| {
                sink_kept.lock().unwrap().extend_from_slice(batch);
            });
            let (subscriber, guard) = Builder::new()
                .node("n")
                .daemon("middle")
                .no_recording()
                .sink(sink)
                .build_subscriber()
                .unwrap();
            tracing::subscriber::with_default(subscriber, || {
                serve_one(&listener, |headers| {
                    let span = tracing::info_span!("b-handle");
                    span.set_parent(&otel::extract(headers));
                    let _in = span.enter();
                    let client = tracing::info_span!("b-call");
                    let mut out = HashMap::new();
                    otel::inject(&client, &mut out);
                    let _c = client.enter();
                    call(callee, &out)
                })
            });
            guard.shutdown().unwrap();
            let mut report = String::new();
            for s in kept.lock().unwrap().iter() {
                report.push_str(&format!(
                    "{}.trace={}\n{}.span={}\n{}.parent={}\n{}.request={}\n",
                    s.meta.name(),
                    s.trace_id,
                    s.meta.name(),
                    s.span_id,
                    s.meta.name(),
                    s.parent_span_id.map_or(String::new(), |p| p.to_string()),
                    s.meta.name(),
                    s.request_id.as_deref().unwrap_or(""),
                ));
            }
            std::fs::write(std::env::var("RINGTRACE_TEST_OUT").unwrap(), report).unwrap();
        }
        other => panic!("unknown role {other}"),
    }
}

/// Starts `http_child` as `role`; returns it and the port it listens on.
fn start(role: &str, propagator: &str, env: &[(&str, String)]) -> (Child, u16) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "http_child", "--ignored", "--nocapture", "--quiet"])
        .env("RINGTRACE_TEST_ROLE", role)
        .env("RINGTRACE_TEST_PROPAGATOR", propagator)
        .env("RINGTRACE_QUIET", "1")
        .stdout(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("port ") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "{role}: no port printed");
    }
    let port = line.trim_start_matches("port ").trim().parse().unwrap();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    (child, port)
}

#[test]
fn one_trace_across_sdk_ringtrace_sdk_over_http() {
    for propagator in ["w3c", "b3"] {
        install_propagator(propagator);
        let out =
            std::env::temp_dir().join(format!("ringtrace-otel-http-{}-{propagator}", std::process::id()));
        let (mut third, third_port) = start("sdk", propagator, &[]);
        let (mut middle, middle_port) = start(
            "ring",
            propagator,
            &[
                ("RINGTRACE_TEST_CALLEE", third_port.to_string()),
                ("RINGTRACE_TEST_OUT", out.display().to_string()),
            ],
        );
        let provider = SdkTracerProvider::builder().build();
        let tracer = provider.tracer("caller");
        let root = tracer.start("a-call");
        let root_sc = root.span_context().clone();
        let cx = opentelemetry::Context::current_with_span(root)
            .with_baggage([KeyValue::new("request.id", "req-9")]);
        let mut headers = HashMap::new();
        opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut headers));
        let c = fields(&call(middle_port, &headers));
        assert!(middle.wait().unwrap().success(), "{propagator}: the ringtrace process failed");
        assert!(third.wait().unwrap().success(), "{propagator}: the third process failed");
        let b = fields(&std::fs::read_to_string(&out).unwrap());
        let _ = std::fs::remove_file(&out);

        let trace = root_sc.trace_id().to_string();
        let what = format!("{propagator}: {b:?} {c:?}");
        assert_eq!(b["b-handle.trace"], trace, "{what}");
        assert_eq!(b["b-handle.parent"], root_sc.span_id().to_string(), "{what}");
        assert_eq!(b["b-handle.request"], "req-9", "{what}");
        assert_eq!(b["b-call.trace"], trace, "{what}");
        assert_eq!(b["b-call.parent"], b["b-handle.span"], "{what}");
        assert_eq!(b["b-call.request"], "req-9", "{what}");
        assert_eq!(c["trace"], trace, "{what}");
        assert_eq!(c["parent"], b["b-call.span"], "{what}");
        assert_eq!(c["request"], "req-9", "{what}");
    }
}
