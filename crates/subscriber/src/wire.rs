//! Direct protobuf encoding of spans: the recording's hot path on the drain thread.
//!
//! [`encode`](crate::encode) builds `prost` messages, which allocates a `String` for every
//! attribute key and value. Here the same OTLP `Span` messages are written straight into a
//! reused byte buffer. The bytes decode to exactly what [`encode::span`](crate::encode::span)
//! builds; the recording test checks that on every kind of value.

use std::collections::HashMap;

use ringtrace_core::otlp;
use ringtrace_core::propagation::REQUEST_ID_KEY;
use ringtrace_core::record::Meta;

use crate::encode::level_str;
use crate::span_data::{EventData, SpanData, Value};

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;
const FIXED32: u32 = 5;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
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
    out.extend_from_slice(b);
}

fn fixed64_field(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// The length of a length-delimited field `field` holding `n` bytes.
fn len_field_size(field: u32, n: usize) -> usize {
    varint_len(u64::from(field << 3 | LEN)) + varint_len(n as u64) + n
}

/// An attribute value, borrowed.
#[derive(Clone, Copy)]
enum Attr<'a> {
    Str(&'a str),
    Int(i64),
    Double(f64),
    Bool(bool),
}

impl<'a> From<&'a Value> for Attr<'a> {
    fn from(v: &'a Value) -> Self {
        match v {
            Value::I64(v) => Attr::Int(*v),
            Value::U64(v) => match i64::try_from(*v) {
                Ok(i) => Attr::Int(i),
                Err(_) => Attr::Str(""),
            },
            Value::F64(v) => Attr::Double(*v),
            Value::Bool(v) => Attr::Bool(*v),
            Value::Str(s) => Attr::Str(s),
        }
    }
}

/// Writes a `KeyValue` as field `field` of the enclosing message.
fn key_value(out: &mut Vec<u8>, field: u32, key: &str, value: Attr<'_>, big: Option<u64>) {
    let mut number = [0u8; 20];
    let any_len = match (value, big) {
        (_, Some(v)) => {
            let s = format_u64(v, &mut number);
            len_field_size(1, s.len())
        }
        (Attr::Str(s), None) => len_field_size(1, s.len()),
        (Attr::Int(i), None) => 1 + varint_len(i as u64),
        (Attr::Double(_), None) => 9,
        (Attr::Bool(_), None) => 2,
    };
    let kv_len = len_field_size(1, key.len()) + len_field_size(2, any_len);
    tag(out, field, LEN);
    varint(out, kv_len as u64);
    bytes_field(out, 1, key.as_bytes());
    tag(out, 2, LEN);
    varint(out, any_len as u64);
    match (value, big) {
        (_, Some(v)) => {
            let s = format_u64(v, &mut number);
            bytes_field(out, 1, s.as_bytes());
        }
        (Attr::Str(s), None) => bytes_field(out, 1, s.as_bytes()),
        (Attr::Int(i), None) => {
            tag(out, 3, VARINT);
            varint(out, i as u64);
        }
        (Attr::Double(d), None) => fixed64_field(out, 4, d.to_bits()),
        (Attr::Bool(b), None) => {
            tag(out, 2, VARINT);
            out.push(u8::from(b));
        }
    }
}

/// Decimal text of `v` in `buf`, without allocating (integers beyond `i64` travel as strings).
fn format_u64(mut v: u64, buf: &mut [u8; 20]) -> &str {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[i..]).unwrap_or("0")
}

fn value_attr(out: &mut Vec<u8>, field: u32, key: &str, v: &Value) {
    match v {
        Value::U64(u) if i64::try_from(*u).is_err() => key_value(out, field, key, Attr::Str(""), Some(*u)),
        v => key_value(out, field, key, v.into(), None),
    }
}

/// The attributes of a span that depend only on its callsite, encoded as span field 9 entries.
fn callsite_attributes(meta: Meta) -> Box<[u8]> {
    let mut out = Vec::new();
    key_value(&mut out, 9, "target", Attr::Str(meta.target()), None);
    if let Some(m) = meta.module_path() {
        key_value(&mut out, 9, "code.namespace", Attr::Str(m), None);
    }
    if let Some(f) = meta.file() {
        key_value(&mut out, 9, "code.filepath", Attr::Str(f), None);
    }
    if let Some(l) = meta.line() {
        key_value(&mut out, 9, "code.lineno", Attr::Int(i64::from(l)), None);
    }
    key_value(&mut out, 9, "level", Attr::Str(level_str(meta.level())), None);
    out.into_boxed_slice()
}

/// The attributes of a span that depend only on the thread that created it.
fn thread_attributes(thread_id: u64, thread_name: &str) -> Box<[u8]> {
    let mut out = Vec::new();
    key_value(&mut out, 9, "thread.id", Attr::Int(i64::try_from(thread_id).unwrap_or(i64::MAX)), None);
    if !thread_name.is_empty() {
        key_value(&mut out, 9, "thread.name", Attr::Str(thread_name), None);
    }
    out.into_boxed_slice()
}

