//! The bounded queue between the drain thread (producer) and the exporter thread, and the
//! exporter's counters.
//!
//! The bound covers the spans waiting *and* the batch being sent, in spans and in encoded bytes,
//! so the exporter's memory is bounded whatever the collector does. The drain thread only takes
//! the lock to push (never waiting for room: what does not fit is dropped and counted) and, on
//! flush, to wait with a bound for the queue to empty.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::span_data::ResourceInfo;

/// Spans encoded as `ScopeSpans.spans` fields.
pub(crate) struct Chunk {
    pub bytes: Vec<u8>,
    pub spans: usize,
}

/// What the exporter takes to send.
pub(crate) struct Batch {
    pub chunks: Vec<Chunk>,
    pub spans: usize,
    pub bytes: usize,
    /// The latest resource (identity and the drain's loss counters).
    pub resource: Option<ResourceInfo>,
}

/// Counters and sizes of an OTLP exporter.
///
/// Every span handed to the exporter ends in exactly one of `exported_spans`, `dropped_spans`,
/// `failed_spans`, `rejected_spans` and `unsent_spans`, or is still queued
/// (`queued_spans`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OtlpStats {
    /// Spans the collector acknowledged.
    pub exported_spans: u64,
    /// Spans dropped because the queue was full (in spans or bytes).
    pub dropped_spans: u64,
    /// Spans given up: a failure that is not retryable, retries exhausted, or a span larger
    /// than a request may be.
    pub failed_spans: u64,
    /// Spans the collector reported rejected (OTLP partial success).
    pub rejected_spans: u64,
    /// Spans still queued or being sent when the exporter stopped.
    pub unsent_spans: u64,
    /// Spans held now: queued plus the batch being sent.
    pub queued_spans: u64,
    /// Encoded bytes held now.
    pub queued_bytes: u64,
    /// The most spans ever held at once.
    pub peak_queued_spans: u64,
    /// The most encoded bytes ever held at once.
    pub peak_queued_bytes: u64,
    /// Export requests the collector acknowledged.
    pub requests: u64,
    /// Export attempts that failed (each retry counts).
    pub failed_attempts: u64,
}

impl OtlpStats {
    /// Spans that will never reach the collector.
    pub fn lost_spans(&self) -> u64 {
        self.dropped_spans + self.failed_spans + self.rejected_spans + self.unsent_spans
    }
}

impl std::fmt::Display for OtlpStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exported {} spans; lost {} ({} dropped: queue full, {} failed, {} rejected by the collector, {} unsent at shutdown)",
            self.exported_spans,
            self.lost_spans(),
            self.dropped_spans,
            self.failed_spans,
            self.rejected_spans,
            self.unsent_spans
        )
    }
}

pub(crate) struct State {
    chunks: VecDeque<Chunk>,
    queued_spans: usize,
    queued_bytes: usize,
    in_flight_spans: usize,
    in_flight_bytes: usize,
    /// When the oldest queued chunk arrived.
    oldest: Option<Instant>,
    resource: Option<ResourceInfo>,
    flush_waiters: usize,
    pub stopped: bool,
    pub stats: OtlpStats,
}

impl State {
    fn held(&self) -> (usize, usize) {
        (self.queued_spans + self.in_flight_spans, self.queued_bytes + self.in_flight_bytes)
    }

    fn update_gauges(&mut self) {
        let (spans, bytes) = self.held();
        self.stats.queued_spans = spans as u64;
        self.stats.queued_bytes = bytes as u64;
        self.stats.peak_queued_spans = self.stats.peak_queued_spans.max(spans as u64);
        self.stats.peak_queued_bytes = self.stats.peak_queued_bytes.max(bytes as u64);
    }

    /// Room left, in spans and bytes.
    pub fn room(&self, limits: &Limits) -> (usize, usize) {
        let (spans, bytes) = self.held();
        (limits.max_spans.saturating_sub(spans), limits.max_bytes.saturating_sub(bytes))
    }

