//! Per-span cost of ringtrace and its peers, side by side in one process.
//!
//! The unit of work is `info_span!("work", i)` (one integer field), enter, exit, drop — or the
//! nearest equivalent for fastrace, whose API is not `tracing`'s. Configurations:
//!
//! - `no_subscriber`: `tracing` with no subscriber — once before any subscriber exists (group
//!   `floor`), and among the others, where callsites are already registered as "sometimes";
//! - `registry_noop`: the registry plus a layer that does nothing (the baseline);
//! - `registry_fmt_sink`: the registry plus `tracing-subscriber`'s `fmt` layer writing to
//!   `io::sink` (span fields are formatted; `fmt` prints only events, and there are none);
//! - `registry_otel`: the registry plus `tracing-opentelemetry` over the OpenTelemetry SDK with
//!   its batch span processor and an exporter that counts spans and discards them;
//! - `fastrace_local` / `fastrace_local_prop`: a fastrace `LocalSpan` under a root span, with no
//!   property or with one string property (`i` formatted, fastrace properties being strings),
//!   reported to a reporter that counts and discards (and, in group `total_cpu` only, also to
//!   one that writes each span to a file, as ringtrace's recording does);
//! - `registry_ringlayer` / `registry_ringlayer_paused`: the registry plus ringtrace's
//!   `RingLayer` (no recording, `RING` records per thread), recording or paused;
//! - `ring_subscriber` / `ring_subscriber_paused`: ringtrace's standalone `RingSubscriber`
//!   (no registry), recording or paused;
//! - `registry_floor_layer` / `floor_subscriber`: the least any span recorder must do (two clock
//!   reads, the fields, an open and a close record in a buffer that stays in L1; no ids of its
//!   own, no table of open spans, no reader), as a layer over the registry and as a subscriber
//!   of its own (`ringtrace_test_support::subscribers`): lower bounds for `registry_ringlayer` and
//!   `ring_subscriber`; in group `total_cpu` only, both also write each open, close and event
//!   record (64 bytes) to a file from the application thread, 64 KiB at a time: the least a
//!   `tracing` recorder pays for the whole process to keep its spans on disk;
//! - `floor_quanta_raw` / `floor_instant_now`: one `quanta::Clock::raw()` or one
//!   `std::time::Instant::now()` per "span".
//!
//! Group `one_thread` runs each on one thread; `two_threads` runs two threads recording at once
//! and reports the per-thread cost; `depth` nests 1, 4 or 16 spans; `fields` gives each span 0, 1,
//! 4 or 8 integer fields, or four short strings; `event` measures a span with and without one `info!` (one integer
//! field) inside. These last three compare registry + no-op layer, registry + `RingLayer` and
//! `RingSubscriber`, with the two floors.
//!
//! Every configuration is timed the same way: bursts of spans, each burst timed alone, on worker
//! threads that live for the whole group. After each burst, untimed and while the other worker
//! waits, the configuration's collector is flushed (ringtrace's drain, the SDK's batch processor,
//! fastrace's collector), so every timed span is really recorded, and at the end the bench
//! asserts that each collector received exactly the spans produced — a dropped span is cheaper
//! than a recorded one, and a tight loop outruns any collector. Sustained throughput, where a
//! collector must keep up on its own, is `benches/throughput.rs` at the root.
//!
//! Each group is measured twice: criterion measures each configuration in turn (its usual report
//! and filters), then an interleaved pass measures all of the group's configurations in rotation,
//! `ROUNDS` times, `INTERLEAVED_BURSTS` bursts each. The Markdown tables printed at the end are
//! the interleaved medians, with ratios to registry + no-op layer and to registry +
//! tracing-opentelemetry: on a machine shared with other work, load that comes and goes then
//! weighs on every configuration alike instead of on whichever criterion happened to be running.
//!
//! The dispatch is scoped (`tracing::dispatcher::with_default` on each worker), as in the root's
//! `benches/span_cost.rs`; a global default is a little cheaper to look up. The measured run and
//! what it shows are in `benches/PEERS.md`.
//!
//! Last, group `total_cpu` measures what a busy server pays: two threads record spans at a
//! sustained total rate (`TOTAL_RATE`, paced in bursts with sleeps between them) and the cost
//! is the CPU time of the whole process (`CLOCK_PROCESS_CPUTIME_ID`: every thread — the
//! recording threads, the collectors' background threads, the writers) from the first span
//! until the collector has flushed, per span. ringtrace runs there with its local recording
//! (raw, the default, and the OTLP recording sink) in a temporary directory. Each measurement
//! runs in a new process of its own (this bench started again) with the configuration installed
//! as the global default subscriber, as a service installs it: with a scoped dispatcher every
//! span would clone one reference-counted subscriber, and two threads contending for that
//! count cost the no-op layer 80 ns a span and ringtrace's raw recordings 26–60, which no
//! service pays (`benches/README.md`). A round in which a configuration does not keep every
//! span (at that rate, on a loaded machine, the OpenTelemetry SDK's batch processor can drop
//! some) is shown as failed, with its reason on stderr, and left out of the median.
//!
//! `cargo bench -p ringtrace-bench-peers`; `-- one_thread` filters criterion's part as usual;
//! `PEERS_TOTAL_ONLY=1` runs only the `total_cpu` group;
//! `PEERS_ROUNDS=0` skips the interleaved pass and the tables; `PEERS_MAX_OPEN_SPANS=n` sets
//! ringtrace's open-span table size (default: the builder's); `PEERS_TOTAL_CASES=text` keeps
//! only the `total_cpu` configurations whose name contains `text` (to profile one alone; `a|b`:
//! either).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode};
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

