//! The drain thread: reads every ring, copies its records to the raw recording and, when sinks
//! are configured, hands them to the assembler thread (module `assembler`), which assembles
//! spans and hands batches to the sinks. The assembly itself (module `assemble`) is the same
//! code for the assembler, for readers of the recording (module `replay`) and for a drain
//! built with sinks of its own (tests).
//!
//! # Ordering across rings
//! Records of one thread arrive in order, but records of different threads do not: a span opened
//! on thread A and closed on thread B may show its close first. The drain reads the rings in
//! *passes*. If record X happened before record Y and the drain sees Y during pass `p`, X was
//! already in its ring when Y was read, so it is seen by the end of pass `p + 1`. Hence:
//! - a record naming a span whose open was not seen yet waits ("pending") and is applied when the
//!   open arrives; if it is still unmatched two passes later, the open was dropped and the record
//!   is counted as an orphan;
//! - a closed span is exported only after one more complete pass, so its events, updates and
//!   the records of its ancestors that happened before its close are all in.

mod assemble;
mod assembler;
pub(crate) mod replay;

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::Arc;

use ringtrace_core::hash::GOLDEN;
use ringtrace_core::raw::{self, RawRecord, RingPosition};
use ringtrace_core::record::Record;
use ringtrace_core::SpanId;

use crate::local::RingHandle;
use crate::messages::message;
use crate::shared::Shared;
use crate::sink::raw::RawRecording;
use crate::sink::Sink;
use crate::span_data::{ResourceInfo, SpanData, Value};
use crate::stats::Stats;
use assemble::{LiveSpans, Pending};
use assembler::{Assembler, RingRecords};

/// The longest the drain sleeps between passes while every ring stays nearly empty. A thread
/// whose ring reaches a quarter full wakes it at once (`DrainWaker`, looked at once per eighth
/// of a ring of records), so a burst does not wait for the end of the sleep; what the long sleep
/// saves is wake-ups of idle processes, which compete for the CPU with the application.
const MAX_IDLE: std::time::Duration = std::time::Duration::from_millis(50);

/// The fewest records of a ring faulted in ahead of its thread (64 KiB), once it writes at all.
#[cfg(all(target_os = "linux", not(ringtrace_loom)))]
const PREFAULT_MIN_RECORDS: usize = 1024;

/// A hasher for span ids and addresses: one mixing step (SplitMix64's finalizer), no more.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8 | u64::from(*b)).wrapping_mul(GOLDEN);
        }
    }
    /// Replaces the state rather than adding to it: a key hashed through this hasher must write
    /// one word (or bytes), else only its last word counts.
    fn write_u64(&mut self, v: u64) {
        // Mixed, not taken as it is: ids read from a file can be chosen to collide.
        self.0 = ringtrace_core::hash::mix64(v);
    }
}

/// A map keyed by span id.
pub(crate) type SpanMap<V> = HashMap<SpanId, V, BuildHasherDefault<IdHasher>>;

/// A request to the drain thread.
pub(crate) enum Command {
    /// Export every span closed so far, flush the sinks, answer with the totals.
    Flush(Sender<Stats>),
    /// Flush, export spans still open as unclosed, write the final counters, stop.
    Shutdown(Sender<Stats>),
}

/// Counters of rings whose threads have exited.
#[derive(Default)]
struct Retired {
    dropped_spans: u64,
    dropped_closes: u64,
    dropped_events: u64,
    dropped_updates: u64,
}

pub(crate) struct Drain {
    /// The raw recording: every ring's records, compact. First, so that it is dropped first
    /// (fields drop in order): its writer has closed the file before `shared`, which may hold
    /// the last reference to the ring directory's lock, lets `ringtrace recover` at the file.
    raw: Option<RawRecording>,
    shared: Arc<Shared>,
    /// Converts ticks to Unix time; re-anchored to the wall clock on every pass.
    clock: ringtrace_core::Clock,
    rings: Vec<RingHandle>,
    retired: Retired,
    threads: u64,
    live: LiveSpans,
    /// Scratch for `export_ready`, kept to avoid allocating per pass.
    ready: Vec<SpanId>,
    requests: Vec<Option<Arc<str>>>,
    pending: SpanMap<Vec<(u64, Pending)>>,
    closed: VecDeque<(u64, SpanId)>,
    pass: u64,
    /// The largest fraction of a ring's capacity the latest pass found filled.
    last_pass_fill: f64,
    /// After the last pass, a ring of an exited thread still waits to be taken back.
    retiring: bool,
    sinks: Vec<Box<dyn Sink>>,
    /// The assembly for the sinks, on a thread of its own: the drain thread of a collector with
    /// sinks hands it each pass's records, and has no `sinks` itself. `None` for a collector
    /// without sinks, and in the assemblies themselves (the assembler's and the replay's).
    assembler: Option<Assembler>,
    /// Whether `finish` prints the totals when something was lost (not for the assembler's
    /// drain: the collector's drain prints them, with the rings' losses).
    summary_at_finish: bool,
    resource: ResourceInfo,
    recorded_spans: u64,
    recorded_events: u64,
    events_over_limit: u64,
    unclosed_spans: u64,
    orphan_records: u64,
    sampled_out: u64,
    batch: Vec<SpanData>,
    /// Emptied field lists of exported spans and events, reused instead of allocating.
    field_lists: Vec<Vec<(&'static str, Value)>>,
    /// Emptied string values of exported spans and events, reused for new string fields. The
    /// drain allocates a pass's worth of strings and frees them together after the export: with
    /// `malloc` that pattern misses the per-thread caches and took a fifth of the drain's time.
    strings: Vec<String>,
    /// Scratch for putting a group's fields back in their callsite's order
    /// (`assemble::in_callsite_order`): their indices, then the fields with them.
    field_order: assemble::FieldOrder,
    sink_failures: u64,
    /// Spans a sink's export failed for (counted once per failing sink).
    sink_failed_spans: u64,
    /// Scratch for records decoded for the drain's own assembly (tests).
    decoded: Vec<Record>,
}

/// Decodes records of this process's rings (whole groups) into `out`, naming callsites and
/// fields through the process's registry; returns how many could not be (a callsite never
/// registered: metadata made by hand), which are skipped with their group.
pub(crate) fn decode_local<'a>(
    records: impl IntoIterator<Item = &'a RawRecord>,
    out: &mut Vec<Record>,
) -> u64 {
    let names = crate::callsites::read();
    let mut bad = 0;
    raw::decode_groups(records, &names, out, &mut |_, _| bad += 1);
    bad
}

