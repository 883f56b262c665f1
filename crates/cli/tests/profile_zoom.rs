//! `ringtrace profile` with the zoom, measure and phase flags, on the demo cluster.

use std::path::PathBuf;

use crate::support::{json, ringtrace, temp_dir, text};

#[test]
fn zoom_measures_and_the_store_to_read_phase() {
    let out = temp_dir("profile_zoom");
    let o = ringtrace(&["demo", "--out", out.to_str().unwrap(), "--requests", "40"]);
    assert!(o.status.success(), "demo failed: {}", text(&o.stderr));
    let rec: PathBuf = out.join("recordings");
    let rec = rec.to_str().unwrap();

    // Zoom: node-1 by method holds only worker methods, and the filter is reported.
    let j = json(&["profile", "--by", "method", "--node", "node-1", "--json", rec]);
    assert_eq!(j["filter"]["node"], "node-1");
    let groups = j["groups"].as_array().unwrap();
    assert!(!groups.is_empty());
    for g in groups {
        assert!(g["key"].as_str().unwrap().starts_with("ringtrace::demo::worker::"), "{g}");
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

    // The workload stores blocks first, then reads them: the workers' phase change falls
    // between the last store and the first read (give or take the five-bucket window).
    let data = ringtrace_analysis::read_inputs(&[rec]).unwrap();
    let starts = |names: &[&str]| -> Vec<u64> {
        data.spans
            .iter()
            .filter(|s| s.daemon == "worker" && names.contains(&s.name.as_str()))
            .map(|s| s.start_unix_ns)
            .collect()
    };
    let last_store = starts(&["handle_store"]).into_iter().max().unwrap();
    let first_read = starts(&["handle_fetch", "handle_map"]).into_iter().min().unwrap();
    // Thirty buckets over the run, however fast the machine ran it.
    let first = data.spans.iter().map(|s| s.start_unix_ns).min().unwrap();
    let last = data.spans.iter().map(|s| s.start_unix_ns).max().unwrap();
    let bucket = ((last - first) / 30).max(1);
    let bucket_arg = format!("{bucket}ns");
    let j = json(&[
        "profile",
        "--by",
        "daemon",
        "--daemon",
        "worker",
        "--bucket",
        &bucket_arg,
        "--phases",
        "--json",
        rec,
    ]);
    let phases = j["phases"].as_array().unwrap();
    let transition = phases.iter().find(|p| {
        let at = p["at_unix_ns"].as_u64().unwrap();
        at + 5 * bucket >= last_store && at <= first_read + 5 * bucket
    });
    let p = transition.unwrap_or_else(|| {
        panic!("no phase near the store→read switch ({last_store}..{first_read}): {phases:#?}")
    });
    assert!(p["mix_change_bits"].as_f64().unwrap() >= 0.3, "{p}");

    // The table names the measure and lists the phases.
    let o = ringtrace(&[
        "profile",
        "--by",
        "node",
        "--daemon",
        "worker",
        "--measure",
        "self",
        "--bucket",
        "20ms",
        "--phases",
        rec,
    ]);
    let table = text(&o.stdout);
    assert!(
        o.status.success() && table.contains("self time, ns per bucket") && table.contains("phase changes:"),
        "{table}"
    );

    // Bad values name themselves.
    let o = ringtrace(&["profile", "--measure", "speed", rec]);
    assert!(!o.status.success() && text(&o.stderr).contains("speed"));
    let o = ringtrace(&["profile", "--from", "tomorrow", rec]);
    assert!(!o.status.success() && text(&o.stderr).contains("tomorrow"));
    let _ = std::fs::remove_dir_all(&out);
}
