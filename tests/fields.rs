//! Field values: how they are packed into records (numbers six to a record, short strings two,
//! a first field in the header, long strings in chunks) and that every value comes back with its
//! name, in callsite order. Run against both collectors (`layer::` and `subscriber::`).

use ringtrace::{Builder, Guard, Value};
use tracing::Dispatch;

use crate::common::{collecting_with, for_both_collectors, Collector, Kept};

for_both_collectors!(
    recycled_strings_and_field_lists_carry_nothing_over,
    formatted_fields_of_every_length_round_trip,
    event_fields_keep_their_order_whichever_record_carries_them,
    first_number_fields_keep_their_names_values_and_order,
    numbers_travel_six_to_a_record_in_callsite_order,
    short_strings_travel_two_to_a_record_in_callsite_order,
);

/// A field list as a span or event keeps it.
type Fields = Vec<(&'static str, Value)>;
/// A span's name, fields, and its events' fields.
type NamedFields = (&'static str, Fields, Vec<Fields>);

/// `collector` with rings of `records` records whose sink keeps each span's name, fields, and
/// its events' fields.
fn keeping_fields(collector: Collector, records: usize) -> (Kept<NamedFields>, Dispatch, Guard) {
    let (seen, sink) = collecting_with(|d| -> NamedFields {
        (d.meta.name(), d.fields.clone(), d.events.iter().map(|e| e.fields.clone()).collect())
    });
    let (dispatch, guard) = collector.start(Builder::new().no_recording().ring_capacity(records).sink(sink));
    (seen, dispatch, guard)
}

/// The drain reuses the strings and field lists of exported spans and events for new ones: over
/// several exports, with strings short and long (chunked) and of every kind of field, each span
/// and event comes back with exactly its own values, nothing left over from an earlier one.
fn recycled_strings_and_field_lists_carry_nothing_over(collector: Collector) {
    let (seen, sink) = collecting_with(|d| {
        let event = d.events.first().map(|e| e.fields.clone()).unwrap_or_default();
        (d.fields.clone(), event)
    });
    let (dispatch, guard) = collector.start(Builder::new().no_recording().sink(sink));
    let handle = guard.handle();
    let text = |round: usize, i: usize| "ab".repeat((round * 7 + i * 13) % 300);
    tracing::dispatcher::with_default(&dispatch, || {
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

/// Debug (`?`) and Display (`%`) fields are formatted straight into the ring in chunks: every
/// length around the inline and chunk boundaries, and beyond the 4 KiB cap (cut on a character
/// boundary), comes back intact, on spans and on events (whose message is such a field).
fn formatted_fields_of_every_length_round_trip(collector: Collector) {
    let (seen, sink) = collecting_with(|d| -> (Fields, Vec<Fields>) {
        (d.fields.clone(), d.events.iter().map(|e| e.fields.clone()).collect())
    });
    let (dispatch, guard) = collector.start(Builder::new().node("n").daemon("d").no_recording().sink(sink));
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
    tracing::dispatcher::with_default(&dispatch, || {
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
        Some((_, Value::Str(s))) => s.clone(),
        other => panic!("field {name}: {other:?}"),
    };
    for n in lengths {
        let (fields, events) = seen
            .iter()
            .find(|(f, _)| f.iter().any(|(k, v)| *k == "n" && *v == Value::U64(n as u64)))
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
/// field, or a message that is not first, goes into a record after it. Names, values and order come
/// back the same either way.
fn event_fields_keep_their_order_whichever_record_carries_them(collector: Collector) {
    let (seen, sink) =
        collecting_with(|d| -> Vec<Fields> { d.events.iter().map(|e| e.fields.clone()).collect() });
    let (dispatch, guard) = collector.start(Builder::new().no_recording().sink(sink));
    tracing::dispatcher::with_default(&dispatch, || {
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

/// A span's first field, when it is a number or boolean, rides in the open record: whatever its
/// type and position in the callsite (a field left `Empty` is skipped), it comes back under its
/// own name with its value, before the fields that follow it.
fn first_number_fields_keep_their_names_values_and_order(collector: Collector) {
    let (seen, sink) = collecting_with(|d| (d.meta.name(), d.fields.clone()));
    let (dispatch, guard) = collector.start(Builder::new().node("n").daemon("d").no_recording().sink(sink));
    tracing::dispatcher::with_default(&dispatch, || {
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

/// Numbers and booleans after a span's first field travel six to a record: a span with thirteen
/// of them takes three records, so it fits a ring of eight (one record each, it would take
/// thirteen and be dropped). Interleaved strings, `Debug` values, events' numbers and later
/// updates keep every field's name, value and order (strings share records of their own, and
/// readers put the fields back in callsite order).
fn numbers_travel_six_to_a_record_in_callsite_order(collector: Collector) {
    let (seen, dispatch, guard) = keeping_fields(collector, 8);
    let handle = guard.handle();
    let flush = || handle.flush(std::time::Duration::from_secs(10)).unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
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
fn short_strings_travel_two_to_a_record_in_callsite_order(collector: Collector) {
    let (seen, dispatch, guard) = keeping_fields(collector, 4);
    let handle = guard.handle();
    let flush = || handle.flush(std::time::Duration::from_secs(10)).unwrap();
    let exactly_28 = "twenty-eight bytes, exactly.";
    let over_28 = "twenty-nine bytes, one over!!";
    assert_eq!((exactly_28.len(), over_28.len()), (28, 29));
    tracing::dispatcher::with_default(&dispatch, || {
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
