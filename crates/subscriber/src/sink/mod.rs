//! Where assembled spans go.
//!
//! A [`Sink`] runs on the drain thread, never on an application thread, so it may block on I/O:
//! the rings absorb the application's records meanwhile (and drop and count them if a sink is so
//! slow that a ring fills).

mod file;

pub use file::RecordingSink;

use crate::span_data::{ResourceInfo, SpanData};

/// The error type sinks return.
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

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
