//! `ringtrace profile` with the zoom, measure and phase flags, on the demo cluster.

use std::path::PathBuf;

use crate::support::{json, ringtrace, temp_dir, text};

#[test]
fn zoom_and_measures_on_the_demo() {
    let out = temp_dir("profile_zoom");
    let o = ringtrace(&["demo", "--out", out.to_str().unwrap(), "--requests", "40"]);
    assert!(o.status.success(), "demo failed: {}", text(&o.stderr));
    let rec: PathBuf = out.join("recordings");
    let rec = rec.to_str().unwrap();

    // Zoom: node-1 by method holds only the worker's methods, and the filter is reported.
    let j = json(&["profile", "--by", "method", "--node", "node-1", "--json", rec]);
    assert_eq!(j["filter"]["node"], "node-1");
    let groups = j["groups"].as_array().unwrap();
    assert!(!groups.is_empty());
    for g in groups {
        // The worker's own methods, the span it serves requests in, and its disk and network
        // I/O calls (`ringtrace::io`).
        let key = g["key"].as_str().unwrap();
        assert!(
            key.starts_with("ringtrace::demo::worker::")
                || key == "ringtrace::demo::rpc::rpc.serve"
                || key.starts_with("ringtrace::io::"),
            "{g}"
        );
        let counts: u64 = g["counts"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).sum();
        assert_eq!(counts, g["total"].as_u64().unwrap());
        let self_ns: u64 = g["self_ns"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).sum();
        assert!(self_ns <= g["total_time_ns"].as_u64().unwrap());
    }

    // Rates are counts per second of bucket.
    let j = json(&["profile", "--by", "daemon", "--bucket", "100ms", "--daemon", "worker", "--json", rec]);
    let g = &j["groups"][0];
    for (c, r) in g["counts"].as_array().unwrap().iter().zip(g["rates_per_s"].as_array().unwrap()) {
        assert_eq!(c.as_f64().unwrap() * 10.0, r.as_f64().unwrap());
    }

    let _ = std::fs::remove_dir_all(&out);
}

/// One OTLP/JSON line: a worker on `node` with one span per `(name, start_ms)`, each 2 ms long,
/// from a fixed origin.
fn worker_line(node: &str, spans: &[(&str, u64)]) -> String {
    const ORIGIN_NS: u64 = 1_700_000_000_000_000_000;
    let spans: Vec<String> = spans
        .iter()
        .enumerate()
        .map(|(i, (name, start_ms))| {
            let start = ORIGIN_NS + start_ms * 1_000_000;
            format!(
                r#"{{"traceId":"{:032x}","spanId":"{:016x}","name":"{name}","startTimeUnixNano":"{start}","endTimeUnixNano":"{}","attributes":[{{"key":"target","value":{{"stringValue":"demo::worker"}}}}]}}"#,
                i + 1,
                i + 1,
                start + 2_000_000
            )
        })
        .collect();
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"worker"}}}},{{"key":"host.name","value":{{"stringValue":"{node}"}}}}]}},"scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    )
}

/// The phase change the demo's workload makes — blocks stored first, then read — found where it
/// is. The spans are written with exact times, so nothing depends on how fast the machine ran.
#[test]
fn the_store_to_read_switch_is_a_phase_change() {
    let dir = temp_dir("profile_zoom-phases");
    std::fs::create_dir_all(&dir).unwrap();
    // Two workers, each storing every 10 ms for 600 ms, then fetching and mapping every 10 ms
    // for 600 ms.
    let mut lines = Vec::new();
    for node in ["node-1", "node-2"] {
        let mut spans: Vec<(&str, u64)> = (0..60).map(|i| ("handle_store", i * 10)).collect();
        spans.extend((60..120).map(|i| (if i % 2 == 0 { "handle_fetch" } else { "handle_map" }, i * 10)));
        lines.push(worker_line(node, &spans));
    }
    let input = dir.join("phases.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let input = input.to_str().unwrap();

    let j = json(&["profile", "--by", "daemon", "--bucket", "50ms", "--phases", "--json", input]);
    let phases = j["phases"].as_array().unwrap();
    let start = j["start_unix_ns"].as_u64().unwrap();
    let switch = 1_700_000_000_000_000_000u64 + 600_000_000;
    assert_eq!(start, 1_700_000_000_000_000_000);
    let at: Vec<u64> = phases.iter().map(|p| p["at_unix_ns"].as_u64().unwrap()).collect();
    assert_eq!(at, [switch], "one phase change, at the switch: {phases:#?}");
    assert!(phases[0]["mix_change_bits"].as_f64().unwrap() >= 0.9, "{}", phases[0]);

    // The table names the measure and lists the phases.
    let o =
        ringtrace(&["profile", "--by", "node", "--measure", "self", "--bucket", "100ms", "--phases", input]);
    let table = text(&o.stdout);
    assert!(
        o.status.success() && table.contains("self time, ns per bucket") && table.contains("phase changes:"),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_profile_values_name_themselves() {
    let rec = "nowhere";
    let o = ringtrace(&["profile", "--measure", "speed", rec]);
    assert!(!o.status.success() && text(&o.stderr).contains("speed"));
    let o = ringtrace(&["profile", "--from", "tomorrow", rec]);
    assert!(!o.status.success() && text(&o.stderr).contains("tomorrow"));
}
