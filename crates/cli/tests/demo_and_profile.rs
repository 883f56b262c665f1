//! `ringtrace demo` and `ringtrace profile`, run as a user runs them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::support::{ringtrace, temp_dir, text};

/// Runs the demo once and returns its recordings directory.
fn demo(out: &Path, extra: &[&str]) -> PathBuf {
    let mut args = vec!["demo", "--out", out.to_str().unwrap(), "--requests", "16"];
    args.extend_from_slice(extra);
    let o = ringtrace(&args);
    assert!(o.status.success(), "demo failed: {}\n{}", text(&o.stdout), text(&o.stderr));
    let stdout = text(&o.stdout);
    for section in
        ["Frequency profile by node", "Frequency profile by daemon", "Top methods", "== Request req-"]
    {
        assert!(stdout.contains(section), "missing {section:?} in:\n{stdout}");
    }
    out.join("recordings")
}

#[test]
fn demo_requests_are_single_traces_across_processes() {
    let out = temp_dir("demo_and_profile-demo");
    let recordings = demo(&out, &["--workers", "3"]);
    let files: Vec<_> = std::fs::read_dir(&recordings).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(files.len(), 5, "{files:?}");
    let data = ringtrace_analysis::read_inputs(&[&recordings]).unwrap();
    let nodes: BTreeSet<_> = data.processes.iter().map(|p| (p.node.as_str(), p.daemon.as_str())).collect();
    assert_eq!(
        nodes,
        BTreeSet::from([
            ("client-1", "client"),
            ("node-0", "master"),
            ("node-1", "worker"),
            ("node-2", "worker"),
            ("node-3", "worker")
        ])
    );
    assert_eq!(data.dropped_spans_total(), 0);
    let traces = data.traces();
    assert_eq!(traces.len(), 16, "one trace per request");
    let mut request_ids = BTreeSet::new();
    let mut max_processes = 0;
    for spans in traces.values() {
        let ids: HashMap<_, _> = spans.iter().map(|&i| (data.spans[i].span_id, i)).collect();
        let roots: Vec<_> = spans.iter().filter(|&&i| data.spans[i].parent_span_id.is_none()).collect();
        assert_eq!(roots.len(), 1, "a request has exactly one root");
        for &i in spans {
            if let Some(p) = data.spans[i].parent_span_id {
                assert!(ids.contains_key(&p), "span {} has a parent outside its trace", data.spans[i].name);
            }
        }
        let requests: BTreeSet<_> = spans.iter().map(|&i| data.spans[i].request_id.clone()).collect();
        assert_eq!(requests.len(), 1, "one request id per trace: {requests:?}");
        let request = requests.into_iter().next().unwrap().expect("every span carries request.id");
        assert!(request_ids.insert(request));
        let processes: BTreeSet<_> = spans.iter().map(|&i| data.spans[i].process).collect();
        max_processes = max_processes.max(processes.len());
    }
    assert!(max_processes >= 4, "some request fans out to client, master and several workers");
    // Nothing is left running: every recording holds its final counters frame, and the demo
    // returned only after reaping its children.
    let _ = std::fs::remove_dir_all(&out);
}

