//! [`RingLayer`]: the `tracing-subscriber` layer, and [`SpanExt`] for propagation.

use std::any::TypeId;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringtrace_core::propagation::TraceContext;
use tracing_core::span::{Attributes, Id, Record as Values};
use tracing_core::{Dispatch, Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::{LookupSpan, SpanRef};
use tracing_subscriber::Layer;

use crate::local::table::OpenSpan;
use crate::local::with_local;
use crate::ring_subscriber::RingSubscriber;
use crate::shared::Shared;
use crate::stats::Dropped;

/// The request id a span carries for propagation, kept in the span's registry extensions.
#[derive(Debug, Clone)]
struct RequestId(Arc<str>);

/// Marks, in its registry extensions, a span that was dropped (full ring or open-span table):
/// an event inside it with no recorded ancestor is counted as dropped.
#[derive(Debug, Clone, Copy)]
struct DroppedSpan;

/// What `on_new_span` did with a span.
enum NewSpan {
    /// Left out by the target filter.
    Filtered,
    /// Recorded, with the `request.id` it carries, if any.
    Recorded(Option<String>),
    /// Dropped and counted.
    Dropped,
}

/// A `tracing-subscriber` [`Layer`] that records spans and events into per-thread rings.
///
/// Create it with [`Builder::build`](crate::Builder::build) (which also returns the
/// [`Guard`](crate::Guard) that flushes on drop), then add it to a registry like any layer.
/// [`init`](crate::init) and [`Builder::init`](crate::Builder::init) install registry,
/// `EnvFilter` and this layer in one call when the level directives name spans or fields (which
/// only `EnvFilter`, following spans through the registry, applies), and [`RingSubscriber`]
/// otherwise.
///
/// # Choosing the layer or [`RingSubscriber`]
///
/// Both record the same spans with the same identity, propagation ([`SpanExt`]), sampling,
/// target prefixes, rings, drain and sinks. They differ in what they share a process with:
///
/// - **`RingLayer`** lives in `tracing-subscriber`'s registry, beside any other layers (`fmt`
///   logs, metrics, another exporter) and under any filter (`EnvFilter`, `Targets`, per-layer
///   filters). The registry costs its share: about 112–120 ns per recorded span in all, against
///   65–68 ns for the registry with a no-op layer.
/// - **[`RingSubscriber`]** is a subscriber of its own, without the registry: 65–75 ns per span,
///   but nothing else can see the spans, and filtering is by level per target plus target
///   prefixes.
///
/// Choose the layer when the process logs or exports through `tracing` in any other way, or
/// needs `EnvFilter` directives; choose [`RingSubscriber`] when ringtrace is the only consumer of
/// the process's spans.
///
/// # Combining with other layers and filters
///
/// A filter added to the registry with `.with(filter)` applies to every layer; one attached with
/// [`Layer::with_filter`] applies to that layer only, so ringtrace can record more (or less) than
/// the logs print:
///
/// ```
/// use tracing_subscriber::filter::{LevelFilter, Targets};
/// use tracing_subscriber::prelude::*;
///
/// let (ring, guard) = ringtrace_subscriber::Builder::new()
///     .node("node-1")
///     .daemon("worker")
///     .no_recording() // a real service keeps the default recording
///     .build()?;
/// let subscriber = tracing_subscriber::registry()
///     // Logs: warnings and errors only.
///     .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink).with_filter(LevelFilter::WARN))
///     // Recording: `debug` for this service's own code, `info` for its dependencies.
///     .with(ring.with_filter(
///         Targets::new().with_target("my_service", tracing::Level::DEBUG).with_default(tracing::Level::INFO),
///     ));
/// tracing::subscriber::with_default(subscriber, || {
///     let _span = tracing::info_span!("handle", bytes = 512).entered();
///     tracing::warn!("slow disk"); // printed and recorded
///     tracing::info!("stored"); // recorded only
/// });
/// guard.shutdown()?;
/// # Ok::<(), ringtrace_subscriber::Error>(())
/// ```
///
/// A global filter, with `EnvFilter` directives from `RUST_LOG`:
///
/// ```
/// use tracing_subscriber::prelude::*;
///
/// let (ring, guard) = ringtrace_subscriber::Builder::new().no_recording().build()?;
/// let filter = tracing_subscriber::EnvFilter::try_from_default_env()
///     .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
/// let subscriber = tracing_subscriber::registry()
///     .with(filter)
///     .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink))
///     .with(ring);
/// tracing::subscriber::with_default(subscriber, || tracing::info_span!("handle").in_scope(|| {}));
/// drop(guard); // flushes, bounded by the flush timeout
/// # Ok::<(), ringtrace_subscriber::Error>(())
/// ```
///
/// `Option<RingLayer>` is a layer too (`None` records nothing), for a recording that a
/// configuration switch turns on. Target prefixes ([`Builder::include_target`],
/// [`Builder::exclude_target`]) filter inside ringtrace and combine with any of the above.
///
/// # Pausing
///
/// [`Handle::pause`](crate::Handle::pause) stops recording. A layer that shares the registry
/// with other layers keeps the callsites enabled for them and costs one relaxed atomic load per
/// callback while paused. When the layer is the registry's only layer apart from level filters,
/// declare it with [`Builder::sole_layer`]: pausing then disables the callsites, so a paused
/// span costs what a disabled one does ([`init`](crate::init) does this when it installs the
/// layer).
///
/// [`Builder::include_target`]: crate::Builder::include_target
/// [`Builder::exclude_target`]: crate::Builder::exclude_target
/// [`Builder::sole_layer`]: crate::Builder::sole_layer
pub struct RingLayer {
    shared: Arc<Shared>,
    hooks: Hooks,
}

impl std::fmt::Debug for RingLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingLayer").field("shared", &self.shared).finish()
    }
}

