//! Direct protobuf encoding of spans: the recording's hot path on the drain thread.
//!
//! [`encode`](crate::encode) builds `prost` messages, which allocates a `String` for every
//! attribute key and value. Here the same OTLP `Span` messages are written straight into a
//! reused byte buffer. The bytes decode to exactly what [`encode::span`](crate::encode::span)
//! builds; the recording test checks that on every kind of value, and
//! `direct_encoding_is_byte_identical_to_prost` below compares the bytes themselves (spans and
//! whole frames).

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use ringtrace_core::hash::GOLDEN;
use ringtrace_core::otlp;
use ringtrace_core::propagation::REQUEST_ID_KEY;
use ringtrace_core::record::Meta;

use crate::encode::{self, AttributeValue};
use crate::span_data::{EventData, SpanData, Value};

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;
const FIXED32: u32 = 5;

fn varint(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 10];
    let n = varint_to(&mut buf, v);
    out.extend_from_slice(&buf[..n]);
}

/// Writes `v` as a varint at the start of `buf` (at least 10 bytes when `v` may be that long);
/// returns the bytes written.
fn varint_to(buf: &mut [u8], mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        buf[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    buf[n] = v as u8;
    n + 1
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u32) {
    varint(out, u64::from(field << 3 | wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, LEN);
    varint(out, b.len() as u64);
    put(out, b);
}

/// Appends `b`: short slices (attribute keys, mostly) byte by byte, cheaper than a `memcpy` call.
#[inline]
fn put(out: &mut Vec<u8>, b: &[u8]) {
    if b.len() <= 16 {
        out.reserve(b.len());
        for &x in b {
            out.push(x);
        }
    } else {
        out.extend_from_slice(b);
    }
}

fn fixed64_field(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends field `field` holding the message `body` appends, without encoding the message
/// elsewhere first: two bytes are set aside for its length, which fits them for messages of 128 to
/// 16,383 bytes; the message is moved only when its length takes another number of bytes.
fn nested(out: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    tag(out, field, LEN);
    let at = out.len();
    out.extend_from_slice(&[0, 0]);
    body(out);
    let n = out.len() - at - 2;
    if (0x80..0x4000).contains(&n) {
        out[at] = n as u8 | 0x80;
        out[at + 1] = (n >> 7) as u8;
    } else {
        let mut len = [0u8; 10];
        let k = varint_to(&mut len, n as u64);
        out.splice(at..at + 2, len[..k].iter().copied());
    }
}

/// The length of a length-delimited field `field` holding `n` bytes.
fn len_field_size(field: u32, n: usize) -> usize {
    varint_len(u64::from(field << 3 | LEN)) + varint_len(n as u64) + n
}

/// Writes a `KeyValue` as field `field` of the enclosing message.
fn key_value(out: &mut Vec<u8>, field: u32, key: &str, value: &AttributeValue<'_>) {
    let any_len = match value {
        AttributeValue::Str(s) => len_field_size(1, s.len()),
        AttributeValue::Int(i) => 1 + varint_len(*i as u64),
        AttributeValue::Double(_) => 9,
        AttributeValue::Bool(_) => 2,
    };
    let kv_len = len_field_size(1, key.len()) + len_field_size(2, any_len);
    out.reserve(kv_len + 12);
    tag(out, field, LEN);
    varint(out, kv_len as u64);
    bytes_field(out, 1, key.as_bytes());
    tag(out, 2, LEN);
    varint(out, any_len as u64);
    match value {
        AttributeValue::Str(s) => bytes_field(out, 1, s.as_bytes()),
        AttributeValue::Int(i) => {
            tag(out, 3, VARINT);
            varint(out, *i as u64);
        }
        AttributeValue::Double(d) => fixed64_field(out, 4, d.to_bits()),
        AttributeValue::Bool(b) => {
            tag(out, 2, VARINT);
            out.push(u8::from(*b));
        }
    }
}

/// Writes an attribute as field `field` of the enclosing message, as [`key_value`] does.
#[inline]
fn attribute(out: &mut Vec<u8>, field: u32, key: &str, value: AttributeValue<'_>) {
    if !scalar_key_value(out, field, key, &value) {
        key_value(out, field, key, &value);
    }
}

/// Longest span name written from the stack buffer in `SpanEncoder::span_into`.
const SHORT_NAME: usize = 64;

/// Longest key [`scalar_key_value`] takes.
const SHORT_KEY: usize = 48;

/// Writes what [`key_value`] writes for a number or boolean under a short key, assembled on the
/// stack and appended with one fixed-size copy. Returns `false`, writing nothing, for other
/// values and keys.
#[inline]
fn scalar_key_value(out: &mut Vec<u8>, field: u32, key: &str, value: &AttributeValue<'_>) -> bool {
    let key = key.as_bytes();
    if key.len() > SHORT_KEY || field >= 16 || matches!(value, AttributeValue::Str(_)) {
        return false;
    }
    // Tag, `KeyValue` length, key (tag, length, bytes), value (tag, length, `AnyValue`): every
    // length is under 128, so one byte each. Written in place into room made at the end of `out`
    // (assembling it on the stack and copying it would stall on the byte-wise stores).
    let len = out.len();
    out.resize(len + 2 + 2 + SHORT_KEY + 2 + 11, 0);
    let buf = &mut out[len..];
    buf[0] = (field << 3 | LEN) as u8;
    buf[2] = 1 << 3 | LEN as u8;
    buf[3] = key.len() as u8;
    let mut n = 4;
    for &b in key {
        buf[n] = b;
        n += 1;
    }
    buf[n] = 2 << 3 | LEN as u8;
    let any = n + 1;
    n += 2;
    match value {
        AttributeValue::Int(i) => {
            buf[n] = 3 << 3 | VARINT as u8;
            n += 1;
            n += varint_to(&mut buf[n..], *i as u64);
        }
        AttributeValue::Double(d) => {
            buf[n] = 4 << 3 | FIXED64 as u8;
            buf[n + 1..n + 9].copy_from_slice(&d.to_bits().to_le_bytes());
            n += 9;
        }
        AttributeValue::Bool(b) => {
            buf[n] = 2 << 3 | VARINT as u8;
            buf[n + 1] = u8::from(*b);
            n += 2;
        }
        AttributeValue::Str(_) => unreachable!("strings are left to `key_value`"),
    }
    buf[any] = (n - any - 1) as u8;
    buf[1] = (n - 2) as u8;
    out.truncate(len + n);
    true
}

/// The attributes of a span that depend only on its callsite, encoded as span field 9 entries.
fn callsite_attributes(meta: Meta) -> Box<[u8]> {
    let mut out = Vec::new();
    encode::callsite_attributes(meta, |k, v| attribute(&mut out, 9, k, v));
    out.into_boxed_slice()
}

/// The attributes of a span that depend only on the thread that created it.
fn thread_attributes(thread_id: u64, thread_name: &str) -> Box<[u8]> {
    let mut out = Vec::new();
    encode::thread_attributes(thread_id, thread_name, |k, v| attribute(&mut out, 9, k, v));
    out.into_boxed_slice()
}

/// Hashes a callsite address or thread number with one multiplication, folded so that both the
/// low bits (the bucket) and the high bits (the tag) depend on every input bit.
#[derive(Default, Clone, Copy)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        let m = u128::from(self.0 ^ v) * u128::from(GOLDEN);
        self.0 = (m as u64) ^ ((m >> 64) as u64);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

type WordMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;

/// The fields that steer the OTLP span itself (see [`RESERVED_FIELDS`](crate::encode::RESERVED_FIELDS)),
/// found in one pass; the last value recorded wins, as in [`SpanData::field`].
#[derive(Default)]
struct Steering<'a> {
    name: Option<&'a Value>,
    kind: Option<&'a Value>,
    status_code: Option<&'a Value>,
    status_message: Option<&'a Value>,
    /// Some field is one of those or `request.id`: the attributes leave it out.
    any: bool,
}

impl<'a> Steering<'a> {
    fn of(fields: &'a [(&'static str, Value)]) -> Self {
        let mut st = Self::default();
        for (k, v) in fields {
            let slot = match *k {
                "otel.name" => &mut st.name,
                "otel.kind" => &mut st.kind,
                "otel.status_code" => &mut st.status_code,
                "otel.status_message" => &mut st.status_message,
                REQUEST_ID_KEY => {
                    st.any = true;
                    continue;
                }
                _ => continue,
            };
            *slot = Some(v);
            st.any = true;
        }
        st
    }
}

