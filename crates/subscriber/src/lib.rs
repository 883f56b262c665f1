//! # ringtrace-subscriber
//!
//! A [`tracing-subscriber`](tracing_subscriber) layer that records spans and events into
//! per-thread lock-free ring buffers, and a drain thread that copies the raw records to a local
//! recording (`<node>_<daemon>_<pid>.rtrace`), which readers ([`replay`], the analysis crate,
//! `ringtrace export`) assemble into spans tagged with **node**, **daemon** and **request**;
//! sinks (OTLP export, your own) get the spans assembled in the process.
//!
//! ```no_run
//! use ringtrace_subscriber::SpanExt;
//!
//! fn main() -> Result<(), ringtrace_subscriber::Error> {
//!     let _guard = ringtrace_subscriber::Builder::new().node("node-1").daemon("worker").init()?;
//!     let span = tracing::info_span!("handle", request.id = "req-7", bytes = 512);
//!     let _entered = span.enter();
//!     // Send this with an outgoing request; the callee calls `span.set_remote_parent(&cx)`.
//!     let cx = ringtrace_subscriber::current_context().expect("recorded");
//!     assert_eq!(cx.request_id.as_deref(), Some("req-7"));
//!     Ok(())
//! } // the guard flushes here
//! ```
//!
//! ## Choosing a collector
//! - [`RingLayer`] ([`Builder::build`]): a `tracing-subscriber` layer, beside other layers (`fmt`
//!   logs, other exporters) and under any filter, global or per layer.
//! - [`RingSubscriber`] ([`Builder::build_subscriber`], [`Builder::init_subscriber`]): a
//!   subscriber of its own, without the registry, for a process whose only consumer of spans is
//!   ringtrace; cheaper per span, filtered by a maximum level and target prefixes.
//! - [`init`] picks for you: the standalone subscriber, filtered by `RUST_LOG`'s target and level
//!   directives; the registry, `EnvFilter` and the layer when a directive names spans or fields.
//!
//! [`RingLayer`]'s docs compare the two and show how to combine the layer with other layers and
//! filters.
//!
//! ## How it works
//! - **Hot path** ([`RingLayer`]'s and [`RingSubscriber`]'s callbacks, module `local`): take the
//!   parent from the thread's entered-span stack and the lock-free open-span table, take ids from
//!   a per-thread generator, read raw TSC ticks, write the span's fixed-size records straight
//!   into the thread's ring (module `ring`, model-checked with loom) and publish them with one
//!   release store. No lock and no allocation after the thread's first span — except for spans
//!   carrying a `request.id` (one allocation, to keep the id for propagation). The only system
//!   call is a rare wake of a sleeping drain when a ring passes a quarter full (looked at once
//!   per eighth of a ring). Strings are capped at 4 KiB; longer ones go into chunk records.
//! - **Drain** (module `drain`): copies each ring's records (written by the hot path in the
//!   recording's 64-byte layout) into the raw recording, each cut after its last non-zero
//!   8 bytes (`ringtrace_core::raw`, documented byte by byte in `docs/raw-format.md`), with each
//!   callsite's metadata written once and the clock's anchor per pass; a thread of the
//!   recording's own writes it.
//! - **Assembler** (only when [`Sink`]s are configured: OTLP export, your own): a thread of its
//!   own that the drain hands each pass's records; it converts ticks, assembles spans across
//!   threads, resolves request ids and batches them to the sinks, so that neither assembly nor a
//!   slow sink holds up the rings or the recording. Readers of the recording run that same
//!   assembly ([`replay`]).
//! - **Exit**: a process that exits with its guard alive (`std::process::exit`, a leaked guard,
//!   `panic = "abort"`) has each collector shut down as the guard would (an `atexit` handler on
//!   Unix, the panic hook): everything recorded is written, with the counters.
//! - **Kill**: with a raw recording, rings live in files beside it (module [`ringfile`]) and the
//!   drain frees records only once the recording holds them, so a process killed at any moment
//!   (`kill -9`) leaves every record it published in one or the other; readers add the rings'
//!   leftovers and `ringtrace recover` appends them for good (module [`recover`]).
//! - **Loss**: a full ring drops the whole span or event and counts it; the first drop on a thread
//!   prints a warning; the totals ([`Stats`]) are in the recording (written when they change, at
//!   most every 100 ms, and at every flush and at shutdown) and printed at shutdown when anything
//!   was lost.
//!
//! ## Messages on stderr
//! ringtrace prints a line starting `ringtrace: ` to stderr when something is lost or goes
//! wrong, once per kind of trouble rather than once per span:
//! - a thread's first dropped record (a full ring or open-span table), once per thread;
//! - at shutdown, the totals ([`Stats`]) with node and daemon, when anything was lost, and that
//!   the guard's flush did not finish in time, when it did not;
//! - a sink's first failed export and any failed flush; the recording failing to be written
//!   (once per failure) and being written again;
//! - [`Handle::flush`]'s wait for OTLP delivery falling short;
//! - with the feature `otlp`: export failing (with the likely cause) and working again, the
//!   collector's first rejection, the first batch given up or left unconfirmed, the first
//!   span dropped by a full queue, spans still queued at shutdown and the exporter's totals
//!   when it lost any; without the feature, once, that `OTEL_EXPORTER_OTLP_ENDPOINT` is set but
//!   ignored.
//!
//! Every loss is counted in [`Stats`] and in the recording whether or not it is printed.
//! [`Builder::quiet`] or `RINGTRACE_QUIET=1` ([`QUIET_ENV`]; the builder wins) silences them
//! all for that collector; a [`RecordingSink`] made by hand has its own
//! [`quiet`](RecordingSink::quiet), and so has an OTLP exporter's configuration
//! (`OtlpConfig::quiet`, feature `otlp`).
//!
//! ## Identity
//! - node: [`Builder::node`], else `RINGTRACE_NODE`, else the hostname;
//! - daemon: [`Builder::daemon`], else `OTEL_SERVICE_NAME`, else the executable name;
//! - request: the trace id, plus the `request.id` field (or [`SpanExt::set_request_id`]) of the
//!   span or its nearest ancestor, carried to other processes by W3C `baggage`.
//!
//! ## Export to Jaeger, Tempo or an OpenTelemetry Collector
//! With the feature `otlp`, setting `OTEL_EXPORTER_OTLP_ENDPOINT` (or calling
//! `Builder::otlp_endpoint`) adds an OTLP exporter beside the recording: gRPC or
//! HTTP/protobuf, a bounded queue, retry with backoff, every lost span counted. See the `otlp`
//! module for the settings and the behaviour under failure.
//!
//! ## I/O calls
//! The wrappers of module [`io`] (files, TCP and UDP sockets, any reader or writer; tokio's
//! with the feature `io-tokio`) record each I/O call as a span of its own, a child of the
//! current span, with its operation, descriptor, path or addresses, bytes, error and caller
//! (`docs/io-records.md`), for the analysis's I/O views.
//!
//! ## Feature flags
//! - `otlp`: the OTLP exporter (tonic, hyper and a current-thread tokio runtime on its own thread).
//! - `otlp-tls`: `https://` collector endpoints (rustls; system roots or a CA file).
//! - `io-tokio`: `io::tokio`, the I/O wrappers of tokio's files and TCP sockets.
//!
//! The facade crate `ringtrace` forwards them.
//!
//! ## Performance
//! Per span with one integer field, entered, exited and dropped, every span really recorded, on
//! a 2-core VM (`cargo bench --bench span_cost` and `cargo bench -p ringtrace-bench-peers` in
//! the repository; machine, method and history in `benches/README.md`): registry +
//! [`RingLayer`] 112–120 ns against 65–68 ns for the registry with a no-op layer (about 10×
//! cheaper than `tracing-opentelemetry`); the standalone [`RingSubscriber`] (what [`init`]
//! installs for level and target directives) 65–75 ns; paused
//! under [`init`] or standalone, within 0.1 ns of no subscriber. Writing the raw recording (88
//! bytes a span), the drain, which writes it itself, spends about 40 ns of CPU per span (51 in
//! the same runs when a writer thread wrote it; assembling and encoding OTLP instead took
//! 190–200 for the two); the whole process, counting every thread, 87–99 ns per span
//! standalone, against 83–90 for fastrace writing its spans to a file in the same runs; two
//! threads recording 2 M spans/s in total lose nothing with the default rings
//! (`cargo bench --bench throughput`).
//!
//! Memory: each recording thread holds a ring of `ring_capacity` × 64 bytes (1 MiB by default;
//! up to 32 rings of exited threads are kept for reuse); the open-span table holds
//! `max_open_spans` × 64 bytes (4 MiB by default).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(unreachable_pub)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod builder;
mod callsites;
mod drain;
pub mod encode;
mod exit;
pub mod io;
mod layer;
mod local;
mod messages;
#[cfg(feature = "opentelemetry")]
pub mod otel;
#[cfg(feature = "otlp")]
pub mod otlp;
mod panic;
#[cfg(all(unix, not(ringtrace_loom)))]
pub mod recover;
mod ring;
mod ring_subscriber;
#[cfg(all(unix, not(ringtrace_loom)))]
pub mod ringfile;
pub mod sampler;