/// The nearest recorded span at or above a span, and the nearest request id at or above it.
type Lookup = Option<(OpenSpan, Option<Arc<str>>)>;

/// Functions that need the concrete subscriber type, captured in [`Layer::on_layer`].
#[derive(Clone, Copy)]
struct Hooks {
    /// Nearest recorded span at or above `id` and the nearest request id at or above it.
    lookup: fn(&Dispatch, &Id, &Shared) -> Lookup,
    /// Stores a request id in the span's extensions (and flags it in the open-span table).
    set_request: fn(&Dispatch, &Id, Arc<str>, &Shared),
}

impl Hooks {
    fn none() -> Self {
        Self { lookup: |_, _, _| None, set_request: |_, _, _, _| {} }
    }

    fn for_subscriber<S: Subscriber + for<'a> LookupSpan<'a>>() -> Self {
        Self { lookup: lookup::<S>, set_request: set_request::<S> }
    }
}

fn lookup<S: Subscriber + for<'a> LookupSpan<'a>>(dispatch: &Dispatch, id: &Id, shared: &Shared) -> Lookup {
    let subscriber = dispatch.downcast_ref::<S>()?;
    // Fast path, for a recorded span: walk ringtrace's own table up the recorded ancestors to the
    // nearest one flagged as carrying a request id, and read only that span's extensions (the
    // registry's scope walk takes a lock per ancestor).
    if let Some(open) = shared.table.get(id.into_u64()) {
        let request = shared.table.request_carriers(id.into_u64(), open).find_map(|k| {
            subscriber
                .span(&Id::from_u64(k))
                .and_then(|s| s.extensions().get::<RequestId>().map(|r| r.0.clone()))
        });
        return Some((open, request));
    }
    let span = subscriber.span(id)?;
    let mut open = None;
    let mut request = None;
    for s in span.scope() {
        if open.is_none() {
            open = shared.table.get(s.id().into_u64());
        }
        if request.is_none() {
            request = s.extensions().get::<RequestId>().map(|r| r.0.clone());
        }
        if open.is_some() && request.is_some() {
            break;
        }
    }
    open.map(|o| (o, request))
}

