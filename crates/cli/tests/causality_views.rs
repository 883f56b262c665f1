//! The request-causality subcommands on the demo cluster's recordings, run as a user runs them,
//! and on malformed inputs.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::support::{json, ok, recordings_name_the_machine, ringtrace, temp_dir, text, SLOW_IO_MS};

const REQUESTS: usize = 30;

/// The recordings of one demo run with a slow node-2, shared by the tests of this file. Its disk
/// sleeps [`SLOW_IO_MS`] per operation, far more than load can add to a request: the verdicts about
/// node-2 below hold however loaded the machine is (see `SLOW_IO_MS` for the margin).
fn recordings() -> &'static str {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = temp_dir("causality_views");
        let requests = REQUESTS.to_string();
        ok(&[
            "demo",
            "--out",
            out.to_str().unwrap(),
            "--requests",
            &requests,
            "--slow-node",
            "node-2",
            "--slow-io-ms",
            SLOW_IO_MS,
        ]);
        out.join("recordings")
    })
    .to_str()
    .unwrap()
}

#[test]
fn every_demo_request_is_one_tree_across_processes() {
    let doc = json(&["requests", "--json", recordings()]);
    let requests = doc["requests"].as_array().unwrap();
    assert_eq!(requests.len(), REQUESTS);
    for r in requests {
        assert_eq!(r["roots"], 1, "{r}");
        assert!(r["processes"].as_u64().unwrap() >= 3, "client, master and a worker: {r}");
        assert!(r["cross_process_edges"].as_u64().unwrap() >= 2, "{r}");
        assert_eq!(r["root"]["daemon"], "client", "{r}");
        assert!(r["request_id"].as_str().unwrap().starts_with("req-"), "{r}");
    }
    for key in ["orphans", "cycles_broken", "duplicate_span_ids", "duplicate_spans_dropped"] {
        assert_eq!(doc["warnings"][key], 0, "{key}");
    }
    // The demo's nodes are processes of one machine: with its `host.id` recorded they share one
    // clock, and no pair is estimated; without, client/server pairs across nodes are.
    let skew = doc["clock_skew"].as_array().unwrap();
    if recordings_name_the_machine(recordings()) {
        assert!(skew.is_empty(), "{skew:?}");
    } else {
        assert!(
            skew.iter().any(|s| s["client_node"] == "node-0" && s["server_node"] == "node-2"),
            "{skew:?}"
        );
    }

    let human = ok(&["requests", recordings()]);
    assert!(human.contains(&format!("{REQUESTS} requests")), "{human}");
    assert!(human.contains(&format!("{REQUESTS} are a single tree")), "{human}");
    let trace = requests[0]["trace_id"].as_str().unwrap();
    let tree = ok(&["requests", "--tree", trace, recordings()]);
    assert!(tree.contains("⇢ master@node-0") && tree.contains("(from client@client-1)"), "{tree}");
}

/// Over a Parquet store of the same recordings, `requests` notes the clock skew the recordings
/// do: the store keeps which kernel and machine each process ran under, so the demo's nodes,
/// processes of one machine, are not taken for skewed there either.
#[test]
fn the_store_notes_the_clock_skew_the_recordings_do() {
    let store = temp_dir("causality_views_store");
    ok(&["export", "--format", "parquet", "-o", store.to_str().unwrap(), recordings()]);
    let over_recordings = json(&["requests", "--json", recordings()])["clock_skew"].clone();
    let over_store = json(&["requests", "--json", store.to_str().unwrap()])["clock_skew"].clone();
    assert_eq!(over_store, over_recordings);
    if recordings_name_the_machine(recordings()) {
        assert_eq!(over_store.as_array().map(Vec::len), Some(0), "{over_store}");
    }
    let _ = std::fs::remove_dir_all(&store);
}

#[test]
fn critical_path_of_every_demo_request_spans_its_root() {
    let doc = json(&["critical-path", "--json", recordings()]);
    let traces = doc["traces"].as_array().unwrap();
    assert_eq!(traces.len(), REQUESTS);
    for t in traces {
        let path = t["critical_path"].as_array().unwrap();
        assert!(path.len() >= 3, "{t}");
        // Latest first, contiguous: each section ends where the previous one started.
        for w in path.windows(2) {
            assert_eq!(w[0]["start_unix_ns"], w[1]["end_unix_ns"], "{t}");
        }
    }
    let human = ok(&["critical-path", "--trace", traces[0]["trace_id"].as_str().unwrap(), recordings()]);
    assert!(human.contains("client-1 / client / request") && human.contains("by span:"), "{human}");
}

