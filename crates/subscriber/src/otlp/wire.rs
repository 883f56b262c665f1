//! OTLP request bodies assembled from spans encoded once, on the drain thread.
//!
//! Each span is encoded as field 2 of `ScopeSpans` (key, length, message) into a chunk; the
//! exporter prefixes the resource and scope when it sends, without decoding or re-encoding the
//! spans. The body is an `ExportTraceServiceRequest` (wire-identical to `TracesData`).

use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, message, WireType};
use prost::Message;
use ringtrace_core::otlp;

/// The gRPC method.
pub(crate) const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// The collector's answer: OpenTelemetry's own message.
pub(crate) use ringtrace_core::otlp::ExportTraceServiceResponse;

/// `google.rpc.Status`: the body of an OTLP/HTTP error response.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct RpcStatus {
    /// The gRPC code.
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// Why.
    #[prost(string, tag = "2")]
    pub message: String,
}

/// Appends `span` as a `ScopeSpans.spans` field; returns the bytes written.
pub(crate) fn push_span(span: &otlp::Span, out: &mut Vec<u8>) -> usize {
    let before = out.len();
    message::encode(2, span, out);
    out.len() - before
}

/// The scope every ringtrace span is recorded under.
pub(crate) fn scope() -> otlp::InstrumentationScope {
    otlp::InstrumentationScope {
        name: "ringtrace".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    }
}

/// A `TracesData` / `ExportTraceServiceRequest` body: one resource, one scope, the spans of
/// `chunks` (each a run of [`push_span`] output).
pub(crate) fn request<'a>(
    resource: &otlp::Resource,
    scope: &otlp::InstrumentationScope,
    chunks: impl Iterator<Item = &'a [u8]> + Clone,
) -> Vec<u8> {
    let spans_len: usize = chunks.clone().map(<[u8]>::len).sum();
    let scope_spans_len = message::encoded_len(1, scope) + spans_len;
    let resource_spans_len = message::encoded_len(1, resource)
        + key_len(2)
        + encoded_len_varint(scope_spans_len as u64)
        + scope_spans_len;
    let total = key_len(1) + encoded_len_varint(resource_spans_len as u64) + resource_spans_len;
    let mut out = Vec::with_capacity(total);
    // TracesData.resource_spans (1)
    encode_key(1, WireType::LengthDelimited, &mut out);
    encode_varint(resource_spans_len as u64, &mut out);
    // ResourceSpans.resource (1), ResourceSpans.scope_spans (2)
    message::encode(1, resource, &mut out);
    encode_key(2, WireType::LengthDelimited, &mut out);
    encode_varint(scope_spans_len as u64, &mut out);
    // ScopeSpans.scope (1), ScopeSpans.spans (2)*
    message::encode(1, scope, &mut out);
    for chunk in chunks {
        out.extend_from_slice(chunk);
    }
    debug_assert_eq!(out.len(), total);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringtrace_core::otlp::KeyValue;
    use ringtrace_core::otlp::KeyValueExt as _;

    fn span(i: u8) -> otlp::Span {
        otlp::Span {
            trace_id: vec![i; 16],
            span_id: vec![i; 8],
            name: format!("span-{i}"),
            attributes: vec![KeyValue::string("request.id", format!("req-{i}"))],
            start_time_unix_nano: u64::from(i),
            end_time_unix_nano: u64::from(i) + 10,
            ..Default::default()
        }
    }

    #[test]
    fn assembled_request_decodes_as_traces_data() {
        let resource = otlp::Resource {
            attributes: vec![KeyValue::string("service.name", "svc")],
            ..Default::default()
        };
        let spans: Vec<_> = (1..=5).map(span).collect();
        let mut a = Vec::new();
        let mut b = Vec::new();
        for s in &spans[..2] {
            push_span(s, &mut a);
        }
        for s in &spans[2..] {
            push_span(s, &mut b);
        }
        let body = request(&resource, &scope(), [a.as_slice(), b.as_slice()].into_iter());
        let decoded = otlp::TracesData::decode(body.as_slice()).unwrap();
        let expected = otlp::TracesData {
            resource_spans: vec![otlp::ResourceSpans {
                resource: Some(resource.clone()),
                scope_spans: vec![otlp::ScopeSpans {
                    scope: Some(scope()),
                    spans,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        assert_eq!(decoded, expected);
        assert_eq!(body, expected.encode_to_vec(), "byte-identical to prost's own encoding");
    }

    #[test]
    fn empty_request_is_valid() {
        let body = request(&otlp::Resource::default(), &scope(), std::iter::empty());
        let decoded = otlp::TracesData::decode(body.as_slice()).unwrap();
        assert!(decoded.resource_spans[0].scope_spans[0].spans.is_empty());
    }
}
