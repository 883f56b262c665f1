//! The fixed-size records application threads write into their rings.
//!
//! One span or event is a *group* of records pushed all at once: a header ([`Record::Open`],
//! [`Record::Update`], [`Record::Event`], [`Record::RemoteParent`], [`Record::Close`],
//! [`Record::Follows`]) followed by one [`Record::Field`] per field value (an open record carries
//! its span's first field itself when that is a number or boolean, and the numbers, booleans and
//! short strings of open and event records travel several to a [`Record::Numbers`] or
//! [`Record::Texts`]). A string field whose text
//! does not fit inline ([`FieldValue::Str`]) is followed by [`Record::Bytes`] chunks holding
//! it. Records hold raw clock ticks and `&'static` callsite metadata, never owned heap data, so
//! writing one is a plain copy.

use tracing_core::Metadata;

use crate::{SpanId, TraceId};

/// Callsite metadata, stored by reference.
pub type Meta = &'static Metadata<'static>;

/// Bytes of a string held inline in a [`FieldValue::Inline`].
pub const INLINE_STR: usize = 22;
/// Bytes of a string carried by one [`Record::Bytes`] chunk.
pub const CHUNK: usize = 48;
/// Longest string a field keeps; longer values are truncated at a character boundary.
pub const MAX_STR: usize = 4096;

/// One ring record. At most 64 bytes, one cache line.
#[derive(Debug, Clone, Copy)]
pub enum Record {
    /// A span opened.
    Open {
        /// The new span's id.
        span: SpanId,
        /// Its parent's id, when it has a recorded parent in this process.
        parent: Option<SpanId>,
        /// The trace it belongs to (inherited from the parent, or new).
        trace: TraceId,
        /// Callsite metadata.
        meta: Meta,
        /// Raw clock ticks at creation.
        ticks: u64,
        /// The head-sampling decision (inherited, or made for a new trace).
        sampled: bool,
        /// The span's first field, when it is a number or a boolean, carried here rather than
        /// in a [`Record::Field`]: a span with one such field takes one record less.
        first: InlineField,
    },
    /// Field values recorded on an open span after its creation.
    Update {
        /// The span.
        span: SpanId,
    },
    /// A span closed.
    Close {
        /// The span.
        span: SpanId,
        /// Raw clock ticks at close.
        ticks: u64,
    },
    /// An event inside a span.
    Event {
        /// The span the event belongs to.
        span: SpanId,
        /// Callsite metadata.
        meta: Meta,
        /// Raw clock ticks.
        ticks: u64,
        /// The event's first field when it is a short string (its message, for `tracing`'s
        /// macros), carried here rather than in a [`Record::Field`]: an event with a short
        /// message takes one record less.
        first: InlineText,
    },
    /// A span's parent is remote (extracted from a carrier); a `request.id` field may follow.
    RemoteParent {
        /// The local span.
        span: SpanId,
        /// The remote trace.
        trace: TraceId,
        /// The remote parent span.
        parent: SpanId,
        /// The remote sampled flag.
        sampled: bool,
    },
    /// A span follows from another span.
    Follows {
        /// The span.
        span: SpanId,
        /// The span it follows from.
        follows: SpanId,
        /// That span's trace.
        trace: TraceId,
    },
    /// A field value of the preceding header.
    Field {
        /// Field name.
        name: &'static str,
        /// Its value.
        value: FieldValue,
    },
    /// A chunk of the string of the preceding [`FieldValue::Str`].
    Bytes([u8; CHUNK]),
    /// Up to [`NUMBERS`] number or boolean field values of the preceding [`Record::Open`] or
    /// [`Record::Event`], named by their index in its callsite (unused places are
    /// [`InlineField::NONE`]): a span with many such fields takes a record per six of them
    /// rather than one each.
    Numbers([InlineField; NUMBERS]),
    /// Up to [`TEXTS`] short strings (at most [`INLINE_TEXT`] bytes each) of the preceding
    /// [`Record::Open`] or [`Record::Event`], named by their index in its callsite (unused places
    /// are [`InlineText::NONE`]): two short string fields take one record.
    Texts([InlineText; TEXTS]),
}

/// Field values one [`Record::Texts`] holds.
pub const TEXTS: usize = 2;

/// Field values one [`Record::Numbers`] holds.
pub const NUMBERS: usize = 6;