#[test]
fn stats_deps_and_breakdown_cover_every_span_and_call() {
    let requests = json(&["requests", "--json", recordings()]);
    let spans: u64 =
        requests["requests"].as_array().unwrap().iter().map(|r| r["spans"].as_u64().unwrap()).sum();

    let stats = json(&["stats", "--json", "--by", "service", recordings()]);
    let rows = stats["rows"].as_array().unwrap();
    let daemons: Vec<&str> = rows.iter().map(|r| r["service"].as_str().unwrap()).collect();
    assert_eq!(daemons, ["client", "master", "worker"]);
    assert_eq!(rows.iter().map(|r| r["count"].as_u64().unwrap()).sum::<u64>(), spans);
    for r in rows {
        assert!(r["p50_ns"].as_u64() <= r["p90_ns"].as_u64() && r["p90_ns"].as_u64() <= r["p99_ns"].as_u64());
        assert!(r["self_total_ns"].as_u64() <= r["total_ns"].as_u64());
    }
    let table = ok(&["stats", recordings()]);
    assert!(table.contains("worker / disk_read"), "{table}");

    let deps = json(&["deps", "--json", recordings()]);
    let links: Vec<(String, String)> = deps["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["parent"].as_str().unwrap().into(), l["child"].as_str().unwrap().into()))
        .collect();
    for pair in [("client", "master"), ("master", "worker")] {
        assert!(links.contains(&(pair.0.into(), pair.1.into())), "{links:?}");
    }
    let calls: u64 =
        deps["services"].as_array().unwrap().iter().map(|l| l["call_count"].as_u64().unwrap()).sum();
    assert_eq!(calls, spans - REQUESTS as u64, "every span but the roots is a call");
    let dot = ok(&["deps", "--dot", "--level", "node", recordings()]);
    assert!(dot.starts_with("digraph nodes {") && dot.contains("\"node-0\" -> \"node-2\""), "{dot}");

    let breakdown = json(&["breakdown", "--json", recordings()]);
    assert_eq!(breakdown["requests"].as_array().unwrap().len(), REQUESTS);
    let aggregate = breakdown["aggregate"].as_array().unwrap();
    assert_eq!(aggregate.iter().map(|r| r["count"].as_u64().unwrap()).sum::<u64>(), spans);
    assert!(aggregate.iter().all(|r| r["client_node"] == "client-1"));
    // The slow node's disk absorbs the most self time.
    assert_eq!(aggregate[0]["serving_node"], "node-2", "{}", aggregate[0]);
    let table = ok(&["breakdown", recordings()]);
    assert!(table.contains("time by operation type:"), "{table}");
}

#[test]
fn bottlenecks_put_the_slow_node_first() {
    let doc = json(&["bottlenecks", "--json", recordings()]);
    let ranking = doc["bottlenecks"].as_array().unwrap();
    let first = &ranking[0];
    assert_eq!(first["node"], "node-2", "{ranking:?}");
    assert_eq!(first["daemon"], "worker");
    // The slow disk's call itself (the demo's disk I/O goes through `ringtrace::io`): its
    // operation, its block file and the worker's line that made it.
    assert!(["read", "write"].contains(&first["operation"].as_str().unwrap()), "{first}");
    assert!(first["io_target"].as_str().unwrap().contains("/node-2/"), "{first}");
    assert!(first["location"].as_str().unwrap().contains("worker.rs:"), "{first}");
    let keys: Vec<&String> = first.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 7, "{first}");
    let node2: f64 =
        ranking.iter().filter(|b| b["node"] == "node-2").map(|b| b["share"].as_f64().unwrap()).sum();
    assert!(node2 > 0.5, "node-2 holds most of the critical path: {node2}");
    let times: Vec<u64> = ranking.iter().map(|b| b["critical_path_ns"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "sorted, largest first: {times:?}");
    let total: f64 = ranking.iter().map(|b| b["share"].as_f64().unwrap()).sum();
    assert!((total - 1.0).abs() < 1e-9, "{total}");

    let slowest = json(&["bottlenecks", "--json", "--slowest", "10%", recordings()]);
    assert_eq!(slowest["bottlenecks"][0]["node"], "node-2");
    let table = ok(&["bottlenecks", "--top", "3", recordings()]);
    assert!(table.contains(&format!("over {REQUESTS} of {REQUESTS} requests")), "{table}");
    let line = table.lines().nth(2).unwrap();
    assert!(line.contains("node-2 / worker / read") || line.contains("node-2 / worker / write"), "{table}");
}

#[test]
fn diff_of_the_slowest_requests_points_at_the_slow_disk() {
    let doc = json(&["diff", "--json", "--slowest", "10%", recordings()]);
    assert_eq!(doc["b"]["traces"], 3);
    assert_eq!(doc["a"]["traces"], REQUESTS - 3);
    assert!(doc["b"]["mean_latency_ns"].as_f64() > doc["a"]["mean_latency_ns"].as_f64());
    let top = &doc["rows"][0];
    assert_eq!(top["daemon"], "worker", "{top}");
    let operation = top["operation"].as_str().unwrap();
    assert!(operation.starts_with("disk_") || ["read", "write"].contains(&operation), "{top}");

    let traces = json(&["critical-path", "--json", recordings()]);
    let (a, b) = (
        traces["traces"][0]["trace_id"].as_str().unwrap(),
        traces["traces"][1]["trace_id"].as_str().unwrap(),
    );
    let two = json(&["diff", "--json", "--trace", a, "--trace", b, recordings()]);
    assert_eq!((two["a"]["traces"].as_u64(), two["b"]["traces"].as_u64()), (Some(1), Some(1)));
    // A directory against itself: no differences.
    let same = json(&["diff", "--json", recordings(), recordings()]);
    assert!(same["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["self_ns_delta"] == 0.0 && r["count_delta"] == 0.0));
    let table = ok(&["diff", "--slowest", "10%", recordings()]);
    assert!(table.contains("B: the slowest 10%: 3 requests"), "{table}");
}

fn temp_file(name: &str, content: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ringtrace-cli-malformed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

fn fails(args: &[&str]) -> String {
    let o = ringtrace(args);
    assert!(!o.status.success(), "ringtrace {args:?} should fail:\n{}", text(&o.stdout));
    text(&o.stderr)
}

#[test]
fn malformed_inputs_and_arguments_name_the_file_position_or_value() {
    let oracle =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/oracles/jaeger-critical-path/case1.json");
    let whole = std::fs::read_to_string(oracle).unwrap();
    let truncated = temp_file("truncated.json", &whole[..whole.len() / 2]);
    let wrong_type = temp_file("wrong-type.json", r#"{"data": [{"traceID": "ab", "spans": 7}]}"#);
    let bad_id = temp_file(
        "bad-id.json",
        r#"{"data":[{"traceID":"ab","spans":[{"spanID":"xyz","startTime":1,"duration":1,"processID":"p"}],
            "processes":{"p":{"serviceName":"s"}}}]}"#,
    );
    for view in ["requests", "critical-path", "stats", "deps", "breakdown", "bottlenecks"] {
        let e = fails(&[view, truncated.to_str().unwrap()]);
        assert!(e.contains(truncated.to_str().unwrap()) && e.contains("line "), "{view}: {e}");
    }
    let e = fails(&["critical-path", wrong_type.to_str().unwrap()]);
    assert!(e.contains(wrong_type.to_str().unwrap()) && e.contains("line 1 column"), "{e}");
    let e = fails(&["critical-path", bad_id.to_str().unwrap()]);
    assert!(
        e.contains(bad_id.to_str().unwrap()) && e.contains("data[0].spans[0]") && e.contains("spanID"),
        "{e}"
    );

    assert!(fails(&["stats", "--by", "method", bad_id.to_str().unwrap()]).contains("\"method\""));
    assert!(fails(&["bottlenecks", "--slowest", "150%", "x"]).contains("\"150%\""));
    assert!(fails(&["critical-path", "--trace", "nothex", "x"]).contains("\"nothex\""));
    let e = fails(&[
        "critical-path",
        "--trace",
        "abc",
        truncated.parent().unwrap().join("none").to_str().unwrap(),
    ]);
    assert!(e.contains("none"), "{e}");
}
