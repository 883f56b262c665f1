//! OpenTelemetry's own API and exporters (feature `opentelemetry`).
//!
//! - [`OpenTelemetrySpanExt`]: a ringtrace span takes an [`opentelemetry::Context`] as its parent
//!   and gives one back, with the method names `tracing-opentelemetry` users know
//!   (`set_parent`, `context`); the `request.id` travels as baggage.
//! - [`inject`] and [`extract`]: propagation through whatever [`TextMapPropagator`] the
//!   application installed globally (`opentelemetry::global::set_text_map_propagator`: W3C trace
//!   context and baggage, Jaeger, B3, a composite). ringtrace's own `propagation` module stays
//!   the path without this dependency.
//! - [`SpanExporterSink`]: hands assembled spans to any `opentelemetry_sdk` [`SpanExporter`]
//!   (`opentelemetry-otlp`, stdout, in-memory, Zipkin), on a thread of its own with a bounded
//!   queue: a slow or failing exporter never holds up the assembly, and every span it loses is
//!   counted in [`Stats`](crate::Stats).
//!
//! [`TextMapPropagator`]: opentelemetry::propagation::TextMapPropagator

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::baggage::BaggageExt;
use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::{
    SpanContext, SpanId as OtelSpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId as OtelTraceId,
    TraceState,
};
use opentelemetry::{Context, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{SpanData as OtelSpanData, SpanEvents, SpanExporter, SpanLinks};
use opentelemetry_sdk::Resource;
use ringtrace_core::otlp::{self, any_value};
use ringtrace_core::propagation::{TraceContext, REQUEST_ID_KEY};
use ringtrace_core::{SpanId, TraceId};

use crate::layer::SpanExt;
use crate::sink::{FlushWaiter, Sink, SinkError, SinkLosses};
use crate::span_data::{ResourceInfo, SpanData};

// ---------------------------------------------------------------------------------------------
// Context

/// A ringtrace context as an OpenTelemetry one: a remote span context (trace id, span id,
/// sampled flag) and, when there is a request id, `request.id` in the baggage.
pub fn to_context(cx: &TraceContext) -> Context {
    let flags = if cx.sampled { TraceFlags::SAMPLED } else { TraceFlags::default() };
    let span = SpanContext::new(
        OtelTraceId::from_bytes(cx.trace_id.to_bytes()),
        OtelSpanId::from_bytes(cx.span_id.to_bytes()),
        flags,
        true,
        TraceState::default(),
    );
    let context = Context::new().with_remote_span_context(span);
    match &cx.request_id {
        Some(r) => context.with_baggage([KeyValue::new(REQUEST_ID_KEY, r.clone())]),
        None => context,
    }
}

/// An OpenTelemetry context as a ringtrace one: its span's trace id, span id and sampled flag,
/// and `request.id` from its baggage. `None` when it holds no valid span context.
pub fn from_context(cx: &Context) -> Option<TraceContext> {
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return None;
    }
    Some(TraceContext {
        trace_id: TraceId::from_bytes(sc.trace_id().to_bytes())?,
        span_id: SpanId::from_bytes(sc.span_id().to_bytes())?,
        sampled: sc.is_sampled(),
        request_id: cx.baggage().get(REQUEST_ID_KEY).map(|v| v.as_str().to_owned()).filter(|r| !r.is_empty()),
    })
}

/// OpenTelemetry's context on ringtrace spans, as `tracing-opentelemetry`'s trait of the same
/// name has it: a service moving from `tracing-opentelemetry` changes the import.
pub trait OpenTelemetrySpanExt {
    /// Makes the span in `cx` (extracted from an incoming request, or the SDK's current span)
    /// this span's parent, with `request.id` from `cx`'s baggage; a context without a valid
    /// span changes nothing. As [`SpanExt::set_remote_parent`]: before entering the span or
    /// creating children under it.
    fn set_parent(&self, cx: &Context);
    /// This span's context, to hand to the OpenTelemetry API (a propagator, an SDK span's
    /// parent): an empty context when the span is not recorded.
    fn context(&self) -> Context;
}