/// A field value as stored in a record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldValue {
    /// Signed integer.
    I64(i64),
    /// Unsigned integer.
    U64(u64),
    /// Float.
    F64(f64),
    /// Boolean.
    Bool(bool),
    /// A short string held inline.
    Inline {
        /// Length in bytes.
        len: u8,
        /// UTF-8 bytes; the first `len` are valid.
        bytes: [u8; INLINE_STR],
    },
    /// A longer string carried by the following `len.div_ceil(CHUNK)` [`Record::Bytes`].
    Str {
        /// Length in bytes.
        len: u32,
    },
}

const _: () = assert!(std::mem::size_of::<Record>() <= 64);

/// Bytes of a string an [`InlineText`] holds.
pub const INLINE_TEXT: usize = 28;

/// A short string field value carried in a header record ([`Record::Event`]'s first field),
/// named by its index in the callsite's field set. Byte-aligned, so that it fits in the record's
/// spare room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineText {
    /// Bytes used, plus one; 0: no field.
    len: u8,
    /// The field's index in its callsite's field set.
    index: u8,
    bytes: [u8; INLINE_TEXT],
}

impl InlineText {
    /// No field.
    pub const NONE: InlineText = InlineText { len: 0, index: 0, bytes: [0; INLINE_TEXT] };

    /// `text` as field number `index` of its callsite; `None` when it is longer than
    /// [`INLINE_TEXT`] bytes or the index does not fit a byte.
    #[inline]
    pub fn new(index: usize, text: &[u8]) -> Option<InlineText> {
        if text.len() > INLINE_TEXT {
            return None;
        }
        let mut bytes = [0; INLINE_TEXT];
        bytes[..text.len()].copy_from_slice(text);
        Some(InlineText { len: text.len() as u8 + 1, index: u8::try_from(index).ok()?, bytes })
    }

    /// The first `len` bytes of `buf` as field number `index`, like [`new`](Self::new); copies
    /// a fixed [`INLINE_TEXT`] bytes (what follows `len` is kept but never read back).
    #[inline]
    pub fn from_prefix<const N: usize>(index: usize, buf: &[u8; N], len: usize) -> Option<InlineText> {
        if len > INLINE_TEXT || N < INLINE_TEXT {
            return None;
        }
        let mut bytes = [0; INLINE_TEXT];
        bytes.copy_from_slice(&buf[..INLINE_TEXT]);
        Some(InlineText { len: len as u8 + 1, index: u8::try_from(index).ok()?, bytes })
    }

    /// Its 30 bytes in the raw recording's layout: length plus one, index, text.
    #[inline]
    pub fn to_bytes(&self) -> [u8; 30] {
        let mut b = [0u8; 30];
        b[0] = self.len;
        b[1] = self.index;
        b[2..].copy_from_slice(&self.bytes);
        b
    }

    /// The text of [`to_bytes`](Self::to_bytes)' layout; `None` when the length is out of range.
    #[inline]
    pub fn from_bytes(b: [u8; 30]) -> Option<InlineText> {
        if usize::from(b[0]) > INLINE_TEXT + 1 {
            return None;
        }
        let mut bytes = [0u8; INLINE_TEXT];
        bytes.copy_from_slice(&b[2..]);
        Some(InlineText { len: b[0], index: b[1], bytes })
    }

    /// The field's index and bytes, if there is one.
    #[inline]
    pub fn get(&self) -> Option<(usize, &[u8])> {
        let len = usize::from(self.len.checked_sub(1)?).min(INLINE_TEXT);
        Some((usize::from(self.index), &self.bytes[..len]))
    }
}

/// A number or boolean field value carried in a header record, named by its index in the
/// callsite's field set. Ten bytes, byte-aligned, so that it fits in [`Record::Open`]'s spare
/// room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InlineField {
    /// 0: none; 1: `i64`; 2: `u64`; 3: `f64` (its bits); 4: `bool`.
    kind: u8,
    /// The field's index in its callsite's field set.
    index: u8,
    bits: [u8; 8],
}

impl InlineField {
    /// No field.
    pub const NONE: InlineField = InlineField { kind: 0, index: 0, bits: [0; 8] };

