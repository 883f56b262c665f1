//! Loss and volume counters.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Counters one application thread keeps for one collector.
///
/// Only the owning thread writes them (a load and a store, no atomic read-modify-write on the
/// hot path); the drain reads them.
#[derive(Debug, Default)]
pub(crate) struct ThreadCounters {
    pub dropped_spans: AtomicU64,
    pub dropped_closes: AtomicU64,
    pub dropped_events: AtomicU64,
    pub dropped_updates: AtomicU64,
    pub warned: AtomicBool,
    /// The file of the thread's ring, when it is kept in one: its loss counters (cumulative over
    /// every thread that wrote the ring) count each drop too, so that a killed process leaves
    /// them (`docs/raw-format.md`, "Ring files").
    #[cfg(all(unix, not(ringtrace_loom)))]
    pub file: Option<std::sync::Arc<crate::ringfile::Mapped>>,
}

/// Which counter a drop counts in, in the order of a ring file's loss counters
/// ([`RING_LOSS_COUNTERS`](ringtrace_core::raw::RING_LOSS_COUNTERS)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dropped {
    Spans = 0,
    Closes = 1,
    Events = 2,
    Updates = 3,
}

impl ThreadCounters {
    /// The counter of `what`.
    #[inline]
    pub(crate) fn counter(&self, what: Dropped) -> &AtomicU64 {
        match what {
            Dropped::Spans => &self.dropped_spans,
            Dropped::Closes => &self.dropped_closes,
            Dropped::Events => &self.dropped_events,
            Dropped::Updates => &self.dropped_updates,
        }
    }

    /// Counts one drop of `what` (`undo`: takes one back, a close that was pushed after all).
    /// Only the owning thread calls it.
    #[inline]
    pub(crate) fn count(&self, what: Dropped, undo: bool) {
        let step = |c: &AtomicU64| {
            let v = c.load(Ordering::Relaxed);
            c.store(if undo { v.wrapping_sub(1) } else { v + 1 }, Ordering::Relaxed);
        };
        step(self.counter(what));
        #[cfg(all(unix, not(ringtrace_loom)))]
        if let Some(file) = &self.file {
            step(file.loss_counter(what));
        }
    }
}

/// What a collector recorded and lost, as totals over every thread.
///
/// With only the local recording (no other sink), the drain assembles nothing: `recorded_*`
/// count the spans and events written to it (events over the span limit included; spans by the
/// sampled flag of their open record, which a remote parent set later can still change), and
/// the counters that assembly decides — `events_over_limit`, `unclosed_spans`,
/// `orphan_records` — are zero here. Readers of the recording assemble it and report the exact
/// totals.
///
/// The identity that tests and the recording rely on: every span created while recording is
/// either in `recorded_spans` or in `dropped_spans`; a span whose close record was lost is
/// recorded as unclosed (`unclosed_spans`, also counted in `dropped_closes`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Spans handed to the sinks (closed, or unclosed at shutdown).
    pub recorded_spans: u64,
    /// Events attached to recorded spans.
    pub recorded_events: u64,
    /// Spans not recorded because a ring or the open-span table was full.
    pub dropped_spans: u64,
    /// Close records lost to a full ring (those spans are exported as unclosed).
    pub dropped_closes: u64,
    /// Events lost to a full ring.
    pub dropped_events: u64,
    /// Events not kept because their span already held
    /// [`MAX_EVENTS_PER_SPAN`](crate::MAX_EVENTS_PER_SPAN) (each span's OTLP
    /// `dropped_events_count` says how many of its own).
    pub events_over_limit: u64,
    /// Spans a sink failed to deliver, counted once per failing sink: its export returned an
    /// error, or it gave up on them later (a write to the recording failed, e.g. a full disk; a
    /// collector's permanent error; retries exhausted).
    pub sink_failed_spans: u64,
    /// Spans a sink dropped because its queue was full (an OTLP exporter behind its collector).
    pub sink_dropped_spans: u64,
    /// Spans a destination refused (an OTLP collector's partial success or permanent status).
    pub sink_rejected_spans: u64,
    /// Spans sent whose request timed out: the destination may or may not have stored them.
    pub sink_unconfirmed_spans: u64,
    /// Spans still queued in a sink when it stopped.
    pub sink_unsent_spans: u64,
    /// Field updates, links and remote-parent records lost to a full ring.
    pub dropped_updates: u64,
    /// Spans still open at shutdown, exported with `ringtrace.unclosed = true`.
    pub unclosed_spans: u64,
    /// Records that named a span the drain never saw open (its open record was dropped).
    pub orphan_records: u64,
    /// Spans of unsampled traces discarded by head sampling (not a loss). Spans under an
    /// unsampled parent are not even recorded and are not counted here.
    pub sampled_out: u64,
    /// Malformed `traceparent`/`baggage`/byte-form headers seen by extraction in this process.
    pub propagation_malformed: u64,
    /// Rings (threads) registered so far.
    pub threads: u64,
    /// Rings still held: threads that recorded and have not exited (or whose last records are
    /// not drained yet). A ring is freed once its thread has exited and it is empty.
    pub rings_in_use: u64,
}

impl Stats {
    /// Whether anything was lost.
    pub fn lost_anything(&self) -> bool {
        self.dropped_spans + self.dropped_closes + self.dropped_events + self.dropped_updates > 0
            || self.events_over_limit > 0
            || self.orphan_records > 0
            || self.sink_lost_spans() > 0
    }

    /// Spans the sinks took and did not deliver for certain, whatever the cause.
    pub fn sink_lost_spans(&self) -> u64 {
        self.sink_failed_spans
            + self.sink_dropped_spans
            + self.sink_rejected_spans
            + self.sink_unconfirmed_spans
            + self.sink_unsent_spans
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "recorded {} spans and {} events on {} threads; dropped {} spans, {} closes, {} events, {} updates; {} unclosed at shutdown; {} records whose span or callsite was never known; {} events over the per-span limit; sinks: {} spans failed, {} dropped (queue full), {} rejected, {} unconfirmed (timed out), {} unsent at shutdown",
            self.recorded_spans,
            self.recorded_events,
            self.threads,
            self.dropped_spans,
            self.dropped_closes,
            self.dropped_events,
            self.dropped_updates,
            self.unclosed_spans,
            self.orphan_records,
            self.events_over_limit,
            self.sink_failed_spans,
            self.sink_dropped_spans,
            self.sink_rejected_spans,
            self.sink_unconfirmed_spans,
            self.sink_unsent_spans
        )
    }
}
