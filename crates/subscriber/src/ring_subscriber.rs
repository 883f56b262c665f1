//! [`RingSubscriber`]: a `tracing` subscriber of ringtrace's own, for services that need no
//! other layer. Why to choose it, and how it works, is on the type.

use std::any::TypeId;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::num::NonZeroU64;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use ringtrace_core::propagation::TraceContext;
use ringtrace_core::record::Meta;
use ringtrace_core::TraceId;
use tracing_core::span::{Attributes, Current, Id, Record as Values};
use tracing_core::subscriber::Interest;
use tracing_core::{Event, LevelFilter, Metadata, Subscriber};
use tracing_subscriber::filter::Targets;

use crate::drain::IdHasher;
use crate::local::table::{cut_key, OpenSpan, Release, SpanTable};
use crate::local::with_local;
use crate::shared::Shared;
use crate::stats::Dropped;

/// The id given to spans that are not recorded because recording was paused (or the thread was
/// exiting): never in the open-span table, so every later callback for it does nothing, and it
/// is not entered on the span stack, so spans and events inside it attach to the nearest
/// recorded span.
const UNRECORDED: u64 = u64::MAX;

/// The id given to spans that were dropped with no recorded span above them, or for want of room
/// in the open-span table or of a key: never in the table either, but entered on the span stack,
/// passed over when looking for a parent (what happens inside a dropped span hangs under the
/// nearest recorded ancestor), so that an event with no recorded span above it is counted as
/// dropped instead of vanishing. A span dropped for want of ring room under a recorded span gets
/// a key of its own instead, whose table entry stands for that ancestor ([`OpenSpan::dropped`]).
const DROPPED: u64 = u64::MAX - 1;

/// How many closed spans' request ids are kept for the spans made under them that outlive them
/// (see [`Requests`]).
const CLOSED_CARRIERS: usize = 4096;

/// The longest request id kept once its span closed: with [`CLOSED_CARRIERS`], what bounds the
/// memory they take.
const CLOSED_REQUEST_ID_BYTES: usize = 256;

/// A registry-free `tracing::Subscriber` recording into ringtrace's rings: the cheapest way to
/// record when ringtrace is the only consumer of a process's spans.
///
/// Create it with [`Builder::build_subscriber`](crate::Builder::build_subscriber) or install it
/// with [`Builder::init_subscriber`](crate::Builder::init_subscriber);
/// [`init`](crate::init) installs it too, unless the level directives name spans or fields.
///
/// # When to choose it
///
/// Identity, propagation ([`SpanExt`](crate::SpanExt)), sampling, target prefixes, rings, drain
/// and sinks are those of [`RingLayer`](crate::RingLayer). What it leaves out is
/// `tracing-subscriber`'s registry, which costs about 65 ns per span on its own (a slab slot,
/// reference counts, a per-thread span stack behind a `RefCell`): a span recorded here costs
/// 65–75 ns, against 112–120 ns for the registry and the layer. The price:
///
/// - no other layer sees the spans: no `fmt` logs, no second exporter through `tracing`;
/// - levels are filtered by a maximum level ([`Builder::max_level`](crate::Builder::max_level),
///   default `INFO`), or per target as `RUST_LOG`'s directives say when [`init`](crate::init)
///   installs it, and targets by prefix ([`Builder::include_target`](crate::Builder::include_target),
///   [`Builder::exclude_target`](crate::Builder::exclude_target)), decided once per callsite;
///   `EnvFilter`'s span and field directives need the registry.
///
/// When either matters, use [`RingLayer`](crate::RingLayer) (its docs show how to combine it
/// with other layers and filters).
///
/// ```
/// use tracing::level_filters::LevelFilter;
///
/// let (subscriber, guard) = ringtrace_subscriber::Builder::new()
///     .node("node-1")
///     .daemon("worker")
///     .max_level(LevelFilter::DEBUG)
///     .exclude_target("hyper")
///     .no_recording() // a real service keeps the default recording
///     .build_subscriber()?;
/// tracing::subscriber::with_default(subscriber, || {
///     let _span = tracing::debug_span!("handle", bytes = 512).entered();
///     tracing::trace!("not recorded: above the maximum level");
/// });
/// guard.shutdown()?;
/// # Ok::<(), ringtrace_subscriber::Error>(())
/// ```
///
/// # How it does without the registry
///
/// A span's `tracing` id is its key in ringtrace's open-span table (recycled per thread after
/// close, like the registry's slots, so the same table slots stay in cache); the table holds what
/// the registry would (ringtrace span id, trace, parent, callsite, extra handles), the
/// entered-span stack lives beside the thread's ring, and filtering is decided once per callsite
/// (`register_callsite`), so a disabled callsite costs nothing. While paused, every callsite is
/// disabled. The registry keeps a closed span open while spans made under it live; this
/// subscriber does not (it would cost every span a handle of its parent), and keeps instead what
/// those spans need of it: the request id, for the last 4,096 spans that carried one to close. A
/// request id given to a span after spans were made under it reaches them while it is open.
pub struct RingSubscriber {
    shared: Arc<Shared>,
    levels: Levels,
    requests: Mutex<Requests>,
}

