//! OTLP/JSON (the OTLP specification's JSON mapping) as the OpenTelemetry Collector's file
//! exporter writes it: one `TracesData` object per line.
//!
//! The mapping differs from plain proto3 JSON in that trace and span ids are hex strings, not
//! base64. Keys are lowerCamelCase; 64-bit integers may be strings or numbers; enums may be
//! integers or their names (`"SPAN_KIND_SERVER"`); `bytesValue` is base64 and is decoded into
//! [`Value::Bytes`](crate::Value::Bytes). Unknown keys are ignored, as the specification requires.
//! Each object is converted into the prost [`otlp::TracesData`] so that both OTLP encodings share
//! one conversion into the model.

use std::fmt;

use ringtrace_core::otlp::{self, any_value};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use super::encoding::{base64_decode, hex_decode};
use super::otlp::ProcessTable;
use super::{json_error, Batch, LineCounter, Position, ReadError};

/// Reads every JSON value in `text` (JSON lines, or concatenated or pretty-printed objects).
pub(crate) fn read_otlp_json(
    table: &mut ProcessTable<'_>,
    text: &[u8],
    f: &mut dyn FnMut(Batch<'_>),
) -> Result<(), ReadError> {
    let path = table.source();
    let mut stream = serde_json::Deserializer::from_slice(text).into_iter::<JTracesData>();
    let mut lines = LineCounter::new(text);
    loop {
        // The offset is where the previous value ended: skip whitespace to find this one's line.
        let end_of_previous = stream.byte_offset();
        let start = text[end_of_previous..]
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .map_or(text.len(), |i| end_of_previous + i);
        let Some(next) = stream.next() else { return Ok(()) };
        let data = next.map_err(|e| json_error(path, &e))?;
        let position = Position::Line { line: lines.line_at(start), column: None };
        table.emit_traces_data(data.into(), &position, f)?;
    }
}

/// Accepts `null` for any defaultable field, as proto3 JSON does.
pub(super) fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JTracesData {
    #[serde(default, deserialize_with = "nullable")]
    resource_spans: Vec<JResourceSpans>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JResourceSpans {
    #[serde(default)]
    resource: Option<JResource>,
    #[serde(default, deserialize_with = "nullable", alias = "instrumentationLibrarySpans")]
    scope_spans: Vec<JScopeSpans>,
    #[serde(default, deserialize_with = "nullable")]
    schema_url: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JResource {
    #[serde(default, deserialize_with = "nullable")]
    attributes: Vec<JKeyValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JScopeSpans {
    #[serde(default, alias = "instrumentationLibrary")]
    scope: Option<JScope>,
    #[serde(default, deserialize_with = "nullable")]
    spans: Vec<JSpan>,
    #[serde(default, deserialize_with = "nullable")]
    schema_url: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JScope {
    #[serde(default, deserialize_with = "nullable")]
    name: String,
    #[serde(default, deserialize_with = "nullable")]
    version: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JSpan {
    #[serde(default, deserialize_with = "hex_bytes")]
    trace_id: Vec<u8>,
    #[serde(default, deserialize_with = "hex_bytes")]
    span_id: Vec<u8>,
    #[serde(default, deserialize_with = "nullable")]
    trace_state: String,
    #[serde(default, deserialize_with = "hex_bytes")]
    parent_span_id: Vec<u8>,
    #[serde(default, deserialize_with = "uint")]
    flags: u64,
    #[serde(default, deserialize_with = "nullable")]
    name: String,
    #[serde(default, deserialize_with = "span_kind")]
    kind: i32,
    #[serde(default, deserialize_with = "uint")]
    start_time_unix_nano: u64,
    #[serde(default, deserialize_with = "uint")]
    end_time_unix_nano: u64,
    #[serde(default, deserialize_with = "nullable")]
    attributes: Vec<JKeyValue>,
    #[serde(default, deserialize_with = "nullable")]
    events: Vec<JEvent>,
    #[serde(default, deserialize_with = "nullable")]
    links: Vec<JLink>,
    #[serde(default)]
    status: Option<JStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JEvent {
    #[serde(default, deserialize_with = "uint")]
    time_unix_nano: u64,
    #[serde(default, deserialize_with = "nullable")]
    name: String,
    #[serde(default, deserialize_with = "nullable")]
    attributes: Vec<JKeyValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JLink {
    #[serde(default, deserialize_with = "hex_bytes")]
    trace_id: Vec<u8>,
    #[serde(default, deserialize_with = "hex_bytes")]
    span_id: Vec<u8>,
    #[serde(default, deserialize_with = "nullable")]
    trace_state: String,
    #[serde(default, deserialize_with = "nullable")]
    attributes: Vec<JKeyValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JStatus {
    #[serde(default, deserialize_with = "nullable")]
    message: String,
    #[serde(default, deserialize_with = "status_code")]
    code: i32,
}

#[derive(Deserialize)]
struct JKeyValue {
    #[serde(default, deserialize_with = "nullable")]
    key: String,
    #[serde(default)]
    value: Option<JAnyValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JAnyValue {
    #[serde(default)]
    string_value: Option<String>,
    #[serde(default)]
    bool_value: Option<bool>,
    #[serde(default, deserialize_with = "some_int")]
    int_value: Option<i64>,
    #[serde(default, deserialize_with = "some_double")]
    double_value: Option<f64>,
    #[serde(default)]
    array_value: Option<JArrayValue>,
    #[serde(default)]
    kvlist_value: Option<JKeyValueList>,
    #[serde(default, deserialize_with = "some_base64")]
    bytes_value: Option<Vec<u8>>,
}

#[derive(Deserialize)]
struct JArrayValue {
    #[serde(default, deserialize_with = "nullable")]
    values: Vec<JAnyValue>,
}

#[derive(Deserialize)]
struct JKeyValueList {
    #[serde(default, deserialize_with = "nullable")]
    values: Vec<JKeyValue>,
}

impl From<JTracesData> for otlp::TracesData {
    fn from(j: JTracesData) -> Self {
        otlp::TracesData { resource_spans: j.resource_spans.into_iter().map(Into::into).collect() }
    }
}

impl From<JResourceSpans> for otlp::ResourceSpans {
    fn from(j: JResourceSpans) -> Self {
        otlp::ResourceSpans {
            resource: j.resource.map(|r| otlp::Resource {
                attributes: key_values(r.attributes),
                dropped_attributes_count: 0,
            }),
            scope_spans: j
                .scope_spans
                .into_iter()
                .map(|ss| otlp::ScopeSpans {
                    scope: ss.scope.map(|s| otlp::InstrumentationScope {
                        name: s.name,
                        version: s.version,
                        ..Default::default()
                    }),
                    spans: ss.spans.into_iter().map(Into::into).collect(),
                    schema_url: ss.schema_url,
                })
                .collect(),
            schema_url: j.schema_url,
        }
    }
}

impl From<JSpan> for otlp::Span {
    fn from(j: JSpan) -> Self {
        otlp::Span {
            trace_id: j.trace_id,
            span_id: j.span_id,
            trace_state: j.trace_state,
            parent_span_id: j.parent_span_id,
            flags: j.flags as u32,
            name: j.name,
            kind: j.kind,
            start_time_unix_nano: j.start_time_unix_nano,
            end_time_unix_nano: j.end_time_unix_nano,
            attributes: key_values(j.attributes),
            dropped_attributes_count: 0,
            events: j
                .events
                .into_iter()
                .map(|e| otlp::Event {
                    time_unix_nano: e.time_unix_nano,
                    name: e.name,
                    attributes: key_values(e.attributes),
                    dropped_attributes_count: 0,
                })
                .collect(),
            dropped_events_count: 0,
            links: j
                .links
                .into_iter()
                .map(|l| otlp::Link {
                    trace_id: l.trace_id,
                    span_id: l.span_id,
                    trace_state: l.trace_state,
                    attributes: key_values(l.attributes),
                    ..Default::default()
                })
                .collect(),
            dropped_links_count: 0,
            status: j.status.map(|s| otlp::Status { message: s.message, code: s.code }),
        }
    }
}

fn key_values(kvs: Vec<JKeyValue>) -> Vec<otlp::KeyValue> {
    kvs.into_iter().map(|kv| otlp::KeyValue { key: kv.key, value: kv.value.map(any_value) }).collect()
}

fn any_value(j: JAnyValue) -> otlp::AnyValue {
    use any_value::Value as V;
    let value = if let Some(s) = j.string_value {
        Some(V::StringValue(s))
    } else if let Some(b) = j.bool_value {
        Some(V::BoolValue(b))
    } else if let Some(i) = j.int_value {
        Some(V::IntValue(i))
    } else if let Some(x) = j.double_value {
        Some(V::DoubleValue(x))
    } else if let Some(a) = j.array_value {
        Some(V::ArrayValue(otlp::ArrayValue { values: a.values.into_iter().map(any_value).collect() }))
    } else if let Some(kv) = j.kvlist_value {
        Some(V::KvlistValue(otlp::KeyValueList { values: key_values(kv.values) }))
    } else {
        j.bytes_value.map(V::BytesValue)
    };
    otlp::AnyValue { value }
}

/// A hex id; `null` or `""` is empty.
fn hex_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let s = Option::<String>::deserialize(d)?.unwrap_or_default();
    hex_decode(&s).map_err(|e| de::Error::custom(format!("invalid hex id: {e}")))
}

fn some_base64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(s) => base64_decode(&s).map(Some).map_err(de::Error::custom),
    }
}

/// A number that may be written as a JSON number or a decimal string.
enum Num {
    U(u64),
    I(i64),
    F(f64),
    Null,
}

struct NumVisitor;

impl Visitor<'_> for NumVisitor {
    type Value = Num;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number or a string holding a number")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
        Ok(Num::U(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
        Ok(Num::I(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
        Ok(Num::F(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Num, E> {
        Ok(Num::Null)
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Num, E> {
        let t = s.trim();
        if let Ok(u) = t.parse::<u64>() {
            return Ok(Num::U(u));
        }
        if let Ok(i) = t.parse::<i64>() {
            return Ok(Num::I(i));
        }
        match t {
            "NaN" => Ok(Num::F(f64::NAN)),
            "Infinity" => Ok(Num::F(f64::INFINITY)),
            "-Infinity" => Ok(Num::F(f64::NEG_INFINITY)),
            _ => t
                .parse::<f64>()
                .map(Num::F)
                .map_err(|_| E::invalid_value(de::Unexpected::Str(s), &"a number")),
        }
    }
}

fn num<'de, D: Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
    d.deserialize_any(NumVisitor)
}

/// An unsigned 64-bit integer (timestamps, flags).
pub(super) fn uint<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match num(d)? {
        Num::U(u) => Ok(u),
        Num::Null => Ok(0),
        Num::I(i) => Err(de::Error::invalid_value(de::Unexpected::Signed(i), &"an unsigned integer")),
        Num::F(x) => Err(de::Error::invalid_value(de::Unexpected::Float(x), &"an unsigned integer")),
    }
}

fn some_int<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match num(d)? {
        Num::U(u) => i64::try_from(u)
            .map(Some)
            .map_err(|_| de::Error::invalid_value(de::Unexpected::Unsigned(u), &"a signed 64-bit integer")),
        Num::I(i) => Ok(Some(i)),
        Num::Null => Ok(None),
        Num::F(x) => Err(de::Error::invalid_value(de::Unexpected::Float(x), &"an integer")),
    }
}

fn some_double<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(match num(d)? {
        Num::U(u) => Some(u as f64),
        Num::I(i) => Some(i as f64),
        Num::F(x) => Some(x),
        Num::Null => None,
    })
}

/// An enum written as its number or its name; `names[i]` is the name of value `i`.
fn enum_value<'de, D: Deserializer<'de>>(d: D, names: &[&str], what: &'static str) -> Result<i32, D::Error> {
    struct EnumVisitor<'n> {
        names: &'n [&'n str],
        what: &'static str,
    }
    impl Visitor<'_> for EnumVisitor<'_> {
        type Value = i32;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a {} as a number or one of {}", self.what, self.names.join(", "))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i32, E> {
            i32::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i32, E> {
            i32::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
        }
        fn visit_unit<E: de::Error>(self) -> Result<i32, E> {
            Ok(0)
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<i32, E> {
            match self.names.iter().position(|n| *n == s) {
                Some(i) => Ok(i as i32),
                None => Err(E::invalid_value(de::Unexpected::Str(s), &self)),
            }
        }
    }
    d.deserialize_any(EnumVisitor { names, what })
}

fn span_kind<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    const NAMES: [&str; 6] = [
        "SPAN_KIND_UNSPECIFIED",
        "SPAN_KIND_INTERNAL",
        "SPAN_KIND_SERVER",
        "SPAN_KIND_CLIENT",
        "SPAN_KIND_PRODUCER",
        "SPAN_KIND_CONSUMER",
    ];
    enum_value(d, &NAMES, "span kind")
}

fn status_code<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    const NAMES: [&str; 3] = ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"];
    enum_value(d, &NAMES, "status code")
}
