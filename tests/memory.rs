//! Memory under overload (issue #4): what ringtrace keeps resident is bounded by its
//! configuration, not by how much is traced: overload drops spans and counts them instead of
//! keeping them.
//!
//! Each case runs in a child process (this test binary, re-executed with `CHILD_ENV` naming the
//! case), so that its resident memory is not shared with the other tests of this binary. The child
//! prints one `MEMORY_RESULT key=value ...` line; the parent checks it. Linux only (`/proc`):
//! `tests/main.rs` declares this module for Linux alone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

use crate::common::{test_name, Collector};
use ringtrace::{Builder, EventData, Sampler, SpanData, SpanExt, Stats, Value};

/// Selects the child's role: `layer` (registry + `RingLayer`) or `subscriber` (`RingSubscriber`).
const CHILD_ENV: &str = "RINGTRACE_MEMORY_TEST_CHILD";
/// The child's recording directory.
const DIR_ENV: &str = "RINGTRACE_MEMORY_TEST_DIR";

/// Recording threads.
const THREADS: u64 = 8;
/// Iterations per thread; each records two nested spans and an event.
const ITERATIONS: u64 = 100_000;
/// Records per thread ring: small, so that eight threads on any machine overrun the drain.
const RING_CAPACITY: u64 = 1024;
/// Open spans the table holds; the long-lived spans go beyond it.
const MAX_OPEN_SPANS: u64 = 4096;
/// Long-lived spans the holder thread opens while the workers run: a quarter more than the table
/// holds, so that it fills up at about 80 % of the work and refuses the rest.
const LONG_LIVED: u64 = MAX_OPEN_SPANS * 5 / 4;
/// The holder opens them this many at a time, then flushes, so that its own ring never overflows
/// (a span open takes six records: 64 of them fill 384 of its 1024) and only the table refuses them.
const LONG_LIVED_BATCH: u64 = 64;
/// The string field of every span: 100 bytes, a header and three 48-byte chunks in the ring.
const TEXT: &str =
    "a field value of one hundred bytes, recorded on every span of this test: 0123456789abcdef0123456789";

/// Bytes of one ring record.
const RECORD_BYTES: u64 = 64;
/// Bytes of one open-span table slot (`local/table.rs`, `Slot`): six `AtomicU64` (key, span,
/// trace high and low, parent, flags and carrier), an `AtomicUsize` (callsite) and an `AtomicU32`
/// (extra handles): 60 bytes, padded to 64 by the 8-byte alignment.
const TABLE_SLOT_BYTES: u64 = 64;

/// `VmRSS` and `VmHWM` of this process, in bytes.
#[derive(Debug, Clone, Copy)]
struct Mem {
    rss: u64,
    hwm: u64,
}

impl Mem {
    fn read() -> Self {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let kb = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no {key} in /proc/self/status"))
                * 1024
        };
        Mem { rss: kb("VmRSS:"), hwm: kb("VmHWM:") }
    }
}

/// One worker's work: `ITERATIONS` times two nested spans (an integer and a 100-byte string
/// field each) and an event, as fast as it can. Halfway through, it meets the other workers and
/// the main thread at `halfway` twice. It adds its iterations to `progress` as it goes.
fn work(halfway: &Barrier, progress: &AtomicU64) {
    for i in 0..ITERATIONS {
        if i == ITERATIONS / 2 {
            halfway.wait(); // the main thread reads the memory figures
            halfway.wait();
        }
        if i % 256 == 0 {
            progress.fetch_add(256, Ordering::Relaxed);
        }
        let _outer = tracing::info_span!("outer", i, text = TEXT).entered();
        let _inner = tracing::info_span!("inner", i, text = TEXT).entered();
        tracing::info!(i, "tick");
    }
}

