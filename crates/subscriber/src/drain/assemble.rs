//! Applying records to the spans being assembled.

use std::sync::Arc;

use ringtrace_core::propagation::REQUEST_ID_KEY;
use ringtrace_core::record::{collect_str, FieldValue, Record};
use ringtrace_core::{SpanId, TraceId};

use super::{Drain, SpanMap};
use crate::span_data::{EventData, LinkData, SpanData, Value};

/// A span the drain has seen open.
pub(crate) struct Live {
    pub data: SpanData,
    /// `request.id` recorded on the span itself (field or API).
    pub own_request: Option<Arc<str>>,
    /// Request id carried by the remote parent's baggage.
    pub remote_request: Option<Arc<str>>,
}

/// The spans the drain has seen open, kept in place: the map holds only slot indices, so a span
/// is moved once in and once out however the map grows or rehashes.
#[derive(Default)]
pub(crate) struct LiveSpans {
    index: SpanMap<u32>,
    slots: Vec<Option<Live>>,
    free: Vec<u32>,
}

impl LiveSpans {
    pub fn insert(&mut self, id: SpanId, live: Live) {
        if let Some(&i) = self.index.get(&id) {
            self.slots[i as usize] = Some(live);
            return;
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        self.slots[i as usize] = Some(live);
        self.index.insert(id, i);
    }

    pub fn get(&self, id: &SpanId) -> Option<&Live> {
        self.slots.get(*self.index.get(id)? as usize)?.as_ref()
    }

    pub fn get_mut(&mut self, id: &SpanId) -> Option<&mut Live> {
        self.slots.get_mut(*self.index.get(id)? as usize)?.as_mut()
    }

    pub fn remove(&mut self, id: &SpanId) -> Option<Live> {
        let i = self.index.remove(id)?;
        self.free.push(i);
        self.slots[i as usize].take()
    }

    pub fn ids(&self) -> impl Iterator<Item = SpanId> + '_ {
        self.index.keys().copied()
    }
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
    fields.iter().rev().find(|(k, _)| *k == REQUEST_ID_KEY).map(|(_, v)| Arc::from(v.to_string()))
}

/// The request id of span `id`: its own, its remote parent's, or its nearest ancestor's.
pub(crate) fn resolve_request(live: &LiveSpans, id: SpanId) -> Option<Arc<str>> {
    let mut cur = id;
    // Bounded walk: a corrupt parent chain cannot loop forever.
    for _ in 0..100_000 {
        let span = live.get(&cur)?;
        if let Some(r) = span.own_request.as_ref().or(span.remote_request.as_ref()) {
            return Some(r.clone());
        }
        if span.data.parent_is_remote {
            return None;
        }
        cur = span.data.parent_span_id?;
    }
    None
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

/// Decodes the field records starting at `start`; returns the index after the last one used.
fn take_fields(records: Records<'_>, start: usize, out: &mut Vec<(&'static str, Value)>) -> usize {
    let mut i = start;
    while i < records.len() {
        match *records.get(i) {
            Record::Field { name, value } => {
                i += 1;
                let v = match value {
                    FieldValue::I64(v) => Value::I64(v),
                    FieldValue::U64(v) => Value::U64(v),
                    FieldValue::F64(v) => Value::F64(v),
                    FieldValue::Bool(v) => Value::Bool(v),
                    FieldValue::Inline { len, bytes } => {
                        let n = usize::from(len).min(bytes.len());
                        Value::Str(String::from_utf8_lossy(&bytes[..n]).into_owned())
                    }
                    FieldValue::Str { len } => {
                        let n = value.chunks().min(records.len() - i);
                        let mut s = String::new();
                        collect_str(len, (i..i + n).map(|j| records.get(j)), &mut s);
                        i += n;
                        Value::Str(s)
                    }
                };
                out.push((name, v));
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
            let count = (i + 1..records.len())
                .take_while(|&j| matches!(records.get(j), Record::Field { .. } | Record::Bytes(_)))
                .count();
            let mut fields = Vec::with_capacity(count);
            i = take_fields(records, i + 1, &mut fields);
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
        let clock = &self.clock;
        match header {
            Record::Open { span, parent, trace, meta, ticks, sampled } => {
                let own_request = request_of(&fields);
                let live = Live {
                    data: SpanData {
                        trace_id: trace,
                        span_id: span,
                        parent_span_id: parent,
                        parent_is_remote: false,
                        sampled,
                        meta,
                        start_unix_ns: clock.unix_nanos(ticks),
                        end_unix_ns: 0,
                        thread_id,
                        thread_name: thread_name.clone(),
                        fields,
                        events: Vec::new(),
                        links: Vec::new(),
                        request_id: None,
                        unclosed: false,
                    },
                    own_request,
                    remote_request: None,
                };
                self.live.insert(span, live);
                if let Some(ops) = self.pending.remove(&span) {
                    for (_, op) in ops {
                        self.apply_pending(span, op);
                    }
                }
            }
            Record::Update { span } => self.apply_pending(span, Pending::Fields(fields)),
            Record::Close { span, ticks } => self.apply_pending(span, Pending::Close(ticks)),
            Record::Event { span, meta, ticks } => {
                let event = EventData { meta, unix_ns: clock.unix_nanos(ticks), thread_id, fields };
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
            Record::Field { .. } | Record::Bytes(_) => {}
        }
    }

    /// Applies `op` to span `id`, or keeps it until the span's open record arrives.
    fn apply_pending(&mut self, id: SpanId, op: Pending) {
        let Some(live) = self.live.get_mut(&id) else {
            self.pending.entry(id).or_default().push((self.pass, op));
            return;
        };
        match op {
            Pending::Fields(fields) => {
                if let Some(r) = request_of(&fields) {
                    live.own_request = Some(r);
                }
                live.data.fields.extend(fields);
            }
            Pending::Close(ticks) => {
                live.data.end_unix_ns = self.clock.unix_nanos(ticks).max(live.data.start_unix_ns);
                self.closed.push_back((self.pass, id));
            }
            Pending::Event(e) => live.data.events.push(e),
            Pending::Remote { trace, parent, sampled, request } => {
                live.data.trace_id = trace;
                live.data.parent_span_id = Some(parent);
                live.data.parent_is_remote = true;
                live.data.sampled = sampled;
                live.remote_request = request;
            }
            Pending::Link(link) => live.data.links.push(link),
        }
    }
}
