//! OTLP/JSON (the OTLP specification's JSON mapping) as the OpenTelemetry Collector's file
//! exporter writes it: one `TracesData` object per line; also Tempo's and Jaeger's api_v3
//! responses, which wrap one in `trace` or `result`.
//!
//! The mapping differs from plain proto3 JSON in that trace and span ids are hex strings, not
//! base64; both are accepted (Tempo writes base64), told apart by length: 32 or 16 characters
//! are hex, 24 or 22 (trace) and 12 or 11 (span) base64. Keys are lowerCamelCase or the
//! protobuf field names (`resource_spans`, `trace_id`, `string_value`), as the Collector's own
//! reader accepts; 64-bit integers may be strings or numbers; enums may be integers or their
//! names (`"SPAN_KIND_SERVER"`); `bytesValue` is base64 and is decoded into
//! [`Value::Bytes`](crate::Value::Bytes). Unknown keys are ignored, as the specification requires,
//! but a value without resource spans in any known place is an error.
//! Each object is converted into the prost [`otlp::TracesData`] so that both OTLP encodings share
//! one conversion into the model.

use std::collections::BTreeMap;
use std::fmt;

use ringtrace_core::otlp::{self, any_value};
use serde::de::{self, Deserializer, IgnoredAny, Visitor};
use serde::Deserialize;

use super::encoding::{base64_decode, hex_decode};
use super::otlp::ProcessTable;
use super::{
    json_error, Batch, Cut, LineCounter, Position, ReadError, ReadErrorKind, Truncation, UNDERSTOOD,
};

/// Reads every JSON value in `text` (JSON lines, or concatenated or pretty-printed objects).
/// With [`Truncation::Warn`], a last value cut short within its line is reported as a [`Cut`].
pub(crate) fn read_otlp_json(
    table: &mut ProcessTable<'_>,
    text: &[u8],
    truncation: Truncation,
    f: &mut dyn FnMut(Batch<'_>),
) -> Result<Option<Cut>, ReadError> {
    let path = table.source();
    let mut stream = serde_json::Deserializer::from_slice(text).into_iter::<JDocument>();
    let mut lines = LineCounter::new(text);
    let mut read = 0;
    loop {
        // The offset is where the previous value ended: skip whitespace to find this one's line.
        let end_of_previous = stream.byte_offset();
        let start = text[end_of_previous..]
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .map_or(text.len(), |i| end_of_previous + i);
        let Some(next) = stream.next() else { return Ok(None) };
        let line = lines.line_at(start);
        let position = Position::Line { line, column: None };
        let document = match next {
            Ok(document) => document,
            Err(e) if e.is_eof() && truncation == Truncation::Warn && !text[start..].contains(&b'\n') => {
                return Ok(Some(Cut {
                    position,
                    unit: "line",
                    read,
                    from_byte: start as u64,
                    ignored_bytes: (text.len() - start) as u64,
                }));
            }
            Err(e) => return Err(json_error(path, &e)),
        };
        let Some(data) = document.into_traces_data() else {
            let keys =
                serde_json::from_slice::<BTreeMap<String, IgnoredAny>>(&text[start..stream.byte_offset()])
                    .map(|keys| keys.into_keys().take(10).collect::<Vec<_>>().join(", "))
                    .unwrap_or_default();
            return Err(ReadError::new(
                path,
                Some(position),
                ReadErrorKind::UnknownFormat,
                format!("no spans in a shape this reader knows: found keys [{keys}]; {UNDERSTOOD}"),
            ));
        };
        table.emit_traces_data(data.into(), &position, f)?;
        read += 1;
    }
}

/// One JSON value of an OTLP/JSON file: `TracesData` itself, or wrapped as Tempo (`trace`) or
/// Jaeger's api_v3 (`result`) return it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JDocument {
    #[serde(default, deserialize_with = "present", alias = "resource_spans", alias = "batches")]
    resource_spans: Option<Vec<JResourceSpans>>,
    #[serde(default, deserialize_with = "present")]
    trace: Option<JTracesData>,
    #[serde(default, deserialize_with = "present")]
    result: Option<JTracesData>,
}

impl JDocument {
    /// The resource spans of every known place, or `None` when there is none.
    fn into_traces_data(self) -> Option<JTracesData> {
        if self.resource_spans.is_none() && self.trace.is_none() && self.result.is_none() {
            return None;
        }
        let mut resource_spans = self.resource_spans.unwrap_or_default();
        for inner in [self.trace, self.result].into_iter().flatten() {
            resource_spans.extend(inner.resource_spans);
        }
        Some(JTracesData { resource_spans })
    }
}

