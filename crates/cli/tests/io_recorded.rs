//! `ringtrace io` on calls recorded in process by the `ringtrace::io` wrappers: a storage
//! server that reads ahead (it answers every request for 16 KiB with 256 KiB) and a client whose
//! requests are spans. The server records its I/O outside any span, as code without spans of its
//! own does; linking puts its calls in the client's traces.

use std::io::{Read, Write};
use std::path::Path;

use ringtrace_subscriber::io::{TcpListener, TcpStream};

use crate::support::{json, temp_dir};

const REQUESTS: usize = 8;
const ASKED: usize = 16 * 1024;
const READ_AHEAD: usize = 256 * 1024;

/// Records what `work` does as `node`/`daemon` into `dir`.
fn recorded(dir: &Path, node: &str, daemon: &str, work: impl FnOnce()) {
    let (subscriber, guard) = ringtrace_subscriber::Builder::new()
        .node(node)
        .daemon(daemon)
        .recording_dir(dir)
        .no_otlp()
        .build_subscriber()
        .expect("start ringtrace");
    tracing::subscriber::with_default(subscriber, work);
    guard.shutdown().expect("write the recording");
}

#[test]
fn read_ahead_shows_in_sizes_and_the_servers_calls_join_the_clients_requests() {
    let dir = temp_dir("io-recorded");
    std::fs::create_dir_all(&dir).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server_dir = dir.clone();
    let server = std::thread::spawn(move || {
        recorded(&server_dir, "store-1", "storage", || {
            let listener = TcpListener::from_std(listener);
            for _ in 0..REQUESTS {
                let (mut conn, _) = listener.accept().unwrap();
                let mut request = [0u8; 8];
                conn.read_exact(&mut request).unwrap();
                // What was asked, and the rest of a 256 KiB read-ahead window.
                conn.write_all(&vec![7u8; READ_AHEAD]).unwrap();
            }
        });
    });
    let mut traces = Vec::new();
    recorded(&dir, "app-1", "client", || {
        for k in 0..REQUESTS {
            let span = tracing::info_span!("fetch_block", request.id = k as u64);
            let _entered = span.enter();
            traces.push(ringtrace_subscriber::SpanExt::trace_context(&span).unwrap().trace_id.to_string());
            let mut conn = TcpStream::connect(addr).unwrap();
            conn.write_all(&(k as u64).to_le_bytes()).unwrap();
            let mut block = vec![0u8; ASKED];
            conn.read_exact(&mut block).unwrap();
            // The rest of the window, drained below the wrapper (as a client library's buffer
            // would take it): moved, never asked for by the application.
            let mut rest = Vec::new();
            conn.get_ref().read_to_end(&mut rest).unwrap();
            assert_eq!(rest.len(), READ_AHEAD - ASKED);
        }
    });
    server.join().unwrap();
    let d = dir.to_str().unwrap();

    let sizes = json(&["io", "sizes", "--json", d]);
    let flow = sizes["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["sender"] == "store-1/storage" && f["receiver"] == "app-1/client")
        .unwrap_or_else(|| panic!("no storage → client flow: {sizes}"));
    assert_eq!(flow["bytes_sent"], (REQUESTS * READ_AHEAD) as u64, "{flow}");
    assert_eq!(flow["bytes_received"], (REQUESTS * ASKED) as u64, "{flow}");
    // Asked for at least what arrived (read_exact may take several reads, each asking for the
    // rest): 16× at most, and far above 1.
    let amplification = flow["amplification"].as_f64().unwrap();
    assert!(amplification > 4.0 && amplification <= 16.0, "{flow}");

    let requests = json(&["io", "requests", "--json", d]);
    let requests = requests["requests"].as_array().unwrap();
    assert_eq!(requests.len(), REQUESTS, "{requests:#?}");
    for (k, r) in requests.iter().enumerate() {
        assert_eq!(r["request"], traces[k], "requests by their first call, named by the client's trace");
        let calls = r["calls"].as_array().unwrap();
        let on = |host: &str, op: &str| calls.iter().any(|c| c["host"] == host && c["op"] == op);
        for (host, op) in [("app-1", "connect"), ("app-1", "send"), ("app-1", "recv"), ("store-1", "accept")]
        {
            assert!(on(host, op), "request {k} lacks {host} {op}: {r}");
        }
        assert!(on("store-1", "recv") && on("store-1", "send"), "request {k}: {r}");
    }
    // In every view: the storage server's calls are in the client's request trees.
    let trees = json(&["requests", "--json", d]);
    let trees = trees["requests"].as_array().unwrap();
    let (requests, other): (Vec<_>, Vec<_>) =
        trees.iter().partition(|t| t["root"]["operation"] == "fetch_block");
    assert_eq!(requests.len(), REQUESTS, "{trees:#?}");
    for t in requests {
        assert_eq!(t["processes"], 2, "the server's calls are in the request's tree: {t}");
    }
    // What served no request stays out of them: the listener's close, made outside any span.
    assert!(other.iter().all(|t| t["spans"] == 1 && t["root"]["operation"] == "close"), "{other:#?}");
    let bottlenecks = json(&["bottlenecks", "--json", d]);
    let io_rows: Vec<_> =
        bottlenecks["bottlenecks"].as_array().unwrap().iter().filter(|b| !b["io_target"].is_null()).collect();
    assert!(!io_rows.is_empty(), "{bottlenecks}");
    assert!(
        io_rows.iter().any(|b| b["location"].as_str().is_some_and(|l| l.contains("io_recorded.rs:"))),
        "the calls' own code locations: {io_rows:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