/// The holder's work: opens `LONG_LIVED` spans and keeps them open, `LONG_LIVED_BATCH` at a time
/// as the workers progress (evenly over their work), flushing after each batch; closes them when
/// `release` is dropped (after the workers are done). Returns how many the table took.
fn hold(handle: &ringtrace::Handle, progress: &AtomicU64, release: mpsc::Receiver<()>) -> u64 {
    let batches = LONG_LIVED / LONG_LIVED_BATCH;
    let mut held = Vec::with_capacity(LONG_LIVED as usize);
    let mut accepted = 0;
    for b in 0..batches {
        let due = THREADS * ITERATIONS * b / batches;
        while progress.load(Ordering::Relaxed) < due {
            std::thread::sleep(Duration::from_millis(1));
        }
        for i in 0..LONG_LIVED_BATCH {
            let span =
                tracing::info_span!(parent: None, "long_lived", i = b * LONG_LIVED_BATCH + i, text = TEXT);
            // A root span has a context exactly when the table holds it.
            accepted += u64::from(span.trace_context().is_some());
            held.push(span);
        }
        handle.flush(FLUSH_TIMEOUT).unwrap();
    }
    let _ = release.recv();
    while !held.is_empty() {
        held.truncate(held.len().saturating_sub(512)); // 512 close records: half the ring
        handle.flush(FLUSH_TIMEOUT).unwrap();
    }
    accepted
}

/// Completeness of flushes, not speed: a debug-build drain on a loaded machine.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(300);

/// Spans the child creates in all.
const PRODUCED_SPANS: u64 = THREADS * 2 * ITERATIONS + LONG_LIVED;

/// The overload, run only as a child process of the tests below.
#[test]
#[ignore = "run as a child process by the memory tests"]
fn overload_child() {
    let case = std::env::var(CHILD_ENV).expect("run by the memory tests");
    let dir = PathBuf::from(std::env::var_os(DIR_ENV).expect("recording directory"));
    let before = Mem::read();
    // Rings in memory: mapped ring files count in VmRSS while mapped, and unmapping them at
    // shutdown can lower the VmHWM Linux reports (it refreshes its high-water mark lazily), which
    // this test compares before and after. Ring files are exactly the rings' size (`bound`'s
    // `rings` term) and live in the page cache.
    let builder = Builder::new()
        .node("node-memory")
        .daemon(format!("memory-{case}"))
        .recording_dir(&dir)
        .ring_files(false)
        .ring_capacity(RING_CAPACITY as usize)
        .max_open_spans(MAX_OPEN_SPANS as usize)
        .sampler(Sampler::AlwaysOn)
        .no_otlp()
        .flush_timeout(FLUSH_TIMEOUT);
    let (dispatch, guard) = Collector::named(&case).start(builder);
    let halfway = Arc::new(Barrier::new(THREADS as usize + 1));
    let (release, released) = mpsc::channel::<()>();
    let progress = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (dispatch, halfway, progress) = (dispatch.clone(), halfway.clone(), progress.clone());
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn(move || tracing::dispatcher::with_default(&dispatch, || work(&halfway, &progress)))
                .unwrap()
        })
        .collect();
    let holder = {
        let (dispatch, progress, handle) = (dispatch.clone(), progress.clone(), guard.handle());
        std::thread::Builder::new()
            .name("holder".into())
            .spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || hold(&handle, &progress, released))
            })
            .unwrap()
    };
    halfway.wait();
    let mid = Mem::read();
    halfway.wait();
    for w in workers {
        w.join().unwrap();
    }
    drop(release);
    let long_lived_accepted = holder.join().unwrap();
    drop(dispatch);
    let stats: Stats = guard.shutdown().unwrap();
    let end = Mem::read();
    let recording_bytes: u64 =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    println!(
        "MEMORY_RESULT rss_before={} hwm_before={} hwm_mid={} rss_end={} hwm_end={} recorded_spans={} \
         recorded_events={} dropped_spans={} dropped_closes={} dropped_events={} dropped_updates={} \
         unclosed_spans={} orphan_records={} threads={} recording_bytes={} long_lived_accepted={}",
        before.rss,
        before.hwm,
        mid.hwm,
        end.rss,
        end.hwm,
        stats.recorded_spans,
        stats.recorded_events,
        stats.dropped_spans,
        stats.dropped_closes,
        stats.dropped_events,
        stats.dropped_updates,
        stats.unclosed_spans,
        stats.orphan_records,
        stats.threads,
        recording_bytes,
        long_lived_accepted,
    );
}