/// `demo --no-tracing` under each baseline `RINGTRACE_DEMO_TRACING` names (unset: `off`);
/// returns the run's output and the master's stderr log.
fn demo_baseline(name: &str, baseline: Option<&str>) -> (std::process::Output, String) {
    let out = temp_dir(name);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ringtrace"));
    cmd.args(["demo", "--no-tracing", "--requests", "8", "--out", out.to_str().unwrap()]);
    match baseline {
        Some(b) => cmd.env("RINGTRACE_DEMO_TRACING", b),
        None => cmd.env_remove("RINGTRACE_DEMO_TRACING"),
    };
    let o = {
        let _one_demo = crate::support::demo_lock();
        cmd.output().expect("run ringtrace")
    };
    let log = std::fs::read_to_string(out.join("logs/node-0-master.stderr.log")).unwrap_or_default();
    let mut written: Vec<String> = std::fs::read_dir(out.join("recordings"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    written.sort();
    if matches!(baseline, Some("floor-disk" | "floor-subscriber-disk")) {
        // One file of the floor's own per process (client, master, workers), no recording.
        assert!(written.len() >= 3, "{written:?}");
        assert!(written.iter().all(|f| f.ends_with(".floor")), "{written:?}");
        assert!(written.iter().any(|f| f.starts_with("node-0_master_")), "{written:?}");
    } else {
        assert_eq!(written, Vec::<String>::new(), "a baseline run records nothing");
    }
    let _ = std::fs::remove_dir_all(&out);
    (o, log)
}

#[test]
fn demo_baselines_run_the_cluster_without_recording() {
    let cases = [
        (None, "off"),
        (Some(""), "off"),
        (Some("off"), "off"),
        (Some("floor"), "floor"),
        (Some("floor-fields"), "floor-fields"),
        (Some("floor-disk"), "floor-disk"),
        (Some("floor-subscriber-disk"), "floor-subscriber-disk"),
    ];
    for (i, (baseline, said)) in cases.into_iter().enumerate() {
        let (o, log) = demo_baseline(&format!("demo_and_profile-baseline-{i}"), baseline);
        let stdout = text(&o.stdout);
        assert!(o.status.success(), "{baseline:?}: {stdout}\n{}", text(&o.stderr));
        assert!(stdout.contains("8 requests ok, 0 failed"), "{baseline:?}: {stdout}");
        assert!(!stdout.contains("Frequency profile"), "no report without recordings: {stdout}");
        let expected = format!("RINGTRACE_DEMO_TRACING={said}, nothing is recorded");
        assert!(log.contains(&expected), "{baseline:?}: the master's log lacks {expected:?}:\n{log}");
    }
    let (o, _) = demo_baseline("demo_and_profile-baseline-bad", Some("fast"));
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains(
            r#"RINGTRACE_DEMO_TRACING="fast": expected off, floor, floor-fields, floor-disk or floor-subscriber-disk"#
        ),
        "{stderr}"
    );
}

#[test]
fn profile_outputs_table_csv_and_json() {
    let out = temp_dir("demo_and_profile-profile");
    let recordings = demo(&out, &[]);
    let dir = recordings.to_str().unwrap();

    let o = ringtrace(&["profile", "--by", "daemon", "--bucket", "100ms", "--json", dir]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["group_by"], "daemon");
    assert_eq!(json["bucket_ns"], 100_000_000);
    assert!(json["start_unix_ns"].as_u64().unwrap() % 100_000_000 == 0);
    let groups = json["groups"].as_array().unwrap();
    let keys: BTreeSet<_> = groups.iter().map(|g| g["key"].as_str().unwrap()).collect();
    assert_eq!(keys, BTreeSet::from(["client", "master", "worker"]));
    let data = ringtrace_analysis::read_inputs(&[&recordings]).unwrap();
    let total: u64 = groups.iter().map(|g| g["total"].as_u64().unwrap()).sum();
    assert_eq!(total, data.spans.len() as u64);
    for g in groups {
        let counts: u64 = g["counts"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).sum();
        assert_eq!(counts, g["total"].as_u64().unwrap());
    }

    let o = ringtrace(&["profile", "--by", "method", "--csv", dir]);
    assert!(o.status.success());
    let csv = text(&o.stdout);
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("group,bucket_start_unix_ns,count"));
    let mut per_method: BTreeMap<String, u64> = BTreeMap::new();
    for line in lines {
        let cols: Vec<_> = line.rsplitn(3, ',').collect();
        *per_method.entry(cols[2].to_owned()).or_default() += cols[0].parse::<u64>().unwrap();
    }
    assert!(per_method.keys().any(|m| m.ends_with("::handle_store")), "{per_method:?}");
    assert_eq!(per_method.values().sum::<u64>(), data.spans.len() as u64);

    let o = ringtrace(&["profile", "--by", "node", dir]);
    assert!(o.status.success());
    let table = text(&o.stdout);
    for node in ["client-1", "node-0", "node-1", "node-2", "node-3"] {
        assert!(table.contains(node), "{table}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_arguments_and_inputs_are_clear_errors() {
    let dir = temp_dir("demo_and_profile-errors");
    std::fs::create_dir_all(&dir).unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["profile".into(), "--by".into(), "host".into(), "x".into()], "host"),
        (vec!["profile".into(), "--bucket".into(), "10".into(), "x".into()], "\"10\""),
        (vec!["profile".into(), dir.join("missing.otlp").display().to_string()], "missing.otlp"),
    ];
    for (args, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = ringtrace(&args);
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = text(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // A truncated recording names the file and the position: a warning (what is intact is
    // read, here nothing), and with --strict an error.
    let bad = dir.join("truncated.otlp");
    std::fs::write(&bad, [0x96, 0x01, 0x0a, 0x03]).unwrap();
    let o = ringtrace(&["profile", bad.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("warning") && err.contains("truncated.otlp") && err.contains("byte"), "{err}");
    let o = ringtrace(&["profile", "--strict", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("truncated.otlp") && err.contains("byte"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
