//! OpenTelemetry protocol (OTLP) trace messages: OpenTelemetry's own (`opentelemetry-proto`,
//! the crate `opentelemetry-otlp` sends), under flat names.
//!
//! These are the messages of `opentelemetry/proto/trace/v1/trace.proto`,
//! `common/v1/common.proto` and `resource/v1/resource.proto`, so the bytes they encode are
//! standard OTLP, and [`TracesData`] is wire-identical to the collector service's
//! `ExportTraceServiceRequest`. Unknown fields are skipped when decoding, as protobuf does.
//! [`KeyValueExt`] adds the constructors ringtrace uses (`KeyValue::string(..)` and the like).
//!
//! # Recording framing
//! A ringtrace recording is a file of [`TracesData`] messages, each preceded by its length as a
//! protobuf varint: the "delimited" framing that the OpenTelemetry file-exporter specification
//! requires (protobuf's `writeDelimitedTo`). [`write_delimited`] writes one message.

use std::io::{self, Write};

use prost::Message;

pub use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
pub use opentelemetry_proto::tonic::common::v1::{
    any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList,
};
pub use opentelemetry_proto::tonic::resource::v1::Resource;
pub use opentelemetry_proto::tonic::trace::v1::span::{Event, Link, SpanKind};
pub use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
pub use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status, TracesData};

/// The attribute constructors ringtrace uses, on OpenTelemetry's [`KeyValue`].
pub trait KeyValueExt: Sized {
    /// A string attribute.
    fn string(key: impl Into<String>, value: impl Into<String>) -> Self {
        Self::new(key, any_value::Value::StringValue(value.into()))
    }
    /// An integer attribute.
    fn int(key: impl Into<String>, value: i64) -> Self {
        Self::new(key, any_value::Value::IntValue(value))
    }
    /// A double attribute.
    fn double(key: impl Into<String>, value: f64) -> Self {
        Self::new(key, any_value::Value::DoubleValue(value))
    }
    /// A boolean attribute.
    fn bool(key: impl Into<String>, value: bool) -> Self {
        Self::new(key, any_value::Value::BoolValue(value))
    }
    /// An attribute with the given value.
    fn new(key: impl Into<String>, value: any_value::Value) -> Self;
}

impl KeyValueExt for KeyValue {
    fn new(key: impl Into<String>, value: any_value::Value) -> Self {
        KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
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
                    ..Default::default()
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
