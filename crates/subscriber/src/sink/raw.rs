//! The raw recording: the drain copies ring records to disk, each cut after its last non-zero
//! 8 bytes, with each callsite's metadata written once, before the first records that can name
//! it; readers assemble the spans (`ringtrace_core::raw` documents the format).

use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crate::callsites::REQUEST_ID_FIELD;
use ringtrace_core::raw::{self, ClockAnchor, FrameWriter, Header, ProcessInfo, RawRecord, RingPosition};

use super::file::{create_new, file_base, unix_now_ns, Pipe};
use crate::drain::IdHasher;
use crate::stats::Stats;

type AddressSet = HashSet<u64, BuildHasherDefault<IdHasher>>;

/// Writes `<dir>/<node>_<daemon>_<pid>.rtrace`: the records of every ring, pass by pass.
///
/// The drain writes each pass's frames itself at the pass's end, while the file system keeps up;
/// after a slow write a writer thread takes them for a while (as the OTLP recording's, see
/// `sink::file::Pipe`), so that a file system that holds up writes does not stop the drain from
/// emptying the rings (the slow write itself holds the drain for its length: the rings, 16 ms at
/// 500,000 spans/s a thread by default, wait meanwhile). A write that fails loses its frame, never more: the file keeps whole
/// frames, and the spans opened in the lost frame are counted (`Stats::sink_failed_spans`).
pub(crate) struct RawRecording {
    path: PathBuf,
    out: Pipe,
    frames: FrameWriter,
    /// The callsite frames of the first `callsites_encoded` callsites the process registered
    /// (`callsites::count`), kept: before a ring's records, the drain writes those registered
    /// since, so that every callsite the records can name is defined before them, and no record
    /// is looked at for it. After a failed write all are written again, a copy of these bytes.
    callsite_frames: FrameWriter,
    callsites_encoded: usize,
    /// Bytes of `callsite_frames` written to the file (or handed to the writer) so far.
    callsite_bytes_written: usize,
    threads: AddressSet,
    /// The current pass's anchor, written before its first records.
    anchor: Option<ClockAnchor>,
    /// Spans opened in the records of the frames being assembled.
    opens: u64,
    /// Lost spans covered by the loss frames handed to the writer so far.
    marks_sent: u64,
    /// Failed writes seen: after a new one, metadata is written again (it may have been lost).
    failed_writes: u64,
    /// When the counters were last written, and what they were.
    counters_at: std::time::Instant,
    counters_written: Option<Stats>,
    /// Totals written (or handed to the writer): spans opened in sampled traces, events, and
    /// roots of unsampled traces (which readers discard).
    pub(crate) spans: u64,
    pub(crate) events: u64,
    pub(crate) sampled_out: u64,
}

