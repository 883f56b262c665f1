//! Capture: every span recorded with the right parents, exact loss accounting, pause, filters,
//! propagation and limits. One suite, run against both collectors (`layer::` and `subscriber::`);
//! the tests after it hold for one collector only.

use std::collections::HashMap;
use std::sync::Arc;

use crate::common::{
    collecting, collecting_with, for_both_collectors, pausing_disables_callsites, Collector, Seen,
};
use ringtrace::{Builder, SpanExt, Stats};
use tracing_subscriber::prelude::*;

for_both_collectors!(
    threads_record_every_span_with_its_parent,
    tiny_ring_counts_every_loss_exactly,
    nothing_is_recorded_while_paused,
    request_id_is_inherited_and_children_of_unrecorded_spans_reattach,
    remote_parent_joins_the_callers_trace,
    propagation_and_request_ids,
    dropping_the_guard_flushes_every_span,
    records_of_exited_threads_are_drained_and_their_rings_freed,
    head_sampling_is_decided_at_the_root_and_inherited,
    rings_of_exited_threads_are_reused_by_new_threads,
    the_nearest_request_id_wins,
    a_span_keeps_its_request_id_after_the_spans_above_it_close,
    tasks_of_many_requests_in_one_trace_keep_their_own_request_ids,
    events_beyond_the_per_span_limit_are_counted_not_kept,
    the_span_event_limit_is_configurable,
    spans_a_sink_fails_to_take_are_counted,
    spans_at_a_callsite_another_thread_is_still_registering_are_kept,
);

fn by_name<'a>(seen: &'a [Seen], name: &str) -> &'a Seen {
    seen.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no span {name}"))
}

fn threads_record_every_span_with_its_parent(collector: Collector) {
    const THREADS: u64 = 8;
    const PAIRS: u64 = 50_000; // two spans per iteration: 100,000 spans per thread
    let (store, sink) = collecting();
    let (dispatch, guard) = collector.start(
        Builder::new()
            .node("n")
            .daemon("d")
            .no_recording()
            .ring_capacity(1 << 19)
            // Completeness, not speed: a debug-build drain on a loaded machine needs time.
            .flush_timeout(std::time::Duration::from_secs(300))
            .sink(sink),
    );
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let dispatch = dispatch.clone();
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
                    for i in 0..PAIRS {
                        let outer = tracing::info_span!("outer", i = t * PAIRS + i);
                        let _o = outer.enter();
                        let _inner = tracing::info_span!("inner", i = t * PAIRS + i).entered();
                        tracing::info!("tick");
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
            assert_eq!(s.events, 1);
        } else {
            assert_eq!(s.parent, None);
        }
    }
    assert!(outers.values().all(|o| o.parent.is_none() && o.events == 0));
}

fn tiny_ring_counts_every_loss_exactly(collector: Collector) {
    // A ring of 16 drained every millisecond by four threads; one of 8, smaller than a span with
    // its chunked string, drained at the default interval by three.
    tiny_ring_counts_every_loss_exactly_with(collector, 16, 4, Some(std::time::Duration::from_millis(1)));
    tiny_ring_counts_every_loss_exactly_with(collector, 8, 3, None);
}

