//! Per-span cost of ringtrace and its peers, side by side in one process.
//!
//! The unit of work is `info_span!("work", i)` (one integer field), enter, exit, drop — or the
//! nearest equivalent for fastrace, whose API is not `tracing`'s. Configurations:
//!
//! - `no_subscriber`: `tracing` with no subscriber;
//! - `registry_noop`: the registry plus a layer that does nothing (the baseline);
//! - `registry_fmt_sink`: the registry plus `tracing-subscriber`'s `fmt` layer writing to
//!   `io::sink` (span fields are formatted; `fmt` prints only events, and there are none);
//! - `registry_otel`: the registry plus `tracing-opentelemetry` over the OpenTelemetry SDK with
//!   its batch span processor and an exporter that counts spans and discards them;
//! - `fastrace_local` / `fastrace_local_prop`: a fastrace `LocalSpan` under a root span, with no
//!   property or with one string property (`i` formatted, fastrace properties being strings),
//!   reported to a reporter that counts and discards;
//! - `registry_ringlayer` / `registry_ringlayer_paused`: the registry plus ringtrace's
//!   `RingLayer` (no recording, `RING` records per thread), recording or paused;
//! - `ring_subscriber` / `ring_subscriber_paused`: ringtrace's standalone `RingSubscriber`
//!   (no registry), recording or paused;
//! - `floor_quanta_raw` / `floor_instant_now`: one `quanta::Clock::raw()` or one
//!   `std::time::Instant::now()` per "span".
//!
//! Group `one_thread` runs each on one thread; `two_threads` runs two threads recording at once
//! and reports the per-thread cost; `depth` nests 1, 4 or 16 spans; `fields` gives each span 0, 1,
//! 4 or 8 integer fields (these two: registry + `RingLayer` versus registry + no-op layer);
//! `event` adds one `info!` with one integer field inside each span (registry + no-op layer,
//! registry + `RingLayer`, `RingSubscriber`).
//!
//! Every configuration is timed the same way: bursts of spans, each burst timed alone, on worker
//! threads that live for the whole configuration. After each burst, untimed and while the other
//! worker waits, the configuration's collector is flushed (ringtrace's drain, the SDK's batch
//! processor, fastrace's collector), so every timed span is really recorded, and at the end the
//! bench asserts that each collector received exactly the spans produced — a dropped span is
//! cheaper than a recorded one, and a tight loop outruns any collector. Sustained throughput,
//! where a collector must keep up on its own, is `benches/throughput.rs` at the root.
//!
//! At the end the bench prints a Markdown table of medians (the same medians criterion reports)
//! with ratios to registry + no-op layer and to registry + tracing-opentelemetry.
//!
//! `cargo bench -p ringtrace-bench-peers` (criterion filters work as usual: `-- one_thread`).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode};
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

/// Spans per timed burst in the single-span groups.
const BURST: u64 = 4096;
/// Spans per burst in the field sweep: 8 fields make 10 records a span, and a burst must fit the
/// ring. A multiple of every depth in the depth sweep.
const SWEEP_BURST: u64 = 2048;
/// Ring capacity, in records, of each ringtrace thread; and the SDK's batch queue, in spans.
const RING: usize = 1 << 15;
/// Criterion samples per configuration; the table's medians are over these.
const SAMPLES: usize = 20;

// ---------------------------------------------------------------------------------------------
// The unit of work.

/// The span every configuration records; the same as `benches/span_cost.rs` at the root.
fn one_span(i: u64) {
    let span = tracing::info_span!("work", i);
    let _e = span.enter();
    black_box(&span);
}

/// `depth` nested spans, each with one integer field.
fn nested(depth: u64, i: u64) {
    let span = tracing::info_span!("work", i);
    let _e = span.enter();
    if depth > 1 {
        nested(depth - 1, i);
    }
    black_box(&span);
}