    /// `value` as field number `index` of its callsite; `None` for strings and for indices that
    /// do not fit a byte.
    #[inline]
    pub fn new(index: usize, value: FieldValue) -> Option<InlineField> {
        let (kind, bits) = match value {
            FieldValue::I64(v) => (1, v as u64),
            FieldValue::U64(v) => (2, v),
            FieldValue::F64(v) => (3, v.to_bits()),
            FieldValue::Bool(v) => (4, u64::from(v)),
            FieldValue::Inline { .. } | FieldValue::Str { .. } => return None,
        };
        Some(InlineField { kind, index: u8::try_from(index).ok()?, bits: bits.to_le_bytes() })
    }

    /// Its 10 bytes in the raw recording's layout: kind, index, value bits (little-endian).
    #[inline]
    pub fn to_bytes(&self) -> [u8; 10] {
        let mut b = [0u8; 10];
        b[0] = self.kind;
        b[1] = self.index;
        b[2..].copy_from_slice(&self.bits);
        b
    }

    /// The field of [`to_bytes`](Self::to_bytes)' layout; `None` for an unknown kind or a
    /// boolean other than 0 or 1.
    #[inline]
    pub fn from_bytes(b: [u8; 10]) -> Option<InlineField> {
        let mut bits = [0u8; 8];
        bits.copy_from_slice(&b[2..]);
        let ok = match b[0] {
            0..=3 => true,
            4 => u64::from_le_bytes(bits) <= 1,
            _ => false,
        };
        ok.then_some(InlineField { kind: b[0], index: b[1], bits })
    }

    /// The field's index and value, if there is one.
    #[inline]
    pub fn get(&self) -> Option<(usize, FieldValue)> {
        let bits = u64::from_le_bytes(self.bits);
        let value = match self.kind {
            1 => FieldValue::I64(bits as i64),
            2 => FieldValue::U64(bits),
            3 => FieldValue::F64(f64::from_bits(bits)),
            4 => FieldValue::Bool(bits != 0),
            _ => return None,
        };
        Some((usize::from(self.index), value))
    }
}

impl FieldValue {
    /// `bytes` held inline, when they are at most [`INLINE_STR`].
    #[inline]
    pub fn inline(bytes: &[u8]) -> Option<FieldValue> {
        let len = bytes.len();
        if len > INLINE_STR {
            return None;
        }
        let mut inline = [0u8; INLINE_STR];
        inline[..len].copy_from_slice(bytes);
        Some(FieldValue::Inline { len: len as u8, bytes: inline })
    }

    /// How many [`Record::Bytes`] chunks follow this value.
    pub fn chunks(&self) -> usize {
        match self {
            FieldValue::Str { len } => (*len as usize).div_ceil(CHUNK),
            _ => 0,
        }
    }
}

