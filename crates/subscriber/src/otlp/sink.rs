//! [`OtlpSink`]: the drain thread's side of the exporter.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::{OtlpConfig, Protocol, MAX_REQUEST_BYTES};
use super::exporter;
use super::queue::{Chunk, Limits, OtlpStats, Queue};
use crate::builder::Error;
use crate::messages::message;
use crate::sink::{FlushWaiter, Sink, SinkError, SinkLosses};
use crate::span_data::{ResourceInfo, SpanData};

/// A [`Sink`] that exports spans to an OTLP collector (Jaeger, Tempo, an OpenTelemetry
/// Collector) over gRPC or HTTP/protobuf.
///
/// On the drain thread, [`export`](Sink::export) only encodes the spans and queues them, and
/// [`flush`](Sink::flush) only asks for them to be sent: neither waits for the network. Waiting
/// for delivery happens on the thread that flushes ([`flush_waiter`](Sink::flush_waiter), which
/// [`Handle::flush`](crate::Handle::flush) calls), and at shutdown after the local recording is
/// written ([`stop`](Sink::stop)). A thread of its own (`ringtrace-otlp`, with a small
/// current-thread tokio runtime, independent of any runtime the application runs) sends
/// batches, retries, and counts what it cannot deliver ([`OtlpStats`], also reported to the
/// drain as [`SinkLosses`] and so in [`Stats`](crate::Stats)). When the queue is full, spans are
/// dropped and counted; the counters travel in every request's resource
/// (`ringtrace.otlp_*`), a `ringtrace.loss` span reports each growth in losses, and the totals
/// are printed at shutdown when anything was lost.
///
/// [`Builder`](crate::Builder) adds one when the environment or the code asks for OTLP; create
/// one yourself to read its counters:
///
/// ```no_run
/// use ringtrace_subscriber::otlp::{OtlpConfig, OtlpSink, Protocol};
///
/// # fn main() -> Result<(), ringtrace_subscriber::Error> {
/// let sink = OtlpSink::new(OtlpConfig::new().endpoint("http://localhost:4317").protocol(Protocol::Grpc))?;
/// let stats = sink.stats_handle();
/// let guard = ringtrace_subscriber::Builder::new().sink(sink).init()?;
/// // ...
/// drop(guard);
/// println!("{}", stats.stats());
/// # Ok(()) }
/// ```
pub struct OtlpSink {
    queue: Arc<Queue>,
    thread: Option<std::thread::JoinHandle<()>>,
    endpoint: String,
    protocol: Protocol,
    flush_timeout: Duration,
    encoder: crate::wire::SpanEncoder,
    scratch: Vec<u8>,
    ends: Vec<usize>,
    warned_full: bool,
    /// Print nothing to stderr.
    quiet: bool,
}

/// Reads an [`OtlpSink`]'s counters from any thread.
#[derive(Clone)]
pub struct OtlpStatsHandle(Arc<Queue>);

impl OtlpStatsHandle {
    /// The counters now.
    pub fn stats(&self) -> OtlpStats {
        self.0.stats()
    }
}

impl std::fmt::Debug for OtlpStatsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("OtlpStatsHandle").field(&self.stats()).finish()
    }
}

impl std::fmt::Debug for OtlpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpSink")
            .field("endpoint", &self.endpoint)
            .field("protocol", &self.protocol)
            .finish()
    }
}

impl OtlpSink {
    /// Resolves `config` against the environment (see [`OtlpConfig`]) and starts the exporter
    /// thread. Errors name a malformed setting and its value.
    pub fn new(config: OtlpConfig) -> Result<Self, Error> {
        let settings = config.resolve()?;
        let limits = Limits {
            max_spans: settings.max_queue_spans,
            max_bytes: settings.max_queue_bytes,
            batch_spans: settings.max_export_batch_spans,
            request_bytes: MAX_REQUEST_BYTES.min(settings.max_queue_bytes),
            schedule_delay: settings.schedule_delay,
        };
        let queue = Arc::new(Queue::new(limits));
        let endpoint = settings.endpoint_text.clone();
        let protocol = settings.protocol;
        let flush_timeout = settings.flush_timeout;
        let quiet = settings.quiet;
        let thread = exporter::spawn(queue.clone(), settings).map_err(|reason| {
            Error::Core(ringtrace_core::Error::Io {
                context: format!("starting the OTLP exporter for {endpoint}"),
                source: std::io::Error::other(reason),
            })
        })?;
        Ok(Self {
            queue,
            thread: Some(thread),
            endpoint,
            protocol,
            flush_timeout,
            encoder: crate::wire::SpanEncoder::default(),
            scratch: Vec::new(),
            ends: Vec::new(),
            warned_full: false,
            quiet,
        })
    }

    /// The URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The protocol in use.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// How long [`stop`](Sink::stop) waits for delivery at shutdown.
    pub(crate) fn flush_timeout(&self) -> Duration {
        self.flush_timeout
    }

    /// A handle to the counters, valid after the sink is gone.
    pub fn stats_handle(&self) -> OtlpStatsHandle {
        OtlpStatsHandle(self.queue.clone())
    }

    /// The counters now.
    pub fn stats(&self) -> OtlpStats {
        self.queue.stats()
    }

    fn drop_spans(&mut self, spans: usize, why: &str) {
        if spans == 0 {
            return;
        }
        self.queue.lock().stats.dropped_spans += spans as u64;
        if !self.warned_full {
            self.warned_full = true;
            message!(
                self.quiet,
                "ringtrace: OTLP queue for {} is full ({why}); dropping spans, counted in ringtrace.otlp_dropped_spans",
                self.endpoint
            );
        }
    }
}