impl RingHandle {
    /// Marks the `n` records read in this pass done with, for no recording (none keeps them)
    /// or none at all (`n == 0`). Records an earlier pass held back for the recording's writer
    /// stay until it has them: a quiet ring's, or an exited thread's, as much as a busy one's.
    fn skip_read(&mut self, n: usize) {
        let cons = &mut self.ring.cons;
        cons.consume(n);
        if self.unwritten.is_empty() {
            cons.release(cons.position());
        }
    }

    /// Whether the thread exited and everything it wrote is processed (read, and written or
    /// skipped): the ring can go back to the pool.
    fn reclaimable(&self) -> bool {
        let cons = &self.ring.cons;
        cons.writer_gone() && cons.is_empty() && cons.freed() == cons.position()
    }

    /// Frees the records held back for the batches up to `written`, which the recording's
    /// writer is done with.
    fn free_written(&mut self, written: u64) {
        while let Some(&(batch, position)) = self.unwritten.front() {
            if batch > written {
                break;
            }
            self.ring.cons.release(position);
            self.unwritten.pop_front();
        }
    }
}

impl Drain {
    pub(crate) fn new(shared: Arc<Shared>, sinks: Vec<Box<dyn Sink>>, raw: Option<RawRecording>) -> Self {
        let resource = ResourceInfo {
            identity: shared.config.identity.clone(),
            pid: std::process::id(),
            stats: Stats::default(),
        };
        Self {
            clock: shared.clock.clone(),
            shared,
            rings: Vec::new(),
            retired: Retired::default(),
            threads: 0,
            live: LiveSpans::default(),
            ready: Vec::new(),
            requests: Vec::new(),
            pending: SpanMap::default(),
            closed: VecDeque::new(),
            pass: 0,
            last_pass_fill: 0.0,
            retiring: false,
            sinks,
            raw,
            assembler: None,
            summary_at_finish: true,
            resource,
            recorded_spans: 0,
            recorded_events: 0,
            events_over_limit: 0,
            unclosed_spans: 0,
            orphan_records: 0,
            sampled_out: 0,
            batch: Vec::new(),
            field_lists: Vec::new(),
            strings: Vec::new(),
            field_order: Default::default(),
            sink_failures: 0,
            sink_failed_spans: 0,
            decoded: Vec::new(),
        }
    }

    /// A drain of a collector state of its own, with no rings and no thread: an assembly that
    /// reads only the records it is handed (the assembler's, a reader's).
    pub(crate) fn detached(config: crate::shared::Config, sinks: Vec<Box<dyn Sink>>) -> Self {
        let (mock, _) = quanta::Clock::mock();
        let clock = ringtrace_core::Clock::with_anchor(mock, 0);
        Self::new(Arc::new(Shared::new(config, clock)), sinks, None)
    }

    /// The thread's main loop.
    pub(crate) fn run(mut self, commands: Receiver<Command>) {
        crate::exit::on_drain_thread();
        let interval = self.shared.config.drain_interval;
        let waker = self.shared.waker.clone();
        waker.register_current();
        // The sleep follows how full the rings get: it doubles (up to `MAX_IDLE`) while every ring
        // stays under 1/16 full, drops back to `interval` as soon as one passes 1/8, and there is
        // no sleep at all past 1/8, so a steady load is read in chunks of 1/16 to 1/8 of a ring.
        // A lightly loaded process wakes its drain a few times a second instead of hundreds,
        // which matters when many processes share few cores; a ring reaching a quarter full, or
        // a command, wakes it early.
        let mut sleep = interval;
        let max_idle = MAX_IDLE.max(interval);
        let mut exited = waker.exited();
        loop {
            let busy = self.pass_once();
            self.export_ready(false);
            let fill = self.last_pass_fill;
            // Threads that exit leave their rings to this loop (they wake it only when the pool
            // runs low): while some ring waits to be taken back, the next pass comes after one
            // interval. A ring goes back to the pool once its last records are read and the
            // recording holds them: in the pass that reads them when the drain writes them itself,
            // in a later one while a writer thread has them.
            let exits = waker.exited();
            let retiring = std::mem::replace(&mut exited, exits) != exits || self.retiring;
            sleep = if retiring {
                interval
            } else if fill < 1.0 / 16.0 {
                (sleep * 2).min(max_idle)
            } else if fill > 1.0 / 8.0 {
                interval
            } else {
                sleep
            };
            match commands.try_recv() {
                Ok(Command::Flush(reply)) => {
                    self.flush();
                    let _ = reply.send(self.stats());
                }
                Ok(Command::Shutdown(reply)) => {
                    let stats = self.finish();
                    let _ = reply.send(stats);
                    return;
                }
                // Every sender is gone: the guard was leaked or dropped without shutdown.
                Err(TryRecvError::Disconnected) => {
                    self.finish();
                    return;
                }
                Err(TryRecvError::Empty) if !busy => {
                    // Senders unpark after sending, and an unpark that comes first makes the park
                    // return at once: no command waits for the end of the sleep. A thread that
                    // exited after `exited` was read, and saw no announced sleep, is seen here.
                    waker.parking();
                    if !waker.exits_since(exited) {
                        std::thread::park_timeout(sleep);
                    }
                    waker.unparked();
                }
                Err(TryRecvError::Empty) => {}
            }
        }
    }

