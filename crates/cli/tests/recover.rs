//! `ringtrace recover`, and every reader, over a recording whose process died and left ring
//! files: made by hand here, byte by byte through `ringtrace_core::raw`, so that each case
//! (records the recording has, records only the ring has, a frame cut short at the end of the
//! recording, a damaged ring file) is exactly what the test says.

use std::path::{Path, PathBuf};

use ringtrace_core::raw::{
    ring_thread_name_bytes, ClockAnchor, FrameWriter, Header, ProcessInfo, RawRecord, RingFileHeader,
    RingPosition, RECORD_SIZE, RING_READ_AT, RING_SLOTS_AT, RING_THREAD_NAME_AT, RING_WRITE_AT,
};
use ringtrace_core::record::{InlineField, Meta, Record};
use ringtrace_core::{SpanId, TraceId};

use crate::support::{json, ok, ringtrace, temp_dir, text};

/// A callsite registered the way `tracing` registers one.
fn callsite() -> Meta {
    let (subscriber, _guard) =
        ringtrace_subscriber::Builder::new().no_recording().no_otlp().build_subscriber().unwrap();
    tracing::subscriber::with_default(subscriber, || tracing::info_span!("hand").metadata().unwrap())
}

/// The open and close records of span `n` (trace `n`), opened at tick `n * 10`.
fn span(meta: Meta, n: u64) -> [RawRecord; 2] {
    let id = SpanId::new(n).unwrap();
    let open = Record::Open {
        span: id,
        parent: None,
        trace: TraceId::new(u128::from(n)).unwrap(),
        meta,
        ticks: n * 10,
        sampled: true,
        first: InlineField::NONE,
    };
    [RawRecord::new(&open), RawRecord::new(&Record::Close { span: id, ticks: n * 10 + 5 })]
}

fn start(w: &mut FrameWriter, meta: Meta) {
    let process = ProcessInfo {
        node: "n".into(),
        daemon: "d".into(),
        pid: 7,
        span_event_limit: 128,
        attributes: vec![],
    };
    w.buf.extend_from_slice(&Header::CURRENT.to_bytes());
    w.process(&process);
    w.pass(ClockAnchor { raw: 0, unix_ns: 1_000_000_000, nanos_per_2_32_ticks: 1 << 32 });
    w.callsite(meta);
    w.thread(3, "worker");
}

/// A whole frame of an unknown kind (99) with a 4-byte payload: damage whose length the next
/// frame, or the end of the file, confirms.
const UNKNOWN_FRAME: [u8; 9] = [99, 4, 0, 0, 0, 1, 2, 3, 4];

/// A fresh directory for the recording of a dead process (pid 7) and its ring directory, with the
/// metadata file written; and the recording's frames so far: `start`'s, then spans 1 and 2 of
/// ring 1 (positions 0–3).
fn dead_process(tag: &str, meta: Meta) -> (PathBuf, PathBuf, FrameWriter) {
    let dir = temp_dir(tag);
    let rings = dir.join(".rings").join("n_d_7");
    std::fs::create_dir_all(&rings).unwrap();
    let mut m = FrameWriter::default();
    start(&mut m, meta);
    std::fs::write(rings.join("meta.rtrace"), &m.buf).unwrap();
    let mut w = FrameWriter::default();
    start(&mut w, meta);
    let frame = w.begin_ring_records(3, RingPosition { ring: 1, position: 0 });
    w.raw_records(&[span(meta, 1), span(meta, 2)].concat());
    w.end(frame);
    (dir, rings, w)
}

/// A ring file of `capacity` slots holding `records` from position `position` on, the first in
/// slot `position % capacity`, written by thread 3 (named by the metadata file).
fn ring_file(path: &Path, capacity: u64, position: u64, records: &[RawRecord]) {
    ring_file_of(path, (3, None), capacity, position, records);
}