/// The request ids of spans that carry one (request roots and remote children: a few a
/// request), by table key: of open spans, and of the last [`CLOSED_CARRIERS`] to close (ids of
/// at most [`CLOSED_REQUEST_ID_BYTES`]). A span made under one of them names it
/// ([`OpenSpan::carrier`]) and still finds its request id after it closed, as long as it is among
/// those kept: the registry keeps a parent open while a child lives, which would cost every span
/// here a handle of its parent. Hashed with one mixing step rather than SipHash, which cost the
/// demo 3,800 instructions a request.
#[derive(Default)]
struct Requests {
    open: HashMap<u64, Arc<str>, BuildHasherDefault<IdHasher>>,
    /// The closed carriers kept, by [cut](cut_key) key, as spans name them, and trace: a key is
    /// taken again by later spans.
    closed: HashMap<Closed, Arc<str>, BuildHasherDefault<IdHasher>>,
    /// The keys of `closed`, oldest first. One is there twice only for two spans of one trace
    /// whose keys cut alike (see [`cut_key`]); the older's turn then takes the newer's id too.
    closed_order: VecDeque<Closed>,
}

/// A closed carrier: its [cut](cut_key) key and its trace.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Closed(u64, TraceId);

impl std::hash::Hash for Closed {
    /// One word for [`IdHasher`], which mixes each word it is given afresh: the key and the whole
    /// trace id, so that a trace's carriers do not share one hash.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let t = self.1.get();
        state.write_u64(self.0 ^ (t as u64) ^ ((t >> 64) as u64).rotate_left(32));
    }
}

impl Requests {
    /// The span `key` of trace `trace` closed: its request id, if it had one, is kept among the
    /// closed ones, the oldest of which gives way.
    fn close(&mut self, key: u64, trace: TraceId) {
        let Some(request) = self.open.remove(&key) else { return };
        if request.len() > CLOSED_REQUEST_ID_BYTES {
            return;
        }
        if self.closed_order.len() >= CLOSED_CARRIERS {
            if let Some(oldest) = self.closed_order.pop_front() {
                self.closed.remove(&oldest);
            }
        }
        let kept = Closed(cut_key(key), trace);
        self.closed.insert(kept, request);
        self.closed_order.push_back(kept);
    }

    /// The request id of the span `key` of trace `trace`, open or closed and kept: a span found
    /// on the walk up may close before the lock is taken.
    fn of(&self, key: u64, trace: TraceId) -> Option<Arc<str>> {
        self.open.get(&key).cloned().or_else(|| self.kept(cut_key(key), trace))
    }

    /// The request id of the span named `carrier` ([`OpenSpan::carrier`]) in trace `trace`:
    /// open (and still in that trace), or closed and kept.
    fn carried_by(&self, table: &SpanTable, carrier: NonZeroU64, trace: TraceId) -> Option<Arc<str>> {
        let open = table.get_carrier(carrier).filter(|(_, o)| o.trace == trace);
        match open.and_then(|(key, _)| self.open.get(&key)) {
            Some(request) => Some(request.clone()),
            None => self.kept(carrier.get(), trace),
        }
    }

    /// The request id kept of the closed span whose [cut](cut_key) key is `cut`, in `trace`.
    fn kept(&self, cut: u64, trace: TraceId) -> Option<Arc<str>> {
        self.closed.get(&Closed(cut, trace)).cloned()
    }
}

impl std::fmt::Debug for RingSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingSubscriber").field("levels", &self.levels).finish_non_exhaustive()
    }
}