    /// Reads every ring once. Returns whether some ring was busy enough to read again at once.
    fn pass_once(&mut self) -> bool {
        self.clock.reanchor();
        let anchor = self.clock.anchor();
        // Batches the recording's writer is done with: the records they hold can be freed.
        let written = self.raw.as_ref().map(RawRecording::written);
        let mut handed = self.raw.as_ref().map_or(0, RawRecording::handed);
        if let Some(raw) = &mut self.raw {
            raw.begin_pass(anchor);
        }
        let assemble = !self.sinks.is_empty();
        let mut for_sinks: Option<Vec<RingRecords>> = self.assembler.as_ref().map(|_| Vec::new());
        self.shared.take_new_rings(&mut self.rings);
        let mut rings = std::mem::take(&mut self.rings);
        let mut decoded = std::mem::take(&mut self.decoded);
        let mut busy = false;
        let mut fill: f64 = 0.0;
        for ring in &mut rings {
            if let Some(written) = written {
                ring.free_written(written);
            }
            let cons = &mut ring.ring.cons;
            let (thread_id, thread_name) = (ring.thread_id, &ring.thread_name);
            let at = RingPosition { ring: ring.ring.number, position: cons.position() };
            let mut batch = None;
            let n = cons.read_with(|a, b| {
                if let Some(raw) = &mut self.raw {
                    batch = raw.ring(thread_id, thread_name, at, a, b);
                    handed = raw.handed();
                }
                if assemble {
                    decoded.clear();
                    self.orphan_records += decode_local(a.iter().chain(b), &mut decoded);
                    self.apply_all(assemble::Records { a: &decoded, b: &[] }, thread_id, thread_name);
                }
                if let (Some(rings), false) = (&mut for_sinks, a.is_empty() && b.is_empty()) {
                    let records = a.iter().chain(b).copied().collect();
                    rings.push(RingRecords { anchor, thread_id, thread_name: thread_name.clone(), records });
                }
                a.len() + b.len()
            });
            // Faults in the pages the ring's thread writes next, here rather than on its own
            // thread: four times what it wrote since the last pass, so that it stays ahead
            // of the thread until the next one (which comes before an eighth of a ring more).
            #[cfg(all(target_os = "linux", not(ringtrace_loom)))]
            if n > 0 {
                cons.prefault(n.saturating_mul(4).max(PREFAULT_MIN_RECORDS));
            }
            busy |= n > cons.capacity() / 8;
            fill = fill.max(n as f64 / cons.capacity() as f64);
            match batch {
                // Freed once the recording holds them: a process killed before that leaves
                // them in the ring (a file) for recovery.
                Some(batch) => {
                    cons.consume(n);
                    ring.unwritten.push_back((batch, cons.position()));
                    // A writer held up (a disk throttling writes) would have the application
                    // drop records: past half a ring held back, records already handed to the
                    // writer are freed, and a kill meanwhile loses those it had not written.
                    if cons.position() - cons.freed() > cons.capacity() as u64 / 2 {
                        // Every batch up to `handed` is with the writer, written or not; the
                        // one being filled is not.
                        ring.free_written(handed);
                    }
                }
                None => ring.skip_read(n),
            }
        }
        self.rings = rings;
        self.decoded = decoded;
        if let (Some(assembler), Some(rings)) = (&mut self.assembler, for_sinks) {
            assembler.pass(rings);
        }
        if self.raw.as_ref().is_some_and(RawRecording::counters_due) {
            let stats = self.stats();
            if let Some(raw) = &mut self.raw {
                raw.counters_changed(stats);
            }
        }
        if let Some(raw) = &mut self.raw {
            raw.end_pass();
        }
        // The pass's frames are usually written by now (on this thread, see `sink::file::Pipe`):
        // the rings of threads that exited go back to the pool in the pass that reads their last
        // records, not a pass later.
        self.retiring = self.reclaim_rings(self.raw.as_ref().map(RawRecording::written));
        self.last_pass_fill = fill;
        self.pass += 1;
        self.expire_pending();
        busy
    }

    /// Frees the records of the batches the recording's writer is done with (up to `written`,
    /// when recording), and pools the rings of exited threads whose records are all read and
    /// written. Returns whether the ring of some exited thread still waits.
    fn reclaim_rings(&mut self, written: Option<u64>) -> bool {
        let mut rings = std::mem::take(&mut self.rings);
        let mut waiting = false;
        let mut i = 0;
        while i < rings.len() {
            if let Some(written) = written {
                rings[i].free_written(written);
            }
            if rings[i].reclaimable() {
                let ring = rings.swap_remove(i);
                self.retire(ring);
                continue;
            }
            waiting |= rings[i].ring.cons.writer_gone();
            i += 1;
        }
        self.rings = rings;
        waiting
    }

    /// Takes the counters of a ring whose thread has exited and which is empty, and keeps its
    /// buffer for the next thread (see `Shared::pool_ring`).
    fn retire(&mut self, ring: RingHandle) {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &ring.counters;
        self.retired.dropped_spans += c.dropped_spans.load(Relaxed);
        self.retired.dropped_closes += c.dropped_closes.load(Relaxed);
        self.retired.dropped_events += c.dropped_events.load(Relaxed);
        self.retired.dropped_updates += c.dropped_updates.load(Relaxed);
        self.threads += 1;
        self.shared.pool_ring(ring.ring);
    }

