//! Turns `tracing` field values into records without allocating: [`Record::Field`]s, and
//! [`Record::Numbers`] for the numbers and booleans of spans and events.

use std::fmt::Write as _;

use ringtrace_core::propagation::REQUEST_ID_KEY;
use ringtrace_core::record::{
    push_str_field, FieldValue, InlineField, InlineText, Record, CHUNK, INLINE_STR, INLINE_TEXT, MAX_STR,
    NUMBERS, TEXTS,
};
use tracing_core::field::{Field, Visit};

use super::LocalRing;

/// Which first field the group's header record can carry itself.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inline {
    /// None (an update).
    Nothing,
    /// A number or boolean ([`Record::Open`]'s `first`).
    Number,
    /// A short string: an event's message ([`Record::Event`]'s `first`).
    Text,
}

/// Stages the records of a group's fields in `ring`'s current group; remembers a `request.id`
/// value.
pub(crate) struct FieldVisitor<'a> {
    pub ring: &'a mut LocalRing,
    /// The `request.id` field's value, when the span has one (this allocates, once per request).
    pub request_id: Option<String>,
    /// What the group's header can still carry: only the first field visited, while the header
    /// is the group's only record.
    inline: Inline,
    /// Numbers, booleans and short strings go into [`Record::Numbers`] and [`Record::Texts`]
    /// (open and event groups, whose header names the callsite their indices refer to; not
    /// updates).
    pack: bool,
    /// The index in the group of the last [`Record::Numbers`] or [`Record::Texts`] staged.
    packed: Option<usize>,
}

/// A field value that goes into a [`Record::Numbers`] or a [`Record::Texts`].
#[derive(Clone, Copy)]
enum Packed {
    Number(InlineField),
    Text(InlineText),
}

impl Packed {
    /// Puts the value in a free place of `record`, if it is a record of its kind with one.
    #[inline]
    fn add_to(self, record: &mut Record) -> bool {
        fn free<T: Copy>(places: &mut [T], used: impl Fn(&T) -> bool, value: T) -> bool {
            match places.iter_mut().find(|p| !used(p)) {
                Some(p) => {
                    *p = value;
                    true
                }
                None => false,
            }
        }
        match (self, record) {
            (Packed::Number(n), Record::Numbers(places)) => free(places, |p| p.get().is_some(), n),
            (Packed::Text(t), Record::Texts(places)) => free(places, |p| p.get().is_some(), t),
            _ => false,
        }
    }

    /// A new record holding just this value.
    #[inline]
    fn record(self) -> Record {
        match self {
            Packed::Number(n) => {
                let mut places = [InlineField::NONE; NUMBERS];
                places[0] = n;
                Record::Numbers(places)
            }
            Packed::Text(t) => {
                let mut places = [InlineText::NONE; TEXTS];
                places[0] = t;
                Record::Texts(places)
            }
        }
    }
}

impl<'a> FieldVisitor<'a> {
    /// A visitor for the group `ring` has begun; `inline`: what its header can carry. Open and
    /// event headers (any `inline` but [`Inline::Nothing`]) name their callsite, so their
    /// numbers, booleans and short strings are packed into [`Record::Numbers`] and
    /// [`Record::Texts`].
    pub fn new(ring: &'a mut LocalRing, inline: Inline) -> Self {
        Self { ring, request_id: None, inline, pack: inline != Inline::Nothing, packed: None }
    }

    /// Pushes a number or boolean; `shown` is its text, kept only for a `request.id` field.
    #[inline]
    fn push(&mut self, field: &Field, value: FieldValue, shown: &dyn std::fmt::Display) {
        // Only the first field visited, while the header is the group's only record.
        let first = self.inline == Inline::Number && self.ring.staged() == 1;
        self.inline = Inline::Nothing;
        match InlineField::new(field.index(), value) {
            Some(inline) if first => self.ring.amend_staged(0, |r| {
                if let Record::Open { first: f, .. } = r {
                    *f = inline;
                }
            }),
            Some(inline) if self.pack => self.push_packed(Packed::Number(inline)),
            _ => self.ring.stage(Record::Field { name: field.name(), value }),
        }
        if field.name() == REQUEST_ID_KEY {
            self.request_id = Some(shown.to_string());
        }
    }

    /// Adds `value` to the group's last staged record when that is a record of its kind with
    /// room (so fields keep their order), else stages a new one.
    #[inline]
    fn push_packed(&mut self, value: Packed) {
        let mut added = false;
        if let Some(at) = self.packed.filter(|&at| at + 1 == self.ring.staged()) {
            self.ring.amend_staged(at, |r| added = value.add_to(r));
        }
        if !added {
            self.packed = Some(self.ring.staged());
            self.ring.stage(value.record());
        }
    }

    fn push_str(&mut self, field: &Field, s: &str) {
        self.inline = Inline::Nothing;
        match self.pack.then(|| InlineText::new(field.index(), s.as_bytes())).flatten() {
            Some(text) => self.push_packed(Packed::Text(text)),
            None => push_str_field(field.name(), s, |r| self.ring.stage(r)),
        }
        if field.name() == REQUEST_ID_KEY {
            self.request_id = Some(s.to_owned());
        }
    }
}