impl RawRecording {
    /// Creates the directory if needed and a new file in it (never an existing one), and writes
    /// the header and the process frame.
    pub(crate) fn create(dir: &Path, process: &ProcessInfo, quiet: bool) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let base = file_base(&process.node, &process.daemon, process.pid);
        let (mut file, path) = create_new(dir, &base, raw::EXTENSION)?;
        // The header and the process frame are written before anything else can fail: a
        // recording is readable from its first byte on, or not created at all.
        let mut frames = FrameWriter::default();
        frames.buf.extend_from_slice(&Header::CURRENT.to_bytes());
        frames.process(process);
        std::io::Write::write_all(&mut file, &frames.buf)?;
        let written = frames.buf.len() as u64;
        let out = Pipe::after(super::file::RecordingFile::new(file, written), &path, written);
        out.quiet.store(quiet, Ordering::Relaxed);
        frames.buf.clear();
        let mut rec = Self {
            path,
            out,
            frames,
            callsite_frames: FrameWriter::default(),
            callsites_encoded: 0,
            callsite_bytes_written: 0,
            threads: AddressSet::default(),
            anchor: None,
            opens: 0,
            marks_sent: 0,
            failed_writes: 0,
            counters_at: std::time::Instant::now(),
            counters_written: None,
            spans: 0,
            events: 0,
            sampled_out: 0,
        };
        rec.frames.name(REQUEST_ID_FIELD);
        rec.send();
        Ok(rec)
    }

    /// The file being written.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Starts a pass: the records that follow convert with `anchor`. After a failed write,
    /// callsite, name and thread frames are written again before the records that need them:
    /// the lost frame may have held their first definition.
    pub(crate) fn begin_pass(&mut self, anchor: ClockAnchor) {
        self.anchor = Some(anchor);
        let failed = self.out.losses.failed_writes.load(Ordering::Acquire);
        if failed != self.failed_writes {
            self.failed_writes = failed;
            self.callsite_bytes_written = 0;
            self.threads.clear();
            self.frames.name(REQUEST_ID_FIELD);
        }
    }

    /// Whether [`counters_changed`](Self::counters_changed) is due: once per
    /// [`COUNTERS_EVERY`], so that a process that dies still leaves recent totals.
    pub(crate) fn counters_due(&self) -> bool {
        self.counters_at.elapsed() >= COUNTERS_EVERY
    }

    /// Adds the counters to this pass when they changed since they were last written.
    pub(crate) fn counters_changed(&mut self, stats: Stats) {
        self.counters_at = std::time::Instant::now();
        if self.counters_written != Some(stats) {
            self.frames.counters(counters(&stats));
            self.counters_written = Some(stats);
        }
    }

    /// Adds the records one ring held in this pass (whole groups, oldest first), `at` the
    /// ring's number and the position of the first. Returns the number of the batch handed to
    /// the writer that holds the last of them (see [`written`](Self::written)); `None` when
    /// there were none.
    pub(crate) fn ring(
        &mut self,
        thread_id: u64,
        thread_name: &str,
        at: RingPosition,
        a: &[RawRecord],
        b: &[RawRecord],
    ) -> Option<u64> {
        if a.is_empty() && b.is_empty() {
            return None;
        }
        if let Some(anchor) = self.anchor.take() {
            self.frames.pass(anchor);
        }
        // Read after the ring's write index (the caller's acquire load): every callsite these
        // records name was registered before they were published, so it is counted here.
        if crate::callsites::count() > self.callsites_encoded {
            self.encode_new_callsites();
        }
        if self.callsite_bytes_written < self.callsite_frames.buf.len() {
            self.frames.buf.extend_from_slice(&self.callsite_frames.buf[self.callsite_bytes_written..]);
            self.callsite_bytes_written = self.callsite_frames.buf.len();
        }
        if self.threads.insert(thread_id) {
            self.frames.thread(thread_id, thread_name);
        }
        // Frames of at most about `FRAME_RECORDS` records, cut between groups, so that a ring of
        // any size yields frames readers accept; handed to the writer by the megabyte, so that
        // the bytes waiting for it stay bounded however many rings a pass reads.
        // A group may run from the end of `a` into `b`: frames are cut in the two as one.
        let (split, total) = (a.len(), a.len() + b.len());
        let get = |i: usize| if i < split { &a[i] } else { &b[i - split] };
        let mut start = 0;
        while start < total {
            let end = raw::frame_end(start, total, |i| get(i).is_header());
            let position = at.position + start as u64;
            let frame =
                self.frames.begin_compact_ring_records(thread_id, RingPosition { ring: at.ring, position });
            // Each record is counted as it is copied: one pass over the records.
            let (opens, events, sampled_out) = (&mut self.opens, &mut self.events, &mut self.sampled_out);
            let mut see = |r: &RawRecord| match r.kind() {
                raw::KIND_OPEN => {
                    if r.open_sampled() == Some(true) {
                        *opens += 1;
                    } else {
                        *sampled_out += 1;
                    }
                }
                raw::KIND_EVENT => *events += 1,
                _ => {}
            };
            self.frames.compact_records_seeing(&a[start.min(split)..end.min(split)], &mut see);
            self.frames
                .compact_records_seeing(&b[start.saturating_sub(split)..end.saturating_sub(split)], &mut see);
            self.frames.end(frame);
            start = end;
            if self.frames.buf.len() >= FRAME_RECORDS * raw::RECORD_SIZE {
                self.send();
            }
        }
        // In the batch being filled, or, when the last frame filled it and it went, in the last
        // one handed over.
        Some(if self.frames.buf.is_empty() { self.out.sent } else { self.out.sent + 1 })
    }

    /// Batches handed to the writer so far: every batch up to this number.
    pub(crate) fn handed(&self) -> u64 {
        self.out.sent
    }

    /// Batches the writer is done with (written, or failed and counted): every batch up to this
    /// number.
    pub(crate) fn written(&self) -> u64 {
        self.out.done.load(Ordering::Acquire)
    }

    /// Encodes the frames of the callsites registered since the last call (their field names
    /// with them), once each. A record naming a callsite the process never registered (metadata
    /// made by hand) is written without one; readers count it as undecodable.
    #[cold]
    fn encode_new_callsites(&mut self) {
        let registry = crate::callsites::read();
        let new = registry.registered_after(self.callsites_encoded);
        for &meta in new {
            self.callsite_frames.callsite(meta);
        }
        self.callsites_encoded += new.len();
    }

    /// Ends the pass: hands what it wrote to the writer (written now, unless writes were slow).
    pub(crate) fn end_pass(&mut self) {
        self.anchor = None;
        if !self.frames.buf.is_empty() || self.out.losses.unmarked(self.marks_sent) > 0 {
            self.send();
        }
    }

    fn send(&mut self) {
        // The first frame after failed writes says what they lost.
        let unmarked = self.out.losses.unmarked(self.marks_sent);
        if unmarked > 0 {
            let now = unix_now_ns();
            let (start, error) = self.out.losses.take_gap(now);
            let loss = raw::Loss { start_unix_ns: start, end_unix_ns: now, lost_spans: unmarked, error };
            self.frames.loss(&loss);
            self.marks_sent += unmarked;
        }
        self.out.next = (self.opens, unmarked);
        self.spans += self.opens;
        self.opens = 0;
        // A failed hand-over means the writer thread is gone; the frame's spans are counted
        // as lost (`Pipe::hand_off`).
        let _ = self.out.send_buffer(&mut self.frames.buf);
        self.frames.buf.clear();
    }

    /// Writes the counters now and, at shutdown, the end frame (`end`: the ticks then, and the
    /// clock's anchor that converts them); then waits until everything is on disk.
    pub(crate) fn flush(&mut self, stats: &Stats, end: Option<(u64, ClockAnchor)>) -> std::io::Result<()> {
        self.end_pass();
        self.frames.counters(counters(stats));
        self.counters_written = Some(*stats);
        if let Some((ticks, anchor)) = end {
            self.frames.pass(anchor);
            self.frames.end_frame(ticks);
        }
        self.send();
        self.out.sync()
    }

    /// Spans lost with frames that could not be written.
    pub(crate) fn lost_spans(&self) -> u64 {
        self.out.losses.lost_spans.load(Ordering::Relaxed)
    }
}