    fn expire_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let pass = self.pass;
        let mut expired = 0;
        self.pending.retain(|_, ops| {
            let before = ops.len();
            ops.retain(|(seen, _)| seen + 2 >= pass);
            expired += (before - ops.len()) as u64;
            !ops.is_empty()
        });
        self.orphan_records += expired;
    }

    /// Exports closed spans: those closed before the last complete pass, or all when `all`.
    fn export_ready(&mut self, all: bool) {
        let pass = self.pass;
        let mut ready = std::mem::take(&mut self.ready);
        let mut requests = std::mem::take(&mut self.requests);
        ready.clear();
        requests.clear();
        while let Some(&(closed_at, id)) = self.closed.front() {
            if !all && closed_at + 1 >= pass {
                break;
            }
            self.closed.pop_front();
            ready.push(id);
        }
        self.move_to_batch(&ready, &mut requests, None);
        self.ready = ready;
        self.requests = requests;
        self.recorded_spans += self.batch.len() as u64;
        self.send_batch();
    }

    /// Moves spans `ids` from the live table into the batch, with their request ids resolved
    /// (while their parents are still in the table); discards those of unsampled traces. With
    /// `unclosed_at`, the spans are still open and end at that time.
    fn move_to_batch(
        &mut self,
        ids: &[SpanId],
        requests: &mut Vec<Option<Arc<str>>>,
        unclosed_at: Option<u64>,
    ) {
        requests.clear();
        // Resolved first: a span inherits from ancestors exported in the same batch.
        let resolve = self.live.any_request();
        if resolve {
            assemble::resolve_requests(&self.live, ids, requests);
        }
        self.batch.reserve(ids.len());
        for (k, id) in ids.iter().enumerate() {
            let Some(data) = self.live.remove_into(id, &mut self.batch) else { continue };
            if !data.sampled {
                self.batch.pop();
                self.sampled_out += 1;
                continue;
            }
            if resolve {
                data.request_id = requests[k].take();
            }
            if let Some(now) = unclosed_at {
                data.unclosed = true;
                data.end_unix_ns = now.max(data.start_unix_ns);
            }
            self.recorded_events += data.events.len() as u64;
        }
        requests.clear();
    }

    fn send_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        self.resource.stats = self.stats();
        let size = self.shared.config.batch_size.max(1);
        for chunk in self.batch.chunks(size) {
            for sink in &mut self.sinks {
                if let Err(e) = sink.export(chunk, &self.resource) {
                    self.sink_failures += 1;
                    self.sink_failed_spans += chunk.len() as u64;
                    if self.sink_failures == 1 {
                        message!(
                            self.shared.config.quiet,
                            "ringtrace: sink {} failed: {e} (further failures are counted)",
                            sink.name()
                        );
                    }
                }
            }
        }
        self.recycle_batch();
    }

    /// Empties the batch, keeping the field lists and strings of its spans and events for new
    /// ones.
    fn recycle_batch(&mut self) {
        // Lists kept at most: as many spans with fields as the rings can hold (each takes at least
        // two records: open, which may carry one field, and close), so that a burst read in one
        // pass finds its lists here.
        let keep = (self.shared.config.ring_capacity / 2 * self.rings.len().max(1)).clamp(1024, 1 << 16);
        let mut pools = Pools { lists: &mut self.field_lists, strings: &mut self.strings, keep_lists: keep };
        for span in &mut self.batch {
            pools.recycle(&mut span.fields);
            for event in &mut span.events {
                pools.recycle(&mut event.fields);
            }
        }
        self.batch.clear();
    }

    fn flush(&mut self) {
        self.pass_once();
        self.pass_once();
        self.export_ready(true);
        if let Some(assembler) = &mut self.assembler {
            if assembler.flush(crate::DEFAULT_FLUSH_TIMEOUT).is_none() {
                message!(self.shared.config.quiet, "ringtrace: flush: the sinks did not finish in time");
            }
        }
        self.flush_sinks();
    }

    fn flush_sinks(&mut self) {
        self.flush_sinks_ending(None);
    }

    /// Flushes the sinks; `end_ticks`: the collector shuts down at these ticks. At shutdown,
    /// once the recording holds every record, the ring files go.
    fn flush_sinks_ending(&mut self, end_ticks: Option<u64>) {
        self.resource.stats = self.stats();
        if let Some(raw) = &mut self.raw {
            let end = end_ticks.map(|ticks| (ticks, self.clock.anchor()));
            match raw.flush(&self.resource.stats, end) {
                Err(e) => message!(
                    self.shared.config.quiet,
                    "ringtrace: flushing the recording {} failed: {e}",
                    raw.path().display()
                ),
                #[cfg(all(unix, not(ringtrace_loom)))]
                Ok(()) if end.is_some() && raw.lost_spans() == 0 => {
                    if let Some(dir) = &self.shared.ring_dir {
                        if let Err(e) = dir.remove() {
                            message!(
                                self.shared.config.quiet,
                                "ringtrace: removing the ring files in {} failed: {e}",
                                dir.path().display()
                            );
                        }
                    }
                }
                Ok(()) => {}
            }
        }
        for sink in &mut self.sinks {
            if let Err(e) = sink.flush(&self.resource) {
                message!(self.shared.config.quiet, "ringtrace: flushing sink {} failed: {e}", sink.name());
            }
        }
    }

    fn finish(&mut self) -> Stats {
        self.finish_at(None)
    }

    /// Shuts down: exports every span, those still open as unclosed at `now_ticks` (now when
    /// `None`), writes the final counters and stops the sinks.
    fn finish_at(&mut self, now_ticks: Option<u64>) -> Stats {
        self.pass_once();
        self.pass_once();
        self.export_ready(true);
        self.clock.reanchor();
        let now_ticks = now_ticks.unwrap_or_else(|| self.clock.raw());
        if self.assembler.is_some() {
            // The recording is written and synced first; then the assembler finishes and stops
            // the sinks (one that delivers over a network may wait, bounded), and the recording
            // gets the final totals.
            self.flush_sinks();
        }
        let anchor = self.clock.anchor();
        if let Some(assembler) = &mut self.assembler {
            if assembler.shutdown(now_ticks, anchor, crate::DEFAULT_FLUSH_TIMEOUT * 2).is_none() {
                message!(self.shared.config.quiet, "ringtrace: shutdown: the sinks did not finish in time");
            }
            self.flush_sinks_ending(Some(now_ticks));
            return self.summary();
        }
        let now = self.clock.unix_nanos(now_ticks);
        let mut unclosed: Vec<SpanId> = self.live.ids().collect();
        unclosed.sort_unstable();
        let before = self.batch.len();
        self.move_to_batch(&unclosed, &mut Vec::new(), Some(now));
        self.unclosed_spans += (self.batch.len() - before) as u64;
        self.recorded_spans += self.batch.len() as u64;
        self.send_batch();
        self.orphan_records += self.pending.values().map(|v| v.len() as u64).sum::<u64>();
        self.pending.clear();
        self.flush_sinks();
        // The recording is written and synced; now a sink that delivers over a network may wait
        // (bounded) and stop, and what it could not deliver reaches the final counters.
        for sink in &mut self.sinks {
            sink.stop();
        }
        self.flush_sinks_ending(Some(now_ticks));
        self.summary()
    }

    /// The totals, printed when anything was lost (by the collector's drain).
    fn summary(&self) -> Stats {
        let stats = self.stats();
        if self.summary_at_finish && stats.lost_anything() {
            message!(
                self.shared.config.quiet,
                "ringtrace: {} ({}/{})",
                stats,
                self.resource.identity.node,
                self.resource.identity.daemon
            );
        }
        stats
    }

    /// Totals so far.
    pub(crate) fn stats(&self) -> Stats {
        use std::sync::atomic::Ordering::Relaxed;
        let mut s = Stats {
            recorded_spans: self.recorded_spans,
            recorded_events: self.recorded_events,
            events_over_limit: self.events_over_limit,
            sink_failed_spans: self.sink_failed_spans,
            dropped_spans: self.retired.dropped_spans + self.shared.late_spans.load(Relaxed),
            dropped_closes: self.retired.dropped_closes + self.shared.late_closes.load(Relaxed),
            dropped_events: self.retired.dropped_events + self.shared.late_events.load(Relaxed),
            dropped_updates: self.retired.dropped_updates,
            unclosed_spans: self.unclosed_spans,
            orphan_records: self.orphan_records,
            sampled_out: self.sampled_out,
            propagation_malformed: ringtrace_core::propagation::malformed_count(),
            threads: self.threads + self.rings.len() as u64,
            rings_in_use: self.rings.len() as u64,
            ..Stats::default()
        };
        if let Some(assembler) = &self.assembler {
            // What the assembly decides comes from the assembler, with its sinks' losses.
            let a = assembler.latest();
            s.recorded_spans = a.recorded_spans;
            s.recorded_events = a.recorded_events;
            s.events_over_limit = a.events_over_limit;
            s.unclosed_spans = a.unclosed_spans;
            s.orphan_records = a.orphan_records;
            s.sampled_out = a.sampled_out;
            s.sink_failed_spans = a.sink_failed_spans;
            s.sink_dropped_spans = a.sink_dropped_spans + assembler.dropped_spans;
            s.sink_rejected_spans = a.sink_rejected_spans;
            s.sink_unconfirmed_spans = a.sink_unconfirmed_spans;
            s.sink_unsent_spans = a.sink_unsent_spans;
        } else if let Some(raw) = &self.raw {
            if self.sinks.is_empty() {
                s.recorded_spans = raw.spans;
                s.recorded_events = raw.events;
                s.sampled_out = raw.sampled_out;
            }
        }
        if let Some(raw) = &self.raw {
            s.sink_failed_spans += raw.lost_spans();
        }
        let mut losses = crate::sink::SinkLosses::default();
        for sink in &self.sinks {
            losses.add(sink.losses());
        }
        s.sink_failed_spans += losses.failed;
        s.sink_dropped_spans += losses.queue_full;
        s.sink_rejected_spans += losses.rejected;
        s.sink_unconfirmed_spans += losses.unconfirmed;
        s.sink_unsent_spans += losses.unsent;
        for r in &self.rings {
            s.dropped_spans += r.counters.dropped_spans.load(Relaxed);
            s.dropped_closes += r.counters.dropped_closes.load(Relaxed);
            s.dropped_events += r.counters.dropped_events.load(Relaxed);
            s.dropped_updates += r.counters.dropped_updates.load(Relaxed);
        }
        s
    }
}