    pub fn set_resource(&mut self, resource: &ResourceInfo) {
        match &mut self.resource {
            Some(r) => r.stats = resource.stats,
            None => self.resource = Some(resource.clone()),
        }
    }

    /// Queues a chunk that fits (the caller checked [`room`](Self::room)).
    pub fn push(&mut self, chunk: Chunk, now: Instant) {
        self.queued_spans += chunk.spans;
        self.queued_bytes += chunk.bytes.len();
        self.oldest.get_or_insert(now);
        self.chunks.push_back(chunk);
        self.update_gauges();
    }

    pub fn is_drained(&self) -> bool {
        self.queued_spans == 0 && self.in_flight_spans == 0
    }
}

/// The queue's bounds and batching.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_spans: usize,
    pub max_bytes: usize,
    pub batch_spans: usize,
    pub request_bytes: usize,
    pub schedule_delay: Duration,
}

/// What the exporter should do next.
pub(crate) enum Next {
    Send(Batch),
    /// Nothing ready: wait this long (or until woken).
    Wait(Option<Duration>),
    Stop,
}

pub(crate) struct Queue {
    state: Mutex<State>,
    drained: Condvar,
    /// Wakes the exporter: data or a flush.
    pub wake: tokio::sync::Notify,
    /// Wakes the exporter to stop, whatever it is doing.
    pub stop: tokio::sync::Notify,
    pub limits: Limits,
}

