//! Per-span cost: `info_span!` with one integer field, enter, exit, drop — on one thread.
//!
//! Configurations, interleaved in one process:
//! - `no_subscriber`: `tracing` with no subscriber (the floor);
//! - `null_subscriber`: a `Subscriber` that only hands out span ids — `tracing`'s own cost of
//!   dispatching a span to a subscriber of its own, the floor under `ring_subscriber`;
//! - `registry`: a bare registry (note: with no layer it never frees span slots);
//! - `registry_noop_layer`: the registry plus a layer that does nothing (the baseline);
//! - `floor_subscriber` / `registry_floor_layer`: the least any span recorder must do (two clock
//!   reads, the fields, an open and a close record in a buffer that stays in L1; no ids, no
//!   table, no reader), as a subscriber of its own and as a layer: lower bounds for
//!   `ring_subscriber` and `registry_ringlayer` (`ringtrace_test_support::subscribers`);
//! - `registry_ringlayer`: the registry plus ringtrace's `RingLayer` with its drain thread
//!   running on the other core and the default ring capacity;
//! - `registry_ringlayer_paused`: the same, paused;
//! - `registry_envfilter_ringlayer` / `registry_targets_ringlayer`: what `ringtrace::init()`
//!   installed with the default `info` level, as an `EnvFilter` (first) and as a `Targets`
//!   filter (later, for directives without span or field parts); `..._paused`: the latter
//!   paused, which disables its callsites (a sole layer, as `init()` installs a layer);
//! - `ring_subscriber`: ringtrace's standalone subscriber (no registry), recording: what
//!   `init()` installs now for directives without span or field parts (its levels per target
//!   are decided per callsite, so a span costs the same as under a maximum level);
//! - `ring_subscriber_paused`: the same, paused;
//! - `ring_subscriber_disabled`: a `debug_span!` under the standalone subscriber's default
//!   `INFO` maximum — a callsite filtered out once, at registration.
//!
//! With `SPAN_COST_GLOBAL=<configuration>` set (`null_subscriber`, `registry_noop_layer`,
//! `registry_ringlayer`, `ring_subscriber`), the bench measures that one configuration installed
//! as the global default, as `init()` installs its stack, instead (group `span_cost_global`).
//!
//! Every configuration is timed the same way: bursts of `BURST` spans, each burst timed alone.
//! Between bursts (outside the timed region) the ring-layer runs wait for the drain thread to
//! empty the ring, so every timed span is really recorded: the bench asserts nothing was dropped
//! (a dropped span is cheaper than a recorded one, and a tight loop outruns any drain).
//! Sustained throughput, where the drain must keep up, is a separate question.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use tracing_subscriber::prelude::*;

use ringtrace_test_support::spans::one_span;
use ringtrace_test_support::subscribers::{FloorLayer, FloorSubscriber, NoopLayer, NullSubscriber};

/// Spans per timed burst; the ring (`RING` records, two per span: the open record carries the
/// integer field, then the close) holds a whole burst.
const BURST: u64 = 4096;
const RING: usize = 1 << 15;

/// Times `iters` spans in bursts, calling `between` after each burst, untimed.
fn bursts(iters: u64, mut between: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    let mut i = 0u64;
    while done < iters {
        let n = BURST.min(iters - done);
        let start = Instant::now();
        for _ in 0..n {
            i += 1;
            one_span(i);
        }
        total += start.elapsed();
        done += n;
        between();
    }
    total
}

fn one_debug_span(i: u64) {
    let span = tracing::debug_span!("work", i);
    let _e = span.enter();
    black_box(&span);
}

