//! The bad day: thousands of threads, spans dropped under overload, two collectors sharing a
//! directory, panics. Each test runs against both collectors (the layer in a registry and the
//! standalone subscriber) where both apply.

use std::collections::HashMap;

use ringtrace::{Builder, Guard, SpanData, Value};
use tracing::Dispatch;

use crate::common::{collecting_with, Collector, Kept, BOTH};

fn start(collector: Collector, builder: Builder) -> (Dispatch, Guard) {
    collector.start(builder)
}

fn number(v: Option<&Value>) -> Option<u64> {
    match v {
        Some(Value::U64(v)) => Some(*v),
        Some(Value::I64(v)) => u64::try_from(*v).ok(),
        _ => None,
    }
}

/// The value of field `name` among `fields`.
fn field_of<'a>(fields: &'a [(&'static str, Value)], name: &str) -> Option<&'a Value> {
    fields.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
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
    let field = |fields: &[(&'static str, Value)], name: &str| number(field_of(fields, name));
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

/// Events inside a dropped span land on the nearest recorded ancestor; with none, they are
/// counted as dropped instead of vanishing.
#[test]
fn events_inside_a_dropped_span_are_recorded_above_it_or_counted() {
    // The smallest table holds 16 open spans: another thread keeps them open meanwhile, so every
    // span this thread opens is dropped.
    const FIT: u64 = 16;
    for collector in BOTH {
        let (store, sink): (Kept<Kept3>, _) = collecting_with(keep);
        let (dispatch, guard) =
            start(collector, Builder::new().no_recording().max_open_spans(FIT as usize).sink(sink));
        let (full, done) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                tracing::dispatcher::with_default(&dispatch, || {
                    let open: Vec<_> = (0..FIT).map(|d| tracing::info_span!("fits", d).entered()).collect();
                    full.wait();
                    done.wait();
                    tracing::info!(d = FIT - 1, "inside the innermost span that fits");
                    drop(open);
                })
            });
            full.wait();
            tracing::dispatcher::with_default(&dispatch, || {
                let dropped = tracing::info_span!("dropped_root").entered();
                for _ in 0..3 {
                    tracing::info!("inside the dropped root");
                }
                let child = tracing::info_span!("child_of_dropped").entered();
                tracing::info!("inside its child");
                tracing::info!(parent: child.id(), "explicitly inside its child");
                drop(child);
                tracing::info!(parent: dropped.id(), "explicitly inside the dropped root");
            });
            done.wait();
        });
        let stats = guard.shutdown().unwrap();
        assert_eq!(stats.dropped_spans, 2, "{collector:?}: the root and its child; {stats}");
        assert_eq!(stats.dropped_events, 6, "{collector:?}: every event inside them; {stats}");
        let spans = store.lock().unwrap();
        assert_eq!(spans.len() as u64, FIT, "{collector:?}");
        let events: Vec<_> = spans.iter().flat_map(|s| &s.events).collect();
        assert_eq!(events, [&(None, Some(FIT - 1))], "{collector:?}: only the other thread's event");
    }
}

/// Inside a span dropped because the open-span table was full, the current context is that of the
/// nearest recorded span above it, under either collector: what is sent downstream from there
/// stays in its trace.
#[test]
fn inside_a_dropped_span_the_current_context_is_the_nearest_recorded_one() {
    // The smallest table holds 16 open spans: the 16th, `outer`, fills it.
    const FIT: usize = 16;
    for collector in BOTH {
        let (dispatch, guard) = start(collector, Builder::new().no_recording().max_open_spans(FIT));
        tracing::dispatcher::with_default(&dispatch, || {
            let _fillers: Vec<_> = (1..FIT).map(|d| tracing::info_span!("filler", d).entered()).collect();
            let outer = tracing::info_span!("outer").entered();
            let outer_cx = ringtrace::current_context().expect("outer is recorded");
            let _dropped = tracing::info_span!("dropped").entered();
            let cx = ringtrace::current_context().expect("a recorded span above");
            assert_eq!((cx.trace_id, cx.span_id), (outer_cx.trace_id, outer_cx.span_id), "{collector:?}");
            drop(_dropped);
            drop(outer);
        });
        let stats = guard.shutdown().unwrap();
        assert_eq!(stats.dropped_spans, 1, "{collector:?}: the span past the table's room; {stats}");
    }
}

/// A span dropped for want of ring room stands for the nearest recorded span above it, under
/// either collector: its handle gives that span's context, and what is made inside it on another
/// thread (a span with it as explicit parent, a span and an event inside it entered there) hangs
/// under that span, in its trace, even after that span's own handle is gone (the dropped span
/// keeps it open, as the registry does); values recorded on it count as dropped updates, and
/// nothing links to it. Before, the standalone subscriber gave the dropped span's handle no
/// context, and a span made with it as parent started a trace of its own.
#[test]
fn a_span_dropped_for_want_of_ring_room_stands_for_the_recorded_span_above_it() {
    use ringtrace::SpanExt;
    const ROUNDS: u64 = 4;
    // Each thread's ring holds 32 records: a few for each recorded span, never the dropped
    // span's 2,000-byte string. The drain runs only when the test flushes.
    let long = "m".repeat(2_000);
    for collector in BOTH {
        let (store, sink): (Kept<SpanData>, _) = collecting_with(SpanData::clone);
        let builder = Builder::new()
            .no_recording()
            .ring_capacity(32)
            .drain_interval(std::time::Duration::from_secs(3600));
        let (dispatch, guard) = start(collector, builder.sink(sink));
        let handle = guard.handle();
        let mut contexts = Vec::new();
        tracing::dispatcher::with_default(&dispatch, || {
            for round in 0..ROUNDS {
                handle.flush(std::time::Duration::from_secs(10)).unwrap();
                let root = tracing::info_span!("root", round);
                let middle = root.in_scope(|| tracing::info_span!("middle", round, s = long.as_str()));
                contexts.push((root.trace_context(), middle.trace_context()));
                middle.record("s", "lost with the span");
                let linked = tracing::info_span!(parent: None, "linked", round);
                linked.follows_from(&middle);
                drop(linked);
                // The root's last handle goes first: the dropped span keeps it open.
                drop(root);
                std::thread::scope(|s| {
                    s.spawn(|| {
                        tracing::dispatcher::with_default(&dispatch, || {
                            drop(tracing::info_span!(parent: &middle, "explicit_child", round));
                            let _inside = middle.enter();
                            assert_eq!(
                                tracing::Span::current().metadata().map(|m| m.name()),
                                Some("middle"),
                                "{collector:?}: the current span is the dropped one"
                            );
                            drop(tracing::info_span!("entered_child", round));
                            tracing::info!(round, "inside the dropped span");
                        })
                    });
                });
            }
        });
        let stats = guard.shutdown().unwrap();
        assert_eq!(stats.dropped_spans, ROUNDS, "{collector:?}: the middle spans; {stats}");
        assert_eq!(stats.recorded_spans, 4 * ROUNDS, "{collector:?}: {stats}");
        assert_eq!((stats.orphan_records, stats.unclosed_spans), (0, 0), "{collector:?}: {stats}");
        assert_eq!(stats.dropped_events, 0, "{collector:?}: {stats}");
        assert_eq!(
            stats.dropped_updates, ROUNDS,
            "{collector:?}: the values recorded on the middle spans; {stats}"
        );
        let spans = store.lock().unwrap();
        for (round, (root_cx, middle_cx)) in (0..ROUNDS).zip(contexts) {
            let find = |name: &str| {
                spans
                    .iter()
                    .find(|s| s.meta.name() == name && number(s.field("round")) == Some(round))
                    .unwrap_or_else(|| panic!("{collector:?}, round {round}: no {name} span"))
            };
            let root = find("root");
            let (root_cx, middle_cx) = (root_cx.expect("root is recorded"), middle_cx);
            assert_eq!((root_cx.trace_id, root_cx.span_id), (root.trace_id, root.span_id));
            let middle_cx =
                middle_cx.unwrap_or_else(|| panic!("{collector:?}: the dropped span gave no context"));
            assert_eq!(
                (middle_cx.trace_id, middle_cx.span_id, middle_cx.sampled),
                (root.trace_id, root.span_id, true),
                "{collector:?}, round {round}: the dropped span's context is its recorded parent's"
            );
            for name in ["explicit_child", "entered_child"] {
                let child = find(name);
                assert_eq!(
                    (child.trace_id, child.parent_span_id),
                    (root.trace_id, Some(root.span_id)),
                    "{collector:?}, round {round}: {name} hangs under the root"
                );
            }
            let events: Vec<_> = root.events.iter().map(|e| number(field_of(&e.fields, "round"))).collect();
            assert_eq!(events, [Some(round)], "{collector:?}, round {round}: the event lands on the root");
            assert!(root.events[0].unix_ns <= root.end_unix_ns, "{collector:?}: the root stayed open for it");
            assert!(
                find("linked").links.is_empty(),
                "{collector:?}, round {round}: a link to a dropped span"
            );
        }
        assert!(spans.iter().all(|s| s.meta.name() != "middle"), "{collector:?}: a middle span was recorded");
    }
}

/// The standalone subscriber's thread takes a closed span's key again first, its generation
/// advanced; after 2^14 reuses the generation wraps and the key is the same again. A child that
/// outlived its parent still names that key: its context must not take the request id of the
/// unrelated span that holds the key now.
#[test]
fn a_child_never_takes_a_request_id_from_a_span_that_reused_its_closed_parents_key() {
    use ringtrace::SpanExt;
    let (dispatch, guard) = start(Collector::Standalone, Builder::new().no_recording());
    tracing::dispatcher::with_default(&dispatch, || {
        let parent = tracing::info_span!("parent");
        parent.set_request_id("req-parent");
        let child = tracing::info_span!(parent: &parent, "child");
        assert_eq!(child.trace_context().unwrap().request_id.as_deref(), Some("req-parent"));
        drop(parent);
        // Each of these takes the parent's key, one generation on, and gives it back.
        for _ in 0..(1 << 14) - 1 {
            drop(tracing::info_span!("filler"));
        }
        let holder = tracing::info_span!("holder");
        holder.set_request_id("req-other");
        let cx = child.trace_context().unwrap();
        assert_eq!(cx.request_id.as_deref(), Some("req-parent"), "not a request id of another trace");
        drop(holder);
    });
    guard.shutdown().unwrap();
}

/// A unique, empty directory under the system's temporary directory.
fn fresh_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ringtrace-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The names of the spans in each recording of `dir`, by file name.
fn recorded_names(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut files = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let data = ringtrace_analysis::read_inputs(&[&path]).unwrap();
        let names = data.spans.iter().map(|s| s.name.clone()).collect();
        files.insert(path.file_name().unwrap().to_string_lossy().into_owned(), names);
    }
    files
}