fn set_request<S: Subscriber + for<'a> LookupSpan<'a>>(
    dispatch: &Dispatch,
    id: &Id,
    req: Arc<str>,
    shared: &Shared,
) {
    if let Some(span) = dispatch.downcast_ref::<S>().and_then(|s| s.span(id)) {
        store_request(&span, req, shared);
    }
}

/// Keeps `req` as the request id of `span` (in its extensions) and flags the span in the
/// open-span table, so that lookups walking up the table know to read its extensions.
fn store_request<'a, S: LookupSpan<'a>>(span: &SpanRef<'a, S>, req: Arc<str>, shared: &Shared) {
    span.extensions_mut().replace(RequestId(req));
    shared.table.set_has_request(span.id().into_u64());
}

impl RingLayer {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared, hooks: Hooks::none() }
    }

    /// The nearest recorded span among `scope` (the ancestors of a new span, or an event's
    /// scope), and whether a dropped span was passed over on the way. Used when the direct
    /// parent is not recorded: filtered out, created while paused, or dropped. `ctx` applies
    /// per-layer filters, so filtered spans are skipped.
    #[cold]
    fn recorded_ancestor<'a, S: Subscriber + for<'l> LookupSpan<'l>>(
        &self,
        scope: impl Iterator<Item = tracing_subscriber::registry::SpanRef<'a, S>>,
    ) -> (Option<(u64, OpenSpan)>, bool) {
        let mut past_dropped = false;
        for s in scope {
            let key = s.id().into_u64();
            if let Some(o) = self.shared.table.get(key) {
                return (Some((key, o)), past_dropped);
            }
            past_dropped |= s.extensions().get::<DroppedSpan>().is_some();
        }
        (None, past_dropped)
    }

    /// Counts values recorded on span `id` as a dropped update when the span was dropped (as
    /// the standalone subscriber does): they are lost with it.
    #[cold]
    fn count_if_dropped<S: Subscriber + for<'l> LookupSpan<'l>>(&self, id: &Id, ctx: &Context<'_, S>) {
        if ctx.span(id).is_some_and(|s| s.extensions().get::<DroppedSpan>().is_some()) {
            with_local(&self.shared, |local| local.drop_counted(Dropped::Updates, "update"));
        }
    }

    fn remote_parent(&self, dispatch: &Dispatch, id: &Id, cx: &TraceContext) {
        let shared = &*self.shared;
        let Some(open) = shared.table.get(id.into_u64()) else { return };
        shared.table.set_trace(id.into_u64(), cx.trace_id, cx.sampled);
        if open.recorded {
            with_local(shared, |local| local.push_remote_parent(open.span, cx));
        }
        if let Some(req) = &cx.request_id {
            (self.hooks.set_request)(dispatch, id, Arc::from(req.as_str()), shared);
        }
    }

    fn request_id(&self, dispatch: &Dispatch, id: &Id, req: &str) {
        let shared = &*self.shared;
        if let Some(open) = shared.table.get(id.into_u64()).filter(|o| o.recorded) {
            with_local(shared, |local| local.push_request_id(open.span, req));
        }
        (self.hooks.set_request)(dispatch, id, Arc::from(req), shared);
    }

    fn context(&self, dispatch: &Dispatch, id: &Id) -> Option<TraceContext> {
        let (open, request) = (self.hooks.lookup)(dispatch, id, &self.shared)?;
        Some(open.context(request.as_deref()))
    }
}