/// The drain thread's name.
pub(crate) const THREAD_NAME: &str = "ringtrace-drain";

/// Starts the drain thread.
pub(crate) fn spawn(
    shared: Arc<Shared>,
    sinks: Vec<Box<dyn Sink>>,
    raw: Option<RawRecording>,
    commands: Receiver<Command>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let mut drain = Drain::new(shared.clone(), Vec::new(), raw);
    if !sinks.is_empty() {
        drain.assembler = Some(Assembler::spawn(&shared, sinks)?);
    }
    std::thread::Builder::new().name(THREAD_NAME.into()).spawn(move || drain.run(commands))
}

/// Where [`Drain::recycle_batch`] keeps emptied field lists and strings.
struct Pools<'a> {
    lists: &'a mut Vec<Vec<(&'static str, Value)>>,
    strings: &'a mut Vec<String>,
    keep_lists: usize,
}

impl Pools<'_> {
    /// Longer lists are freed rather than kept.
    const LIST_CAPACITY: usize = 8;
    /// Longer strings are freed rather than kept.
    const STRING_CAPACITY: usize = 256;
    /// Strings kept at most (at most 1 MiB with `STRING_CAPACITY`).
    const STRINGS: usize = 4096;

    fn recycle(&mut self, fields: &mut Vec<(&'static str, Value)>) {
        for (_, value) in fields.drain(..) {
            if let Value::Str(mut s) = value {
                if s.capacity() <= Self::STRING_CAPACITY && self.strings.len() < Self::STRINGS {
                    s.clear();
                    self.strings.push(s);
                }
            }
        }
        if fields.capacity() != 0
            && fields.capacity() <= Self::LIST_CAPACITY
            && self.lists.len() < self.keep_lists
        {
            self.lists.push(std::mem::take(fields));
        }
    }
}

