//! Applying records to the spans being assembled.

use std::sync::Arc;

use ringtrace_core::propagation::REQUEST_ID_KEY;
use ringtrace_core::record::{collect_str, FieldValue, Meta, Record};
use ringtrace_core::{SpanId, TraceId};

use super::{Drain, SpanMap};
use crate::span_data::{EventData, LinkData, SpanData, Value};

/// The request ids a span the drain has seen open carries itself.
#[derive(Default)]
struct Requests {
    /// `request.id` recorded on the span itself (field or API).
    own: Option<Arc<str>>,
    /// Request id carried by the remote parent's baggage.
    remote: Option<Arc<str>>,
}

impl Requests {
    fn any(&self) -> bool {
        self.own.is_some() || self.remote.is_some()
    }
}

/// The spans the drain has seen open, kept in place: the map holds only slot indices, so a span
/// is written once into its slot and moved once out of it however the map grows or rehashes.
#[derive(Default)]
pub(crate) struct LiveSpans {
    index: SpanMap<u32>,
    spans: Vec<Option<SpanData>>,
    /// The request ids of the span in the same slot.
    requests: Vec<Requests>,
    free: Vec<u32>,
    /// How many live spans carry a request id: while none does, no span has one to inherit.
    with_request: usize,
}

impl LiveSpans {
    /// The slot for a new span `id` (the old span's, if `id` is already live), to write it into.
    fn slot(&mut self, id: SpanId, own_request: Option<Arc<str>>) -> &mut Option<SpanData> {
        use std::collections::hash_map::Entry;
        let i = match self.index.entry(id) {
            Entry::Occupied(e) => *e.get() as usize,
            Entry::Vacant(e) => {
                let i = match self.free.pop() {
                    Some(i) => i,
                    None => {
                        self.spans.push(None);
                        self.requests.push(Requests::default());
                        (self.spans.len() - 1) as u32
                    }
                };
                e.insert(i);
                i as usize
            }
        };
        set_request(&mut self.requests[i], &mut self.with_request, |q| {
            *q = Requests { own: own_request, remote: None };
        });
        &mut self.spans[i]
    }

    fn get_mut(&mut self, id: &SpanId) -> Option<(&mut SpanData, &mut Requests, &mut usize)> {
        let i = *self.index.get(id)? as usize;
        let data = self.spans.get_mut(i)?.as_mut()?;
        Some((data, &mut self.requests[i], &mut self.with_request))
    }

    /// Removes span `id` and appends it to `out`; returns it there.
    pub(super) fn remove_into<'a>(
        &mut self,
        id: &SpanId,
        out: &'a mut Vec<SpanData>,
    ) -> Option<&'a mut SpanData> {
        let i = self.index.remove(id)?;
        self.free.push(i);
        set_request(&mut self.requests[i as usize], &mut self.with_request, |q| *q = Requests::default());
        out.push(self.spans[i as usize].take()?);
        out.last_mut()
    }

    /// Whether some live span carries a request id of its own or from its remote parent.
    pub(super) fn any_request(&self) -> bool {
        self.with_request > 0
    }

    pub(super) fn ids(&self) -> impl Iterator<Item = SpanId> + '_ {
        self.index.keys().copied()
    }
}

/// Sets a request id on a live span, keeping the count of spans that carry one.
fn set_request(requests: &mut Requests, with_request: &mut usize, set: impl FnOnce(&mut Requests)) {
    *with_request -= usize::from(requests.any());
    set(requests);
    *with_request += usize::from(requests.any());
}