/// Threads whose encoded attributes [`SpanEncoder`] keeps at most.
const THREAD_CACHE: usize = 1024;

/// Reused buffers for encoding, and the encoded attributes that depend only on a span's callsite
/// or thread.
#[derive(Default)]
pub(crate) struct SpanEncoder {
    /// `target`, `code.*` and `level` attributes, encoded, by callsite address.
    callsites: WordMap<usize, Box<[u8]>>,
    /// `thread.id` and `thread.name` attributes, encoded, by thread number (at most
    /// [`THREAD_CACHE`] threads).
    threads: WordMap<u64, Box<[u8]>>,
    #[cfg(test)]
    span: Vec<u8>,
    event: Vec<u8>,
    /// The encoded `ScopeSpans.scope` field (the same in every frame).
    scope: Vec<u8>,
    resource: Vec<u8>,
    /// A frame being assembled: room for its head, then the `ScopeSpans` body.
    frame: Vec<u8>,
    head: Vec<u8>,
}

impl SpanEncoder {
    /// Encodes one OTLP `Span` message body (without its own tag and length) into `self.span`.
    #[cfg(test)]
    fn span(&mut self, s: &SpanData) {
        let mut out = std::mem::take(&mut self.span);
        out.clear();
        self.span_into(s, &mut out);
        self.span = out;
    }