/// The longest prefix of `s` that is at most `max` bytes and ends on a character boundary.
pub fn truncate_str(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Passes to `push`, in order, the records encoding string field `name` = `s` (truncated to
/// [`MAX_STR`]).
pub fn push_str_field(name: &'static str, s: &str, mut push: impl FnMut(Record)) {
    let s = truncate_str(s, MAX_STR);
    if let Some(value) = FieldValue::inline(s.as_bytes()) {
        push(Record::Field { name, value });
        return;
    }
    push(Record::Field { name, value: FieldValue::Str { len: s.len() as u32 } });
    for chunk in s.as_bytes().chunks(CHUNK) {
        push(Record::chunk(chunk));
    }
}

impl Record {
    /// A [`Record::Bytes`] chunk holding `bytes` (at most [`CHUNK`]; the rest is zero).
    #[inline]
    pub fn chunk(bytes: &[u8]) -> Record {
        let mut chunk = [0u8; CHUNK];
        chunk[..bytes.len()].copy_from_slice(bytes);
        Record::Bytes(chunk)
    }
}

/// Reassembles the string of a [`FieldValue::Str`] from the chunks that follow it.
///
/// Returns `None` when fewer chunks are given than the length needs.
pub fn collect_str<'a>(
    len: u32,
    chunks: impl IntoIterator<Item = &'a Record>,
    out: &mut String,
) -> Option<()> {
    // The bytes go straight into `out`'s buffer; only invalid UTF-8 (a value cut mid-character
    // by a writer that did not cut at a boundary) takes a second, lossy copy.
    let start = out.len();
    let mut buf = std::mem::take(out).into_bytes();
    buf.reserve(len as usize);
    let mut left = len as usize;
    for rec in chunks {
        let Record::Bytes(b) = rec else { break };
        let n = left.min(CHUNK);
        buf.extend_from_slice(&b[..n]);
        left -= n;
        if left == 0 {
            break;
        }
    }
    let complete = left == 0;
    if !complete {
        buf.truncate(start);
    }
    *out = match String::from_utf8(buf) {
        Ok(s) => s,
        Err(e) => {
            let mut bytes = e.into_bytes();
            let lossy = String::from_utf8_lossy(&bytes[start..]).into_owned();
            bytes.truncate(start);
            // `bytes[..start]` is `out` as it was, valid UTF-8.
            let mut s = String::from_utf8(bytes).unwrap_or_default();
            s.push_str(&lossy);
            s
        }
    };
    complete.then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_fits_a_cache_line() {
        assert!(std::mem::size_of::<Record>() <= 64);
    }

    #[test]
    fn inline_texts_round_trip() {
        for len in [0, 1, INLINE_TEXT - 1, INLINE_TEXT] {
            let text: Vec<u8> = (0..len as u8).collect();
            assert_eq!(
                InlineText::new(7, &text).and_then(|t| t.get().map(|(i, b)| (i, b.to_vec()))),
                Some((7, text))
            );
        }
        assert_eq!(InlineText::new(0, &[b'x'; INLINE_TEXT + 1]), None, "too long");
        assert_eq!(InlineText::new(256, b"x"), None, "index beyond a byte");
        assert_eq!(InlineText::NONE.get(), None);
    }

    #[test]
    fn inline_fields_round_trip() {
        for v in [
            FieldValue::I64(-5),
            FieldValue::I64(i64::MIN),
            FieldValue::U64(u64::MAX),
            FieldValue::F64(-0.25),
            FieldValue::Bool(true),
            FieldValue::Bool(false),
        ] {
            assert_eq!(InlineField::new(3, v).and_then(|f| f.get()), Some((3, v)));
        }
        assert_eq!(InlineField::new(256, FieldValue::U64(1)), None, "index beyond a byte");
        let s = FieldValue::Inline { len: 1, bytes: [b'x'; INLINE_STR] };
        assert_eq!(InlineField::new(0, s), None, "strings are not inlined");
        assert_eq!(InlineField::NONE.get(), None);
    }

    /// `collect_str` appends to what `out` holds, replaces invalid UTF-8 as `from_utf8_lossy`
    /// does, and leaves `out` as it was when chunks are missing.
    #[test]
    fn collected_strings_append_and_incomplete_ones_leave_out_alone() {
        let s = "x".repeat(100);
        let mut recs = Vec::new();
        push_str_field("k", &s, |r| recs.push(r));
        let Record::Field { value: FieldValue::Str { len }, .. } = recs[0] else { panic!("chunked") };
        let mut out = String::from("é:");
        collect_str(len, &recs[1..], &mut out).unwrap();
        assert_eq!(out, format!("é:{s}"));
        let mut out = String::from("kept");
        assert_eq!(collect_str(len, &recs[1..recs.len() - 1], &mut out), None);
        assert_eq!(out, "kept");
        let mut chunk = [b'a'; CHUNK];
        chunk[1] = 0xff;
        let mut out = String::from("é");
        collect_str(3, &[Record::Bytes(chunk)], &mut out).unwrap();
        assert_eq!(out, "éa\u{fffd}a");
    }

    #[test]
    fn strings_round_trip_through_chunks() {
        for len in [0, 1, 22, 23, 48, 49, 100, 5000] {
            let s: String = "aé".chars().cycle().take(len).collect();
            let mut recs = Vec::new();
            push_str_field("k", &s, |r| recs.push(r));
            let want = truncate_str(&s, MAX_STR);
            match recs[0] {
                Record::Field { value: FieldValue::Inline { len, bytes }, .. } => {
                    assert_eq!(&bytes[..len as usize], want.as_bytes());
                    assert_eq!(recs.len(), 1);
                }
                Record::Field { value: v @ FieldValue::Str { len }, .. } => {
                    assert_eq!(recs.len(), 1 + v.chunks());
                    let mut out = String::new();
                    collect_str(len, &recs[1..], &mut out).unwrap();
                    assert_eq!(out, want);
                }
                _ => panic!("unexpected record"),
            }
        }
    }

    #[test]
    fn truncation_keeps_char_boundaries() {
        assert_eq!(truncate_str("ééé", 3), "é");
        assert_eq!(truncate_str("abc", 10), "abc");
    }
}
