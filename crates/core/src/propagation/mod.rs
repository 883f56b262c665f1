//! W3C trace-context propagation: carry a [`TraceContext`] across a process boundary.
//!
//! A [`TraceContext`] is what a request takes with it when it leaves the process: the trace id,
//! the id of the calling span, the sampling decision and the application's request id. It
//! travels in one of two forms:
//!
//! - **Headers**: a [W3C Trace Context] `traceparent` header plus a [W3C Baggage] `baggage`
//!   header holding `request.id`. [`inject`] writes them into any [`Injector`] and [`extract`]
//!   reads them from any [`Extractor`]: `HashMap`, `BTreeMap`, `Vec<(String, String)>` and, with
//!   the `http` feature, `http::HeaderMap`.
//! - **A compact byte form** for raw TCP framing: [`TraceContext::write_bytes`] and
//!   [`TraceContext::read_bytes`].
//!
//! ```
//! use std::collections::HashMap;
//! use ringtrace_core::propagation::{self, TraceContext};
//! use ringtrace_core::{SpanId, TraceId};
//!
//! let trace_id = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
//! let span_id = SpanId::from_hex("00f067aa0ba902b7").unwrap();
//! let mut ctx = TraceContext::new(trace_id, span_id);
//! ctx.request_id = Some("order 42; retry=1".to_owned());
//!
//! // The caller writes the headers...
//! let mut headers: HashMap<String, String> = HashMap::new();
//! propagation::inject(&ctx, &mut headers);
//! assert_eq!(headers["traceparent"], "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
//! assert_eq!(headers["baggage"], "request.id=order%2042%3B%20retry%3D1");
//!
//! // ...and the callee reads them back.
//! assert_eq!(propagation::extract(&headers), Some(ctx.clone()));
//!
//! // The byte form round trip; `read_bytes` says how many bytes the context took.
//! let mut frame = Vec::new();
//! ctx.write_bytes(&mut frame);
//! frame.extend_from_slice(b"payload");
//! assert_eq!(TraceContext::read_bytes(&frame), Ok((ctx, frame.len() - 7)));
//! ```
//!
//! ## Headers
//!
//! `traceparent` follows W3C Trace Context level 1: `version-traceid-parentid-flags` in
//! lowercase hex, surrounding spaces and tabs ignored. Version `ff` and all-zero ids are
//! invalid; version `00` must be exactly 55 characters; a later version is read by its first
//! 55 characters, which must be followed by the end or a `-`. Only the sampled bit of the flags
//! is kept; [`inject`] always writes version `00`.
//!
//! `baggage` follows W3C Baggage: `key=value` list members with optional `;properties`, at most
//! 180 members and 8192 bytes. The whole header is validated but only the first `request.id`
//! is read. Its value is percent-decoded (invalid UTF-8 becomes U+FFFD, as W3C asks);
//! [`inject`] percent-encodes everything but `A-Z a-z 0-9 - . _ ~ / : @`, and cuts a request id
//! at a character boundary where its encoding would push the header past 8192 bytes.
//! [`inject`] replaces any `baggage` the carrier already had.
//!
//! An empty request id is the same as none, in both forms.
//!
//! ## Byte form
//!
//! | Offset | Bytes | Field                                                     |
//! |-------:|------:|-----------------------------------------------------------|
//! |      0 |     1 | version, `0`                                              |
//! |      1 |    16 | trace id, big-endian                                      |
//! |     17 |     8 | span id, big-endian                                       |
//! |     25 |     1 | flags: bit 0 is *sampled*, other bits are ignored on read |
//! |     26 |     2 | request-id length *n*, `u16` little-endian; `0` = none    |
//! |     28 |   *n* | request id, UTF-8                                         |
//!
//! A request id longer than 65535 bytes is cut at a character boundary on write.
//! [`TraceContext::read_bytes`] checks the version, both ids, the length and the UTF-8, and
//! names the offset of what is wrong. Give it a complete frame: it counts a short one as
//! malformed.
//!
//! ## Malformed input
//!
//! Headers and frames come from other processes, so nothing here panics on them. The
//! `try_*`/`parse_*` functions return a [`PropagationError`] naming the field and byte offset
//! and leave the counting to the caller. [`extract`] and [`TraceContext::read_bytes`] add every
//! malformed `traceparent`, `baggage` or byte form they see to a process-wide counter,
//! [`malformed_count`], so that a peer sending garbage shows up in the totals. A malformed
//! `baggage` header loses only the request id, never a valid `traceparent`.
//!
//! [W3C Trace Context]: https://www.w3.org/TR/trace-context-1/
//! [W3C Baggage]: https://www.w3.org/TR/baggage/