    /// Appends the OTLP `Span` message body of `s` (without its own tag and length) to `out`.
    fn span_into(&mut self, s: &SpanData, out: &mut Vec<u8>) {
        let st = Steering::of(&s.fields);
        out.reserve(256);
        let name = match st.name {
            None => Cow::Borrowed(s.meta.name()),
            Some(Value::Str(n)) => Cow::Borrowed(n.as_str()),
            Some(v) => Cow::Owned(v.to_string()),
        };
        let kind = crate::encode::kind(st.kind) as i32;
        // Fields 1 to 8 (ids, name, kind, times), written in place into room made at the end of
        // `out` when the name is short.
        let len = out.len();
        let short = name.len() <= SHORT_NAME && (0..0x80).contains(&kind);
        out.resize(len + 28 + 10 + if short { 2 + SHORT_NAME + 2 + 18 } else { 0 }, 0);
        let head = &mut out[len..];
        head[0] = 1 << 3 | LEN as u8;
        head[1] = 16;
        head[2..18].copy_from_slice(&s.trace_id.to_bytes());
        head[18] = 2 << 3 | LEN as u8;
        head[19] = 8;
        head[20..28].copy_from_slice(&s.span_id.to_bytes());
        let mut n = 28;
        if let Some(p) = s.parent_span_id {
            head[28] = 4 << 3 | LEN as u8;
            head[29] = 8;
            head[30..38].copy_from_slice(&p.to_bytes());
            n = 38;
        }
        if short {
            head[n] = 5 << 3 | LEN as u8;
            head[n + 1] = name.len() as u8;
            head[n + 2..n + 2 + name.len()].copy_from_slice(name.as_bytes());
            n += 2 + name.len();
            if kind != 0 {
                head[n] = 6 << 3 | VARINT as u8;
                head[n + 1] = kind as u8;
                n += 2;
            }
            head[n] = 7 << 3 | FIXED64 as u8;
            head[n + 1..n + 9].copy_from_slice(&s.start_unix_ns.to_le_bytes());
            head[n + 9] = 8 << 3 | FIXED64 as u8;
            head[n + 10..n + 18].copy_from_slice(&s.end_unix_ns.to_le_bytes());
            n += 18;
            out.truncate(len + n);
        } else {
            out.truncate(len + n);
            bytes_field(out, 5, name.as_bytes());
            if kind != 0 {
                tag(out, 6, VARINT);
                varint(out, kind as u64);
            }
            fixed64_field(out, 7, s.start_unix_ns);
            fixed64_field(out, 8, s.end_unix_ns);
        }
        // The attributes in `encode::span_attributes`' order, each callsite's and thread's
        // part encoded once.
        for (k, v) in &s.fields {
            if st.any && encode::steers(k) {
                continue;
            }
            attribute(out, 9, k, v.into());
        }
        if let Some(r) = &s.request_id {
            key_value(out, 9, REQUEST_ID_KEY, &AttributeValue::Str(r.as_ref().into()));
        }
        let callsite =
            self.callsites.entry(s.meta as *const _ as usize).or_insert_with(|| callsite_attributes(s.meta));
        out.extend_from_slice(callsite);
        if self.threads.len() >= THREAD_CACHE && !self.threads.contains_key(&s.thread_id) {
            // Threads come and go: start over rather than keep every thread ever seen.
            self.threads.clear();
        }
        let thread =
            self.threads.entry(s.thread_id).or_insert_with(|| thread_attributes(s.thread_id, &s.thread_name));
        out.extend_from_slice(thread);
        if s.unclosed {
            attribute(out, 9, encode::UNCLOSED, AttributeValue::Bool(true));
        }
        for e in &s.events {
            Self::event(&mut self.event, e);
            bytes_field(out, 11, &self.event);
        }
        if s.dropped_events > 0 {
            tag(out, 12, VARINT);
            varint(out, u64::from(s.dropped_events));
        }
        for l in &s.links {
            let len = 2 * len_field_size(1, 0) + 16 + 8 + 5;
            tag(out, 13, LEN);
            varint(out, len as u64);
            bytes_field(out, 1, &l.trace_id.to_bytes());
            bytes_field(out, 2, &l.span_id.to_bytes());
            tag(out, 6, FIXED32);
            out.extend_from_slice(&0x101u32.to_le_bytes());
        }
        // The status, as `encode::status_of` makes it.
        let message = match st.status_message {
            None => Cow::Borrowed(""),
            Some(Value::Str(m)) => Cow::Borrowed(m.as_str()),
            Some(v) => Cow::Owned(v.to_string()),
        };
        let code = crate::encode::status_code(st.status_code, &s.events);
        if code != otlp::StatusCode::Unset || !message.is_empty() {
            let code = code as u64;
            let len = if message.is_empty() { 0 } else { len_field_size(2, message.len()) }
                + if code == 0 { 0 } else { 1 + varint_len(code) };
            tag(out, 15, LEN);
            varint(out, len as u64);
            if !message.is_empty() {
                bytes_field(out, 2, message.as_bytes());
            }
            if code != 0 {
                tag(out, 3, VARINT);
                varint(out, code);
            }
        }
        let flags = crate::encode::flags_of(s);
        tag(out, 16, FIXED32);
        out.extend_from_slice(&flags.to_le_bytes());
    }