/// The levels [`RingSubscriber`] records, decided once per callsite: one maximum level
/// ([`Builder::max_level`](crate::Builder::max_level)), or a level per target prefix, as
/// [`Builder::init`](crate::Builder::init) reads them from `RUST_LOG` (the directives
/// `tracing-subscriber`'s [`Targets`] takes, applied by the same code).
#[derive(Debug, Clone)]
pub(crate) enum Levels {
    /// Every target up to this level.
    Max(LevelFilter),
    /// Per target prefix.
    Targets(Targets),
}

impl Levels {
    fn enable(&self, meta: &Metadata<'_>) -> bool {
        match self {
            Levels::Max(max) => meta.level() <= max,
            Levels::Targets(targets) => targets.would_enable(meta.target(), meta.level()),
        }
    }

    /// The most verbose level any target records: for [`Targets`], the hint it gives as a
    /// layer, which its directives keep computed (the same as the registry stack's).
    fn max(&self) -> LevelFilter {
        match self {
            Levels::Max(max) => *max,
            Levels::Targets(targets) => {
                tracing_subscriber::Layer::<tracing_core::subscriber::NoSubscriber>::max_level_hint(targets)
                    .unwrap_or(LevelFilter::TRACE)
            }
        }
    }
}

impl RingSubscriber {
    pub(crate) fn new(shared: Arc<Shared>, levels: Levels) -> Self {
        Self { shared, levels, requests: Mutex::new(Requests::default()) }
    }

    fn allows(&self, meta: &Metadata<'_>) -> bool {
        self.levels.enable(meta) && self.shared.config.targets.allows_target(meta.target())
    }

    fn set_request(&self, key: u64, request: Arc<str>) {
        self.requests.lock().unwrap_or_else(|e| e.into_inner()).open.insert(key, request);
        self.shared.table.set_has_request(key);
    }

    /// The context of the span `id`: its request id is that of the nearest span above it that
    /// carries one, up its open parents; when those have none (one of them closed), that of the
    /// span it names as its carrier, open or among the closed ones kept. A context taken while
    /// that span is closing may have none.
    pub(crate) fn context(&self, id: &Id) -> Option<TraceContext> {
        let table = &self.shared.table;
        let open = fresh(&self.shared, table.get(id.into_u64())?);
        // Only the nearest: one that closed since the walk and whose id was not kept must not give
        // way to the next one up, another request's.
        let nearest = table.request_carriers(id.into_u64(), open).next();
        // The lock is taken only for a span with a carrier above it.
        let request = if nearest.is_some() || open.carrier.is_some() {
            let requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
            nearest
                .and_then(|k| requests.of(k, open.trace))
                .or_else(|| requests.carried_by(table, open.carrier?, open.trace))
        } else {
            None
        };
        Some(open.context(request.as_deref()))
    }

    /// The context of the innermost span entered on this thread, passing over those dropped
    /// without a stand-in (what happens inside a dropped span belongs to the nearest recorded one
    /// above it, which a stand-in gives itself).
    pub(crate) fn current_context(&self) -> Option<TraceContext> {
        let top = crate::local::innermost_entered(&self.shared, Some(DROPPED))?;
        self.context(&Id::from_u64(top))
    }

    /// Releases a handle of the span `key`; on the last one, closes it: pushes its close record
    /// and takes its key back. A stand-in's close also releases the handle it held of its
    /// ancestor. Whether the span closed. `TRY_CLOSE` tells `try_close`'s copy, always inlined
    /// there with its thread-local access, from the stand-ins' (made a copy of its own so that
    /// it does not stop that access being inlined: 90 instructions a span).
    #[inline(always)]
    fn close<const TRY_CLOSE: bool>(&self, key: u64) -> bool {
        let shared = &*self.shared;
        let (release, open) = shared.table.release(key);
        if release != Release::Last {
            return false;
        }
        let Some(open) = open else { return true };
        if open.has_request {
            self.requests.lock().unwrap_or_else(|e| e.into_inner()).close(key, open.trace);
        }
        let pushed = with_local(shared, |local| {
            if open.recorded {
                if std::thread::panicking() && open.sampled {
                    local.push_panic(shared, open.span);
                }
                local.push_close(shared, open.span);
            }
            local.recycle_key(key);
        });
        if pushed.is_none() {
            shared.late_closes.fetch_add(1, Ordering::Relaxed);
        }
        if open.dropped {
            self.release_ancestor(open);
        }
        true
    }