impl OpenTelemetrySpanExt for tracing::Span {
    fn set_parent(&self, cx: &Context) {
        if let Some(parent) = from_context(cx) {
            self.set_remote_parent(&parent);
        }
    }

    fn context(&self) -> Context {
        self.trace_context().map_or_else(Context::new, |cx| to_context(&cx))
    }
}

/// Injects `span`'s context into `carrier` (request headers) with the propagator the
/// application installed globally; nothing when the span is not recorded.
pub fn inject(span: &tracing::Span, carrier: &mut dyn Injector) {
    if let Some(cx) = span.trace_context() {
        let context = to_context(&cx);
        opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&context, carrier));
    }
}

/// Extracts a context from `carrier` (request headers) with the propagator the application
/// installed globally; pass it to [`OpenTelemetrySpanExt::set_parent`].
pub fn extract(carrier: &dyn Extractor) -> Context {
    opentelemetry::global::get_text_map_propagator(|p| p.extract(carrier))
}

// ---------------------------------------------------------------------------------------------
// Exporting through an SDK exporter

/// Spans waiting for the exporter thread, at most, unless set: the SDK batch processor's default
/// queue (`OTEL_BSP_MAX_QUEUE_SIZE`).
pub const DEFAULT_MAX_QUEUE_SPANS: u64 = 2048;

/// Batches the exporter thread's channel holds (the span count is the real bound).
const QUEUE_BATCHES: usize = 1 << 16;

/// A [`Sink`] that hands spans to an `opentelemetry_sdk` [`SpanExporter`], on a thread of its
/// own that runs a single-threaded `tokio` runtime (what `opentelemetry-otlp`'s gRPC and HTTP
/// exporters need). Spans convert as ringtrace's own OTLP encoding has them (kind, status,
/// events, links, `request.id`, code attributes); the resource is the process's, with the
/// loss counters, set on the exporter whenever they change.
///
/// ```ignore
/// let sink = SpanExporterSink::new(|| {
///     opentelemetry_otlp::SpanExporter::builder().with_tonic().build().expect("exporter")
/// })?;
/// let _guard = ringtrace_subscriber::Builder::new().sink(sink).init()?;
/// ```
pub struct SpanExporterSink {
    name: String,
    /// The exporter thread's queue; emptied at stop (the flush waiter reaches it through here,
    /// so that it does not keep the thread alive).
    queue: Arc<Mutex<Option<SyncSender<Job>>>>,
    counts: Arc<Counts>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Spans dropped because the queue was full.
    queue_full: u64,
    max_queue_spans: u64,
    /// The counters of the resource the exporter was last handed: a batch carries the resource
    /// only when they changed.
    resource_sent: Option<crate::Stats>,
    stop_timeout: Duration,
    /// The instant `Counts::stop_by_ms` counts from.
    epoch: std::time::Instant,
}

#[derive(Default)]
struct Counts {
    /// Spans the exporter refused (its export returned an error).
    failed: AtomicU64,
    /// Spans queued for the exporter thread and not yet exported.
    queued: AtomicU64,
    /// Spans whose export was still running when the stop deadline passed (the exporter may
    /// have delivered them).
    unconfirmed: AtomicU64,
    /// Spans still queued when the stop deadline passed.
    unsent: AtomicU64,
    /// When stopping must end (milliseconds after `epoch`); 0 while running.
    stop_by_ms: AtomicU64,
    /// Wakes an export in progress when stopping begins.
    stop: tokio::sync::Notify,
}

/// How long stopping may take by default: exporting what is queued, then the exporter's own
/// shutdown, within the guard's wait (`DEFAULT_FLUSH_TIMEOUT`).
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(2);

enum Job {
    Export(Vec<OtelSpanData>, Option<Resource>),
    Flush(SyncSender<Result<(), String>>),
}

