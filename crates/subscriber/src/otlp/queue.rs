//! The bounded queue between the drain thread (producer) and the exporter thread, and the
//! exporter's counters.
//!
//! The bound covers the spans waiting *and* the batch being sent, in spans and in encoded bytes,
//! so the exporter's memory is bounded whatever the collector does. The drain thread only takes
//! the lock to push (never waiting for room: what does not fit is dropped and counted) and to ask
//! for a flush; waiting for delivery happens on the thread that asked for it
//! ([`Queue::wait_delivered`]), never on the drain thread.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::sink::SinkLosses;
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
/// `failed_spans`, `rejected_spans`, `unconfirmed_spans` and `unsent_spans`, or is still queued
/// (`queued_spans`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OtlpStats {
    /// Spans the collector acknowledged.
    pub exported_spans: u64,
    /// Spans dropped because the queue was full (in spans or bytes).
    pub dropped_spans: u64,
    /// Spans given up: a failure that is not retryable (a server that does not speak OTLP),
    /// retries exhausted without any attempt timing out, or a span larger than a request may be.
    pub failed_spans: u64,
    /// Spans the collector refused: an OTLP partial success, or a permanent error status.
    pub rejected_spans: u64,
    /// Spans given up after an attempt got no answer within the timeout (or was cut short by
    /// shutdown): the collector may have stored them, so they are not counted as failed.
    pub unconfirmed_spans: u64,
    /// Spans still queued (never sent) when the exporter stopped.
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
    /// Spans not delivered for certain (the unconfirmed ones may have been stored).
    pub fn lost_spans(&self) -> u64 {
        self.dropped_spans
            + self.failed_spans
            + self.rejected_spans
            + self.unconfirmed_spans
            + self.unsent_spans
    }

    /// The same counts as [`SinkLosses`].
    pub fn losses(&self) -> SinkLosses {
        SinkLosses {
            queue_full: self.dropped_spans,
            rejected: self.rejected_spans,
            failed: self.failed_spans,
            unconfirmed: self.unconfirmed_spans,
            unsent: self.unsent_spans,
        }
    }
}

impl std::fmt::Display for OtlpStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exported {} spans; not delivered for certain {} ({} dropped: queue full, {} failed, {} rejected by the collector, {} unconfirmed: no answer, {} unsent at shutdown)",
            self.exported_spans,
            self.lost_spans(),
            self.dropped_spans,
            self.failed_spans,
            self.rejected_spans,
            self.unconfirmed_spans,
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
    /// Spans ever queued, and those whose batch is done with (sent, rejected or given up).
    /// Spans are sent in order, so a span is settled once `settled` passes its number.
    pushed: u64,
    settled: u64,
    /// Spans queued before this number are sent without waiting for the schedule delay.
    flush_until: u64,
    /// When the batch in flight was taken.
    in_flight_since: Option<Instant>,
    /// An attempt for the batch in flight may have reached the collector: one timed out, or
    /// one is under way. Stopping then counts the batch as unconfirmed rather than unsent.
    in_flight_maybe_delivered: bool,
    pub attempt_under_way: bool,
    /// What the latest attempt showed about the collector.
    pub condition: Condition,
    /// The collector's latest reason for refusing spans (status and message).
    pub rejection: Option<String>,
    pub stopped: bool,
    pub stats: OtlpStats,
}

