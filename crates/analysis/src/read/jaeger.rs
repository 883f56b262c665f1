//! Jaeger query-API JSON: the `/api/traces` response, which is also what Jaeger UI's
//! "Download JSON" saves, and the other shapes Jaeger UI loads: one trace object, a list of
//! them, or `data` holding one trace object.
//!
//! Times are microseconds and become nanoseconds. A span's parent is its first `CHILD_OF` or
//! `FOLLOWS_FROM` reference, in order, whose span is in the same trace object — Jaeger UI's
//! rule since v2.14 (before, it took only the first reference), except that reference types
//! are compared without regard to case. When no such reference names a span of the trace, the
//! first of them is still the parent, so the span reads as an orphan of the span it names. A
//! reference to the span itself is never its parent. Every other reference
//! becomes a [`SpanLink`] with a `jaeger.ref_type` attribute. Ids shorter than 32 or 16 hex
//! digits are left-padded with zeros. A process's node is its `host.name`, `hostname` or `ip`
//! tag, else its service name.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::Path;

use ringtrace_core::{SpanId, TraceId};
use serde::de::{self, value::MapAccessDeserializer, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::encoding::{base64_decode, hex_id};
use super::otlp::{process_from_attributes, surfaced_fields, ProcessTable};
use super::otlp_json::{nullable, uint};
use super::{json_error, Batch, Position, ReadError, ReadErrorKind};
use crate::model::{Process, Span, SpanEvent, SpanKind, SpanLink, Status, Value};

/// An error the query service reports in place of traces.
#[derive(Deserialize)]
struct JQueryError {
    #[serde(default)]
    code: serde_json::Value,
    #[serde(default)]
    msg: serde_json::Value,
}

#[derive(Deserialize)]
struct JTrace {
    #[serde(rename = "traceID", default, deserialize_with = "nullable")]
    trace_id: String,
    #[serde(default, deserialize_with = "nullable")]
    spans: Vec<JSpan>,
    #[serde(default, deserialize_with = "nullable")]
    processes: BTreeMap<String, JProcess>,
}

/// Where the trace objects of a document go as each is read: converted and emitted at once, so
/// that one trace object at a time is held besides the document's text, not all of them. A
/// document that turns out malformed further on has had its first traces emitted already; the
/// error still ends the read.
struct Emit<'t, 'p, 'f> {
    table: &'t mut ProcessTable<'p>,
    f: &'f mut dyn FnMut(Batch<'_>),
    /// Trace objects emitted so far.
    traces: usize,
    /// Why a trace object could not be converted; the parse stops there.
    failed: Option<ReadError>,
}

impl Emit<'_, '_, '_> {
    /// Converts and emits `trace`, the `index`th of the list at `prefix` (or the document's one
    /// trace object when `one`); a serde error that stops the parse when it cannot.
    fn trace<E: de::Error>(&mut self, trace: JTrace, prefix: &'static str, one: bool) -> Result<(), E> {
        let at = TracePath { prefix, one, index: self.traces };
        self.traces += 1;
        read_trace(self.table, trace, at, self.f).map_err(|e| {
            let message = e.to_string();
            self.failed = Some(e);
            E::custom(message)
        })
    }
}

/// A list of trace objects, one trace object or `null`, at JSON path `prefix`.
struct TracesAt<'e, 't, 'p, 'f> {
    emit: &'e mut Emit<'t, 'p, 'f>,
    prefix: &'static str,
}

/// Deserializes to whether the value was not `null`.
impl<'de> de::DeserializeSeed<'de> for TracesAt<'_, '_, '_, '_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TracesAt<'_, '_, '_, '_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of traces, one trace object, or null")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while let Some(trace) = seq.next_element::<JTrace>()? {
            self.emit.trace(trace, self.prefix, false)?;
        }
        Ok(true)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
        let trace = JTrace::deserialize(MapAccessDeserializer::new(map))?;
        self.emit.trace(trace, self.prefix, true)?;
        Ok(true)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
}