/// One span with one `info!` event (one integer field) inside.
fn span_with_event(i: u64) {
    let span = tracing::info_span!("work", i);
    let _e = span.enter();
    tracing::info!(n = i, "event");
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

fn fields_8(i: u64) {
    let span = tracing::info_span!(
        "work",
        a = i,
        b = i + 1,
        c = i + 2,
        d = i + 3,
        e = i + 4,
        f = i + 5,
        g = i + 6,
        h = i + 7
    );
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
    Otel {
        provider: opentelemetry_sdk::trace::SdkTracerProvider,
        exported: Arc<AtomicU64>,
    },
    /// ringtrace.
    Ring {
        guard: ringtrace::Guard,
        handle: ringtrace::Handle,
        paused: bool,
    },
}

impl Case for Tracing {
    fn on_thread(&self, f: &mut dyn FnMut()) {
        match &self.dispatch {
            Some(d) => tracing::dispatcher::with_default(d, f),
            None => f(),
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
                handle
                    .flush(Duration::from_secs(30))
                    .expect("ringtrace flush");
            }
        }
    }

    fn finish(self: Box<Self>, produced: u64) -> String {
        let Tracing {
            dispatch,
            collector,
            shape,
        } = *self;
        drop(dispatch);
        match collector {
            Collector::None => String::new(),
            Collector::Otel { provider, exported } => {
                provider.shutdown().expect("otel shutdown");
                let exported = exported.load(Ordering::Relaxed);
                assert_eq!(
                    exported, produced,
                    "the SDK exported {exported} of {produced} spans"
                );
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

/// A layer that does nothing: the registry's own cost.
struct NoopLayer;
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for NoopLayer {}

fn no_subscriber(shape: Shape) -> Box<dyn Case> {
    Box::new(Tracing {
        dispatch: None,
        shape,
        collector: Collector::None,
    })
}

fn registry_noop(shape: Shape) -> Box<dyn Case> {
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(NoopLayer));
    Box::new(Tracing {
        dispatch: Some(dispatch),
        shape,
        collector: Collector::None,
    })
}

fn registry_fmt_sink(shape: Shape) -> Box<dyn Case> {
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::sink);
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    Box::new(Tracing {
        dispatch: Some(dispatch),
        shape,
        collector: Collector::None,
    })
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
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
    let exporter = DiscardExporter::default();
    let exported = exporter.0.clone();
    // The queue holds a whole burst from every thread, so nothing is dropped; the rest is the
    // SDK's default configuration.
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(RING)
                .build(),
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("bench"));
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    Box::new(Tracing {
        dispatch: Some(dispatch),
        shape,
        collector: Collector::Otel { provider, exported },
    })
}

fn registry_ringlayer(shape: Shape, paused: bool) -> Box<dyn Case> {
    ringtrace(shape, paused, false)
}

fn ring_subscriber(shape: Shape, paused: bool) -> Box<dyn Case> {
    ringtrace(shape, paused, true)
}

/// ringtrace without a recording: `RingSubscriber` when `standalone`, else registry + `RingLayer`.
fn ringtrace(shape: Shape, paused: bool, standalone: bool) -> Box<dyn Case> {
    let builder = ringtrace::Builder::new()
        .node("bench")
        .daemon("bench-peers")
        .no_recording()
        .ring_capacity(RING);
    let (dispatch, guard) = if standalone {
        let (subscriber, guard) = builder.build_subscriber().expect("ringtrace collector");
        (Dispatch::new(subscriber), guard)
    } else {
        let (layer, guard) = builder.build().expect("ringtrace collector");
        (
            Dispatch::new(tracing_subscriber::registry().with(layer)),
            guard,
        )
    };
    let handle = guard.handle();
    if paused {
        handle.pause();
    }
    Box::new(Tracing {
        dispatch: Some(dispatch),
        shape,
        collector: Collector::Ring {
            guard,
            handle,
            paused,
        },
    })
}

/// Spans fastrace's reporter received, named `work` (roots excluded).
static FASTRACE_REPORTED: AtomicU64 = AtomicU64::new(0);

/// A fastrace reporter that counts `work` spans and discards everything.
struct DiscardReporter;

impl fastrace::collector::Reporter for DiscardReporter {
    fn report(&mut self, spans: Vec<fastrace::collector::SpanRecord>) {
        let n = spans.iter().filter(|s| s.name == "work").count();
        FASTRACE_REPORTED.fetch_add(n as u64, Ordering::Relaxed);
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
                let span = LocalSpan::enter_with_local_parent("work")
                    .with_property(|| ("i", i.to_string()));
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
    }

    fn finish(self: Box<Self>, produced: u64) -> String {
        fastrace::flush();
        let reported = FASTRACE_REPORTED.swap(0, Ordering::Relaxed);
        assert_eq!(
            reported, produced,
            "fastrace reported {reported} of {produced} spans"
        );
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

/// Median ns per span of each configuration, by group and name.
type Results = BTreeMap<(String, String), f64>;

/// Benchmarks `case` on `threads` workers recording at once, `burst` spans per timed burst.
/// Reports per-thread ns per span; records the median into `results`.
fn run_case(
    g: &mut BenchmarkGroup<'_, WallTime>,
    results: &Mutex<Results>,
    group: &'static str,
    name: &str,
    threads: usize,
    burst: u64,
    case: Box<dyn Case>,
) {
    let produced = AtomicU64::new(0);
    let samples = Mutex::new(Vec::<f64>::new());
    let barrier = Barrier::new(threads);
    assert_eq!(burst % case.unit(), 0, "a burst must hold whole units");
    std::thread::scope(|s| {
        let mut orders = Vec::new();
        let (done_tx, done_rx) = mpsc::channel::<Duration>();
        for w in 0..threads {
            let (tx, rx) = mpsc::channel::<u64>();
            orders.push(tx);
            let (done_tx, case, barrier, produced) = (done_tx.clone(), &*case, &barrier, &produced);
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
                    // Untimed warm-up: the thread's first span sets up its ring or buffers.
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
        drop(done_tx);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                // Whole units (a depth-16 nest is 16 spans); `burst` is a multiple of the unit.
                let spans = iters.next_multiple_of(case.unit());
                for tx in &orders {
                    tx.send(spans).unwrap();
                }
                let total: Duration = (0..threads).map(|_| done_rx.recv().unwrap()).sum();
                let per_thread = total / threads as u32;
                // Scaled back to `iters` spans.
                let d = per_thread.mul_f64(iters as f64 / spans as f64);
                samples
                    .lock()
                    .unwrap()
                    .push(d.as_nanos() as f64 / iters as f64);
                d
            })
        });
        drop(orders);
    });
    let note = case.finish(produced.load(Ordering::Relaxed));
    if !note.is_empty() {
        eprintln!("{group}/{name}: {note}");
    }
    let samples = samples.into_inner().unwrap();
    if samples.len() >= SAMPLES {
        // The last `SAMPLES` calls are criterion's samples; those before were its warm-up.
        let mut last = samples[samples.len() - SAMPLES..].to_vec();
        last.sort_by(f64::total_cmp);
        let median = (last[SAMPLES / 2 - 1] + last[SAMPLES / 2]) / 2.0;
        results
            .lock()
            .unwrap()
            .insert((group.to_owned(), name.to_owned()), median);
    }
}

