//! `ringtrace envelope`, `stage` and `predict` (issue #17): the commands, their JSON and their
//! errors. What the model predicts against what a stage measures is a benchmark
//! (`benches/io_model.sh`), not a test: its figures depend on the machine.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use crate::support::{json, ok, ringtrace, temp_dir, text};

#[test]
fn the_envelope_has_every_parameter_for_every_point() {
    let dir = temp_dir("io-model-envelope");
    std::fs::create_dir_all(dir.join("remote")).unwrap();
    let d = dir.to_str().unwrap();
    let remote = dir.join("remote");
    let out = dir.join("envelope.json");
    let doc = json(&[
        "envelope",
        d,
        "--procs",
        "1,2",
        "--sizes",
        "4K,64K",
        "--files",
        "4",
        "--keep-caches",
        "--remote",
        remote.to_str().unwrap(),
        "--json",
        "-o",
        out.to_str().unwrap(),
    ]);
    let points = doc["points"].as_array().unwrap();
    assert_eq!(points.len(), 4, "{doc}");
    for p in points {
        for key in [
            "create_ops_per_s",
            "write_ops_per_s",
            "write_bytes_per_s",
            "read_local_ops_per_s",
            "read_local_bytes_per_s",
            "read_remote_ops_per_s",
            "read_remote_bytes_per_s",
            "read_shared_ops_per_s",
            "read_shared_bytes_per_s",
        ] {
            assert!(p[key].as_f64().is_some_and(|v| v > 0.0), "{key} in {p}");
        }
        let (ops, bytes) = (p["write_ops_per_s"].as_f64().unwrap(), p["write_bytes_per_s"].as_f64().unwrap());
        let size = p["bytes"].as_f64().unwrap();
        assert!(((bytes / ops) - size).abs() < 1e-6 * size, "bandwidth is files/s times the size: {p}");
    }
    // The file is the same document, and predict reads it.
    let written: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written, doc);
    let p = json(&[
        "predict",
        "--envelope",
        out.to_str().unwrap(),
        "--stage",
        "read",
        "--tasks",
        "8",
        "--nodes",
        "2",
        "--bytes",
        "16K",
        "--local-fraction",
        "0.5",
        "--shared-bytes",
        "4K",
        "--json",
    ]);
    let names: Vec<&str> =
        p["terms"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["read_local", "read_remote", "read_shared"], "{p}");
    assert_eq!(p["rounds"], 4);
    // Heatmaps of the predicted bandwidth, as SVG and in the report.
    let svg = dir.join("heat.svg");
    ok(&[
        "predict",
        "--envelope",
        out.to_str().unwrap(),
        "--stage",
        "write",
        "--tasks",
        "8",
        "--nodes",
        "2",
        "--bytes",
        "4K",
        "--heatmap",
        svg.to_str().unwrap(),
    ]);
    let svg = std::fs::read_to_string(&svg).unwrap();
    // (7 task counts + 2 process counts) × 2 sizes, every one covered.
    assert_eq!(svg.matches("class=\"mark\"").count(), 18, "{svg}");
    assert!(svg.contains("64K"), "{svg}");
    let rec = crate::support::record("io-model-report", "n", "d", |_| {
        let _s = tracing::info_span!("work").entered();
    });
    let html = dir.join("report.html");
    ok(&["report", rec.to_str().unwrap(), "--envelope", out.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    let html = std::fs::read_to_string(&html).unwrap();
    assert_eq!(html.matches("data-chart=\"envelope\"").count(), 2, "write and read heatmaps");
    let _ = std::fs::remove_dir_all(&rec);
    // Nothing left behind in the measured directories.
    assert_eq!(std::fs::read_dir(&remote).unwrap().count(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stage_is_measured_from_its_own_io_records() {
    let dir = temp_dir("io-model-stage");
    let d = dir.to_str().unwrap();
    let w = json(&[
        "stage", "--dir", d, "--stage", "write", "--tasks", "6", "--nodes", "2", "--bytes", "8K", "--json",
    ]);
    // open, write, close per task.
    assert_eq!(w["calls"], 18, "{w}");
    assert_eq!(w["bytes"], 6 * 8192, "{w}");
    assert!(w["seconds"].as_f64().unwrap() > 0.0);
    let r = json(&[
        "stage", "--dir", d, "--stage", "read", "--tasks", "6", "--nodes", "2", "--bytes", "8K", "--json",
    ]);
    assert_eq!(r["bytes"], 6 * 8192, "{r}");
    let said = ok(&["stage", "--dir", d, "--stage", "read", "--tasks", "6", "--nodes", "3", "--bytes", "8K"]);
    assert!(said.starts_with("stage I/O time: "), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The I/O calls `recording` holds on each file whose name starts with `prefix`, read from its
/// OTLP/JSON export: `{file name: {io.op: calls}}`.
fn calls_per_file(recording: &std::path::Path, prefix: &str) -> BTreeMap<String, BTreeMap<String, u64>> {
    let out = recording.with_extension("json");
    ok(&["export", "--format", "otlp-json", recording.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let mut files: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let attr = |span: &serde_json::Value, key: &str| {
        span["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| a["value"]["stringValue"].clone())
    };
    for rs in doc["resourceSpans"].as_array().unwrap() {
        for ss in rs["scopeSpans"].as_array().unwrap() {
            for span in ss["spans"].as_array().unwrap() {
                let (Some(path), Some(op)) = (attr(span, "file.path"), attr(span, "io.op")) else { continue };
                let name =
                    std::path::Path::new(path.as_str().unwrap()).file_name().unwrap().to_str().unwrap();
                if name.starts_with(prefix) {
                    *files
                        .entry(name.to_owned())
                        .or_default()
                        .entry(op.as_str().unwrap().to_owned())
                        .or_default() += 1;
                }
            }
        }
    }
    files
}

/// The envelope's create and write phases make, on each file, exactly the calls a write stage's
/// task makes on its own — one create, its writes, one close — so that the model's create and
/// write terms add up to a task. (They once reopened each file to write it: two opens and two
/// closes a file.)
#[test]
fn the_envelope_writes_a_file_with_the_calls_a_stage_task_makes() {
    let dir = temp_dir("io-model-phases");
    let d = dir.to_str().unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("worker-recording");
    let mut worker = Command::new(env!("CARGO_BIN_EXE_ringtrace"))
        .args(["__io-worker", "--op", "create-then-write", "--dir", d, "--bytes", "8192"])
        .args(["--index", "0", "--workers", "1", "--count", "3", "--fsync"])
        .env("RINGTRACE_DIR", &rec)
        .env("RINGTRACE_QUIET", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = worker.stdin.take().unwrap();
    let mut stdout = BufReader::new(worker.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "READY\n");
    for phase in ["create", "write"] {
        writeln!(stdin, "GO 0").unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        assert!(line.starts_with("DONE "), "the {phase} phase: {line:?}");
        if phase == "create" {
            // Created and still open: nothing written yet.
            for k in 0..3 {
                assert_eq!(std::fs::metadata(dir.join(format!("w0-f{k}"))).unwrap().len(), 0);
            }
        }
    }
    drop(stdin);
    assert!(worker.wait().unwrap().success());
    let envelope = calls_per_file(&rec, "w0-f");

    ok(&[
        "stage", "--dir", d, "--stage", "write", "--tasks", "3", "--nodes", "1", "--bytes", "8K", "--fsync",
    ]);
    let stage = calls_per_file(&dir.join("recordings"), "task-");

    let per_file = |files: &BTreeMap<String, BTreeMap<String, u64>>| {
        assert_eq!(files.len(), 3, "{files:?}");
        let all: Vec<_> = files.values().collect();
        assert!(all.windows(2).all(|w| w[0] == w[1]), "{files:?}");
        all[0].clone()
    };
    let (envelope, stage) = (per_file(&envelope), per_file(&stage));
    assert_eq!(envelope, stage);
    assert_eq!(envelope.get("open"), Some(&1), "{envelope:?}");
    assert_eq!(envelope.get("close"), Some(&1), "{envelope:?}");
    assert_eq!(envelope.get("fsync").or(envelope.get("sync")), Some(&1), "{envelope:?}");
    for k in 0..3 {
        assert_eq!(std::fs::metadata(dir.join(format!("w0-f{k}"))).unwrap().len(), 8192);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Under a low limit on open files, the envelope keeps no more files open a process than it
/// may (the default count shrinks to fit), and a `--files` beyond the limit is refused by name.
#[test]
fn the_envelope_fits_its_files_under_the_open_files_limit() {
    let dir = temp_dir("io-model-nofile");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let bin = env!("CARGO_BIN_EXE_ringtrace");
    let under_limit = |extra: &str| {
        Command::new("bash")
            .arg("-c")
            .arg(format!(
                "ulimit -n 200 && ulimit -Hn 200 && exec \"$0\" envelope \"$1\" --procs 1 --sizes 4K \
                 --repeat 1 --keep-caches --json {extra}"
            ))
            .args([bin, d])
            .output()
            .unwrap()
    };
    // 4 KiB files would be 1,024 a process by default.
    let o = under_limit("");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("136 files a process at most"), "{}", text(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["points"][0]["write_ops_per_s"].as_f64().unwrap() > 0.0, "{doc}");
    let o = under_limit("--files 500");
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("500 files a process are kept open") && err.contains("200 (hard limit)"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn predict_refuses_what_it_cannot_know() {
    let dir = temp_dir("io-model-predict");
    std::fs::create_dir_all(&dir).unwrap();
    let env = dir.join("env.json");
    std::fs::write(
        &env,
        r#"{"points":[{"procs":4,"bytes":1000000,"create_ops_per_s":400,"write_ops_per_s":80,"write_bytes_per_s":4e7}]}"#,
    )
    .unwrap();
    let e = env.to_str().unwrap();
    let p = json(&[
        "predict",
        "--envelope",
        e,
        "--stage",
        "write",
        "--tasks",
        "10",
        "--nodes",
        "4",
        "--bytes",
        "1000000",
        "--json",
    ]);
    assert!((p["seconds"].as_f64().unwrap() - 0.33).abs() < 1e-9, "{p}");
    assert_eq!(p["terms"][1]["bound"], "bandwidth");
    let fails = |args: &[&str]| {
        let o = ringtrace(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        text(&o.stderr)
    };
    let base = ["predict", "--envelope", e, "--stage", "write", "--tasks", "10", "--bytes", "1000000"];
    assert!(fails(&[&base[..], &["--nodes", "8"]].concat()).contains("does not cover 8 processes"));
    let read = [
        "predict",
        "--envelope",
        e,
        "--stage",
        "read",
        "--tasks",
        "10",
        "--nodes",
        "4",
        "--bytes",
        "1000000",
    ];
    assert!(fails(&read).contains("read_local_ops_per_s"));
    assert!(fails(&[&base[..], &["--nodes", "0"]].concat()).contains("--nodes"));
    assert!(
        fails(&[&base[..], &["--nodes", "4", "--local-fraction", "2"]].concat()).contains("between 0 and 1")
    );
    std::fs::write(&env, r#"{"write_bytes_per_s": -1}"#).unwrap();
    assert!(fails(&[&base[..], &["--nodes", "4"]].concat()).contains("must be positive"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_recorded_stage_gives_its_envelope_passively() {
    let dir = temp_dir("io-model-passive");
    let d = dir.to_str().unwrap();
    let (w, r) = (dir.join("rec-write"), dir.join("rec-read"));
    let stage = |kind: &str, rec: &std::path::Path| {
        let rec = rec.to_str().unwrap();
        ok(&[
            "stage",
            "--dir",
            d,
            "--stage",
            kind,
            "--tasks",
            "6",
            "--nodes",
            "2",
            "--bytes",
            "8K",
            "--recordings",
            rec,
        ]);
    };
    stage("write", &w);
    stage("read", &r);
    let (w, r) = (w.to_str().unwrap(), r.to_str().unwrap());
    let doc = json(&["io", "envelope", "--json", w, r]);
    // Every point at 8 KiB and at most the two workers at once (how much their calls overlapped,
    // and so whether writes and reads land on one point, is the machine's doing).
    let points = doc["points"].as_array().unwrap();
    assert!((1..=2).contains(&points.len()), "{doc}");
    for p in points {
        assert!(matches!(p["procs"].as_u64(), Some(1 | 2)), "{doc}");
        assert_eq!(p["bytes"].as_u64(), Some(8192), "{doc}");
        assert!(
            p.get("read_shared_ops_per_s").is_none() && p.get("read_remote_ops_per_s").is_none(),
            "{doc}"
        );
    }
    let with = |key: &str| points.iter().find(|p| p[key].as_f64().is_some_and(|v| v > 0.0));
    for key in ["create_ops_per_s", "write_ops_per_s", "read_local_ops_per_s"] {
        assert!(with(key).is_some(), "{key}: {doc}");
    }
    for kind in ["write", "read_local"] {
        let p = with(&format!("{kind}_ops_per_s")).unwrap();
        let (ops, bytes) = (
            p[format!("{kind}_ops_per_s")].as_f64().unwrap(),
            p[format!("{kind}_bytes_per_s")].as_f64().unwrap(),
        );
        assert!((bytes / ops - 8192.0).abs() < 1e-6 * 8192.0, "{kind}: every file is 8 KiB: {doc}");
    }
    let write_procs = with("write_ops_per_s").unwrap()["procs"].as_u64().unwrap().to_string();
    // One worker's calls: one process.
    let one = json(&["io", "envelope", "--json", "--node", "node-0", w, r]);
    assert_eq!(one["points"][0]["procs"], 1, "{one}");
    // `predict` reads it.
    let env = dir.join("passive.json");
    ok(&["io", "envelope", "-o", env.to_str().unwrap(), w, r]);
    let e = env.to_str().unwrap();
    let predicted = json(&[
        "predict",
        "--envelope",
        e,
        "--stage",
        "write",
        "--tasks",
        "6",
        "--nodes",
        &write_procs,
        "--bytes",
        "8K",
        "--json",
    ]);
    assert_eq!(predicted["rounds"], if write_procs == "2" { 3 } else { 6 }, "{predicted}");
    // Recordings without file calls: the problem is named.
    let o = ringtrace(&["io", "envelope", "--node", "node-9", w]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("no file reads or writes of node node-9"), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reads_with_direct_io_say_so() {
    let dir = temp_dir("io-model-direct");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let args = [
        "envelope", d, "--procs", "1", "--sizes", "4K", "--files", "4", "--repeat", "1", "--json", "--direct",
    ];
    let o = ringtrace(&args);
    if o.status.success() {
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(doc["reads"], "direct", "{doc}");
        assert!(doc["points"][0]["read_local_bytes_per_s"].as_f64().is_some_and(|v| v > 0.0), "{doc}");
        // A read stage, direct too.
        ok(&["stage", "--dir", d, "--stage", "write", "--tasks", "2", "--nodes", "1", "--bytes", "6000"]);
        let r = json(&[
            "stage", "--dir", d, "--stage", "read", "--tasks", "2", "--nodes", "1", "--bytes", "6000",
            "--direct", "--json",
        ]);
        assert_eq!(r["bytes"], 2 * 6000, "a file's unaligned tail is read too: {r}");
    } else {
        // A file system without direct I/O: refused, and named.
        assert!(text(&o.stderr).contains("O_DIRECT (--direct)"), "{}", text(&o.stderr));
    }
    // Without `--direct`, the JSON says what happened to the page cache.
    let doc = json(&args[..args.len() - 1]);
    assert!(doc["reads"] == "cache dropped" || doc["reads"] == "cache kept", "{doc}");
    let o = ringtrace(&[
        "stage", "--dir", d, "--stage", "write", "--tasks", "1", "--nodes", "1", "--bytes", "1K", "--direct",
    ]);
    assert!(!o.status.success() && text(&o.stderr).contains("applies to read stages"), "{}", text(&o.stderr));
    let o = ringtrace(&["envelope", d, "--direct", "--keep-caches"]);
    assert!(!o.status.success() && text(&o.stderr).contains("--keep-caches"), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