#[cfg(test)]
mod tests {
    //! The drain fed hand-built records, one pass at a time, with a mock clock: what it exports,
    //! when, and what it counts.

    use std::sync::{Arc, Mutex};

    use ringtrace_core::record::{FieldValue, InlineField, InlineText, Record, CHUNK};
    use ringtrace_core::{SpanId, TraceId};
    use tracing_core::Level;

    use super::assemble::Records;
    use super::replay::Keep;
    use super::Drain;
    use crate::shared::fixture::{self, ANCHOR_NS};
    use crate::span_data::{SpanData, Value};

    /// Events a span keeps in these tests.
    const EVENT_LIMIT: usize = 3;

    fixture::test_callsite!(
        SpanCallsite,
        SPAN = "work",
        "drain::tests",
        INFO,
        SPAN,
        ["n", "s", "request.id", "b", "t", "l"]
    );
    fixture::test_callsite!(EventCallsite, EVENT = "tick", "drain::tests", INFO, EVENT, ["message", "n"]);
    fixture::test_callsite!(ErrorCallsite, ERROR = "failed", "drain::tests", ERROR, EVENT, ["message"]);

    /// Records handed to the recording's writer stay in the ring (a file a killed process
    /// leaves behind) until the writer has them, through passes that read nothing more from it;
    /// then they are freed, and a ring whose thread exited can go back to the pool.
    #[test]
    fn records_held_for_the_writer_stay_through_a_pass_that_reads_nothing() {
        use crate::local::RingHandle;
        use crate::stats::ThreadCounters;
        use ringtrace_core::raw::RawRecord;
        let (mut prod, cons) = crate::ring::ring::<RawRecord>(16);
        let write = prod.write_index();
        for k in 0..4 {
            // SAFETY: a fresh ring of 16 slots: the first 4 are vacant.
            unsafe { prod.write_at(write + k, RawRecord([0; ringtrace_core::raw::RECORD_SIZE])) };
        }
        // SAFETY: slots `write..write + 4` were just written.
        unsafe { prod.publish(write + 4) };
        let mut ring = RingHandle {
            ring: crate::shared::PooledRing {
                cons,
                number: 0,
                #[cfg(all(unix, not(ringtrace_loom)))]
                file: None,
            },
            counters: Arc::new(ThreadCounters::default()),
            thread_id: 1,
            thread_name: "t".into(),
            unwritten: Default::default(),
        };
        // A pass reads the four records and hands them to the writer in batch 1.
        assert_eq!(ring.ring.cons.read_with(|a, b| a.len() + b.len()), 4);
        ring.ring.cons.consume(4);
        ring.unwritten.push_back((1, ring.ring.cons.position()));
        drop(prod);
        // The next passes find nothing new while the writer has not written batch 1.
        for _ in 0..2 {
            assert_eq!(ring.ring.cons.read_with(|a, b| a.len() + b.len()), 0);
            ring.skip_read(0);
            assert_eq!(ring.ring.cons.freed(), 0, "freed before the recording holds them");
            assert!(!ring.reclaimable());
        }
        ring.free_written(1);
        assert_eq!(ring.ring.cons.freed(), 4);
        assert!(ring.reclaimable(), "the thread exited and its records are in the recording");
    }

    /// A sink that keeps every span it is handed.
    /// A drain with no rings, whose clock reads `ANCHOR_NS` at tick 0, and what its sink kept.
    fn drain() -> (Drain, Arc<Mutex<Vec<SpanData>>>) {
        let shared = Arc::new(fixture::shared(64, EVENT_LIMIT));
        let kept = Arc::default();
        (Drain::new(shared, vec![Box::new(Keep(Arc::clone(&kept)))], None), kept)
    }

    /// Applies `records`, as read from one ring of thread 7 in the current pass.
    fn read(drain: &mut Drain, records: &[Record]) {
        drain.apply_all(Records { a: records, b: &[] }, 7, &Arc::from("t7"));
    }

    /// Ends the current pass and exports what is ready, as the drain's loop does.
    fn pass(drain: &mut Drain) {
        drain.pass_once();
        drain.export_ready(false);
    }

    fn id(n: u64) -> SpanId {
        SpanId::new(n).unwrap()
    }

    const TRACE: TraceId = match TraceId::new(0xabc) {
        Some(t) => t,
        None => panic!("a zero trace id"),
    };

    fn open(span: u64, parent: Option<u64>, ticks: u64) -> Record {
        Record::Open {
            span: id(span),
            parent: parent.map(id),
            trace: TRACE,
            meta: &SPAN,
            ticks,
            sampled: true,
            first: InlineField::NONE,
        }
    }

    fn close(span: u64, ticks: u64) -> Record {
        Record::Close { span: id(span), ticks }
    }

    fn event(span: u64, ticks: u64, message: &str) -> Record {
        Record::Event {
            span: id(span),
            meta: &EVENT,
            ticks,
            first: InlineText::new(0, message.as_bytes()).unwrap(),
        }
    }

