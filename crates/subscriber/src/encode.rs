//! Assembled spans to OTLP messages, following the conventions of `tracing-opentelemetry`
//! and the OpenTelemetry semantic conventions.
//!
//! | OTLP | from |
//! |---|---|
//! | resource `service.name` / `host.name` | daemon / node |
//! | resource `process.pid`, `telemetry.sdk.*` | the process, ringtrace |
//! | resource `ringtrace.dropped_spans` … | cumulative loss counters ([`Stats`]) |
//! | span name | `otel.name` field, else the callsite name |
//! | span kind | `otel.kind` field (`server`, `client`, `producer`, `consumer`, `internal`) |
//! | status | `otel.status_code` (`ok`/`error`) + `otel.status_message`; else error when an ERROR event was recorded |
//! | attributes | the span's fields, `request.id`, `target`, `code.namespace`, `code.filepath`, `code.lineno`, `level`, `thread.id`, `thread.name` |
//! | events | tracing events: name = the `message` field, attributes = other fields, `level`, `target` |

use ringtrace_core::otlp::{self, any_value, KeyValue};
use tracing_core::Level;

use crate::span_data::{EventData, ResourceInfo, SpanData, Value};
use crate::stats::Stats;

/// Resource attributes for a process.
pub fn resource(info: &ResourceInfo) -> otlp::Resource {
    let mut attributes = vec![
        KeyValue::string("service.name", &info.identity.daemon),
        KeyValue::string("host.name", &info.identity.node),
        KeyValue::int("process.pid", i64::from(info.pid)),
        KeyValue::string("telemetry.sdk.name", "ringtrace"),
        KeyValue::string("telemetry.sdk.language", "rust"),
        KeyValue::string("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
    ];
    attributes.extend(counter_attributes(&info.stats));
    otlp::Resource { attributes, dropped_attributes_count: 0 }
}

fn counter_attributes(s: &Stats) -> impl Iterator<Item = KeyValue> {
    let sat = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    [
        ("ringtrace.recorded_spans", s.recorded_spans),
        ("ringtrace.dropped_spans", s.dropped_spans),
        ("ringtrace.dropped_closes", s.dropped_closes),
        ("ringtrace.dropped_events", s.dropped_events),
        ("ringtrace.dropped_updates", s.dropped_updates),
        ("ringtrace.unclosed_spans", s.unclosed_spans),
        ("ringtrace.orphan_records", s.orphan_records),
        ("ringtrace.propagation_malformed", s.propagation_malformed),
    ]
    .into_iter()
    .map(move |(k, v)| KeyValue::int(k, sat(v)))
}

/// One `TracesData` message holding `batch` (possibly empty: a counters-only frame).
pub fn traces_data(batch: &[SpanData], info: &ResourceInfo) -> otlp::TracesData {
    otlp::TracesData {
        resource_spans: vec![otlp::ResourceSpans {
            resource: Some(resource(info)),
            scope_spans: vec![otlp::ScopeSpans {
                scope: Some(otlp::InstrumentationScope {
                    name: "ringtrace".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans: batch.iter().map(span).collect(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

fn value(v: &Value) -> any_value::Value {
    match v {
        Value::I64(v) => any_value::Value::IntValue(*v),
        Value::U64(v) => match i64::try_from(*v) {
            Ok(i) => any_value::Value::IntValue(i),
            Err(_) => any_value::Value::StringValue(v.to_string()),
        },
        Value::F64(v) => any_value::Value::DoubleValue(*v),
        Value::Bool(v) => any_value::Value::BoolValue(*v),
        Value::Str(s) => any_value::Value::StringValue(s.clone()),
    }
}

fn level_str(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => "INFO",
        Level::WARN => "WARN",
        _ => "ERROR",
    }
}

fn kind(v: Option<&Value>) -> otlp::SpanKind {
    let Some(Value::Str(s)) = v else { return otlp::SpanKind::Internal };
    match s.to_ascii_lowercase().as_str() {
        "server" => otlp::SpanKind::Server,
        "client" => otlp::SpanKind::Client,
        "producer" => otlp::SpanKind::Producer,
        "consumer" => otlp::SpanKind::Consumer,
        _ => otlp::SpanKind::Internal,
    }
}

const RESERVED_FIELDS: [&str; 4] = ["otel.name", "otel.kind", "otel.status_code", "otel.status_message"];

fn status(s: &SpanData) -> Option<otlp::Status> {
    let message = match s.field("otel.status_message") {
        Some(v) => v.to_string(),
        None => String::new(),
    };
    let code = match s.field("otel.status_code") {
        Some(Value::Str(c)) if c.eq_ignore_ascii_case("error") => otlp::StatusCode::Error,
        Some(Value::Str(c)) if c.eq_ignore_ascii_case("ok") => otlp::StatusCode::Ok,
        _ if s.events.iter().any(|e| *e.meta.level() == Level::ERROR) => otlp::StatusCode::Error,
        _ => otlp::StatusCode::Unset,
    };
    (code != otlp::StatusCode::Unset || !message.is_empty())
        .then_some(otlp::Status { message, code: code as i32 })
}

fn event(e: &EventData) -> otlp::Event {
    let mut name = None;
    let mut attributes = Vec::with_capacity(e.fields.len() + 2);
    for (k, v) in &e.fields {
        if *k == "message" && name.is_none() {
            name = Some(v.to_string());
        } else {
            attributes.push(KeyValue::new(*k, value(v)));
        }
    }
    attributes.push(KeyValue::string("level", level_str(e.meta.level())));
    attributes.push(KeyValue::string("target", e.meta.target()));
    otlp::Event {
        time_unix_nano: e.unix_ns,
        name: name.unwrap_or_else(|| e.meta.name().to_owned()),
        attributes,
        dropped_attributes_count: 0,
    }
}

/// One span as OTLP.
pub fn span(s: &SpanData) -> otlp::Span {
    let meta = s.meta;
    let mut attributes = Vec::with_capacity(s.fields.len() + 8);
    for (k, v) in &s.fields {
        if RESERVED_FIELDS.contains(k) || *k == ringtrace_core::propagation::REQUEST_ID_KEY {
            continue;
        }
        attributes.push(KeyValue::new(*k, value(v)));
    }
    if let Some(r) = &s.request_id {
        attributes.push(KeyValue::string(ringtrace_core::propagation::REQUEST_ID_KEY, r.as_ref()));
    }
    attributes.push(KeyValue::string("target", meta.target()));
    if let Some(m) = meta.module_path() {
        attributes.push(KeyValue::string("code.namespace", m));
    }
    if let Some(f) = meta.file() {
        attributes.push(KeyValue::string("code.filepath", f));
    }
    if let Some(l) = meta.line() {
        attributes.push(KeyValue::int("code.lineno", i64::from(l)));
    }
    attributes.push(KeyValue::string("level", level_str(meta.level())));
    attributes.push(KeyValue::int("thread.id", i64::try_from(s.thread_id).unwrap_or(i64::MAX)));
    if !s.thread_name.is_empty() {
        attributes.push(KeyValue::string("thread.name", s.thread_name.as_ref()));
    }
    if s.unclosed {
        attributes.push(KeyValue::bool("ringtrace.unclosed", true));
    }
    // W3C flags in bits 0-7; bit 8 says the parent-is-remote bit 9 is known.
    let mut flags = u32::from(s.sampled) | 0x100;
    if s.parent_is_remote {
        flags |= 0x200;
    }
    otlp::Span {
        trace_id: s.trace_id.to_bytes().to_vec(),
        span_id: s.span_id.to_bytes().to_vec(),
        trace_state: String::new(),
        parent_span_id: s.parent_span_id.map(|p| p.to_bytes().to_vec()).unwrap_or_default(),
        flags,
        name: s.name().into_owned(),
        kind: kind(s.field("otel.kind")) as i32,
        start_time_unix_nano: s.start_unix_ns,
        end_time_unix_nano: s.end_unix_ns,
        attributes,
        dropped_attributes_count: 0,
        events: s.events.iter().map(event).collect(),
        dropped_events_count: 0,
        links: s
            .links
            .iter()
            .map(|l| otlp::Link {
                trace_id: l.trace_id.to_bytes().to_vec(),
                span_id: l.span_id.to_bytes().to_vec(),
                flags: 0x101,
                ..Default::default()
            })
            .collect(),
        dropped_links_count: 0,
        status: status(s),
    }
}
