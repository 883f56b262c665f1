//! The local recording: what the sinks were handed is exactly what is on disk, and the analysis
//! reader gets every value back.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ringtrace::proto as otlp;
use ringtrace::{Builder, FnSink, SpanData, SpanExt};
use ringtrace_analysis::{SpanKind, Status, Value};

use crate::common::{Collector, BOTH};

#[derive(Debug)]
#[allow(dead_code)] // read only through Debug
struct Unusual(u32);

/// Under both collectors: the standalone subscriber is what `init()` installs.
#[test]
fn a_recording_reads_back_losslessly() {
    for collector in BOTH {
        reads_back_losslessly(collector);
    }
}

fn reads_back_losslessly(collector: Collector) {
    // Shown with a failure's output: which collector failed.
    eprintln!("collector: {collector:?}");
    let dir = std::env::temp_dir().join(format!("ringtrace-recording-{}-{collector:?}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let encoded: Arc<Mutex<Vec<otlp::Span>>> = Arc::default();
    let e = encoded.clone();
    let sink = FnSink(move |batch: &[SpanData], _: &ringtrace::ResourceInfo| {
        e.lock().unwrap().extend(batch.iter().map(ringtrace::encode_span));
    });
    let (dispatch, guard) =
        collector.start(Builder::new().node("node-r").daemon("recorder").recording_dir(&dir).sink(sink));
    let long = "x".repeat(5000);
    let held = tracing::dispatcher::with_default(&dispatch, || {
        let root = tracing::info_span!(
            "root",
            request.id = "req-7",
            signed = -5i64,
            unsigned = u64::MAX,
            ratio = 0.25f64,
            flag = true,
            short = "short",
            long = long.as_str(),
            debug = ?Unusual(3),
            otel.kind = "server",
            later = tracing::field::Empty,
        );
        let _r = root.enter();
        root.record("later", 42u64);
        let other = tracing::info_span!("other");
        {
            let child = tracing::warn_span!(target: "app::io", "child", otel.name = "renamed");
            child.follows_from(&other);
            let _c = child.enter();
            tracing::info!(bytes = 512u64, "read block");
            tracing::error!(code = 7i64, "failed");
        }
        drop(other);
        let remote = tracing::info_span!("from_remote");
        remote.set_remote_parent(&ringtrace::propagation::TraceContext {
            trace_id: ringtrace::TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            span_id: ringtrace::SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            sampled: true,
            request_id: Some("req-remote".into()),
        });
        drop(remote);
        // Still open at shutdown: exported as unclosed.
        tracing::info_span!(parent: None, "held")
    });
    let stats = guard.shutdown().unwrap();
    drop(held);
    assert_eq!(stats.recorded_spans, 5);
    assert_eq!(stats.unclosed_spans, 1);

    // 1. The file holds the records of exactly the spans the sinks were handed: replayed, they
    // encode identically.
    let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let name = file.file_name().unwrap().to_str().unwrap().to_owned();
    assert!(name.starts_with("node-r_recorder_") && name.ends_with(".rtrace"), "{name}");
    let mut on_disk = Vec::new();
    let replayed = ringtrace::replay::replay(std::fs::File::open(&file).unwrap(), &mut |batch, _| {
        on_disk.extend(batch.iter().map(ringtrace::encode_span));
    })
    .unwrap();
    assert!(replayed.ended && replayed.cut.is_none() && replayed.bad_records == 0);
    let by_id =
        |v: Vec<otlp::Span>| v.into_iter().map(|s| (s.span_id.clone(), s)).collect::<BTreeMap<_, _>>();
    let handed = by_id(encoded.lock().unwrap().clone());
    assert_eq!(by_id(on_disk), handed);
    let process = replayed.process.unwrap();
    assert_eq!(process.resource.stats.unclosed_spans, 1);
    assert_eq!(process.resource.stats.recorded_spans, 5);
    assert!(process.attributes.iter().any(|(k, _)| k == "service.instance.id"));

    // 2. The analysis reader gets every value back.
    let data = ringtrace_analysis::read_inputs(&[&dir]).unwrap();
    assert_eq!(data.spans.len(), 5);
    assert_eq!(data.processes.len(), 1);
    assert_eq!((data.processes[0].node.as_str(), data.processes[0].daemon.as_str()), ("node-r", "recorder"));
    assert_eq!(data.processes[0].unclosed_spans, 1);
    let span = |name: &str| data.spans.iter().find(|s| s.name == name).unwrap();
    let root = span("root");
    let a = |k: &str| root.attribute(k).cloned();
    assert_eq!(a("signed"), Some(Value::Int(-5)));
    assert_eq!(a("unsigned"), Some(Value::Str(u64::MAX.to_string())));
    assert_eq!(a("ratio"), Some(Value::Float(0.25)));
    assert_eq!(a("flag"), Some(Value::Bool(true)));
    assert_eq!(a("short"), Some(Value::Str("short".into())));
    assert_eq!(a("long"), Some(Value::Str("x".repeat(4096))), "strings are capped at 4 KiB");
    assert_eq!(a("debug"), Some(Value::Str("Unusual(3)".into())));
    assert_eq!(a("later"), Some(Value::Int(42)));
    assert_eq!(root.kind, SpanKind::Server);
    assert_eq!(root.request_id.as_deref(), Some("req-7"));
    assert_eq!(root.target.as_deref(), Some(module_path!()));
    assert!(root.location.as_deref().unwrap().starts_with("tests/recording.rs:"));
    assert!(root.end_unix_ns >= root.start_unix_ns);

    let child = span("renamed");
    let other = span("other");
    assert_eq!(child.parent_span_id, Some(root.span_id));
    assert_eq!(child.target.as_deref(), Some("app::io"));
    assert_eq!(child.request_id.as_deref(), Some("req-7"));
    assert_eq!(child.links.len(), 1);
    assert_eq!(child.links[0].span_id, other.span_id);
    assert!(child.status.is_error(), "an ERROR event marks the span as failed");
    assert!(matches!(root.status, Status::Unset));
    let names: Vec<_> = child.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["read block", "failed"]);
    let bytes_attr = child.events[0].attributes.iter().find(|(k, _)| k == "bytes").map(|(_, v)| v.clone());
    assert_eq!(bytes_attr, Some(Value::Int(512)));
    assert!(
        child.events[0].time_unix_ns >= child.start_unix_ns
            && child.events[0].time_unix_ns <= child.end_unix_ns
    );

    let remote = span("from_remote");
    assert_eq!(remote.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(remote.parent_span_id.unwrap().to_string(), "00f067aa0ba902b7");
    assert_eq!(remote.request_id.as_deref(), Some("req-remote"));

    let held = span("held");
    assert_eq!(held.attribute("ringtrace.unclosed"), Some(&Value::Bool(true)));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pass that reads more records than one frame holds splits them between groups, in frames
/// readers accept, and hands them to the writer a megabyte at a time: every span reads back.
/// Callsites are written once each, before the first frame that can name them.
#[test]
fn a_large_pass_is_split_into_frames_between_groups() {
    const SPANS: u64 = 40_000;
    let dir = std::env::temp_dir().join(format!("ringtrace-large-pass-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // The drain runs only when a ring is a quarter full, and at the shutdown: a pass reads more
    // than 65,000 records.
    let (subscriber, guard) = Builder::new()
        .node("n")
        .daemon("large")
        .recording_dir(&dir)
        .ring_capacity(1 << 18)
        .drain_interval(std::time::Duration::from_secs(3600))
        .build_subscriber()
        .unwrap();
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..SPANS {
            let _s = tracing::info_span!("work", i, text = "twenty-eight bytes of text!!").entered();
        }
        tracing::info_span!("late", i = 1).in_scope(|| tracing::info!(n = 2, "late event"));
    });
    let stats = guard.shutdown().unwrap();
    assert_eq!((stats.recorded_spans, stats.dropped_spans), (SPANS + 1, 0), "{stats}");
    let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let mut reader = ringtrace::proto_raw::FrameReader::new(std::fs::File::open(&file).unwrap()).unwrap();
    let mut records_frames = 0;
    // Every callsite a records frame names is defined by a frame before it.
    let mut defined = std::collections::HashSet::new();
    while let Some(frame) = reader.next_frame().unwrap() {
        match frame {
            ringtrace::proto_raw::Frame::Callsite(c) => {
                assert!(defined.insert(c.address), "{} defined twice", c.name);
            }
            ringtrace::proto_raw::Frame::Records { records, .. } => {
                records_frames += 1;
                assert!(records.len() <= (1 << 14) * 64 + 4 * 64, "a frame of {} bytes", records.len());
                for r in records.chunks_exact(64) {
                    let r = ringtrace::proto_raw::RawRecord(r.try_into().unwrap());
                    if let Some(address) = r.callsite_address() {
                        assert!(
                            defined.contains(&address),
                            "frame {records_frames} names an undefined callsite"
                        );
                    }
                }
            }
            _ => {}
        }
    }
    assert!(records_frames >= 7, "{records_frames} records frames for {} records", 3 * SPANS);
    let mut spans = 0;
    let replayed =
        ringtrace::replay::replay(std::fs::File::open(&file).unwrap(), &mut |batch, _| spans += batch.len())
            .unwrap();
    assert_eq!((spans as u64, replayed.bad_records), (SPANS + 1, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A standalone subscriber recording into a fresh `ringtrace-<name>-<pid>` temporary directory
/// (removed first if left over), with the directory.
fn recording_to_fresh_dir(name: &str) -> (ringtrace::RingSubscriber, ringtrace::Guard, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("ringtrace-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (subscriber, guard) =
        Builder::new().node("node-d").daemon(name).recording_dir(&dir).no_otlp().build_subscriber().unwrap();
    (subscriber, guard, dir)
}

/// Records each of `passes` into a fresh `ringtrace-<name>-<pid>` directory, a flush between
/// two, so that each goes to the file in a pass of its own; shuts down, and returns the
/// directory and the recording's bytes (the file itself removed).
fn recorded_in_passes(name: &str, passes: &[&dyn Fn()]) -> (std::path::PathBuf, Vec<u8>) {
    let (subscriber, guard, dir) = recording_to_fresh_dir(name);
    let handle = guard.handle();
    tracing::subscriber::with_default(subscriber, || {
        for (i, pass) in passes.iter().enumerate() {
            if i > 0 {
                handle.flush(std::time::Duration::from_secs(10)).unwrap();
            }
            pass();
        }
    });
    guard.shutdown().unwrap();
    let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let bytes = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    (dir, bytes)
}

/// The bytes of the frame starting at byte `at` of `bytes`, its head included.
fn frame_len(bytes: &[u8], at: usize) -> usize {
    5 + u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize
}

/// A compact record whose length byte is damaged: record boundaries past it are not known, so
/// the reader keeps the records of its frame before it, counts the rest as skipped, and reads
/// every frame after it.
#[test]
fn a_damaged_compact_record_loses_the_rest_of_its_frame_only() {
    let (dir, mut bytes) = recorded_in_passes(
        "damaged-compact",
        &[&|| tracing::info_span!("first", n = 1u64).in_scope(|| {}), &|| {
            tracing::info_span!("second", n = 2u64).in_scope(|| {})
        }],
    );
    // The first compact frame holds the first span's open record (64 bytes) and close (24).
    let mut at = ringtrace::proto_raw::HEADER_SIZE;
    while bytes[at] != 11 {
        at += frame_len(&bytes, at);
    }
    assert_eq!(frame_len(&bytes, at), 5 + 20 + 64 + 24, "a close of 24 bytes after an open of 64");
    let close = at + 5 + 20 + 64;
    assert_eq!(bytes[close], 3 | (2 << 4), "a close record keeping three words");
    bytes[close] = 3 | (7 << 4); // claims 64 bytes; 24 are left
    std::fs::write(dir.join("damaged.rtrace"), &bytes).unwrap();
    let outcome =
        ringtrace_analysis::read_inputs_with(&[&dir], ringtrace_analysis::Truncation::Error).unwrap();
    let names: Vec<&str> = outcome.data.spans.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"second"), "the frames after the damage are read: {names:?}");
    assert!(names.contains(&"first"), "its open record, before the damage, is kept: {names:?}");
    let warnings: Vec<String> = outcome.warnings.iter().map(ToString::to_string).collect();
    assert!(
        warnings.iter().any(|w| w.contains("skipped 1 records")
            && w.contains("the rest of frame")
            && w.contains("keeps 64 bytes; 24 are left")),
        "{warnings:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A damaged frame whose length the next frame confirms — here the callsite frame of the second
/// span, its name no longer UTF-8 — is passed over and counted; every frame after it is read
/// (the second span's records, whose callsite no frame now defines, are counted as skipped).
/// Two damaged frames in a row leave the second one's place unknown: reading stops there.
#[test]
fn a_damaged_frame_is_passed_over_and_the_frames_after_it_are_read() {
    // The third span's callsite is another one named "first": its frame comes after the damage.
    let (dir, bytes) = recorded_in_passes(
        "damaged-frame",
        &[
            &|| tracing::info_span!("first", n = 1u64).in_scope(|| {}),
            &|| tracing::info_span!("zecond", n = 2u64).in_scope(|| {}),
            &|| tracing::info_span!("first", n = 3u64).in_scope(|| {}),
        ],
    );
    // The callsite frame (kind 2) naming "zecond", and the frame after it.
    let mut at = ringtrace::proto_raw::HEADER_SIZE;
    while !(bytes[at] == 2 && bytes[at..at + frame_len(&bytes, at)].windows(6).any(|w| w == b"zecond")) {
        at += frame_len(&bytes, at);
    }
    let name = at + bytes[at..].windows(6).position(|w| w == b"zecond").unwrap();
    let read = |bytes: &[u8], name: &str| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let outcome = ringtrace_analysis::read_inputs_with(&[&path], ringtrace_analysis::Truncation::Error);
        std::fs::remove_file(&path).unwrap();
        outcome
    };

    let mut damaged = bytes.clone();
    damaged[name] = 0xFF;
    let outcome = read(&damaged, "damaged.rtrace").unwrap();
    let names: Vec<&str> = outcome.data.spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["first", "first"], "the spans before and after the damaged frame");
    let warnings: Vec<String> = outcome.warnings.iter().map(ToString::to_string).collect();
    let frame_warning = "skipped 1 damaged frames, read on past them; the first: frame ";
    assert!(
        warnings.iter().any(|w| w.contains(frame_warning) && w.contains(&format!("at byte {at}: "))),
        "{warnings:?}"
    );
    assert!(warnings.iter().any(|w| w.contains("records that could not be decoded")), "{warnings:?}");

    // The frame after it damaged too (an unknown kind): the first damage stops the reading.
    let next = at + frame_len(&bytes, at);
    let mut twice = damaged.clone();
    twice[next] = 99;
    let err = read(&twice, "twice.rtrace").unwrap_err();
    assert!(err.to_string().contains(&format!("at byte {at}: ")), "{err}");
    // The process frame damaged: nothing can be read without it, and its damage is the error.
    let mut process = bytes.clone();
    let node = process.windows(6).position(|w| w == b"node-d").unwrap();
    process[node] = 0xFF;
    let err = read(&process, "process.rtrace").unwrap_err();
    let header = ringtrace::proto_raw::HEADER_SIZE;
    assert!(err.to_string().contains(&format!("frame 0 at byte {header}: ")), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A span's open record damaged in the file: the reader skips its whole group — its string field
/// and that field's chunks — and counts it; the span before it keeps exactly its own field
/// (before, the damaged group's field records were taken for that span's).
#[test]
fn a_damaged_group_header_takes_its_field_records_with_it() {
    let (subscriber, guard, dir) = recording_to_fresh_dir("damaged-header");
    const SECOND: &str = "SECOND: a string longer than two records' worth of inline text";
    tracing::subscriber::with_default(subscriber, || {
        let _first =
            tracing::info_span!("first", s = "first: a string longer than twenty-eight bytes").entered();
        let _second = tracing::info_span!("second", t = SECOND).entered();
    });
    guard.shutdown().unwrap();
    let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&file).unwrap();
    // The second span's string starts 16 bytes into its first chunk record, which follows the
    // field record, which follows the span's open record. Frames are compact: the field record
    // (kind, value kind, name, the string's length) keeps 24 bytes, the open record all 64.
    let at = bytes.windows(8).position(|w| w == &SECOND.as_bytes()[..8]).expect("the chunk in the file");
    let open = at - 16 - 24 - ringtrace::proto_raw::RECORD_SIZE;
    assert_eq!(bytes[open], 1 | (7 << 4), "an open record keeping eight words");
    bytes[open] = 7 << 4; // no record kind (0, as a compact frame keeps an odd one), the same length
    let damaged = dir.join("damaged.rtrace");
    std::fs::remove_file(&file).unwrap();
    std::fs::write(&damaged, &bytes).unwrap();
    let outcome =
        ringtrace_analysis::read_inputs_with(&[&dir], ringtrace_analysis::Truncation::Error).unwrap();
    let first = outcome.data.spans.iter().find(|s| s.name == "first").expect("the first span");
    let keys: Vec<&str> =
        first.attributes.iter().map(|(k, _)| k.as_str()).filter(|k| ["s", "t"].contains(k)).collect();
    assert_eq!(keys, ["s"], "the damaged group's field is not the first span's");
    assert!(outcome.data.spans.iter().all(|s| s.name != "second"));
    let warnings: Vec<String> = outcome.warnings.iter().map(ToString::to_string).collect();
    assert!(
        warnings.iter().any(|w| w.contains("skipped") && w.contains("unknown record kind 0")),
        "{warnings:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
