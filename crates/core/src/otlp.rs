//! OpenTelemetry protocol (OTLP) trace messages, as prost types.
//!
//! These are the messages of `opentelemetry/proto/trace/v1/trace.proto`,
//! `common/v1/common.proto` and `resource/v1/resource.proto` with their official field numbers,
//! so the bytes they encode are standard OTLP: any OTLP reader decodes them, and
//! [`TracesData`] is wire-identical to the collector service's `ExportTraceServiceRequest`.
//! Only the trace signal is defined; unknown fields are skipped when decoding, as protobuf does.
//!
//! # Recording framing
//! A ringtrace recording is a file of [`TracesData`] messages, each preceded by its length as a
//! protobuf varint: the "delimited" framing that the OpenTelemetry file-exporter specification
//! requires (protobuf's `writeDelimitedTo`). [`write_delimited`] writes one message.

use std::io::{self, Write};

use prost::Message;

/// Top-level trace data: the payload of a recording frame and of an OTLP export request.
#[derive(Clone, PartialEq, Message)]
pub struct TracesData {
    /// Spans grouped by the resource (process) that produced them.
    #[prost(message, repeated, tag = "1")]
    pub resource_spans: Vec<ResourceSpans>,
}

/// The spans of one resource.
#[derive(Clone, PartialEq, Message)]
pub struct ResourceSpans {
    /// The resource: `service.name`, `host.name`, ...
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    /// Spans grouped by instrumentation scope.
    #[prost(message, repeated, tag = "2")]
    pub scope_spans: Vec<ScopeSpans>,
    /// Schema URL of the resource's attributes.
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

/// A resource: the entity producing telemetry.
#[derive(Clone, PartialEq, Message)]
pub struct Resource {
    /// Attributes describing the resource.
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
    /// Attributes dropped for limits.
    #[prost(uint32, tag = "2")]
    pub dropped_attributes_count: u32,
}

/// The spans of one instrumentation scope.
#[derive(Clone, PartialEq, Message)]
pub struct ScopeSpans {
    /// The instrumentation scope.
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    /// The spans.
    #[prost(message, repeated, tag = "2")]
    pub spans: Vec<Span>,
    /// Schema URL of the spans' attributes.
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

/// The library that recorded the spans.
#[derive(Clone, PartialEq, Message)]
pub struct InstrumentationScope {
    /// Scope name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Scope version.
    #[prost(string, tag = "2")]
    pub version: String,
    /// Scope attributes.
    #[prost(message, repeated, tag = "3")]
    pub attributes: Vec<KeyValue>,
    /// Attributes dropped for limits.
    #[prost(uint32, tag = "4")]
    pub dropped_attributes_count: u32,
}

/// One span.
#[derive(Clone, PartialEq, Message)]
pub struct Span {
    /// 16-byte trace id.
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    /// 8-byte span id.
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
    /// W3C tracestate.
    #[prost(string, tag = "3")]
    pub trace_state: String,
    /// 8-byte parent span id; empty for a root span.
    #[prost(bytes = "vec", tag = "4")]
    pub parent_span_id: Vec<u8>,
    /// W3C trace flags in the low byte; bits 8-9 say whether the parent is remote.
    #[prost(fixed32, tag = "16")]
    pub flags: u32,
    /// Operation name.
    #[prost(string, tag = "5")]
    pub name: String,
    /// Span kind ([`SpanKind`]).
    #[prost(enumeration = "SpanKind", tag = "6")]
    pub kind: i32,
    /// Start, Unix nanoseconds.
    #[prost(fixed64, tag = "7")]
    pub start_time_unix_nano: u64,
    /// End, Unix nanoseconds.
    #[prost(fixed64, tag = "8")]
    pub end_time_unix_nano: u64,
    /// Span attributes.
    #[prost(message, repeated, tag = "9")]
    pub attributes: Vec<KeyValue>,
    /// Attributes dropped for limits.
    #[prost(uint32, tag = "10")]
    pub dropped_attributes_count: u32,
    /// Timed events.
    #[prost(message, repeated, tag = "11")]
    pub events: Vec<Event>,
    /// Events dropped.
    #[prost(uint32, tag = "12")]
    pub dropped_events_count: u32,
    /// Links to other spans.
    #[prost(message, repeated, tag = "13")]
    pub links: Vec<Link>,
    /// Links dropped.
    #[prost(uint32, tag = "14")]
    pub dropped_links_count: u32,
    /// Final status.
    #[prost(message, optional, tag = "15")]
    pub status: Option<Status>,
}

/// A timed event inside a span.
#[derive(Clone, PartialEq, Message)]
pub struct Event {
    /// When, Unix nanoseconds.
    #[prost(fixed64, tag = "1")]
    pub time_unix_nano: u64,
    /// Event name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Event attributes.
    #[prost(message, repeated, tag = "3")]
    pub attributes: Vec<KeyValue>,
    /// Attributes dropped for limits.
    #[prost(uint32, tag = "4")]
    pub dropped_attributes_count: u32,
}

/// A link to another span.
#[derive(Clone, PartialEq, Message)]
pub struct Link {
    /// Linked trace id.
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    /// Linked span id.
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
    /// W3C tracestate of the link.
    #[prost(string, tag = "3")]
    pub trace_state: String,
    /// Link attributes.
    #[prost(message, repeated, tag = "4")]
    pub attributes: Vec<KeyValue>,
    /// Attributes dropped for limits.
    #[prost(uint32, tag = "5")]
    pub dropped_attributes_count: u32,
    /// W3C trace flags of the link.
    #[prost(fixed32, tag = "6")]
    pub flags: u32,
}

/// A span's final status.
#[derive(Clone, PartialEq, Message)]
pub struct Status {
    /// Developer-facing message.
    #[prost(string, tag = "2")]
    pub message: String,
    /// Status code ([`StatusCode`]).
    #[prost(enumeration = "StatusCode", tag = "3")]
    pub code: i32,
}

/// Span kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum SpanKind {
    /// Unspecified.
    Unspecified = 0,
    /// Internal operation.
    Internal = 1,
    /// Server side of a synchronous call.
    Server = 2,
    /// Client side of a synchronous call.
    Client = 3,
    /// Sender of an asynchronous message.
    Producer = 4,
    /// Receiver of an asynchronous message.
    Consumer = 5,
}

/// Status codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum StatusCode {
    /// Not set.
    Unset = 0,
    /// Explicitly OK.
    Ok = 1,
    /// Error.
    Error = 2,
}