/// The field sweep's row of spans with four short string fields instead of integers.
const STRINGS_KEY: &str = "4 strings";
/// Spans per timed burst in the single-span groups.
const BURST: u64 = 4096;
/// Spans per burst in the field sweep: 8 fields made 9 records a span (open record with the first,
/// one per other field, close; since the fourth session 4: the other seven go six to a record),
/// and a burst must fit the ring. A multiple of every depth in the depth sweep.
const SWEEP_BURST: u64 = 2048;
/// Ring capacity, in records, of each ringtrace thread; and the SDK's batch queue, in spans.
const RING: usize = 1 << 15;
/// Criterion samples per configuration.
const SAMPLES: usize = 20;
/// Rounds of the interleaved pass (`PEERS_ROUNDS` overrides; 0 skips it); the table's medians
/// are over these.
const ROUNDS: usize = 31;
/// Bursts per configuration per interleaved round.
const INTERLEAVED_BURSTS: u64 = 4;

// ---------------------------------------------------------------------------------------------
// The unit of work.

/// `depth` nested spans, each with one integer field.
fn nested(depth: u64, i: u64) {
    let span = tracing::info_span!("work", i);
    let _e = span.enter();
    if depth > 1 {
        nested(depth - 1, i);
    }
    black_box(&span);
}

fn fields_0(i: u64) {
    let span = tracing::info_span!("work");
    let _e = span.enter();
    black_box((&span, i));
}

fn fields_4(i: u64) {
    let span = tracing::info_span!("work", a = i, b = i + 1, c = i + 2, d = i + 3);
    let _e = span.enter();
    black_box(&span);
}

/// What one "span" of a `tracing` configuration is.
#[derive(Clone, Copy)]
enum Shape {
    /// `info_span!` with one integer field.
    One,
    /// That many nested spans; counts as that many spans.
    Depth(u64),
    /// One span with that many integer fields (0, 1, 4 or 8).
    Fields(u32),
    /// One span with one event inside.
    Event,
    /// One span with four short string fields (two `&str`, two `Display`).
    Strings,
}

impl Shape {
    /// Spans one unit of work makes.
    fn spans(self) -> u64 {
        match self {
            Shape::Depth(d) => d,
            _ => 1,
        }
    }