fn tiny_ring_counts_every_loss_exactly_with(
    collector: Collector,
    ring_capacity: usize,
    threads: u64,
    drain_interval: Option<std::time::Duration>,
) {
    const SPANS: u64 = 20_000;
    let (store, sink) = collecting();
    let mut builder = Builder::new().no_recording().ring_capacity(ring_capacity).sink(sink);
    if let Some(interval) = drain_interval {
        builder = builder.drain_interval(interval);
    }
    let (dispatch, guard) = collector.start(builder);
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let dispatch = dispatch.clone();
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
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
    let produced = threads * SPANS;
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

/// A subscriber whose `register_callsite` holds the registering thread, for the callsite named
/// `name`, until told to go on. Only a thread that asked to be held ([`HELD_HERE`]) is held:
/// `tracing` also asks every subscriber about every callsite when a test running beside this one
/// makes a collector or pauses one, and holding that thread too would leave one of the two
/// waiting for a second `go_on` that never comes.
struct HoldsRegistration {
    name: &'static str,
    holding: std::sync::Mutex<std::sync::mpsc::Sender<()>>,
    go_on: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

thread_local! {
    /// Whether [`HoldsRegistration`] holds this thread.
    static HELD_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl tracing::Subscriber for HoldsRegistration {
    fn register_callsite(&self, meta: &'static tracing::Metadata<'static>) -> tracing::subscriber::Interest {
        if meta.name() == self.name && HELD_HERE.with(std::cell::Cell::get) {
            self.holding.lock().unwrap().send(()).unwrap();
            self.go_on.lock().unwrap().recv().unwrap();
        }
        tracing::subscriber::Interest::always()
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// `tracing` registers a callsite with every collector on the first thread that reaches it; a
/// second thread reaching it meanwhile records at once. Here the first thread is held inside
/// another subscriber's registration (made first, so asked first) while the second records a
/// span there — whose field's value is computed by a function that logs an event first — and
/// the drain reads them: the span must be kept, with its field named, in the sink and in the
/// recording, as every later one is.
fn spans_at_a_callsite_another_thread_is_still_registering_are_kept(collector: Collector) {
    // One callsite per collector: each is registered once per process.
    // Its field's value is computed by a function that logs, between the callsite's `enabled`
    // and its record.
    fn site(collector: Collector) -> tracing::Span {
        match collector {
            Collector::Layer => tracing::info_span!("registering.layer", i = logs_and_returns_one()),
            Collector::Standalone => {
                tracing::info_span!("registering.subscriber", i = logs_and_returns_one())
            }
        }
    }
    fn logs_and_returns_one() -> u64 {
        inside();
        1
    }
    let name = match collector {
        Collector::Layer => "registering.layer",
        Collector::Standalone => "registering.subscriber",
    };
    let (holding_tx, holding) = std::sync::mpsc::channel();
    let (go_on, go_on_rx) = std::sync::mpsc::channel();
    let holder = tracing::Dispatch::new(HoldsRegistration {
        name,
        holding: std::sync::Mutex::new(holding_tx),
        go_on: std::sync::Mutex::new(go_on_rx),
    });
    let dir = std::env::temp_dir().join(format!("ringtrace-registering-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (store, sink) = collecting();
    let (dispatch, guard) = collector.start(Builder::new().recording_dir(&dir).sink(sink));
    // Registered now: while the registration is held, `tracing` cannot register another
    // callsite for as long as a collector made meanwhile (by a test running beside this one)
    // waits to be added to its list.
    fn inside() {
        tracing::info!(n = 1, "inside");
    }
    fn outer() -> tracing::Span {
        tracing::info_span!("outer")
    }
    inside();
    drop(outer());
    let registering = std::thread::spawn(move || {
        HELD_HERE.with(|held| held.set(true));
        tracing::dispatcher::with_default(&holder, || drop(site(collector)));
    });
    holding.recv().unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        let _outer = outer().entered();
        let _span = site(collector).entered();
        inside();
    });
    // The drain reads and assembles the records while the registration is still held.
    guard.flush().unwrap();
    go_on.send(()).unwrap();
    registering.join().unwrap();
    let stats = guard.shutdown().unwrap();
    // The outer span has the event logged while the field was computed; the span has the other.
    assert_eq!((stats.recorded_spans, stats.recorded_events, stats.orphan_records), (2, 2, 0), "{stats}");
    let seen = store.lock().unwrap();
    let span = by_name(&seen, name);
    assert_eq!((span.i, span.events, span.parent), (Some(1), 1, Some(by_name(&seen, "outer").span)));
    let data = ringtrace_analysis::read_inputs(&[&dir]).unwrap();
    assert_eq!(data.spans.len(), 2, "the recording keeps both spans");
    let span = data.spans.iter().find(|s| s.name == name).expect("the span in the recording");
    assert_eq!(span.events.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

fn nothing_is_recorded_while_paused(collector: Collector) {
    let (store, sink) = collecting();
    let (dispatch, guard) = collector.start(Builder::new().no_recording().sink(sink));
    let handle = guard.handle();
    tracing::dispatcher::with_default(&dispatch, || {
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

fn request_id_is_inherited_and_children_of_unrecorded_spans_reattach(collector: Collector) {
    let (store, sink) = collecting();
    let (dispatch, guard) =
        collector.start(Builder::new().no_recording().exclude_target("capture::noisy").sink(sink));
    tracing::dispatcher::with_default(&dispatch, || {
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

/// The context a caller in another process sent: its trace, its span and request id `req-remote`.
fn remote_caller() -> ringtrace::propagation::TraceContext {
    ringtrace::propagation::TraceContext {
        trace_id: ringtrace::TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
        span_id: ringtrace::SpanId::from_hex("00f067aa0ba902b7").unwrap(),
        sampled: true,
        request_id: Some("req-remote".into()),
    }
}

fn remote_parent_joins_the_callers_trace(collector: Collector) {
    let (store, sink) = collecting();
    let (dispatch, guard) = collector.start(Builder::new().no_recording().sink(sink));
    let remote = remote_caller();
    tracing::dispatcher::with_default(&dispatch, || {
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

fn propagation_and_request_ids(collector: Collector) {
    let (store, sink) = collecting();
    let (dispatch, guard) = collector.start(Builder::new().no_recording().sink(sink));
    let remote = remote_caller();
    tracing::dispatcher::with_default(&dispatch, || {
        {
            let _a = tracing::info_span!("local_root", request.id = "req-1").entered();
            let _b = tracing::info_span!("local_child").entered();
            let cx = ringtrace::current_context().unwrap();
            assert_eq!(cx.request_id.as_deref(), Some("req-1"));
            assert!(cx.sampled);
        }
        let serve = tracing::info_span!("serve");
        serve.set_remote_parent(&remote);
        let _s = serve.enter();
        let _c = tracing::info_span!("serve_child").entered();
        let cx = ringtrace::current_context().unwrap();
        assert_eq!(cx.trace_id, remote.trace_id);
        assert_eq!(cx.request_id.as_deref(), Some("req-remote"));
        assert_eq!(tracing::Span::current().metadata().map(|m| m.name()), Some("serve_child"));
    });
    guard.shutdown().unwrap();
    let seen = store.lock().unwrap();
    let child = by_name(&seen, "local_child");
    assert_eq!(child.request.as_deref(), Some("req-1"));
    assert_eq!(child.parent, Some(by_name(&seen, "local_root").span));
    let serve = by_name(&seen, "serve");
    assert_eq!(serve.parent, Some(remote.span_id));
    assert_eq!(serve.trace, remote.trace_id);
    let serve_child = by_name(&seen, "serve_child");
    assert_eq!(serve_child.parent, Some(serve.span));
    assert_eq!(serve_child.request.as_deref(), Some("req-remote"));
}

fn dropping_the_guard_flushes_every_span(collector: Collector) {
    let (store, sink) = collecting();
    let (dispatch, guard) = collector.start(Builder::new().no_recording().sink(sink));
    tracing::dispatcher::with_default(&dispatch, || {
        for i in 0..1000u64 {
            let _s = tracing::info_span!("s", i).entered();
        }
    });
    drop(guard);
    assert_eq!(store.lock().unwrap().len(), 1000);
}

fn records_of_exited_threads_are_drained_and_their_rings_freed(collector: Collector) {
    let (store, sink) = collecting();
    let (dispatch, guard) = collector.start(Builder::new().no_recording().sink(sink));
    let handles: Vec<_> = (0..6)
        .map(|t| {
            let dispatch = dispatch.clone();
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
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

fn head_sampling_is_decided_at_the_root_and_inherited(collector: Collector) {
    let (store, sink) = collecting();
    let (dispatch, guard) = collector
        .start(Builder::new().no_recording().sampler(ringtrace::Sampler::TraceIdRatio(0.5)).sink(sink));
    let sampled_remote = ringtrace::propagation::TraceContext {
        trace_id: ringtrace::TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
        span_id: ringtrace::SpanId::from_hex("00f067aa0ba902b7").unwrap(),
        sampled: true,
        request_id: None,
    };
    let unsampled_remote = ringtrace::propagation::TraceContext { sampled: false, ..sampled_remote.clone() };
    tracing::dispatcher::with_default(&dispatch, || {
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

/// With a recording too: the drain writes a pass's frames itself (the file system keeping up),
/// so the pass that reads an exited thread's last records also pools its ring.
fn rings_of_exited_threads_are_reused_by_new_threads(collector: Collector) {
    let dir = std::env::temp_dir().join(format!("ringtrace-reused-{collector:?}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (store, sink) = collecting();
    let (dispatch, guard) = collector.start(Builder::new().recording_dir(&dir).ring_capacity(64).sink(sink));
    for t in 0..40u64 {
        let dispatch = dispatch.clone();
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
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
    let data = ringtrace_analysis::read_inputs(&[&dir]).unwrap();
    assert_eq!(data.spans.len(), 40 * 6, "the recording keeps every span");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The context's request id is the nearest one at or above the current span: set by a field, by
/// `SpanExt::set_request_id` or by a remote parent, whichever is closest.
fn the_nearest_request_id_wins(collector: Collector) {
    let (dispatch, guard) = collector.start(Builder::new().no_recording());
    tracing::dispatcher::with_default(&dispatch, || {
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

/// A span that outlives the spans above it (a task a request spawned, still running after the
/// request's span closed) still sends the request's id downstream, as do the spans made under it
/// afterwards: the registry keeps closed parents open for their children; the standalone
/// subscriber keeps the request ids of closed spans for them. For each way a request id comes:
/// a `request.id` field, `SpanExt::set_request_id`, a remote parent.
fn a_span_keeps_its_request_id_after_the_spans_above_it_close(collector: Collector) {
    let (dispatch, guard) = collector.start(Builder::new().no_recording());
    tracing::dispatcher::with_default(&dispatch, || {
        for how in ["field", "api", "remote"] {
            let root = match how {
                "field" => tracing::info_span!("root", request.id = "req-field"),
                _ => tracing::info_span!("root"),
            };
            match how {
                "api" => root.set_request_id("req-api"),
                "remote" => root.set_remote_parent(&remote_caller()),
                _ => {}
            }
            let expected = match how {
                "field" => "req-field",
                "api" => "req-api",
                _ => "req-remote",
            };
            let handler = root.in_scope(|| tracing::info_span!("handler"));
            let task = handler.in_scope(|| tracing::info_span!("task"));
            // Another request's spans come and go meanwhile, on the same keys.
            drop((root, handler));
            for other in 0..3 {
                let span = tracing::info_span!("other", request.id = other);
                drop(span.in_scope(|| tracing::info_span!("other_child")));
            }
            let cx = task.trace_context().unwrap();
            assert_eq!(cx.request_id.as_deref(), Some(expected), "{collector:?}, {how}: the task");
            let later = task.in_scope(|| {
                assert_eq!(
                    ringtrace::current_context().unwrap().request_id.as_deref(),
                    Some(expected),
                    "{collector:?}, {how}: inside the task"
                );
                tracing::info_span!("later")
            });
            drop(task);
            let later_cx = later.trace_context().unwrap();
            assert_eq!(later_cx.request_id.as_deref(), Some(expected), "{collector:?}, {how}: made later");
            assert_eq!(later_cx.trace_id, cx.trace_id, "{collector:?}, {how}");
        }
    });
    guard.shutdown().unwrap();
}

/// A long-lived span (a consumer, a batch job) handles one message after another, each a span
/// with a request id of its own and a task that outlives it. The standalone subscriber gives
/// each message's span the key the one before freed, one generation on: every task must still
/// find its own message's id, not that of a later message whose span took the same key, in the
/// same trace.
fn tasks_of_many_requests_in_one_trace_keep_their_own_request_ids(collector: Collector) {
    const MESSAGES: u64 = 1_100;
    let (dispatch, guard) = collector.start(Builder::new().no_recording());
    tracing::dispatcher::with_default(&dispatch, || {
        let consumer = tracing::info_span!("consumer");
        let tasks: Vec<_> = (0..MESSAGES)
            .map(|m| {
                let message = consumer.in_scope(|| tracing::info_span!("message", request.id = m));
                message.in_scope(|| tracing::info_span!("task", m))
            })
            .collect();
        for (m, task) in tasks.iter().enumerate() {
            let cx = task.trace_context().unwrap();
            assert_eq!(cx.request_id, Some(m.to_string()), "{collector:?}: the task of message {m}");
        }
    });
    guard.shutdown().unwrap();
}

/// A span keeps at most `MAX_EVENTS_PER_SPAN` events (OpenTelemetry's default limit), plus a
/// first `ERROR` event so that its status still says error; the rest are counted on the span
/// (exported as `dropped_events_count`) and in the totals.
fn events_beyond_the_per_span_limit_are_counted_not_kept(collector: Collector) {
    let (seen, sink) = collecting_with(|d| {
        let error = d.events.iter().any(|e| *e.meta.level() == tracing::Level::ERROR);
        (d.events.len(), d.dropped_events, error)
    });
    let (dispatch, guard) = collector
        .start(Builder::new().node("n").daemon("d").no_recording().ring_capacity(1 << 14).sink(sink));
    tracing::dispatcher::with_default(&dispatch, || {
        let _span = tracing::info_span!("chatty").entered();
        for i in 0..300 {
            tracing::info!(i, "tick");
        }
        tracing::error!("failed");
        tracing::error!("failed again");
    });
    let stats = guard.shutdown().unwrap();
    let limit = ringtrace::MAX_EVENTS_PER_SPAN;
    assert_eq!(*seen.lock().unwrap(), vec![(limit + 1, (302 - limit - 1) as u32, true)]);
    assert_eq!(stats.recorded_events, limit as u64 + 1, "{stats}");
    assert_eq!(stats.events_over_limit, 302 - limit as u64 - 1, "{stats}");
    assert_eq!(stats.dropped_events, 0, "{stats}");
}

/// The per-span event limit follows `Builder::span_event_limit` (and `OTEL_SPAN_EVENT_COUNT_LIMIT`).
fn the_span_event_limit_is_configurable(collector: Collector) {
    let (seen, sink) = collecting_with(|d| (d.events.len(), d.dropped_events));
    let (dispatch, guard) =
        collector.start(Builder::new().node("n").daemon("d").no_recording().span_event_limit(3).sink(sink));
    tracing::dispatcher::with_default(&dispatch, || {
        let _span = tracing::info_span!("chatty").entered();
        for i in 0..5 {
            tracing::info!(i, "tick");
        }
        tracing::error!("failed");
    });
    let stats = guard.shutdown().unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![(4, 2)], "3 events, the error, 2 counted");
    assert_eq!(stats.events_over_limit, 2, "{stats}");
}

/// Spans a sink refuses are counted in the totals, not lost silently.
fn spans_a_sink_fails_to_take_are_counted(collector: Collector) {
    struct Refusing;
    impl ringtrace::Sink for Refusing {
        fn name(&self) -> &str {
            "refusing"
        }
        fn export(
            &mut self,
            _: &[ringtrace::SpanData],
            _: &ringtrace::ResourceInfo,
        ) -> Result<(), ringtrace::SinkError> {
            Err("disk full".into())
        }
    }
    let (dispatch, guard) =
        collector.start(Builder::new().node("n").daemon("d").no_recording().sink(Refusing));
    tracing::dispatcher::with_default(&dispatch, || {
        for i in 0..10u64 {
            drop(tracing::info_span!("s", i));
        }
    });
    let stats = guard.shutdown().unwrap();
    assert_eq!(stats.recorded_spans, 10, "{stats}");
    assert_eq!(stats.sink_failed_spans, 10, "{stats}");
    assert!(stats.lost_anything());
}

// The layer only: how it shares a registry with other layers and filters.

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

// The standalone subscriber only: its own level filter, span ids and callsite interest.

/// `max_level` filters the standalone subscriber's spans (the layer leaves levels to its
/// registry); pausing skips spans, and a span's clone keeps it open for a child on another thread.
#[test]
fn handles_levels_pause_and_cross_thread_parents() {
    let (store, sink) = collecting();
    let (subscriber, guard) = Builder::new().no_recording().sink(sink).build_subscriber().unwrap();
    let handle = guard.handle();
    let dispatch = tracing::Dispatch::new(subscriber);
    tracing::dispatcher::with_default(&dispatch, || {
        let root = tracing::info_span!("root");
        let clone = root.clone();
        {
            let _r = root.enter();
            let _d = tracing::debug_span!("debug_is_filtered").entered();
            let _leaf = tracing::info_span!("leaf").entered();
        }
        // The span stays open while a clone lives.
        drop(root);
        let worker_dispatch = dispatch.clone();
        std::thread::scope(|s| {
            s.spawn(|| {
                tracing::dispatcher::with_default(&worker_dispatch, || {
                    let _w = tracing::info_span!(parent: &clone, "on_other_thread").entered();
                })
            });
        });
        handle.pause();
        {
            let _p = tracing::info_span!("paused").entered();
            let _pc = tracing::info_span!("paused_child").entered();
        }
        handle.resume();
        drop(clone);
    });
    guard.shutdown().unwrap();
    let seen = store.lock().unwrap();
    let names: Vec<_> = seen.iter().map(|s| s.name).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    let root = by_name(&seen, "root");
    assert_eq!(by_name(&seen, "leaf").parent, Some(root.span), "the filtered debug span is skipped");
    let other = by_name(&seen, "on_other_thread");
    assert_eq!(other.parent, Some(root.span));
    assert_eq!(other.trace, root.trace);
    assert_ne!(other.thread, root.thread);
    assert!(!root.unclosed);
}

#[test]
fn the_standalone_subscriber_works_behind_an_arc() {
    let (_store, sink) = collecting();
    let (subscriber, guard) = Builder::new().no_recording().sink(sink).build_subscriber().unwrap();
    let subscriber: Arc<dyn tracing::Subscriber + Send + Sync> = Arc::new(subscriber);
    tracing::subscriber::with_default(subscriber, || {
        let _s = tracing::info_span!("shared").entered();
    });
    assert_eq!(guard.shutdown().unwrap().recorded_spans, 1);
}

/// The standalone subscriber's span ids are its own table keys (the layer's are the registry's).
#[test]
fn a_stale_id_of_a_closed_span_reaches_no_live_span() {
    use tracing::Subscriber as _;
    let (_store, sink) = collecting();
    let (subscriber, guard) = Builder::new().no_recording().sink(sink).build_subscriber().unwrap();
    let dispatch = tracing::Dispatch::new(subscriber);
    tracing::dispatcher::with_default(&dispatch, || {
        let first = tracing::info_span!("first");
        let stale = first.id().unwrap();
        drop(first);
        // The next span on this thread reuses the closed span's table slot...
        let second = tracing::info_span!("second");
        let live = second.id().unwrap();
        assert_ne!(stale, live, "a reused key carries a new generation");
        // ...so a stale id finds nothing: cloning it does not keep `second` open.
        let ring = dispatch.downcast_ref::<ringtrace::RingSubscriber>().unwrap();
        assert!(!ring.try_close(stale.clone()));
        assert_eq!(dispatch.clone_span(&stale), stale);
        drop(second);
    });
    let stats = guard.shutdown().unwrap();
    assert_eq!(stats.recorded_spans, 2);
    assert_eq!(stats.unclosed_spans, 0, "the stale clone must not have kept `second` open");
}

/// Pausing disables the standalone subscriber's callsites (a paused `info_span!` is
/// `Span::none()`, as for a disabled callsite); resuming enables them again; a span open across
/// the pause still records its close. (The layer does so only as a sole layer, tested above.)
#[test]
fn pausing_disables_callsites_and_resuming_enables_them() {
    let (store, sink) = collecting();
    let (subscriber, guard) = Builder::new().no_recording().sink(sink).build_subscriber().unwrap();
    pausing_disables_callsites(subscriber, guard, &store);
}
