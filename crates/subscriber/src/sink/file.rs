//! The recording sink: OTLP on disk, one file per collector.

use ringtrace_core::otlp::KeyValueExt as _;
use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ringtrace_core::otlp::{self, KeyValue};

use super::{Sink, SinkError, SinkLosses};
use crate::encode;
use crate::messages::message;
use crate::span_data::{ResourceInfo, SpanData};
use crate::wire::SpanEncoder;

/// Writes spans to `<dir>/<node>_<daemon>_<pid>.otlp`.
///
/// The file is a sequence of OTLP `TracesData` protobuf messages, each preceded by its length as
/// a varint (the delimited framing of the OpenTelemetry file-exporter specification). Every frame
/// repeats the process's resource with the cumulative loss counters, so the last frame holds the
/// totals; the sink writes a final frame without spans on flush so the totals are always there.
///
/// An existing file is never overwritten: a second collector of the same process (or a process
/// that got the same pid as an earlier one) writes `<node>_<daemon>_<pid>-2.otlp`, and so on.
///
/// Frames are encoded and written on the thread that exports to the sink, while the file system
/// keeps up; from a slow write on, a writer thread of the sink's own takes them for a while, so
/// that a write held up by the file system (page-cache writeback, the journal) does not hold up
/// the export meanwhile. At most 32 frames wait for it; beyond that the export waits.
///
/// A write that fails (a full disk) loses its frame, never more: the partial frame is cut off,
/// its spans are counted (`Stats::sink_failed_spans`, `ringtrace.sink_failed_spans`), and the
/// next frames are written as soon as the file system takes them again. The first frame written
/// after a gap carries a `ringtrace.loss` span (status error) spanning the gap, with the number
/// of spans lost in `ringtrace.lost_spans`.
pub struct RecordingSink {
    path: PathBuf,
    out: Pipe,
    counters_written: Option<crate::stats::Stats>,
    encoder: SpanEncoder,
    /// Lost spans covered by the loss markers handed to the writer so far.
    marks_sent: u64,
    ids: ringtrace_core::ids::IdGenerator,
}

/// Frames handed to the writer thread (after a slow write) and not yet written, at most.
const FRAMES_IN_FLIGHT: usize = 32;

/// Recordings of one node, daemon and pid in one directory, at most (`-2` … `-999`).
const SAME_NAME_FILES: u32 = 999;

/// The name of the span that marks where spans were lost.
pub const LOSS_SPAN_NAME: &str = "ringtrace.loss";

enum Job {
    /// A whole frame, holding `spans` spans and a loss marker covering `marks` lost spans.
    Write { buf: Vec<u8>, spans: u64, marks: u64 },
    /// Write everything before, `fdatasync`, answer.
    Sync(SyncSender<std::io::Result<()>>),
}

/// What the writer tells the sink about the frames it could not write.
#[derive(Default)]
pub(crate) struct WriteLosses {
    /// Spans in frames that could not be written.
    pub(crate) lost_spans: AtomicU64,
    /// Lost spans covered by loss markers that were in frames that could not be written.
    unwritten_marks: AtomicU64,
    /// When the current run of failed writes began (Unix ns); 0 when none is unmarked.
    gap_start_unix_ns: AtomicU64,
    /// The latest write error.
    last_error: Mutex<String>,
    /// Writes that failed so far (each lost one frame).
    pub(crate) failed_writes: AtomicU64,
}

impl WriteLosses {
    /// Counts a frame that could not be written: `spans` spans, and a loss marker covering
    /// `marks` lost spans; `error` says why.
    fn count_failed(&self, spans: u64, marks: u64, error: String) {
        let _ =
            self.gap_start_unix_ns.compare_exchange(0, unix_now_ns(), Ordering::Relaxed, Ordering::Relaxed);
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = error;
        self.unwritten_marks.fetch_add(marks, Ordering::Release);
        self.lost_spans.fetch_add(spans, Ordering::Release);
        self.failed_writes.fetch_add(1, Ordering::Release);
    }

    /// Lost spans that no loss marker covers yet, given the lost spans the markers handed to the
    /// writer so far cover (`marks_sent`; those of markers in frames that failed do not count).
    pub(crate) fn unmarked(&self, marks_sent: u64) -> u64 {
        let covered = marks_sent.saturating_sub(self.unwritten_marks.load(Ordering::Acquire));
        self.lost_spans.load(Ordering::Acquire).saturating_sub(covered)
    }