/// The same, written by `thread`: its id, and the name its header keeps, if any.
fn ring_file_of(
    path: &Path,
    thread: (u64, Option<&str>),
    capacity: u64,
    position: u64,
    records: &[RawRecord],
) {
    let mut b = vec![0u8; RING_SLOTS_AT + capacity as usize * RECORD_SIZE];
    b[..40].copy_from_slice(&RingFileHeader { capacity, ring: 1, thread_id: thread.0 }.to_bytes());
    if let Some(name) = thread.1 {
        b[RING_THREAD_NAME_AT..RING_WRITE_AT].copy_from_slice(&ring_thread_name_bytes(name));
    }
    for (k, r) in records.iter().enumerate() {
        let slot = ((position + k as u64) % capacity) as usize;
        b[RING_SLOTS_AT + slot * RECORD_SIZE..][..RECORD_SIZE].copy_from_slice(&r.0);
    }
    let write = (position + records.len() as u64) % (2 * capacity);
    b[RING_WRITE_AT..RING_WRITE_AT + 8].copy_from_slice(&write.to_le_bytes());
    b[RING_READ_AT..RING_READ_AT + 8].copy_from_slice(&position.to_le_bytes());
    std::fs::write(path, b).unwrap();
}

/// Span ids the inputs hold, sorted.
fn span_ids(dir: &Path) -> Vec<String> {
    let out = ok(&["export", "--format", "otlp-json", "-o", "-", dir.to_str().unwrap()]);
    let mut ids: Vec<String> = out.split("\"spanId\":\"").skip(1).map(|s| s[..16].to_owned()).collect();
    ids.sort();
    ids
}