impl Sink for OtlpSink {
    fn name(&self) -> &str {
        "otlp"
    }

    fn export(&mut self, batch: &[SpanData], resource: &ResourceInfo) -> Result<(), SinkError> {
        let limits = self.queue.limits;
        let (room_spans, room_bytes) = {
            let mut st = self.queue.lock();
            st.set_resource(resource);
            if st.stopped {
                return Err("the OTLP exporter has stopped".into());
            }
            st.room(&limits)
        };
        // Room only grows until we push (the exporter only takes), so what fits now still fits.
        let take = batch.len().min(room_spans);
        if take == 0 {
            self.drop_spans(batch.len(), "spans");
            return Ok(());
        }
        self.scratch.clear();
        self.ends.clear();
        let mut too_large = 0u64;
        for span in &batch[..take] {
            let before = self.scratch.len();
            let n = self.encoder.push_span(span, &mut self.scratch);
            if n > limits.request_bytes {
                self.scratch.truncate(before);
                too_large += 1;
                continue;
            }
            if self.scratch.len() > room_bytes {
                self.scratch.truncate(before);
                break;
            }
            self.ends.push(self.scratch.len());
        }
        let accepted = self.ends.len();
        let dropped = batch.len() - accepted - too_large as usize;
        let now = Instant::now();
        if accepted > 0 {
            // Split into chunks of at most one request each.
            let mut st = self.queue.lock();
            let mut start = 0;
            let mut first_span = 0;
            for (i, &end) in self.ends.iter().enumerate() {
                let next_end = self.ends.get(i + 1).copied();
                let spans = i + 1 - first_span;
                let full =
                    spans >= limits.batch_spans || next_end.is_none_or(|e| e - start > limits.request_bytes);
                if full {
                    st.push(Chunk { bytes: self.scratch[start..end].to_vec(), spans }, now);
                    start = end;
                    first_span = i + 1;
                }
            }
            st.stats.failed_spans += too_large;
        } else if too_large > 0 {
            self.queue.lock().stats.failed_spans += too_large;
        }
        if dropped > 0 {
            let why = if take < batch.len() { "spans" } else { "bytes" };
            self.drop_spans(dropped, why);
        }
        if accepted > 0 {
            self.queue.wake.notify_one();
        }
        // Keep the scratch buffer from pinning a huge batch's memory.
        if self.scratch.capacity() > 4 * limits.request_bytes {
            self.scratch = Vec::new();
        }
        Ok(())
    }

    fn flush(&mut self, resource: &ResourceInfo) -> Result<(), SinkError> {
        // Never waits here: the drain thread must go on emptying the rings.
        self.queue.flush(resource);
        Ok(())
    }

    fn losses(&self) -> SinkLosses {
        self.queue.stats().losses()
    }

    fn flush_waiter(&self) -> Option<FlushWaiter> {
        let queue = self.queue.clone();
        let endpoint = self.endpoint.clone();
        Some(Arc::new(move |timeout| wait_delivered(&queue, &endpoint, timeout)))
    }

    fn stop(&mut self) {
        if self.thread.is_none() {
            return;
        }
        // Losses met meanwhile were said when they happened; say only what is left behind.
        let (_, _, settled) = self.queue.wait_delivered(self.flush_timeout);
        if !settled {
            let st = self.queue.lock();
            message!(
                self.quiet,
                "ringtrace: OTLP export at shutdown: {} spans still queued for {} after {:?}: {}",
                st.held_spans(),
                self.endpoint,
                self.flush_timeout,
                st.diagnosis(&self.endpoint, Instant::now())
            );
        }
        self.stop_now();
    }
}

/// Waits, at most `timeout`, until every span handed over so far is delivered. The error says
/// what kept them from the collector, in words that match what the attempts showed.
fn wait_delivered(queue: &Queue, endpoint: &str, timeout: Duration) -> Result<(), SinkError> {
    let (before, after, settled) = queue.wait_delivered(timeout);
    let rejected = after.rejected_spans - before.rejected_spans;
    let failed = after.failed_spans - before.failed_spans;
    let unconfirmed = after.unconfirmed_spans - before.unconfirmed_spans;
    if settled && rejected + failed + unconfirmed == 0 {
        return Ok(());
    }
    let st = queue.lock();
    let diagnosis = st.diagnosis(endpoint, Instant::now());
    let mut parts = Vec::new();
    if !settled {
        parts.push(format!(
            "{} spans still queued for {endpoint} after {timeout:?}: {diagnosis}",
            st.held_spans()
        ));
    }
    if rejected > 0 {
        let why = st.rejection.as_deref().unwrap_or("no reason given");
        parts.push(format!("{rejected} spans rejected by the collector at {endpoint}: {why}"));
    }
    if failed > 0 {
        parts.push(format!("{failed} spans given up: {diagnosis}"));
    }
    if unconfirmed > 0 {
        parts.push(format!(
            "{unconfirmed} spans unconfirmed (sent, no answer; the collector may have stored them): {diagnosis}"
        ));
    }
    Err(parts.join("; ").into())
}

impl OtlpSink {
    /// Stops the exporter without waiting; what it still holds is counted. Prints the totals
    /// when anything was not delivered.
    fn stop_now(&mut self) {
        let Some(thread) = self.thread.take() else { return };
        let stats = self.queue.stop();
        // The exporter wakes on `stop` wherever it waits; it never blocks otherwise.
        let _ = thread.join();
        if stats.lost_spans() > 0 {
            message!(self.quiet, "ringtrace: OTLP export to {}: {stats}", self.endpoint);
        }
    }
}

impl Drop for OtlpSink {
    fn drop(&mut self) {
        self.stop_now();
    }
}