    /// Times `units` units of work, numbered from `first`.
    fn time(self, first: u64, units: u64) -> Duration {
        fn timed(first: u64, units: u64, mut f: impl FnMut(u64)) -> Duration {
            let start = Instant::now();
            for i in first..first + units {
                f(i);
            }
            start.elapsed()
        }
        match self {
            Shape::One | Shape::Fields(1) => timed(first, units, one_span),
            Shape::Depth(d) => timed(first, units, |i| nested(d, i)),
            Shape::Fields(0) => timed(first, units, fields_0),
            Shape::Fields(4) => timed(first, units, fields_4),
            Shape::Fields(8) => timed(first, units, fields_8),
            Shape::Event => timed(first, units, span_with_event),
            Shape::Strings => timed(first, units, strings_4),
            Shape::Fields(n) => unreachable!("no span shape with {n} fields"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Configurations.

/// One configuration under test.
trait Case: Sync {
    /// Runs `f` on the calling (worker) thread with this configuration installed.
    fn on_thread(&self, f: &mut dyn FnMut());
    /// Records `spans` spans numbered from `first` on the calling thread; returns the time the
    /// spans themselves took (any per-burst setup is left out).
    fn burst(&self, first: u64, spans: u64) -> Duration;
    /// Spans in one unit of work; bursts hold whole units.
    fn unit(&self) -> u64 {
        1
    }
    /// Untimed, after each burst, on one worker while the others wait: flush the collector.
    fn between(&self) {}
    /// Makes this configuration the process's global default subscriber, for good; `on_thread`
    /// then installs nothing.
    fn install_globally(&mut self) {}
    /// After the run: checks that the collector got every span produced; returns a note for
    /// the log.
    fn finish(self: Box<Self>, produced: u64) -> String;
}

/// A `tracing` configuration: a dispatcher, a span shape, and what flushes its collector.
struct Tracing {
    dispatch: Option<Dispatch>,
    shape: Shape,
    collector: Collector,
}

/// The collector behind a `tracing` configuration, for flushing and counting.
enum Collector {
    /// Nothing to flush or count (no subscriber, no-op layer, fmt).
    None,
    /// The OpenTelemetry SDK: flushed with `force_flush`, counted by the exporter.
    Otel { provider: opentelemetry_sdk::trace::SdkTracerProvider, exported: Arc<AtomicU64> },
    /// ringtrace.
    Ring { guard: ringtrace::Guard, handle: ringtrace::Handle, paused: bool },
}

impl Case for Tracing {
    fn on_thread(&self, f: &mut dyn FnMut()) {
        match &self.dispatch {
            Some(d) => tracing::dispatcher::with_default(d, f),
            None => f(),
        }
    }

    fn install_globally(&mut self) {
        if let Some(d) = self.dispatch.take() {
            tracing::dispatcher::set_global_default(d).expect("the first global default");
        }
    }

    fn unit(&self) -> u64 {
        self.shape.spans()
    }

    fn burst(&self, first: u64, spans: u64) -> Duration {
        let per = self.shape.spans();
        debug_assert_eq!(spans % per, 0);
        self.shape.time(first, spans / per)
    }

    fn between(&self) {
        match &self.collector {
            Collector::None => {}
            Collector::Otel { provider, .. } => provider.force_flush().expect("otel flush"),
            Collector::Ring { handle, .. } => {
                handle.flush(Duration::from_secs(30)).expect("ringtrace flush");
            }
        }
    }

    fn finish(self: Box<Self>, produced: u64) -> String {
        let Tracing { dispatch, collector, shape } = *self;
        drop(dispatch);
        match collector {
            Collector::None => String::new(),
            Collector::Otel { provider, exported } => {
                provider.shutdown().expect("otel shutdown");
                let exported = exported.load(Ordering::Relaxed);
                assert_eq!(exported, produced, "the SDK exported {exported} of {produced} spans");
                format!("otel exported {exported} spans")
            }
            Collector::Ring { guard, paused, .. } => {
                let stats = guard.shutdown().expect("ringtrace shutdown");
                assert_eq!(stats.dropped_spans, 0, "ringtrace dropped spans: {stats}");
                assert_eq!(stats.dropped_closes, 0, "ringtrace dropped closes: {stats}");
                let expected = if paused { 0 } else { produced };
                assert_eq!(stats.recorded_spans, expected, "{stats}");
                assert_eq!(stats.dropped_events, 0, "ringtrace dropped events: {stats}");
                if matches!(shape, Shape::Event) {
                    assert_eq!(stats.recorded_events, expected, "{stats}");
                }
                stats.to_string()
            }
        }
    }
}

use ringtrace_test_support::spans::{fields_8, one_span, span_with_event, strings_4};
use ringtrace_test_support::subscribers::{DiskFloorSubscriber, FloorLayer, FloorSubscriber, NoopLayer};

fn no_subscriber(shape: Shape) -> Box<dyn Case> {
    Box::new(Tracing { dispatch: None, shape, collector: Collector::None })
}

/// `dispatch` as a configuration with no collector to flush or check.
fn uncollected(dispatch: Dispatch, shape: Shape) -> Box<dyn Case> {
    Box::new(Tracing { dispatch: Some(dispatch), shape, collector: Collector::None })
}

fn registry_noop(shape: Shape) -> Box<dyn Case> {
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(NoopLayer));
    uncollected(dispatch, shape)
}

/// The least any recorder must do (`ringtrace_test_support::subscribers`), as a layer.
fn registry_floor_layer(shape: Shape) -> Box<dyn Case> {
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(FloorLayer::default()));
    uncollected(dispatch, shape)
}

/// The least any recorder must do, as a subscriber of its own.
fn floor_subscriber(shape: Shape) -> Box<dyn Case> {
    let dispatch = Dispatch::new(FloorSubscriber::default());
    uncollected(dispatch, shape)
}

fn registry_fmt_sink(shape: Shape) -> Box<dyn Case> {
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::sink);
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    uncollected(dispatch, shape)
}

/// An OpenTelemetry span exporter that counts spans and discards them.
#[derive(Debug, Clone, Default)]
struct DiscardExporter(Arc<AtomicU64>);

impl opentelemetry_sdk::trace::SpanExporter for DiscardExporter {
    async fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.fetch_add(batch.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

fn registry_otel(shape: Shape) -> Box<dyn Case> {
    registry_otel_queue(shape, RING)
}

/// `registry_otel` with a batch queue of `queue` spans.
fn registry_otel_queue(shape: Shape, queue: usize) -> Box<dyn Case> {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
    let exporter = DiscardExporter::default();
    let exported = exporter.0.clone();
    // The queue holds a whole burst from every thread, so nothing is dropped; the rest is the
    // SDK's default configuration.
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(BatchConfigBuilder::default().with_max_queue_size(queue).build())
        .build();
    let provider = SdkTracerProvider::builder().with_span_processor(processor).build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("bench"));
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    Box::new(Tracing { dispatch: Some(dispatch), shape, collector: Collector::Otel { provider, exported } })
}

fn registry_ringlayer(shape: Shape, paused: bool) -> Box<dyn Case> {
    ringtrace(shape, paused, false)
}

fn ring_subscriber(shape: Shape, paused: bool) -> Box<dyn Case> {
    ringtrace(shape, paused, true)
}

/// The collector `builder` makes: `RingSubscriber` when `standalone`, else registry +
/// `RingLayer`.
fn ring_dispatch(builder: ringtrace::Builder, standalone: bool) -> (Dispatch, ringtrace::Guard) {
    if standalone {
        let (subscriber, guard) = builder.build_subscriber().expect("ringtrace collector");
        (Dispatch::new(subscriber), guard)
    } else {
        let (layer, guard) = builder.build().expect("ringtrace collector");
        (Dispatch::new(tracing_subscriber::registry().with(layer)), guard)
    }
}

/// ringtrace without a recording: `RingSubscriber` when `standalone`, else registry + `RingLayer`.
fn ringtrace(shape: Shape, paused: bool, standalone: bool) -> Box<dyn Case> {
    let builder =
        ringtrace::Builder::new().node("bench").daemon("bench-peers").no_recording().ring_capacity(RING);
    // A diagnostic: the open-span table's size decides how much of it stays in cache.
    let builder = match std::env::var("PEERS_MAX_OPEN_SPANS") {
        Ok(v) => builder.max_open_spans(v.parse().expect("PEERS_MAX_OPEN_SPANS: a number")),
        Err(_) => builder,
    };
    let (dispatch, guard) = ring_dispatch(builder, standalone);
    let handle = guard.handle();
    if paused {
        handle.pause();
    }
    Box::new(Tracing {
        dispatch: Some(dispatch),
        shape,
        collector: Collector::Ring { guard, handle, paused },
    })
}

/// Spans fastrace's reporter received: named `work` (no property) and `work_prop` (one
/// property); the two configurations run side by side, so each counts its own.
static FASTRACE_REPORTED: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// A fastrace reporter that counts `work` and `work_prop` spans and discards everything.
struct DiscardReporter;

impl fastrace::collector::Reporter for DiscardReporter {
    fn report(&mut self, spans: Vec<fastrace::collector::SpanRecord>) {
        for s in spans {
            match &*s.name {
                "work" => FASTRACE_REPORTED[0].fetch_add(1, Ordering::Relaxed),
                "work_prop" => FASTRACE_REPORTED[1].fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
        }
    }
}

/// Where fastrace's reporter writes the spans it receives, in the `total_cpu` case that keeps
/// them on disk (`fastrace_to_file`); `None` everywhere else, where it discards them.
static FASTRACE_FILE: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();

/// Bytes a span takes in the file `FileReporter` writes: trace id, span id, parent id, start,
/// duration, and the name's length and bytes (`work`).
const FASTRACE_SPAN_BYTES: usize = 16 + 8 + 8 + 8 + 8 + 4 + 4;

/// A fastrace reporter that counts spans as `DiscardReporter` does and writes each to
/// `FASTRACE_FILE` in a fixed binary layout, one `write` per report (every 10 ms): the least a
/// fastrace user pays to keep spans on disk, beside ringtrace's raw recording.
struct FileReporter {
    buf: Vec<u8>,
}

impl fastrace::collector::Reporter for FileReporter {
    fn report(&mut self, spans: Vec<fastrace::collector::SpanRecord>) {
        use std::io::Write;
        self.buf.clear();
        for s in &spans {
            self.buf.extend_from_slice(&s.trace_id.0.to_le_bytes());
            self.buf.extend_from_slice(&s.span_id.0.to_le_bytes());
            self.buf.extend_from_slice(&s.parent_id.0.to_le_bytes());
            self.buf.extend_from_slice(&s.begin_time_unix_ns.to_le_bytes());
            self.buf.extend_from_slice(&s.duration_ns.to_le_bytes());
            self.buf.extend_from_slice(&(s.name.len() as u32).to_le_bytes());
            self.buf.extend_from_slice(s.name.as_bytes());
        }
        let mut file = FASTRACE_FILE.get().expect("the reporter's file");
        file.write_all(&self.buf).expect("write fastrace's spans");
        DiscardReporter.report(spans);
    }
}

/// fastrace `LocalSpan`s under a root span; the root is made and ended outside the timed region.
struct Fastrace {
    property: bool,
}

impl Case for Fastrace {
    fn on_thread(&self, f: &mut dyn FnMut()) {
        f()
    }