/// The oracle fixtures' envelope `{"trace": {"data": ...}}`: small documents, kept whole until
/// the end of the document, since a `data` anywhere in it wins.
#[derive(Deserialize)]
struct TraceEnvelope {
    #[serde(default)]
    data: Option<serde_json::Value>,
}

/// A whole document: a list of trace objects, or an object — `{"data": ...}` (with the query
/// service's `errors`), `{"trace": {"data": ...}}`, or one trace object. Returns the query
/// service's errors; a bare trace object's fields are emitted as one trace at the end.
struct Document<'e, 't, 'p, 'f>(&'e mut Emit<'t, 'p, 'f>);

impl<'de> de::DeserializeSeed<'de> for Document<'_, '_, '_, '_> {
    type Value = Vec<JQueryError>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<JQueryError>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Document<'_, '_, '_, '_> {
    type Value = Vec<JQueryError>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Jaeger document (an object or a list of traces)")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Vec<JQueryError>, A::Error> {
        TracesAt { emit: self.0, prefix: "" }.visit_seq(seq)?;
        Ok(Vec::new())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<JQueryError>, A::Error> {
        let emit = self.0;
        let mut errors = Vec::new();
        // `data` (not null) wins over `trace.data`, wherever each stands in the object.
        let (mut data_key, mut data) = (false, false);
        let mut trace_data: Option<serde_json::Value> = None;
        let mut bare = JTrace { trace_id: String::new(), spans: Vec::new(), processes: BTreeMap::new() };
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "data" if data_key => return Err(de::Error::duplicate_field("data")),
                "data" => {
                    data_key = true;
                    data = map.next_value_seed(TracesAt { emit: &mut *emit, prefix: "data" })?;
                }
                "trace" => {
                    trace_data = map.next_value::<Option<TraceEnvelope>>()?.and_then(|t| t.data);
                    trace_data = trace_data.filter(|d| !d.is_null());
                }
                "errors" => errors = map.next_value::<Option<Vec<JQueryError>>>()?.unwrap_or_default(),
                "traceID" => bare.trace_id = map.next_value::<Option<String>>()?.unwrap_or_default(),
                "spans" => bare.spans = map.next_value::<Option<Vec<JSpan>>>()?.unwrap_or_default(),
                "processes" => bare.processes = map.next_value::<Option<_>>()?.unwrap_or_default(),
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        match trace_data {
            _ if data => {}
            Some(serde_json::Value::Array(traces)) => {
                for trace in traces {
                    let trace = JTrace::deserialize(trace).map_err(de::Error::custom)?;
                    emit.trace(trace, "trace.data", false)?;
                }
            }
            Some(trace) => {
                let trace = JTrace::deserialize(trace).map_err(de::Error::custom)?;
                emit.trace(trace, "trace.data", true)?;
            }
            // A bare trace object; with the query service's errors and no `data`, the errors are
            // what the document says.
            None if errors.is_empty() => emit.trace(bare, "", true)?,
            None => {}
        }
        Ok(errors)
    }
}

#[derive(Deserialize)]
struct JSpan {
    #[serde(rename = "traceID", default, deserialize_with = "nullable")]
    trace_id: String,
    #[serde(rename = "spanID", default, deserialize_with = "nullable")]
    span_id: String,
    #[serde(rename = "operationName", default, deserialize_with = "nullable")]
    operation_name: String,
    #[serde(default, deserialize_with = "nullable")]
    references: Vec<JReference>,
    #[serde(rename = "startTime", default, deserialize_with = "uint")]
    start_time_us: u64,
    #[serde(rename = "duration", default, deserialize_with = "uint")]
    duration_us: u64,
    #[serde(default, deserialize_with = "nullable")]
    tags: Vec<JTag>,
    #[serde(default, deserialize_with = "nullable")]
    logs: Vec<JLog>,
    #[serde(rename = "processID", default, deserialize_with = "nullable")]
    process_id: String,
    #[serde(default)]
    process: Option<JProcess>,
}

#[derive(Deserialize)]
struct JReference {
    #[serde(rename = "refType", default, deserialize_with = "nullable")]
    ref_type: String,
    #[serde(rename = "traceID", default, deserialize_with = "nullable")]
    trace_id: String,
    #[serde(rename = "spanID", default, deserialize_with = "nullable")]
    span_id: String,
}

#[derive(Deserialize, Clone)]
struct JProcess {
    #[serde(rename = "serviceName", default, deserialize_with = "nullable")]
    service_name: String,
    #[serde(default, deserialize_with = "nullable")]
    tags: Vec<JTag>,
}

#[derive(Deserialize, Clone)]
struct JTag {
    #[serde(default, deserialize_with = "nullable")]
    key: String,
    #[serde(rename = "type", default, deserialize_with = "nullable")]
    kind: String,
    #[serde(default)]
    value: serde_json::Value,
}

#[derive(Deserialize)]
struct JLog {
    #[serde(rename = "timestamp", default, deserialize_with = "uint")]
    timestamp_us: u64,
    #[serde(default, deserialize_with = "nullable")]
    fields: Vec<JTag>,
}

/// Reads one Jaeger document; emits, per trace, one batch per process, each trace as soon as it
/// is parsed (the document is never held whole as trace objects); an error when the query
/// service reports errors and no trace.
pub(crate) fn read_jaeger(
    table: &mut ProcessTable<'_>,
    text: &[u8],
    f: &mut dyn FnMut(Batch<'_>),
) -> Result<(), ReadError> {
    let path = table.source().to_path_buf();
    let mut emit = Emit { table, f, traces: 0, failed: None };
    let mut de = serde_json::Deserializer::from_slice(text);
    let parsed = de::DeserializeSeed::deserialize(Document(&mut emit), &mut de).and_then(|errors| {
        de.end()?;
        Ok(errors)
    });
    let errors = match parsed {
        Ok(errors) => errors,
        Err(e) => return Err(emit.failed.take().unwrap_or_else(|| json_error(&path, &e))),
    };
    if !errors.is_empty() && emit.traces == 0 {
        let errors: Vec<String> = errors.iter().map(|e| format!("code {}: {}", e.code, e.msg)).collect();
        return Err(ReadError::new(
            &path,
            Some(Position::Path("errors".into())),
            ReadErrorKind::Invalid,
            format!("the query service reports errors instead of traces: {}", errors.join("; ")),
        ));
    }
    Ok(())
}

/// Where a trace object stands in its document, for naming its spans in errors.
#[derive(Clone, Copy)]
struct TracePath {
    prefix: &'static str,
    one: bool,
    /// Its index in the document's list of traces.
    index: usize,
}

impl TracePath {
    /// The JSON path of span `s` of this trace.
    fn span(self, s: usize) -> Position {
        let TracePath { prefix, one, index: t } = self;
        Position::Path(match (one, prefix) {
            (true, "") => format!("spans[{s}]"),
            (true, _) => format!("{prefix}.spans[{s}]"),
            (false, _) => format!("{prefix}[{t}].spans[{s}]"),
        })
    }
}

/// Converts one trace object's spans and emits them, one batch per process in the order the
/// processes first appear.
fn read_trace(
    table: &mut ProcessTable<'_>,
    trace: JTrace,
    at: TracePath,
    f: &mut dyn FnMut(Batch<'_>),
) -> Result<(), ReadError> {
    let path = table.source();
    let mut order = Vec::new();
    let mut by_id = BTreeMap::new();
    for (id, p) in &trace.processes {
        let index = table.intern(process(p, path));
        by_id.insert(id.as_str(), index);
        if !order.contains(&index) {
            order.push(index);
        }
    }
    // The spans of this trace object, for choosing parents among references.
    let present: HashSet<SpanId> = trace.spans.iter().filter_map(|s| span_id(&s.span_id, "").ok()).collect();
    let mut groups: BTreeMap<usize, Vec<Span>> = BTreeMap::new();
    for (s, span) in trace.spans.into_iter().enumerate() {
        let index = match (by_id.get(span.process_id.as_str()), &span.process) {
            (Some(&index), _) => index,
            (None, Some(p)) => table.intern(process(p, path)),
            (None, None) => {
                return Err(ReadError::new(
                    path,
                    Some(at.span(s)),
                    ReadErrorKind::Invalid,
                    format!("processID {:?} is not in the trace's processes", span.process_id),
                ))
            }
        };
        if !order.contains(&index) {
            order.push(index);
        }
        let converted = convert_span(span, &trace.trace_id, &present, index, table.get(index))
            .map_err(|what| ReadError::new(path, Some(at.span(s)), ReadErrorKind::Invalid, what))?;
        groups.entry(index).or_default().push(converted);
    }
    for index in order {
        let spans = groups.remove(&index).unwrap_or_default();
        f(Batch { process_index: index, process: table.get(index), spans });
    }
    Ok(())
}

fn process(p: &JProcess, source: &Path) -> Process {
    let attrs = tags(&p.tags);
    let node = ["host.name", "hostname", "ip"]
        .iter()
        .find_map(|key| attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.to_string()))
        .unwrap_or_else(|| p.service_name.clone());
    let mut process = process_from_attributes(attrs, source);
    process.node = node;
    process.daemon = p.service_name.clone();
    process
}

fn tags(tags: &[JTag]) -> Vec<(String, Value)> {
    tags.iter().map(|t| (t.key.clone(), tag_value(&t.kind, &t.value))).collect()
}

/// A tag's value by its declared type; a value that does not fit its type is kept by its JSON
/// type instead, so no tag is lost.
fn tag_value(kind: &str, v: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    let typed = match (kind.to_ascii_lowercase().as_str(), v) {
        ("string", J::String(s)) => Some(Value::Str(s.clone())),
        ("bool", J::Bool(b)) => Some(Value::Bool(*b)),
        ("bool", J::String(s)) => s.parse().ok().map(Value::Bool),
        ("int64", J::Number(n)) => n.as_i64().map(Value::Int),
        ("int64", J::String(s)) => s.trim().parse().ok().map(Value::Int),
        ("float64", J::Number(n)) => n.as_f64().map(Value::Float),
        ("float64", J::String(s)) => s.trim().parse().ok().map(Value::Float),
        ("binary", J::String(s)) => base64_decode(s).ok().map(Value::Bytes),
        _ => None,
    };
    typed.unwrap_or_else(|| json_value(v))
}

fn json_value(v: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match v {
        J::Null => Value::Str(String::new()),
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => Value::Str(s.clone()),
        J::Array(a) => Value::Array(a.iter().map(json_value).collect()),
        J::Object(o) => Value::Map(o.iter().map(|(k, v)| (k.clone(), json_value(v))).collect()),
    }
}

fn trace_id(hex: &str, what: &str) -> Result<TraceId, String> {
    let bytes = hex_id::<16>(hex).map_err(|e| format!("bad {what}: {e}"))?;
    TraceId::from_bytes(bytes).ok_or_else(|| format!("bad {what}: all zeros"))
}

fn span_id(hex: &str, what: &str) -> Result<SpanId, String> {
    let bytes = hex_id::<8>(hex).map_err(|e| format!("bad {what}: {e}"))?;
    SpanId::from_bytes(bytes).ok_or_else(|| format!("bad {what}: all zeros"))
}

/// Converts a span; `present` holds the ids of its trace object's spans.
fn convert_span(
    s: JSpan,
    trace_trace_id: &str,
    present: &HashSet<SpanId>,
    process_index: usize,
    process: &Process,
) -> Result<Span, String> {
    let hex = if s.trace_id.is_empty() { trace_trace_id } else { &s.trace_id };
    let trace = trace_id(hex, "traceID")?;
    let id = span_id(&s.span_id, "spanID")?;
    let References { parent, links } = references(&s.references, id, hex, present)?;
    let attributes = tags(&s.tags);
    let (target, request_id, location) = surfaced_fields(&attributes);
    let start_unix_ns = s.start_time_us.saturating_mul(1000);
    Ok(Span {
        trace_id: trace,
        span_id: id,
        parent_span_id: parent,
        name: s.operation_name,
        target,
        node: process.node.clone(),
        daemon: process.daemon.clone(),
        kind: span_kind(&attributes),
        status: status(&attributes),
        start_unix_ns,
        end_unix_ns: start_unix_ns.saturating_add(s.duration_us.saturating_mul(1000)),
        request_id,
        location,
        events: s.logs.iter().map(event).collect(),
        attributes,
        links,
        process: process_index,
    })
}

/// A span's references, sorted into its parent and its links.
struct References {
    parent: Option<SpanId>,
    links: Vec<SpanLink>,
}

/// The parent is the first `CHILD_OF` or `FOLLOWS_FROM` reference to another span of the trace
/// object, else the first such reference to any other span; every other reference is a link.
/// `hex` is the span's trace id, the default of a reference's.
fn references(
    references: &[JReference],
    id: SpanId,
    hex: &str,
    present: &HashSet<SpanId>,
) -> Result<References, String> {
    let ref_spans = references
        .iter()
        .enumerate()
        .map(|(i, r)| span_id(&r.span_id, &format!("references[{i}].spanID")))
        .collect::<Result<Vec<_>, _>>()?;
    let candidates: Vec<usize> = (0..references.len())
        .filter(|&i| {
            let kind = &references[i].ref_type;
            ref_spans[i] != id
                && (kind.eq_ignore_ascii_case("CHILD_OF") || kind.eq_ignore_ascii_case("FOLLOWS_FROM"))
        })
        .collect();
    let parent_ref =
        candidates.iter().copied().find(|&i| present.contains(&ref_spans[i])).or(candidates.first().copied());
    let mut parent = None;
    let mut links = Vec::new();
    for (i, r) in references.iter().enumerate() {
        let ref_span = ref_spans[i];
        if Some(i) == parent_ref {
            parent = Some(ref_span);
            continue;
        }
        let ref_trace_hex = if r.trace_id.is_empty() { hex } else { &r.trace_id };
        links.push(SpanLink {
            trace_id: trace_id(ref_trace_hex, &format!("references[{i}].traceID"))?,
            span_id: ref_span,
            attributes: vec![("jaeger.ref_type".to_owned(), Value::Str(r.ref_type.clone()))],
        });
    }
    Ok(References { parent, links })
}

/// The value of the tag `key`, if the span has it.
fn tag<'a>(attributes: &'a [(String, Value)], key: &str) -> Option<&'a Value> {
    attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// The span kind from the `span.kind` tag, in any case.
fn span_kind(attributes: &[(String, Value)]) -> SpanKind {
    match tag(attributes, "span.kind").map(|v| v.to_string().to_ascii_lowercase()).as_deref() {
        Some("internal") => SpanKind::Internal,
        Some("server") => SpanKind::Server,
        Some("client") => SpanKind::Client,
        Some("producer") => SpanKind::Producer,
        Some("consumer") => SpanKind::Consumer,
        _ => SpanKind::Unspecified,
    }
}

/// The status from the `error` tag (true or "true") and the `otel.status_*` tags.
fn status(attributes: &[(String, Value)]) -> Status {
    let get = |key: &str| tag(attributes, key);
    let message = get("otel.status_description").map(Value::to_string).unwrap_or_default();
    let error_tag = matches!(get("error"), Some(Value::Bool(true)))
        || matches!(get("error"), Some(Value::Str(s)) if s == "true");
    let status_code = get("otel.status_code").map(|v| v.to_string().to_ascii_uppercase());
    if error_tag || status_code.as_deref() == Some("ERROR") {
        Status::Error { message }
    } else if status_code.as_deref() == Some("OK") {
        Status::Ok
    } else {
        Status::Unset
    }
}

/// A log as an event named by its `event` field (else "log"), its other fields as attributes.
fn event(log: &JLog) -> SpanEvent {
    let mut fields = tags(&log.fields);
    let name = match fields.iter().position(|(k, _)| k == "event") {
        Some(i) => fields.remove(i).1.to_string(),
        None => "log".to_owned(),
    };
    SpanEvent { name, time_unix_ns: log.timestamp_us.saturating_mul(1000), attributes: fields }
}
