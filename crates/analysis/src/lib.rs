//! # ringtrace-analysis
//!
//! Reads trace recordings and answers questions about them, with no tracing backend running.
//!
//! ## What it reads
//! - **ringtrace raw recordings**: the `<node>_<daemon>_<pid>.rtrace` files the subscriber
//!   writes, one per process — the ring records as captured, assembled here by the subscriber's
//!   own assembly (`ringtrace_subscriber::replay`; the format is `docs/raw-format.md`).
//! - **OTLP recordings**: `.otlp` files (earlier ringtrace recordings, the OTLP recording sink,
//!   `ringtrace export --format otlp`) — standard OTLP protobuf `TracesData` messages, each after
//!   its varint length. Every frame repeats the process's resource with cumulative loss
//!   counters, so the reader keeps the largest value of each counter.
//! - **OTLP/JSON**: one `TracesData` object per line, as the OpenTelemetry Collector's file
//!   exporter writes it.
//! - **Jaeger JSON**: the `/api/traces` response, which is also what Jaeger UI downloads — from
//!   a file, or fetched from a Jaeger query service by [`fetch_jaeger`] ([`read::jaeger_fetch`]).
//!
//! The format is detected from the content; see [`read`] for the rules and [`read_inputs`] for
//! files and directories. Readers never panic on bad input: they return a [`ReadError`] naming
//! the file, the position and what was expected.
//!
//! ## The model
//! A [`Dataset`] holds [`Span`]s and the [`Process`]es that recorded them. Each span carries the
//! three ringtrace tags — **node** (`host.name`), **daemon** (`service.name`) and **request**
//! (trace id plus the optional `request.id`) — and its method (`target::name`), times in Unix
//! nanoseconds, status, attributes, events and links. Each process carries the spans and events
//! it dropped, so analyses can say how complete the data is.
//!
//! ## Analyses
//! Analyses are functions from the model to plain result structs; they neither read files nor
//! print. Writers render the results.
//! - [`profile`]: frequency profiles — span counts per time bucket by node, daemon or method
//!   ([`frequency_profile`]), and the most frequent methods ([`top_methods`]); rendered as a
//!   table, CSV or JSON by [`profile_output`].
//! - [`tree`]: the span tree of one trace, marking where a request crosses processes.
//! - [`profile`] zoomed: [`time_profile`] filters by time range, node, daemon, request and
//!   operation ([`SpanFilter`]) and adds span time and self time per bucket; [`phase`] marks
//!   where a node's or daemon's method mix or rate changes sharply ([`detect_phases`]).
//! - [`anomaly`]: which node runs a daemon unlike its peers — method-mix divergence and latency
//!   per method, scored, ranked and explained ([`anomalies`]); [`anomaly_output`] renders it.
//! - [`flame`]: flame graphs of span time with total and self time, stacks within a process or
//!   along the request tree, scoped and pruned ([`flame_graph`]); [`flame_output`] writes
//!   folded stacks, d3-flame-graph JSON and SVG.
//! - [`report`]: every view above in one self-contained HTML page.
//!
//! Request causality — each view also a `ringtrace` subcommand, rendered by its `*_output`
//! module as a table and as JSON:
//! - [`causality`]: every request as a tree of spans across processes ([`build_causality`]),
//!   each edge local or cross-process, robust to duplicate ids, cycles, missing parents, bad
//!   durations and clock skew (estimated per node pair; corrected on request as Jaeger's
//!   adjuster does). The base of every view below.
//! - [`critical_path`](mod@critical_path): Jaeger UI's critical-path algorithm, section for section,
//!   except that orphan spans (parent missing) get a path where Jaeger UI gives them none.
//! - [`stats`]: Jaeger UI's trace statistics (count, total, self time, percent of trace) by
//!   service, operation or both, with p50/p90/p99 over many traces.
//! - [`deps`]: the daemon → daemon and node → node dependency graphs (calls, errors), by
//!   Jaeger's in-memory-store rule; also as Graphviz DOT.
//! - [`breakdown`](mod@breakdown): time per (client node, serving node, daemon, operation), per request and in
//!   total, and per operation type.
//! - [`bottlenecks`](mod@bottlenecks): (node, daemon, operation) ranked by critical-path time across requests or
//!   the slowest N % of them, with code locations.
//! - [`diff`](mod@diff): two traces or two groups of traces compared per (daemon, operation).
//!
//! The first three agree exactly with Jaeger UI on the reference traces in
//! `tests/oracles/` (the CLI's tests run every case).
//!
//! ## Output
//! Every `*_output` module renders one kind of result with the same shape of function, as
//! ripgrep's printers share one interface:
//! `write_<format>([what it refers to], result, [options], out: &mut dyn Write) -> io::Result<()>`.
//! - The [`Dataset`] and [`Causality`] first, when the result holds indices into them (critical
//!   paths, breakdowns, request trees); then the analysis's result (`&Bottlenecks`,
//!   `&FrequencyProfile`, ...); then the options of that format (`top`, `labels`, `measure`,
//!   ...); the writer last.
//! - `write_table` for people, `write_json` for tools, `write_csv` where a CSV exists; other
//!   formats are named after themselves (`write_dot`, `write_folded`, `write_d3_json`,
//!   `write_svg`, `write_tree`, `write_phases`).
//! - Every writer streams whole lines: a JSON document is followed by a newline. The
//!   `ringtrace` subcommands print exactly what the writers write.
//! - Where the JSON is built as a [`serde_json::Value`] first, the module also returns that
//!   value (`to_json`, `to_time_json`, `to_d3_json`) for callers that embed it.
//!
//! ## Example
//! ```
//! use ringtrace_analysis::{frequency_profile, profile_output, read_inputs, GroupBy};
//! use ringtrace_core::otlp::{self, KeyValue, KeyValueExt as _};
//!
//! // A one-frame recording: process "worker" on "node-1" with two spans 1.5 s apart.
//! let span = |id: u8, start_s: u64| otlp::Span {
//!     trace_id: vec![7; 16],
//!     span_id: vec![id; 8],
//!     name: "store".into(),
//!     start_time_unix_nano: start_s * 1_000_000_000,
//!     end_time_unix_nano: start_s * 1_000_000_000 + 2_000_000,
//!     attributes: vec![KeyValue::string("target", "demo::worker")],
//!     ..Default::default()
//! };
//! let frame = otlp::TracesData {
//!     resource_spans: vec![otlp::ResourceSpans {
//!         resource: Some(otlp::Resource {
//!             attributes: vec![
//!                 KeyValue::string("service.name", "worker"),
//!                 KeyValue::string("host.name", "node-1"),
//!                 KeyValue::int("ringtrace.dropped_spans", 3),
//!             ],
//!             ..Default::default()
//!         }),
//!         scope_spans: vec![otlp::ScopeSpans {
//!             spans: vec![span(1, 1_700_000_000), span(2, 1_700_000_001)],
//!             ..Default::default()
//!         }],
//!         ..Default::default()
//!     }],
//! };
//! let path = std::env::temp_dir().join(format!("ringtrace-doc-{}.otlp", std::process::id()));
//! let mut file = std::fs::File::create(&path)?;
//! otlp::write_delimited(&frame, &mut file)?;
//! drop(file);
//!
//! let data = read_inputs(&[&path])?;
//! std::fs::remove_file(&path)?;
//! assert_eq!(data.spans.len(), 2);
//! assert_eq!(data.spans[0].method(), "demo::worker::store");
//! assert_eq!(data.dropped_spans_total(), 3);
//!
//! let profile = frequency_profile(&data, GroupBy::Node, 1_000_000_000)?;
//! assert_eq!(profile.groups[0].key, "node-1");
//! assert_eq!(profile.groups[0].counts, vec![1, 1]);
//! profile_output::write_table(&profile, &mut std::io::stdout())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Feature flags
//! None yet.
//!
//! ## Performance
//! Release build on a 2-core AMD EPYC VM, criterion medians; `benches/README.md` at the
//! repository root keeps the tables, the commands and earlier runs.
//!
//! - **Top-level views** (`cargo bench -p ringtrace-analysis --bench top_views`) on 1,023,220
//!   synthetic spans (23,255 requests over 47 s; the dataset itself 1,034 MiB resident), time
//!   per run and peak resident memory above the dataset's: frequency profile by node 0.06 s /
//!   7 MiB, by method 0.24 s / 8 MiB; [`time_profile`] by method with span and self time
//!   0.32 s / 31 MiB; [`detect_phases`] 0.23 s / 16 MiB; [`anomalies`] in 5 s windows 0.41 s /
//!   33 MiB; [`flame_graph`] including the request trees 0.63 s / 89 MiB; the whole HTML
//!   [`report`] 3.4 s / 113 MiB. Working memory grows with the spans as a few machine words
//!   each, never as copies of them.
//! - **Request-causality views** (`cargo bench -p ringtrace-analysis --bench causality`):
//!   building the trees of 1,000,000 spans in 23,256 requests takes about 0.35 s; on top of
//!   that, critical paths 0.06 s, statistics 0.29 s, dependencies 0.29 s, breakdown 0.5 s,
//!   bottlenecks 0.16 s, diff 0.21 s. One request of 100,000 spans: its tree 25 ms, its
//!   critical path 6.4 ms.
//! - **Reading** has no benchmark; timed by hand on a recording of 1,000 frames × 1,000 spans
//!   with ten attributes each (265 MB), [`for_each_batch`] decodes and converts about 2 µs per
//!   span with memory bounded by one frame, and [`read_inputs`] about 7 µs per span, most of it
//!   the kernel handing out fresh pages for the retained spans (of the order of 1 KB each with
//!   ten attributes). JSON inputs are read whole before parsing. The `ringtrace` subcommands
//!   drop attributes, events and links while reading and peak at about 600 MB for a
//!   1,000,000-span recording.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![warn(unreachable_pub)]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod anomaly;
pub mod anomaly_output;
pub mod bottlenecks;
pub mod bottlenecks_output;
pub mod breakdown;
pub mod breakdown_output;
pub mod causality;
pub mod causality_output;
pub mod critical_path;
pub mod critical_path_output;
pub mod deps;
pub mod deps_output;
pub mod diff;
pub mod diff_output;
pub mod divergence;
pub mod envelope;
pub mod export;
pub mod filter;
pub mod flame;
pub mod flame_output;
pub mod io;
pub mod io_output;
pub mod markup;
pub mod model;
pub mod phase;
pub mod profile;
pub mod profile_output;
pub mod read;
/// What a process killed while recording left in its ring files, appended to its raw recording
/// (`ringtrace recover`). Readers already read it with the recording.
#[cfg(all(unix, not(ringtrace_loom)))]
pub use ringtrace_subscriber::recover;
pub mod report;
pub mod stats;
pub mod stats_output;
#[cfg(feature = "store")]
#[cfg_attr(docsrs, doc(cfg(feature = "store")))]
pub mod store;