    fn error(span: u64, ticks: u64) -> Record {
        Record::Event { span: id(span), meta: &ERROR, ticks, first: InlineText::NONE }
    }

    fn field(name: &'static str, s: &str) -> Record {
        Record::Field { name, value: FieldValue::inline(s.as_bytes()).unwrap() }
    }

    fn str_value(s: &str) -> Value {
        Value::Str(s.into())
    }

    /// The exported spans' ids, in export order.
    fn exported(kept: &Mutex<Vec<SpanData>>) -> Vec<u64> {
        kept.lock().unwrap().iter().map(|s| s.span_id.get()).collect()
    }

    #[test]
    fn a_closed_span_is_exported_after_one_more_complete_pass() {
        let (mut drain, kept) = drain();
        read(&mut drain, &[open(1, None, 10), event(1, 15, "hi"), close(1, 20)]);
        pass(&mut drain);
        assert_eq!(exported(&kept), [0u64; 0], "closed during this pass: records of other rings may follow");
        pass(&mut drain);
        assert_eq!(exported(&kept), [1]);
        let kept = kept.lock().unwrap();
        let span = &kept[0];
        assert_eq!((span.start_unix_ns, span.end_unix_ns), (ANCHOR_NS + 10, ANCHOR_NS + 20));
        assert_eq!((span.thread_id, &*span.thread_name, span.unclosed), (7, "t7", false));
        assert_eq!(span.events.len(), 1);
        assert_eq!(span.events[0].unix_ns, ANCHOR_NS + 15);
        assert_eq!(span.events[0].fields, [("message", str_value("hi"))]);
        assert_eq!(drain.stats().recorded_spans, 1);
        assert_eq!(drain.stats().recorded_events, 1);
    }

    #[test]
    fn records_that_arrive_before_their_open_wait_for_it() {
        let (mut drain, kept) = drain();
        // Thread B's update, event and close are read before thread A's open.
        read(
            &mut drain,
            &[Record::Update { span: id(1) }, field("s", "later"), event(1, 30, "on b"), close(1, 40)],
        );
        pass(&mut drain);
        read(&mut drain, &[open(1, None, 10), field("s", "first")]);
        pass(&mut drain);
        pass(&mut drain);
        assert_eq!(exported(&kept), [1]);
        let kept = kept.lock().unwrap();
        assert_eq!(kept[0].fields, [("s", str_value("first")), ("s", str_value("later"))]);
        assert_eq!(kept[0].events.len(), 1);
        assert_eq!((kept[0].start_unix_ns, kept[0].end_unix_ns), (ANCHOR_NS + 10, ANCHOR_NS + 40));
        assert_eq!(drain.stats().orphan_records, 0);
        assert_eq!(drain.stats().unclosed_spans, 0);
    }

    #[test]
    fn a_record_whose_open_never_arrives_is_an_orphan_two_passes_later() {
        let (mut drain, kept) = drain();
        read(&mut drain, &[event(9, 5, "lost"), close(9, 6)]);
        pass(&mut drain);
        pass(&mut drain);
        assert_eq!(drain.stats().orphan_records, 0, "the open may still come in the next pass");
        pass(&mut drain);
        assert_eq!(drain.stats().orphan_records, 2, "both records, once");
        // An open that comes after all is a span of its own, never closed.
        read(&mut drain, &[open(9, None, 1)]);
        pass(&mut drain);
        pass(&mut drain);
        assert_eq!(exported(&kept), [0u64; 0]);
        let stats = drain.finish();
        assert_eq!((stats.orphan_records, stats.unclosed_spans, stats.recorded_spans), (2, 1, 1));
        let kept = kept.lock().unwrap();
        assert!(kept[0].unclosed && kept[0].events.is_empty());
        assert!(kept[0].end_unix_ns >= kept[0].start_unix_ns);
    }

    #[test]
    fn a_late_event_joins_its_span_until_the_span_is_exported() {
        let (mut drain, kept) = drain();
        read(&mut drain, &[open(1, None, 10), close(1, 20)]);
        pass(&mut drain);
        // Another thread's event, from before the close, read one pass later.
        read(&mut drain, &[event(1, 18, "late")]);
        pass(&mut drain);
        assert_eq!(exported(&kept), [1]);
        assert_eq!(kept.lock().unwrap()[0].events.len(), 1);
        // Once the span is gone, an event for it waits, then is an orphan.
        read(&mut drain, &[event(1, 19, "too late")]);
        pass(&mut drain);
        pass(&mut drain);
        pass(&mut drain);
        let stats = drain.stats();
        assert_eq!((stats.orphan_records, stats.recorded_events), (1, 1), "{stats}");
    }

    #[test]
    fn shutdown_exports_open_spans_as_unclosed_and_counts_pending_records() {
        let (mut drain, kept) = drain();
        read(&mut drain, &[open(1, None, 10), open(2, Some(1), 11), close(2, 12), event(3, 13, "no span")]);
        let stats = drain.finish();
        assert_eq!(exported(&kept), [2, 1], "closed spans first, then the open ones");
        let kept = kept.lock().unwrap();
        assert!(!kept[0].unclosed);
        assert!(kept[1].unclosed);
        assert_eq!(kept[0].parent_span_id, Some(id(1)));
        assert_eq!((stats.recorded_spans, stats.unclosed_spans, stats.orphan_records), (2, 1, 1), "{stats}");
        assert!(drain.pending.is_empty());
    }