mod baggage;
mod carrier;
mod compact;
mod error;
mod traceparent;

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ids::{SpanId, TraceId};

pub use carrier::{Extractor, Injector};
pub use error::{Field, PropagationError};

/// The header that carries the trace id, parent span id and flags.
pub const TRACEPARENT: &str = "traceparent";
/// The header that carries the request id.
pub const BAGGAGE: &str = "baggage";
/// The baggage key of the request id.
pub const REQUEST_ID_KEY: &str = "request.id";

/// The context that crosses a process boundary: W3C trace context plus the application request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace the request belongs to.
    pub trace_id: TraceId,
    /// The caller's span: the parent of the spans the callee records.
    pub span_id: SpanId,
    /// Whether the caller records this trace.
    pub sampled: bool,
    /// The application's request id; `Some("")` is carried as `None`.
    pub request_id: Option<String>,
}

impl TraceContext {
    /// A sampled context without a request id.
    pub fn new(trace_id: TraceId, span_id: SpanId) -> Self {
        Self { trace_id, span_id, sampled: true, request_id: None }
    }

    /// The `traceparent` header value: `00-<32 hex>-<16 hex>-01` (or `-00` when not sampled).
    pub fn traceparent(&self) -> String {
        traceparent::format(self)
    }

    /// Parses a `traceparent` header value; the result has no request id.
    ///
    /// Errors are returned, not counted in [`malformed_count`].
    pub fn parse_traceparent(value: &str) -> Result<TraceContext, PropagationError> {
        traceparent::parse(value)
    }

    /// The `baggage` header value `request.id=<percent-encoded id>`, or `None` without a
    /// request id.
    pub fn baggage(&self) -> Option<String> {
        self.request_id.as_deref().and_then(baggage::encode_request_id)
    }

    /// Compact byte form for raw TCP framing; appends to `out`.
    ///
    /// The layout is in the [module docs](self#byte-form).
    pub fn write_bytes(&self, out: &mut Vec<u8>) {
        compact::write(self, out);
    }

    /// Parses the compact form at the start of `buf`; returns the context and the bytes consumed.
    ///
    /// An error is also counted in [`malformed_count`].
    pub fn read_bytes(buf: &[u8]) -> Result<(TraceContext, usize), PropagationError> {
        compact::read(buf).inspect_err(|_| note_malformed())
    }
}

/// The request id of a `baggage` header value: the percent-decoded value of its first
/// `request.id` entry, `None` when there is none (or it is empty).
///
/// Validates the whole header. Errors are returned, not counted in [`malformed_count`].
pub fn request_id_from_baggage(value: &str) -> Result<Option<String>, PropagationError> {
    baggage::request_id(value)
}

/// Writes `ctx` into `carrier`: `traceparent`, and `baggage` when it has a request id.
pub fn inject(ctx: &TraceContext, carrier: &mut dyn Injector) {
    carrier.set(TRACEPARENT, ctx.traceparent());
    if let Some(baggage) = ctx.baggage() {
        carrier.set(BAGGAGE, baggage);
    }
}

/// Reads a context from `carrier`; `Ok(None)` when there is no `traceparent`.
///
/// A malformed `traceparent` is an error. A malformed `baggage` is not: the context comes back
/// without a request id (use [`request_id_from_baggage`] to see why). Errors are not counted in
/// [`malformed_count`]; that is left to the caller. (The `http::HeaderMap` extractor still counts
/// header values that are not visible ASCII, which it skips before parsing.)
pub fn try_extract(carrier: &dyn Extractor) -> Result<Option<TraceContext>, PropagationError> {
    Ok(extract_parts(carrier)?.map(|(ctx, _)| ctx))
}

/// Reads a context from `carrier`; `None` when there is no valid `traceparent`.
///
/// Never panics. Each malformed `traceparent` or `baggage` header adds one to
/// [`malformed_count`]; a malformed `baggage` only loses the request id.
pub fn extract(carrier: &dyn Extractor) -> Option<TraceContext> {
    match extract_parts(carrier) {
        Ok(Some((ctx, baggage_error))) => {
            if baggage_error.is_some() {
                note_malformed();
            }
            Some(ctx)
        }
        Ok(None) => None,
        Err(_) => {
            note_malformed();
            None
        }
    }
}

/// The context, if there is a `traceparent`, and the `baggage` error, if any.
fn extract_parts(
    carrier: &dyn Extractor,
) -> Result<Option<(TraceContext, Option<PropagationError>)>, PropagationError> {
    let Some(traceparent) = carrier.get(TRACEPARENT) else {
        return Ok(None);
    };
    let mut ctx = traceparent::parse(traceparent)?;
    let mut baggage_error = None;
    if let Some(value) = carrier.get(BAGGAGE) {
        match baggage::request_id(value) {
            Ok(id) => ctx.request_id = id,
            Err(e) => baggage_error = Some(e),
        }
    }
    Ok(Some((ctx, baggage_error)))
}