impl SpanExporterSink {
    /// Starts the exporter thread; `make` builds the exporter on it, inside its `tokio`
    /// runtime (a gRPC client must be made inside one).
    pub fn new<E, F>(make: F) -> std::io::Result<Self>
    where
        E: SpanExporter + 'static,
        F: FnOnce() -> E + Send + 'static,
    {
        let (tx, rx) = mpsc::sync_channel(QUEUE_BATCHES);
        let counts = Arc::new(Counts::default());
        let thread_counts = counts.clone();
        let (made_tx, made_rx) = mpsc::sync_channel(1);
        let epoch = std::time::Instant::now();
        let thread = std::thread::Builder::new().name("ringtrace-otel".into()).spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(r) => r,
                Err(e) => {
                    let _ = made_tx.send(Err(e));
                    return;
                }
            };
            let exporter = runtime.block_on(async { make() });
            let _ = made_tx.send(Ok(()));
            run(exporter, &runtime, rx, &thread_counts, epoch);
        })?;
        made_rx
            .recv()
            .map_err(|_| std::io::Error::other("the exporter thread stopped while making the exporter"))??;
        let name =
            format!("opentelemetry {}", std::any::type_name::<E>().rsplit("::").next().unwrap_or("exporter"));
        Ok(Self {
            name,
            queue: Arc::new(Mutex::new(Some(tx))),
            counts,
            thread: Some(thread),
            queue_full: 0,
            max_queue_spans: DEFAULT_MAX_QUEUE_SPANS,
            resource_sent: None,
            stop_timeout: DEFAULT_STOP_TIMEOUT,
            epoch,
        })
    }

    /// How long stopping (at shutdown) may take (default [`DEFAULT_STOP_TIMEOUT`]): queued spans
    /// are exported until then, and what is left is counted (`Stats::sink_unsent_spans`, and
    /// `sink_unconfirmed_spans` for an export still running), so that a collector that is down
    /// never holds up shutdown. Keep it below the guard's flush timeout.
    pub fn stop_timeout(mut self, timeout: Duration) -> Self {
        self.stop_timeout = timeout;
        self
    }

    /// How many spans may wait for the exporter (default [`DEFAULT_MAX_QUEUE_SPANS`]); more are
    /// dropped and counted (`Stats::sink_dropped_spans`), never waited for.
    pub fn max_queue_spans(mut self, spans: u64) -> Self {
        self.max_queue_spans = spans;
        self
    }
}

/// The time left before the stop deadline; `None` while not stopping.
fn left(counts: &Counts, epoch: std::time::Instant) -> Option<Duration> {
    let by = counts.stop_by_ms.load(Ordering::Acquire);
    (by != 0).then(|| Duration::from_millis(by).saturating_sub(epoch.elapsed()))
}

/// Returns once stopping has begun and its deadline has passed.
async fn past_deadline(counts: &Counts, epoch: std::time::Instant) {
    loop {
        if let Some(l) = left(counts, epoch) {
            tokio::time::sleep(l).await;
            return;
        }
        counts.stop.notified().await;
    }
}

fn run<E: SpanExporter>(
    mut exporter: E,
    runtime: &tokio::runtime::Runtime,
    rx: Receiver<Job>,
    counts: &Counts,
    epoch: std::time::Instant,
) {
    for job in rx {
        match job {
            Job::Export(spans, resource) => {
                let n = spans.len() as u64;
                counts.queued.fetch_sub(n, Ordering::Relaxed);
                if left(counts, epoch) == Some(Duration::ZERO) {
                    counts.unsent.fetch_add(n, Ordering::Relaxed);
                    continue;
                }
                if let Some(resource) = resource {
                    exporter.set_resource(&resource);
                }
                // An export never outlives the stop deadline, even one that began before it.
                let exported = runtime.block_on(async {
                    tokio::select! {
                        r = exporter.export(spans) => Some(r),
                        () = past_deadline(counts, epoch) => None,
                    }
                });
                match exported {
                    Some(Ok(())) => {}
                    Some(Err(_)) => {
                        counts.failed.fetch_add(n, Ordering::Relaxed);
                    }
                    None => {
                        counts.unconfirmed.fetch_add(n, Ordering::Relaxed);
                    }
                }
            }
            Job::Flush(reply) => {
                let _ = reply.send(exporter.force_flush().map_err(|e| e.to_string()));
            }
        }
    }
    let rest = left(counts, epoch).unwrap_or(DEFAULT_STOP_TIMEOUT).max(Duration::from_millis(1));
    let _ = exporter.shutdown_with_timeout(rest);
}