#[cfg(feature = "store")]
#[cfg_attr(docsrs, doc(cfg(feature = "store")))]
pub mod engine;
mod text_layout;
pub mod time_format;
pub mod tree;

pub use anomaly::{
    anomalies, Anomalies, AnomalyBuilder, AnomalyError, AnomalyOptions, AnomalyReason, NodeAnomaly,
    ReasonKind, StreamedAnomalies,
};
pub use bottlenecks::{bottlenecks, Bottleneck, Bottlenecks};
pub use breakdown::{breakdown, Breakdown, BreakdownRow, OperationTotal, RequestBreakdown};
pub use causality::{
    build_causality, request_tree, slowest as slowest_of, CausalSpan, Causality, CausalityOptions,
    CausalityWarnings, ClockSkew, ParentLink, RequestTree, Slowest,
};
pub use critical_path::{critical_path, critical_paths, time_on_path, PathSection, TraceCriticalPath};
pub use deps::{dependency_graph, DependencyGraph, DependencyLink};
pub use diff::{diff, DiffBuilder, DiffRow, DiffSide, SideSummary, TraceDiff};
pub use filter::SpanFilter;
pub use flame::{flame_graph, FlameGraph, FlameScope, Frame, FrameLabel, RequestSelection, StackMode};
pub use model::{CopyFilter, Dataset, Process, Span, SpanEvent, SpanKind, SpanLink, Status, Value};
pub use phase::{detect_phases, MethodShift, PhaseChange, PhaseCounter, PhaseOptions};
pub use profile::{
    frequency_profile, time_profile, top_methods, FrequencyCounter, FrequencyProfile, GroupBy, GroupSeries,
    Measure, ProfileError, ProfileQuery, TimeProfile, TimeProfileBuilder, TimeSeries,
};
pub use read::{
    fetch_jaeger, for_each_batch, for_each_batch_as, for_each_batch_with, list_inputs, read_inputs,
    read_inputs_as, read_inputs_with, read_jaeger_bytes, Batch, Detail, FetchError, JaegerQuery, ReadError,
    ReadOutcome, ReadWarning, ReadWarningKind, Truncation,
};
pub use ringtrace_core::{SpanId, TraceId};
pub use stats::{
    self_times, self_times_in, statistics_of, trace_statistics, StatsGroupBy, StatsRow, TraceStatistics,
};
pub use tree::{render_tree, trace_tree, TreeLine};
