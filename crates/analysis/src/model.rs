//! The span model every reader produces and every analysis consumes.
//!
//! A [`Dataset`] is a flat list of [`Span`]s plus the [`Process`]es that recorded them. It does
//! not depend on the input format: a ringtrace recording, an OpenTelemetry Collector file and a
//! Jaeger JSON document of the same trace give equal spans (up to what each format can carry).

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;

use foldhash::{HashMap, HashMapExt};
use ringtrace_core::{SpanId, TraceId};

/// An attribute value, as OTLP's `AnyValue` carries it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// UTF-8 string.
    Str(String),
    /// Signed 64-bit integer.
    Int(i64),
    /// Double.
    Float(f64),
    /// Boolean.
    Bool(bool),
    /// Raw bytes (OTLP `bytesValue`; base64 in JSON inputs, decoded here).
    Bytes(Vec<u8>),
    /// Array of values.
    Array(Vec<Value>),
    /// Nested key/value list, in recorded order.
    Map(Vec<(String, Value)>),
}

impl Value {
    /// The string, when this is a [`Value::Str`].
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, when this is a [`Value::Int`] or a string holding a decimal integer.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
}

/// Strings print as they are; bytes as lowercase hex; arrays as `[a, b]`; maps as `{k: v}`.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => f.write_str(s),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Bytes(bytes) => bytes.iter().try_for_each(|b| write!(f, "{b:02x}")),
            Value::Array(values) => {
                f.write_str("[")?;
                for (i, v) in values.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Value::Map(pairs) => {
                f.write_str("{")?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

/// The role of a span in a call, as OTLP defines it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpanKind {
    /// Not given.
    #[default]
    Unspecified,
    /// An operation inside a process.
    Internal,
    /// The server side of a synchronous call.
    Server,
    /// The client side of a synchronous call.
    Client,
    /// The sender of an asynchronous message.
    Producer,
    /// The receiver of an asynchronous message.
    Consumer,
}

impl SpanKind {
    /// The lowercase name Jaeger uses in its `span.kind` tag (`"unspecified"` for none).
    pub fn as_str(self) -> &'static str {
        match self {
            SpanKind::Unspecified => "unspecified",
            SpanKind::Internal => "internal",
            SpanKind::Server => "server",
            SpanKind::Client => "client",
            SpanKind::Producer => "producer",
            SpanKind::Consumer => "consumer",
        }
    }
}

impl fmt::Display for SpanKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A span's final status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Status {
    /// Not set: the default, meaning "no error reported".
    #[default]
    Unset,
    /// Explicitly marked successful.
    Ok,
    /// Failed.
    Error {
        /// The developer-facing description; may be empty.
        message: String,
    },
}

impl Status {
    /// Whether the span failed.
    pub fn is_error(&self) -> bool {
        matches!(self, Status::Error { .. })
    }
}

/// A timed event inside a span (a `tracing` event, or a Jaeger log).
#[derive(Clone, Debug, PartialEq)]
pub struct SpanEvent {
    /// Event name (a Jaeger log's `event` field; `"log"` when it has none).
    pub name: String,
    /// When it happened, Unix nanoseconds.
    pub time_unix_ns: u64,
    /// The event's fields.
    pub attributes: Vec<(String, Value)>,
}

/// A link from a span to another span, possibly in another trace.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanLink {
    /// The linked span's trace.
    pub trace_id: TraceId,
    /// The linked span.
    pub span_id: SpanId,
    /// The link's attributes (for Jaeger references beyond the parent: `jaeger.ref_type`).
    pub attributes: Vec<(String, Value)>,
}