impl Sink for SpanExporterSink {
    fn name(&self) -> &str {
        &self.name
    }

    /// The application's exporter: `OTEL_EXPORTER_OTLP_*` configure it (as `opentelemetry-otlp`
    /// reads them), not a second, ringtrace's own.
    fn is_app_exporter(&self) -> bool {
        true
    }

    fn export(&mut self, batch: &[SpanData], resource: &ResourceInfo) -> Result<(), SinkError> {
        let Some(queue) = self.queue.lock().unwrap_or_else(PoisonError::into_inner).clone() else {
            return Err("the exporter has stopped".into());
        };
        let n = batch.len() as u64;
        if self.counts.queued.load(Ordering::Relaxed) + n > self.max_queue_spans {
            self.queue_full += n;
            return Ok(());
        }
        let spans: Vec<OtelSpanData> = batch.iter().map(span_data).collect();
        self.counts.queued.fetch_add(n, Ordering::Relaxed);
        let changed = self.resource_sent != Some(resource.stats);
        match queue.try_send(Job::Export(spans, changed.then(|| otel_resource(resource)))) {
            Ok(()) => {
                self.resource_sent = Some(resource.stats);
                Ok(())
            }
            Err(e) => {
                self.counts.queued.fetch_sub(n, Ordering::Relaxed);
                match e {
                    TrySendError::Full(_) => {
                        self.queue_full += n;
                        Ok(())
                    }
                    TrySendError::Disconnected(_) => Err("the exporter thread has stopped".into()),
                }
            }
        }
    }

    fn losses(&self) -> SinkLosses {
        SinkLosses {
            queue_full: self.queue_full,
            failed: self.counts.failed.load(Ordering::Relaxed),
            unconfirmed: self.counts.unconfirmed.load(Ordering::Relaxed),
            unsent: self.counts.unsent.load(Ordering::Relaxed),
            ..SinkLosses::default()
        }
    }

    fn flush_waiter(&self) -> Option<FlushWaiter> {
        let queue = self.queue.clone();
        Some(Arc::new(move |timeout: Duration| {
            let (tx, rx) = mpsc::sync_channel(1);
            let sender = queue.lock().unwrap_or_else(PoisonError::into_inner).clone();
            sender
                .ok_or("the exporter has stopped")?
                .send(Job::Flush(tx))
                .map_err(|_| "the exporter thread has stopped")?;
            match rx.recv_timeout(timeout) {
                Ok(r) => r.map_err(Into::into),
                Err(_) => Err(format!("the exporter did not finish within {timeout:?}").into()),
            }
        }))
    }