/// What the latest export attempt showed about the collector, for messages that say what
/// happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Condition {
    /// Nothing went wrong (yet).
    Healthy,
    /// No connection: refused, no route, name not resolved, connect timed out.
    Unreachable(String),
    /// Connected, but no answer within the timeout.
    Slow(String),
    /// Answers with error statuses.
    Rejecting(String),
    /// The connection broke during a request.
    Broken(String),
    /// The server does not speak the protocol (wrong port or protocol).
    WrongProtocol(String),
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
    pub(super) fn room(&self, limits: &Limits) -> (usize, usize) {
        let (spans, bytes) = self.held();
        (limits.max_spans.saturating_sub(spans), limits.max_bytes.saturating_sub(bytes))
    }

    pub(super) fn set_resource(&mut self, resource: &ResourceInfo) {
        match &mut self.resource {
            Some(r) => r.stats = resource.stats,
            None => self.resource = Some(resource.clone()),
        }
    }

    /// Queues a chunk that fits (the caller checked [`room`](Self::room)).
    pub(super) fn push(&mut self, chunk: Chunk, now: Instant) {
        self.pushed += chunk.spans as u64;
        self.queued_spans += chunk.spans;
        self.queued_bytes += chunk.bytes.len();
        self.oldest.get_or_insert(now);
        self.chunks.push_back(chunk);
        self.update_gauges();
    }

    pub(super) fn is_drained(&self) -> bool {
        self.queued_spans == 0 && self.in_flight_spans == 0
    }

    /// Sends everything queued so far without waiting for the schedule delay.
    pub(super) fn request_flush(&mut self) {
        self.flush_until = self.flush_until.max(self.pushed);
    }

    /// An attempt timed out: the batch in flight may have been stored.
    pub(super) fn attempt_timed_out(&mut self) {
        self.in_flight_maybe_delivered = true;
    }

    /// Whether an attempt for the batch in flight timed out.
    pub(super) fn in_flight_maybe_delivered(&self) -> bool {
        self.in_flight_maybe_delivered
    }

    /// Spans handed over and not yet sent or given up.
    pub(super) fn held_spans(&self) -> u64 {
        (self.queued_spans + self.in_flight_spans) as u64
    }

    /// Why spans are still held, in words: what the latest attempt showed.
    pub(super) fn diagnosis(&self, endpoint: &str, now: Instant) -> String {
        match &self.condition {
            Condition::Unreachable(r) => format!("the collector at {endpoint} is unreachable ({r})"),
            Condition::Slow(r) => {
                format!("the collector at {endpoint} is reachable but slow: connected, but {r}")
            }
            Condition::Rejecting(r) => format!("the collector at {endpoint} is rejecting requests ({r})"),
            Condition::Broken(r) => format!("the connection to the collector at {endpoint} broke ({r})"),
            Condition::WrongProtocol(r) => format!("wrong port or protocol? {r}"),
            Condition::Healthy => match self.in_flight_since {
                Some(t) if self.attempt_under_way => format!(
                    "the collector at {endpoint} is slow: a request has waited {:?} for an answer",
                    now.saturating_duration_since(t)
                ),
                _ => format!("the exporter has not sent them to {endpoint} yet"),
            },
        }
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
    Send(Box<Batch>),
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
    pub(super) fn new(limits: Limits) -> Self {
        Self {
            state: Mutex::new(State {
                chunks: VecDeque::new(),
                queued_spans: 0,
                queued_bytes: 0,
                in_flight_spans: 0,
                in_flight_bytes: 0,
                oldest: None,
                resource: None,
                pushed: 0,
                settled: 0,
                flush_until: 0,
                in_flight_since: None,
                in_flight_maybe_delivered: false,
                attempt_under_way: false,
                condition: Condition::Healthy,
                rejection: None,
                stopped: false,
                stats: OtlpStats::default(),
            }),
            drained: Condvar::new(),
            wake: tokio::sync::Notify::new(),
            stop: tokio::sync::Notify::new(),
            limits,
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent counters: every update is a few
        // integer assignments. Keep going rather than propagate the poison.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn stats(&self) -> OtlpStats {
        self.lock().stats
    }

    /// The exporter's next step: a batch when a full one is queued, a flush waits, or the oldest
    /// span has waited the schedule delay.
    pub(super) fn next(&self, now: Instant) -> Next {
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
            || st.settled + (st.in_flight_spans as u64) < st.flush_until
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
        st.in_flight_since = Some(now);
        st.in_flight_maybe_delivered = false;
        st.oldest = if st.chunks.is_empty() { None } else { Some(now) };
        st.update_gauges();
        Next::Send(Box::new(batch))
    }

    /// The batch being sent is done with (`outcome` counts it).
    pub(super) fn finish_batch(&self, outcome: impl FnOnce(&mut OtlpStats)) {
        let mut st = self.lock();
        outcome(&mut st.stats);
        st.settled += st.in_flight_spans as u64;
        st.in_flight_spans = 0;
        st.in_flight_bytes = 0;
        st.in_flight_since = None;
        st.in_flight_maybe_delivered = false;
        st.attempt_under_way = false;
        st.update_gauges();
        drop(st);
        self.drained.notify_all();
    }

    /// Asks the exporter to send everything queued so far now; does not wait.
    pub(super) fn flush(&self, resource: &ResourceInfo) {
        let mut st = self.lock();
        st.set_resource(resource);
        st.request_flush();
        drop(st);
        self.wake.notify_one();
    }

    /// Waits, at most `timeout`, until every span queued so far is sent or given up. Returns
    /// the counters at the start and at the end, and whether everything settled.
    pub(super) fn wait_delivered(&self, timeout: Duration) -> (OtlpStats, OtlpStats, bool) {
        let deadline = Instant::now().checked_add(timeout);
        let mut st = self.lock();
        let before = st.stats;
        let target = st.pushed;
        st.request_flush();
        self.wake.notify_one();
        while st.settled < target && !st.stopped {
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                break;
            }
            st = self.drained.wait_timeout(st, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        let settled = st.settled >= target || (st.stopped && st.is_drained());
        (before, st.stats, settled)
    }

    /// Stops the exporter: the batch in flight counts as unconfirmed if an attempt may have
    /// reached the collector, what is queued as unsent. Returns the final counters.
    pub(super) fn stop(&self) -> OtlpStats {
        let mut st = self.lock();
        if !st.stopped {
            st.stopped = true;
            let in_flight = st.in_flight_spans as u64;
            if st.in_flight_maybe_delivered || st.attempt_under_way {
                st.stats.unconfirmed_spans += in_flight;
            } else {
                st.stats.unsent_spans += in_flight;
            }
            st.stats.unsent_spans += st.queued_spans as u64;
            st.chunks.clear();
            st.queued_spans = 0;
            st.queued_bytes = 0;
            st.in_flight_spans = 0;
            st.in_flight_bytes = 0;
            st.in_flight_since = None;
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
        assert_eq!((s.unsent_spans, s.unconfirmed_spans, s.queued_spans), (7, 0, 0));
        assert!(matches!(q.next(t0), Next::Stop));
        assert!(q.wait_delivered(Duration::from_secs(5)).2, "stopped: nothing is held");
        assert_eq!(q.stop().unsent_spans, 7, "stopping twice counts once");
    }

    #[test]
    fn a_batch_whose_attempt_timed_out_is_unconfirmed_at_stop() {
        let q = Queue::new(limits());
        let t0 = Instant::now();
        q.lock().push(chunk(4, 10), t0);
        q.lock().push(chunk(3, 10), t0);
        let Next::Send(b) = q.next(t0) else { panic!() };
        assert_eq!(b.spans, 4);
        q.lock().attempt_timed_out();
        let s = q.stop();
        assert_eq!((s.unconfirmed_spans, s.unsent_spans), (4, 3));
    }

    #[test]
    fn a_flush_sends_a_partial_batch_at_once_and_the_wait_is_bounded() {
        let q = Queue::new(limits());
        let t0 = Instant::now();
        q.lock().push(chunk(1, 10), t0);
        assert!(matches!(q.next(t0), Next::Wait(Some(_))), "a partial batch waits for the delay");
        let (_, _, settled) = q.wait_delivered(Duration::from_millis(1));
        assert!(!settled, "nobody sends: the wait gives up");
        let Next::Send(b) = q.next(t0) else { panic!("the flush asked for it") };
        assert_eq!(b.spans, 1);
        // Spans queued after the flush wait for the delay again.
        q.lock().push(chunk(1, 10), t0);
        q.finish_batch(|s| s.exported_spans += 1);
        assert!(matches!(q.next(t0), Next::Wait(Some(_))));
        assert!(!q.wait_delivered(Duration::ZERO).2);
    }
}
