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
    /// The last [`Record::Numbers`] staged: its index in the group and the places it uses.
    numbers: Option<(usize, usize)>,
    /// The last [`Record::Texts`] staged, likewise.
    texts: Option<(usize, usize)>,
}

/// Adds `value` to the record of its kind that `last` (its index in the group and the places it
/// uses) names, when that is the group's last staged record and has room, so that fields keep
/// their order; else stages a new one (`record`) with `value` in its first place.
#[inline(always)]
fn pack<T: Copy, const N: usize>(
    ring: &mut LocalRing,
    last: &mut Option<(usize, usize)>,
    value: T,
    empty: T,
    record: impl FnOnce([T; N]) -> Record,
    places: impl FnOnce(&mut Record) -> Option<&mut [T; N]>,
) {
    match *last {
        Some((at, used)) if used < N && at + 1 == ring.staged() => {
            ring.amend_staged(at, |r| {
                if let Some(p) = places(r) {
                    p[used] = value;
                }
            });
            *last = Some((at, used + 1));
        }
        _ => {
            let mut fresh = [empty; N];
            fresh[0] = value;
            *last = Some((ring.staged(), 1));
            ring.stage(record(fresh));
        }
    }
}

impl<'a> FieldVisitor<'a> {
    /// A visitor for the group `ring` has begun; `inline`: what its header can carry. Open and
    /// event headers (any `inline` but [`Inline::Nothing`]) name their callsite, so their
    /// numbers, booleans and short strings are packed into [`Record::Numbers`] and
    /// [`Record::Texts`].
    pub(crate) fn new(ring: &'a mut LocalRing, inline: Inline) -> Self {
        Self { ring, request_id: None, inline, pack: inline != Inline::Nothing, numbers: None, texts: None }
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
            Some(inline) if self.pack => self.push_number(inline),
            _ => self.ring.stage(Record::Field { name: field.name(), value }),
        }
        if field.name() == REQUEST_ID_KEY {
            self.request_id = Some(shown.to_string());
        }
    }

    #[inline]
    fn push_number(&mut self, value: InlineField) {
        fn places(r: &mut Record) -> Option<&mut [InlineField; NUMBERS]> {
            match r {
                Record::Numbers(p) => Some(p),
                _ => None,
            }
        }
        pack(self.ring, &mut self.numbers, value, InlineField::NONE, Record::Numbers, places);
    }

    #[inline]
    fn push_text(&mut self, value: InlineText) {
        fn places(r: &mut Record) -> Option<&mut [InlineText; TEXTS]> {
            match r {
                Record::Texts(p) => Some(p),
                _ => None,
            }
        }
        pack(self.ring, &mut self.texts, value, InlineText::NONE, Record::Texts, places);
    }

    fn push_str(&mut self, field: &Field, s: &str) {
        self.inline = Inline::Nothing;
        match self.pack.then(|| InlineText::new(field.index(), s.as_bytes())).flatten() {
            Some(text) => self.push_text(text),
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
                self.push_text(short);
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