impl Queue {
    pub fn new(limits: Limits) -> Self {
        Self {
            state: Mutex::new(State {
                chunks: VecDeque::new(),
                queued_spans: 0,
                queued_bytes: 0,
                in_flight_spans: 0,
                in_flight_bytes: 0,
                oldest: None,
                resource: None,
                flush_waiters: 0,
                stopped: false,
                stats: OtlpStats::default(),
            }),
            drained: Condvar::new(),
            wake: tokio::sync::Notify::new(),
            stop: tokio::sync::Notify::new(),
            limits,
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent counters: every update is a few
        // integer assignments. Keep going rather than propagate the poison.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn stats(&self) -> OtlpStats {
        self.lock().stats
    }

    /// The exporter's next step: a batch when a full one is queued, a flush waits, or the oldest
    /// span has waited the schedule delay.
    pub fn next(&self, now: Instant) -> Next {
        let mut st = self.lock();
        if st.stopped {
            return Next::Stop;
        }
        if st.queued_spans == 0 {
            return Next::Wait(None);
        }
        let l = &self.limits;
        let age = st.oldest.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        let ready = st.queued_spans >= l.batch_spans
            || st.queued_bytes >= l.request_bytes
            || st.flush_waiters > 0
            || age >= l.schedule_delay;
        if !ready {
            return Next::Wait(Some(l.schedule_delay - age));
        }
        let mut batch = Batch { chunks: Vec::new(), spans: 0, bytes: 0, resource: st.resource.clone() };
        while let Some(c) = st.chunks.front() {
            let fits =
                batch.spans + c.spans <= l.batch_spans && batch.bytes + c.bytes.len() <= l.request_bytes;
            if !fits && !batch.chunks.is_empty() {
                break;
            }
            let Some(c) = st.chunks.pop_front() else { break };
            batch.spans += c.spans;
            batch.bytes += c.bytes.len();
            batch.chunks.push(c);
        }
        st.queued_spans -= batch.spans;
        st.queued_bytes -= batch.bytes;
        st.in_flight_spans = batch.spans;
        st.in_flight_bytes = batch.bytes;
        st.oldest = if st.chunks.is_empty() { None } else { Some(now) };
        st.update_gauges();
        Next::Send(batch)
    }

    /// The batch being sent is done with (`outcome` already counted by the caller).
    pub fn finish_batch(&self, outcome: impl FnOnce(&mut OtlpStats)) {
        let mut st = self.lock();
        outcome(&mut st.stats);
        st.in_flight_spans = 0;
        st.in_flight_bytes = 0;
        st.update_gauges();
        if st.is_drained() {
            self.drained.notify_all();
        }
    }

    /// Waits until every span handed over so far is sent (or given up), at most `timeout`.
    /// Returns whether the queue drained.
    pub fn wait_drained(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.lock();
        st.flush_waiters += 1;
        self.wake.notify_one();
        while !st.is_drained() && !st.stopped {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = self.drained.wait_timeout(st, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        st.flush_waiters -= 1;
        st.is_drained()
    }

    /// Stops the exporter: what is still held is counted as unsent. Returns the final counters.
    pub fn stop(&self) -> OtlpStats {
        let mut st = self.lock();
        if !st.stopped {
            st.stopped = true;
            let (spans, _) = st.held();
            st.stats.unsent_spans += spans as u64;
            st.chunks.clear();
            st.queued_spans = 0;
            st.queued_bytes = 0;
            st.in_flight_spans = 0;
            st.in_flight_bytes = 0;
            st.oldest = None;
            st.update_gauges();
        }
        self.drained.notify_all();
        self.stop.notify_one();
        st.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_spans: 10,
            max_bytes: 1000,
            batch_spans: 4,
            request_bytes: 500,
            schedule_delay: Duration::from_secs(1),
        }
    }

    fn chunk(spans: usize, bytes: usize) -> Chunk {
        Chunk { bytes: vec![0; bytes], spans }
    }

    #[test]
    fn batches_wait_for_size_or_delay_and_in_flight_counts_against_the_bound() {
        let q = Queue::new(limits());
        let t0 = Instant::now();
        q.lock().push(chunk(2, 100), t0);
        assert!(matches!(q.next(t0), Next::Wait(Some(d)) if d == Duration::from_secs(1)));
        q.lock().push(chunk(3, 100), t0);
        let Next::Send(b) = q.next(t0) else { panic!("a full batch is ready") };
        assert_eq!((b.spans, b.chunks.len()), (2, 1), "the next chunk would exceed 4 spans");
        assert_eq!(q.lock().room(&q.limits), (5, 800), "in flight still counts");
        q.finish_batch(|s| s.exported_spans += 2);
        assert_eq!(q.lock().room(&q.limits), (7, 900));
        // The remaining 3 spans wait for the delay.
        assert!(matches!(q.next(t0), Next::Wait(_)));
        let Next::Send(b) = q.next(t0 + Duration::from_secs(1)) else { panic!("delay elapsed") };
        assert_eq!(b.spans, 3);
        q.finish_batch(|s| s.exported_spans += 3);
        let s = q.stats();
        assert_eq!(
            (s.exported_spans, s.queued_spans, s.peak_queued_spans, s.peak_queued_bytes),
            (5, 0, 5, 200)
        );
    }

    #[test]
    fn an_oversized_chunk_still_goes_alone() {
        let q = Queue::new(limits());
        let t0 = Instant::now();
        q.lock().push(chunk(9, 600), t0);
        let Next::Send(b) = q.next(t0) else { panic!() };
        assert_eq!(b.spans, 9);
    }

    #[test]
    fn stop_counts_what_is_held_as_unsent() {
        let q = Queue::new(limits());
        let t0 = Instant::now();
        q.lock().push(chunk(4, 10), t0);
        q.lock().push(chunk(3, 10), t0);
        let Next::Send(_) = q.next(t0) else { panic!() };
        let s = q.stop();
        assert_eq!((s.unsent_spans, s.queued_spans), (7, 0));
        assert!(matches!(q.next(t0), Next::Stop));
        assert!(q.wait_drained(Duration::from_secs(5)), "stopped: nothing is held");
        assert_eq!(q.stop().unsent_spans, 7, "stopping twice counts once");
    }

    #[test]
    fn flush_wait_is_bounded() {
        let q = Queue::new(limits());
        q.lock().push(chunk(1, 10), Instant::now());
        assert!(!q.wait_drained(Duration::from_millis(1)), "nobody sends: the wait gives up");
        assert_eq!(q.lock().flush_waiters, 0);
    }
}
