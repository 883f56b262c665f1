//! A process that exits without dropping its guard — `std::process::exit`, or a leaked guard
//! when `main` returns — keeps every span it recorded: the collector is shut down at exit as
//! the guard would have done it (last pass, counters, end frame, sync).
//!
//! The test binary starts itself again as the exiting process: `exit_child` is ignored in
//! normal runs and does its work only when started with `RINGTRACE_TEST_ROLE=exit`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::test_name;

/// Spans the child records before it exits, on two threads.
const SPANS: u64 = 10_000;

#[test]
#[ignore = "entry point of the process started by `exiting_without_the_guard_loses_nothing`"]
fn exit_child() {
    if std::env::var("RINGTRACE_TEST_ROLE").as_deref() != Ok("exit") {
        return;
    }
    let dir = std::env::var("RINGTRACE_TEST_DIR").unwrap();
    let how = std::env::var("RINGTRACE_TEST_EXIT").unwrap();
    // Rings large enough that nothing is dropped and the drain need not run before the exit.
    let (subscriber, guard) = ringtrace::Builder::new()
        .node("node-x")
        .daemon("exiting")
        .recording_dir(dir)
        .ring_capacity(1 << 16)
        .build_subscriber()
        .unwrap();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let record = |from: u64| {
        for i in from..from + SPANS / 2 {
            let _s = tracing::info_span!("work", i).entered();
            tracing::info!(i, "step");
        }
    };
    std::thread::spawn(move || record(0)).join().unwrap();
    record(SPANS / 2);
    // Still open at exit: recorded as unclosed.
    let held = tracing::info_span!("held").entered();
    std::mem::forget(held);
    match how.as_str() {
        "exit" => std::process::exit(0),
        "leak" => std::mem::forget(guard),
        other => panic!("unknown exit {other}"),
    }
}

fn run_child(dir: &Path, how: &str) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_name(module_path!(), "exit_child"),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RINGTRACE_TEST_ROLE", "exit")
        .env("RINGTRACE_TEST_DIR", dir)
        .env("RINGTRACE_TEST_EXIT", how)
        .env("RINGTRACE_QUIET", "1")
        .status()
        .unwrap();
    assert!(status.success(), "{how}: the child failed: {status}");
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ringtrace-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn exiting_without_the_guard_loses_nothing() {
    for how in ["exit", "leak"] {
        let dir = fresh_dir(&format!("exit-{how}"));
        run_child(&dir, how);
        let read = ringtrace_analysis::read_inputs_with(&[&dir], ringtrace_analysis::Truncation::Error)
            .unwrap_or_else(|e| panic!("{how}: {e}"));
        assert!(read.warnings.is_empty(), "{how}: {:?}", read.warnings);
        let data = read.data;
        let work: Vec<_> = data.spans.iter().filter(|s| s.name == "work").collect();
        assert_eq!(work.len() as u64, SPANS, "{how}: every span recorded before the exit is kept");
        assert!(work.iter().all(|s| s.events.len() == 1), "{how}: with its event");
        let held: Vec<_> = data.spans.iter().filter(|s| s.name == "held").collect();
        assert_eq!(held.len(), 1, "{how}");
        assert_eq!(data.processes.len(), 1);
        let p = &data.processes[0];
        assert_eq!(
            (p.unclosed_spans, p.dropped_spans, p.dropped_events),
            (1, 0, 0),
            "{how}: the counters are written"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
