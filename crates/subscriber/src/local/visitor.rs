//! Turns `tracing` field values into records without allocating: [`Record::Field`]s, and
//! [`Record::Numbers`] for the numbers and booleans of spans and events.

use std::fmt::Write as _;

use ringtrace_core::propagation::REQUEST_ID_KEY;
use ringtrace_core::raw::{push_str_field_raw, RawRecord};
use ringtrace_core::record::{
    FieldValue, InlineField, InlineText, Record, CHUNK, INLINE_STR, INLINE_TEXT, MAX_STR, NUMBERS, TEXTS,
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
    /// The group's [`Record::Numbers`] being filled: its index in the group and the places it
    /// uses.
    numbers: Option<(usize, usize)>,
    /// The group's [`Record::Texts`] being filled, likewise.
    texts: Option<(usize, usize)>,
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
    /// Inlined into each `record_*` method, whose value is of one kind.
    #[inline(always)]
    fn push(&mut self, field: &Field, value: FieldValue, shown: &dyn std::fmt::Display) {
        // Only the first field visited, while the header is the group's only record.
        let first = self.inline == Inline::Number && self.ring.staged() == 1;
        self.inline = Inline::Nothing;
        match InlineField::new(field.index(), value) {
            Some(inline) if first => self.ring.amend_staged(0, |r| r.set_open_first(inline)),
            Some(inline) if self.pack => self.push_number(inline),
            _ => self.ring.stage(Record::Field { name: field.name(), value }),
        }
        if field.name() == REQUEST_ID_KEY {
            self.request_id = Some(shown.to_string());
        }
    }

    /// Adds `value` to the group's [`Record::Numbers`] being filled, when it has room, wherever
    /// it is in the group; else stages a new one with `value` in its first place. A group's
    /// numbers thus share records whatever strings come between them, and so do its short
    /// strings ([`push_short_str`](Self::push_short_str)): a field's place in the group no
    /// longer follows the order the fields were visited in, and readers put a group's fields
    /// back in their callsite's order (`drain::assemble`), which is the order `tracing`'s
    /// macros visit them in. Always inlined: a call of its own cost the demo 2,600 instructions
    /// a request when the compiler stopped inlining it after an unrelated change.
    #[inline(always)]
    fn push_number(&mut self, value: InlineField) {
        match self.numbers {
            Some((at, used)) if used < NUMBERS => {
                self.ring.amend_staged(at, |r| r.set_number(used, value));
                self.numbers = Some((at, used + 1));
            }
            _ => {
                let mut fresh = [InlineField::NONE; NUMBERS];
                fresh[0] = value;
                self.numbers = Some((self.ring.staged(), 1));
                self.ring.stage(Record::Numbers(fresh));
            }
        }
    }

    /// Pushes a string field. Inlined into `record_str`: the short string's path is the whole
    /// function, and the rarer ones (a long string; a `request.id`, looked for first, so that
    /// nothing follows a call) are calls of their own, so that it saves few registers.
    #[inline(always)]
    fn push_str(&mut self, field: &Field, s: &str) {
        if field.name() == REQUEST_ID_KEY {
            return self.push_request_id_str(field, s);
        }
        self.push_str_value(field, s);
    }

    /// [`push_str`](Self::push_str) but for the `request.id` test.
    #[inline(always)]
    fn push_str_value(&mut self, field: &Field, s: &str) {
        self.inline = Inline::Nothing;
        // A `match`, not `is_ok_and`: its closure would be a call of its own.
        let packed = self.pack
            && match u8::try_from(field.index()) {
                Ok(index) => self.push_short_str(index, s.as_bytes()),
                Err(_) => false,
            };
        if !packed {
            self.push_long_str(field.name(), s);
        }
    }

    /// A string field in a field record, and chunks when it does not fit there.
    #[inline(never)]
    fn push_long_str(&mut self, name: &'static str, s: &str) {
        push_str_field_raw(name, s, |r| self.ring.stage_raw(r));
    }

    /// [`push_str`](Self::push_str) for a `request.id` field: pushed, and kept.
    #[cold]
    #[inline(never)]
    fn push_request_id_str(&mut self, field: &Field, s: &str) {
        self.push_str_value(field, s);
        self.request_id = Some(s.to_owned());
    }

    /// Packs a string of at most [`INLINE_TEXT`] bytes into the group's [`Record::Texts`],
    /// written straight into its record, in the ring: the text is copied once. Returns `false`
    /// for a longer one.
    #[inline(always)]
    fn push_short_str(&mut self, index: u8, text: &[u8]) -> bool {
        if text.len() > INLINE_TEXT {
            return false;
        }
        match self.texts {
            Some((at, used)) if used < TEXTS => {
                self.ring.amend_staged(at, |r| {
                    r.put_text(used, index, text);
                });
                self.texts = Some((at, used + 1));
            }
            _ => {
                self.texts = Some((self.ring.staged(), 1));
                self.ring.stage_made(|r| {
                    r.begin_texts();
                    r.put_text(0, index, text);
                });
            }
        }
        true
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
            // Formatted straight into the ring: no intermediate string, no second copy (a short
            // one is copied from `chunk` into its texts record, as `record_str` copies).
            let mut chunk = [0; CHUNK];
            let mut out = ChunkWriter {
                ring: &mut *self.ring,
                name: field.name(),
                header: None,
                len: 0,
                fill: 0,
                chunk: &mut chunk,
                full: false,
            };
            let _ = write!(out, "{value:?}");
            let event_field = text.then(|| field.index());
            let pack = if self.pack { u8::try_from(field.index()).ok() } else { None };
            if let Some((index, len)) = out.finish(event_field, pack) {
                let packed = self.push_short_str(index, &chunk[..len]);
                debug_assert!(packed, "`finish` hands back only a short string");
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
    chunk: &'a mut [u8; CHUNK],
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
    /// index as a byte: `None` when not packing or when it does not fit) is given and the
    /// string is at most [`INLINE_TEXT`] bytes, hands back the index and the string's length in
    /// `chunk`, for a [`Record::Texts`]; else in field records.
    fn finish(mut self, event_field: Option<usize>, packed: Option<u8>) -> Option<(u8, usize)> {
        if self.header.is_none() {
            // Nothing staged yet: the string is shorter than a chunk.
            if let Some(first) = event_field.and_then(|i| InlineText::from_prefix(i, self.chunk, self.len)) {
                self.ring.amend_staged(0, |r| r.set_event_first(first));
                return None;
            }
            if let Some(index) = packed.filter(|_| self.len <= INLINE_TEXT) {
                return Some((index, self.len));
            }
            if let Some(value) = FieldValue::inline(&self.chunk[..self.len]) {
                self.ring.stage(Record::Field { name: self.name, value });
                return None;
            }
        }
        let header = self.stage_header();
        if self.fill > 0 {
            self.ring.stage_raw(RawRecord::chunk(&self.chunk[..self.fill]));
        }
        let len = self.len as u32;
        self.ring.amend_staged(header, |r| r.set_str_len(len));
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
                self.ring.stage_raw(RawRecord::chunk(self.chunk));
                self.fill = 0;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The visitor fed values of every type through a real thread ring; the published records
    //! are read back and compared whole.

    use ringtrace_core::raw::RawRecord;
    use ringtrace_core::record::{FieldValue, InlineField, InlineText, Record, CHUNK, MAX_STR};
    use ringtrace_core::{SpanId, TraceId};
    use tracing_core::callsite::Callsite;
    use tracing_core::field::{Field, FieldSet, Visit};
    use tracing_core::subscriber::Interest;
    use tracing_core::{Kind, Level, Metadata};

    use super::{FieldVisitor, Inline};
    use crate::shared::fixture;

    struct TestCallsite;
    static CALLSITE: TestCallsite = TestCallsite;
    static META: Metadata<'static> = Metadata::new(
        "work",
        "visitor::tests",
        Level::INFO,
        None,
        None,
        None,
        FieldSet::new(
            &[
                "a",
                "b",
                "c",
                "d",
                "e",
                "f",
                "g",
                "h",
                "i",
                "j",
                "k",
                "l",
                "m",
                "message",
                "request.id",
                "s",
                "t",
            ],
            tracing_core::identify_callsite!(&CALLSITE),
        ),
        Kind::SPAN,
    );
    impl Callsite for TestCallsite {
        fn set_interest(&self, _: Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            &META
        }
    }

    fn field(name: &str) -> Field {
        META.fields().field(name).unwrap()
    }

    fn index(name: &str) -> usize {
        field(name).index()
    }

    /// What a record holds, comparable in assertions.
    #[derive(Debug, PartialEq)]
    enum Shape {
        Open(Option<(usize, FieldValue)>),
        Event(Option<(usize, String)>),
        Update,
        Field(&'static str, FieldValue),
        Bytes(Vec<u8>),
        Numbers(Vec<(usize, FieldValue)>),
        Texts(Vec<(usize, String)>),
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn shape(record: &Record) -> Shape {
        match record {
            Record::Open { first, .. } => Shape::Open(first.get()),
            Record::Event { first, .. } => Shape::Event(first.get().map(|(i, t)| (i, text(t)))),
            Record::Update { .. } => Shape::Update,
            Record::Field { name, value } => Shape::Field(name, *value),
            Record::Bytes(b) => Shape::Bytes(b.to_vec()),
            Record::Numbers(n) => Shape::Numbers(n.iter().filter_map(InlineField::get).collect()),
            Record::Texts(t) => {
                Shape::Texts(t.iter().filter_map(|t| t.get()).map(|(i, t)| (i, text(t))).collect())
            }
            other => panic!("not a record the visitor writes: {other:?}"),
        }
    }

    fn open() -> Record {
        Record::Open {
            span: SpanId::new(1).unwrap(),
            parent: None,
            trace: TraceId::new(2).unwrap(),
            meta: &META,
            ticks: 0,
            sampled: true,
            first: InlineField::NONE,
        }
    }

    fn event() -> Record {
        Record::Event { span: SpanId::new(1).unwrap(), meta: &META, ticks: 0, first: InlineText::NONE }
    }

    fn update() -> Record {
        Record::Update { span: SpanId::new(1).unwrap() }
    }

    /// What [`group`] saw: whether the group was published, its records, the request id kept.
    struct Group {
        published: bool,
        records: Vec<Shape>,
        request_id: Option<String>,
    }

    /// Begins a group with `header` in a ring of `capacity` records, lets `visit` feed a visitor
    /// made with `inline`, commits, and reads back what the ring holds.
    fn group(
        capacity: usize,
        header: Record,
        inline: Inline,
        visit: impl FnOnce(&mut FieldVisitor<'_>),
    ) -> Group {
        let shared = fixture::shared(capacity, 128);
        let (published, request_id) = crate::local::with_local(&shared, |ring| {
            ring.begin(header);
            let mut visitor = FieldVisitor::new(ring, inline);
            visit(&mut visitor);
            let request_id = visitor.request_id.take();
            (ring.commit(), request_id)
        })
        .unwrap();
        let mut rings = Vec::new();
        shared.take_new_rings(&mut rings);
        crate::callsites::register(&META);
        let mut decoded = Vec::new();
        rings[0].ring.cons.read_with(|a, b| {
            assert_eq!(
                crate::drain::decode_local(a.iter().chain(b), &mut decoded),
                0,
                "every record decodes"
            );
        });
        let records = decoded.iter().map(shape).collect();
        Group { published, records, request_id }
    }

    fn inline_str(s: &str) -> FieldValue {
        FieldValue::inline(s.as_bytes()).unwrap()
    }

    /// The chunk records of `s`.
    fn chunks(s: &str) -> Vec<Shape> {
        s.as_bytes()
            .chunks(CHUNK)
            .map(|c| {
                let mut chunk = [0; CHUNK];
                chunk[..c.len()].copy_from_slice(c);
                Shape::Bytes(chunk.to_vec())
            })
            .collect()
    }

    #[test]
    fn a_first_number_rides_in_the_open_record_and_the_rest_go_six_to_a_record() {
        let g = group(64, open(), Inline::Number, |v| {
            v.record_i64(&field("a"), -7);
            v.record_u64(&field("b"), 1);
            v.record_f64(&field("c"), 2.5);
            v.record_bool(&field("d"), true);
            v.record_i128(&field("e"), -3);
            v.record_u128(&field("f"), 4);
            v.record_u64(&field("g"), 5);
            v.record_u64(&field("h"), 6);
        });
        assert!(g.published);
        assert_eq!(
            g.records,
            [
                Shape::Open(Some((0, FieldValue::I64(-7)))),
                Shape::Numbers(vec![
                    (1, FieldValue::U64(1)),
                    (2, FieldValue::F64(2.5)),
                    (3, FieldValue::Bool(true)),
                    (4, FieldValue::I64(-3)),
                    (5, FieldValue::U64(4)),
                    (6, FieldValue::U64(5)),
                ]),
                Shape::Numbers(vec![(7, FieldValue::U64(6))]),
            ]
        );
    }

    #[test]
    fn numbers_share_records_and_short_strings_others_whatever_comes_between_them() {
        // Visited in this order, the six fields used to take five records: a new one at each
        // change between strings and numbers. Readers put them back in callsite order.
        let g = group(64, open(), Inline::Number, |v| {
            v.record_str(&field("s"), "x");
            v.record_u64(&field("a"), 1);
            v.record_u64(&field("b"), 2);
            v.record_str(&field("t"), "y");
            v.record_debug(&field("message"), &"z");
            v.record_u64(&field("c"), 3);
        });
        assert_eq!(
            g.records,
            [
                Shape::Open(None),
                Shape::Texts(vec![(index("s"), "x".into()), (index("t"), "y".into())]),
                Shape::Numbers(vec![
                    (0, FieldValue::U64(1)),
                    (1, FieldValue::U64(2)),
                    (2, FieldValue::U64(3))
                ]),
                Shape::Texts(vec![(index("message"), "\"z\"".into())]),
            ]
        );
    }

    #[test]
    fn a_formatted_value_joins_a_texts_record_with_room() {
        let g = group(64, open(), Inline::Number, |v| {
            v.record_str(&field("s"), "x");
            v.record_debug(&field("message"), &format_args!("z"));
            v.record_debug(&field("t"), &"y");
        });
        assert_eq!(
            g.records,
            [
                Shape::Open(None),
                Shape::Texts(vec![(index("s"), "x".into()), (index("message"), "z".into())]),
                Shape::Texts(vec![(index("t"), "\"y\"".into())]),
            ]
        );
    }

    #[test]
    fn strings_of_up_to_28_bytes_pair_up_and_longer_ones_take_chunks() {
        let exactly_28 = "twenty-eight bytes, exactly.";
        let over_28 = "twenty-nine bytes, one over!!";
        let chunked = "c".repeat(CHUNK + 1);
        let g = group(64, open(), Inline::Number, |v| {
            v.record_str(&field("s"), exactly_28);
            v.record_str(&field("t"), "");
            v.record_str(&field("a"), over_28);
            v.record_debug(&field("b"), &format_args!("{over_28}"));
            v.record_debug(&field("c"), &format_args!("{chunked}"));
            v.record_debug(&field("d"), &format_args!("{exactly_28}"));
        });
        let mut expected = vec![
            Shape::Open(None),
            Shape::Texts(vec![(index("s"), exactly_28.into()), (index("t"), String::new())]),
            Shape::Field("a", FieldValue::Str { len: 29 }),
        ];
        expected.extend(chunks(over_28));
        expected.push(Shape::Field("b", FieldValue::Str { len: 29 }));
        expected.extend(chunks(over_28));
        expected.push(Shape::Field("c", FieldValue::Str { len: CHUNK as u32 + 1 }));
        expected.extend(chunks(&chunked));
        expected.push(Shape::Texts(vec![(index("d"), exactly_28.into())]));
        assert_eq!(g.records, expected);
    }

    #[test]
    fn an_update_takes_a_record_per_field_with_short_strings_inline() {
        let at_22 = "x".repeat(22);
        let at_23 = "y".repeat(23);
        let g = group(64, update(), Inline::Nothing, |v| {
            v.record_u64(&field("a"), 1);
            v.record_bool(&field("b"), false);
            v.record_str(&field("s"), &at_22);
            v.record_debug(&field("t"), &format_args!("{at_22}"));
            v.record_str(&field("c"), &at_23);
            v.record_debug(&field("d"), &format_args!("{at_23}"));
        });
        let mut expected = vec![
            Shape::Update,
            Shape::Field("a", FieldValue::U64(1)),
            Shape::Field("b", FieldValue::Bool(false)),
            Shape::Field("s", inline_str(&at_22)),
            Shape::Field("t", inline_str(&at_22)),
            Shape::Field("c", FieldValue::Str { len: 23 }),
        ];
        expected.extend(chunks(&at_23));
        expected.push(Shape::Field("d", FieldValue::Str { len: 23 }));
        expected.extend(chunks(&at_23));
        assert_eq!(g.records, expected);
    }

    #[test]
    fn a_short_first_message_rides_in_the_event_record() {
        let g = group(64, event(), Inline::Text, |v| {
            v.record_debug(&field("message"), &format_args!("hello"));
            v.record_u64(&field("a"), 7);
        });
        assert_eq!(
            g.records,
            [
                Shape::Event(Some((index("message"), "hello".into()))),
                Shape::Numbers(vec![(0, FieldValue::U64(7))])
            ]
        );
        // A message that is not first is packed with the other short strings.
        let g = group(64, event(), Inline::Text, |v| {
            v.record_u64(&field("a"), 7);
            v.record_debug(&field("message"), &format_args!("hello"));
        });
        assert_eq!(
            g.records,
            [
                Shape::Event(None),
                Shape::Numbers(vec![(0, FieldValue::U64(7))]),
                Shape::Texts(vec![(index("message"), "hello".into())]),
            ]
        );
        // A long one keeps its field and chunk records.
        let long = "m".repeat(29);
        let g =
            group(64, event(), Inline::Text, |v| v.record_debug(&field("message"), &format_args!("{long}")));
        let mut expected = vec![Shape::Event(None), Shape::Field("message", FieldValue::Str { len: 29 })];
        expected.extend(chunks(&long));
        assert_eq!(g.records, expected);
    }

    #[test]
    fn strings_are_cut_at_max_str_on_a_character_boundary() {
        let euros = "€".repeat(2000);
        let cut = "€".repeat(MAX_STR / 3);
        assert_eq!(cut.len(), MAX_STR - 1, "a three-byte character straddles the limit");
        let g = group(1024, update(), Inline::Nothing, |v| {
            v.record_debug(&field("s"), &format_args!("{euros}"));
            v.record_str(&field("t"), &euros);
        });
        let mut expected = vec![Shape::Update, Shape::Field("s", FieldValue::Str { len: cut.len() as u32 })];
        expected.extend(chunks(&cut));
        expected.push(Shape::Field("t", FieldValue::Str { len: cut.len() as u32 }));
        expected.extend(chunks(&cut));
        assert_eq!(g.records, expected);
    }

    #[test]
    fn numbers_beyond_64_bits_are_recorded_as_text() {
        let g = group(64, update(), Inline::Nothing, |v| {
            v.record_u128(&field("a"), u128::from(u64::MAX));
            v.record_u128(&field("b"), u128::from(u64::MAX) + 1);
            v.record_i128(&field("c"), i128::from(i64::MIN) - 1);
        });
        assert_eq!(
            g.records,
            [
                Shape::Update,
                Shape::Field("a", FieldValue::U64(u64::MAX)),
                Shape::Field("b", inline_str("18446744073709551616")),
                Shape::Field("c", inline_str("-9223372036854775809")),
            ]
        );
    }

    #[test]
    fn a_request_id_is_kept_whatever_its_type() {
        let request = |visit: fn(&mut FieldVisitor<'_>)| group(64, open(), Inline::Number, visit).request_id;
        assert_eq!(request(|v| v.record_str(&field("request.id"), "req-1")).as_deref(), Some("req-1"));
        assert_eq!(request(|v| v.record_debug(&field("request.id"), &"req-2")).as_deref(), Some("\"req-2\""));
        assert_eq!(request(|v| v.record_u64(&field("request.id"), 3)).as_deref(), Some("3"));
        assert_eq!(request(|v| v.record_str(&field("s"), "not one")), None);
        // The field is recorded as well.
        let g = group(64, open(), Inline::Number, |v| v.record_str(&field("request.id"), "req-1"));
        assert_eq!(g.records, [Shape::Open(None), Shape::Texts(vec![(index("request.id"), "req-1".into())])]);
    }

    /// A short string's texts record is made in its ring slot: in slots that held other records
    /// before (the ring gone round), it is the exact encoding, with nothing of what was there.
    #[test]
    fn a_texts_record_made_in_a_used_slot_holds_nothing_else() {
        let shared = fixture::shared(8, 128);
        crate::callsites::register(&META);
        let long = "\u{7f}".repeat(6 * CHUNK);
        // An update with a string of six chunks fills all eight slots with non-zero bytes.
        let filled = crate::local::with_local(&shared, |ring| {
            ring.begin(update());
            FieldVisitor::new(ring, Inline::Nothing).record_str(&field("s"), &long);
            ring.commit()
        });
        assert_eq!(filled, Some(true));
        let mut rings = Vec::new();
        shared.take_new_rings(&mut rings);
        let cons = &mut rings[0].ring.cons;
        assert_eq!(cons.occupied(), 8);
        cons.skip(8);
        let published = crate::local::with_local(&shared, |ring| {
            ring.begin(open());
            let mut v = FieldVisitor::new(ring, Inline::Number);
            v.record_str(&field("s"), "ab");
            v.record_str(&field("t"), "c");
            v.record_str(&field("a"), "");
            ring.commit()
        });
        assert_eq!(published, Some(true));
        let expected = [
            RawRecord::new(&Record::Texts([
                InlineText::new(index("s"), b"ab").unwrap(),
                InlineText::new(index("t"), b"c").unwrap(),
            ])),
            RawRecord::new(&Record::Texts([InlineText::new(index("a"), b"").unwrap(), InlineText::NONE])),
        ];
        let texts: Vec<RawRecord> = cons.read_with(|a, b| a.iter().chain(b).skip(1).copied().collect());
        assert_eq!(texts, expected);
    }

    #[test]
    fn a_group_larger_than_the_ring_is_dropped_whole() {
        let five = |v: &mut FieldVisitor<'_>| {
            for name in ["a", "b", "c", "d", "e"] {
                v.record_u64(&field(name), 1);
            }
        };
        let g = group(5, update(), Inline::Nothing, five);
        assert!(!g.published, "six records do not fit a ring of five");
        assert_eq!(g.records, []);
        let g = group(6, update(), Inline::Nothing, five);
        assert!(g.published);
        assert_eq!(g.records.len(), 6);
    }
}