    fn burst(&self, first: u64, spans: u64) -> Duration {
        use fastrace::local::LocalSpan;
        let root = fastrace::Span::root("root", fastrace::collector::SpanContext::random());
        let parent = root.set_local_parent();
        let start = Instant::now();
        if self.property {
            for i in first..first + spans {
                let span =
                    LocalSpan::enter_with_local_parent("work_prop").with_property(|| ("i", i.to_string()));
                black_box(&span);
            }
        } else {
            for i in first..first + spans {
                let span = LocalSpan::enter_with_local_parent("work");
                black_box((&span, i));
            }
        }
        let elapsed = start.elapsed();
        drop(parent);
        drop(root);
        elapsed
    }

    fn between(&self) {
        fastrace::flush();
        // As ringtrace's flush does, the file's data reaches the disk.
        if let Some(file) = FASTRACE_FILE.get() {
            file.sync_data().expect("sync fastrace's file");
        }
    }

    fn finish(self: Box<Self>, produced: u64) -> String {
        fastrace::flush();
        let reported = FASTRACE_REPORTED[usize::from(self.property)].swap(0, Ordering::Relaxed);
        assert_eq!(reported, produced, "fastrace reported {reported} of {produced} spans");
        format!("fastrace reported {reported} spans")
    }
}

/// A clock read per "span": the floor of any recorder that timestamps.
struct Floor {
    quanta: Option<quanta::Clock>,
}

impl Case for Floor {
    fn on_thread(&self, f: &mut dyn FnMut()) {
        f()
    }

    fn burst(&self, _first: u64, spans: u64) -> Duration {
        let start = Instant::now();
        match &self.quanta {
            Some(clock) => {
                for _ in 0..spans {
                    black_box(clock.raw());
                }
            }
            None => {
                for _ in 0..spans {
                    black_box(Instant::now());
                }
            }
        }
        start.elapsed()
    }

    fn finish(self: Box<Self>, _produced: u64) -> String {
        String::new()
    }
}

// ---------------------------------------------------------------------------------------------
// Running a configuration on worker threads.

/// Median ns per span of each configuration, by group and name: the interleaved pass's under
/// the group's name, criterion's under `<group>:criterion`.
type Results = BTreeMap<(String, String), f64>;

/// A configuration with its worker threads waiting for orders.
struct Runner {
    name: String,
    unit: u64,
    orders: Vec<mpsc::Sender<u64>>,
    done: mpsc::Receiver<Duration>,
}

impl Runner {
    /// Starts `threads` workers for `case`, recording in bursts of `burst` spans. Each worker
    /// installs the configuration, records one untimed burst (the thread's first span sets up
    /// its ring or buffers), then waits for orders.
    fn spawn<'scope>(
        s: &'scope std::thread::Scope<'scope, '_>,
        name: &str,
        case: &'scope dyn Case,
        threads: usize,
        burst: u64,
        produced: &'scope AtomicU64,
    ) -> Runner {
        assert_eq!(burst % case.unit(), 0, "a burst must hold whole units");
        let barrier = Arc::new(Barrier::new(threads));
        let (done_tx, done) = mpsc::channel::<Duration>();
        let mut orders = Vec::new();
        for w in 0..threads {
            let (tx, rx) = mpsc::channel::<u64>();
            orders.push(tx);
            let (done_tx, barrier) = (done_tx.clone(), barrier.clone());
            s.spawn(move || {
                case.on_thread(&mut || {
                    // Each worker numbers its spans apart from the others'.
                    let mut next = (w as u64) << 48;
                    let mut burst_then_wait = |spans: u64| {
                        let t = case.burst(next, spans);
                        next += spans;
                        produced.fetch_add(spans, Ordering::Relaxed);
                        barrier.wait();
                        if w == 0 {
                            case.between();
                        }
                        barrier.wait();
                        t
                    };
                    burst_then_wait(burst);
                    while let Ok(spans) = rx.recv() {
                        let mut total = Duration::ZERO;
                        let mut left = spans;
                        while left > 0 {
                            let n = burst.min(left);
                            total += burst_then_wait(n);
                            left -= n;
                        }
                        done_tx.send(total).unwrap();
                    }
                })
            });
        }
        Runner { name: name.to_owned(), unit: case.unit(), orders, done }
    }

