//! Fetching traces from a Jaeger query service: a local HTTP server stands in for Jaeger.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::thread;

use crate::common::oracle;
use ringtrace_analysis::{fetch_jaeger, FetchError, JaegerQuery};

/// Serves one connection with `response` (built from the request line) and returns the URL of
/// the server and a handle yielding the request line.
fn serve_once(
    response: impl FnOnce(&str) -> Vec<u8> + Send + 'static,
) -> (String, thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream);
        let mut request_line = String::new();
        reader.read_line(&mut request_line).unwrap();
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 2 {
            line.clear();
        }
        let body = response(&request_line);
        reader.get_mut().write_all(&body).unwrap();
        request_line
    });
    (url, handle)
}

fn query(url: &str) -> JaegerQuery {
    let mut q = JaegerQuery::new(url, "customers service");
    q.end_unix_ns = 1_700_000_000_000_000_000;
    q.lookback_ns = 3_600_000_000_000;
    q.limit = 7;
    q
}

#[test]
fn fetches_and_reads_a_jaeger_document() {
    let body = std::fs::read(oracle("jaeger-critical-path/case1.json")).unwrap();
    let (url, server) = serve_once(move |_| {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend(&body);
        r
    });
    let data = fetch_jaeger(&query(&url)).unwrap();
    assert_eq!(data.spans.len(), 3);
    assert_eq!(data.processes[0].daemon, "customers-service");
    assert!(data.processes[0].source.to_string_lossy().starts_with(&url));
    assert_eq!(
        server.join().unwrap(),
        "GET /api/traces?service=customers%20service&start=1699996400000000&end=1700000000000000&limit=7 HTTP/1.1\r\n"
    );
}

#[test]
fn chunked_bodies_and_path_prefixes() {
    let body = std::fs::read(oracle("jaeger-trace-stats/testTraceNormal.json")).unwrap();
    let (url, server) = serve_once(move |_| {
        let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for chunk in body.chunks(1000) {
            r.extend(format!("{:x}\r\n", chunk.len()).bytes());
            r.extend(chunk);
            r.extend(b"\r\n");
        }
        r.extend(b"0\r\n\r\n");
        r
    });
    let data = fetch_jaeger(&query(&format!("{url}/jaeger/"))).unwrap();
    assert_eq!(data.spans.len(), 5);
    assert!(server.join().unwrap().starts_with("GET /jaeger/api/traces?"));
}

#[test]
fn failures_name_the_url() {
    let (url, server) =
        serve_once(|_| b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\ndown".to_vec());
    let e = fetch_jaeger(&query(&url)).unwrap_err();
    assert!(matches!(e, FetchError::Status { status: 503, .. }), "{e:?}");
    assert!(
        e.to_string().starts_with(&format!("{url}/api/traces?")) && e.to_string().ends_with("HTTP 503: down")
    );
    server.join().unwrap();

    let (url, server) = serve_once(|_| b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"data\":[".to_vec());
    let e = fetch_jaeger(&query(&url)).unwrap_err();
    assert!(matches!(e, FetchError::Read(_)), "{e:?}");
    assert!(
        e.to_string().starts_with(&format!("{url}/api/traces?")) && e.to_string().contains("line 1"),
        "{e}"
    );
    server.join().unwrap();

    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let url = format!("http://{closed}");
    let e = fetch_jaeger(&query(&url)).unwrap_err();
    assert!(matches!(e, FetchError::Io { .. }), "{e:?}");
    assert!(e.to_string().starts_with(&url), "{e}");
}
