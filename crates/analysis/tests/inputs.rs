//! Files and directories as inputs, and format detection by content.

use crate::common::{fixture, frame, recording, resource, span, TempDir};
use ringtrace_analysis::read::ReadErrorKind;
use ringtrace_analysis::{list_inputs, read_inputs};

fn one_process(node: &str, daemon: &str, pid: i64, spans: u8) -> Vec<u8> {
    let spans = (1..=spans).map(|i| span(pid as u8, i, None, "op", 10, 20)).collect();
    recording(&[frame(resource(node, daemon, pid, [pid, 0, 0, 0]), spans)])
}

#[test]
fn a_directory_reads_its_trace_files_sorted_and_skips_the_rest() {
    let dir = TempDir::new("dir");
    dir.file("node-2_worker_2.otlp", &one_process("node-2", "worker", 2, 3));
    dir.file("node-1_master_1.otlp", &one_process("node-1", "master", 1, 2));
    dir.file(".node-9_hidden_9.otlp", b"garbage that would fail");
    dir.file("notes.txt", b"garbage that would fail");
    std::fs::create_dir(dir.path().join(".cache")).unwrap();
    std::fs::write(dir.path().join(".cache/x.otlp"), b"garbage").unwrap();

    let files = list_inputs(&[dir.path()]).unwrap();
    let names: Vec<_> = files.iter().map(|f| f.file_name().unwrap().to_str().unwrap()).collect();
    assert_eq!(names, ["node-1_master_1.otlp", "node-2_worker_2.otlp"]);

    let data = read_inputs(&[dir.path()]).unwrap();
    let procs: Vec<_> = data.processes.iter().map(|p| (p.daemon.as_str(), p.pid)).collect();
    assert_eq!(procs, [("master", Some(1)), ("worker", Some(2))]);
    assert_eq!(data.processes[1].source, dir.path().join("node-2_worker_2.otlp"));
    let owners: Vec<(usize, &str)> = data.spans.iter().map(|s| (s.process, s.node.as_str())).collect();
    assert_eq!(owners, [(0, "node-1"), (0, "node-1"), (1, "node-2"), (1, "node-2"), (1, "node-2")]);
    assert_eq!(data.dropped_spans_total(), 3);
}

#[test]
fn files_and_directories_mix_and_content_decides_the_format() {
    let dir = TempDir::new("mix");
    // Binary content behind a .json name, JSON lines behind a .otlp name, any name when given
    // explicitly.
    let bin = dir.file("looks-like.json", &one_process("n", "d", 1, 1));
    let json = dir.file("collector.otlp", &std::fs::read(fixture("collector.jsonl")).unwrap());
    let other = TempDir::new("mix-extra");
    let explicit = other.file("trace.dat", &one_process("m", "e", 2, 2));
    let data = read_inputs(&[dir.path(), explicit.as_path()]).unwrap();
    let sources: Vec<_> = data.processes.iter().map(|p| p.source.clone()).collect();
    assert_eq!(sources, [json.clone(), json, bin, explicit]);
    assert_eq!(data.spans.len(), 2 + 1 + 2);
}

#[test]
fn empty_and_blank_files_hold_no_spans() {
    let dir = TempDir::new("empty");
    let empty = dir.file("empty.otlp", b"");
    let blank = dir.file("blank.jsonl", b"\n  \n");
    let data = read_inputs(&[empty, blank]).unwrap();
    assert!(data.spans.is_empty() && data.processes.is_empty());
}

#[test]
fn a_directory_without_trace_files_is_an_error_naming_it() {
    let dir = TempDir::new("nofiles");
    dir.file("README.md", b"nothing here");
    // Neither a subdirectory without trace files nor a hidden one with some counts.
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    dir.file("logs/node-1.log", b"nothing here");
    std::fs::create_dir_all(dir.path().join(".old")).unwrap();
    dir.file(".old/n.otlp", &one_process("n", "d", 1, 1));
    let err = read_inputs(&[dir.path()]).unwrap_err();
    assert_eq!(err.kind(), ReadErrorKind::NoInputs);
    assert_eq!(
        err.to_string(),
        format!(
            "{}: directory has no .rtrace, .otlp, .json or .jsonl file, nor have its subdirectories",
            dir.path().display()
        )
    );
}

#[test]
fn a_demo_output_directory_is_searched_recursively() {
    // `ringtrace demo` leaves recordings/, logs/ and data/ under its output directory.
    let out = TempDir::new("demo-out");
    for sub in ["recordings/more", "logs", "data/node-2", ".hidden"] {
        std::fs::create_dir_all(out.path().join(sub)).unwrap();
    }
    out.file(".ringtrace-demo", b"made by `ringtrace demo`");
    out.file("recordings/node-2_worker_2.otlp", &one_process("node-2", "worker", 2, 3));
    out.file("recordings/more/node-1_master_1.otlp", &one_process("node-1", "master", 1, 2));
    out.file("logs/node-2.log", b"not a trace");
    out.file("data/node-2/b1", b"not a trace");
    out.file(".hidden/x.otlp", b"garbage that would fail");
    #[cfg(unix)]
    std::os::unix::fs::symlink(out.path(), out.path().join("recordings/loop")).unwrap();

    let files = list_inputs(&[out.path()]).unwrap();
    let rel: Vec<_> = files.iter().map(|f| f.strip_prefix(out.path()).unwrap().to_str().unwrap()).collect();
    assert_eq!(rel, ["recordings/more/node-1_master_1.otlp", "recordings/node-2_worker_2.otlp"]);
    let data = read_inputs(&[out.path()]).unwrap();
    let procs: Vec<_> = data.processes.iter().map(|p| (p.daemon.as_str(), p.pid)).collect();
    assert_eq!(procs, [("master", Some(1)), ("worker", Some(2))]);
    assert_eq!(data.spans.len(), 5);
}

#[test]
fn a_missing_path_is_an_io_error_naming_it() {
    let dir = TempDir::new("missing");
    let path = dir.path().join("nope.otlp");
    let err = read_inputs(&[&path]).unwrap_err();
    assert_eq!(err.kind(), ReadErrorKind::Io);
    assert!(err.to_string().starts_with(&format!("{}: cannot open: ", path.display())), "{err}");
    assert!(std::error::Error::source(&err).is_some());
}