/// One finished span, tagged with where it ran.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// The trace (end-to-end request) the span belongs to.
    pub trace_id: TraceId,
    /// The span's own id.
    pub span_id: SpanId,
    /// The parent span, `None` for a root. The parent may be absent from the dataset.
    pub parent_span_id: Option<SpanId>,
    /// Operation name (the `tracing` span name, Jaeger's `operationName`).
    pub name: String,
    /// The `tracing` target (usually the module path), from the `target` attribute.
    pub target: Option<String>,
    /// The machine: the process's `host.name`.
    pub node: String,
    /// The process role: the process's `service.name`.
    pub daemon: String,
    /// The span's role in a call.
    pub kind: SpanKind,
    /// Final status.
    pub status: Status,
    /// Start, Unix nanoseconds.
    pub start_unix_ns: u64,
    /// End, Unix nanoseconds.
    pub end_unix_ns: u64,
    /// The application request id (`request.id` attribute), the same on every span of a request.
    pub request_id: Option<String>,
    /// Source location, `"file:line"` (or just the file), from `code.filepath`/`code.lineno`.
    pub location: Option<String>,
    /// Every attribute as recorded, including those also surfaced as fields above
    /// (`target`, `request.id`, `code.*`), in recorded order.
    pub attributes: Vec<(String, Value)>,
    /// Timed events, in recorded order.
    pub events: Vec<SpanEvent>,
    /// Links to other spans.
    pub links: Vec<SpanLink>,
    /// Index of the recording process in [`Dataset::processes`].
    pub process: usize,
}

/// Appends to `out` the method of a span of `target` and `name`: `target::name`; without a
/// target (or an empty one), `daemon: name` when `daemon` is given
/// ([`Span::qualified_method`]), else the name alone ([`Span::method`]). For methods made from
/// parts, as a store's columns hold them.
pub(crate) fn push_method(out: &mut String, target: Option<&str>, daemon: Option<&str>, name: &str) {
    match (target.filter(|t| !t.is_empty()), daemon) {
        (Some(target), _) => {
            out.push_str(target);
            out.push_str("::");
        }
        (None, Some(daemon)) => {
            out.push_str(daemon);
            out.push_str(": ");
        }
        (None, None) => {}
    }
    out.push_str(name);
}

/// The attributes every [compact](Span::compact) span keeps: they name a peer nobody traced.
pub const KEPT_WHEN_COMPACT: [&str; 3] = ["peer.service", "db.system", "server.address"];

/// Whether a [compact](Span::compact) span keeps the attribute `key`; `io_call`: the span has
/// `io.op`, and keeps what the call is made of too.
pub fn kept_when_compact(io_call: bool, key: &str) -> bool {
    KEPT_WHEN_COMPACT.contains(&key) || io_call && crate::io::attr::ALL.contains(&key)
}

impl Span {
    /// A span with these ids, name and times and every other field empty: an internal span of
    /// process 0 on node `unknown`, daemon `unknown_service`, status unset, no attributes,
    /// events or links. Fill the rest with struct update syntax:
    /// `Span { node: "node-1".into(), ..Span::new(trace, span, None, "read", 0, 10) }`.
    pub fn new(
        trace_id: TraceId,
        span_id: SpanId,
        parent_span_id: Option<SpanId>,
        name: impl Into<String>,
        start_unix_ns: u64,
        end_unix_ns: u64,
    ) -> Self {
        Self {
            trace_id,
            span_id,
            parent_span_id,
            name: name.into(),
            target: None,
            node: "unknown".into(),
            daemon: "unknown_service".into(),
            kind: SpanKind::Internal,
            status: Status::Unset,
            start_unix_ns,
            end_unix_ns,
            request_id: None,
            location: None,
            attributes: Vec::new(),
            events: Vec::new(),
            links: Vec::new(),
            process: 0,
        }
    }

    /// End minus start; zero when the end precedes the start.
    pub fn duration_ns(&self) -> u64 {
        self.end_unix_ns.saturating_sub(self.start_unix_ns)
    }

    /// `"{target}::{name}"`, or just the name when the span has no target: the method that
    /// frequency profiles count.
    pub fn method(&self) -> String {
        let mut method = String::new();
        push_method(&mut method, self.target.as_deref(), None, &self.name);
        method
    }