    /// The current run of losses for a marker made at `now_ns`: when it began and the latest
    /// error. The next failure starts a new run.
    pub(crate) fn take_gap(&self, now_ns: u64) -> (u64, String) {
        let start = match self.gap_start_unix_ns.swap(0, Ordering::Relaxed) {
            0 => now_ns,
            t => t.min(now_ns),
        };
        (start, self.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// Where the writer writes: the recording's file (a fake in tests).
pub(crate) trait Target: Send + 'static {
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()>;
    /// Cuts the file back to `len` bytes and goes on writing from there.
    fn truncate(&mut self, len: u64) -> std::io::Result<()>;
    fn sync(&mut self) -> std::io::Result<()>;
}

/// Disk space reserved ahead of a recording's writes at once, where that is cheaper (ext4).
const RESERVE_AHEAD: u64 = 8 << 20;

/// A recording's file as the writer writes it: appended to, and on ext4 reserved ahead
/// in [`RESERVE_AHEAD`] steps (`fallocate` with `FALLOC_FL_KEEP_SIZE`, so its size is still what
/// was written).
///
/// Why: ext4 reserves blocks for a buffered append one 4 KiB block at a time
/// (`ext4_da_get_block_prep`), which made up a third of the writer thread's CPU; blocks
/// reserved 8 MiB at a time cost the process 28.8–29.6 → 21.0–21.4 ns per 128 bytes, and the
/// machine as a whole (kernel threads included) 30.8–33.1 → 26.0
/// (`benches/README.md`, "Reserving the recording's disk space ahead"). On tmpfs reserving
/// ahead costs more than it saves (38–42 → 49 ns), and other file systems were not measured, so
/// only ext4 reserves. What a dead process had reserved past its last write stays allocated
/// (at most 8 MiB) until the file is cut or removed; a clean shutdown gives it back.
pub(crate) struct RecordingFile {
    file: File,
    /// Bytes in the file.
    len: u64,
    /// Bytes from the start of the file up to the end of the last step asked for, granted or
    /// not (a refused call may have reserved part of it): what the end gives back past `len`.
    reserved: u64,
    /// Whether to reserve ahead: on ext4, until the file system refuses.
    reserving: bool,
}

impl RecordingFile {
    /// `file`, holding `len` bytes, appended to from there.
    pub(crate) fn new(file: File, len: u64) -> Self {
        let reserving = reserves_ahead(&file);
        Self { file, len, reserved: len, reserving }
    }

    /// Reserves space for `more` bytes past the end, a step at a time. A file system that
    /// refuses (full, or no `fallocate`) is not asked again: the write goes on and fails, or not,
    /// as it would have.
    fn reserve(&mut self, more: u64) {
        let end = self.len + more;
        if !self.reserving || end <= self.reserved {
            return;
        }
        let to = end.div_ceil(RESERVE_AHEAD) * RESERVE_AHEAD;
        self.reserving = reserve_range(&self.file, self.reserved, to - self.reserved);
        // What a refused call reserved before it failed is given back with the rest.
        self.reserved = to;
    }
}

impl Target for RecordingFile {
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.reserve(buf.len() as u64);
        let written = Write::write_all(&mut self.file, buf);
        if written.is_ok() {
            self.len += buf.len() as u64;
        }
        written
    }
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        // Cutting the file also gives back what was reserved past the cut.
        self.file.set_len(len)?;
        self.len = len;
        self.reserved = len;
        self.file.seek(SeekFrom::Start(len)).map(drop)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        self.file.sync_data()
    }
}

impl Drop for RecordingFile {
    fn drop(&mut self) {
        // Gives back what was reserved past the end (cutting the file to its own size), unless
        // the file grew meanwhile: then another process appended to it (`ringtrace recover`),
        // and what lies past `len` is its.
        let grown = self.file.metadata().map_or(true, |m| m.len() != self.len);
        if self.reserved > self.len && !grown {
            let _ = self.file.set_len(self.len);
        }
    }
}

/// Whether reserving ahead saves writes to `file` CPU: on ext4 (see [`RecordingFile`]). ext2
/// and ext3 share its magic number; where their files cannot take `fallocate`, the first refusal
/// ends the reserving.
#[cfg(target_os = "linux")]
fn reserves_ahead(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    const EXT4_SUPER_MAGIC: i64 = 0xEF53;
    // SAFETY: `statfs` is plain data, for which all zeros is a value.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `fs` is a valid, writable `statfs`; the fd is open.
    let ok = unsafe { libc::fstatfs(file.as_raw_fd(), &mut fs) } == 0;
    #[allow(clippy::unnecessary_cast)] // `f_type`'s type differs between targets
    let kind = fs.f_type as i64;
    ok && kind == EXT4_SUPER_MAGIC
}

#[cfg(not(target_os = "linux"))]
fn reserves_ahead(_: &File) -> bool {
    false
}

