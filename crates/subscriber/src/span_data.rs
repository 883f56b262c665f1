//! Assembled spans: what the drain hands to sinks.

use std::borrow::Cow;
use std::sync::Arc;

use ringtrace_core::record::Meta;
use ringtrace_core::{Identity, SpanId, TraceId};

use crate::stats::Stats;

/// A field value, owned.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Signed integer.
    I64(i64),
    /// Unsigned integer.
    U64(u64),
    /// Float.
    F64(f64),
    /// Boolean.
    Bool(bool),
    /// String.
    Str(String),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::I64(v) => write!(f, "{v}"),
            Value::U64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(v) => f.write_str(v),
        }
    }
}

/// An event recorded inside a span.
#[derive(Debug, Clone)]
pub struct EventData {
    /// Callsite metadata (name, target, level, location).
    pub meta: Meta,
    /// When, Unix nanoseconds.
    pub unix_ns: u64,
    /// Thread that emitted the event.
    pub thread_id: u64,
    /// Field values, in callsite order.
    pub fields: Vec<(&'static str, Value)>,
}

/// A link to another span (`follows_from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkData {
    /// The linked span's trace.
    pub trace_id: TraceId,
    /// The linked span.
    pub span_id: SpanId,
}

/// A complete span.
#[derive(Debug, Clone)]
pub struct SpanData {
    /// Trace id.
    pub trace_id: TraceId,
    /// Span id.
    pub span_id: SpanId,
    /// Parent span id, local or remote.
    pub parent_span_id: Option<SpanId>,
    /// Whether the parent is in another process.
    pub parent_is_remote: bool,
    /// The sampled flag (from the remote parent; `true` for local roots).
    pub sampled: bool,
    /// Callsite metadata (name, target, module path, file, line, level).
    pub meta: Meta,
    /// Start, Unix nanoseconds.
    pub start_unix_ns: u64,
    /// End, Unix nanoseconds.
    pub end_unix_ns: u64,
    /// Thread that created the span.
    pub thread_id: u64,
    /// That thread's name (empty when unnamed).
    pub thread_name: Arc<str>,
    /// Field values: those given at creation in their callsite's order, then those recorded
    /// later (`Span::record`), in the order recorded.
    pub fields: Vec<(&'static str, Value)>,
    /// Events, in time order per thread.
    pub events: Vec<EventData>,
    /// Links.
    pub links: Vec<LinkData>,
    /// The request id: the span's own `request.id`, its remote parent's, or its nearest
    /// ancestor's.
    pub request_id: Option<Arc<str>>,
    /// The span was still open at shutdown; `end_unix_ns` is the shutdown time.
    pub unclosed: bool,
    /// Events beyond the span event limit ([`MAX_EVENTS_PER_SPAN`] unless configured) not kept
    /// (exported as OTLP's `dropped_events_count`).
    pub dropped_events: u32,
}

/// Events a span keeps by default, as OpenTelemetry's default span limit (set with
/// `OTEL_SPAN_EVENT_COUNT_LIMIT` or `Builder::span_event_limit`):
/// later ones are counted in [`SpanData::dropped_events`] and [`Stats::events_over_limit`](crate::Stats),
/// except a first `ERROR` event, kept so that the span's status still says error.
pub const MAX_EVENTS_PER_SPAN: usize = 128;

impl SpanData {
    /// The span's name: the `otel.name` field when set, else the callsite name.
    pub fn name(&self) -> Cow<'_, str> {
        match self.field("otel.name") {
            Some(Value::Str(s)) => Cow::Borrowed(s),
            Some(v) => Cow::Owned(v.to_string()),
            None => Cow::Borrowed(self.meta.name()),
        }
    }

    /// The last value recorded for field `name`.
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.fields.iter().rev().find(|(k, _)| *k == name).map(|(_, v)| v)
    }
}

/// The process that recorded a batch: its identity and loss counters so far.
#[derive(Debug, Clone)]
pub struct ResourceInfo {
    /// Node and daemon.
    pub identity: Identity,
    /// Process id.
    pub pid: u32,
    /// Totals so far (cumulative).
    pub stats: Stats,
}