    /// The method as profiles count it: [`Span::method`] when the span has a target (a
    /// ringtrace recording's module path already names the code), else `"{daemon}: {name}"`, so
    /// same-named operations of different services (`POST` in two services) stay apart.
    pub fn qualified_method(&self) -> String {
        let mut method = String::new();
        push_method(&mut method, self.target.as_deref(), Some(&self.daemon), &self.name);
        method
    }

    /// Drops what no view reads, so that a large input takes a fraction of the memory: events,
    /// links, and attributes but those naming a peer nobody traced ([`KEPT_WHEN_COMPACT`], which
    /// `deps` draws) and, in a span with `io.op`, those the I/O call is made of
    /// (`docs/io-records.md`). Target, request id and location are fields of their own and
    /// stay.
    pub fn compact(&mut self) {
        let io_call = self.attribute(crate::io::attr::OP).is_some();
        self.attributes.retain(|(k, _)| kept_when_compact(io_call, k));
        self.events = Vec::new();
        self.links = Vec::new();
    }

    /// The attribute named `key`, if recorded.
    pub fn attribute(&self, key: &str) -> Option<&Value> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Whether `other` is this span recorded again — the same file read twice, or a batch a
    /// collector retried: every field equal except [`Span::process`], which only numbers the
    /// processes in reading order. Every view counts such a copy once.
    pub fn is_copy_of(&self, other: &Span) -> bool {
        // Destructured so that a new field cannot be forgotten here.
        let Span {
            trace_id,
            span_id,
            parent_span_id,
            name,
            target,
            node,
            daemon,
            kind,
            status,
            start_unix_ns,
            end_unix_ns,
            request_id,
            location,
            attributes,
            events,
            links,
            process: _,
        } = self;
        *trace_id == other.trace_id
            && *span_id == other.span_id
            && *parent_span_id == other.parent_span_id
            && *start_unix_ns == other.start_unix_ns
            && *end_unix_ns == other.end_unix_ns
            && *kind == other.kind
            && *name == other.name
            && *target == other.target
            && *node == other.node
            && *daemon == other.daemon
            && *status == other.status
            && *request_id == other.request_id
            && *location == other.location
            && *attributes == other.attributes
            && *events == other.events
            && *links == other.links
    }

    /// A hash of everything [`Span::is_copy_of`] compares, for finding copies without keeping
    /// the spans.
    pub fn content_hash(&self) -> u64 {
        let mut h = DefaultHasher::new();
        (self.trace_id, self.span_id, self.parent_span_id).hash(&mut h);
        (self.start_unix_ns, self.end_unix_ns, self.kind).hash(&mut h);
        (&self.name, &self.target, &self.node, &self.daemon).hash(&mut h);
        match &self.status {
            Status::Unset => 0u8.hash(&mut h),
            Status::Ok => 1u8.hash(&mut h),
            Status::Error { message } => (2u8, message).hash(&mut h),
        }
        (&self.request_id, &self.location).hash(&mut h);
        hash_attributes(&self.attributes, &mut h);
        self.events.len().hash(&mut h);
        for e in &self.events {
            (&e.name, e.time_unix_ns).hash(&mut h);
            hash_attributes(&e.attributes, &mut h);
        }
        self.links.len().hash(&mut h);
        for l in &self.links {
            (l.trace_id, l.span_id).hash(&mut h);
            hash_attributes(&l.attributes, &mut h);
        }
        h.finish()
    }
}

/// Hashes key/value pairs; nested values are walked with a stack, not recursion.
fn hash_attributes(attributes: &[(String, Value)], h: &mut DefaultHasher) {
    attributes.len().hash(h);
    let mut stack: Vec<&Value> = Vec::new();
    for (k, v) in attributes {
        k.hash(h);
        stack.push(v);
        while let Some(v) = stack.pop() {
            match v {
                Value::Str(s) => (0u8, s).hash(h),
                Value::Int(i) => (1u8, i).hash(h),
                Value::Float(x) => (2u8, x.to_bits()).hash(h),
                Value::Bool(b) => (3u8, b).hash(h),
                Value::Bytes(b) => (4u8, b).hash(h),
                Value::Array(values) => {
                    (5u8, values.len()).hash(h);
                    stack.extend(values.iter().rev());
                }
                Value::Map(pairs) => {
                    (6u8, pairs.len()).hash(h);
                    for (k, v) in pairs.iter().rev() {
                        k.hash(h);
                        stack.push(v);
                    }
                }
            }
        }
    }
}