    /// Has every worker record `iters` spans at once (rounded up to whole units); returns the
    /// mean per-thread time, scaled back to `iters` spans.
    fn measure(&self, iters: u64) -> Duration {
        let spans = iters.next_multiple_of(self.unit);
        for tx in &self.orders {
            tx.send(spans).unwrap();
        }
        let threads = self.orders.len();
        let total: Duration = (0..threads).map(|_| self.done.recv().unwrap()).sum();
        (total / threads as u32).mul_f64(iters as f64 / spans as f64)
    }
}

/// The median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    (v[(v.len() - 1) / 2] + v[v.len() / 2]) / 2.0
}

/// Runs one group: every configuration's workers are started together; criterion measures
/// each in turn (its usual report), then the interleaved pass measures them in rotation,
/// `rounds` times, and their medians go into `results`. The interleaved medians are the table's:
/// on a shared machine, load that comes and goes then falls on every configuration alike.
#[allow(clippy::too_many_arguments)]
fn run_group(
    c: &mut Criterion,
    results: &mut Results,
    group_name: &str,
    threads: usize,
    burst: u64,
    rounds: usize,
    cases: Vec<(String, Box<dyn Case>)>,
) {
    let produced: Vec<AtomicU64> = cases.iter().map(|_| AtomicU64::new(0)).collect();
    std::thread::scope(|s| {
        let runners: Vec<Runner> = cases
            .iter()
            .zip(&produced)
            .map(|((name, case), p)| Runner::spawn(s, name, &**case, threads, burst, p))
            .collect();
        let mut g = group(c, group_name);
        for r in &runners {
            let mut per_span = Vec::new();
            g.bench_function(&r.name, |b| {
                b.iter_custom(|iters| {
                    let d = r.measure(iters);
                    per_span.push(d.as_nanos() as f64 / iters as f64);
                    d
                })
            });
            // The last `SAMPLES` calls are criterion's samples; those before, its warm-up.
            if per_span.len() >= SAMPLES {
                let from = per_span.len() - SAMPLES;
                let median = median(&mut per_span[from..]);
                results.insert((format!("{group_name}:criterion"), r.name.clone()), median);
            }
        }
        g.finish();
        let spans = burst * INTERLEAVED_BURSTS;
        let mut samples = vec![Vec::with_capacity(rounds); runners.len()];
        for round in 0..rounds {
            for k in 0..runners.len() {
                let i = (k + round) % runners.len();
                let d = runners[i].measure(spans);
                samples[i].push(d.as_nanos() as f64 / spans as f64);
            }
        }
        for (r, mut v) in runners.iter().zip(samples) {
            if v.is_empty() {
                continue;
            }
            let median = median(&mut v);
            let (lo, hi) = (v[v.len() / 4], v[v.len() * 3 / 4]);
            eprintln!(
                "interleaved {group_name}/{}: median {median:.1} ns, quartiles {lo:.1}..{hi:.1}",
                r.name
            );
            results.insert((group_name.to_owned(), r.name.clone()), median);
        }
        // Dropping the runners ends their workers.
    });
    for ((name, case), p) in cases.into_iter().zip(produced) {
        let note = case.finish(p.load(Ordering::Relaxed));
        if !note.is_empty() {
            eprintln!("{group_name}/{name}: {note}");
        }
    }
}

fn group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(SAMPLES)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1000))
        .sampling_mode(SamplingMode::Flat);
    g
}

/// Makes a configuration (its collector starts when it is made).
type MakeCase = fn() -> Box<dyn Case>;
/// Makes a configuration for a span shape, recording (`false`) or paused (`true`).
type MakeShaped = fn(Shape, bool) -> Box<dyn Case>;

/// The single-span configurations, in the order they run and are listed.
fn peer_cases() -> Vec<(&'static str, MakeCase)> {
    vec![
        ("no_subscriber", || no_subscriber(Shape::One)),
        ("registry_noop", || registry_noop(Shape::One)),
        ("registry_fmt_sink", || registry_fmt_sink(Shape::One)),
        ("registry_otel", || registry_otel(Shape::One)),
        ("fastrace_local", || Box::new(Fastrace { property: false })),
        ("fastrace_local_prop", || Box::new(Fastrace { property: true })),
        ("registry_ringlayer", || registry_ringlayer(Shape::One, false)),
        ("registry_ringlayer_paused", || registry_ringlayer(Shape::One, true)),
        ("ring_subscriber", || ring_subscriber(Shape::One, false)),
        ("ring_subscriber_paused", || ring_subscriber(Shape::One, true)),
        ("registry_floor_layer", || registry_floor_layer(Shape::One)),
        ("floor_subscriber", || floor_subscriber(Shape::One)),
        ("floor_quanta_raw", || Box::new(Floor { quanta: Some(quanta::Clock::new()) })),
        ("floor_instant_now", || Box::new(Floor { quanta: None })),
    ]
}

// ---------------------------------------------------------------------------------------------
// The summary table.

fn row_label(name: &str) -> &str {
    match name {
        "no_subscriber" => "no subscriber, other subscribers in the process",
        "registry_noop" => "registry + no-op layer (baseline)",
        "registry_fmt_sink" => "registry + `fmt` to `io::sink`",
        "registry_otel" => {
            "registry + `tracing-opentelemetry` 0.34, SDK 0.33 batch processor, discarding exporter"
        }
        "fastrace_local" => "fastrace 0.7 `LocalSpan` under a root, no property",
        "fastrace_local_prop" => "fastrace 0.7 `LocalSpan` under a root, one string property",
        "registry_ringlayer" => "registry + `RingLayer`, recording",
        "registry_ringlayer_paused" => "registry + `RingLayer`, paused",
        "ring_subscriber" => "`RingSubscriber` (standalone, no registry), recording",
        "ring_subscriber_paused" => "`RingSubscriber`, paused",
        "registry_floor_layer" => "floor: registry + the least a recording layer does",
        "floor_subscriber" => "floor: the least a recording subscriber of its own does",
        "floor_quanta_raw" => "floor: `quanta::Clock::raw()`",
        "floor_instant_now" => "floor: `Instant::now()`",
        other => other,
    }
}