fn group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(SAMPLES)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(1500))
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
        ("fastrace_local_prop", || {
            Box::new(Fastrace { property: true })
        }),
        ("registry_ringlayer", || {
            registry_ringlayer(Shape::One, false)
        }),
        ("registry_ringlayer_paused", || {
            registry_ringlayer(Shape::One, true)
        }),
        ("ring_subscriber", || ring_subscriber(Shape::One, false)),
        ("ring_subscriber_paused", || {
            ring_subscriber(Shape::One, true)
        }),
        ("floor_quanta_raw", || {
            Box::new(Floor {
                quanta: Some(quanta::Clock::new()),
            })
        }),
        ("floor_instant_now", || Box::new(Floor { quanta: None })),
    ]
}

// ---------------------------------------------------------------------------------------------
// The summary table.

fn row_label(name: &str) -> &str {
    match name {
        "no_subscriber" => "no subscriber",
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
        "floor_quanta_raw" => "floor: `quanta::Clock::raw()`",
        "floor_instant_now" => "floor: `Instant::now()`",
        other => other,
    }
}

fn print_tables(results: &Results) {
    print_peer_table(results);
    print_event_table(results);
}

/// Span + event, and the event alone: (span + event) − (span), each from the same configuration.
fn print_event_table(results: &Results) {
    let get = |g: &str, n: &str| results.get(&(g.to_owned(), n.to_owned())).copied();
    println!("\n## event: `info!` with one integer field inside the span (median ns)\n");
    println!("| configuration | span + event | span alone (`one_thread`) | event | event above registry + no-op's |");
    println!("|---|---:|---:|---:|---:|");
    let event = |n: &str| Some(get("event", n)? - get("one_thread", n)?);
    for (name, label) in [
        ("registry_noop", "registry + no-op layer"),
        ("registry_ringlayer", "registry + `RingLayer`"),
        ("ring_subscriber", "`RingSubscriber`"),
    ] {
        let ns = |x: Option<f64>| x.map_or("—".into(), |x| format!("{x:.1}"));
        let above = match (event(name), event("registry_noop")) {
            (Some(e), Some(b)) => format!("{:+.1}", e - b),
            _ => "—".into(),
        };
        println!(
            "| {label} | {} | {} | {} | {above} |",
            ns(get("event", name)),
            ns(get("one_thread", name)),
            ns(event(name))
        );
    }
}