#[test]
fn leftovers_read_with_the_recording_and_recover_appends_them() {
    let meta = callsite();
    // The recording holds spans 1 and 2 (ring positions 0–3), then a frame cut short.
    let (dir, rings, w) = dead_process("recover-leftovers", meta);
    let mut bytes = w.buf.clone();
    bytes.extend_from_slice(&[6, 200, 0, 0, 0, 1, 2, 3]);
    std::fs::write(dir.join("n_d_7.rtrace"), &bytes).unwrap();
    // A ring that still holds spans 2 to 4 (positions 2–7) in 7 slots, wrapping past its end:
    // span 2 is in the recording already, 3 and 4 only here.
    ring_file(&rings.join("1.ring"), 7, 2, &[span(meta, 2), span(meta, 3), span(meta, 4)].concat());
    // A damaged ring file is named, not fatal.
    std::fs::write(rings.join("2.ring"), b"not a ring").unwrap();

    let expected: Vec<String> = (1..=4).map(|n| format!("{n:016x}")).collect();
    assert_eq!(span_ids(&dir), expected, "readers add what only the ring holds, once");
    let warned = text(&ringtrace(&["stats", dir.to_str().unwrap()]).stderr);
    assert!(warned.contains("its process died: 4 records read from its ring files"), "{warned}");
    assert!(
        warned.contains("2.ring could not be read: a ring file starts with a 4096-byte header"),
        "{warned}"
    );
    assert!(!warned.contains("ends inside"), "the frame cut short is left out, not reported: {warned}");

    let report = json(&["recover", "--json", dir.to_str().unwrap()]);
    assert_eq!(report["records"], 4);
    assert_eq!(report["rings"], 1);
    assert_eq!(report["unreadable"].as_array().unwrap().len(), 1);
    assert!(rings.join("1.ring").exists(), "with a ring file unread, the directory is kept");
    std::fs::remove_file(rings.join("2.ring")).unwrap();
    let again = ok(&["recover", dir.to_str().unwrap()]);
    assert!(again.contains("0 records recovered from 1 ring files"), "nothing is added twice: {again}");
    assert!(!dir.join(".rings").exists(), "the ring files are gone");
    assert_eq!(span_ids(&dir), expected);
    let strict = ringtrace(&["stats", "--strict", dir.to_str().unwrap()]);
    assert!(
        strict.status.success() && text(&strict.stderr).is_empty(),
        "a whole recording now: {}",
        text(&strict.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A damaged frame in the recording of a dead process (one of an unknown kind, whose length the
/// next frame confirms) is passed over by readers and by recovery alike: what the frames after
/// it and the ring hold is still read, and recovered once.
#[test]
fn a_damaged_frame_in_a_dead_process_recording_is_passed_over_and_recovery_still_works() {
    let meta = callsite();
    // Spans 1 and 2 (positions 0–3), a damaged frame, span 3 (positions 4–5).
    let (dir, rings, mut w) = dead_process("recover-damaged-frame", meta);
    let damaged_at = w.buf.len();
    w.buf.extend_from_slice(&UNKNOWN_FRAME);
    let frame = w.begin_ring_records(3, RingPosition { ring: 1, position: 4 });
    w.raw_records(&span(meta, 3));
    w.end(frame);
    std::fs::write(dir.join("n_d_7.rtrace"), &w.buf).unwrap();
    // The ring still holds spans 3 and 4 (positions 4–7): only 4 is not in the recording.
    ring_file(&rings.join("1.ring"), 8, 4, &[span(meta, 3), span(meta, 4)].concat());

    let expected: Vec<String> = (1..=4).map(|n| format!("{n:016x}")).collect();
    assert_eq!(span_ids(&dir), expected);
    let warned = text(&ringtrace(&["stats", dir.to_str().unwrap()]).stderr);
    assert!(
        warned.contains(&format!(
            "skipped 1 damaged frames, read on past them; the first: frame 5 at byte {damaged_at}: unknown frame kind 99"
        )),
        "{warned}"
    );
    assert!(warned.contains("its process died: 2 records read from its ring files"), "{warned}");
    let report = json(&["recover", "--json", dir.to_str().unwrap()]);
    assert_eq!((&report["records"], &report["damaged_frames"]), (&2.into(), &1.into()));
    assert_eq!(span_ids(&dir), expected, "recovered once, after the damaged frame");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A dead process whose metadata file ends with a damaged frame, and whose ring holds spans 2
/// and 3 (the recording holds 1 and 2). Returns the directory and the damaged frame's offset in
/// the metadata file.
fn dead_process_with_damaged_metadata(tag: &str) -> (PathBuf, usize) {
    let meta = callsite();
    let (dir, rings, w) = dead_process(tag, meta);
    std::fs::write(dir.join("n_d_7.rtrace"), &w.buf).unwrap();
    let meta_file = rings.join("meta.rtrace");
    let mut m = std::fs::read(&meta_file).unwrap();
    let damaged_at = m.len();
    m.extend_from_slice(&UNKNOWN_FRAME);
    std::fs::write(&meta_file, &m).unwrap();
    ring_file(&rings.join("1.ring"), 8, 2, &[span(meta, 2), span(meta, 3)].concat());
    (dir, damaged_at)
}

/// A damaged frame in the ring directory's metadata file is passed over as in the recording:
/// what the rings hold is still recovered, and the report and readers name it.
#[test]
fn a_damaged_frame_of_the_metadata_file_is_passed_over_and_named() {
    let (dir, damaged_at) = dead_process_with_damaged_metadata("recover-damaged-meta");
    let warned = text(&ringtrace(&["stats", dir.to_str().unwrap()]).stderr);
    let first = format!("the first: frame 4 at byte {damaged_at}: unknown frame kind 99");
    assert!(warned.contains("its metadata file in") && warned.contains(&first), "{warned}");
    let report = json(&["recover", "--json", dir.to_str().unwrap()]);
    assert_eq!(
        (&report["records"], &report["damaged_frames"], &report["damaged_meta_frames"]),
        (&2.into(), &0.into(), &1.into())
    );
    let expected: Vec<String> = (1..=3).map(|n| format!("{n:016x}")).collect();
    assert_eq!(span_ids(&dir), expected);
    std::fs::remove_dir_all(&dir).unwrap();

    // The plain report names it too.
    let (dir, damaged_at) = dead_process_with_damaged_metadata("recover-damaged-meta-text");
    let said = ok(&["recover", dir.to_str().unwrap()]);
    assert!(said.contains(": 2 records recovered from 1 ring files"), "{said}");
    let named = "; 1 damaged frames of the ring directory's metadata file passed over";
    let first = format!("the first: frame 4 at byte {damaged_at}: unknown frame kind 99");
    assert!(said.contains(named) && said.contains(&first), "{said}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A damaged frame that ends the recording of a dead process (the file ends right after it,
/// which confirms its length) is kept where it is: recovery appends the leftovers after it, and
/// readers go on counting it.
#[test]
fn a_damaged_last_frame_stays_and_the_leftovers_follow_it() {
    let meta = callsite();
    let (dir, rings, mut w) = dead_process("recover-damaged-last", meta);
    let damaged = UNKNOWN_FRAME;
    w.buf.extend_from_slice(&damaged);
    let recording = dir.join("n_d_7.rtrace");
    std::fs::write(&recording, &w.buf).unwrap();
    ring_file(&rings.join("1.ring"), 8, 2, &[span(meta, 2), span(meta, 3)].concat());

    let said = ok(&["recover", dir.to_str().unwrap()]);
    assert!(said.contains(": 2 records recovered from 1 ring files"), "{said}");
    let end = w.buf.len() - damaged.len();
    assert!(
        said.contains(&format!(
            "; 1 damaged frames of the recording passed over, the first: frame 5 at byte {end}: unknown frame kind 99"
        )),
        "{said}"
    );
    let bytes = std::fs::read(&recording).unwrap();
    assert_eq!(&bytes[..w.buf.len()], &w.buf[..], "the recording up to its end, the damaged frame included");
    assert!(bytes.len() > w.buf.len(), "the leftovers after it");
    let expected: Vec<String> = (1..=3).map(|n| format!("{n:016x}")).collect();
    assert_eq!(span_ids(&dir), expected);
    let warned = text(&ringtrace(&["stats", dir.to_str().unwrap()]).stderr);
    assert!(warned.contains("skipped 1 damaged frames"), "{warned}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_thread_named_only_by_its_ring_files_header_is_named_in_the_recovered_recording() {
    let meta = callsite();
    let dir = temp_dir("recover-thread-name");
    let rings = dir.join(".rings").join("n_d_7");
    std::fs::create_dir_all(&rings).unwrap();
    // Neither the recording nor the metadata file names thread 5: it took its ring (a pooled
    // one) after the metadata had its last thread frame; its ring's header names it.
    let mut w = FrameWriter::default();
    start(&mut w, meta);
    std::fs::write(dir.join("n_d_7.rtrace"), &w.buf).unwrap();
    std::fs::write(rings.join("meta.rtrace"), &w.buf).unwrap();
    ring_file_of(&rings.join("1.ring"), (5, Some("fan-out")), 8, 0, &[span(meta, 1), span(meta, 2)].concat());
    let named = |what: &str| {
        let out = ok(&["export", "--format", "otlp-json", "-o", "-", dir.to_str().unwrap()]);
        assert_eq!(
            out.matches(r#""key":"thread.name","value":{"stringValue":"fan-out"}"#).count(),
            2,
            "{what}: {out}"
        );
        assert_eq!(out.matches(r#""key":"thread.id","value":{"intValue":"5"}"#).count(), 2, "{what}: {out}");
    };
    named("read with the leftovers");
    let report = json(&["recover", "--json", dir.to_str().unwrap()]);
    assert_eq!(report["records"], 4);
    assert!(!dir.join(".rings").exists(), "the ring files are gone");
    named("recovered");

    // A thread the recording names already keeps that name: the header's may be cut short.
    std::fs::create_dir_all(&rings).unwrap();
    std::fs::write(rings.join("meta.rtrace"), &w.buf).unwrap();
    let mut again = FrameWriter::default();
    start(&mut again, meta);
    std::fs::write(dir.join("n_d_7.rtrace"), &again.buf).unwrap();
    ring_file_of(&rings.join("1.ring"), (3, Some("work")), 8, 0, &span(meta, 3));
    let out = ok(&["export", "--format", "otlp-json", "-o", "-", dir.to_str().unwrap()]);
    assert!(out.contains(r#""key":"thread.name","value":{"stringValue":"worker"}"#), "{out}");
    assert!(!out.contains(r#""stringValue":"work"}"#), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn recover_without_leftovers_says_so_and_a_missing_input_is_an_error() {
    let dir = temp_dir("recover-nothing");
    std::fs::create_dir_all(&dir).unwrap();
    assert!(ok(&["recover", dir.to_str().unwrap()]).contains("nothing to recover"));
    let missing = ringtrace(&["recover", dir.join("absent").to_str().unwrap()]);
    assert!(!missing.status.success());
    assert!(text(&missing.stderr).contains("no such file or directory"), "{}", text(&missing.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}