fn print_tables(results: &Results) {
    print_peer_table(results);
    print_event_table(results);
}

/// Span + event, and the event alone: (span + event) − (span), measured side by side.
fn print_event_table(results: &Results) {
    let get = |n: &str| results.get(&("event".to_owned(), n.to_owned())).copied();
    println!("\n## event: `info!` with one integer field inside the span (median ns)\n");
    println!("| configuration | span + event | span alone | event | event above registry + no-op's |");
    println!("|---|---:|---:|---:|---:|");
    let event = |n: &str| Some(get(&format!("{n}/event"))? - get(&format!("{n}/span"))?);
    let ns = |x: Option<f64>| x.map_or("—".into(), |x| format!("{x:.1}"));
    for (name, label) in [
        ("registry_noop", "registry + no-op layer"),
        ("registry_floor_layer", "floor: registry + the least a recording layer does"),
        ("registry_ringlayer", "registry + `RingLayer`"),
        ("floor_subscriber", "floor: the least a recording subscriber of its own does"),
        ("ring_subscriber", "`RingSubscriber`"),
    ] {
        let above = match (event(name), event("registry_noop")) {
            (Some(e), Some(b)) => format!("{:+.1}", e - b),
            _ => "—".into(),
        };
        let (both, span) = (get(&format!("{name}/event")), get(&format!("{name}/span")));
        println!("| {label} | {} | {} | {} | {above} |", ns(both), ns(span), ns(event(name)));
    }
}