/// Reserves `len` bytes of `file` from `offset`, keeping its size; whether it could.
#[cfg(target_os = "linux")]
fn reserve_range(file: &File, offset: u64, len: u64) -> bool {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return false;
    };
    loop {
        // SAFETY: a plain system call on an open fd; it touches no memory of ours.
        if unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, offset, len) } == 0 {
            return true;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return false;
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn reserve_range(_: &File, _: u64, _: u64) -> bool {
    false
}

pub(crate) fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A recording's writer: the file holds whole frames up to `good_len`.
struct Writer {
    target: Box<dyn Target>,
    label: String,
    good_len: u64,
    /// A partial frame may follow `good_len`: cut it before writing on.
    cut_pending: bool,
    /// The latest write failed (and recovery has not been seen yet).
    failing: bool,
    /// When a write last took [`SLOW_WRITE`] or longer.
    slow_at: Option<Instant>,
    /// How long after a slow write frames go to the writer thread ([`HANDED_OFF_FOR`]).
    handed_off_for: Duration,
    losses: Arc<WriteLosses>,
    /// Print nothing to stderr.
    quiet: Arc<AtomicBool>,
}

/// A write that takes this long or longer has the frames after it handed to a writer thread
/// (see [`Pipe`]). A write of a drain pass's frames into the page cache takes well under a
/// millisecond; one held up by the file system (writeback throttling, a journal commit, a
/// network file system) takes longer.
const SLOW_WRITE: Duration = Duration::from_millis(4);

/// How long after a slow write frames keep going to the writer thread.
const HANDED_OFF_FOR: Duration = Duration::from_secs(1);

impl Writer {
    fn write(&mut self, buf: &[u8], spans: u64, marks: u64) {
        let started = Instant::now();
        if self.cut_pending && self.target.truncate(self.good_len).is_ok() {
            self.cut_pending = false;
        }
        let result = if self.cut_pending {
            Err(std::io::Error::other("a partial frame could not be cut off"))
        } else {
            self.target.write_all(buf)
        };
        match result {
            Ok(()) => {
                self.good_len += buf.len() as u64;
                if self.failing {
                    self.failing = false;
                    message!(
                        self.quiet.load(Ordering::Relaxed),
                        "ringtrace: writing the recording {} again",
                        self.label
                    );
                }
            }
            Err(e) => {
                // The file keeps only whole frames: a partial one is cut off (now, or before the
                // next write if cutting fails too).
                self.cut_pending = self.target.truncate(self.good_len).is_err();
                self.losses.count_failed(spans, marks, e.to_string());
                if !self.failing {
                    self.failing = true;
                    message!(
                        self.quiet.load(Ordering::Relaxed),
                        "ringtrace: writing the recording {} failed: {e}; spans are counted as lost (ringtrace.sink_failed_spans) until a write succeeds again",
                        self.label
                    );
                }
            }
        }
        let now = Instant::now();
        if now.duration_since(started) >= SLOW_WRITE {
            self.slow_at = Some(now);
        }
    }

    /// Whether a write was slow lately: frames are handed to the writer thread meanwhile.
    fn slow_lately(&self) -> bool {
        self.slow_at.is_some_and(|t| t.elapsed() < self.handed_off_for)
    }

    fn sync(&mut self) -> std::io::Result<()> {
        if self.failing {
            let error = self.losses.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone();
            return Err(std::io::Error::other(format!("the latest write to the recording failed: {error}")));
        }
        self.target.sync()
    }
}

fn lock(writer: &Mutex<Writer>) -> std::sync::MutexGuard<'_, Writer> {
    writer.lock().unwrap_or_else(|e| e.into_inner())
}

/// The writer thread: it exists from the first slow write on.
struct Handoff {
    jobs: SyncSender<Job>,
    /// Buffers the thread is done with, for reuse.
    spare: Receiver<Vec<u8>>,
    thread: JoinHandle<()>,
}

/// The drain's end of a recording's file: a `Write` of whole frames.
///
/// The thread that hands it frames (the drain, or the assembler for the OTLP recording) writes
/// them itself while the file system keeps up: one copy into the page cache, with the frame
/// still in that core's cache, and no other thread woken. Once a write takes [`SLOW_WRITE`] or
/// longer, the frames of the next [`HANDED_OFF_FOR`] go to a writer thread (made then), so that
/// a file system that holds up writes does not stop the drain from emptying the rings
/// meanwhile; at most [`FRAMES_IN_FLIGHT`] wait for it, beyond that the drain waits. Frames are
/// written in the order they are handed over, whichever thread writes them: one is written here
/// only when the writer thread has none left.
pub(crate) struct Pipe {
    writer: Arc<Mutex<Writer>>,
    /// The writer thread's name, when it is made.
    thread_name: String,
    handoff: Option<Handoff>,
    pub(crate) losses: Arc<WriteLosses>,
    /// The writer prints nothing to stderr.
    pub(crate) quiet: Arc<AtomicBool>,
    /// What the next frame written holds: spans, and lost spans its marker covers.
    pub(crate) next: (u64, u64),
    /// Buffers handed over so far (the last one's number), written here or by the thread.
    pub(crate) sent: u64,
    /// Buffers written (or failed and counted), in the order sent.
    pub(crate) done: Arc<AtomicU64>,
    /// Holds the writer thread before each frame, for a test.
    #[cfg(test)]
    gate: tests::Gate,
}

impl Pipe {
    pub(crate) fn new(target: impl Target, path: &Path) -> Self {
        Self::after(target, path, 0)
    }