/// Finds copies of spans ([`Span::is_copy_of`]) as they stream past, keeping a hash of each
/// distinct span rather than the span: about 40 bytes per span. Two different spans with the
/// same trace and span id are mistaken for copies only if their 64-bit content hashes collide.
#[derive(Debug, Default)]
pub struct CopyFilter {
    first: HashMap<(TraceId, SpanId), u64>,
    more: HashMap<(TraceId, SpanId), Vec<u64>>,
}

impl CopyFilter {
    /// An empty filter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `span` is the first of its kind; `false` for a copy of a span seen before.
    pub fn first_seen(&mut self, span: &Span) -> bool {
        let key = (span.trace_id, span.span_id);
        let hash = span.content_hash();
        match self.first.get(&key) {
            None => {
                self.first.insert(key, hash);
                true
            }
            Some(&h) if h == hash => false,
            Some(_) => {
                let more = self.more.entry(key).or_default();
                if more.contains(&hash) {
                    false
                } else {
                    more.push(hash);
                    true
                }
            }
        }
    }
}

/// A process that recorded spans: one OTLP resource, one ringtrace recording file, or one Jaeger
/// process.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Process {
    /// The machine (`host.name`).
    pub node: String,
    /// The process role (`service.name`).
    pub daemon: String,
    /// Operating-system process id (`process.pid`), when known.
    pub pid: Option<u32>,
    /// The file it was read from.
    pub source: PathBuf,
    /// Spans the process dropped because a buffer was full (`ringtrace.dropped_spans`).
    pub dropped_spans: u64,
    /// Events dropped (`ringtrace.dropped_events`).
    pub dropped_events: u64,
    /// Spans still open when the process stopped (`ringtrace.unclosed_spans`).
    pub unclosed_spans: u64,
    /// Incoming propagation headers that failed to parse (`ringtrace.propagation_malformed`).
    pub propagation_malformed: u64,
    /// The other resource attributes: everything except `service.name`, `host.name`,
    /// `process.pid` and the four counters above.
    pub attributes: Vec<(String, Value)>,
}

/// The resource attribute naming the machine a process ran on.
pub(crate) const HOST_ID: &str = "host.id";
/// The resource attribute naming the boot of the kernel a process ran under.
pub(crate) const BOOT_ID: &str = "ringtrace.boot_id";

impl Process {
    /// Its `ringtrace.boot_id` and `host.id` resource attributes, where they are text: which
    /// clock its times come from (`causality::one_clock`).
    pub(crate) fn clock_ids(&self) -> (Option<&str>, Option<&str>) {
        let attribute = |key: &str| self.attributes.iter().find(|(k, _)| k == key)?.1.as_str();
        (attribute(BOOT_ID), attribute(HOST_ID))
    }
}

/// Spans and the processes that recorded them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dataset {
    /// Processes, in the order they were first read.
    pub processes: Vec<Process>,
    /// Spans, in the order they were read; [`Span::process`] indexes [`Dataset::processes`].
    pub spans: Vec<Span>,
}

impl Dataset {
    /// The indices into [`Dataset::spans`] of each trace's spans, in dataset order.
    pub fn traces(&self) -> BTreeMap<TraceId, Vec<usize>> {
        let mut traces: BTreeMap<TraceId, Vec<usize>> = BTreeMap::new();
        for (i, span) in self.spans.iter().enumerate() {
            traces.entry(span.trace_id).or_default().push(i);
        }
        traces
    }

