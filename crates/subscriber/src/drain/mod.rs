//! The drain thread: reads every ring, assembles spans, hands batches to the sinks.
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

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::Arc;

use ringtrace_core::hash::GOLDEN;
use ringtrace_core::SpanId;

use crate::local::RingHandle;
use crate::messages::message;
use crate::shared::Shared;
use crate::sink::Sink;
use crate::span_data::{ResourceInfo, SpanData, Value};
use crate::stats::Stats;
use assemble::{LiveSpans, Pending};

/// The longest the drain sleeps between passes while every ring stays nearly empty. A thread
/// whose ring reaches a quarter full wakes it at once (`DrainWaker`, looked at once per eighth
/// of a ring of records), so a burst does not wait for the end of the sleep; what the long sleep
/// saves is wake-ups of idle processes, which compete for the CPU with the application.
const MAX_IDLE: std::time::Duration = std::time::Duration::from_millis(50);

/// Span ids are already uniformly random 64-bit values: hashing them again is wasted work.
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
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
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
    sinks: Vec<Box<dyn Sink>>,
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
    sink_failures: u64,
    /// Spans a sink's export failed for (counted once per failing sink).
    sink_failed_spans: u64,
}

impl Drain {
    pub(crate) fn new(shared: Arc<Shared>, sinks: Vec<Box<dyn Sink>>) -> Self {
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
            sinks,
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
            sink_failures: 0,
            sink_failed_spans: 0,
        }
    }

    /// The thread's main loop.
    pub(crate) fn run(mut self, commands: Receiver<Command>) {
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
        loop {
            let busy = self.pass_once();
            self.export_ready(false);
            let fill = self.last_pass_fill;
            sleep = if fill < 1.0 / 16.0 {
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
                    // return at once: no command waits for the end of the sleep.
                    waker.parking();
                    std::thread::park_timeout(sleep);
                    waker.unparked();
                }
                Err(TryRecvError::Empty) => {}
            }
        }
    }

    /// Reads every ring once. Returns whether some ring was busy enough to read again at once.
    fn pass_once(&mut self) -> bool {
        self.clock.reanchor();
        self.shared.take_new_rings(&mut self.rings);
        let mut rings = std::mem::take(&mut self.rings);
        let mut busy = false;
        let mut fill: f64 = 0.0;
        let mut i = 0;
        while i < rings.len() {
            let ring = &mut rings[i];
            // Read before the records: once the writer is gone, nothing more arrives.
            let writer_gone = ring.cons.writer_gone();
            let (thread_id, thread_name) = (ring.thread_id, &ring.thread_name);
            let n = ring.cons.read_with(|a, b| {
                self.apply_all(assemble::Records { a, b }, thread_id, thread_name);
                a.len() + b.len()
            });
            busy |= n > ring.cons.capacity() / 8;
            fill = fill.max(n as f64 / ring.cons.capacity() as f64);
            ring.cons.skip(n);
            if writer_gone && ring.cons.is_empty() {
                // The thread exited and everything it wrote is processed: reclaim the ring.
                let ring = rings.swap_remove(i);
                self.retire(ring);
                continue;
            }
            i += 1;
        }
        self.rings = rings;
        self.last_pass_fill = fill;
        self.pass += 1;
        self.expire_pending();
        busy
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
        self.shared.pool_ring(ring.cons);
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
            requests.extend(ids.iter().map(|id| assemble::resolve_request(&self.live, *id)));
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
        self.flush_sinks();
    }

    fn flush_sinks(&mut self) {
        self.resource.stats = self.stats();
        for sink in &mut self.sinks {
            if let Err(e) = sink.flush(&self.resource) {
                message!(self.shared.config.quiet, "ringtrace: flushing sink {} failed: {e}", sink.name());
            }
        }
    }

    fn finish(&mut self) -> Stats {
        self.pass_once();
        self.pass_once();
        self.export_ready(true);
        self.clock.reanchor();
        let now = self.clock.unix_nanos(self.clock.raw());
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
        self.flush_sinks();
        let stats = self.stats();
        if stats.lost_anything() {
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
        let mut losses = crate::sink::SinkLosses::default();
        for sink in &self.sinks {
            losses.add(sink.losses());
        }
        s.sink_failed_spans += losses.failed;
        s.sink_dropped_spans = losses.queue_full;
        s.sink_rejected_spans = losses.rejected;
        s.sink_unconfirmed_spans = losses.unconfirmed;
        s.sink_unsent_spans = losses.unsent;
        for r in &self.rings {
            s.dropped_spans += r.counters.dropped_spans.load(Relaxed);
            s.dropped_closes += r.counters.dropped_closes.load(Relaxed);
            s.dropped_events += r.counters.dropped_events.load(Relaxed);
            s.dropped_updates += r.counters.dropped_updates.load(Relaxed);
        }
        s
    }
}

/// Starts the drain thread.
pub(crate) fn spawn(
    shared: Arc<Shared>,
    sinks: Vec<Box<dyn Sink>>,
    commands: Receiver<Command>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let drain = Drain::new(shared, sinks);
    std::thread::Builder::new().name("ringtrace-drain".into()).spawn(move || drain.run(commands))
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