    /// [`new`](Self::new) for a file that already holds `written` bytes of whole frames.
    pub(crate) fn after(target: impl Target, path: &Path, written: u64) -> Self {
        let losses = Arc::new(WriteLosses::default());
        let quiet = Arc::new(AtomicBool::new(false));
        let writer = Writer {
            target: Box::new(target),
            label: path.display().to_string(),
            good_len: written,
            cut_pending: false,
            failing: false,
            slow_at: None,
            handed_off_for: HANDED_OFF_FOR,
            losses: losses.clone(),
            quiet: quiet.clone(),
        };
        let name = format!("ringtrace-rec-{}", path.file_name().and_then(|n| n.to_str()).unwrap_or(""));
        Self {
            writer: Arc::new(Mutex::new(writer)),
            thread_name: name.chars().take(15).collect(),
            handoff: None,
            losses,
            quiet,
            next: (0, 0),
            sent: 0,
            done: Arc::new(AtomicU64::new(0)),
            #[cfg(test)]
            gate: tests::Gate::default(),
        }
    }

    /// The writer thread, made now if it is not yet.
    fn handoff(&mut self) -> std::io::Result<&Handoff> {
        if self.handoff.is_none() {
            let (jobs, rx) = mpsc::sync_channel::<Job>(FRAMES_IN_FLIGHT);
            let (spare_tx, spare) = mpsc::sync_channel::<Vec<u8>>(FRAMES_IN_FLIGHT);
            let (writer, done) = (self.writer.clone(), self.done.clone());
            #[cfg(test)]
            let gate = self.gate.clone();
            let thread = std::thread::Builder::new().name(self.thread_name.clone()).spawn(move || {
                for job in rx {
                    match job {
                        Job::Write { buf, spans, marks } => {
                            #[cfg(test)]
                            gate.pass();
                            lock(&writer).write(&buf, spans, marks);
                            // Release: a drain that loads this with Acquire frees ring records
                            // the write held, after the write.
                            done.fetch_add(1, Ordering::Release);
                            let _ = spare_tx.try_send(buf);
                        }
                        Job::Sync(reply) => {
                            let _ = reply.send(lock(&writer).sync());
                        }
                    }
                }
            })?;
            self.handoff = Some(Handoff { jobs, spare, thread });
        }
        Ok(self.handoff.as_ref().expect("made above"))
    }

    /// Writes `buf` on this thread, unless the writer thread has frames left or a write was slow
    /// lately; whether it did. A write that fails is counted, as the thread would.
    fn write_here(&mut self, buf: &[u8], force: bool) -> bool {
        if self.done.load(Ordering::Acquire) != self.sent {
            return false;
        }
        let mut writer = lock(&self.writer);
        if writer.slow_lately() && !force {
            return false;
        }
        let (spans, marks) = std::mem::take(&mut self.next);
        self.sent += 1;
        writer.write(buf, spans, marks);
        self.done.fetch_add(1, Ordering::Release);
        true
    }

    /// Hands the whole frames in `buf` to the writer; `buf` comes back empty.
    pub(crate) fn send_buffer(&mut self, buf: &mut Vec<u8>) -> std::io::Result<()> {
        if self.write_here(buf, false) {
            buf.clear();
            return Ok(());
        }
        let spare = self.spare_buffer();
        let owned = std::mem::replace(buf, spare);
        self.hand_off(owned)
    }

    /// An empty buffer: one the writer thread is done with, when there is one.
    fn spare_buffer(&mut self) -> Vec<u8> {
        let mut spare = self.handoff.as_ref().and_then(|h| h.spare.try_recv().ok()).unwrap_or_default();
        spare.clear();
        spare
    }

    /// Hands `buf`, whole frames holding what `next` says, to the writer thread; written here
    /// after all when the thread cannot be made.
    fn hand_off(&mut self, buf: Vec<u8>) -> std::io::Result<()> {
        let jobs = match self.handoff() {
            Ok(h) => h.jobs.clone(),
            Err(_) => {
                // With no writer thread, none has frames left: written here, in order.
                let written = self.write_here(&buf, true);
                debug_assert!(written, "no writer thread, yet frames handed to one");
                return Ok(());
            }
        };
        let (spans, marks) = std::mem::take(&mut self.next);
        self.sent += 1;
        match jobs.send(Job::Write { buf, spans, marks }) {
            Ok(()) => Ok(()),
            Err(_) => {
                // The writer thread is gone and will never write it: its spans are counted as
                // lost, and the frame as done, so that what waits for it (ring records held
                // back) is not held forever.
                self.losses.count_failed(spans, marks, writer_gone().to_string());
                self.done.fetch_add(1, Ordering::Release);
                Err(writer_gone())
            }
        }
    }

    /// Waits until everything handed over is written and synced to disk.
    pub(crate) fn sync(&mut self) -> std::io::Result<()> {
        if self.done.load(Ordering::Acquire) == self.sent {
            return lock(&self.writer).sync();
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let handoff = self.handoff.as_ref().ok_or_else(writer_gone)?;
        handoff.jobs.send(Job::Sync(tx)).map_err(|_| writer_gone())?;
        rx.recv().unwrap_or_else(|_| Err(writer_gone()))
    }
}

fn writer_gone() -> std::io::Error {
    std::io::Error::other("the recording's writer thread has stopped")
}

impl Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    /// Hands one whole frame to the writer.
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if self.write_here(buf, false) {
            return Ok(());
        }
        let mut owned = self.spare_buffer();
        owned.extend_from_slice(buf);
        self.hand_off(owned)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // The writer thread writes what it was given, then stops.
        if let Some(Handoff { jobs, spare, thread }) = self.handoff.take() {
            drop((jobs, spare));
            let _ = thread.join();
        }
    }
}

