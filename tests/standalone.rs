//! The standalone `RingSubscriber` (no registry): the same guarantees as the layer.

use std::collections::HashMap;
use std::sync::Arc;

use crate::common::{collecting, collecting_with, pausing_disables_callsites, Kept, Seen};
use ringtrace::{Builder, SpanExt};

fn by_name<'a>(seen: &'a [Seen], name: &str) -> &'a Seen {
    seen.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no span {name}"))
}

#[test]
fn threads_record_every_span_with_its_parent() {
    const THREADS: u64 = 4;
    const PAIRS: u64 = 20_000;
    let (store, sink) = collecting();
    let (subscriber, guard) = Builder::new()
        .no_recording()
        .ring_capacity(1 << 18)
        .flush_timeout(std::time::Duration::from_secs(300))
        .sink(sink)
        .build_subscriber()
        .unwrap();
    let dispatch = tracing::Dispatch::new(subscriber);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let dispatch = dispatch.clone();
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
                    for i in 0..PAIRS {
                        let _o = tracing::info_span!("outer", i = t * PAIRS + i).entered();
                        let _n = tracing::info_span!("inner", i = t * PAIRS + i).entered();
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
    let outers: HashMap<u64, &Seen> =
        seen.iter().filter(|s| s.name == "outer").map(|s| (s.i.unwrap(), s)).collect();
    for s in seen.iter().filter(|s| s.name == "inner") {
        let outer = outers[&s.i.unwrap()];
        assert_eq!(s.parent, Some(outer.span));
        assert_eq!(s.trace, outer.trace);
        assert_eq!(s.events, 1);
    }
    assert!(outers.values().all(|o| o.parent.is_none() && o.events == 0));
}

#[test]
fn tiny_ring_counts_every_loss_exactly() {
    let (store, sink) = collecting();
    let (subscriber, guard) =
        Builder::new().no_recording().ring_capacity(8).sink(sink).build_subscriber().unwrap();
    let dispatch = tracing::Dispatch::new(subscriber);
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let dispatch = dispatch.clone();
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
                    for i in 0..5_000u64 {
                        let _a = tracing::info_span!("a", i).entered();
                        let _b = tracing::info_span!("b", text = "longer than twenty-two bytes, in chunks")
                            .entered();
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
    assert!(stats.dropped_spans > 0, "{stats}");
    assert_eq!(stats.recorded_spans + stats.dropped_spans, 30_000, "{stats}");
    assert_eq!(seen.len() as u64, stats.recorded_spans);
    assert_eq!(seen.iter().filter(|s| s.unclosed).count() as u64, stats.dropped_closes);
}

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
fn propagation_and_request_ids() {
    let (store, sink) = collecting();
    let (subscriber, guard) = Builder::new().no_recording().sink(sink).build_subscriber().unwrap();
    let remote = ringtrace::propagation::TraceContext {
        trace_id: ringtrace::TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
        span_id: ringtrace::SpanId::from_hex("00f067aa0ba902b7").unwrap(),
        sampled: true,
        request_id: Some("req-remote".into()),
    };
    tracing::subscriber::with_default(subscriber, || {
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

/// Debug (`?`) and Display (`%`) fields are formatted straight into the ring in chunks: every
/// length around the inline and chunk boundaries, and beyond the 4 KiB cap (cut on a character
/// boundary), comes back intact, on spans and on events (whose message is such a field).
#[test]
fn formatted_fields_of_every_length_round_trip() {
    let (seen, sink) = collecting_with(|d| -> (Fields, Vec<Fields>) {
        (d.fields.clone(), d.events.iter().map(|e| e.fields.clone()).collect())
    });
    let (subscriber, guard) =
        Builder::new().node("n").daemon("d").no_recording().sink(sink).build_subscriber().unwrap();
    let lengths = [0usize, 1, 21, 22, 23, 27, 28, 29, 47, 48, 49, 95, 96, 97, 4095, 4096, 4097, 9000];
    let text = |n: usize| -> String {
        "aé€"
            .chars()
            .cycle()
            .scan(0, |len, c| {
                *len += c.len_utf8();
                (*len <= n).then_some(c)
            })
            .collect()
    };
    tracing::subscriber::with_default(subscriber, || {
        for &n in &lengths {
            let t = text(n);
            let _span = tracing::info_span!("s", n, d = ?t, p = %t).entered();
            tracing::info!(d = ?t, "{t}");
        }
    });
    guard.shutdown().unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), lengths.len());
    let str_of = |fields: &Fields, name: &str| match fields.iter().find(|(k, _)| *k == name) {
        Some((_, ringtrace::Value::Str(s))) => s.clone(),
        other => panic!("field {name}: {other:?}"),
    };
    for n in lengths {
        let (fields, events) = seen
            .iter()
            .find(|(f, _)| f.iter().any(|(k, v)| *k == "n" && *v == ringtrace::Value::U64(n as u64)))
            .expect("every span recorded");
        let t = text(n);
        // Debug of a string quotes it; the cap applies to the formatted text.
        let debug = format!("{t:?}");
        let capped = |s: &str| ringtrace_core::record::truncate_str(s, 4096).to_owned();
        assert_eq!(str_of(fields, "d"), capped(&debug), "span ?field of length {n}");
        assert_eq!(str_of(fields, "p"), capped(&t), "span %field of length {n}");
        assert_eq!(events.len(), 1);
        assert_eq!(str_of(&events[0], "d"), capped(&debug), "event ?field of length {n}");
        assert_eq!(str_of(&events[0], "message"), capped(&t), "event message of length {n}");
        let names: Vec<_> = events[0].iter().map(|(k, _)| *k).collect();
        assert_eq!(names, ["message", "d"], "callsite order, length {n}");
    }
}

/// An event's first field rides in the event record when it is a short string; any other first
/// field, or a message that is not first, keeps its own record. Names, values and order come
/// back the same either way.
#[test]
fn event_fields_keep_their_order_whichever_record_carries_them() {
    use ringtrace::Value;
    let (seen, sink) =
        collecting_with(|d| -> Vec<Fields> { d.events.iter().map(|e| e.fields.clone()).collect() });
    let (subscriber, guard) = Builder::new().no_recording().sink(sink).build_subscriber().unwrap();
    tracing::subscriber::with_default(subscriber, || {
        let _span = tracing::info_span!("s").entered();
        tracing::info!("short");
        tracing::info!(n = 7u64, "short with a number");
        tracing::event!(tracing::Level::INFO, n = 1u64, message = "late");
        tracing::info!(first = ?"dbg", n = 2u64);
        tracing::info!(first = "a str", n = 3u64);
        tracing::info!(n = 4u64);
    });
    guard.shutdown().unwrap();
    let seen = seen.lock().unwrap();
    let s = |v: &str| Value::Str(v.into());
    assert_eq!(
        seen[0],
        vec![
            vec![("message", s("short"))],
            vec![("message", s("short with a number")), ("n", Value::U64(7))],
            vec![("n", Value::U64(1)), ("message", s("late"))],
            vec![("first", s("\"dbg\"")), ("n", Value::U64(2))],
            vec![("first", s("a str")), ("n", Value::U64(3))],
            vec![("n", Value::U64(4))],
        ]
    );
}

/// Pausing disables the standalone subscriber's callsites (a paused `info_span!` is
/// `Span::none()`, as for a disabled callsite); resuming enables them again; a span open across
/// the pause still records its close.
#[test]
fn pausing_disables_callsites_and_resuming_enables_them() {
    let (store, sink) = collecting();
    let (subscriber, guard) = Builder::new().no_recording().sink(sink).build_subscriber().unwrap();
    pausing_disables_callsites(subscriber, guard, &store);
}

/// A span's first field, when it is a number or boolean, rides in the open record: whatever its
/// type and position in the callsite (a field left `Empty` is skipped), it comes back under its
/// own name with its value, before the fields that follow it.
#[test]
fn first_number_fields_keep_their_names_values_and_order() {
    use ringtrace::Value;
    let (seen, sink) = collecting_with(|d| (d.meta.name(), d.fields.clone()));
    let (subscriber, guard) =
        Builder::new().node("n").daemon("d").no_recording().sink(sink).build_subscriber().unwrap();
    tracing::subscriber::with_default(subscriber, || {
        drop(tracing::info_span!("i64", a = -7i64, b = 2u64));
        drop(tracing::info_span!("f64", a = 0.5f64, s = "x"));
        drop(tracing::info_span!("bool", a = true));
        drop(tracing::info_span!("string_first", s = "y", a = 9u64));
        let later = tracing::info_span!("empty_first", a = tracing::field::Empty, b = u64::MAX);
        later.record("a", 3i64);
        drop(later);
    });
    guard.shutdown().unwrap();
    let seen = seen.lock().unwrap();
    let fields = |name: &str| seen.iter().find(|(n, _)| *n == name).map(|(_, f)| f.clone()).unwrap();
    assert_eq!(fields("i64"), vec![("a", Value::I64(-7)), ("b", Value::U64(2))]);
    assert_eq!(fields("f64"), vec![("a", Value::F64(0.5)), ("s", Value::Str("x".into()))]);
    assert_eq!(fields("bool"), vec![("a", Value::Bool(true))]);
    assert_eq!(fields("string_first"), vec![("s", Value::Str("y".into())), ("a", Value::U64(9))]);
    assert_eq!(fields("empty_first"), vec![("b", Value::U64(u64::MAX)), ("a", Value::I64(3))]);
}

/// A field list as a span or event keeps it.
type Fields = Vec<(&'static str, ringtrace::Value)>;
/// A span's name, fields, and its events' fields.
type NamedFields = (&'static str, Fields, Vec<Fields>);

/// A standalone subscriber with rings of `records` records whose sink keeps each span's name,
/// fields, and its events' fields.
fn keeping_fields(records: usize) -> (Kept<NamedFields>, ringtrace::RingSubscriber, ringtrace::Guard) {
    let (seen, sink) = collecting_with(|d| -> NamedFields {
        (d.meta.name(), d.fields.clone(), d.events.iter().map(|e| e.fields.clone()).collect())
    });
    let (subscriber, guard) =
        Builder::new().no_recording().ring_capacity(records).sink(sink).build_subscriber().unwrap();
    (seen, subscriber, guard)
}

/// Numbers and booleans after a span's first field travel six to a record: a span with thirteen
/// of them takes three records, so it fits a ring of eight (one record each, it would take
/// thirteen and be dropped). Interleaved strings, `Debug` values, events' numbers and later
/// updates keep every field's name, value and order (a string between numbers starts a new
/// record of numbers after it).
#[test]
fn numbers_travel_six_to_a_record_in_callsite_order() {
    use ringtrace::Value;
    let (seen, subscriber, guard) = keeping_fields(8);
    let handle = guard.handle();
    let flush = || handle.flush(std::time::Duration::from_secs(10)).unwrap();
    tracing::subscriber::with_default(subscriber, || {
        #[rustfmt::skip]
        let thirteen = tracing::info_span!("thirteen",
            a = 0u64, b = 1u64, c = 2u64, d = 3u64, e = 4u64, f = 5u64, g = 6u64,
            h = 7u64, i = 8u64, j = 9u64, k = 10u64, l = 11u64, m = 12u64);
        drop(thirteen);
        flush();
        let span = tracing::info_span!(
            "mixed",
            a = 1i64,
            b = true,
            s = "text",
            c = 2.5f64,
            d = ?(3, 4),
            e = 5u64,
            later = tracing::field::Empty
        );
        flush();
        span.in_scope(|| tracing::info!(x = 1u64, y = false, z = -3i64, "event"));
        flush();
        span.record("later", 6u64);
        drop(span);
    });
    let stats = guard.shutdown().unwrap();
    assert_eq!((stats.recorded_spans, stats.dropped_spans, stats.dropped_events), (2, 0, 0), "{stats}");
    let seen = seen.lock().unwrap();
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"];
    let thirteen: Fields = names.iter().zip(0u64..).map(|(n, v)| (*n, Value::U64(v))).collect();
    assert_eq!(seen[0], ("thirteen", thirteen, vec![]));
    let s = |v: &str| Value::Str(v.into());
    let mixed = vec![
        ("a", Value::I64(1)),
        ("b", Value::Bool(true)),
        ("s", s("text")),
        ("c", Value::F64(2.5)),
        ("d", s("(3, 4)")),
        ("e", Value::U64(5)),
        ("later", Value::U64(6)),
    ];
    let event =
        vec![("message", s("event")), ("x", Value::U64(1)), ("y", Value::Bool(false)), ("z", Value::I64(-3))];
    assert_eq!(seen[1], ("mixed", mixed, vec![event]));
}

/// Strings of at most 28 bytes (given as `&str`, `Display` or `Debug`) travel two to a record: a
/// span with six takes four records, so it fits a ring of four (one record each, it would take
/// seven and be dropped). Longer strings keep their field and chunk records, in order.
#[test]
fn short_strings_travel_two_to_a_record_in_callsite_order() {
    use ringtrace::Value;
    let (seen, subscriber, guard) = keeping_fields(4);
    let handle = guard.handle();
    let flush = || handle.flush(std::time::Duration::from_secs(10)).unwrap();
    let exactly_28 = "twenty-eight bytes, exactly.";
    let over_28 = "twenty-nine bytes, one over!!";
    assert_eq!((exactly_28.len(), over_28.len()), (28, 29));
    tracing::subscriber::with_default(subscriber, || {
        #[rustfmt::skip]
        let six = tracing::info_span!("six",
            a = "x", b = %"display", c = ?"dbg", d = exactly_28, e = "", f = %'é');
        flush();
        drop(six);
        flush();
        let long = tracing::info_span!("long", a = %over_28, c = "z");
        flush();
        long.in_scope(|| tracing::info!(s = "short", t = %exactly_28, "an event"));
        flush();
        drop(long);
    });
    let stats = guard.shutdown().unwrap();
    assert_eq!((stats.recorded_spans, stats.dropped_spans, stats.dropped_events), (2, 0, 0), "{stats}");
    let seen = seen.lock().unwrap();
    let s = |v: &str| Value::Str(v.into());
    let six = vec![
        ("a", s("x")),
        ("b", s("display")),
        ("c", s("\"dbg\"")),
        ("d", s(exactly_28)),
        ("e", s("")),
        ("f", s("é")),
    ];
    assert_eq!(seen[0], ("six", six, vec![]));
    let long = vec![("a", s(over_28)), ("c", s("z"))];
    let event = vec![("message", s("an event")), ("s", s("short")), ("t", s(exactly_28))];
    assert_eq!(seen[1], ("long", long, vec![event]));
}

/// A span keeps at most `MAX_EVENTS_PER_SPAN` events (OpenTelemetry's default limit), plus a
/// first `ERROR` event so that its status still says error; the rest are counted on the span
/// (exported as `dropped_events_count`) and in the totals.
#[test]
fn events_beyond_the_per_span_limit_are_counted_not_kept() {
    let (seen, sink) = collecting_with(|d| {
        let error = d.events.iter().any(|e| *e.meta.level() == tracing::Level::ERROR);
        (d.events.len(), d.dropped_events, error)
    });
    let (subscriber, guard) = Builder::new()
        .node("n")
        .daemon("d")
        .no_recording()
        .ring_capacity(1 << 14)
        .sink(sink)
        .build_subscriber()
        .unwrap();
    tracing::subscriber::with_default(subscriber, || {
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
#[test]
fn the_span_event_limit_is_configurable() {
    let (seen, sink) = collecting_with(|d| (d.events.len(), d.dropped_events));
    let (subscriber, guard) = Builder::new()
        .node("n")
        .daemon("d")
        .no_recording()
        .span_event_limit(3)
        .sink(sink)
        .build_subscriber()
        .unwrap();
    tracing::subscriber::with_default(subscriber, || {
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
#[test]
fn spans_a_sink_fails_to_take_are_counted() {
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
    let (subscriber, guard) =
        Builder::new().node("n").daemon("d").no_recording().sink(Refusing).build_subscriber().unwrap();
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..10u64 {
            drop(tracing::info_span!("s", i));
        }
    });
    let stats = guard.shutdown().unwrap();
    assert_eq!(stats.recorded_spans, 10, "{stats}");
    assert_eq!(stats.sink_failed_spans, 10, "{stats}");
    assert!(stats.lost_anything());
}