impl<S> Layer<S> for RingLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_layer(&mut self, _subscriber: &mut S) {
        self.hooks = Hooks::for_subscriber::<S>();
    }

    // Only a sole layer (`Builder::sole_layer`, as `init()` installs it) ever disables a callsite,
    // and only while paused: this is a global filter, which would silence every other layer too.
    fn register_callsite(&self, meta: &'static tracing_core::Metadata<'static>) -> tracing_core::Interest {
        self.shared.register_callsite(meta);
        // Pausing and resuming rebuild the interest cache (`Shared::set_paused`).
        if self.shared.callsites_off() {
            tracing_core::Interest::never()
        } else {
            tracing_core::Interest::always()
        }
    }

    fn enabled(&self, meta: &tracing_core::Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        // Asked per span only for callsites of interest "sometimes": a filter that decides per
        // span, or a callsite another thread is still registering (see `Shared::is_registered`).
        if !self.shared.is_registered(meta) && !self.shared.is_paused() {
            let address = crate::shared::meta_address_of(meta);
            with_local(&self.shared, |local| local.unregistered.add(address));
        }
        !self.shared.callsites_off()
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let shared = &*self.shared;
        if shared.is_paused() {
            return;
        }
        let meta = attrs.metadata();
        let made = with_local(shared, |local| {
            if !shared.config.targets.is_empty() && !local.filter_cache.allows(&shared.config.targets, meta) {
                return NewSpan::Filtered;
            }
            // A contextual parent is the innermost span entered on this thread: our own stack,
            // which costs less than asking the registry (a slab lookup with reference counts).
            let parent_key = local.parent_key(attrs.parent(), attrs.is_contextual());
            let parent = match parent_key {
                Some(k) => shared
                    .table
                    .get(k)
                    .map(|o| (k, o))
                    .or_else(|| ctx.span(id).and_then(|s| self.recorded_ancestor(s.scope().skip(1)).0)),
                None => None,
            };
            match local.open_span(shared, Some(id.into_u64()), parent, meta, false, |v| attrs.record(v)) {
                Some((_, request)) => NewSpan::Recorded(request),
                None => NewSpan::Dropped,
            }
        });
        match made {
            Some(NewSpan::Recorded(Some(req))) => {
                if let Some(span) = ctx.span(id) {
                    store_request(&span, Arc::from(req), shared);
                }
            }
            Some(NewSpan::Recorded(None) | NewSpan::Filtered) => {}
            // Marked, so that an event inside it with no recorded ancestor is counted.
            Some(NewSpan::Dropped) => {
                if let Some(span) = ctx.span(id) {
                    span.extensions_mut().replace(DroppedSpan);
                }
            }
            None => {
                shared.late_spans.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn on_enter(&self, id: &Id, _ctx: Context<'_, S>) {
        with_local(&self.shared, |local| local.stack.push(id.into_u64()));
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        with_local(&self.shared, |local| local.exited(id.into_u64()));
    }

    fn on_record(&self, id: &Id, values: &Values<'_>, ctx: Context<'_, S>) {
        let shared = &*self.shared;
        let Some(open) = shared.table.get(id.into_u64()) else {
            self.count_if_dropped(id, &ctx);
            return;
        };
        if !open.recorded {
            return;
        }
        let request =
            with_local(shared, |local| local.push_update(open.span, |v| values.record(v))).flatten();
        if let Some(req) = request {
            if let Some(span) = ctx.span(id) {
                store_request(&span, Arc::from(req), shared);
            }
        }
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, _ctx: Context<'_, S>) {
        let shared = &*self.shared;
        let (Some(span), Some(other)) =
            (shared.table.get(id.into_u64()).filter(|o| o.recorded), shared.table.get(follows.into_u64()))
        else {
            return;
        };
        with_local(shared, |local| local.push_follows(span.span, other));
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let shared = &*self.shared;
        if shared.is_paused() {
            return;
        }
        let meta = event.metadata();
        let done = with_local(shared, |local| {
            let parent_key = local.parent_key(event.parent(), event.is_contextual());
            // Events outside every recorded span belong to no trace; unsampled traces record nothing.
            // An event inside a dropped span lands on the nearest recorded ancestor; with none,
            // it is counted as dropped.
            let parent = parent_key.and_then(|k| match shared.table.get(k) {
                Some(o) => Some(o),
                None => match ctx.event_scope(event).map(|s| self.recorded_ancestor(s)) {
                    Some((Some((_, o)), _)) => Some(o),
                    Some((None, true)) => {
                        local.drop_counted(Dropped::Events, "event (its span was dropped)");
                        None
                    }
                    _ => None,
                },
            });
            let Some(parent) = parent.filter(|p| p.recorded && p.sampled) else {
                return;
            };
            if shared.config.targets.is_empty() || local.filter_cache.allows(&shared.config.targets, meta) {
                local.push_event(shared, parent.span, meta, |v| event.record(v));
            }
        });
        if done.is_none() {
            shared.late_events.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        let shared = &*self.shared;
        let Some(open) = shared.table.remove(id.into_u64()).filter(|o| o.recorded) else { return };
        let pushed = with_local(shared, |local| {
            if std::thread::panicking() && open.sampled {
                local.push_panic(shared, open.span);
            }
            local.push_close(shared, open.span)
        });
        if pushed.is_none() {
            shared.late_closes.fetch_add(1, Ordering::Relaxed);
        }
    }

    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        (id == TypeId::of::<Self>()).then_some(self as *const Self as *const ())
    }
}

/// Propagation helpers on [`tracing::Span`].
pub trait SpanExt {
    /// Makes `cx` (extracted from an incoming request) the span's parent: the span joins the
    /// caller's trace and inherits its request id. Call it before entering the span or creating
    /// children under it; children created earlier keep the span's previous trace id, and do not
    /// take the request id that comes with `cx`.
    fn set_remote_parent(&self, cx: &TraceContext);
    /// The context to send with an outgoing request made inside this span: its trace id, span
    /// id and request id. `None` when the span (and every ancestor) is not recorded.
    fn trace_context(&self) -> Option<TraceContext>;
    /// Sets the request id of this span and its descendants, as a `request.id` field would. Set
    /// it before creating children: under the standalone subscriber, children created earlier
    /// take it only while this span is open (the layer's registry keeps the span open while
    /// they live).
    fn set_request_id(&self, id: &str);
}

/// The ringtrace collector behind a span: the layer inside a registry, or the standalone subscriber.
enum Collector<'a> {
    Layer(&'a RingLayer),
    Standalone(&'a RingSubscriber),
}

fn with_collector<R>(span: &tracing::Span, f: impl FnOnce(Collector<'_>, &Dispatch, &Id) -> R) -> Option<R> {
    span.with_subscriber(|(id, dispatch)| {
        if let Some(layer) = dispatch.downcast_ref::<RingLayer>() {
            Some(f(Collector::Layer(layer), dispatch, id))
        } else {
            dispatch.downcast_ref::<RingSubscriber>().map(|s| f(Collector::Standalone(s), dispatch, id))
        }
    })
    .flatten()
}

impl SpanExt for tracing::Span {
    fn set_remote_parent(&self, cx: &TraceContext) {
        with_collector(self, |c, dispatch, id| match c {
            Collector::Layer(l) => l.remote_parent(dispatch, id, cx),
            Collector::Standalone(s) => s.remote_parent(id, cx),
        });
    }

    fn trace_context(&self) -> Option<TraceContext> {
        with_collector(self, |c, dispatch, id| match c {
            Collector::Layer(l) => l.context(dispatch, id),
            Collector::Standalone(s) => s.context(id),
        })
        .flatten()
    }

    fn set_request_id(&self, req: &str) {
        with_collector(self, |c, dispatch, id| match c {
            Collector::Layer(l) => l.request_id(dispatch, id, req),
            Collector::Standalone(s) => s.request_id(id, req),
        });
    }
}

/// The context of the current span, to inject into an outgoing request.
///
/// Under ringtrace's layer or subscriber, the current span is the innermost span ringtrace saw
/// entered on this thread, taken from its own stack: no `Span` handle is made (which would take
/// and release a reference in the registry).
pub fn current_context() -> Option<TraceContext> {
    tracing::dispatcher::get_default(|dispatch| {
        if let Some(layer) = dispatch.downcast_ref::<RingLayer>() {
            let top = crate::local::innermost_entered(&layer.shared, None)?;
            return layer.context(dispatch, &Id::from_u64(top));
        }
        if let Some(subscriber) = dispatch.downcast_ref::<RingSubscriber>() {
            return subscriber.current_context();
        }
        None
    })
}
