//! # ringtrace
//!
//! Near-zero-cost tracing for distributed Rust services. Keep your `tracing` spans; ringtrace
//! records them into per-thread ring buffers, tags every span with **node**, **daemon** and
//! **request**, carries the request across processes with W3C trace context, writes a local
//! recording of the raw records (and exports OTLP when asked), and analyses it.
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
//! ## What is here
//! - Setting up: [`init`], [`Builder`] (every setting, with its environment variable), the
//!   [`Guard`] that flushes on drop, its [`Handle`] (pause, resume, flush), [`Error`].
//! - Collectors: [`RingLayer`] (a `tracing-subscriber` layer, beside your other layers and
//!   filters) or [`RingSubscriber`] (standalone, cheaper, no other layer); each type's docs say
//!   when to choose it.
//! - Identity and propagation: [`Identity`], [`TraceId`], [`SpanId`], [`TraceContext`],
//!   [`SpanExt`], [`current_context`] and the [`propagation`] module (W3C `traceparent` and
//!   `baggage`, a compact byte form).
//! - Where spans go: [`Sink`], [`FnSink`], [`RecordingSink`], the assembled [`SpanData`] with its
//!   [`EventData`], [`LinkData`] and [`Value`]s; [`encode_span`] and the [`proto`] messages for
//!   OTLP bytes; `otlp` (feature `otlp`) for the exporter; `otel` (feature `opentelemetry`) for
//!   OpenTelemetry's contexts, propagators and exporters.
//! - A killed process's leftovers: `recover` (Unix), which readers use and `ringtrace recover`
//!   runs; the raw format in `proto_raw`.
//! - Sampling and counts: [`Sampler`], [`Stats`] (every loss, counted).
//! - I/O calls as spans: the [`io`] wrappers of files, sockets and any reader or writer.
//!
//! The crates behind it: `ringtrace-core` (ids, clock, ring records, identity, propagation,
//! OTLP messages), `ringtrace-subscriber` (feature `subscriber`, default: collectors, drain and
//! sinks) and `ringtrace-analysis` (feature `analysis`: readers and analyses). Depend on one of
//! them directly for what the facade leaves out, such as the ring record layout.
//!
//! ## Feature flags
//! - `subscriber` (default): capture.
//! - `analysis`: re-exports `ringtrace-analysis` as `ringtrace::analysis`.
//! - `http`: `Injector`/`Extractor` for `http::HeaderMap`.
//! - `opentelemetry`: `otel`: `opentelemetry::Context` as a span's parent and back, the global
//!   propagator, any `opentelemetry_sdk` `SpanExporter` as a sink.
//! - `otlp`: export to Jaeger, Tempo or any OpenTelemetry Collector over OTLP gRPC or
//!   HTTP/protobuf (`OTEL_EXPORTER_OTLP_*`), beside the recording.
//! - `otlp-tls`: `https://` collector endpoints.
//! - `io-tokio`: `io::tokio`, the I/O wrappers of tokio's files and TCP sockets.
//!
//! ## Performance
//! Per recorded span (one integer field, entered, exited and dropped; a 2-core VM): registry +
//! [`RingLayer`] 112–120 ns, against 65–68 ns for the registry with a no-op layer and about
//! 1,100 ns with `tracing-opentelemetry`; the standalone [`RingSubscriber`], which [`init`]
//! installs unless the level directives name spans or fields, 65–75 ns; paused,
//! within 0.1 ns of no subscriber. The README's "Performance" section has the full table;
//! `benches/README.md` the machine, the method and how each figure came to be.
//!
//! The README's Rust snippets are compiled as this crate's doc tests (`cargo test --doc`), so
//! they cannot drift from the API.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(unreachable_pub)]
// The overview links the collectors' items, which only exist with the `subscriber` feature.
#![cfg_attr(not(feature = "subscriber"), allow(rustdoc::broken_intra_doc_links))]

/// The README's Rust snippets, as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use ringtrace_core::ids::IdError;
pub use ringtrace_core::propagation::TraceContext;
pub use ringtrace_core::{identity, propagation};
pub use ringtrace_core::{Error as CoreError, Identity, SpanId, TraceId};

/// OpenTelemetry protocol trace messages, as the OTLP exporter sends them, OTLP recordings and
/// `ringtrace export --format otlp` store them and [`encode_span`] returns them:
/// `opentelemetry-proto`'s types (`prost::Message` encodes and decodes them), with
/// `proto::KeyValueExt` for building attributes.
pub use ringtrace_core::otlp as proto;

/// The raw recording's format (`.rtrace`): its frames and records, as `docs/raw-format.md`
/// documents them; [`replay`] reads it into spans.
pub use ringtrace_core::raw as proto_raw;

/// One assembled span as an OTLP span message, exactly as the OTLP exporter sends it.
#[cfg(feature = "subscriber")]
pub use ringtrace_subscriber::encode::span as encode_span;
#[cfg(feature = "subscriber")]
pub use ringtrace_subscriber::{
    current_context, init, sampler::SamplerError, Builder, Error, EventData, FlushWaiter, FnSink, Guard,
    Handle, LinkData, RecordingSink, ResourceInfo, RingLayer, RingSubscriber, Sampler, Sink, SinkError,
    SinkLosses, SpanData, SpanExt, Stats, Value, LOSS_SPAN_NAME, MAX_EVENTS_PER_SPAN,
};

/// Reading raw recordings (`.rtrace`) into assembled spans.
#[cfg(feature = "subscriber")]
pub use ringtrace_subscriber::replay;

/// I/O calls recorded as spans: files, TCP and UDP sockets, any reader or writer (and tokio's,
/// feature `io-tokio`), with the attributes of `docs/io-records.md`.
#[cfg(feature = "subscriber")]
pub use ringtrace_subscriber::io;

/// OpenTelemetry's API and exporters: `opentelemetry::Context` parents and back, the global
/// propagator, any `opentelemetry_sdk` `SpanExporter` as a sink (feature `opentelemetry`).
#[cfg(feature = "opentelemetry")]
pub use ringtrace_subscriber::otel;

/// What a process killed while recording left in its ring files: read with its recording, or
/// appended to it for good (`ringtrace recover`).
#[cfg(all(feature = "subscriber", unix))]
pub use ringtrace_subscriber::recover;

/// The OTLP exporter's configuration and counters (feature `otlp`).
#[cfg(feature = "otlp")]
pub use ringtrace_subscriber::otlp;

/// Readers and analyses of recordings (feature `analysis`).
#[cfg(feature = "analysis")]
pub use ringtrace_analysis as analysis;
