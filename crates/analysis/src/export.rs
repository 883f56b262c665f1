//! Writing a [`Dataset`] in the formats other tools read: OTLP protobuf (the OpenTelemetry file
//! exporter's length-delimited `TracesData` frames, as ringtrace's OTLP recordings are), OTLP/JSON
//! lines (the Collector's file exporter), and Jaeger's query-API JSON (what Jaeger UI loads).
//!
//! Each process becomes one OTLP resource (`service.name`, `host.name`, `process.pid`, its other
//! attributes and its loss counters); each span keeps its attributes, events, links, kind and
//! status. Jaeger has microsecond times: the nanoseconds below are cut; its processes carry the
//! counters as tags (`ringtrace.dropped_spans`, …), which the readers take back as counters.

use ringtrace_core::otlp::KeyValueExt as _;
use std::collections::BTreeMap;
use std::io::{self, Write};

use prost::Message;
use ringtrace_core::otlp::{self, any_value, AnyValue, KeyValue};
use serde_json::{json, Map, Value as Json};

use crate::model::{Dataset, Process, Span, SpanKind, Status, Value};

/// Spans per OTLP message (frame or line).
const SPANS_PER_MESSAGE: usize = 1000;

/// The formats [`write`](fn@write) writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Length-delimited OTLP `TracesData` protobuf frames.
    Otlp,
    /// OTLP/JSON, one `TracesData` object per line.
    OtlpJson,
    /// Jaeger query-API JSON: `{"data": [trace, …]}`.
    Jaeger,
}

/// Writes `data` in `format`.
pub fn write(data: &Dataset, format: ExportFormat, out: &mut dyn Write) -> io::Result<()> {
    match format {
        ExportFormat::Otlp => write_otlp(data, out),
        ExportFormat::OtlpJson => write_otlp_json(data, out),
        ExportFormat::Jaeger => write_jaeger(data, out),
    }
}

/// The `TracesData` messages of `data`: per process, up to 1,000 spans each; a
/// process without spans still gets one (its counters).
pub fn traces_data(data: &Dataset) -> Vec<otlp::TracesData> {
    let mut by_process: Vec<Vec<&Span>> = vec![Vec::new(); data.processes.len()];
    for s in &data.spans {
        if let Some(list) = by_process.get_mut(s.process) {
            list.push(s);
        }
    }
    let mut messages = Vec::new();
    for (process, spans) in data.processes.iter().zip(by_process) {
        let chunks: Vec<&[&Span]> =
            if spans.is_empty() { vec![&[][..]] } else { spans.chunks(SPANS_PER_MESSAGE).collect() };
        for chunk in chunks {
            messages.push(otlp::TracesData {
                resource_spans: vec![otlp::ResourceSpans {
                    resource: Some(resource(process)),
                    scope_spans: vec![otlp::ScopeSpans {
                        scope: Some(otlp::InstrumentationScope {
                            name: "ringtrace".into(),
                            ..Default::default()
                        }),
                        spans: chunk.iter().map(|s| span(s)).collect(),
                        schema_url: String::new(),
                    }],
                    schema_url: String::new(),
                }],
            });
        }
    }
    messages
}

fn resource(p: &Process) -> otlp::Resource {
    let mut attributes =
        vec![KeyValue::string("service.name", &p.daemon), KeyValue::string("host.name", &p.node)];
    if let Some(pid) = p.pid {
        attributes.push(KeyValue::int("process.pid", i64::from(pid)));
    }
    attributes.extend(p.attributes.iter().map(|(k, v)| key_value(k, v)));
    attributes.extend(counters(p).map(|(key, value)| KeyValue::int(key, value)));
    otlp::Resource { attributes, ..Default::default() }
}