    /// For each span, whether it is a copy of an earlier one ([`Span::is_copy_of`]): the rule
    /// every view uses to count a span read twice once.
    pub fn copies(&self) -> Vec<bool> {
        let all: Vec<usize> = (0..self.spans.len()).collect();
        self.copies_among(&all)
    }

    /// For each of `indices` (into [`Dataset::spans`]), whether it is a copy of a span earlier
    /// in `indices`. Invalid indices are never copies.
    pub fn copies_among(&self, indices: &[usize]) -> Vec<bool> {
        let mut first: HashMap<(TraceId, SpanId), usize> = HashMap::with_capacity(indices.len());
        let mut more: HashMap<(TraceId, SpanId), Vec<usize>> = HashMap::new();
        indices
            .iter()
            .map(|&i| {
                let Some(span) = self.spans.get(i) else { return false };
                let key = (span.trace_id, span.span_id);
                let Some(&f) = first.get(&key) else {
                    first.insert(key, i);
                    return false;
                };
                if span.is_copy_of(&self.spans[f]) {
                    return true;
                }
                let others = more.entry(key).or_default();
                if others.iter().any(|&o| span.is_copy_of(&self.spans[o])) {
                    return true;
                }
                others.push(i);
                false
            })
            .collect()
    }

    /// The spans that are not copies of earlier ones, with their indices.
    pub fn distinct_spans(&self) -> impl Iterator<Item = (usize, &Span)> {
        self.spans.iter().enumerate().zip(self.copies()).filter(|(_, copy)| !copy).map(|(s, _)| s)
    }

    /// The process that recorded `span`, if the index is valid.
    pub fn process_of(&self, span: &Span) -> Option<&Process> {
        self.processes.get(span.process)
    }

    /// Spans dropped by all processes together.
    pub fn dropped_spans_total(&self) -> u64 {
        self.processes.iter().map(|p| p.dropped_spans).sum()
    }

    /// Events dropped by all processes together.
    pub fn dropped_events_total(&self) -> u64 {
        self.processes.iter().map(|p| p.dropped_events).sum()
    }

    /// Spans left open at shutdown, over all processes.
    pub fn unclosed_spans_total(&self) -> u64 {
        self.processes.iter().map(|p| p.unclosed_spans).sum()
    }

    /// Malformed incoming propagation headers, over all processes.
    pub fn propagation_malformed_total(&self) -> u64 {
        self.processes.iter().map(|p| p.propagation_malformed).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(target: Option<&str>, start: u64, end: u64) -> Span {
        Span {
            target: target.map(str::to_owned),
            ..Span::new(TraceId::new(1).unwrap(), SpanId::new(1).unwrap(), None, "store", start, end)
        }
    }

    #[test]
    fn duration_saturates_and_method_joins_target() {
        assert_eq!(span(None, 10, 25).duration_ns(), 15);
        assert_eq!(span(None, 25, 10).duration_ns(), 0);
        assert_eq!(span(Some("demo::worker"), 0, 0).method(), "demo::worker::store");
        assert_eq!(span(None, 0, 0).method(), "store");
        assert_eq!(span(Some(""), 0, 0).method(), "store");
    }

    #[test]
    fn values_display() {
        let v = Value::Map(vec![
            ("a".into(), Value::Array(vec![Value::Int(1), Value::Float(2.5), Value::Bool(true)])),
            ("b".into(), Value::Bytes(vec![0x0f, 0xa0])),
            ("c".into(), Value::Str("x y".into())),
        ]);
        assert_eq!(v.to_string(), "{a: [1, 2.5, true], b: 0fa0, c: x y}");
    }

    #[test]
    fn totals_add_processes() {
        let p = |d| Process { dropped_spans: d, unclosed_spans: 1, ..Default::default() };
        let data = Dataset { processes: vec![p(3), p(4)], spans: vec![] };
        assert_eq!(data.dropped_spans_total(), 7);
        assert_eq!(data.unclosed_spans_total(), 2);
    }
}