/// Reading raw recordings (`<node>_<daemon>_<pid>.rtrace`): the records a process captured,
/// assembled into spans by the same code its drain runs. The format is
/// [`ringtrace_core::raw`]; the analysis crate reads these files through here.
pub mod replay {
    pub use crate::drain::replay::{replay, Cut, RecordedProcess, Replay, ReplayError};
}
mod shared;
pub mod sink;
mod span_data;
mod stats;
mod sync;
mod wire;

pub use builder::{
    init, Builder, Error, Guard, Handle, DEFAULT_DIR, DEFAULT_FLUSH_TIMEOUT, DEFAULT_MAX_OPEN_SPANS,
    DEFAULT_RING_CAPACITY, DIR_ENV, EXCLUDE_ENV, INCLUDE_ENV, RING_CAPACITY_ENV, RING_FILES_ENV,
    SPAN_EVENT_LIMIT_ENV,
};
pub use layer::{current_context, RingLayer, SpanExt};
pub use messages::QUIET_ENV;
pub use ring_subscriber::RingSubscriber;
pub use sampler::Sampler;
pub use sink::{FlushWaiter, FnSink, RecordingSink, Sink, SinkError, SinkLosses, LOSS_SPAN_NAME};
pub use span_data::{EventData, LinkData, ResourceInfo, SpanData, Value, MAX_EVENTS_PER_SPAN};
pub use stats::Stats;

/// The per-thread ring, for `benches/ring.rs` (against `ringbuf`'s) only.
#[cfg(not(ringtrace_loom))]
#[doc(hidden)]
pub mod __bench {
    pub use crate::ring::{ring, Consumer, Producer};
}

/// The open-span table and the per-thread ring, for the loom model checks in
/// `tests/loom_table.rs` and `tests/loom_ring.rs` only.
#[cfg(ringtrace_loom)]
#[doc(hidden)]
pub mod __loom {
    pub use crate::local::table::*;
    pub use crate::ring::{ring, Consumer, Producer};
}
