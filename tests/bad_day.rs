//! The bad day: thousands of threads, spans dropped under overload, two collectors sharing a
//! directory, panics. Each test runs against both collectors (the layer in a registry and the
//! standalone subscriber) where both apply.

use std::collections::HashMap;

use ringtrace::{Builder, Guard, SpanData, Value};
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

use crate::common::{collecting_with, Kept};

#[derive(Debug, Clone, Copy)]
enum Collector {
    Layer,
    Standalone,
}

const BOTH: [Collector; 2] = [Collector::Layer, Collector::Standalone];

fn start(collector: Collector, builder: Builder) -> (Dispatch, Guard) {
    match collector {
        Collector::Layer => {
            let (layer, guard) = builder.build().unwrap();
            (Dispatch::new(tracing_subscriber::registry().with(layer)), guard)
        }
        Collector::Standalone => {
            let (subscriber, guard) = builder.build_subscriber().unwrap();
            (Dispatch::new(subscriber), guard)
        }
    }
}

fn number(v: Option<&Value>) -> Option<u64> {
    match v {
        Some(Value::U64(v)) => Some(*v),
        Some(Value::I64(v)) => u64::try_from(*v).ok(),
        _ => None,
    }
}

/// What the tests check of a span: its ids, its `t` (thread) and `d` (depth) fields, and the
/// `t`/`d` fields of each of its events.
#[derive(Debug, Clone)]
struct Kept3 {
    span: ringtrace::SpanId,
    parent: Option<ringtrace::SpanId>,
    name: &'static str,
    t: Option<u64>,
    d: Option<u64>,
    events: Vec<(Option<u64>, Option<u64>)>,
}

fn keep(s: &SpanData) -> Kept3 {
    let field = |fields: &[(&'static str, Value)], name: &str| {
        number(fields.iter().find(|(k, _)| *k == name).map(|(_, v)| v))
    };
    Kept3 {
        span: s.span_id,
        parent: s.parent_span_id,
        name: s.meta.name(),
        t: field(&s.fields, "t"),
        d: field(&s.fields, "d"),
        events: s.events.iter().map(|e| (field(&e.fields, "t"), field(&e.fields, "d"))).collect(),
    }
}

/// Three nested spans, each with an event naming its thread and depth.
fn nested(t: u64) {
    let _a = tracing::info_span!("nested", t, d = 0u64).entered();
    tracing::info!(t, d = 0u64, "at depth 0");
    let _b = tracing::info_span!("nested", t, d = 1u64).entered();
    tracing::info!(t, d = 1u64, "at depth 1");
    let _c = tracing::info_span!("nested", t, d = 2u64).entered();
    tracing::info!(t, d = 2u64, "at depth 2");
}

/// 5,000 threads come and go while the first thread holds a span open whose key a thread past
/// the 1,024th once reused (the standalone subscriber's keys put a thread's number at bit 40, so
/// it spilled into the table's generation bits). Every span must keep its own parent and events.
#[test]
fn five_thousand_threads_keep_every_parent_and_event() {
    const THREADS: u64 = 5_000;
    const WAVE: u64 = 8;
    for collector in BOTH {
        let (store, sink): (Kept<Kept3>, _) = collecting_with(keep);
        let (dispatch, guard) = start(collector, Builder::new().no_recording().ring_capacity(256).sink(sink));
        tracing::dispatcher::with_default(&dispatch, || {
            // This thread records first: its first key, closed and reused, is the one a later
            // thread once took again while the span below was still open.
            drop(tracing::info_span!("first", t = THREADS).entered());
            let holder = tracing::info_span!("holder", t = THREADS, d = 0u64).entered();
            for wave in 0..THREADS / WAVE {
                let handles: Vec<_> = (0..WAVE)
                    .map(|i| {
                        let dispatch = dispatch.clone();
                        std::thread::spawn(move || {
                            tracing::dispatcher::with_default(&dispatch, || nested(wave * WAVE + i))
                        })
                    })
                    .collect();
                for h in handles {
                    h.join().unwrap();
                }
            }
            tracing::info!(t = THREADS, d = 0u64, "still holding");
            let _child = tracing::info_span!("held_child", t = THREADS, d = 1u64).entered();
            tracing::info!(t = THREADS, d = 1u64, "inside the held child");
            drop(holder);
        });
        let stats = guard.shutdown().unwrap();
        assert_eq!((stats.dropped_spans, stats.dropped_events), (0, 0), "{collector:?}: {stats}");
        let spans = store.lock().unwrap();
        assert_eq!(spans.len() as u64, THREADS * 3 + 3, "{collector:?}");
        let by_id: HashMap<_, _> = spans.iter().map(|s| (s.span, s)).collect();
        assert_eq!(by_id.len(), spans.len(), "{collector:?}: span ids are unique");
        for s in spans.iter().filter(|s| s.name != "first") {
            let (t, d) = (s.t.unwrap(), s.d.unwrap());
            match d {
                0 => assert_eq!(s.parent, None, "{collector:?}: {s:?}"),
                _ => {
                    let parent =
                        by_id[&s.parent.unwrap_or_else(|| panic!("{collector:?}: {s:?} lost its parent"))];
                    assert_eq!((parent.t, parent.d), (Some(t), Some(d - 1)), "{collector:?}: {s:?}");
                }
            }
            assert_eq!(s.events, [(Some(t), Some(d))], "{collector:?}: {s:?}");
        }
    }
}

/// A span dropped because the open-span table is full takes its events and child spans with it,
/// all counted; none lands on an ancestor.
#[test]
fn what_happens_inside_a_dropped_span_is_dropped_and_counted() {
    // The smallest table holds 16 open spans, so the 17th nested one is dropped.
    const FIT: usize = 16;
    for collector in BOTH {
        let (store, sink): (Kept<Kept3>, _) = collecting_with(keep);
        let (dispatch, guard) =
            start(collector, Builder::new().no_recording().max_open_spans(FIT).sink(sink));
        tracing::dispatcher::with_default(&dispatch, || {
            let open: Vec<_> = (0..FIT as u64).map(|d| tracing::info_span!("fits", d).entered()).collect();
            {
                let dropped = tracing::info_span!("dropped", d = FIT as u64).entered();
                for _ in 0..3 {
                    tracing::info!("inside the dropped span");
                }
                let child = tracing::info_span!("child_of_dropped").entered();
                tracing::info!("inside its child");
                tracing::info!(parent: child.id(), "explicitly inside its child");
                drop(child);
                tracing::info!(parent: dropped.id(), "explicitly inside the dropped span");
            }
            tracing::info!("inside the innermost span that fits");
            drop(open);
        });
        let stats = guard.shutdown().unwrap();
        assert_eq!(stats.dropped_spans, 2, "{collector:?}: the span and its child; {stats}");
        assert_eq!(stats.dropped_events, 6, "{collector:?}: every event inside them; {stats}");
        let spans = store.lock().unwrap();
        assert_eq!(spans.len(), FIT, "{collector:?}");
        let innermost = spans.iter().find(|s| s.d == Some(FIT as u64 - 1)).unwrap();
        assert_eq!(innermost.events.len(), 1, "{collector:?}: only its own event");
        assert!(spans.iter().filter(|s| s.d != Some(FIT as u64 - 1)).all(|s| s.events.is_empty()));
    }
}