/// Creates `<dir>/<base>.<ext>`, or `<base>-2.<ext>`, `-3` … when it exists: never an existing
/// file.
pub(crate) fn create_new(dir: &Path, base: &str, ext: &str) -> std::io::Result<(File, PathBuf)> {
    for n in 1..=SAME_NAME_FILES {
        let path = match n {
            1 => dir.join(format!("{base}.{ext}")),
            n => dir.join(format!("{base}-{n}.{ext}")),
        };
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => return Ok((file, path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!("{} recordings named {base}(-N).{ext} exist already", SAME_NAME_FILES),
    ))
}

impl RecordingSink {
    /// Creates the directory if needed and a new file in it for this collector (never
    /// overwriting an existing one).
    pub fn create(dir: &Path, node: &str, daemon: &str, pid: u32) -> std::io::Result<Self> {
        fs::create_dir_all(dir)?;
        let (file, path) = create_new(dir, &file_base(node, daemon, pid), "otlp")?;
        let out = Pipe::new(RecordingFile::new(file, 0), &path);
        Ok(Self::with_pipe(path, out))
    }

    fn with_pipe(path: PathBuf, out: Pipe) -> Self {
        Self {
            path,
            out,
            counters_written: None,
            encoder: SpanEncoder::default(),
            marks_sent: 0,
            ids: ringtrace_core::ids::IdGenerator::from_entropy(u64::from(std::process::id())),
        }
    }

    /// Prints nothing to stderr when the file cannot be written (`true`), or says so once per
    /// failure and once per recovery (`false`, the default). Lost spans are counted either way.
    /// [`Builder::quiet`](crate::Builder::quiet) sets it for the recording the builder makes.
    pub fn quiet(self, quiet: bool) -> Self {
        self.out.quiet.store(quiet, Ordering::Relaxed);
        self
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A `ringtrace.loss` span for the lost spans no marker written (or on its way) covers yet,
    /// and how many it covers.
    fn loss_marker(&mut self) -> Option<(otlp::Span, u64)> {
        let unmarked = self.unmarked();
        if unmarked == 0 {
            return None;
        }
        let now = unix_now_ns();
        let (start, error) = self.out.losses.take_gap(now);
        let span = otlp::Span {
            trace_id: self.ids.trace_id().to_bytes().to_vec(),
            span_id: self.ids.span_id().to_bytes().to_vec(),
            flags: 0x101,
            name: LOSS_SPAN_NAME.into(),
            kind: otlp::SpanKind::Internal as i32,
            start_time_unix_nano: start,
            end_time_unix_nano: now,
            attributes: vec![
                KeyValue::int("ringtrace.lost_spans", i64::try_from(unmarked).unwrap_or(i64::MAX)),
                KeyValue::string("error.type", "recording_write_failed"),
            ],
            status: Some(otlp::Status {
                message: format!("the recording lost {unmarked} spans: {error}"),
                code: otlp::StatusCode::Error as i32,
            }),
            ..Default::default()
        };
        Some((span, unmarked))
    }

    fn write(&mut self, batch: &[SpanData], resource: &ResourceInfo) -> std::io::Result<()> {
        let marker = self.loss_marker();
        let marks = marker.as_ref().map_or(0, |m| m.1);
        self.out.next = (batch.len() as u64, marks);
        self.marks_sent += marks;
        self.encoder.write_frame(
            batch,
            marker.as_ref().map(|m| &m.0),
            &encode::resource(resource),
            &mut self.out,
        )?;
        self.counters_written = Some(resource.stats);
        Ok(())
    }
}

/// `<node>_<daemon>_<pid>`, the start of a recording's file name.
pub(crate) fn file_base(node: &str, daemon: &str, pid: u32) -> String {
    format!("{}_{}_{}", sanitize(node), sanitize(daemon), pid)
}

/// Keeps file names portable: anything but `[A-Za-z0-9.-]` becomes `-`.
fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '-' }).collect()
}

impl Sink for RecordingSink {
    fn name(&self) -> &str {
        "recording"
    }

    fn export(&mut self, batch: &[SpanData], resource: &ResourceInfo) -> Result<(), SinkError> {
        Ok(self.write(batch, resource)?)
    }

    fn flush(&mut self, resource: &ResourceInfo) -> Result<(), SinkError> {
        if self.counters_written != Some(resource.stats) || self.unmarked() > 0 {
            self.write(&[], resource)?;
        }
        self.out.sync()?;
        Ok(())
    }

    fn losses(&self) -> SinkLosses {
        SinkLosses { failed: self.out.losses.lost_spans.load(Ordering::Relaxed), ..SinkLosses::default() }
    }
}