fn print_peer_table(results: &Results) {
    let get = |g: &str, n: &str| results.get(&(g.to_owned(), n.to_owned())).copied();
    println!("\n## Results (median ns per span; per thread with 2 threads)\n");
    println!("Interleaved medians; criterion's own medians (each configuration run alone, in turn) in parentheses.\n");
    println!(
        "| configuration | 1 thread | vs no-op | vs otel | 2 threads | vs no-op | vs otel | 2 thr / 1 thr |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let fmt_ratio = |x: Option<f64>, base: Option<f64>| match (x, base) {
        (Some(x), Some(b)) => format!("{:.2}× ({:+.1} ns)", x / b, x - b),
        _ => "—".into(),
    };
    let fmt_otel = |x: Option<f64>, otel: Option<f64>| match (x, otel) {
        (Some(x), Some(o)) if x == o => "—".into(),
        (Some(x), Some(o)) => format!("{:.1}× cheaper", o / x),
        _ => "—".into(),
    };
    let ns = |g: &str, n: &str| match (get(g, n), get(&format!("{g}:criterion"), n)) {
        (Some(x), Some(c)) => format!("{x:.1} ({c:.1})"),
        (Some(x), None) => format!("{x:.1}"),
        (None, Some(c)) => format!("— ({c:.1})"),
        (None, None) => "—".into(),
    };
    let pure = get("floor", "no_subscriber");
    println!(
        "| no subscriber, before any subscriber existed | {} | {} | {} | — | — | — | — |",
        ns("floor", "no_subscriber"),
        fmt_ratio(pure, get("one_thread", "registry_noop")),
        fmt_otel(pure, get("one_thread", "registry_otel")),
    );
    for (name, _) in peer_cases() {
        let one = get("one_thread", name);
        let two = get("two_threads", name);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            row_label(name),
            ns("one_thread", name),
            fmt_ratio(one, get("one_thread", "registry_noop")),
            fmt_otel(one, get("one_thread", "registry_otel")),
            ns("two_threads", name),
            fmt_ratio(two, get("two_threads", "registry_noop")),
            fmt_otel(two, get("two_threads", "registry_otel")),
            match (one, two) {
                (Some(a), Some(b)) => format!("{:.2}×", b / a),
                _ => "—".into(),
            },
        );
    }
    let ns = |x: Option<f64>| x.map_or("—".into(), |x| format!("{x:.1}"));
    for (g, what, keys) in [
        ("depth", "nested spans", ["1", "4", "16"].as_slice()),
        ("fields", "integer fields", ["0", "1", "4", "8", STRINGS_KEY].as_slice()),
    ] {
        println!("\n## {g} sweep (median ns per span)\n");
        println!(
            "| {what} | registry + no-op | registry + floor layer | registry + `RingLayer` | \
             `RingLayer` above no-op | floor subscriber | `RingSubscriber` |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        for k in keys {
            let at = |name: &str| get(g, &format!("{name}/{k}"));
            let (noop, ring) = (at("registry_noop"), at("registry_ringlayer"));
            let diff = match (noop, ring) {
                (Some(n), Some(r)) => format!("{:+.1} ns ({:.2}×)", r - n, r / n),
                _ => "—".into(),
            };
            println!(
                "| {k} | {} | {} | {} | {diff} | {} | {} |",
                ns(noop),
                ns(at("registry_floor_layer")),
                ns(ring),
                ns(at("floor_subscriber")),
                ns(at("ring_subscriber"))
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Total CPU of the process at a sustained rate.

/// Total spans per second in the `total_cpu` group, over both threads.
const TOTAL_RATE: f64 = 1e6;
/// Spans per thread per measurement in the `total_cpu` group.
const TOTAL_SPANS: u64 = 1 << 20;
/// The SDK's queue in the `total_cpu` group: room for a quarter second of spans, so that its
/// exporter thread falling behind on a loaded machine drops nothing. ringtrace keeps its default
/// rings (16,384 records a thread): a larger ring is written through memory that is no longer in
/// cache, and costs more per span.
const TOTAL_QUEUE: usize = 1 << 18;

/// ringtrace writing its local recording into `dir`: raw (the default) or through the OTLP
/// recording sink (the drain assembles and encodes); `RingSubscriber` when `standalone`.
fn ringtrace_recording(standalone: bool, raw: bool, dir: &std::path::Path) -> Box<dyn Case> {
    let builder = ringtrace::Builder::new().node("bench").daemon("bench-peers");
    let builder = if raw {
        builder.recording_dir(dir)
    } else {
        let sink =
            ringtrace::RecordingSink::create(dir, "bench", "otlp", std::process::id()).expect("recording");
        builder.no_recording().sink(sink)
    };
    let (dispatch, guard) = ring_dispatch(builder, standalone);
    let handle = guard.handle();
    Box::new(Tracing {
        dispatch: Some(dispatch),
        shape: Shape::One,
        collector: Collector::Ring { guard, handle, paused: false },
    })
}

/// Whole-process CPU per span of `case`: two threads, `TOTAL_SPANS` each at `TOTAL_RATE` in
/// total, then the collector flushed.
fn total_cpu_per_span(case: &dyn Case, first: u64) -> f64 {
    let per_thread_rate = TOTAL_RATE / 2.0;
    let before = ringtrace_test_support::cpu::process_ns();
    std::thread::scope(|scope| {
        for t in 0..2u64 {
            scope.spawn(move || {
                case.on_thread(&mut || {
                    let begin = Instant::now();
                    let mut done = 0;
                    while done < TOTAL_SPANS {
                        case.burst(first + t * TOTAL_SPANS + done, BURST);
                        done += BURST;
                        let due = Duration::from_secs_f64(done as f64 / per_thread_rate);
                        if let Some(wait) = due.checked_sub(begin.elapsed()) {
                            std::thread::sleep(wait);
                        }
                    }
                });
            });
        }
    });
    case.between();
    (ringtrace_test_support::cpu::process_ns() - before) as f64 / (2 * TOTAL_SPANS) as f64
}

/// The `total_cpu` group's configurations, each made in the process that measures it.
type TotalCase = (&'static str, fn(&std::path::Path) -> Box<dyn Case>);

const TOTAL_CASES: [TotalCase; 10] = [
    ("registry + no-op layer", |_| registry_noop(Shape::One)),
    ("fastrace `LocalSpan`, no property", |_| Box::new(Fastrace { property: false })),
    (FASTRACE_TO_FILE, |_| Box::new(Fastrace { property: false })),
    ("registry + `tracing-opentelemetry`, SDK batch processor, discarding exporter", |_| {
        registry_otel_queue(Shape::One, TOTAL_QUEUE)
    }),
    ("registry + `RingLayer`, raw recording", |dir| ringtrace_recording(false, true, dir)),
    ("`RingSubscriber`, raw recording", |dir| ringtrace_recording(true, true, dir)),
    ("registry + `RingLayer`, OTLP recording sink", |dir| ringtrace_recording(false, false, dir)),
    ("`RingSubscriber`, OTLP recording sink", |dir| ringtrace_recording(true, false, dir)),
    ("floor subscriber writing each span to a file", |dir| {
        uncollected(Dispatch::new(DiskFloorSubscriber::new(floor_file(dir))), Shape::One)
    }),
    ("registry + floor layer writing each span to a file", |dir| {
        let layer = FloorLayer::to_file(floor_file(dir));
        uncollected(Dispatch::new(tracing_subscriber::registry().with(layer)), Shape::One)
    }),
];

/// The file a floor writing to disk writes, in `dir` (removed with it after the measurement).
fn floor_file(dir: &std::path::Path) -> std::fs::File {
    std::fs::create_dir_all(dir).expect("the floor's directory");
    std::fs::File::create(dir.join("floor.bin")).expect("the floor's file")
}

/// The `total_cpu` case whose fastrace reporter writes its spans to a file (see `main`).
const FASTRACE_TO_FILE: &str = "fastrace `LocalSpan`, no property, reporter writing each span to a file";

/// The environment variable that makes this process one measurement of the `total_cpu` group:
/// the configuration's index in `TOTAL_CASES`.
const TOTAL_CHILD: &str = "PEERS_TOTAL_CHILD";
/// How a child's line of results starts.
const TOTAL_RESULT: &str = "total_cpu result:";

/// One measurement of the `total_cpu` group, in a process of its own (`TOTAL_CHILD` set): the
/// configuration is installed as the global default subscriber, as a service installs it
/// (`ringtrace::init()`, `tracing_subscriber::registry().init()`). A scoped dispatcher
/// (`with_default`) would hand every span a clone of one reference-counted subscriber: two
/// threads then contend for that count, which no service with a global default pays.
fn total_cpu_child(index: &str) {
    let (_, make) =
        index.parse::<usize>().ok().and_then(|k| TOTAL_CASES.get(k)).expect("PEERS_TOTAL_CHILD: an index");
    let dir = std::env::temp_dir().join(format!("ringtrace-peers-total-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut case = make(&dir);
    case.install_globally();
    let ns = total_cpu_per_span(case.as_ref(), 0);
    // A collector that fell behind on a loaded machine dropped spans (cheaper than recording
    // them): its row then understates; the check's message says so instead of ending the run.
    let note = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case.finish(2 * TOTAL_SPANS)))
        .unwrap_or_else(|_| "LOST SPANS (see the message above): its figure understates the cost".into());
    let _ = std::fs::remove_dir_all(&dir);
    println!("{TOTAL_RESULT} {ns} {note}");
}

/// The `total_cpu` group: every configuration in turn, `rounds` times, each time in a new
/// process (`total_cpu_child`); prints the medians.
fn total_cpu_group(rounds: usize) {
    let keep = std::env::var("PEERS_TOTAL_CASES").ok();
    let cases: Vec<(usize, &str)> = TOTAL_CASES
        .iter()
        .enumerate()
        .filter(|(_, (name, _))| keep.as_deref().is_none_or(|k| k.split('|').any(|k| name.contains(k))))
        .map(|(k, (name, _))| (k, *name))
        .collect();
    let exe = std::env::current_exe().expect("the bench's own path");
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    let mut notes: Vec<String> = vec![String::new(); cases.len()];
    // A round fails when its configuration lost spans (a peer's exporter dropping them under
    // load) or the measurement broke: it is shown as failed, its reason on stderr, and the
    // other rounds and configurations go on.
    let mut failed: Vec<usize> = vec![0; cases.len()];
    for _ in 0..rounds.max(1) {
        for (i, (k, name)) in cases.iter().enumerate() {
            let out = std::process::Command::new(&exe)
                .arg("--bench")
                .env(TOTAL_CHILD, k.to_string())
                .stderr(std::process::Stdio::inherit())
                .output()
                .expect("run a total_cpu measurement");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let result = stdout.lines().find_map(|l| l.strip_prefix(TOTAL_RESULT)).map(str::trim);
            let Some((ns, note)) = result.map(|r| r.split_once(' ').unwrap_or((r, ""))) else {
                eprintln!("total_cpu: a round of {name} failed ({}): {stdout}", out.status);
                failed[i] += 1;
                continue;
            };
            samples[i].push(ns.parse().expect("ns per span"));
            notes[i] = note.to_owned();
        }
    }
    println!(
        "\n### total_cpu: whole-process CPU per span, {:.1} M spans/s over two threads, global default subscriber\n",
        TOTAL_RATE / 1e6
    );
    println!("| configuration | ns of CPU per span (median of {}) | all rounds |", rounds.max(1));
    println!("|---|---:|---|");
    for (i, (_, name)) in cases.iter().enumerate() {
        let mut all: Vec<String> = samples[i].iter().map(|v| format!("{v:.0}")).collect();
        all.extend(std::iter::repeat_n("failed".to_owned(), failed[i]));
        let shown = if samples[i].is_empty() {
            "—".to_owned()
        } else {
            format!("{:.0}", median(&mut samples[i].clone()))
        };
        println!("| {name} | {shown} | {} |", all.join(" / "));
    }
    for (i, (_, name)) in cases.iter().enumerate() {
        println!("- {name} (last round): {}", notes[i]);
    }
}

fn main() {
    let fastrace_config = fastrace::collector::Config::default().report_interval(Duration::from_millis(10));
    let child = std::env::var(TOTAL_CHILD).ok();
    let to_file = child.as_deref().and_then(|k| k.parse::<usize>().ok()).and_then(|k| TOTAL_CASES.get(k));
    if to_file.is_some_and(|(name, _)| *name == FASTRACE_TO_FILE) {
        let dir = std::env::temp_dir().join(format!("ringtrace-peers-fastrace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("the fastrace file's directory");
        let path = dir.join("spans.bin");
        let file = std::fs::File::create(&path).expect("the fastrace file");
        // Unlinked at once: the process's descriptor keeps it until the measurement ends.
        let _ = std::fs::remove_dir_all(&dir);
        let _ = FASTRACE_FILE.set(file);
        let buf = Vec::with_capacity(FASTRACE_SPAN_BYTES << 14);
        fastrace::set_reporter(FileReporter { buf }, fastrace_config);
    } else {
        fastrace::set_reporter(DiscardReporter, fastrace_config);
    }
    let rounds = match std::env::var("PEERS_ROUNDS") {
        Ok(v) => v.parse().expect("PEERS_ROUNDS: a number of rounds"),
        Err(_) => ROUNDS,
    };
    if let Some(index) = child {
        total_cpu_child(&index);
        return;
    }
    if std::env::var("PEERS_TOTAL_ONLY").as_deref() == Ok("1") {
        total_cpu_group(rounds);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    let mut results = Results::new();

    // First, before any subscriber exists: `tracing` with no subscriber at all. Once a
    // subscriber has been registered, callsites stay "sometimes" enabled and every span asks
    // the thread's dispatcher; the `no_subscriber` rows of the other groups measure that.
    let pure = vec![("no_subscriber".to_owned(), no_subscriber(Shape::One))];
    run_group(&mut c, &mut results, "floor", 1, BURST, rounds, pure);

    for (group_name, threads) in [("one_thread", 1), ("two_threads", 2)] {
        let cases = peer_cases().into_iter().map(|(name, make)| (name.to_owned(), make())).collect();
        run_group(&mut c, &mut results, group_name, threads, BURST, rounds, cases);
    }

    // The sweeps and events: registry + no-op layer, registry + `RingLayer`, `RingSubscriber`,
    // and the floors under the last two.
    let sweep_cases: [(&str, MakeShaped); 5] = [
        ("registry_noop", |shape, _| registry_noop(shape)),
        ("registry_floor_layer", |shape, _| registry_floor_layer(shape)),
        ("registry_ringlayer", registry_ringlayer),
        ("floor_subscriber", |shape, _| floor_subscriber(shape)),
        ("ring_subscriber", ring_subscriber),
    ];
    let shaped = |shapes: &[(String, Shape)]| -> Vec<(String, Box<dyn Case>)> {
        let mut cases = Vec::new();
        for (key, shape) in shapes {
            for (name, make) in sweep_cases {
                cases.push((format!("{name}/{key}"), make(*shape, false)));
            }
        }
        cases
    };
    let depths: Vec<_> = [1u64, 4, 16].iter().map(|&d| (d.to_string(), Shape::Depth(d))).collect();
    run_group(&mut c, &mut results, "depth", 1, SWEEP_BURST, rounds, shaped(&depths));
    let mut fields: Vec<_> = [0u32, 1, 4, 8].iter().map(|&f| (f.to_string(), Shape::Fields(f))).collect();
    fields.push((STRINGS_KEY.to_owned(), Shape::Strings));
    run_group(&mut c, &mut results, "fields", 1, SWEEP_BURST, rounds, shaped(&fields));
    let event = [("event".to_owned(), Shape::Event), ("span".to_owned(), Shape::One)];
    run_group(&mut c, &mut results, "event", 1, BURST, rounds, shaped(&event));

    c.final_summary();
    if rounds > 0 {
        print_tables(&results);
    }
    total_cpu_group(rounds);
}