impl Visit for FieldVisitor<'_> {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, FieldValue::I64(value), &value);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, FieldValue::U64(value), &value);
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, FieldValue::F64(value), &value);
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, FieldValue::Bool(value), &value);
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        match i64::try_from(value) {
            Ok(v) => self.push(field, FieldValue::I64(v), &v),
            Err(_) => self.record_debug(field, &value),
        }
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        match u64::try_from(value) {
            Ok(v) => self.push(field, FieldValue::U64(v), &v),
            Err(_) => self.record_debug(field, &value),
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push_str(field, value);
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = self.inline == Inline::Text && self.ring.staged() == 1;
        self.inline = Inline::Nothing;
        if field.name() != REQUEST_ID_KEY {
            // Formatted straight into the ring: no intermediate string, no second copy.
            let mut out = ChunkWriter {
                ring: &mut *self.ring,
                name: field.name(),
                header: None,
                len: 0,
                fill: 0,
                chunk: [0; CHUNK],
                full: false,
            };
            let _ = write!(out, "{value:?}");
            let event_field = text.then(|| field.index());
            let pack = self.pack.then(|| field.index());
            if let Some(short) = out.finish(event_field, pack) {
                self.push_packed(Packed::Text(short));
            }
            return;
        }
        let mut scratch = std::mem::take(&mut self.ring.scratch);
        scratch.clear();
        let _ = write!(scratch, "{value:?}");
        self.push_str(field, &scratch);
        self.ring.scratch = scratch;
    }
}

/// Formats a string field into the ring. Its header record ([`Record::Field`]) is staged when
/// the first whole [`CHUNK`] is ([`Record::Bytes`], staged as they fill), or at
/// [`finish`](Self::finish): then a string of at most [`INLINE_STR`] bytes is held in the header
/// itself, and one of at most [`INLINE_TEXT`] can instead go into the group's event record.
/// Output beyond [`MAX_STR`] bytes is cut at a character boundary, as `push_str_field` does.
struct ChunkWriter<'a> {
    ring: &'a mut LocalRing,
    name: &'static str,
    /// The header's index in the group, once staged.
    header: Option<usize>,
    /// Bytes written so far.
    len: usize,
    /// Bytes in `chunk`.
    fill: usize,
    chunk: [u8; CHUNK],
    /// `MAX_STR` was reached: the rest is ignored.
    full: bool,
}

const _: () = assert!(CHUNK > INLINE_STR && CHUNK > INLINE_TEXT);

impl ChunkWriter<'_> {
    fn stage_header(&mut self) -> usize {
        *self.header.get_or_insert_with(|| {
            let at = self.ring.staged();
            self.ring.stage(Record::Field { name: self.name, value: FieldValue::Str { len: 0 } });
            at
        })
    }

    /// Stages what was written: in the event record, when `event_field` (the field's index in
    /// its callsite) is given and the string is short enough; else, when `packed` (the same
    /// index) is given and the string short enough, returns it for a [`Record::Texts`]; else in
    /// field records.
    fn finish(mut self, event_field: Option<usize>, packed: Option<usize>) -> Option<InlineText> {
        if self.header.is_none() {
            // Nothing staged yet: the string is shorter than a chunk.
            if let Some(first) = event_field.and_then(|i| InlineText::from_prefix(i, &self.chunk, self.len)) {
                self.ring.amend_staged(0, |r| {
                    if let Record::Event { first: f, .. } = r {
                        *f = first;
                    }
                });
                return None;
            }
            if let Some(short) = packed.and_then(|i| InlineText::from_prefix(i, &self.chunk, self.len)) {
                return Some(short);
            }
            if let Some(value) = FieldValue::inline(&self.chunk[..self.len]) {
                self.ring.stage(Record::Field { name: self.name, value });
                return None;
            }
        }
        let header = self.stage_header();
        if self.fill > 0 {
            self.ring.stage(Record::chunk(&self.chunk[..self.fill]));
        }
        let len = self.len as u32;
        self.ring.amend_staged(header, |r| {
            if let Record::Field { value, .. } = r {
                *value = FieldValue::Str { len };
            }
        });
        None
    }
}

impl std::fmt::Write for ChunkWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.full {
            return Ok(());
        }
        let s = if self.len + s.len() > MAX_STR {
            self.full = true;
            ringtrace_core::record::truncate_str(s, MAX_STR - self.len)
        } else {
            s
        };
        let mut rest = s.as_bytes();
        while !rest.is_empty() {
            let n = rest.len().min(CHUNK - self.fill);
            self.chunk[self.fill..self.fill + n].copy_from_slice(&rest[..n]);
            self.fill += n;
            self.len += n;
            rest = &rest[n..];
            if self.fill == CHUNK {
                self.stage_header();
                self.ring.stage(Record::Bytes(self.chunk));
                self.fill = 0;
            }
        }
        Ok(())
    }
}