    fn event(out: &mut Vec<u8>, e: &EventData) {
        out.clear();
        fixed64_field(out, 1, e.unix_ns);
        let name = e.fields.iter().find(|(k, _)| *k == "message").map(|(_, v)| v);
        match name {
            Some(Value::Str(s)) => bytes_field(out, 2, s.as_bytes()),
            Some(v) => bytes_field(out, 2, v.to_string().as_bytes()),
            None => bytes_field(out, 2, e.meta.name().as_bytes()),
        }
        encode::event_attributes(e, |k, v| attribute(out, 3, k, v));
    }

    /// Appends `s` to `out` as a `ScopeSpans.spans` field (tag, length, `Span`): the OTLP
    /// exporter queues spans in this form. Returns the bytes appended.
    #[cfg(feature = "otlp")]
    pub(crate) fn push_span(&mut self, s: &SpanData, out: &mut Vec<u8>) -> usize {
        let before = out.len();
        nested(out, 2, |out| self.span_into(s, out));
        out.len() - before
    }

    /// Writes one recording frame to `out`: the varint length, then a `TracesData` holding
    /// `batch` and `extra` (a span of ringtrace's own, such as a loss marker) under `resource`
    /// and the ringtrace scope, in one write. The spans are encoded straight into the frame,
    /// after room left for its head (whose lengths depend on theirs).
    pub(crate) fn write_frame(
        &mut self,
        batch: &[SpanData],
        extra: Option<&otlp::Span>,
        resource: &otlp::Resource,
        out: &mut impl std::io::Write,
    ) -> std::io::Result<()> {
        use prost::Message;
        if self.scope.is_empty() {
            let scope = otlp::InstrumentationScope {
                name: "ringtrace".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                ..Default::default()
            };
            bytes_field(&mut self.scope, 1, &scope.encode_to_vec());
        }
        self.resource.clear();
        resource.encode(&mut self.resource).map_err(std::io::Error::other)?;
        // The head: 4 varints of at most 10 bytes, 3 tags of 1 byte, the resource.
        let room = self.resource.len() + 4 * 10 + 3;
        let mut frame = std::mem::take(&mut self.frame);
        frame.clear();
        frame.resize(room, 0);
        frame.extend_from_slice(&self.scope);
        for s in batch {
            nested(&mut frame, 2, |out| self.span_into(s, out));
        }
        if let Some(span) = extra {
            bytes_field(&mut frame, 2, &span.encode_to_vec());
        }
        let scope_spans = frame.len() - room;
        let resource_spans = len_field_size(1, self.resource.len()) + len_field_size(2, scope_spans);
        let traces_data = len_field_size(1, resource_spans);
        let head = &mut self.head;
        head.clear();
        varint(head, traces_data as u64);
        tag(head, 1, LEN);
        varint(head, resource_spans as u64);
        bytes_field(head, 1, &self.resource);
        tag(head, 2, LEN);
        varint(head, scope_spans as u64);
        let start = room - head.len();
        frame[start..room].copy_from_slice(head);
        let written = out.write_all(&frame[start..]);
        self.frame = frame;
        written
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn varints_match_prost() {
        for v in [0u64, 1, 127, 128, 300, 16_383, 16_384, u64::MAX, (-1i64) as u64] {
            let mut ours = Vec::new();
            varint(&mut ours, v);
            let mut theirs = Vec::new();
            prost::encoding::encode_varint(v, &mut theirs);
            assert_eq!(ours, theirs, "{v}");
            assert_eq!(varint_len(v), ours.len(), "{v}");
        }
    }

    #[test]
    fn steering_knows_every_reserved_field() {
        for k in crate::encode::RESERVED_FIELDS {
            let fields = [(k, Value::Bool(true))];
            let st = Steering::of(&fields);
            assert!(st.any, "{k}");
            let found = [st.name, st.kind, st.status_code, st.status_message].iter().flatten().count();
            assert_eq!(found, 1, "{k}");
        }
        assert!(Steering::of(&[(REQUEST_ID_KEY, Value::Bool(true))]).any);
        assert!(!Steering::of(&[("otel.other", Value::Bool(true))]).any);
    }

    /// Spans of every shape, recorded through the real pipeline (and varied by hand).
    pub(crate) fn sample_spans() -> Vec<SpanData> {
        use std::sync::{Arc, Mutex};
        use tracing_subscriber::prelude::*;

        use crate::SpanExt;

        let got: Arc<Mutex<Vec<SpanData>>> = Arc::default();
        let g = got.clone();
        let sink = crate::FnSink(move |batch: &[SpanData], _: &crate::ResourceInfo| {
            g.lock().unwrap().extend_from_slice(batch);
        });
        let (layer, guard) =
            crate::Builder::new().node("n").daemon("d").no_recording().sink(sink).build().unwrap();
        let long = "y".repeat(300);
        let held = tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            let root = tracing::info_span!(
                "root",
                request.id = "req-1",
                signed = -5i64,
                unsigned = u64::MAX,
                small = 7u64,
                ratio = 0.25f64,
                flag = false,
                short = "short",
                long = long.as_str(),
                otel.kind = "Client",
                otel.status_code = "ok",
                otel.status_message = 12u64,
                later = tracing::field::Empty,
            );
            let _r = root.enter();
            root.record("later", 42u64);
            let other = tracing::debug_span!("other", otel.name = 5i64);
            {
                let child = tracing::warn_span!(target: "app::io", "child", otel.name = "renamed");
                child.follows_from(&other);
                let _c = child.enter();
                tracing::info!(bytes = 512u64, "read block");
                tracing::error!(code = 7i64, message = "first", message = "second");
                tracing::warn!(code = 8i64);
            }
            drop(other);
            let status_only = tracing::info_span!("status", otel.status_message = "why");
            drop(status_only);
            let err = tracing::trace_span!("err", otel.status_code = "ERROR", otel.kind = "server");
            drop(err);
            let remote = tracing::info_span!("from_remote", n = 1);
            remote.set_remote_parent(&ringtrace_core::propagation::TraceContext {
                trace_id: ringtrace_core::TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
                span_id: ringtrace_core::SpanId::from_hex("00f067aa0ba902b7").unwrap(),
                sampled: true,
                request_id: Some("req-remote".into()),
            });
            drop(remote);
            for i in 0..3u64 {
                let _s = tracing::info_span!("work", i).entered();
            }
            tracing::info_span!(parent: None, "held")
        });
        guard.shutdown().unwrap();
        drop(held);
        let mut spans = got.lock().unwrap().clone();
        assert!(spans.len() >= 9, "{}", spans.len());
        // Hand-made variants: lengths around the varint boundaries, odd values.
        let base = spans[0].clone();
        for n in [0usize, 1, 50, 100, 120, 127, 128, 200, 16_300, 16_384, 20_000] {
            let mut s = base.clone();
            s.fields = vec![("pad", Value::Str("z".repeat(n)))];
            s.events.clear();
            s.links.clear();
            s.parent_span_id = None;
            s.request_id = None;
            s.thread_name = Arc::from("");
            s.thread_id = u64::MAX;
            spans.push(s);
        }
        let mut s = base.clone();
        s.fields.push(("otel.name", Value::F64(1.5)));
        s.fields.push(("otel.kind", Value::Bool(true)));
        s.fields.push(("otel.status_code", Value::I64(3)));
        s.unclosed = true;
        s.sampled = false;
        s.dropped_events = 300;
        spans.push(s);
        let mut s = base.clone();
        s.fields = vec![("otel.name", Value::Str("n".repeat(65))), ("x", Value::I64(i64::MIN))];
        spans.push(s);
        let mut s = base.clone();
        s.fields = vec![("k".repeat(48).leak(), Value::I64(-1)), ("k".repeat(49).leak(), Value::I64(-1))];
        spans.push(s);
        let mut s = base;
        s.fields =
            vec![("otel.kind", Value::Str("PRODUCER".into())), ("otel.kind", Value::Str("consumer".into()))];
        spans.push(s);
        spans
    }

    #[test]
    fn direct_encoding_is_byte_identical_to_prost() {
        use prost::Message;
        let spans = sample_spans();
        let mut enc = SpanEncoder::default();
        for s in spans.iter().chain(spans.iter()) {
            enc.span(s);
            assert_eq!(enc.span, crate::encode::span(s).encode_to_vec(), "{s:?}");
        }
        let info = crate::ResourceInfo {
            identity: ringtrace_core::Identity { node: "node".into(), daemon: "daemon".into() },
            pid: 42,
            stats: crate::Stats::default(),
        };
        for batch in [&spans[..], &spans[..0], &spans[..1], &spans[3..]] {
            let mut ours = Vec::new();
            enc.write_frame(batch, None, &crate::encode::resource(&info), &mut ours).unwrap();
            let theirs = crate::encode::traces_data(batch, &info).encode_length_delimited_to_vec();
            assert_eq!(ours, theirs);
        }
    }

    /// The direct encoder's bytes are what OpenTelemetry's own OTLP messages
    /// (`opentelemetry-proto`, the crate `opentelemetry-otlp` sends) decode and encode back,
    /// byte for byte, and they read the same spans from them.
    #[test]
    fn direct_encoding_is_byte_identical_to_opentelemetry_proto() {
        use opentelemetry_proto::tonic::trace::v1::TracesData;
        use prost::Message;
        let spans = sample_spans();
        let info = crate::ResourceInfo {
            identity: ringtrace_core::Identity { node: "node".into(), daemon: "daemon".into() },
            pid: 42,
            stats: crate::Stats::default(),
        };
        let mut enc = SpanEncoder::default();
        let mut ours = Vec::new();
        enc.write_frame(&spans, None, &crate::encode::resource(&info), &mut ours).unwrap();
        let theirs = TracesData::decode_length_delimited(&ours[..]).unwrap();
        assert_eq!(theirs.encode_length_delimited_to_vec(), ours, "byte for byte");
        let resource = theirs.resource_spans[0].resource.as_ref().unwrap();
        assert!(resource.attributes.iter().any(|kv| kv.key == "service.name"));
        let read = &theirs.resource_spans[0].scope_spans[0].spans;
        assert_eq!(read.len(), spans.len());
        for (t, s) in read.iter().zip(&spans) {
            assert_eq!(t.name, s.name());
            assert_eq!(t.span_id, s.span_id.to_bytes());
            assert_eq!(t.trace_id, s.trace_id.to_bytes());
            assert_eq!((t.start_time_unix_nano, t.end_time_unix_nano), (s.start_unix_ns, s.end_unix_ns));
            assert_eq!(t.events.len(), s.events.len());
        }
    }
}