    fn stop(&mut self) {
        // Export what is queued until the deadline, count the rest, shut the exporter down, wait
        // for the thread.
        let by = (self.epoch.elapsed() + self.stop_timeout).as_millis().max(1);
        self.counts.stop_by_ms.store(u64::try_from(by).unwrap_or(u64::MAX), Ordering::Release);
        self.counts.stop.notify_one();
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SpanExporterSink {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The process's resource as the SDK's.
fn otel_resource(info: &ResourceInfo) -> Resource {
    let r = crate::encode::resource(info);
    Resource::builder_empty().with_attributes(r.attributes.iter().map(key_value)).build()
}

fn key_value(kv: &otlp::KeyValue) -> KeyValue {
    KeyValue::new(kv.key.clone(), value(kv.value.as_ref().and_then(|v| v.value.as_ref())))
}

fn value(v: Option<&any_value::Value>) -> Value {
    match v {
        Some(any_value::Value::StringValue(s)) => Value::String(StringValue::from(s.clone())),
        Some(any_value::Value::BoolValue(b)) => Value::Bool(*b),
        Some(any_value::Value::IntValue(i)) => Value::I64(*i),
        Some(any_value::Value::DoubleValue(d)) => Value::F64(*d),
        Some(any_value::Value::BytesValue(b)) => {
            Value::String(StringValue::from(String::from_utf8_lossy(b).into_owned()))
        }
        Some(_) | None => Value::String(StringValue::from("")),
    }
}

fn time(unix_ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(unix_ns)
}

fn span_context(trace: &[u8], span: &[u8], sampled: bool) -> SpanContext {
    let trace: [u8; 16] = trace.try_into().unwrap_or([0; 16]);
    let span: [u8; 8] = span.try_into().unwrap_or([0; 8]);
    let flags = if sampled { TraceFlags::SAMPLED } else { TraceFlags::default() };
    SpanContext::new(
        OtelTraceId::from_bytes(trace),
        OtelSpanId::from_bytes(span),
        flags,
        false,
        TraceState::default(),
    )
}

/// A span as the SDK's, from ringtrace's own OTLP encoding of it.
fn span_data(s: &SpanData) -> OtelSpanData {
    let o = crate::encode::span(s);
    let kind = match otlp::SpanKind::try_from(o.kind) {
        Ok(otlp::SpanKind::Server) => SpanKind::Server,
        Ok(otlp::SpanKind::Client) => SpanKind::Client,
        Ok(otlp::SpanKind::Producer) => SpanKind::Producer,
        Ok(otlp::SpanKind::Consumer) => SpanKind::Consumer,
        _ => SpanKind::Internal,
    };
    let status = match o.status.as_ref().map(|st| (otlp::StatusCode::try_from(st.code), st)) {
        Some((Ok(otlp::StatusCode::Error), st)) => {
            Status::Error { description: Cow::Owned(st.message.clone()) }
        }
        Some((Ok(otlp::StatusCode::Ok), _)) => Status::Ok,
        _ => Status::Unset,
    };
    let mut events = SpanEvents::default();
    events.events = o
        .events
        .iter()
        .map(|e| {
            opentelemetry::trace::Event::new(
                e.name.clone(),
                time(e.time_unix_nano),
                e.attributes.iter().map(key_value).collect(),
                e.dropped_attributes_count,
            )
        })
        .collect();
    events.dropped_count = o.dropped_events_count;
    let mut links = SpanLinks::default();
    links.links = o
        .links
        .iter()
        .map(|l| {
            opentelemetry::trace::Link::new(
                span_context(&l.trace_id, &l.span_id, true),
                l.attributes.iter().map(key_value).collect(),
                l.dropped_attributes_count,
            )
        })
        .collect();
    let parent: [u8; 8] = o.parent_span_id.as_slice().try_into().unwrap_or([0; 8]);
    OtelSpanData {
        span_context: span_context(&o.trace_id, &o.span_id, s.sampled),
        parent_span_id: OtelSpanId::from_bytes(parent),
        parent_span_is_remote: s.parent_is_remote,
        span_kind: kind,
        name: Cow::Owned(o.name),
        start_time: time(o.start_time_unix_nano),
        end_time: time(o.end_time_unix_nano),
        attributes: o.attributes.iter().map(key_value).collect(),
        dropped_attributes_count: o.dropped_attributes_count,
        events,
        links,
        status,
        instrumentation_scope: InstrumentationScope::builder("ringtrace")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build(),
    }
}