/// Runs the overload child for `case` and returns its figures.
fn run_child(case: &str) -> HashMap<String, u64> {
    run_child_named(case, "overload_child")
}

/// Runs the child test `child` for `case` and returns its figures.
fn run_child_named(case: &str, child: &str) -> HashMap<String, u64> {
    // In memory where there is such a file system: the churn flushes (and syncs) thousands of
    // times.
    let shm = Path::new("/dev/shm");
    let tmp = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    let dir = tmp.join(format!("ringtrace-memory-{case}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &test_name(module_path!(), child), "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, case)
        .env(DIR_ENV, &dir)
        // Target filters would leave spans out of the count.
        .env_remove("RINGTRACE_INCLUDE")
        .env_remove("RINGTRACE_EXCLUDE")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{case}: the child failed:\n{stdout}\n{stderr}");
    let line = stdout
        .lines()
        // The harness prints the test's name on the same line.
        .find_map(|l| l.split_once("MEMORY_RESULT ").map(|(_, figures)| figures))
        .unwrap_or_else(|| panic!("{case}: no result line:\n{stdout}\n{stderr}"));
    line.split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_owned(), v.parse().unwrap())
        })
        .collect()
}

/// Bytes one span of this test takes while the drain assembles it, with its entry in the drain's
/// live-span table.
fn live_span_bytes() -> u64 {
    use std::mem::size_of;
    let field = size_of::<(&'static str, Value)>() as u64;
    // The span itself, in the live table's slot vector, and the slot's number in its free list.
    size_of::<Option<SpanData>>() as u64 + 4
        // Its request ids (two `Option<Arc<str>>`) beside it, and its index entry (span id and
        // slot number, 16 bytes, and a control byte) in a hash map at most 7/8 full.
        + 2 * size_of::<Option<std::sync::Arc<str>>>() as u64
        + 17 * 8 / 7
        // Its field list (two fields; a `Vec` grows to four) and the string's 100 bytes (112 as
        // the allocator rounds them).
        + 4 * field
        + 112
        // Its event list (a `Vec` grows to four) and the event's two fields (four again).
        + 4 * size_of::<EventData>() as u64
        + 4 * field
}

/// Emptied field lists the drain keeps for reuse (`drain/mod.rs`, `recycle_batch`): at most
/// 8192 lists of at most 16 fields.
fn field_list_pool_bytes() -> u64 {
    8192 * (std::mem::size_of::<Vec<(&'static str, Value)>>() as u64
        + 16 * std::mem::size_of::<(&'static str, Value)>() as u64)
}

/// What the process may add to its resident memory: computed from the configuration, plus the
/// spans whose close record was lost (`dropped_closes`), which the drain holds until shutdown.
fn bound(dropped_closes: u64) -> u64 {
    // Every recording thread's ring (the workers and the holder): `ring_capacity` records of 64
    // bytes.
    let rings = (THREADS + 1) * RING_CAPACITY * RECORD_BYTES;
    // Each thread's other state: the scratch string (formatted output, at most 4 KiB), the
    // entered-span stack (32 keys), the free-key list (64 keys), the callsite filter cache
    // (64 entries), the ring's bookkeeping and counters: 16 KiB is generous.
    let thread_state = (THREADS + 1) * 16 * 1024;
    // The open-span table: `max_open_spans` rounded up to a power of two, 64-byte slots.
    let table_slots = MAX_OPEN_SPANS.next_power_of_two();
    let table = table_slots * TABLE_SLOT_BYTES;
    // The drain's spans: every open one (at most one per table slot), plus those closed and not
    // yet handed to the sinks (their close unread in a ring, or read in one of the last two
    // passes) or records waiting for their span's open (kept three passes): each took at least
    // one record, so at most three rings' worth. Doubled: vectors and hash maps grow by doubling.
    let drain = 2 * (table_slots + 3 * (THREADS + 1) * RING_CAPACITY) * live_span_bytes();
    // The drain's pool of emptied field lists.
    let field_lists = field_list_pool_bytes();
    // Spans whose close record a full ring dropped: the drain keeps them until shutdown (then
    // exports them as unclosed). The one term the configuration does not bound.
    let lost_closes = dropped_closes * live_span_bytes();
    // The allocator (per-thread arenas, fragmentation), the recording's encoder buffer (one
    // batch of 512 spans), thread stacks, the registry's slab for the layer case, and this
    // test's own allocations (the long-lived spans' handles, the child's harness).
    let slack = 32 << 20;
    rings + thread_state + table + drain + field_lists + lost_closes + slack
}

/// What the second half of the work may add: it records as many spans as the first half
/// (800,000), so memory that followed the work, even 20 bytes a span, would exceed this.
fn second_half_bound(dropped_closes: u64) -> u64 {
    (16 << 20) + dropped_closes * live_span_bytes()
}

fn check(case: &str) {
    let r = run_child(case);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let growth = r["hwm_end"] - r["rss_before"];
    let second_half = r["hwm_end"] - r["hwm_mid"];
    let (bound, second_half_bound) = (bound(r["dropped_closes"]), second_half_bound(r["dropped_closes"]));
    eprintln!(
        "{case}: VmRSS before {:.1} MiB; VmHWM growth {:.1} MiB (bound {:.1} MiB), of which {:.1} MiB \
         in the second half (bound {:.1} MiB); VmRSS after shutdown {:.1} MiB; live span {} B; {:?}",
        mib(r["rss_before"]),
        mib(growth),
        mib(bound),
        mib(second_half),
        mib(second_half_bound),
        mib(r["rss_end"]),
        live_span_bytes(),
        r
    );
    assert_eq!(
        r["recorded_spans"] + r["dropped_spans"],
        PRODUCED_SPANS,
        "{case}: every span is accounted for: {r:?}"
    );
    assert!(r["dropped_spans"] > 0, "{case}: the overload was real: {r:?}");
    let table_slots = MAX_OPEN_SPANS.next_power_of_two();
    assert!(
        r["long_lived_accepted"] <= table_slots && r["long_lived_accepted"] > table_slots / 2,
        "{case}: the table filled up and refused the rest: {r:?}"
    );
    assert!(growth < bound, "{case}: VmHWM grew by {growth} B, over the bound {bound} B: {r:?}");
    assert!(
        second_half < second_half_bound,
        "{case}: VmHWM grew by {second_half} B in the second half, over {second_half_bound} B: {r:?}"
    );
}

#[test]
fn layer_memory_is_bounded_under_overload() {
    check("layer");
}

#[test]
fn standalone_subscriber_memory_is_bounded_under_overload() {
    check("subscriber");
}

/// Threads the churn child starts before its first heap figure, and in all.
const CHURN_WARM: u64 = 20_000;
const CHURN_TOTAL: u64 = 600_000;
/// Threads alive at once in the churn.
const CHURN_WAVE: u64 = 8;
/// Threads between flushes. The drain's high-water marks (its ring list, its table of live
/// spans, its pools) follow how far it falls behind; waiting for it every so many threads bounds
/// that backlog whatever the machine's load, so that the warm phase reaches the same marks as
/// the rest and the heap's growth measures only what grows with the number of threads.
const CHURN_FLUSH_EVERY: u64 = 5_000;

/// Heap bytes in use, over every arena (glibc's `mallinfo2`).
fn heap_in_use() -> u64 {
    // SAFETY: `mallinfo2` only reads the allocator's statistics.
    unsafe { libc::mallinfo2() }.uordblks as u64
}

/// Starts threads `from..to` in waves, each recording one span with an event, then exiting; the
/// drain is waited for every [`CHURN_FLUSH_EVERY`] threads.
fn churn(dispatch: &tracing::Dispatch, guard: &ringtrace::Guard, from: u64, to: u64) {
    for wave in (from..to).step_by(CHURN_WAVE as usize) {
        if wave > from && wave % CHURN_FLUSH_EVERY == 0 {
            guard.flush().unwrap();
        }
        let handles: Vec<_> = (wave..(wave + CHURN_WAVE).min(to))
            .map(|i| {
                let dispatch = dispatch.clone();
                std::thread::Builder::new()
                    .name(format!("short-{i}"))
                    .spawn(move || {
                        tracing::dispatcher::with_default(&dispatch, || {
                            let _s = tracing::info_span!("short", i).entered();
                            tracing::info!("lived briefly");
                        })
                    })
                    .unwrap()
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}

/// Short-lived threads, run only as a child process of the test below.
#[test]
#[ignore = "run as a child process by the memory tests"]
fn churn_child() {
    let case = std::env::var(CHILD_ENV).expect("run by the memory tests");
    let dir = PathBuf::from(std::env::var_os(DIR_ENV).expect("recording directory"));
    let builder = Builder::new()
        .node("node-churn")
        .daemon(format!("churn-{case}"))
        .recording_dir(&dir)
        .ring_capacity(64)
        .sampler(Sampler::AlwaysOn)
        .no_otlp()
        .flush_timeout(FLUSH_TIMEOUT);
    let (dispatch, guard) = Collector::named(&case).start(builder);
    churn(&dispatch, &guard, 0, CHURN_WARM);
    guard.flush().unwrap();
    let warm = heap_in_use();
    churn(&dispatch, &guard, CHURN_WARM, CHURN_TOTAL);
    guard.flush().unwrap();
    let end = heap_in_use();
    drop(dispatch);
    let stats: Stats = guard.shutdown().unwrap();
    println!(
        "MEMORY_RESULT heap_warm={warm} heap_end={end} recorded_spans={} recorded_events={} dropped_spans={} threads={}",
        stats.recorded_spans, stats.recorded_events, stats.dropped_spans, stats.threads
    );
}

/// Heap growth allowed from 20,000 to 600,000 threads. On an idle machine it is 0.12-0.16 MiB
/// (`benches/README.md`); under load the drain's buffers (its ring list, live-span table, pools
/// and the recording's spare frame buffers) keep higher high-water marks, since it falls further
/// behind between flushes: about 1 MiB was seen with both cores busy. Any per-thread growth of 8
/// bytes or more (the encoder's old cache grew 76-110 bytes a thread: 47 MB here) exceeds it.
const CHURN_HEAP_BOUND: u64 = 4 << 20;

/// 600,000 short-lived threads leave the heap where 20,000 left it (within
/// [`CHURN_HEAP_BOUND`]): nothing ringtrace keeps grows with the number of threads that ever
/// recorded.
#[test]
fn heap_does_not_grow_with_threads_that_came_and_went() {
    for case in ["churn-layer", "churn-subscriber"] {
        let r = run_child_named(case, "churn_child");
        eprintln!("{case}: {r:?}");
        assert_eq!(r["recorded_spans"], CHURN_TOTAL, "{case}: {r:?}");
        assert_eq!(r["recorded_events"], CHURN_TOTAL, "{case}: {r:?}");
        assert!(r["threads"] >= CHURN_TOTAL, "{case}: {r:?}");
        let growth = r["heap_end"].saturating_sub(r["heap_warm"]);
        assert!(
            growth < CHURN_HEAP_BOUND,
            "{case}: the heap grew {growth} B from 20,000 to 600,000 threads: {r:?}"
        );
    }
}