/// Two collectors of one process, with the same node, daemon and directory, each keep their own
/// recording: neither truncates the other's.
#[test]
fn two_collectors_sharing_a_directory_keep_both_recordings() {
    let dir = fresh_dir("two-collectors");
    let builder = || Builder::new().node("node-s").daemon("same").recording_dir(&dir);
    let (a, guard_a) = start(Collector::Layer, builder());
    let (b, guard_b) = start(Collector::Standalone, builder());
    tracing::dispatcher::with_default(&a, || drop(tracing::info_span!("from_a").entered()));
    tracing::dispatcher::with_default(&b, || drop(tracing::info_span!("from_b").entered()));
    guard_a.shutdown().unwrap();
    guard_b.shutdown().unwrap();
    let files = recorded_names(&dir);
    let pid = std::process::id();
    let expected = std::collections::BTreeMap::from([
        (format!("node-s_same_{pid}.rtrace"), vec!["from_a".to_owned()]),
        (format!("node-s_same_{pid}-2.rtrace"), vec!["from_b".to_owned()]),
    ]);
    assert_eq!(files, expected);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A small file system of its own (tmpfs), unmounted when dropped.
#[cfg(target_os = "linux")]
struct SmallDisk(std::path::PathBuf);

#[cfg(target_os = "linux")]
impl SmallDisk {
    /// Mounts `size` of tmpfs; `None` when this user may not mount (only root may).
    fn mount(tag: &str, size: &str) -> Option<Self> {
        let dir = fresh_dir(tag);
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        // `/proc/self` belongs to the process's effective user.
        let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
        assert!(ok || !root, "root could not mount a tmpfs on {}", dir.display());
        ok.then(|| Self(dir))
    }
}

#[cfg(target_os = "linux")]
impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A disk that fills up and empties again: every span is either in the recording or counted as
/// lost by the sink, the recording holds only whole frames, recording resumes once there is
/// room, and a `ringtrace.loss` span in the recording names what was lost.
#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_counts_every_lost_span_and_recording_resumes() {
    let Some(disk) = SmallDisk::mount("full-disk", "1m") else {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    let recordings = disk.0.join("rec");
    let (dispatch, guard) = start(
        Collector::Standalone,
        Builder::new().node("n").daemon("d").recording_dir(&recordings).ring_capacity(1 << 16),
    );
    let handle = guard.handle();
    // A callsite first seen while the disk is full: its metadata is in a lost frame, and must be
    // written again for the spans it makes afterwards.
    fn late(phase: &str, i: u64) {
        let _s = tracing::info_span!("late_callsite", phase, i, pad = "0123456789abcdef0123456789").entered();
    }
    let spans = |phase: &str, n: u64| {
        tracing::dispatcher::with_default(&dispatch, || {
            for i in 0..n {
                let _s = tracing::info_span!("work", phase, i, pad = "0123456789abcdef0123456789").entered();
                if phase != "before" && i % 10 == 0 {
                    late(phase, i);
                }
            }
        });
        handle.flush(std::time::Duration::from_secs(60)).ok();
    };
    spans("before", 1_000);
    // Fill the disk to the last byte.
    let filler = disk.0.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let block = vec![0u8; 4096];
    while std::io::Write::write_all(&mut f, &block).is_ok() {}
    while std::io::Write::write_all(&mut f, &block[..1]).is_ok() {}
    drop(f);
    spans("full", 5_000);
    let lost_while_full = handle.flush(std::time::Duration::from_secs(60)).err();
    assert!(lost_while_full.is_none(), "a flush reports the counts, not an error: {lost_while_full:?}");
    std::fs::remove_file(&filler).unwrap();
    spans("after", 1_000);
    let stats = guard.shutdown().unwrap();
    assert_eq!(stats.recorded_spans, 7_000 + 500 + 100, "{stats}");
    assert!(stats.sink_failed_spans >= 4_000, "most spans of the full phase were lost: {stats}");
    let read = ringtrace_analysis::read_inputs_with(&[&recordings], ringtrace_analysis::Truncation::Error)
        .expect("whole frames only");
    assert!(read.warnings.is_empty(), "every record decodes: {:?}", read.warnings);
    let data = read.data;
    let phase = |p: &str| {
        data.spans
            .iter()
            .filter(|s| s.attributes.iter().any(|(k, v)| k == "phase" && v.to_string() == p))
            .count() as u64
    };
    assert_eq!(phase("before"), 1_000);
    assert_eq!(phase("after"), 1_000 + 100, "recording resumed, the late callsite's spans included");
    let markers: Vec<_> = data.spans.iter().filter(|s| s.name == ringtrace::LOSS_SPAN_NAME).collect();
    let marked: u64 = markers
        .iter()
        .flat_map(|s| &s.attributes)
        .filter(|(k, _)| k == "ringtrace.lost_spans")
        .map(|(_, v)| v.to_string().parse::<u64>().unwrap())
        .sum();
    let kept = data.spans.len() as u64 - markers.len() as u64;
    assert_eq!(kept + stats.sink_failed_spans, stats.recorded_spans, "every span kept or counted");
    assert_eq!(marked, stats.sink_failed_spans, "the markers name every lost span");
}

/// What the panic test checks of a span: its name, its status fields, and its `exception`
/// events' attributes.
#[derive(Debug, Clone)]
struct PanicSeen {
    name: &'static str,
    status: Option<String>,
    status_message: Option<String>,
    exceptions: Vec<HashMap<&'static str, String>>,
}

fn keep_panic(s: &SpanData) -> PanicSeen {
    let text = |name: &str| s.field(name).map(|v| v.to_string());
    PanicSeen {
        name: s.meta.name(),
        status: text("otel.status_code"),
        status_message: text("otel.status_message"),
        exceptions: s
            .events
            .iter()
            .filter(|e| e.meta.name() == "exception")
            .map(|e| e.fields.iter().map(|(k, v)| (*k, v.to_string())).collect())
            .collect(),
    }
}

/// A panic unwinding through spans records itself on each of them (an `exception` event per the
/// OpenTelemetry conventions, status error) and still runs the panic hook the application
/// installed; spans the unwinding did not close are untouched. In a process of its own: panic
/// hooks are process-wide, and the first collector of a process installs ringtrace's.
#[test]
fn a_panic_is_recorded_on_the_spans_it_unwinds_through() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &crate::common::test_name(module_path!(), "panic_child"),
            "--ignored",
            "--nocapture",
        ])
        .output()
        .unwrap();
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "the child failed:\n{text}");
}

