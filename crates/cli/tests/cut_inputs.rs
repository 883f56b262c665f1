//! A recording cut short by a crash mid-write: every view command reads its intact frames, warns
//! on stderr and succeeds; with `--strict` it refuses the file.

use std::path::PathBuf;

use crate::support::{record, ringtrace, temp_dir, text};

/// A recording of two frames (spans flushed between them) with its last 5 bytes cut off, as a
/// crash mid-write leaves it.
fn cut_recording() -> PathBuf {
    let dir = record("cut-inputs", "node-cut", "cutter", |guard| {
        for i in 0..20u64 {
            let _s = tracing::info_span!("first_frame", i).entered();
        }
        guard.flush().unwrap();
        for i in 0..20u64 {
            let _s = tracing::info_span!("second_frame", i).entered();
        }
    });
    let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() - 5]).unwrap();
    file
}

#[test]
fn every_view_command_reads_a_cut_recording_with_a_warning_and_strict_refuses_it() {
    let file = cut_recording();
    let path = file.to_str().unwrap();
    let report_dir = temp_dir("cut-inputs-report");
    std::fs::create_dir_all(&report_dir).unwrap();
    let report = report_dir.join("report.html");
    let report = report.to_str().unwrap();
    let commands: [&[&str]; 8] = [
        &["profile", path],
        &["profile", "--by", "method", "--measure", "count", path],
        &["anomalies", path],
        &["flame", path],
        &["report", "-o", report, path],
        &["stats", path],
        &["requests", path],
        &["diff", path, path],
    ];
    for args in commands {
        let out = ringtrace(args);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{args:?}: {stderr}");
        assert!(stderr.contains("warning") && stderr.contains("--strict"), "{args:?}: {stderr}");
        let mut strict = args.to_vec();
        strict.insert(1, "--strict");
        let out = ringtrace(&strict);
        assert!(!out.status.success(), "{strict:?} accepted a cut file");
        assert!(text(&out.stderr).contains(path), "{strict:?}: {}", text(&out.stderr));
    }
}
