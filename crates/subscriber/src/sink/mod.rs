//! Where assembled spans go.
//!
//! A [`Sink`] runs on the drain thread, never on an application thread, so it may block on I/O:
//! the rings absorb the application's records meanwhile (and drop and count them if a sink is so
//! slow that a ring fills).

mod file;
pub(crate) mod raw;

pub use file::{RecordingSink, LOSS_SPAN_NAME};

use crate::span_data::{ResourceInfo, SpanData};

/// The error type sinks return.
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// Waits, on the calling thread and at most the given time, until everything a sink was handed
/// so far is delivered. See [`Sink::flush_waiter`].
pub type FlushWaiter = std::sync::Arc<dyn Fn(std::time::Duration) -> Result<(), SinkError> + Send + Sync>;

/// Spans a sink lost after [`Sink::export`] took them, by cause (cumulative). The drain adds them
/// up over its sinks into [`Stats`](crate::Stats), the recording's resource counters and the
/// summary printed at shutdown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SinkLosses {
    /// Dropped because the sink's queue was full.
    pub queue_full: u64,
    /// Refused by the destination (an OTLP partial success, a permanent error status).
    pub rejected: u64,
    /// Given up: a failure that is not transient, retries exhausted, a write that failed.
    pub failed: u64,
    /// Sent, but the destination never answered (the request timed out): it may have stored
    /// them.
    pub unconfirmed: u64,
    /// Still queued when the sink stopped.
    pub unsent: u64,
}

impl SinkLosses {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: SinkLosses) {
        self.queue_full += other.queue_full;
        self.rejected += other.rejected;
        self.failed += other.failed;
        self.unconfirmed += other.unconfirmed;
        self.unsent += other.unsent;
    }
}

/// A destination for batches of spans.
pub trait Sink: Send + 'static {
    /// A short name for messages.
    fn name(&self) -> &str;
    /// Takes one batch of closed spans. `resource` carries the cumulative loss counters.
    fn export(&mut self, batch: &[SpanData], resource: &ResourceInfo) -> Result<(), SinkError>;
    /// Makes everything exported so far durable (or delivered). Called on flush and shutdown,
    /// with the latest counters.
    fn flush(&mut self, resource: &ResourceInfo) -> Result<(), SinkError> {
        let _ = resource;
        Ok(())
    }
    /// What the sink lost after `export` returned `Ok` (a full queue, a collector that refused
    /// or never answered, a write that failed later), by cause. Read by the drain for every
    /// batch, so it must be cheap and must not block.
    fn losses(&self) -> SinkLosses {
        SinkLosses::default()
    }
    /// For a sink that delivers over a network: a way to wait for delivery off the drain
    /// thread. `flush` on the drain thread must not wait on a network (the rings and the local
    /// recording would wait with it); [`Handle::flush`](crate::Handle::flush) calls the waiter
    /// after the drain has flushed, on the caller's thread. Taken once, when the collector starts.
    fn flush_waiter(&self) -> Option<FlushWaiter> {
        None
    }
    /// Called once at shutdown, after the final [`flush`](Self::flush) has made the local
    /// recording durable and while the application no longer records: a sink that delivers over
    /// a network waits for delivery (bounded by its own flush timeout) and stops, so that what it
    /// still holds is counted (as unsent) before the final counters are written.
    fn stop(&mut self) {}
    /// Whether this sink is the application's own exporter, configured in code: then the
    /// `OTEL_EXPORTER_OTLP_*` variables do not also start ringtrace's OTLP exporter (which would
    /// send every span a second time), as an OpenTelemetry SDK installs the exporter its code
    /// names and no other. [`Builder::otlp`](crate::Builder::otlp) still adds ringtrace's.
    /// [`otel::SpanExporterSink`](crate::otel::SpanExporterSink) says yes; the default is no.
    fn is_app_exporter(&self) -> bool {
        false
    }
}

/// A sink that calls a closure with every batch: for tests and custom destinations.
pub struct FnSink<F>(pub F);

impl<F> Sink for FnSink<F>
where
    F: FnMut(&[SpanData], &ResourceInfo) + Send + 'static,
{
    fn name(&self) -> &str {
        "fn"
    }
    fn export(&mut self, batch: &[SpanData], resource: &ResourceInfo) -> Result<(), SinkError> {
        (self.0)(batch, resource);
        Ok(())
    }
}