#[test]
#[ignore = "run as a child process by a_panic_is_recorded_on_the_spans_it_unwinds_through"]
fn panic_child() {
    use std::sync::atomic::{AtomicU64, Ordering};
    static APP_HOOK_CALLS: AtomicU64 = AtomicU64::new(0);
    // The application's hook, installed before ringtrace starts; quiet, so the test output is.
    std::panic::set_hook(Box::new(|_| {
        APP_HOOK_CALLS.fetch_add(1, Ordering::Relaxed);
    }));
    let captured = std::backtrace::Backtrace::capture().status() == std::backtrace::BacktraceStatus::Captured;
    for (round, collector) in BOTH.into_iter().enumerate() {
        let (store, sink): (Kept<PanicSeen>, _) = collecting_with(keep_panic);
        let (dispatch, guard) = start(collector, Builder::new().no_recording().sink(sink));
        let caught = std::thread::spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
                let _outside = tracing::info_span!("outside", otel.status_code = "ok").entered();
                let result = std::panic::catch_unwind(|| {
                    let _outer = tracing::info_span!("outer").entered();
                    let _inner = tracing::info_span!("inner").entered();
                    let _ = std::fs::metadata("/"); // something done before the panic
                    panic!("disk on fire: {}", 42);
                });
                drop(tracing::info_span!("after").entered());
                result.is_err()
            })
        })
        .join()
        .unwrap();
        assert!(caught);
        guard.shutdown().unwrap();
        assert_eq!(APP_HOOK_CALLS.load(Ordering::Relaxed), round as u64 + 1, "the application's hook ran");
        let spans = store.lock().unwrap();
        let by_name: HashMap<_, _> = spans.iter().map(|s| (s.name, s)).collect();
        for name in ["inner", "outer"] {
            let s = by_name[name];
            assert_eq!(s.status.as_deref(), Some("error"), "{collector:?} {name}: {s:?}");
            let message = s.status_message.as_deref().unwrap_or_default();
            assert!(message.contains("disk on fire: 42") && message.contains("bad_day.rs"), "{message}");
            let [e] = &s.exceptions[..] else { panic!("{collector:?} {name}: one exception: {s:?}") };
            assert_eq!(e["exception.type"], "panic");
            assert_eq!(e["exception.message"], "disk on fire: 42");
            assert!(e["code.filepath"].ends_with("bad_day.rs"), "{e:?}");
            assert_eq!(e.contains_key("exception.stacktrace"), captured, "{e:?}");
        }
        for name in ["outside", "after"] {
            let s = by_name[name];
            assert!(s.exceptions.is_empty(), "{collector:?} {name}: not unwound: {s:?}");
            assert_ne!(s.status.as_deref(), Some("error"), "{collector:?} {name}");
        }
    }
}
