//! Every Jaeger reference case in `tests/oracles/`, run through the `ringtrace` binary and
//! compared exactly with the answer Jaeger UI gives.

use std::path::{Path, PathBuf};

use crate::support::{json, ringtrace};
use serde_json::{json, Value};

const ORACLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/oracles");

fn fixture(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn critical_path_cases() -> Vec<PathBuf> {
    let dir = Path::new(ORACLES).join("jaeger-critical-path");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    cases.sort();
    cases
}

#[test]
fn critical_path_reproduces_every_jaeger_case() {
    let cases = critical_path_cases();
    assert!(cases.len() >= 9, "expected case1..case9, found {cases:?}");
    for case in cases {
        let doc = fixture(&case);
        let trace_id = doc["trace"]["data"][0]["traceID"].as_str().unwrap();
        let expected_sections: Vec<Value> = doc["expected_critical_path_latest_first"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                json!({
                    "span_id": s["span_id"],
                    "start_unix_ns": s["start_us"].as_u64().unwrap() * 1000,
                    "end_unix_ns": s["end_us"].as_u64().unwrap() * 1000,
                })
            })
            .collect();
        let expected = json!({"traces": [{"trace_id": trace_id, "critical_path": expected_sections}]});
        let actual = json(&["critical-path", "--json", case.to_str().unwrap()]);
        assert_eq!(actual, expected, "{}: {}", case.display(), doc["note"]);
    }
}

#[test]
fn critical_path_json_is_compact_and_in_documented_key_order() {
    let case = Path::new(ORACLES).join("jaeger-critical-path/case8.json");
    let o = ringtrace(&["critical-path", "--json", case.to_str().unwrap()]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "{\"traces\":[{\"trace_id\":\"59a49507a5ebc9f88d299288d18fb068\",\"critical_path\":\
         [{\"span_id\":\"dcc41e7736447934\",\"start_unix_ns\":10000,\"end_unix_ns\":30000}]}]}\n"
    );
}

fn stats_fixture() -> (PathBuf, Value) {
    let path = Path::new(ORACLES).join("jaeger-trace-stats/testTraceNormal.json");
    let doc = fixture(&path);
    (path, doc)
}

/// `expected` (µs, as the fixture states it) against `actual` (ns, as `stats --json` prints it):
/// integers exactly, averages to the last bit a division can differ by.
fn assert_stats_row(expected: &Value, actual: &Value, trace_duration_us: u64, what: &str) {
    for key in ["service", "operation"] {
        assert_eq!(actual.get(key), expected.get(key), "{what}: {key}");
    }
    assert_eq!(actual["count"], expected["count"], "{what}: count");
    for key in ["total", "min", "max", "self_total", "self_min", "self_max"] {
        let want = expected[format!("{key}_us")].as_u64().unwrap() * 1000;
        assert_eq!(actual[format!("{key}_ns")].as_u64(), Some(want), "{what}: {key}");
    }
    for key in ["avg", "self_avg"] {
        let want = expected[format!("{key}_us")].as_f64().unwrap() * 1000.0;
        let got = actual[format!("{key}_ns")].as_f64().unwrap();
        assert!((got - want).abs() <= want.abs() * 1e-12, "{what}: {key} {got} != {want}");
    }
    let self_total = expected["self_total_us"].as_u64().unwrap() as f64;
    let want = self_total / trace_duration_us as f64 * 100.0;
    let got = actual["percent"].as_f64().unwrap();
    assert!((got - want).abs() <= 1e-12 * want, "{what}: percent {got} != {want}");
}