/// A key that is there, even as `null`, is `Some`: only a missing key is `None`.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Some(Option::<T>::deserialize(d)?.unwrap_or_default()))
}

/// Accepts `null` for any defaultable field, as proto3 JSON does.
pub(super) fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct JTracesData {
    #[serde(default, deserialize_with = "nullable", alias = "resource_spans", alias = "batches")]
    resource_spans: Vec<JResourceSpans>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JResourceSpans {
    #[serde(default)]
    resource: Option<JResource>,
    #[serde(
        default,
        deserialize_with = "nullable",
        alias = "scope_spans",
        alias = "instrumentationLibrarySpans",
        alias = "instrumentation_library_spans"
    )]
    scope_spans: Vec<JScopeSpans>,
    #[serde(default, deserialize_with = "nullable", alias = "schema_url")]
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
    #[serde(default, alias = "instrumentationLibrary", alias = "instrumentation_library")]
    scope: Option<JScope>,
    #[serde(default, deserialize_with = "nullable")]
    spans: Vec<JSpan>,
    #[serde(default, deserialize_with = "nullable", alias = "schema_url")]
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
    #[serde(default, deserialize_with = "trace_id", alias = "trace_id")]
    trace_id: Vec<u8>,
    #[serde(default, deserialize_with = "span_id", alias = "span_id")]
    span_id: Vec<u8>,
    #[serde(default, deserialize_with = "nullable", alias = "trace_state")]
    trace_state: String,
    #[serde(default, deserialize_with = "span_id", alias = "parent_span_id")]
    parent_span_id: Vec<u8>,
    #[serde(default, deserialize_with = "uint")]
    flags: u64,
    #[serde(default, deserialize_with = "nullable")]
    name: String,
    #[serde(default, deserialize_with = "span_kind")]
    kind: i32,
    #[serde(default, deserialize_with = "uint", alias = "start_time_unix_nano")]
    start_time_unix_nano: u64,
    #[serde(default, deserialize_with = "uint", alias = "end_time_unix_nano")]
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
    #[serde(default, deserialize_with = "uint", alias = "time_unix_nano")]
    time_unix_nano: u64,
    #[serde(default, deserialize_with = "nullable")]
    name: String,
    #[serde(default, deserialize_with = "nullable")]
    attributes: Vec<JKeyValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JLink {
    #[serde(default, deserialize_with = "trace_id", alias = "trace_id")]
    trace_id: Vec<u8>,
    #[serde(default, deserialize_with = "span_id", alias = "span_id")]
    span_id: Vec<u8>,
    #[serde(default, deserialize_with = "nullable", alias = "trace_state")]
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
    #[serde(default, alias = "string_value")]
    string_value: Option<String>,
    #[serde(default, alias = "bool_value")]
    bool_value: Option<bool>,
    #[serde(default, deserialize_with = "some_int", alias = "int_value")]
    int_value: Option<i64>,
    #[serde(default, deserialize_with = "some_double", alias = "double_value")]
    double_value: Option<f64>,
    #[serde(default, alias = "array_value")]
    array_value: Option<JArrayValue>,
    #[serde(default, alias = "kvlist_value")]
    kvlist_value: Option<JKeyValueList>,
    #[serde(default, deserialize_with = "some_base64", alias = "bytes_value")]
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
            resource: j
                .resource
                .map(|r| otlp::Resource { attributes: key_values(r.attributes), ..Default::default() }),
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
    kvs.into_iter()
        .map(|kv| otlp::KeyValue { key: kv.key, value: kv.value.map(any_value), ..Default::default() })
        .collect()
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

/// A 16-byte trace id, hex or base64; `null` or `""` is empty.
fn trace_id<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    id::<D, 16>(d)
}

/// An 8-byte span id, hex or base64; `null` or `""` is empty.
fn span_id<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    id::<D, 8>(d)
}

/// An id of `N` bytes: `2N` characters are hex; the lengths of `N` bytes in base64, padded or
/// not, are base64; any other length is decoded as hex if it can be, so that the error says how
/// many bytes it has.
fn id<'de, D: Deserializer<'de>, const N: usize>(d: D) -> Result<Vec<u8>, D::Error> {
    let s = Option::<String>::deserialize(d)?.unwrap_or_default();
    let padded = N.div_ceil(3) * 4;
    let unpadded = (N * 4).div_ceil(3);
    if s.len() != 2 * N && (s.len() == padded || s.len() == unpadded) {
        base64_decode(&s).map_err(|e| de::Error::custom(format!("invalid base64 id: {e}")))
    } else {
        hex_decode(&s).map_err(|e| de::Error::custom(format!("invalid hex id: {e}")))
    }
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