fn span_cost(c: &mut Criterion) {
    if let Ok(config) = std::env::var(GLOBAL_ENV) {
        return span_cost_global(c, &config);
    }
    let mut g = c.benchmark_group("span_cost");
    g.bench_function("no_subscriber", |b| b.iter_custom(|iters| bursts(iters, || {})));
    g.bench_function("null_subscriber", |b| {
        let dispatch = tracing::Dispatch::new(NullSubscriber::default());
        tracing::dispatcher::with_default(&dispatch, || b.iter_custom(|iters| bursts(iters, || {})))
    });
    g.bench_function("registry", |b| {
        let sub = tracing_subscriber::registry();
        tracing::subscriber::with_default(sub, || b.iter_custom(|iters| bursts(iters, || {})))
    });
    g.bench_function("registry_noop_layer", |b| {
        let sub = tracing_subscriber::registry().with(NoopLayer);
        tracing::subscriber::with_default(sub, || b.iter_custom(|iters| bursts(iters, || {})))
    });
    g.bench_function("floor_subscriber", |b| {
        let dispatch = tracing::Dispatch::new(FloorSubscriber::default());
        tracing::dispatcher::with_default(&dispatch, || b.iter_custom(|iters| bursts(iters, || {})))
    });
    g.bench_function("registry_floor_layer", |b| {
        let sub = tracing_subscriber::registry().with(FloorLayer::default());
        tracing::subscriber::with_default(sub, || b.iter_custom(|iters| bursts(iters, || {})))
    });
    // `init()`'s stacks before it installed the standalone subscriber for target-and-level
    // directives: first with `EnvFilter`, then with `Targets`.
    let env_filter = || tracing_subscriber::EnvFilter::new("info");
    let targets = || tracing_subscriber::filter::Targets::new().with_default(tracing::Level::INFO);
    for (name, stack, paused) in [
        ("registry_ringlayer", Stack::Layer, false),
        ("registry_ringlayer_paused", Stack::Layer, true),
        ("registry_envfilter_ringlayer", Stack::EnvFilterLayer, false),
        ("registry_targets_ringlayer", Stack::TargetsLayer, false),
        ("registry_targets_ringlayer_paused", Stack::TargetsLayer, true),
        ("ring_subscriber", Stack::Standalone, false),
        ("ring_subscriber_paused", Stack::Standalone, true),
    ] {
        let builder =
            ringtrace::Builder::new().node("bench").daemon("bench").no_recording().ring_capacity(RING);
        let (dispatch, guard) = if stack == Stack::Standalone {
            let (subscriber, guard) = builder.build_subscriber().unwrap();
            (tracing::Dispatch::new(subscriber), guard)
        } else {
            // `init()` installs a sole layer: pausing it disables the callsites.
            let (layer, guard) = builder.sole_layer(stack == Stack::TargetsLayer).build().unwrap();
            let registry = tracing_subscriber::registry();
            let dispatch = match stack {
                Stack::EnvFilterLayer => tracing::Dispatch::new(registry.with(env_filter()).with(layer)),
                Stack::TargetsLayer => tracing::Dispatch::new(registry.with(targets()).with(layer)),
                _ => tracing::Dispatch::new(registry.with(layer)),
            };
            (dispatch, guard)
        };
        let handle = guard.handle();
        if paused {
            handle.pause();
        }
        g.bench_function(name, |b| {
            tracing::dispatcher::with_default(&dispatch, || {
                b.iter_custom(|iters| {
                    bursts(iters, || {
                        handle.flush(Duration::from_secs(10)).unwrap();
                    })
                })
            })
        });
        let stats = guard.shutdown().unwrap();
        eprintln!("{name}: {stats}");
        assert_eq!(stats.dropped_spans, 0, "{name} dropped spans: {stats}");
    }
    let (subscriber, guard) =
        ringtrace::Builder::new().node("bench").daemon("bench").no_recording().build_subscriber().unwrap();
    let dispatch = tracing::Dispatch::new(subscriber);
    g.bench_function("ring_subscriber_disabled", |b| {
        tracing::dispatcher::with_default(&dispatch, || {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for i in 0..iters {
                    one_debug_span(i);
                }
                start.elapsed()
            })
        })
    });
    assert_eq!(guard.shutdown().unwrap().recorded_spans, 0, "a disabled callsite records nothing");
    g.finish();
}

/// Set to a configuration's name, the bench measures that one configuration installed as the
/// global default subscriber instead of the interleaved set.
const GLOBAL_ENV: &str = "SPAN_COST_GLOBAL";

/// One configuration as the process's global default, the way `init()` and `init_subscriber()`
/// install it. A scoped dispatcher (`with_default`, which the interleaved runs need) makes every
/// span clone and drop an `Arc` of the subscriber; the global one is a plain reference.
fn span_cost_global(c: &mut Criterion, config: &str) {
    let builder =
        || ringtrace::Builder::new().node("bench").daemon("bench").no_recording().ring_capacity(RING);
    let (dispatch, guard) = match config {
        "null_subscriber" => (tracing::Dispatch::new(NullSubscriber::default()), None),
        "registry_noop_layer" => {
            (tracing::Dispatch::new(tracing_subscriber::registry().with(NoopLayer)), None)
        }
        "registry_ringlayer" => {
            let (layer, guard) = builder().build().unwrap();
            (tracing::Dispatch::new(tracing_subscriber::registry().with(layer)), Some(guard))
        }
        "ring_subscriber" => {
            let (subscriber, guard) = builder().build_subscriber().unwrap();
            (tracing::Dispatch::new(subscriber), Some(guard))
        }
        other => panic!(
            "{GLOBAL_ENV}={other:?}: not a configuration \
             (null_subscriber, registry_noop_layer, registry_ringlayer, ring_subscriber)"
        ),
    };
    tracing::dispatcher::set_global_default(dispatch).unwrap();
    let handle = guard.as_ref().map(|g| g.handle());
    let mut g = c.benchmark_group("span_cost_global");
    g.bench_function(config, |b| {
        b.iter_custom(|iters| {
            bursts(iters, || {
                if let Some(h) = &handle {
                    h.flush(Duration::from_secs(10)).unwrap();
                }
            })
        })
    });
    g.finish();
    if let Some(guard) = guard {
        let stats = guard.shutdown().unwrap();
        assert_eq!(stats.dropped_spans, 0, "{config} dropped spans: {stats}");
    }
}

/// What a configuration installs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stack {
    /// registry + `RingLayer`
    Layer,
    /// registry + `EnvFilter("info")` + `RingLayer`
    EnvFilterLayer,
    /// registry + `Targets(info)` + `RingLayer`
    TargetsLayer,
    /// `RingSubscriber`
    Standalone,
}

criterion_group!(benches, span_cost);
criterion_main!(benches);