#[test]
fn stats_reproduce_jaeger_trace_statistics_for_every_grouping() {
    let (path, doc) = stats_fixture();
    let trace_duration_us = doc["trace_duration_us"].as_u64().unwrap();
    for (by, key) in [
        ("service", "expected_by_service"),
        ("operation", "expected_by_operation_name_only"),
        ("service-operation", "expected_by_service_operation"),
    ] {
        let actual = json(&["stats", "--json", "--by", by, path.to_str().unwrap()]);
        assert_eq!(actual["group_by"], by);
        assert_eq!(actual["traces"], 1);
        assert_eq!(actual["spans"], 5);
        assert_eq!(actual["trace_duration_ns"].as_u64(), Some(trace_duration_us * 1000));
        let expected = doc[key].as_array().unwrap();
        let rows = actual["rows"].as_array().unwrap();
        assert_eq!(rows.len(), expected.len(), "{by}: {rows:?}");
        for (e, a) in expected.iter().zip(rows) {
            assert_stats_row(e, a, trace_duration_us, &format!("--by {by} {e}"));
        }
    }
}

#[test]
fn stats_self_times_match_every_span_of_the_fixture() {
    // With one span per (service, operation) row, or min/max of two, the rows pin every span's
    // self time; check them against the fixture's per-span values.
    let (path, doc) = stats_fixture();
    let mut expected: Vec<u64> = doc["expected_self_time_us"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap() * 1000)
        .collect();
    expected.sort_unstable();
    let actual = json(&["stats", "--json", "--by", "service-operation", path.to_str().unwrap()]);
    let mut seen = Vec::new();
    for row in actual["rows"].as_array().unwrap() {
        match row["count"].as_u64().unwrap() {
            1 => seen.push(row["self_total_ns"].as_u64().unwrap()),
            2 => seen.extend([row["self_min_ns"].as_u64().unwrap(), row["self_max_ns"].as_u64().unwrap()]),
            n => panic!("unexpected count {n}"),
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, expected);
}

#[test]
fn deps_reproduce_jaeger_memory_store_links() {
    let (path, doc) = stats_fixture();
    let actual = json(&["deps", "--json", path.to_str().unwrap()]);
    let expected: Vec<Value> = doc["expected_dependency_links_memory_store_rule"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            json!({"parent": l["parent"], "child": l["child"], "call_count": l["callCount"], "error_count": 0,
                   "uninstrumented": false})
        })
        .collect();
    assert_eq!(actual["services"], Value::Array(expected));
}

#[test]
fn critical_path_and_stats_from_a_jaeger_query_service() {
    use std::io::{BufRead, BufReader, Write};
    // A stand-in for Jaeger's query service: answers each request with a case document.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let case = Path::new(ORACLES).join("jaeger-critical-path/case2.json");
    let body = std::fs::read(&case).unwrap();
    let server = std::thread::spawn(move || {
        let mut requests = Vec::new();
        for _ in 0..2 {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            requests.push(line.clone());
            while reader.read_line(&mut line).unwrap() > 2 {
                line.clear();
            }
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            reader.get_mut().write_all(head.as_bytes()).unwrap();
            reader.get_mut().write_all(&body).unwrap();
        }
        requests
    });
    let fetched =
        json(&["critical-path", "--json", "--jaeger", &url, "--service", "service1", "--limit", "5"]);
    let from_file = json(&["critical-path", "--json", case.to_str().unwrap()]);
    assert_eq!(fetched, from_file);
    let stats = json(&["stats", "--json", "--jaeger", &url, "--service", "service1", "--lookback", "2h"]);
    assert_eq!(stats["spans"], 3);
    let requests = server.join().unwrap();
    assert!(requests[0].starts_with("GET /api/traces?service=service1&start="), "{requests:?}");
    assert!(requests[0].contains("&limit=5 HTTP/1.1"), "{requests:?}");
    // Two hours between start and end, in microseconds.
    let window = |r: &str| {
        let n = |k: &str| r.split(k).nth(1).unwrap().split('&').next().unwrap().parse::<u64>().unwrap();
        n("end=") - n("start=")
    };
    assert_eq!(window(&requests[1]), 7_200_000_000);

    let o = ringtrace(&["stats", "--jaeger", "https://jaeger.example:16686", "--service", "s"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && stderr.contains("https://jaeger.example:16686") && stderr.contains("https"),
        "{stderr}"
    );
}