/// Reused buffers for encoding, and the encoded attributes that depend only on a span's callsite
/// or thread.
#[derive(Default)]
pub(crate) struct SpanEncoder {
    /// `target`, `code.*` and `level` attributes, encoded, by callsite address.
    callsites: HashMap<usize, Box<[u8]>>,
    /// `thread.id` and `thread.name` attributes, encoded, by thread number.
    threads: HashMap<u64, Box<[u8]>>,
    span: Vec<u8>,
    event: Vec<u8>,
    scope_spans: Vec<u8>,
    resource: Vec<u8>,
    frame: Vec<u8>,
}

impl SpanEncoder {
    /// Encodes one OTLP `Span` message body (without its own tag and length) into `self.span`.
    fn span(&mut self, s: &SpanData) {
        let mut out = std::mem::take(&mut self.span);
        self.span_into(s, &mut out);
        self.span = out;
    }

    fn span_into(&mut self, s: &SpanData, out: &mut Vec<u8>) {
        out.clear();
        bytes_field(out, 1, &s.trace_id.to_bytes());
        bytes_field(out, 2, &s.span_id.to_bytes());
        if let Some(p) = s.parent_span_id {
            bytes_field(out, 4, &p.to_bytes());
        }
        bytes_field(out, 5, s.name().as_bytes());
        let kind = crate::encode::kind_of(s) as i32;
        if kind != 0 {
            tag(out, 6, VARINT);
            varint(out, kind as u64);
        }
        fixed64_field(out, 7, s.start_unix_ns);
        fixed64_field(out, 8, s.end_unix_ns);
        for (k, v) in &s.fields {
            if crate::encode::RESERVED_FIELDS.contains(k) || *k == REQUEST_ID_KEY {
                continue;
            }
            value_attr(out, 9, k, v);
        }
        if let Some(r) = &s.request_id {
            key_value(out, 9, REQUEST_ID_KEY, Attr::Str(r), None);
        }
        let callsite =
            self.callsites.entry(s.meta as *const _ as usize).or_insert_with(|| callsite_attributes(s.meta));
        out.extend_from_slice(callsite);
        let thread =
            self.threads.entry(s.thread_id).or_insert_with(|| thread_attributes(s.thread_id, &s.thread_name));
        out.extend_from_slice(thread);
        if s.unclosed {
            key_value(out, 9, "ringtrace.unclosed", Attr::Bool(true), None);
        }
        for e in &s.events {
            Self::event(&mut self.event, e);
            bytes_field(out, 11, &self.event);
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
        if let Some(status) = crate::encode::status_of(s) {
            let code = status.code as u64;
            let len = if status.message.is_empty() { 0 } else { len_field_size(2, status.message.len()) }
                + if code == 0 { 0 } else { 1 + varint_len(code) };
            tag(out, 15, LEN);
            varint(out, len as u64);
            if !status.message.is_empty() {
                bytes_field(out, 2, status.message.as_bytes());
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
        let mut named = false;
        for (k, v) in &e.fields {
            if *k == "message" && !named {
                named = true;
                continue;
            }
            value_attr(out, 3, k, v);
        }
        key_value(out, 3, "level", Attr::Str(level_str(e.meta.level())), None);
        key_value(out, 3, "target", Attr::Str(e.meta.target()), None);
    }

    /// Appends `s` to `out` as a `ScopeSpans.spans` field (tag, length, `Span`): the OTLP
    /// exporter queues spans in this form. Returns the bytes appended.
    #[cfg(feature = "otlp")]
    pub(crate) fn push_span(&mut self, s: &SpanData, out: &mut Vec<u8>) -> usize {
        let before = out.len();
        self.span(s);
        bytes_field(out, 2, &self.span);
        out.len() - before
    }

    /// Writes one recording frame to `out`: the varint length, then a `TracesData` holding
    /// `batch` under `resource` and the ringtrace scope. The spans go to `out` straight from the
    /// buffer they were encoded in.
    pub(crate) fn write_frame(
        &mut self,
        batch: &[SpanData],
        resource: &otlp::Resource,
        out: &mut impl std::io::Write,
    ) -> std::io::Result<()> {
        use prost::Message;
        self.scope_spans.clear();
        let scope = otlp::InstrumentationScope {
            name: "ringtrace".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        };
        bytes_field(&mut self.scope_spans, 1, &scope.encode_to_vec());
        for s in batch {
            self.span(s);
            bytes_field(&mut self.scope_spans, 2, &self.span);
        }
        self.resource.clear();
        resource.encode(&mut self.resource).map_err(std::io::Error::other)?;
        let resource_spans =
            len_field_size(1, self.resource.len()) + len_field_size(2, self.scope_spans.len());
        let traces_data = len_field_size(1, resource_spans);
        let head = &mut self.frame;
        head.clear();
        varint(head, traces_data as u64);
        tag(head, 1, LEN);
        varint(head, resource_spans as u64);
        bytes_field(head, 1, &self.resource);
        tag(head, 2, LEN);
        varint(head, self.scope_spans.len() as u64);
        out.write_all(&self.frame)?;
        out.write_all(&self.scope_spans)
    }
}

#[cfg(test)]
mod tests {
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
    fn big_unsigned_values_are_decimal_strings() {
        let mut buf = [0u8; 20];
        assert_eq!(format_u64(u64::MAX, &mut buf), "18446744073709551615");
        assert_eq!(format_u64(0, &mut buf), "0");
    }
}
