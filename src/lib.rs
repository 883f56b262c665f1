//! # ringtrace
//!
//! Near-zero-cost tracing for distributed Rust services. Keep your `tracing` spans; ringtrace
//! records them into per-thread ring buffers, tags every span with **node**, **daemon** and
//! **request**, carries the request across processes with W3C trace context, writes a local
//! OTLP recording, and analyses it.
//!
//! ```no_run
//! fn main() -> Result<(), ringtrace::Error> {
//!     let _guard = ringtrace::init()?; // node, daemon, directory from the environment
//!     let _span = tracing::info_span!("handle_request", request.id = "req-1").entered();
//!     tracing::info!(bytes = 512, "read block");
//!     Ok(())
//! }
//! ```
//!
//! Across processes:
//!
//! ```no_run
//! use ringtrace::propagation::{self, TraceContext};
//! use ringtrace::SpanExt;
//! # let mut headers = std::collections::HashMap::<String, String>::new();
//! // caller, inside its span:
//! if let Some(cx) = ringtrace::current_context() {
//!     propagation::inject(&cx, &mut headers);
//! }
//! // callee:
//! let span = tracing::info_span!("serve", otel.kind = "server");
//! if let Some(cx) = propagation::extract(&headers) {
//!     span.set_remote_parent(&cx);
//! }
//! ```
//!
//! ## Crates
//! - [`ringtrace_core`]: ids, clock, records, identity, propagation, OTLP messages;
//! - `ringtrace-subscriber` (feature `subscriber`, default): the layer, drain and sinks;
//! - `ringtrace-analysis` (feature `analysis`): readers and analyses.
//!
//! ## Feature flags
//! - `subscriber` (default): capture.
//! - `analysis`: re-exports `ringtrace-analysis` as `ringtrace::analysis`.
//! - `http`: `Injector`/`Extractor` for `http::HeaderMap`.
//! - `otlp`: export to Jaeger, Tempo or any OpenTelemetry Collector over OTLP gRPC or
//!   HTTP/protobuf (`OTEL_EXPORTER_OTLP_*`), beside the recording.
//! - `otlp-tls`: `https://` collector endpoints.
//!
//! ## Performance
//! See `benches/README.md` for measured per-span costs against `tracing` alone and its peers.
//!
//! The README's Rust snippets are compiled as this crate's doc tests (`cargo test --doc`), so
//! they cannot drift from the API.
#![deny(missing_docs)]

/// The README's Rust snippets, as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use ringtrace_core as core;
pub use ringtrace_core::propagation;
pub use ringtrace_core::{Identity, SpanId, TraceId};

/// One assembled span as an OTLP span message, exactly as the recording stores it.
#[cfg(feature = "subscriber")]
pub use ringtrace_subscriber::encode::span as encode_span;
#[cfg(feature = "subscriber")]
pub use ringtrace_subscriber::{
    current_context, init, Builder, Error, EventData, FnSink, Guard, Handle, RecordingSink, ResourceInfo,
    RingLayer, RingSubscriber, Sampler, Sink, SinkError, SinkLosses, SpanData, SpanExt, Stats, Value,
    LOSS_SPAN_NAME, MAX_EVENTS_PER_SPAN,
};

/// The OTLP exporter's configuration and counters (feature `otlp`).
#[cfg(feature = "otlp")]
pub use ringtrace_subscriber::otlp;

/// Readers and analyses of recordings (feature `analysis`).
#[cfg(feature = "analysis")]
pub use ringtrace_analysis as analysis;