/// A key and its value.
#[derive(Clone, PartialEq, Message)]
pub struct KeyValue {
    /// Attribute key.
    #[prost(string, tag = "1")]
    pub key: String,
    /// Attribute value.
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// A value of any attribute type.
#[derive(Clone, PartialEq, Message)]
pub struct AnyValue {
    /// The value; `None` is an empty value.
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5, 6, 7")]
    pub value: Option<any_value::Value>,
}

/// The variants of [`AnyValue`].
pub mod any_value {
    /// One attribute value.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        /// UTF-8 string.
        #[prost(string, tag = "1")]
        StringValue(String),
        /// Boolean.
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        /// Signed 64-bit integer.
        #[prost(int64, tag = "3")]
        IntValue(i64),
        /// Double.
        #[prost(double, tag = "4")]
        DoubleValue(f64),
        /// Array of values.
        #[prost(message, tag = "5")]
        ArrayValue(super::ArrayValue),
        /// Nested key/value list.
        #[prost(message, tag = "6")]
        KvlistValue(super::KeyValueList),
        /// Raw bytes.
        #[prost(bytes, tag = "7")]
        BytesValue(Vec<u8>),
    }
}

/// An array of values.
#[derive(Clone, PartialEq, Message)]
pub struct ArrayValue {
    /// The values.
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<AnyValue>,
}

/// A list of key/value pairs.
#[derive(Clone, PartialEq, Message)]
pub struct KeyValueList {
    /// The pairs.
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<KeyValue>,
}

impl KeyValue {
    /// A string attribute.
    pub fn string(key: impl Into<String>, value: impl Into<String>) -> Self {
        Self::new(key, any_value::Value::StringValue(value.into()))
    }
    /// An integer attribute.
    pub fn int(key: impl Into<String>, value: i64) -> Self {
        Self::new(key, any_value::Value::IntValue(value))
    }
    /// A double attribute.
    pub fn double(key: impl Into<String>, value: f64) -> Self {
        Self::new(key, any_value::Value::DoubleValue(value))
    }
    /// A boolean attribute.
    pub fn bool(key: impl Into<String>, value: bool) -> Self {
        Self::new(key, any_value::Value::BoolValue(value))
    }
    /// An attribute with the given value.
    pub fn new(key: impl Into<String>, value: any_value::Value) -> Self {
        Self { key: key.into(), value: Some(AnyValue { value: Some(value) }) }
    }
}

/// Writes `msg` with its varint length prefix: one frame of a recording.
pub fn write_delimited<W: Write + ?Sized>(msg: &TracesData, out: &mut W) -> io::Result<()> {
    let mut buf = Vec::with_capacity(msg.encoded_len() + 10);
    msg.encode_length_delimited(&mut buf).map_err(io::Error::other)?;
    out.write_all(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_fields_use_official_tags() {
        // Field 1 (trace_id, bytes) then field 16 (flags, fixed32): tag bytes 0x0a and 0x85 0x01.
        let span = Span { trace_id: vec![1; 16], flags: 0x101, ..Default::default() };
        let bytes = span.encode_to_vec();
        assert_eq!(bytes[0], 0x0a);
        assert_eq!(bytes[1], 16);
        assert_eq!(&bytes[18..20], &[0x85, 0x01]);
        assert_eq!(&bytes[20..24], &0x101u32.to_le_bytes());
        assert_eq!(Span::decode(bytes.as_slice()).unwrap(), span);
    }

    #[test]
    fn delimited_frames_round_trip() {
        let msg = TracesData {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![KeyValue::string("service.name", "worker")],
                    dropped_attributes_count: 0,
                }),
                ..Default::default()
            }],
        };
        let mut out = Vec::new();
        write_delimited(&msg, &mut out).unwrap();
        write_delimited(&msg, &mut out).unwrap();
        let mut rest = out.as_slice();
        for _ in 0..2 {
            let m = TracesData::decode_length_delimited(&mut rest).unwrap();
            assert_eq!(m, msg);
        }
        assert!(rest.is_empty());
    }
}