fn print_peer_table(results: &Results) {
    let get = |g: &str, n: &str| results.get(&(g.to_owned(), n.to_owned())).copied();
    println!("\n## Results (median ns per span; per thread in `two_threads`)\n");
    println!("| configuration | 1 thread | vs no-op | vs otel | 2 threads (per thread) | vs no-op | vs otel | 2 thr / 1 thr |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let fmt_ratio = |x: Option<f64>, base: Option<f64>| match (x, base) {
        (Some(x), Some(b)) => format!("{:.2}× ({:+.1} ns)", x / b, x - b),
        _ => "—".into(),
    };
    let fmt_otel = |x: Option<f64>, otel: Option<f64>| match (x, otel) {
        (Some(x), Some(o)) => format!("{:.1}× cheaper", o / x),
        _ => "—".into(),
    };
    let ns = |x: Option<f64>| x.map_or("—".into(), |x| format!("{x:.1}"));
    for (name, _) in peer_cases() {
        let one = get("one_thread", name);
        let two = get("two_threads", name);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            row_label(name),
            ns(one),
            fmt_ratio(one, get("one_thread", "registry_noop")),
            fmt_otel(one, get("one_thread", "registry_otel")),
            ns(two),
            fmt_ratio(two, get("two_threads", "registry_noop")),
            fmt_otel(two, get("two_threads", "registry_otel")),
            match (one, two) {
                (Some(a), Some(b)) => format!("{:.2}×", b / a),
                _ => "—".into(),
            },
        );
    }
    for (g, what, keys) in [
        ("depth", "nested spans", ["1", "4", "16"].as_slice()),
        ("fields", "integer fields", ["0", "1", "4", "8"].as_slice()),
    ] {
        println!("\n## {g} sweep (median ns per span)\n");
        println!("| {what} | registry + no-op | registry + `RingLayer` | `RingLayer` above no-op | `RingSubscriber` |");
        println!("|---:|---:|---:|---:|---:|");
        for k in keys {
            let noop = get(g, &format!("registry_noop/{k}"));
            let ring = get(g, &format!("registry_ringlayer/{k}"));
            let standalone = get(g, &format!("ring_subscriber/{k}"));
            let diff = match (noop, ring) {
                (Some(n), Some(r)) => format!("{:+.1} ns ({:.2}×)", r - n, r / n),
                _ => "—".into(),
            };
            println!(
                "| {k} | {} | {} | {diff} | {} |",
                ns(noop),
                ns(ring),
                ns(standalone)
            );
        }
    }
}

fn main() {
    fastrace::set_reporter(
        DiscardReporter,
        fastrace::collector::Config::default().report_interval(Duration::from_millis(10)),
    );
    let mut c = Criterion::default().configure_from_args();
    let results = Mutex::new(Results::new());

    for (group_name, threads) in [("one_thread", 1), ("two_threads", 2)] {
        let mut g = group(&mut c, group_name);
        for (name, make) in peer_cases() {
            run_case(&mut g, &results, group_name, name, threads, BURST, make());
        }
        g.finish();
    }

    // The sweeps: registry + no-op layer, registry + `RingLayer`, `RingSubscriber`.
    let sweep_cases: [(&str, MakeShaped); 3] = [
        ("registry_noop", |shape, _| registry_noop(shape)),
        ("registry_ringlayer", registry_ringlayer),
        ("ring_subscriber", ring_subscriber),
    ];
    let mut g = group(&mut c, "depth");
    for depth in [1u64, 4, 16] {
        for (name, make) in sweep_cases {
            let id = format!("{name}/{depth}");
            run_case(
                &mut g,
                &results,
                "depth",
                &id,
                1,
                SWEEP_BURST,
                make(Shape::Depth(depth), false),
            );
        }
    }
    g.finish();

    let mut g = group(&mut c, "fields");
    for fields in [0u32, 1, 4, 8] {
        for (name, make) in sweep_cases {
            let id = format!("{name}/{fields}");
            run_case(
                &mut g,
                &results,
                "fields",
                &id,
                1,
                SWEEP_BURST,
                make(Shape::Fields(fields), false),
            );
        }
    }
    g.finish();

    let mut g = group(&mut c, "event");
    for (name, make) in sweep_cases {
        run_case(
            &mut g,
            &results,
            "event",
            name,
            1,
            BURST,
            make(Shape::Event, false),
        );
    }
    g.finish();

    c.final_summary();
    print_tables(&results.into_inner().unwrap());
}