/// A record that arrived before its span's open record.
pub(crate) enum Pending {
    Fields(Vec<(&'static str, Value)>),
    Close(u64),
    Event(EventData),
    Remote { trace: TraceId, parent: SpanId, sampled: bool, request: Option<Arc<str>> },
    Link(LinkData),
}

fn request_of(fields: &[(&'static str, Value)]) -> Option<Arc<str>> {
    fields.iter().rev().find(|(k, _)| *k == REQUEST_ID_KEY).map(|(_, v)| match v {
        Value::Str(s) => Arc::from(s.as_str()),
        other => Arc::from(other.to_string()),
    })
}

/// The request ids of spans `ids`, in order: each span's own, its remote parent's, or its
/// nearest ancestor's. Each ancestor is looked at once however many of `ids` share it (a deep
/// chain of spans exported together costs its length, not its square). Worth calling only
/// when [`LiveSpans::any_request`].
pub(crate) fn resolve_requests(live: &LiveSpans, ids: &[SpanId], out: &mut Vec<Option<Arc<str>>>) {
    let mut known: SpanMap<Option<Arc<str>>> = SpanMap::default();
    let mut path = Vec::new();
    for &id in ids {
        path.clear();
        let mut cur = Some(id);
        // Bounded walk: a corrupt parent chain cannot loop forever.
        let found = loop {
            let Some(c) = cur else { break None };
            if let Some(r) = known.get(&c) {
                break r.clone();
            }
            if path.len() >= 100_000 {
                break None;
            }
            let Some(&i) = live.index.get(&c) else { break None };
            let Some(span) = live.spans[i as usize].as_ref() else { break None };
            path.push(c);
            let requests = &live.requests[i as usize];
            if let Some(r) = requests.own.as_ref().or(requests.remote.as_ref()) {
                break Some(r.clone());
            }
            if span.parent_is_remote {
                break None;
            }
            cur = span.parent_span_id;
        };
        for p in &path {
            known.insert(*p, found.clone());
        }
        out.push(found);
    }
}

/// The records read from one ring in one pass: the ring's two contiguous parts.
#[derive(Clone, Copy)]
pub(crate) struct Records<'a> {
    pub a: &'a [Record],
    pub b: &'a [Record],
}

impl<'a> Records<'a> {
    fn len(&self) -> usize {
        self.a.len() + self.b.len()
    }

    fn get(&self, i: usize) -> &'a Record {
        match self.a.get(i) {
            Some(r) => r,
            None => &self.b[i - self.a.len()],
        }
    }
}

/// A field value held in one record (anything but a chunked string); strings are written into
/// a string from `strings`, the drain's pool of emptied ones, when it has one.
fn value_of(value: FieldValue, strings: &mut Vec<String>) -> Value {
    match value {
        FieldValue::I64(v) => Value::I64(v),
        FieldValue::U64(v) => Value::U64(v),
        FieldValue::F64(v) => Value::F64(v),
        FieldValue::Bool(v) => Value::Bool(v),
        FieldValue::Inline { len, bytes } => pooled_str(&bytes[..usize::from(len).min(bytes.len())], strings),
        // Its chunks follow it; `take_fields` reads them.
        FieldValue::Str { .. } => Value::Str(strings.pop().unwrap_or_default()),
    }
}

/// `bytes` (UTF-8, invalid sequences replaced) in a string from the pool `strings`.
fn pooled_str(bytes: &[u8], strings: &mut Vec<String>) -> Value {
    let mut s = strings.pop().unwrap_or_default();
    s.push_str(&String::from_utf8_lossy(bytes));
    Value::Str(s)
}

/// The name of field number `index` of `meta`'s callsite.
fn field_name(meta: Meta, index: usize) -> Option<&'static str> {
    meta.fields().iter().nth(index).map(|f| f.name())
}

/// How many field values `record` holds when it is one of a group's field records (a chunk
/// counts one, as the string it continues does); `None` for a header.
fn values_in(record: &Record) -> Option<usize> {
    match record {
        Record::Field { .. } | Record::Bytes(_) => Some(1),
        Record::Numbers(n) => Some(n.iter().filter(|f| f.get().is_some()).count()),
        Record::Texts(t) => Some(t.iter().filter(|f| f.get().is_some()).count()),
        _ => None,
    }
}

/// Scratch space for [`in_callsite_order`], kept by the drain between groups.
#[derive(Default)]
pub(crate) struct FieldOrder {
    /// The callsite index of each field decoded for the group so far (`u32::MAX`: unknown).
    indices: Vec<u32>,
    /// The group's fields paired with their indices, while they are sorted.
    pairs: Vec<(u32, (&'static str, Value))>,
}

/// The index of the field `name` in `meta`'s callsite, `u32::MAX` when it has no such field (or
/// no callsite is known): such fields keep their place after the others.
fn field_index(meta: Option<Meta>, name: &str) -> u32 {
    meta.and_then(|m| m.fields().field(name)).map_or(u32::MAX, |f| f.index() as u32)
}

/// Puts `fields`, whose callsite indices are `order.indices`, in callsite order when they are not
/// in it already. The writer packs a group's numbers into shared records, and its short
/// strings into others, whatever came between them (`local::visitor`), so the records hold the
/// fields out of the order `tracing`'s macros visit them in, which is their callsite's order; a
/// recording made before that packing holds them in order and is left as it is. Stable: fields
/// of equal index (unknown ones) keep their relative place.
fn in_callsite_order(fields: &mut Vec<(&'static str, Value)>, order: &mut FieldOrder) {
    debug_assert_eq!(fields.len(), order.indices.len());
    if order.indices.is_sorted() {
        return;
    }
    order.pairs.extend(order.indices.iter().copied().zip(fields.drain(..)));
    order.pairs.sort_by_key(|(index, _)| *index);
    fields.extend(order.pairs.drain(..).map(|(_, field)| field));
}

/// Decodes the field records starting at `start`; returns the index after the last one used.
/// `meta`: the header's callsite, which names the fields of [`Record::Numbers`]. Each field's
/// callsite index goes to `indices`, beside it.
fn take_fields(
    records: Records<'_>,
    start: usize,
    meta: Option<Meta>,
    out: &mut Vec<(&'static str, Value)>,
    indices: &mut Vec<u32>,
    strings: &mut Vec<String>,
) -> usize {
    let mut i = start;
    while i < records.len() {
        match *records.get(i) {
            Record::Numbers(numbers) => {
                i += 1;
                for (index, value) in numbers.iter().filter_map(|n| n.get()) {
                    if let Some(name) = meta.and_then(|m| field_name(m, index)) {
                        out.push((name, value_of(value, strings)));
                        indices.push(index as u32);
                    }
                }
            }
            Record::Texts(texts) => {
                i += 1;
                for (index, text) in texts.iter().filter_map(|t| t.get()) {
                    if let Some(name) = meta.and_then(|m| field_name(m, index)) {
                        out.push((name, pooled_str(text, strings)));
                        indices.push(index as u32);
                    }
                }
            }
            Record::Field { name, value } => {
                i += 1;
                let mut v = value_of(value, strings);
                if let (FieldValue::Str { len }, Value::Str(s)) = (value, &mut v) {
                    let n = value.chunks().min(records.len() - i);
                    collect_str(len, (i..i + n).map(|j| records.get(j)), s);
                    i += n;
                }
                out.push((name, v));
                indices.push(field_index(meta, name));
            }
            // A chunk without its field header cannot occur in a well-formed group; skip it.
            Record::Bytes(_) => i += 1,
            _ => break,
        }
    }
    i
}

impl Drain {
    pub(super) fn apply_all(&mut self, records: Records<'_>, thread_id: u64, thread_name: &Arc<str>) {
        let mut i = 0;
        while i < records.len() {
            let header = *records.get(i);
            // An open record may carry the span's first field itself.
            let inline = match header {
                Record::Open { meta, first, .. } => first.get().and_then(|(index, value)| {
                    Some((index, (field_name(meta, index)?, value_of(value, &mut self.strings))))
                }),
                Record::Event { meta, first, .. } => first.get().and_then(|(index, text)| {
                    Some((index, (field_name(meta, index)?, pooled_str(text, &mut self.strings))))
                }),
                _ => None,
            };
            let meta = match header {
                Record::Open { meta, .. } | Record::Event { meta, .. } => Some(meta),
                _ => None,
            };
            let has_fields =
                inline.is_some() || (i + 1 < records.len() && values_in(records.get(i + 1)).is_some());
            // A span's field list comes from the pool of those of spans already exported; others
            // are allocated to the size needed.
            let mut fields = if !has_fields {
                Vec::new()
            } else {
                let pooled = match header {
                    Record::Open { .. } | Record::Event { .. } => self.field_lists.pop(),
                    _ => None,
                };
                pooled.unwrap_or_else(|| {
                    let following =
                        (i + 1..records.len()).map_while(|j| values_in(records.get(j))).sum::<usize>();
                    Vec::with_capacity(usize::from(inline.is_some()) + following)
                })
            };
            let order = &mut self.field_order;
            order.indices.clear();
            if let Some((index, field)) = inline {
                fields.push(field);
                order.indices.push(index as u32);
            }
            i = take_fields(records, i + 1, meta, &mut fields, &mut order.indices, &mut self.strings);
            in_callsite_order(&mut fields, order);
            self.apply(header, fields, thread_id, thread_name);
        }
    }

    fn apply(
        &mut self,
        header: Record,
        fields: Vec<(&'static str, Value)>,
        thread_id: u64,
        thread_name: &Arc<str>,
    ) {
        match header {
            Record::Open { span, parent, trace, meta, ticks, sampled, first: _ } => {
                let own_request = request_of(&fields);
                let start_unix_ns = self.clock.unix_nanos(ticks);
                // Written straight into the span's slot.
                *self.live.slot(span, own_request) = Some(SpanData {
                    trace_id: trace,
                    span_id: span,
                    parent_span_id: parent,
                    parent_is_remote: false,
                    sampled,
                    meta,
                    start_unix_ns,
                    end_unix_ns: 0,
                    thread_id,
                    thread_name: thread_name.clone(),
                    fields,
                    events: Vec::new(),
                    links: Vec::new(),
                    request_id: None,
                    unclosed: false,
                    dropped_events: 0,
                });
                if !self.pending.is_empty() {
                    if let Some(ops) = self.pending.remove(&span) {
                        for (_, op) in ops {
                            self.apply_pending(span, op);
                        }
                    }
                }
            }
            Record::Update { span } => self.apply_pending(span, Pending::Fields(fields)),
            Record::Close { span, ticks } => self.apply_pending(span, Pending::Close(ticks)),
            Record::Event { span, meta, ticks, first: _ } => {
                let event = EventData { meta, unix_ns: self.clock.unix_nanos(ticks), thread_id, fields };
                self.apply_pending(span, Pending::Event(event));
            }
            Record::RemoteParent { span, trace, parent, sampled } => {
                let request = request_of(&fields);
                self.apply_pending(span, Pending::Remote { trace, parent, sampled, request });
            }
            Record::Follows { span, follows, trace } => {
                self.apply_pending(span, Pending::Link(LinkData { trace_id: trace, span_id: follows }));
            }
            // Field records are consumed with their header; a stray one is ignored.
            Record::Field { .. } | Record::Bytes(_) | Record::Numbers(_) | Record::Texts(_) => {}
        }
    }

    /// Applies `op` to span `id`, or keeps it until the span's open record arrives.
    fn apply_pending(&mut self, id: SpanId, op: Pending) {
        let Some((data, requests, with_request)) = self.live.get_mut(&id) else {
            self.pending.entry(id).or_default().push((self.pass, op));
            return;
        };
        match op {
            Pending::Fields(fields) => {
                if let Some(r) = request_of(&fields) {
                    set_request(requests, with_request, |q| q.own = Some(r));
                }
                data.fields.extend(fields);
            }
            Pending::Close(ticks) => {
                data.end_unix_ns = self.clock.unix_nanos(ticks).max(data.start_unix_ns);
                self.closed.push_back((self.pass, id));
            }
            Pending::Event(e) => {
                let keep = data.events.len() < self.shared.config.span_event_limit
                    || (*e.meta.level() == tracing_core::Level::ERROR
                        && !data.events.iter().any(|x| *x.meta.level() == tracing_core::Level::ERROR));
                if keep {
                    data.events.push(e);
                } else {
                    data.dropped_events = data.dropped_events.saturating_add(1);
                    self.events_over_limit += 1;
                }
            }
            Pending::Remote { trace, parent, sampled, request } => {
                data.trace_id = trace;
                data.parent_span_id = Some(parent);
                data.parent_is_remote = true;
                data.sampled = sampled;
                set_request(requests, with_request, |q| q.remote = request);
            }
            Pending::Link(link) => data.links.push(link),
        }
    }
}
