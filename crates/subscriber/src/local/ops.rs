//! The records each `tracing` callback pushes: one implementation for both collectors,
//! [`RingLayer`](crate::RingLayer) and [`RingSubscriber`](crate::RingSubscriber).

use ringtrace_core::propagation::TraceContext;
use ringtrace_core::raw::push_str_field_raw;
use ringtrace_core::record::{InlineField, InlineText, Meta, Record};

use ringtrace_core::SpanId;

use super::table::OpenSpan;
use super::visitor::{FieldVisitor, Inline};
use super::LocalRing;
use crate::shared::Shared;
use crate::stats::Dropped;

impl LocalRing {
    /// Stages the records of the fields that `record` visits; returns a `request.id` value if
    /// any. `inline`: which first field the group's header carries itself (an open record's
    /// number or boolean, an event record's short string).
    fn stage_fields(&mut self, inline: Inline, record: impl FnOnce(&mut FieldVisitor<'_>)) -> Option<String> {
        let mut visitor = FieldVisitor::new(self, inline);
        record(&mut visitor);
        visitor.request_id
    }

    /// Opens a span under `parent` (its table key and entry): takes a span id, inherits the
    /// parent's trace and sampling decision (or starts a trace and asks the sampler), enters it
    /// in the open-span table under `key` (its new span id when `None`), and pushes its open
    /// record with the fields `record` visits. An unsampled child is only entered in the table,
    /// so that its children inherit the decision; a local root is always recorded, because a
    /// remote parent set later may sample its trace.
    ///
    /// With `standalone`, the entry also keeps what the layer finds in the registry: the
    /// callsite, and the carrier of the request id above it ([`OpenSpan::carrier`]).
    ///
    /// Returns the table key and the span's `request.id`, or `None` when the span was dropped
    /// (table or ring full; counted).
    ///
    /// Always inlined into its two callers (the layer's and the standalone subscriber's
    /// `new_span`): left to the compiler, it stopped inlining it once `init()` also built the
    /// standalone subscriber, and a span cost 32 instructions more.
    #[inline(always)]
    pub(crate) fn open_span(
        &mut self,
        shared: &Shared,
        key: Option<u64>,
        parent: Option<(u64, OpenSpan)>,
        meta: Meta,
        standalone: bool,
        record: impl FnOnce(&mut FieldVisitor<'_>),
    ) -> Option<(u64, Option<String>)> {
        if self.unregistered.any() {
            self.register(shared, meta);
        }
        let span = self.ids.span_id();
        let parent_key = parent.map(|(k, _)| k);
        let carrier = parent.filter(|_| standalone).and_then(|(k, p)| p.carrier_below(k));
        let parent = parent.map(|(_, p)| p);
        let (trace, sampled) = match parent {
            Some(p) => (p.trace, p.sampled),
            None => {
                let trace = self.ids.trace_id();
                (trace, shared.config.sampler.should_sample(trace, None))
            }
        };
        let recorded = sampled || parent.is_none();
        let key = key.unwrap_or(span.get());
        let open = OpenSpan {
            span,
            trace,
            sampled,
            recorded,
            parent_key,
            carrier,
            meta: standalone.then_some(meta),
            has_request: false,
            dropped: false,
        };
        if shared.table.insert(key, open).is_err() {
            self.drop_counted(Dropped::Spans, "span (open-span table full)");
            return None;
        }
        if !recorded {
            return Some((key, None));
        }
        let ticks = shared.clock.raw();
        self.begin(Record::Open {
            span,
            parent: parent.map(|p| p.span),
            trace,
            meta,
            ticks,
            sampled,
            first: InlineField::NONE,
        });
        let request = self.stage_fields(Inline::Number, record);
        if self.commit() {
            Some((key, request))
        } else {
            shared.table.remove(key);
            self.drop_counted(Dropped::Spans, "span");
            None
        }
    }

    /// Registers `meta`'s callsite, unless known, before the first record that names it, while
    /// `enabled` has seen callsites unregistered (see `unregistered`); forgets those now known. A
    /// span or event inside another's field values (a field computed by a function that logs)
    /// comes between that one's `enabled` and its record: the list, not a flag, keeps the outer
    /// one pending until it is registered.
    #[cold]
    fn register(&mut self, shared: &Shared, meta: Meta) {
        shared.register_callsite(meta);
        self.unregistered.forget_registered(|a| shared.is_registered_address(a));
    }

    /// Pushes field values recorded on an open span; returns a `request.id` value if any.
    pub(crate) fn push_update(
        &mut self,
        span: SpanId,
        record: impl FnOnce(&mut FieldVisitor<'_>),
    ) -> Option<String> {
        self.begin(Record::Update { span });
        let request = self.stage_fields(Inline::Nothing, record);
        if self.commit() {
            request
        } else {
            self.drop_counted(Dropped::Updates, "update");
            None
        }
    }

    /// Pushes an event of span `span` with the fields `record` visits.
    pub(crate) fn push_event(
        &mut self,
        shared: &Shared,
        span: SpanId,
        meta: Meta,
        record: impl FnOnce(&mut FieldVisitor<'_>),
    ) {
        if self.unregistered.any() {
            self.register(shared, meta);
        }
        let ticks = shared.clock.raw();
        self.begin(Record::Event { span, meta, ticks, first: InlineText::NONE });
        self.stage_fields(Inline::Text, record);
        if !self.commit() {
            self.drop_counted(Dropped::Events, "event");
        }
    }

    /// Pushes the close of span `span`, timestamped now. When the ring is full, the close is
    /// kept (up to [`LATE_CLOSES`](super::LATE_CLOSES) per thread) and pushed, with its original
    /// timestamp, by a later close once there is room: a lost close would leave its span with
    /// the drain until shutdown. A kept close counts as dropped until it is pushed. Always
    /// inlined, as [`open_span`](Self::open_span) is (14 instructions a span).
    #[inline(always)]
    pub(crate) fn push_close(&mut self, shared: &Shared, span: SpanId) {
        let ticks = shared.clock.raw();
        if !self.late_closes.is_empty() {
            self.retry_late_closes();
        }
        self.begin(Record::Close { span, ticks });
        if !self.commit() {
            self.close_later(span, ticks);
        }
    }

    #[cold]
    fn close_later(&mut self, span: SpanId, ticks: u64) {
        if self.late_closes.len() < super::LATE_CLOSES {
            // Once, on the thread's first overflow: afterwards it never allocates again.
            self.late_closes.reserve_exact(super::LATE_CLOSES);
            self.late_closes.push((span, ticks));
        }
        self.drop_counted(Dropped::Closes, "close");
    }

    /// Pushes kept closes, oldest first, while they fit.
    #[cold]
    pub(super) fn retry_late_closes(&mut self) {
        let mut done = 0;
        while let Some(&(span, ticks)) = self.late_closes.get(done) {
            self.begin(Record::Close { span, ticks });
            if !self.commit() {
                break;
            }
            // Pushed after all: no longer a drop (only this thread writes the counter).
            self.counters.count(Dropped::Closes, true);
            done += 1;
        }
        self.late_closes.drain(..done);
    }

    /// Pushes that span `span` has the remote parent `cx` (and its request id).
    pub(crate) fn push_remote_parent(&mut self, span: SpanId, cx: &TraceContext) {
        self.begin(Record::RemoteParent {
            span,
            trace: cx.trace_id,
            parent: cx.span_id,
            sampled: cx.sampled,
        });
        if let Some(req) = &cx.request_id {
            push_str_field_raw(crate::callsites::REQUEST_ID_FIELD, req, |r| self.stage_raw(r));
        }
        if !self.commit() {
            self.drop_counted(Dropped::Updates, "remote-parent");
        }
    }

    /// Pushes a request id set on span `span` by API.
    pub(crate) fn push_request_id(&mut self, span: SpanId, req: &str) {
        self.begin(Record::Update { span });
        push_str_field_raw(crate::callsites::REQUEST_ID_FIELD, req, |r| self.stage_raw(r));
        if !self.commit() {
            self.drop_counted(Dropped::Updates, "update");
        }
    }

    /// Pushes that span `span` follows from `other`.
    pub(crate) fn push_follows(&mut self, span: SpanId, other: OpenSpan) {
        self.begin(Record::Follows { span, follows: other.span, trace: other.trace });
        if !self.commit() {
            self.drop_counted(Dropped::Updates, "link");
        }
    }
}

#[cfg(all(test, not(ringtrace_loom)))]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use ringtrace_core::record::Record;
    use ringtrace_core::{Clock, Identity, SpanId};

    use crate::local::{with_local, RingHandle, LATE_CLOSES};
    use crate::shared::{Config, Shared};

    /// A collector with no drain thread: the test reads the ring itself.
    fn collector(ring_capacity: usize) -> Arc<Shared> {
        let config = Config {
            identity: Identity::resolve(Some("n"), Some("d")).unwrap(),
            ring_capacity,
            span_event_limit: 128,
            max_open_spans: 64,
            targets: Default::default(),
            drain_interval: std::time::Duration::from_millis(1),
            batch_size: 64,
            quiet: false,
            sampler: crate::Sampler::AlwaysOn,
        };
        Arc::new(Shared::new(config, Clock::new()))
    }

    /// The calling thread's count of dropped closes.
    fn dropped_closes(shared: &Shared) -> u64 {
        with_local(shared, |l| l.counters.dropped_closes.load(Ordering::Relaxed)).unwrap()
    }

    fn closes(handle: &mut RingHandle) -> Vec<(u64, u64)> {
        let mut records = Vec::new();
        let n = handle.ring.cons.read_with(|a, b| {
            assert_eq!(crate::drain::decode_local(a.iter().chain(b), &mut records), 0);
            a.len() + b.len()
        });
        handle.ring.cons.skip(n);
        records
            .into_iter()
            .map(|r| match r {
                Record::Close { span, ticks } => (span.get(), ticks),
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    #[test]
    fn closes_that_find_the_ring_full_are_pushed_later_with_their_own_time() {
        let shared = collector(4);
        let id = |n: u64| SpanId::new(n).unwrap();
        // Four closes fill the ring; the next three are kept, counted as dropped meanwhile.
        for n in 1..=7 {
            with_local(&shared, |l| l.push_close(&shared, id(n))).unwrap();
        }
        let between = shared.clock.raw();
        let mut handles = Vec::new();
        shared.take_new_rings(&mut handles);
        let handle = &mut handles[0];
        assert_eq!(dropped_closes(&shared), 3);
        let first = closes(handle);
        assert_eq!(first.iter().map(|c| c.0).collect::<Vec<_>>(), [1, 2, 3, 4]);
        // With room again, the next close pushes the kept ones first, oldest first, each with
        // the time it was taken (before the ring was read), then itself.
        with_local(&shared, |l| l.push_close(&shared, id(8))).unwrap();
        let second = closes(handle);
        assert_eq!(second.iter().map(|c| c.0).collect::<Vec<_>>(), [5, 6, 7, 8]);
        assert!(second[..3].iter().all(|c| c.1 <= between), "kept closes keep the time they were taken");
        assert!(second[3].1 >= between);
        assert_eq!(dropped_closes(&shared), 0, "every close arrived: none counts as dropped");
        assert!(closes(handle).is_empty());
    }

    #[test]
    fn kept_closes_are_bounded_and_the_excess_stays_dropped() {
        let shared = collector(1);
        for n in 1..=(LATE_CLOSES as u64 + 11) {
            with_local(&shared, |l| l.push_close(&shared, SpanId::new(n).unwrap())).unwrap();
        }
        let kept = with_local(&shared, |l| l.late_closes.len()).unwrap();
        assert_eq!(kept, LATE_CLOSES);
        assert_eq!(dropped_closes(&shared), LATE_CLOSES as u64 + 10, "all but the first, which fit");
    }
}