    /// Releases the handle the closed stand-in `open` held of its ancestor.
    #[cold]
    #[inline(never)]
    fn release_ancestor(&self, open: OpenSpan) {
        if let Some(ancestor) = open.parent_key {
            self.close::<false>(ancestor);
        }
    }

    pub(crate) fn remote_parent(&self, id: &Id, cx: &TraceContext) {
        let shared = &*self.shared;
        let key = id.into_u64();
        // A dropped span's stand-in keeps its ancestor's trace, as the layer ignores a remote
        // parent set on a dropped span.
        let Some(open) = shared.table.get(key).filter(|o| !o.dropped) else { return };
        shared.table.set_trace(key, cx.trace_id, cx.sampled);
        if let Some(req) = &cx.request_id {
            self.set_request(key, Arc::from(req.as_str()));
        }
        if open.recorded {
            with_local(shared, |local| local.push_remote_parent(open.span, cx));
        }
    }

    pub(crate) fn request_id(&self, id: &Id, req: &str) {
        let key = id.into_u64();
        let Some(open) = self.shared.table.get(key) else { return };
        self.set_request(key, Arc::from(req));
        if open.recorded {
            with_local(&self.shared, |local| local.push_request_id(open.span, req));
        }
    }
}

/// Enters in the table, under `key`, a stand-in for a span that was just dropped for want of ring
/// room under `parent` (its key and entry): an entry that names the nearest recorded ancestor
/// (the parent, or the ancestor a stand-in parent names) as its `parent_key`, with that span's
/// span id, trace and sampling decision, so that the dropped span's handle gives that context,
/// and spans and events made under it (entered on another thread, or with it as their explicit
/// parent) hang under the ancestor, as the layer's do. The stand-in holds a handle of the
/// ancestor until it closes, as the registry's spans hold their parent's, so that the ancestor
/// is still open for what happens inside the dropped span. Fails when the parent was never
/// recorded, or the table has no room (then the span gets [`DROPPED`]).
#[cold]
fn stand_in(shared: &Shared, key: u64, (parent_key, parent): (u64, OpenSpan), meta: Meta) -> bool {
    let ancestor = match parent {
        OpenSpan { dropped: true, parent_key: Some(ancestor), .. } => ancestor,
        OpenSpan { recorded: true, dropped: false, .. } => parent_key,
        _ => return false,
    };
    let open = OpenSpan {
        recorded: false,
        dropped: true,
        parent_key: Some(ancestor),
        carrier: parent.carrier_below(parent_key),
        meta: Some(meta),
        has_request: false,
        ..parent
    };
    if shared.table.insert(key, open).is_err() {
        return false;
    }
    // The caller holds a handle of the parent, which (or whose stand-in) keeps the ancestor
    // open: the ancestor cannot close meanwhile.
    if shared.table.add_ref(ancestor) {
        return true;
    }
    shared.table.remove(key);
    false
}

/// `open` as a context should give it: a stand-in gives its ancestor's span, trace and sampling
/// decision as they are now (a remote parent may have been set on the ancestor since), as the
/// layer, which looks the ancestor up, does. Spans and events made under a stand-in take what it
/// copied when it was made, as a recorded span's children take their parent's trace when they
/// are made.
#[inline]
fn fresh(shared: &Shared, open: OpenSpan) -> OpenSpan {
    if open.dropped {
        fresh_stand_in(shared, open)
    } else {
        open
    }
}

#[cold]
fn fresh_stand_in(shared: &Shared, open: OpenSpan) -> OpenSpan {
    match open.parent_key.and_then(|k| shared.table.get(k)) {
        Some(a) => OpenSpan { span: a.span, trace: a.trace, sampled: a.sampled, ..open },
        None => open,
    }
}