/// The loss counters the model keeps for a process, as the attributes readers take them from,
/// unless its attributes hold them already.
fn counters(p: &Process) -> impl Iterator<Item = (&'static str, i64)> + '_ {
    [
        ("ringtrace.dropped_spans", p.dropped_spans),
        ("ringtrace.dropped_events", p.dropped_events),
        ("ringtrace.unclosed_spans", p.unclosed_spans),
        ("ringtrace.propagation_malformed", p.propagation_malformed),
    ]
    .into_iter()
    .filter(|(key, _)| !p.attributes.iter().any(|(k, _)| k == key))
    .map(|(key, value)| (key, i64::try_from(value).unwrap_or(i64::MAX)))
}

fn any(v: &Value) -> AnyValue {
    let value = match v {
        Value::Str(s) => any_value::Value::StringValue(s.clone()),
        Value::Int(i) => any_value::Value::IntValue(*i),
        Value::Float(x) => any_value::Value::DoubleValue(*x),
        Value::Bool(b) => any_value::Value::BoolValue(*b),
        Value::Bytes(b) => any_value::Value::BytesValue(b.clone()),
        Value::Array(values) => {
            any_value::Value::ArrayValue(otlp::ArrayValue { values: values.iter().map(any).collect() })
        }
        Value::Map(pairs) => any_value::Value::KvlistValue(otlp::KeyValueList {
            values: pairs.iter().map(|(k, v)| key_value(k, v)).collect(),
        }),
    };
    AnyValue { value: Some(value) }
}

fn key_value(key: &str, v: &Value) -> KeyValue {
    KeyValue { key: key.to_owned(), value: Some(any(v)), ..Default::default() }
}

fn kind(k: SpanKind) -> otlp::SpanKind {
    match k {
        SpanKind::Unspecified => otlp::SpanKind::Unspecified,
        SpanKind::Internal => otlp::SpanKind::Internal,
        SpanKind::Server => otlp::SpanKind::Server,
        SpanKind::Client => otlp::SpanKind::Client,
        SpanKind::Producer => otlp::SpanKind::Producer,
        SpanKind::Consumer => otlp::SpanKind::Consumer,
    }
}

fn span(s: &Span) -> otlp::Span {
    otlp::Span {
        trace_id: s.trace_id.to_bytes().to_vec(),
        span_id: s.span_id.to_bytes().to_vec(),
        parent_span_id: s.parent_span_id.map(|p| p.to_bytes().to_vec()).unwrap_or_default(),
        name: s.name.clone(),
        kind: kind(s.kind) as i32,
        start_time_unix_nano: s.start_unix_ns,
        end_time_unix_nano: s.end_unix_ns,
        attributes: s.attributes.iter().map(|(k, v)| key_value(k, v)).collect(),
        events: s
            .events
            .iter()
            .map(|e| otlp::Event {
                time_unix_nano: e.time_unix_ns,
                name: e.name.clone(),
                attributes: e.attributes.iter().map(|(k, v)| key_value(k, v)).collect(),
                dropped_attributes_count: 0,
            })
            .collect(),
        links: s
            .links
            .iter()
            .map(|l| otlp::Link {
                trace_id: l.trace_id.to_bytes().to_vec(),
                span_id: l.span_id.to_bytes().to_vec(),
                attributes: l.attributes.iter().map(|(k, v)| key_value(k, v)).collect(),
                ..Default::default()
            })
            .collect(),
        status: match &s.status {
            Status::Unset => None,
            Status::Ok => Some(otlp::Status { message: String::new(), code: otlp::StatusCode::Ok as i32 }),
            Status::Error { message } => {
                Some(otlp::Status { message: message.clone(), code: otlp::StatusCode::Error as i32 })
            }
        },
        ..Default::default()
    }
}

/// Length-delimited `TracesData` frames.
pub fn write_otlp(data: &Dataset, out: &mut dyn Write) -> io::Result<()> {
    let mut buf = Vec::new();
    for message in traces_data(data) {
        buf.clear();
        message.encode_length_delimited(&mut buf).map_err(io::Error::other)?;
        out.write_all(&buf)?;
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The OTLP/JSON form of a value: 64-bit integers as strings, bytes as base64.
fn any_json(v: &AnyValue) -> Json {
    match &v.value {
        None => json!({}),
        Some(any_value::Value::StringValue(s)) => json!({ "stringValue": s }),
        Some(any_value::Value::BoolValue(b)) => json!({ "boolValue": b }),
        Some(any_value::Value::IntValue(i)) => json!({ "intValue": i.to_string() }),
        Some(any_value::Value::DoubleValue(x)) if x.is_finite() => json!({ "doubleValue": x }),
        Some(any_value::Value::DoubleValue(x)) => json!({ "doubleValue": x.to_string() }),
        Some(any_value::Value::BytesValue(b)) => json!({ "bytesValue": base64(b) }),
        Some(any_value::Value::ArrayValue(a)) => {
            json!({ "arrayValue": { "values": a.values.iter().map(any_json).collect::<Vec<_>>() } })
        }
        Some(any_value::Value::KvlistValue(kv)) => {
            json!({ "kvlistValue": { "values": kvs_json(&kv.values) } })
        }
        // An index into a profile's string table (the profiles signal's), kept as it is.
        Some(any_value::Value::StringValueStrindex(i)) => json!({ "stringValueStrindex": i }),
    }
}

fn kvs_json(kvs: &[KeyValue]) -> Vec<Json> {
    kvs.iter()
        .map(|kv| json!({ "key": kv.key, "value": kv.value.as_ref().map(any_json).unwrap_or_else(|| json!({})) }))
        .collect()
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn span_json(s: &otlp::Span) -> Json {
    let mut m = Map::new();
    m.insert("traceId".into(), json!(hex(&s.trace_id)));
    m.insert("spanId".into(), json!(hex(&s.span_id)));
    if !s.parent_span_id.is_empty() {
        m.insert("parentSpanId".into(), json!(hex(&s.parent_span_id)));
    }
    m.insert("name".into(), json!(s.name));
    m.insert("kind".into(), json!(s.kind));
    m.insert("startTimeUnixNano".into(), json!(s.start_time_unix_nano.to_string()));
    m.insert("endTimeUnixNano".into(), json!(s.end_time_unix_nano.to_string()));
    m.insert("attributes".into(), json!(kvs_json(&s.attributes)));
    let events: Vec<Json> = s
        .events
        .iter()
        .map(|e| {
            json!({
                "timeUnixNano": e.time_unix_nano.to_string(),
                "name": e.name,
                "attributes": kvs_json(&e.attributes),
            })
        })
        .collect();
    m.insert("events".into(), json!(events));
    let links: Vec<Json> = s
        .links
        .iter()
        .map(|l| json!({ "traceId": hex(&l.trace_id), "spanId": hex(&l.span_id), "attributes": kvs_json(&l.attributes) }))
        .collect();
    m.insert("links".into(), json!(links));
    if let Some(status) = &s.status {
        m.insert("status".into(), json!({ "code": status.code, "message": status.message }));
    }
    Json::Object(m)
}

/// OTLP/JSON lines: one `TracesData` object per line.
pub fn write_otlp_json(data: &Dataset, out: &mut dyn Write) -> io::Result<()> {
    for message in traces_data(data) {
        let resource_spans: Vec<Json> = message
            .resource_spans
            .iter()
            .map(|rs| {
                json!({
                    "resource": { "attributes": kvs_json(rs.resource.as_ref().map_or(&[][..], |r| &r.attributes)) },
                    "scopeSpans": rs.scope_spans.iter().map(|ss| json!({
                        "scope": { "name": ss.scope.as_ref().map_or("", |s| s.name.as_str()) },
                        "spans": ss.spans.iter().map(span_json).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        serde_json::to_writer(&mut *out, &json!({ "resourceSpans": resource_spans }))?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// A Jaeger tag (or log field) for a value.
fn jaeger_tag(key: &str, v: &Value) -> Json {
    match v {
        Value::Str(s) => json!({ "key": key, "type": "string", "value": s }),
        Value::Int(i) => json!({ "key": key, "type": "int64", "value": i }),
        Value::Float(x) if x.is_finite() => json!({ "key": key, "type": "float64", "value": x }),
        Value::Bool(b) => json!({ "key": key, "type": "bool", "value": b }),
        other => json!({ "key": key, "type": "string", "value": other.to_string() }),
    }
}

fn jaeger_span(s: &Span, process_id: &str) -> Json {
    let mut tags: Vec<Json> = s.attributes.iter().map(|(k, v)| jaeger_tag(k, v)).collect();
    if s.kind != SpanKind::Unspecified {
        tags.push(json!({ "key": "span.kind", "type": "string", "value": s.kind.as_str() }));
    }
    match &s.status {
        Status::Error { message } => {
            tags.push(json!({ "key": "error", "type": "bool", "value": true }));
            tags.push(json!({ "key": "otel.status_code", "type": "string", "value": "ERROR" }));
            if !message.is_empty() {
                tags.push(json!({ "key": "otel.status_description", "type": "string", "value": message }));
            }
        }
        Status::Ok => tags.push(json!({ "key": "otel.status_code", "type": "string", "value": "OK" })),
        Status::Unset => {}
    }
    let mut references = Vec::new();
    if let Some(parent) = s.parent_span_id {
        references.push(
            json!({ "refType": "CHILD_OF", "traceID": s.trace_id.to_string(), "spanID": parent.to_string() }),
        );
    }
    for l in &s.links {
        references.push(json!({ "refType": "FOLLOWS_FROM", "traceID": l.trace_id.to_string(), "spanID": l.span_id.to_string() }));
    }
    let logs: Vec<Json> = s
        .events
        .iter()
        .map(|e| {
            let mut fields = vec![json!({ "key": "event", "type": "string", "value": e.name })];
            fields.extend(e.attributes.iter().map(|(k, v)| jaeger_tag(k, v)));
            json!({ "timestamp": e.time_unix_ns / 1000, "fields": fields })
        })
        .collect();
    json!({
        "traceID": s.trace_id.to_string(),
        "spanID": s.span_id.to_string(),
        "operationName": s.name,
        "references": references,
        "startTime": s.start_unix_ns / 1000,
        "duration": s.duration_ns() / 1000,
        "tags": tags,
        "logs": logs,
        "processID": process_id,
        "warnings": null,
    })
}

/// Jaeger query-API JSON: `{"data": [trace, …]}`, one trace per trace id, each with the
/// processes its spans come from (`p1`, `p2`, … in order of first appearance).
pub fn write_jaeger(data: &Dataset, out: &mut dyn Write) -> io::Result<()> {
    let mut traces: BTreeMap<ringtrace_core::TraceId, Vec<&Span>> = BTreeMap::new();
    for s in &data.spans {
        traces.entry(s.trace_id).or_default().push(s);
    }
    out.write_all(b"{\"data\":[")?;
    for (n, (trace_id, spans)) in traces.iter().enumerate() {
        let mut process_ids: Vec<usize> = Vec::new();
        let mut json_spans = Vec::with_capacity(spans.len());
        for s in spans {
            let k = match process_ids.iter().position(|p| *p == s.process) {
                Some(k) => k,
                None => {
                    process_ids.push(s.process);
                    process_ids.len() - 1
                }
            };
            json_spans.push(jaeger_span(s, &format!("p{}", k + 1)));
        }
        let mut processes = Map::new();
        for (k, &p) in process_ids.iter().enumerate() {
            let process = data.processes.get(p);
            let mut tags = Vec::new();
            if let Some(process) = process {
                tags.push(json!({ "key": "host.name", "type": "string", "value": process.node }));
                if let Some(pid) = process.pid {
                    tags.push(json!({ "key": "process.pid", "type": "int64", "value": pid }));
                }
                tags.extend(process.attributes.iter().map(|(k, v)| jaeger_tag(k, v)));
                tags.extend(
                    counters(process)
                        .map(|(key, value)| json!({ "key": key, "type": "int64", "value": value })),
                );
            }
            let service = process.map_or("unknown_service", |p| p.daemon.as_str());
            processes.insert(format!("p{}", k + 1), json!({ "serviceName": service, "tags": tags }));
        }
        if n > 0 {
            out.write_all(b",")?;
        }
        let trace = json!({
            "traceID": trace_id.to_string(),
            "spans": json_spans,
            "processes": processes,
            "warnings": null,
        });
        serde_json::to_writer(&mut *out, &trace)?;
    }
    out.write_all(b"],\"total\":0,\"limit\":0,\"offset\":0,\"errors\":null}\n")
}

#[cfg(test)]
mod tests {
    use super::base64;

    #[test]
    fn base64_matches_the_rfc_examples() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), want);
        }
    }
}
