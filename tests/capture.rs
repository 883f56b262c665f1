//! Capture: every span recorded with the right parents, exact loss accounting, pause, filters.

use std::collections::HashMap;
use std::sync::Arc;

use crate::common::{collecting, collecting_with, pausing_disables_callsites, Seen};
use ringtrace::{Builder, Stats};
use tracing_subscriber::prelude::*;

fn run<R>(layer: ringtrace::RingLayer, f: impl FnOnce() -> R) -> R {
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, f)
}

#[test]
fn eight_threads_record_every_span_with_its_parent() {
    const THREADS: u64 = 8;
    const PAIRS: u64 = 50_000; // two spans per iteration: 100,000 spans per thread
    let (store, sink) = collecting();
    let (layer, guard) = Builder::new()
        .node("n")
        .daemon("d")
        .no_recording()
        .ring_capacity(1 << 19)
        // Completeness, not speed: a debug-build drain on a loaded machine needs time.
        .flush_timeout(std::time::Duration::from_secs(300))
        .sink(sink)
        .build()
        .unwrap();
    let subscriber = Arc::new(tracing_subscriber::registry().with(layer));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let subscriber = subscriber.clone();
            std::thread::spawn(move || {
                tracing::subscriber::with_default(subscriber, || {
                    for i in 0..PAIRS {
                        let outer = tracing::info_span!("outer", i = t * PAIRS + i);
                        let _o = outer.enter();
                        let _inner = tracing::info_span!("inner", i = t * PAIRS + i).entered();
                    }
                })
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let stats = guard.shutdown().unwrap();
    let seen = store.lock().unwrap();
    assert_eq!(stats.dropped_spans, 0, "{stats}");
    assert_eq!(seen.len() as u64, THREADS * PAIRS * 2);
    assert_eq!(stats.recorded_spans, THREADS * PAIRS * 2);
    let outers: HashMap<u64, &Seen> =
        seen.iter().filter(|s| s.name == "outer").map(|s| (s.i.unwrap(), s)).collect();
    assert_eq!(outers.len() as u64, THREADS * PAIRS);
    let mut ids = std::collections::HashSet::new();
    for s in seen.iter() {
        assert!(ids.insert(s.span), "duplicate span id {:?}", s.span);
        assert!(!s.unclosed);
        if s.name == "inner" {
            let outer = outers[&s.i.unwrap()];
            assert_eq!(s.parent, Some(outer.span), "inner {} has the wrong parent", s.i.unwrap());
            assert_eq!(s.trace, outer.trace);
            assert_eq!(s.thread, outer.thread);
        } else {
            assert_eq!(s.parent, None);
        }
    }
}

#[test]
fn tiny_ring_counts_every_loss_exactly() {
    const THREADS: u64 = 4;
    const SPANS: u64 = 20_000;
    let (store, sink) = collecting();
    let (layer, guard) = Builder::new()
        .no_recording()
        .ring_capacity(16)
        .drain_interval(std::time::Duration::from_millis(1))
        .sink(sink)
        .build()
        .unwrap();
    let subscriber = Arc::new(tracing_subscriber::registry().with(layer));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let subscriber = subscriber.clone();
            std::thread::spawn(move || {
                tracing::subscriber::with_default(subscriber, || {
                    for i in 0..SPANS / 2 {
                        let _a = tracing::info_span!("a", i).entered();
                        tracing::info!(n = i, "inside");
                        let _b = tracing::info_span!("b", name = "a string longer than twenty-two bytes")
                            .entered();
                    }
                })
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let stats: Stats = guard.shutdown().unwrap();
    let seen = store.lock().unwrap();
    let produced = THREADS * SPANS;
    assert!(stats.dropped_spans > 0, "the ring was never full: {stats}");
    assert_eq!(seen.len() as u64, stats.recorded_spans);
    assert_eq!(stats.recorded_spans + stats.dropped_spans, produced, "{stats}");
    let unclosed = seen.iter().filter(|s| s.unclosed).count() as u64;
    assert_eq!(unclosed, stats.unclosed_spans);
    assert_eq!(unclosed, stats.dropped_closes, "{stats}");
    let events: u64 = seen.iter().map(|s| s.events as u64).sum();
    assert_eq!(events, stats.recorded_events);
    // Every event is either recorded or counted, whether or not its span was recorded.
    assert_eq!(events + stats.dropped_events + stats.orphan_records, produced / 2, "{stats}");
}

#[test]
fn nothing_is_recorded_while_paused() {
    let (store, sink) = collecting();
    let (layer, guard) = Builder::new().no_recording().sink(sink).build().unwrap();
    let handle = guard.handle();
    run(layer, || {
        let _before = tracing::info_span!("before").entered();
        handle.pause();
        assert!(handle.is_paused());
        for _ in 0..100 {
            let _s = tracing::info_span!("paused").entered();
            tracing::info!("paused event");
        }
        handle.resume();
        let _after = tracing::info_span!("after").entered();
        tracing::info!("after event");
    });
    guard.shutdown().unwrap();
    let seen = store.lock().unwrap();
    let names: Vec<_> = seen.iter().map(|s| s.name).collect();
    assert!(!names.contains(&"paused"), "{names:?}");
    assert_eq!(names.len(), 2, "{names:?}");
    let after = seen.iter().find(|s| s.name == "after").unwrap();
    let before = seen.iter().find(|s| s.name == "before").unwrap();
    assert_eq!(after.parent, Some(before.span));
    assert_eq!(after.events, 1);
    assert_eq!(before.events, 0);
}

/// A sole layer (as `init()` installs it) disables its callsites while paused, like the standalone
/// subscriber; spans open across the pause still close, and resuming enables the callsites again.
#[test]
fn a_sole_layer_disables_callsites_while_paused() {
    let (store, sink) = collecting();
    let (layer, guard) = Builder::new().no_recording().sink(sink).sole_layer(true).build().unwrap();
    let targets = tracing_subscriber::filter::Targets::new().with_default(tracing::Level::INFO);
    pausing_disables_callsites(tracing_subscriber::registry().with(targets).with(layer), guard, &store);
}

/// A layer that shares the registry with others (the default) leaves callsites alone while
/// paused: the other layers go on seeing every span and event.
#[test]
fn a_paused_layer_does_not_silence_other_layers() {
    #[derive(Clone, Default)]
    struct Count(Arc<std::sync::atomic::AtomicUsize>);
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Count {
        fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let count = Count::default();
    let (layer, guard) = Builder::new().no_recording().build().unwrap();
    let handle = guard.handle();
    handle.pause();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer).with(count.clone()), || {
        let span = tracing::info_span!("work");
        assert!(!span.is_disabled(), "the other layer still gets spans");
        span.in_scope(|| tracing::info!("seen by the other layer"));
    });
    assert_eq!(count.0.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(guard.shutdown().unwrap().recorded_spans, 0);
}

#[test]
fn request_id_is_inherited_and_children_of_unrecorded_spans_reattach() {
    let (store, sink) = collecting();
    let (layer, guard) =
        Builder::new().no_recording().exclude_target("capture::noisy").sink(sink).build().unwrap();
    run(layer, || {
        let _root = tracing::info_span!("root", request.id = "req-9").entered();
        let _noisy = tracing::info_span!(target: "capture::noisy", "noisy").entered();
        let _leaf = tracing::info_span!("leaf").entered();
    });
    guard.shutdown().unwrap();
    let seen = store.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let root = seen.iter().find(|s| s.name == "root").unwrap();
    let leaf = seen.iter().find(|s| s.name == "leaf").unwrap();
    assert_eq!(leaf.parent, Some(root.span), "excluded span's child attaches to the grandparent");
    assert_eq!(leaf.request.as_deref(), Some("req-9"));
    assert_eq!(root.request.as_deref(), Some("req-9"));
}

#[test]
fn composes_with_fmt_and_a_per_layer_env_filter() {
    let (store, sink) = collecting();
    let (layer, guard) = Builder::new().no_recording().sink(sink).build().unwrap();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink))
        .with(layer.with_filter(tracing_subscriber::EnvFilter::new("info")));
    let cx = tracing::subscriber::with_default(subscriber, || {
        let _a = tracing::info_span!("kept", request.id = "r1").entered();
        let _b = tracing::debug_span!("filtered").entered();
        let _c = tracing::info_span!("kept_child").entered();
        ringtrace::current_context()
    });
    guard.shutdown().unwrap();
    let seen = store.lock().unwrap();
    let names: Vec<_> = seen.iter().map(|s| s.name).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let kept = seen.iter().find(|s| s.name == "kept").unwrap();
    let child = seen.iter().find(|s| s.name == "kept_child").unwrap();
    assert_eq!(child.parent, Some(kept.span));
    let cx = cx.expect("context of the current span");
    assert_eq!(cx.span_id, child.span);
    assert_eq!(cx.trace_id, kept.trace);
    assert_eq!(cx.request_id.as_deref(), Some("r1"));
}

#[test]
fn remote_parent_joins_the_callers_trace() {
    use ringtrace::SpanExt;
    let (store, sink) = collecting();
    let (layer, guard) = Builder::new().no_recording().sink(sink).build().unwrap();
    let remote = ringtrace::propagation::TraceContext {
        trace_id: ringtrace::TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
        span_id: ringtrace::SpanId::from_hex("00f067aa0ba902b7").unwrap(),
        sampled: true,
        request_id: Some("req-remote".into()),
    };
    run(layer, || {
        let serve = tracing::info_span!("serve", otel.kind = "server");
        serve.set_remote_parent(&remote);
        let _e = serve.enter();
        let _child = tracing::info_span!("child").entered();
        let cx = ringtrace::current_context().unwrap();
        assert_eq!(cx.trace_id, remote.trace_id);
        assert_eq!(cx.request_id.as_deref(), Some("req-remote"));
    });
    guard.shutdown().unwrap();
    let seen = store.lock().unwrap();
    let serve = seen.iter().find(|s| s.name == "serve").unwrap();
    let child = seen.iter().find(|s| s.name == "child").unwrap();
    assert_eq!(serve.trace, remote.trace_id);
    assert_eq!(serve.parent, Some(remote.span_id));
    assert_eq!(child.trace, remote.trace_id);
    assert_eq!(child.parent, Some(serve.span));
    assert_eq!(child.request.as_deref(), Some("req-remote"));
}

#[test]
fn dropping_the_guard_flushes_every_span() {
    let (store, sink) = collecting();
    let (layer, guard) = Builder::new().no_recording().sink(sink).build().unwrap();
    run(layer, || {
        for i in 0..1000u64 {
            let _s = tracing::info_span!("s", i).entered();
        }
    });
    drop(guard);
    assert_eq!(store.lock().unwrap().len(), 1000);
}

#[test]
fn records_of_exited_threads_are_drained_and_their_rings_freed() {
    let (store, sink) = collecting();
    let (layer, guard) = Builder::new().no_recording().sink(sink).build().unwrap();
    let subscriber = Arc::new(tracing_subscriber::registry().with(layer));
    let handles: Vec<_> = (0..6)
        .map(|t| {
            let subscriber = subscriber.clone();
            std::thread::spawn(move || {
                tracing::subscriber::with_default(subscriber, || {
                    for i in 0..500u64 {
                        let _s = tracing::info_span!("work", i = t * 1000 + i).entered();
                    }
                })
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // The threads are gone; their records are still drained, then their rings are freed.
    let stats = guard.flush().unwrap();
    assert_eq!(stats.recorded_spans, 3000);
    assert_eq!(stats.threads, 6);
    assert_eq!(stats.rings_in_use, 0, "{stats:?}");
    assert_eq!(store.lock().unwrap().len(), 3000);
    drop(guard);
}

#[test]
fn head_sampling_is_decided_at_the_root_and_inherited() {
    use ringtrace::SpanExt;
    let (store, sink) = collecting();
    let (layer, guard) = Builder::new()
        .no_recording()
        .sampler(ringtrace::Sampler::TraceIdRatio(0.5))
        .sink(sink)
        .build()
        .unwrap();
    let sampled_remote = ringtrace::propagation::TraceContext {
        trace_id: ringtrace::TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
        span_id: ringtrace::SpanId::from_hex("00f067aa0ba902b7").unwrap(),
        sampled: true,
        request_id: None,
    };
    let unsampled_remote = ringtrace::propagation::TraceContext { sampled: false, ..sampled_remote.clone() };
    run(layer, || {
        for i in 0..400u64 {
            let _root = tracing::info_span!("root", i).entered();
            let _child = tracing::info_span!("child", i).entered();
            tracing::info!("event");
        }
        // A remote parent's decision wins over the local one, both ways.
        for (name, cx) in [("remote_yes", &sampled_remote), ("remote_no", &unsampled_remote)] {
            for _ in 0..20 {
                let s = tracing::info_span!("serve", otel.name = name);
                s.set_remote_parent(cx);
                let _e = s.enter();
                let _c = tracing::info_span!("under_remote").entered();
                assert_eq!(ringtrace::current_context().unwrap().sampled, cx.sampled);
            }
        }
    });
    let stats = guard.shutdown().unwrap();
    let seen = store.lock().unwrap();
    let roots: HashMap<u64, &Seen> =
        seen.iter().filter(|s| s.name == "root").map(|s| (s.i.unwrap(), s)).collect();
    let children: HashMap<u64, &Seen> =
        seen.iter().filter(|s| s.name == "child").map(|s| (s.i.unwrap(), s)).collect();
    assert!(roots.len() > 100 && roots.len() < 300, "about half the traces: {}", roots.len());
    assert_eq!(roots.keys().collect::<std::collections::BTreeSet<_>>(), children.keys().collect());
    for (i, c) in &children {
        assert_eq!(c.parent, Some(roots[i].span));
        assert_eq!(c.events, 1);
    }
    assert_eq!(stats.sampled_out, 400 - roots.len() as u64 + 20, "{stats:?}");
    assert_eq!(stats.dropped_spans, 0);
    let remote_spans = seen.iter().filter(|s| s.trace == sampled_remote.trace_id).count();
    assert_eq!(remote_spans, 20 * 2, "every span under the sampled remote parent, none under the other");
}

#[test]
fn rings_of_exited_threads_are_reused_by_new_threads() {
    let (store, sink) = collecting();
    let (layer, guard) = Builder::new().no_recording().ring_capacity(64).sink(sink).build().unwrap();
    let subscriber = Arc::new(tracing_subscriber::registry().with(layer));
    for t in 0..40u64 {
        let subscriber = subscriber.clone();
        std::thread::spawn(move || {
            tracing::subscriber::with_default(subscriber, || {
                let _root = tracing::info_span!("root", i = t).entered();
                for _ in 0..5 {
                    let _child = tracing::info_span!("child", i = t).entered();
                }
            })
        })
        .join()
        .unwrap();
        // The drain reads the exited thread's ring, then pools it for the next thread.
        let stats = guard.flush().unwrap();
        assert_eq!(stats.rings_in_use, 0, "{stats:?}");
    }
    let stats = guard.shutdown().unwrap();
    assert_eq!(stats.threads, 40);
    assert_eq!(stats.dropped_spans, 0);
    let seen = store.lock().unwrap();
    assert_eq!(seen.len(), 40 * 6);
    for t in 0..40 {
        let root = seen.iter().find(|s| s.name == "root" && s.i == Some(t)).unwrap();
        let children: Vec<_> = seen.iter().filter(|s| s.name == "child" && s.i == Some(t)).collect();
        assert_eq!(children.len(), 5);
        assert!(children.iter().all(|c| c.parent == Some(root.span) && c.trace == root.trace));
    }
}

/// The context's request id is the nearest one at or above the current span: set by a field, by
/// `SpanExt::set_request_id` or by a remote parent, whichever is closest.
#[test]
fn the_nearest_request_id_wins() {
    use ringtrace::SpanExt;
    let (layer, guard) = Builder::new().no_recording().build().unwrap();
    run(layer, || {
        let _root = tracing::info_span!("root", request.id = "outer").entered();
        {
            let mid = tracing::info_span!("mid");
            mid.set_request_id("inner");
            let _m = mid.enter();
            let _leaf = tracing::info_span!("leaf").entered();
            assert_eq!(ringtrace::current_context().unwrap().request_id.as_deref(), Some("inner"));
        }
        let _sibling = tracing::info_span!("sibling").entered();
        assert_eq!(ringtrace::current_context().unwrap().request_id.as_deref(), Some("outer"));
        let plain = tracing::info_span!(parent: None, "unrelated");
        assert_eq!(plain.trace_context().unwrap().request_id, None);
    });
    guard.shutdown().unwrap();
}

/// The drain reuses the strings and field lists of exported spans and events for new ones: over
/// several exports, with strings short and long (chunked) and of every kind of field, each span
/// and event comes back with exactly its own values, nothing left over from an earlier one.
#[test]
fn recycled_strings_and_field_lists_carry_nothing_over() {
    use ringtrace::Value;
    let (seen, sink) = collecting_with(|d| {
        let event = d.events.first().map(|e| e.fields.clone()).unwrap_or_default();
        (d.fields.clone(), event)
    });
    let (layer, guard) = Builder::new().no_recording().sink(sink).build().unwrap();
    let handle = guard.handle();
    let text = |round: usize, i: usize| "ab".repeat((round * 7 + i * 13) % 300);
    run(layer, || {
        for round in 0..4 {
            for i in 0..500 {
                let t = text(round, i);
                let span = tracing::info_span!("s", n = i as u64, text = t.as_str(), shown = %i);
                span.in_scope(|| tracing::info!(note = t.as_str(), "e{i}"));
            }
            handle.flush(std::time::Duration::from_secs(10)).unwrap();
        }
    });
    guard.shutdown().unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2000);
    for (k, (fields, event)) in seen.iter().enumerate() {
        let (round, i) = (k / 500, k % 500);
        let t = text(round, i);
        assert_eq!(
            fields,
            &vec![
                ("n", Value::U64(i as u64)),
                ("text", Value::Str(t.clone())),
                ("shown", Value::Str(i.to_string()))
            ],
            "span {k}"
        );
        assert_eq!(
            event,
            &vec![("message", Value::Str(format!("e{i}"))), ("note", Value::Str(t))],
            "event {k}"
        );
    }
}
