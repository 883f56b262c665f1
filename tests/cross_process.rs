//! A request crossing two processes over TCP is one trace with the right parents and the same
//! `request.id`, read back from both processes' recordings.
//!
//! The test binary starts itself a second time as the server: `cross_process_server` is ignored
//! in normal runs and does its work only when started with `RINGTRACE_TEST_ROLE=server`.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::common::test_name;
use ringtrace::propagation;
use ringtrace::SpanExt;
use tracing_subscriber::prelude::*;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ringtrace-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes headers as `key: value` lines ended by an empty line, like HTTP/1.1.
fn write_headers(stream: &mut TcpStream, headers: &[(String, String)]) {
    for (k, v) in headers {
        writeln!(stream, "{k}: {v}").unwrap();
    }
    writeln!(stream).unwrap();
}

fn read_headers(reader: &mut impl BufRead) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            return headers;
        }
        let (k, v) = line.split_once(": ").expect("header line");
        headers.push((k.to_owned(), v.to_owned()));
    }
}

#[test]
#[ignore = "entry point of the server process started by `request_crossing_two_processes_is_one_trace`"]
fn cross_process_server() {
    if std::env::var("RINGTRACE_TEST_ROLE").as_deref() != Ok("server") {
        return;
    }
    let dir = std::env::var("RINGTRACE_TEST_DIR").unwrap();
    let port: u16 = std::env::var("RINGTRACE_TEST_PORT").unwrap().parse().unwrap();
    let guard = ringtrace::Builder::new().node("node-b").daemon("server").recording_dir(dir).init().unwrap();
    // The caller listens; this process connects, then serves the one request it is sent.
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let headers = read_headers(&mut reader);
    let cx = propagation::extract(&headers).expect("a valid traceparent");
    let serve = tracing::info_span!("serve", otel.kind = "server");
    serve.set_remote_parent(&cx);
    {
        let _s = serve.enter();
        let _w = tracing::info_span!("work", items = 3).entered();
        tracing::info!("working");
    }
    drop(serve);
    writeln!(stream, "done").unwrap();
    let stats = guard.shutdown().unwrap();
    assert_eq!(stats.recorded_spans, 2);
}

#[test]
fn request_crossing_two_processes_is_one_trace() {
    let dir = temp_dir("cross-process");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_name(module_path!(), "cross_process_server"),
            "--ignored",
            "--test-threads=1",
        ])
        .env("RINGTRACE_TEST_ROLE", "server")
        .env("RINGTRACE_TEST_DIR", &dir)
        .env("RINGTRACE_TEST_PORT", listener.local_addr().unwrap().port().to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let (mut stream, _) = listener.accept().unwrap();

    let (layer, guard) =
        ringtrace::Builder::new().node("node-a").daemon("client").recording_dir(&dir).build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let _call = tracing::info_span!("call", request.id = "req-42", otel.kind = "client").entered();
        let mut headers = Vec::new();
        propagation::inject(&ringtrace::current_context().unwrap(), &mut headers);
        write_headers(&mut stream, &headers);
        let mut reply = String::new();
        BufReader::new(&mut stream).read_line(&mut reply).unwrap();
        assert_eq!(reply.trim(), "done");
    });
    guard.shutdown().unwrap();
    assert!(child.wait().unwrap().success(), "server process failed");

    let data = ringtrace_analysis::read_inputs(&[&dir]).unwrap();
    let find =
        |name: &str| data.spans.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no span {name}"));
    let (call, serve, work) = (find("call"), find("serve"), find("work"));
    assert_eq!(data.spans.len(), 3);
    assert_eq!(call.trace_id, serve.trace_id);
    assert_eq!(serve.trace_id, work.trace_id);
    assert_eq!(call.parent_span_id, None);
    assert_eq!(serve.parent_span_id, Some(call.span_id));
    assert_eq!(work.parent_span_id, Some(serve.span_id));
    for s in [call, serve, work] {
        assert_eq!(s.request_id.as_deref(), Some("req-42"), "{}", s.name);
    }
    assert_eq!((call.node.as_str(), call.daemon.as_str()), ("node-a", "client"));
    assert_eq!((serve.node.as_str(), serve.daemon.as_str()), ("node-b", "server"));
    assert_eq!((work.node.as_str(), work.daemon.as_str()), ("node-b", "server"));
    assert_ne!(call.process, serve.process);
    assert_eq!(serve.kind, ringtrace_analysis::SpanKind::Server);
    assert_eq!(call.kind, ringtrace_analysis::SpanKind::Client);
    assert_eq!(work.events.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