impl Subscriber for RingSubscriber {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        self.shared.register_callsite(meta);
        // Pausing and resuming rebuild the interest cache (`Shared::set_paused`).
        if self.allows(meta) && !self.shared.is_paused() {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        let enabled = self.allows(meta) && !self.shared.is_paused();
        if enabled && !self.shared.is_registered(meta) {
            let address = crate::shared::meta_address_of(meta);
            with_local(&self.shared, |local| local.unregistered.add(address));
        }
        enabled
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(if self.shared.is_paused() { LevelFilter::OFF } else { self.levels.max() })
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let shared = &*self.shared;
        if shared.is_paused() {
            return Id::from_u64(UNRECORDED);
        }
        let meta = attrs.metadata();
        let made = with_local(shared, |local| {
            // A span inside a dropped one hangs under the nearest recorded ancestor.
            let (parent_key, _) = local.parent_key_past(attrs.parent(), attrs.is_contextual(), DROPPED);
            let parent = parent_key.and_then(|k| shared.table.get(k).map(|o| (k, o)));
            let Some(key) = local.take_key(shared) else {
                local.drop_counted(Dropped::Spans, "span (no span key left)");
                return (DROPPED, None);
            };
            local.open_span(shared, Some(key), parent, meta, true, |v| attrs.record(v)).unwrap_or_else(|| {
                match parent {
                    Some(parent) if stand_in(shared, key, parent, meta) => (key, None),
                    _ => {
                        local.recycle_key(key);
                        (DROPPED, None)
                    }
                }
            })
        });
        match made {
            Some((key, request)) => {
                if let Some(req) = request {
                    self.set_request(key, Arc::from(req));
                }
                Id::from_u64(key)
            }
            None => {
                shared.late_spans.fetch_add(1, Ordering::Relaxed);
                Id::from_u64(UNRECORDED)
            }
        }
    }

    fn record(&self, span: &Id, values: &Values<'_>) {
        let shared = &*self.shared;
        let key = span.into_u64();
        let open = if key == DROPPED { None } else { shared.table.get(key) };
        if key == DROPPED || open.is_some_and(|o| o.dropped) {
            with_local(shared, |local| local.drop_counted(Dropped::Updates, "update"));
            return;
        }
        let Some(open) = open.filter(|o| o.recorded) else { return };
        let request =
            with_local(shared, |local| local.push_update(open.span, |v| values.record(v))).flatten();
        if let Some(req) = request {
            self.set_request(span.into_u64(), Arc::from(req));
        }
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        let shared = &*self.shared;
        // A dropped span is not linked to, as under the layer (its stand-in names its ancestor).
        let (Some(open), Some(other)) = (
            shared.table.get(span.into_u64()).filter(|o| o.recorded),
            shared.table.get(follows.into_u64()).filter(|o| !o.dropped),
        ) else {
            return;
        };
        with_local(shared, |local| local.push_follows(open.span, other));
    }

    fn event(&self, event: &Event<'_>) {
        let shared = &*self.shared;
        if shared.is_paused() {
            return;
        }
        let meta = event.metadata();
        let done = with_local(shared, |local| {
            let (parent_key, past_dropped) =
                local.parent_key_past(event.parent(), event.is_contextual(), DROPPED);
            let parent = parent_key.and_then(|k| shared.table.get(k));
            if parent.is_none() && past_dropped {
                local.drop_counted(Dropped::Events, "event (its span was dropped)");
                return;
            }
            // Events outside every recorded span belong to no trace; unsampled traces record
            // nothing. One inside a dropped span lands on the nearest recorded ancestor (the
            // span a stand-in's entry names).
            let Some(parent) = parent.filter(|p| (p.recorded || p.dropped) && p.sampled) else {
                return;
            };
            local.push_event(shared, parent.span, meta, |v| event.record(v));
        });
        if done.is_none() {
            shared.late_events.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn enter(&self, span: &Id) {
        // An unrecorded span is not stacked: spans created inside it attach to the nearest
        // recorded one, and a paused subscriber does no thread-local work at all. A dropped one
        // is (and passed over when looking for a parent), so that an event inside it with no
        // recorded ancestor is counted as dropped.
        if span.into_u64() != UNRECORDED {
            with_local(&self.shared, |local| local.stack.push(span.into_u64()));
        }
    }

    fn exit(&self, span: &Id) {
        let key = span.into_u64();
        if key == UNRECORDED {
            return;
        }
        with_local(&self.shared, |local| local.exited(key));
    }

    fn clone_span(&self, id: &Id) -> Id {
        self.shared.table.add_ref(id.into_u64());
        id.clone()
    }

    fn try_close(&self, id: Id) -> bool {
        self.close::<true>(id.into_u64())
    }

    /// The innermost span entered on this thread, passing over those dropped without a stand-in as
    /// [`current_context`](crate::current_context) does; a thread that never recorded gets no
    /// ring for asking.
    fn current_span(&self) -> Current {
        let top = crate::local::innermost_entered(&self.shared, Some(DROPPED));
        match top.and_then(|k| self.shared.table.get(k).map(|o| (k, o))) {
            Some((k, OpenSpan { meta: Some(meta), .. })) => Current::new(Id::from_u64(k), meta),
            _ => Current::none(),
        }
    }

    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        (id == TypeId::of::<Self>()).then_some(self as *const Self as *const ())
    }
}

#[cfg(all(test, not(ringtrace_loom)))]
mod tests {
    use super::*;
    use ringtrace_core::SpanId;