impl RecordingSink {
    /// Lost spans that no loss marker written (or on its way to the writer) covers yet.
    fn unmarked(&self) -> u64 {
        self.out.losses.unmarked(self.marks_sent)
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    /// A disk with room for `room` bytes: a write past it writes what fits, then fails. It notes
    /// which thread made each write, and can be made slow for the next one.
    #[derive(Clone, Default)]
    struct FakeDisk(Arc<Mutex<Disk>>);

    /// A test's hold on a pipe's writer thread: while it is closed, the thread waits before each
    /// frame, holding no lock.
    #[derive(Clone, Default)]
    pub(super) struct Gate(Arc<(Mutex<bool>, std::sync::Condvar)>);

    impl Gate {
        fn set_closed(&self, closed: bool) {
            *self.0 .0.lock().unwrap() = closed;
            self.0 .1.notify_all();
        }

        /// Waits while the gate is closed.
        pub(super) fn pass(&self) {
            let (closed, opened) = &*self.0;
            let _open = opened.wait_while(closed.lock().unwrap(), |closed| *closed).unwrap();
        }
    }

    /// Opens its gate when dropped.
    struct OpenOnDrop(Gate);

    impl Drop for OpenOnDrop {
        fn drop(&mut self) {
            self.0.set_closed(false);
        }
    }

    #[derive(Default)]
    struct Disk {
        data: Vec<u8>,
        room: usize,
        threads: Vec<std::thread::ThreadId>,
        delay_next: Duration,
    }

    impl FakeDisk {
        fn with_room(room: usize) -> Self {
            let disk = Self::default();
            disk.set_room(room);
            disk
        }
        fn set_room(&self, room: usize) {
            self.0.lock().unwrap().room = room;
        }
        fn delay_next(&self, delay: Duration) {
            self.0.lock().unwrap().delay_next = delay;
        }
        fn len(&self) -> usize {
            self.0.lock().unwrap().data.len()
        }
        fn bytes(&self) -> Vec<u8> {
            self.0.lock().unwrap().data.clone()
        }
        fn threads(&self) -> Vec<std::thread::ThreadId> {
            self.0.lock().unwrap().threads.clone()
        }
        /// The frames on the disk: every byte must belong to a whole frame.
        fn frames(&self) -> Vec<otlp::TracesData> {
            let bytes = self.bytes();
            let mut rest = &bytes[..];
            let mut frames = Vec::new();
            while !rest.is_empty() {
                frames.push(otlp::TracesData::decode_length_delimited(&mut rest).expect("whole frames only"));
            }
            frames
        }
    }

    impl Target for FakeDisk {
        fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
            let delay = std::mem::take(&mut self.0.lock().unwrap().delay_next);
            std::thread::sleep(delay);
            let mut disk = self.0.lock().unwrap();
            disk.threads.push(std::thread::current().id());
            let fits = disk.room.saturating_sub(disk.data.len()).min(buf.len());
            disk.data.extend_from_slice(&buf[..fits]);
            if fits < buf.len() {
                return Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "No space left on device"));
            }
            Ok(())
        }
        fn truncate(&mut self, len: u64) -> std::io::Result<()> {
            self.0.lock().unwrap().data.truncate(len as usize);
            Ok(())
        }
        fn sync(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn resource() -> ResourceInfo {
        ResourceInfo {
            identity: ringtrace_core::Identity { node: "node".into(), daemon: "daemon".into() },
            pid: 42,
            stats: crate::Stats::default(),
        }
    }

    /// (spans other than markers, lost spans the markers name) in the frames.
    fn count(frames: &[otlp::TracesData]) -> (usize, i64) {
        let spans = frames.iter().flat_map(|f| &f.resource_spans).flat_map(|r| &r.scope_spans);
        let spans: Vec<_> = spans.flat_map(|s| &s.spans).collect();
        let marked = spans
            .iter()
            .filter(|s| s.name == LOSS_SPAN_NAME)
            .flat_map(|s| &s.attributes)
            .filter(|a| a.key == "ringtrace.lost_spans")
            .map(|a| match a.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(otlp::any_value::Value::IntValue(n)) => *n,
                other => panic!("{other:?}"),
            })
            .sum();
        (spans.iter().filter(|s| s.name != LOSS_SPAN_NAME).count(), marked)
    }

    /// A full disk loses the frames it could not take, never more: each is cut off whole and its
    /// spans counted; writing resumes when there is room, and a marker names what was lost,
    /// again in a later frame if the frame holding the marker was lost too.
    #[test]
    fn a_full_disk_loses_whole_frames_counts_them_and_writing_resumes() {
        let spans = crate::wire::tests::sample_spans();
        let disk = FakeDisk::with_room(usize::MAX);
        let path = PathBuf::from("fake.otlp");
        let mut sink = RecordingSink::with_pipe(path.clone(), Pipe::new(disk.clone(), &path));
        let info = resource();
        sink.export(&spans[..3], &info).unwrap();
        sink.flush(&info).unwrap();
        // Full: room for part of a frame only.
        disk.set_room(disk.len() + 10);
        sink.export(&spans[..4], &info).unwrap();
        sink.export(&spans[..2], &info).unwrap();
        assert!(sink.flush(&info).is_err(), "the sync after a failed write fails");
        assert_eq!(sink.losses().failed, 6);
        // Still full: the frame with the first marker is lost too.
        sink.export(&spans[..1], &info).unwrap();
        assert!(sink.flush(&info).is_err());
        assert_eq!(sink.losses().failed, 7);
        disk.set_room(usize::MAX);
        sink.export(&spans[..5], &info).unwrap();
        sink.flush(&info).unwrap();
        assert_eq!(sink.losses().failed, 7);
        let frames = disk.frames();
        assert_eq!(count(&frames), (3 + 5, 7), "written spans; lost spans the markers name");
        // Nothing new lost: no further marker.
        sink.export(&spans[..2], &info).unwrap();
        sink.flush(&info).unwrap();
        assert_eq!(count(&disk.frames()), (3 + 5 + 2, 7));
    }

    /// Frames are written on the thread that hands them over, before it goes on, while writes
    /// are quick; after a slow one they go to a writer thread for a while, in order, and `sync`
    /// waits for them; once the while has passed and that thread has none left, they are
    /// written here again.
    #[test]
    fn frames_are_written_here_until_a_write_is_slow_then_by_a_thread_in_order() {
        let disk = FakeDisk::with_room(usize::MAX);
        let mut pipe = Pipe::new(disk.clone(), Path::new("fake.rtrace"));
        let here = std::thread::current().id();
        // The first write is here, and slow: 12 times `SLOW_WRITE`, which no load shortens.
        disk.delay_next(SLOW_WRITE * 12);
        let mut buf = b"one ".to_vec();
        pipe.send_buffer(&mut buf).unwrap();
        assert!(buf.is_empty(), "the buffer comes back empty");
        assert_eq!(pipe.done.load(Ordering::Acquire), 1, "written before send_buffer returned");
        assert_eq!(disk.threads(), [here]);
        assert!(pipe.handoff.is_none(), "no writer thread until a write is slow");
        // A while far longer than this test, so that a busy machine cannot end it early.
        lock(&pipe.writer).handed_off_for = Duration::from_secs(3600);
        let mut buf = b"two ".to_vec();
        pipe.send_buffer(&mut buf).unwrap();
        assert!(buf.is_empty());
        for frame in ["three ", "four "] {
            pipe.write_all(frame.as_bytes()).unwrap();
        }
        assert!(pipe.handoff.is_some());
        pipe.sync().unwrap();
        assert_eq!(pipe.done.load(Ordering::Acquire), 4);
        assert_eq!(disk.bytes(), b"one two three four ");
        let threads = disk.threads();
        assert!(threads[1..].iter().all(|t| *t != here), "handed to the writer thread: {threads:?}");
        // The while is over (set back by hand) and the thread has written everything: here again.
        lock(&pipe.writer).slow_at = None;
        pipe.write_all(b"five").unwrap();
        assert_eq!(pipe.done.load(Ordering::Acquire), 5);
        assert_eq!(disk.threads().last(), Some(&here));
        assert_eq!(disk.bytes(), b"one two three four five");
    }

    /// A frame handed over after the while of hand-offs is over still goes to the writer thread
    /// while the thread has frames left, so that it is written after them. The thread is held
    /// (by a gate, holding no lock) with two frames; the next frame must not reach the disk
    /// before them.
    #[test]
    fn a_frame_waits_behind_those_the_writer_thread_has_even_after_the_while() {
        let disk = FakeDisk::with_room(usize::MAX);
        let mut pipe = Pipe::new(disk.clone(), Path::new("fake.rtrace"));
        // Dropped before the pipe, which joins its thread: a failed assertion does not leave
        // the thread held.
        let _opened_at_end = OpenOnDrop(pipe.gate.clone());
        let here = std::thread::current().id();
        lock(&pipe.writer).handed_off_for = Duration::from_secs(3600);
        disk.delay_next(SLOW_WRITE * 12);
        pipe.write_all(b"one ").unwrap();
        pipe.gate.set_closed(true);
        pipe.write_all(b"two ").unwrap();
        pipe.write_all(b"three ").unwrap();
        assert!(pipe.handoff.is_some(), "handed to a writer thread after the slow write");
        // The while is over (set by hand, not waited for); the thread still has two frames.
        lock(&pipe.writer).slow_at = None;
        pipe.write_all(b"four").unwrap();
        assert_eq!(disk.bytes(), b"one ", "nothing is written before the thread's frames");
        pipe.gate.set_closed(false);
        pipe.sync().unwrap();
        assert_eq!(disk.bytes(), b"one two three four");
        assert!(disk.threads()[1..].iter().all(|t| *t != here), "{:?}", disk.threads());
    }

    #[test]
    fn an_existing_recording_is_never_overwritten() {
        let dir = std::env::temp_dir().join(format!("ringtrace-create-new-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let a = RecordingSink::create(&dir, "n", "d", 7).unwrap();
        let b = RecordingSink::create(&dir, "n", "d", 7).unwrap();
        let c = RecordingSink::create(&dir, "n", "d", 7).unwrap();
        let names: Vec<_> = [&a, &b, &c].iter().map(|s| s.path().file_name().unwrap().to_owned()).collect();
        assert_eq!(names, ["n_d_7.otlp", "n_d_7-2.otlp", "n_d_7-3.otlp"]);
        drop((a, b, c));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Bytes allocated to `path` on disk.
    fn allocated(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(path).unwrap().blocks() * 512
    }

    /// The type of the file system `dir` is on, as `/proc/mounts` names it: the mount with the
    /// longest mount point above `dir`, the last one mounted when several share it.
    fn fs_type(dir: &Path) -> String {
        let dir = dir.canonicalize().unwrap();
        // `/proc/mounts` writes a space, tab, newline and backslash in octal.
        let unescape = |s: &str| {
            s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
        };
        let mounts = fs::read_to_string("/proc/mounts").unwrap();
        let (_, _, kind) = mounts
            .lines()
            .enumerate()
            .filter_map(|(i, l)| {
                let mut f = l.split(' ');
                let (at, kind) = (unescape(f.nth(1)?), f.next()?);
                dir.starts_with(&at).then(|| (at.len(), i, kind.to_owned()))
            })
            .max()
            .unwrap();
        kind
    }

    /// Bytes free for this process in the file system of `dir`.
    fn free_bytes(dir: &Path) -> u64 {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
        // SAFETY: `statvfs` is plain data, for which all zeros is a value.
        let mut fs: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `path` is a NUL-terminated string and `fs` a valid, writable `statvfs`.
        assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &mut fs) }, 0);
        #[allow(clippy::unnecessary_cast)] // the fields' types differ between targets
        let free = fs.f_bavail as u64 * fs.f_frsize as u64;
        free
    }

    /// On ext4 a recording's file has disk space reserved ahead of its writes, its size stays
    /// what was written, and a cut or a clean end gives the reservation back; elsewhere nothing
    /// is reserved. Checked in the temporary directory and beside the build, which may be
    /// different file systems.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_recording_on_ext4_reserves_ahead_and_gives_back_what_it_did_not_write() {
        let scratch = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
        for dir in [std::env::temp_dir(), scratch] {
            fs::create_dir_all(&dir).unwrap();
            let path = dir.join(format!("ringtrace-reserve-{}.rtrace", std::process::id()));
            let mut file = RecordingFile::new(File::create(&path).unwrap(), 0);
            let kind = fs_type(&dir);
            // ext2 and ext3 share ext4's magic number.
            assert_eq!(file.reserving, kind.starts_with("ext"), "{}: {kind}", dir.display());
            // Reserving needs room; a nearly full disk refuses, and then nothing is reserved.
            let room = free_bytes(&dir) > 64 << 20;
            let reserves = kind == "ext4" && room;
            let chunk = vec![7u8; 100 << 10];
            file.write_all(&chunk).unwrap();
            assert_eq!(fs::metadata(&path).unwrap().len(), 100 << 10, "{}", dir.display());
            if reserves {
                assert!(allocated(&path) >= RESERVE_AHEAD, "{}: {}", dir.display(), allocated(&path));
            } else if !kind.starts_with("ext") {
                assert!(allocated(&path) < 1 << 20, "{}: nothing reserved", dir.display());
            }
            // Past the first step: a second one is reserved.
            for _ in 0..90 {
                file.write_all(&chunk).unwrap();
            }
            assert_eq!(fs::metadata(&path).unwrap().len(), 91 * (100 << 10));
            if reserves {
                assert!(allocated(&path) >= 2 * RESERVE_AHEAD, "{}", allocated(&path));
            }
            file.truncate(10 << 10).unwrap();
            assert!(allocated(&path) < 1 << 20, "{}: the cut gives the reservation back", dir.display());
            file.write_all(&chunk).unwrap();
            drop(file);
            assert_eq!(fs::metadata(&path).unwrap().len(), 110 << 10);
            assert!(allocated(&path) < 1 << 20, "{}: the end gives it back", dir.display());
            let bytes = fs::read(&path).unwrap();
            assert!(bytes.iter().all(|b| *b == 7), "what was written reads back");
            fs::remove_file(&path).unwrap();
        }
    }

    /// A file that grew after its last write (another process appended to it: `ringtrace
    /// recover`) keeps what was appended: the end gives the reservation back only to a file of
    /// the size it wrote.
    #[test]
    #[cfg(target_os = "linux")]
    fn what_another_process_appended_is_kept_at_the_end() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("ringtrace-appended-{}.rtrace", std::process::id()));
        let mut file = RecordingFile::new(File::create(&path).unwrap(), 0);
        file.write_all(&[1u8; 4096]).unwrap();
        // Another handle, as another process has.
        let mut other = OpenOptions::new().append(true).open(&path).unwrap();
        Write::write_all(&mut other, &[2u8; 100]).unwrap();
        drop(file);
        let bytes = fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 4196, "the appended bytes are kept");
        assert!(bytes[4096..].iter().all(|b| *b == 2));
        fs::remove_file(&path).unwrap();
    }
}