/// Records a buffer holds before it is handed to the writer, about: a records frame's (1 MiB).
/// So at most 32 such buffers wait for the writer (and as many emptied ones are kept for reuse).
const FRAME_RECORDS: usize = raw::FRAME_RECORDS;

/// How often, at most, a recording process writes its counters unasked.
const COUNTERS_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// The counters a raw recording keeps, by the names `Stats` gives its fields: the one list
/// that [`counters`] writes and [`set_counter`] reads back.
fn counter_fields(s: &mut Stats) -> [(&'static str, &mut u64); 15] {
    [
        ("recorded_spans", &mut s.recorded_spans),
        ("recorded_events", &mut s.recorded_events),
        ("dropped_spans", &mut s.dropped_spans),
        ("dropped_closes", &mut s.dropped_closes),
        ("dropped_events", &mut s.dropped_events),
        ("dropped_updates", &mut s.dropped_updates),
        ("sink_failed_spans", &mut s.sink_failed_spans),
        ("sink_dropped_spans", &mut s.sink_dropped_spans),
        ("sink_rejected_spans", &mut s.sink_rejected_spans),
        ("sink_unconfirmed_spans", &mut s.sink_unconfirmed_spans),
        ("sink_unsent_spans", &mut s.sink_unsent_spans),
        ("propagation_malformed", &mut s.propagation_malformed),
        ("threads", &mut s.threads),
        ("sampled_out", &mut s.sampled_out),
        ("events_over_limit", &mut s.events_over_limit),
    ]
}

/// The counters a raw recording keeps, with their names.
pub(crate) fn counters(s: &Stats) -> [(&'static str, u64); 15] {
    let mut s = *s;
    counter_fields(&mut s).map(|(name, v)| (name, *v))
}

/// Sets the counter `name` of `s` (one of [`counters`]' names; others are ignored).
pub(crate) fn set_counter(s: &mut Stats, name: &str, v: u64) {
    if let Some((_, field)) = counter_fields(s).into_iter().find(|(n, _)| *n == name) {
        *field = v;
    }
}

#[cfg(all(test, not(ringtrace_loom)))]
mod tests {
    use ringtrace_core::raw::{Frame, FrameReader, RawRecord, RECORD_SIZE};
    use ringtrace_core::record::{InlineField, Record};
    use ringtrace_core::{SpanId, TraceId};

    use super::*;

    crate::shared::fixture::test_callsite!(Early, EARLY = "early", "sink::raw::tests", INFO, SPAN, ["n"]);
    crate::shared::fixture::test_callsite!(Late, LATE = "late", "sink::raw::tests", INFO, SPAN, ["n"]);

    fn span(meta: ringtrace_core::record::Meta, n: u64) -> [RawRecord; 2] {
        let span = SpanId::new(n).unwrap();
        let open = Record::Open {
            span,
            parent: None,
            trace: TraceId::new(u128::from(n)).unwrap(),
            meta,
            ticks: n,
            sampled: true,
            first: InlineField::NONE,
        };
        [RawRecord::new(&open), RawRecord::new(&Record::Close { span, ticks: n + 1 })]
    }

    /// Each ring's records come after the callsites registered before they were read, each
    /// written once: one registered between two rings of a pass is written before the second
    /// ring's records. After a failed write, every callsite is written once more, before the
    /// next records.
    #[test]
    fn callsites_registered_before_a_rings_records_are_written_before_them_once() {
        crate::callsites::register(&EARLY);
        let dir = std::env::temp_dir().join(format!("ringtrace-raw-sink-late-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let process = ProcessInfo {
            node: "n".into(),
            daemon: "d".into(),
            pid: 1,
            span_event_limit: 8,
            attributes: Vec::new(),
        };
        let anchor = ClockAnchor { raw: 0, unix_ns: 1, nanos_per_2_32_ticks: 1 << 32 };
        let mut rec = RawRecording::create(&dir, &process, true).unwrap();
        rec.begin_pass(anchor);
        // More than a frame of `early` spans: two records frames.
        let early: Vec<RawRecord> =
            (1..=(FRAME_RECORDS / 2 + 10) as u64).flat_map(|n| span(&EARLY, n)).collect();
        rec.ring(1, "t", RingPosition { ring: 0, position: 0 }, &early, &[]);
        // `late` is registered after the first ring was read, and named by the second's records.
        crate::callsites::register(&LATE);
        let late: Vec<RawRecord> = (1..=3).flat_map(|n| span(&LATE, 1_000_000 + n)).collect();
        rec.ring(2, "u", RingPosition { ring: 1, position: 0 }, &late[..2], &late[2..]);
        rec.end_pass();
        // A write failed: the next pass writes the callsites again before its records.
        rec.out.losses.failed_writes.fetch_add(1, Ordering::Release);
        rec.begin_pass(anchor);
        rec.ring(1, "t", RingPosition { ring: 0, position: early.len() as u64 }, &early[..2], &[]);
        rec.flush(&Stats::default(), None).unwrap();
        let path = rec.path().to_owned();
        drop(rec);

        let mut reader = FrameReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        // Each callsite definition: its address and how many records frames came before it.
        let (mut defined, mut records_frames) = (Vec::<(u64, usize)>::new(), 0);
        let (early_at, late_at) = (raw::meta_address(&EARLY), raw::meta_address(&LATE));
        while let Some(frame) = reader.next_frame().unwrap() {
            match frame {
                Frame::Callsite(c) => defined.push((c.address, records_frames)),
                Frame::Records { records, .. } => {
                    records_frames += 1;
                    for r in records.chunks_exact(RECORD_SIZE) {
                        let address = RawRecord(r.try_into().unwrap()).callsite_address();
                        assert!(
                            address.is_none_or(|a| defined.iter().any(|d| d.0 == a)),
                            "an undefined callsite"
                        );
                    }
                }
                _ => {}
            }
        }
        assert_eq!(records_frames, 4);
        let when = |address| defined.iter().filter(|d| d.0 == address).map(|d| d.1).collect::<Vec<_>>();
        assert_eq!(when(early_at), [0, 3], "before the first records, and again after the failure");
        assert_eq!(when(late_at), [2, 3], "before the second ring's records, and again after the failure");
        // Other tests register callsites meanwhile: whatever was written before the failure is
        // written once before it, and once again after it.
        for &(address, at) in defined.iter().filter(|d| d.1 < 3) {
            assert_eq!(when(address), [at, 3], "callsite {address:#x}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