    fn nz(n: u64) -> NonZeroU64 {
        NonZeroU64::new(n).unwrap()
    }

    fn trace(n: u128) -> TraceId {
        TraceId::new(n).unwrap()
    }

    fn open(key: u64, t: u128) -> OpenSpan {
        OpenSpan {
            span: SpanId::new(key).unwrap(),
            trace: trace(t),
            sampled: true,
            recorded: true,
            parent_key: None,
            carrier: None,
            meta: None,
            has_request: true,
            dropped: false,
        }
    }

    #[test]
    fn the_carriers_of_one_trace_hash_apart() {
        use std::hash::BuildHasher;
        let hasher = BuildHasherDefault::<IdHasher>::default();
        let hashes: std::collections::HashSet<u64> = (1..=1000u64)
            .map(|k| hasher.hash_one(Closed(cut_key(k << 50 | 77), trace(5 << 64 | 9))))
            .collect();
        assert_eq!(hashes.len(), 1000);
    }

    #[test]
    fn closed_carriers_keep_their_request_ids_for_their_trace_oldest_going_first() {
        let table = SpanTable::new(64);
        let mut requests = Requests::default();
        table.insert(1, open(1, 10)).unwrap();
        requests.open.insert(1, Arc::from("req-1"));
        assert_eq!(requests.carried_by(&table, nz(1), trace(10)).as_deref(), Some("req-1"));
        assert_eq!(requests.carried_by(&table, nz(1), trace(11)), None, "another trace");
        table.remove(1);
        requests.close(1, trace(10));
        assert!(requests.open.is_empty());
        assert_eq!(requests.carried_by(&table, nz(1), trace(10)).as_deref(), Some("req-1"), "closed, kept");
        // Key 1 taken by an open span of another trace: the closed one's id is still found.
        table.insert(1, open(1, 20)).unwrap();
        requests.open.insert(1, Arc::from("req-20"));
        assert_eq!(requests.carried_by(&table, nz(1), trace(10)).as_deref(), Some("req-1"));
        assert_eq!(requests.carried_by(&table, nz(1), trace(20)).as_deref(), Some("req-20"));
        // It closes too: key 1 is kept for each trace, and each goes in its turn.
        table.remove(1);
        requests.close(1, trace(20));
        assert_eq!(requests.carried_by(&table, nz(1), trace(10)).as_deref(), Some("req-1"));
        assert_eq!(requests.carried_by(&table, nz(1), trace(20)).as_deref(), Some("req-20"));
        for k in 2..CLOSED_CARRIERS as u64 {
            requests.open.insert(k, Arc::from("other"));
            requests.close(k, trace(30));
        }
        assert_eq!(requests.closed_order.len(), CLOSED_CARRIERS);
        assert_eq!(requests.carried_by(&table, nz(1), trace(10)).as_deref(), Some("req-1"));
        requests.open.insert(9999, Arc::from("other"));
        requests.close(9999, trace(30));
        assert_eq!(requests.carried_by(&table, nz(1), trace(10)), None, "the oldest kept gave way");
        assert_eq!(requests.carried_by(&table, nz(1), trace(20)).as_deref(), Some("req-20"));
        assert_eq!(requests.carried_by(&table, nz(2), trace(30)).as_deref(), Some("other"));
        assert_eq!((requests.closed.len(), requests.closed_order.len()), (CLOSED_CARRIERS, CLOSED_CARRIERS));
        // A walk that found a span before it closed finds its id among the closed.
        assert_eq!(requests.of(2, trace(30)).as_deref(), Some("other"));
        assert_eq!(requests.of(2, trace(31)), None);
        // Long ids are not kept once their span closed, nor is anything of a span with none.
        requests.open.insert(7000, Arc::from("x".repeat(CLOSED_REQUEST_ID_BYTES + 1)));
        requests.close(7000, trace(30));
        assert_eq!(requests.of(7000, trace(30)), None);
        assert!(requests.open.is_empty());
        requests.close(5000, trace(30));
        assert_eq!(requests.closed_order.len(), CLOSED_CARRIERS);
    }
}