    #[test]
    fn a_child_exported_with_its_parent_inherits_the_parents_request_id() {
        let (mut drain, kept) = drain();
        let remote = SpanId::new(0x77).unwrap();
        let remote_trace = TraceId::new(0x99).unwrap();
        read(
            &mut drain,
            &[
                open(1, None, 1),
                field("request.id", "req-1"),
                open(2, Some(1), 2),
                open(3, None, 3),
                Record::RemoteParent { span: id(3), trace: remote_trace, parent: remote, sampled: true },
                field("request.id", "req-remote"),
                open(4, Some(3), 4),
                open(5, None, 5),
            ],
        );
        for span in [2, 1, 4, 3, 5] {
            read(&mut drain, &[close(span, 9)]);
        }
        pass(&mut drain);
        pass(&mut drain);
        let kept = kept.lock().unwrap();
        let span = |n: u64| kept.iter().find(|s| s.span_id == id(n)).unwrap();
        let request = |n: u64| span(n).request_id.as_deref().map(str::to_owned);
        assert_eq!(request(1).as_deref(), Some("req-1"));
        assert_eq!(request(2).as_deref(), Some("req-1"), "inherited from its parent");
        assert_eq!(request(3).as_deref(), Some("req-remote"));
        assert_eq!(request(4).as_deref(), Some("req-remote"));
        assert_eq!(request(5), None);
        let three = span(3);
        assert_eq!(
            (three.trace_id, three.parent_span_id, three.parent_is_remote),
            (remote_trace, Some(remote), true)
        );
    }

    #[test]
    fn fields_of_every_record_kind_come_back_in_callsite_order() {
        // The records of a span whose fields `n` (a number), `s` (a short string), `b` (a
        // number), `t` (a short string) and `l` (a long string) were visited in that order (their
        // callsite's), as the writer lays them out: `n` in the header, the short strings sharing
        // one record and the numbers another, wherever they came between; `l` in a field record
        // and its chunks.
        let (mut drain, kept) = drain();
        let long = "x".repeat(CHUNK + 5);
        let mut numbers = [InlineField::NONE; ringtrace_core::record::NUMBERS];
        numbers[0] = InlineField::new(3, FieldValue::Bool(true)).unwrap();
        let mut texts = [InlineText::NONE; ringtrace_core::record::TEXTS];
        texts[0] = InlineText::new(1, b"short").unwrap();
        texts[1] = InlineText::new(4, b"other").unwrap();
        let mut header = open(1, None, 1);
        if let Record::Open { first, .. } = &mut header {
            *first = InlineField::new(0, FieldValue::I64(-7)).unwrap();
        }
        let mut records = vec![
            header,
            Record::Texts(texts),
            Record::Numbers(numbers),
            Record::Field { name: "l", value: FieldValue::Str { len: long.len() as u32 } },
        ];
        records.extend(long.as_bytes().chunks(CHUNK).map(Record::chunk));
        records.push(close(1, 2));
        read(&mut drain, &records);
        let stats = drain.finish();
        assert_eq!(stats.recorded_spans, 1);
        assert_eq!(
            kept.lock().unwrap()[0].fields,
            [
                ("n", Value::I64(-7)),
                ("s", str_value("short")),
                ("b", Value::Bool(true)),
                ("t", str_value("other")),
                ("l", Value::Str(long)),
            ]
        );
    }

    #[test]
    fn fields_the_callsite_does_not_list_come_after_those_it_does() {
        // A field record whose name the callsite does not list has no index: it goes after the
        // fields that have one, which come in callsite order.
        let (mut drain, kept) = drain();
        let mut numbers = [InlineField::NONE; ringtrace_core::record::NUMBERS];
        numbers[0] = InlineField::new(0, FieldValue::U64(1)).unwrap();
        let mut texts = [InlineText::NONE; ringtrace_core::record::TEXTS];
        texts[0] = InlineText::new(1, b"s").unwrap();
        let mut later = [InlineField::NONE; ringtrace_core::record::NUMBERS];
        later[0] = InlineField::new(3, FieldValue::U64(3)).unwrap();
        let records = [
            open(1, None, 1),
            Record::Field { name: "unlisted", value: FieldValue::U64(9) },
            Record::Numbers(numbers),
            Record::Texts(texts),
            Record::Numbers(later),
            close(1, 2),
        ];
        read(&mut drain, &records);
        drain.finish();
        assert_eq!(
            kept.lock().unwrap()[0].fields,
            [("n", Value::U64(1)), ("s", str_value("s")), ("b", Value::U64(3)), ("unlisted", Value::U64(9))]
        );
    }

    #[test]
    fn events_over_the_limit_are_counted_and_a_first_error_is_kept() {
        let (mut drain, kept) = drain();
        let mut records = vec![open(1, None, 1)];
        records.extend((0..5).map(|i| event(1, 2 + i, "tick")));
        records.extend([error(1, 8), error(1, 9), close(1, 10)]);
        read(&mut drain, &records);
        let stats = drain.finish();
        let kept = kept.lock().unwrap();
        let levels: Vec<_> = kept[0].events.iter().map(|e| *e.meta.level()).collect();
        assert_eq!(levels, [Level::INFO, Level::INFO, Level::INFO, Level::ERROR]);
        assert_eq!(kept[0].dropped_events, 3);
        assert_eq!((stats.recorded_events, stats.events_over_limit), (EVENT_LIMIT as u64 + 1, 3), "{stats}");
    }

    #[test]
    fn spans_of_unsampled_traces_are_counted_not_exported() {
        let (mut drain, kept) = drain();
        let mut unsampled = open(1, None, 1);
        if let Record::Open { sampled, .. } = &mut unsampled {
            *sampled = false;
        }
        read(&mut drain, &[unsampled, close(1, 2)]);
        read(&mut drain, &[open(2, None, 3), close(2, 4)]);
        let stats = drain.finish();
        assert_eq!(exported(&kept), [2]);
        assert_eq!((stats.recorded_spans, stats.sampled_out), (1, 1), "{stats}");
    }
}