static MALFORMED: AtomicU64 = AtomicU64::new(0);

/// How many malformed headers and byte forms [`extract`], [`TraceContext::read_bytes`] and the
/// `http::HeaderMap` extractor have seen in this process.
pub fn malformed_count() -> u64 {
    MALFORMED.load(Ordering::Relaxed)
}

fn note_malformed() {
    MALFORMED.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashMap};

    const W3C: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn w3c_ctx() -> TraceContext {
        TraceContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
        )
    }

    fn carrier(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|&(k, v)| (k.to_owned(), v.to_owned())).collect()
    }

    #[test]
    fn new_is_sampled_without_request_id() {
        let ctx = w3c_ctx();
        assert!(ctx.sampled);
        assert_eq!(ctx.request_id, None);
        assert_eq!(ctx.traceparent(), W3C);
        assert_eq!(ctx.baggage(), None);
        assert_eq!(TraceContext::parse_traceparent(W3C), Ok(ctx));
    }

    #[test]
    fn inject_writes_baggage_only_with_a_request_id() {
        let mut pairs = Vec::new();
        inject(&w3c_ctx(), &mut pairs);
        assert_eq!(pairs, [(TRACEPARENT.to_owned(), W3C.to_owned())]);

        let ctx = TraceContext { request_id: Some(String::new()), ..w3c_ctx() };
        let mut pairs = Vec::new();
        inject(&ctx, &mut pairs);
        assert_eq!(pairs.len(), 1);

        let ctx = TraceContext { request_id: Some("r 1".into()), sampled: false, ..w3c_ctx() };
        let mut map = BTreeMap::new();
        inject(&ctx, &mut map);
        assert_eq!(map[TRACEPARENT], "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        assert_eq!(map[BAGGAGE], "request.id=r%201");
        assert_eq!(extract(&map), Some(ctx));
    }

    #[test]
    fn extract_reads_the_w3c_example_with_other_baggage() {
        let headers = carrier(&[
            ("Traceparent", W3C),
            ("tracestate", "congo=t61rcWkgMzE"),
            ("Baggage", "userId=alice,request.id=abc-123;ttl=5"),
        ]);
        let expected = TraceContext { request_id: Some("abc-123".into()), ..w3c_ctx() };
        assert_eq!(try_extract(&headers), Ok(Some(expected.clone())));
        assert_eq!(extract(&headers), Some(expected));
    }

    #[test]
    fn no_traceparent_is_none_even_with_baggage() {
        let before = malformed_count();
        let headers = carrier(&[("baggage", "request.id=%zz")]);
        assert_eq!(try_extract(&headers), Ok(None));
        assert_eq!(extract(&headers), None);
        assert_eq!(extract(&Vec::<(String, String)>::new()), None);
        // Other tests may count concurrently, so only a lower bound can be checked.
        assert!(malformed_count() >= before);
    }

    #[test]
    fn malformed_traceparent_is_an_error_or_none_and_counted() {
        let headers = carrier(&[("traceparent", "00-xyz"), ("baggage", "request.id=a")]);
        assert_eq!(try_extract(&headers), Err(PropagationError::TraceparentLength { found: 6 }));
        let before = malformed_count();
        assert_eq!(extract(&headers), None);
        assert!(malformed_count() > before);
    }

    #[test]
    fn malformed_baggage_keeps_the_traceparent() {
        let headers = carrier(&[("traceparent", W3C), ("baggage", "request.id=ab%2")]);
        assert_eq!(try_extract(&headers), Ok(Some(w3c_ctx())));
        assert_eq!(
            request_id_from_baggage(&headers[BAGGAGE]),
            Err(PropagationError::BaggageEscape { entry: 0, offset: 13 })
        );
        let before = malformed_count();
        assert_eq!(extract(&headers), Some(w3c_ctx()));
        assert!(malformed_count() > before);
    }

    #[test]
    fn read_bytes_counts_errors() {
        let before = malformed_count();
        assert!(TraceContext::read_bytes(&[0, 1, 2]).is_err());
        assert!(malformed_count() > before);
    }

    #[cfg(feature = "http")]
    #[test]
    fn header_map_round_trip() {
        let ctx = TraceContext { request_id: Some("é/1".into()), ..w3c_ctx() };
        let mut headers = http::HeaderMap::new();
        inject(&ctx, &mut headers);
        assert_eq!(headers["baggage"], "request.id=%C3%A9/1");
        assert_eq!(extract(&headers), Some(ctx));
    }
}
