//! A process killed with `SIGKILL` at a random moment while recording keeps every span it
//! closed: its rings live in files beside the recording, and the drain frees a ring's records
//! only once the recording holds them, so each published record is in one or the other.
//! Readers add what the rings still held (with a warning), and `recover` appends it to the
//! recording for good.
//!
//! The test binary starts itself again as the recording process (`kill_child`, ignored in
//! normal runs). After closing each span, a child thread writes how many it has closed into a
//! shared file; the parent kills the child once a random number of spans is reached, plus a
//! random pause, and then every span counted must be read back, closed, exactly once. Nothing
//! depends on timing: a span is counted only after its close record is published, and the
//! rings are large enough to hold every record the child can make, so none is ever dropped.

use std::collections::HashSet;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ringtrace_analysis::{read_inputs_with, ReadWarningKind, Truncation};

use crate::common::test_name;

/// Recording threads in the child.
const THREADS: u64 = 2;
/// Spans each child thread records at most (then it waits to be killed).
const SPANS_PER_THREAD: u64 = 30_000;
/// The child's pace: 50,000 spans a second over both threads.
const SPAN_EVERY: Duration = Duration::from_micros(40);
/// Records per ring: twice what a thread can write (three records a span: open, its two
/// numbers, close), so that none is ever dropped and the drain never frees records before the
/// recording holds them (it does past half a ring held back).
const RING: usize = 1 << 18;
/// Kills, alternating between the standalone subscriber and the layer.
const RUNS: u64 = 6;

#[test]
#[ignore = "entry point of the process started by `a_killed_process_keeps_every_span_it_closed`"]
fn kill_child() {
    if std::env::var("RINGTRACE_TEST_ROLE").as_deref() != Ok("kill") {
        return;
    }
    let dir = std::env::var("RINGTRACE_TEST_DIR").unwrap();
    let counts = std::fs::OpenOptions::new()
        .write(true)
        .open(std::env::var("RINGTRACE_TEST_COUNTS").unwrap())
        .unwrap();
    let builder =
        ringtrace::Builder::new().node("node-k").daemon("killed").recording_dir(dir).ring_capacity(RING);
    let _guard = match std::env::var("RINGTRACE_TEST_COLLECTOR").unwrap().as_str() {
        "subscriber" => {
            let (subscriber, guard) = builder.build_subscriber().unwrap();
            tracing::subscriber::set_global_default(subscriber).unwrap();
            guard
        }
        _ => {
            use tracing_subscriber::layer::SubscriberExt;
            let (layer, guard) = builder.build().unwrap();
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();
            guard
        }
    };
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let counts = counts.try_clone().unwrap();
            std::thread::spawn(move || {
                let start = Instant::now();
                for i in 0..SPANS_PER_THREAD {
                    drop(tracing::info_span!("work", t, i).entered());
                    // Closed (its close record published): counted.
                    counts.write_at(&(i + 1).to_le_bytes(), t * 8).unwrap();
                    if i % 25 == 0 {
                        let due = SPAN_EVERY * (i as u32 + 1);
                        if let Some(wait) = due.checked_sub(start.elapsed()) {
                            std::thread::sleep(wait);
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Every span is recorded: wait here to be killed.
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Spans each child thread has counted as closed.
fn counted(path: &Path) -> Vec<u64> {
    let b = std::fs::read(path).unwrap();
    (0..THREADS as usize).map(|t| u64::from_le_bytes(b[t * 8..t * 8 + 8].try_into().unwrap())).collect()
}

/// A number in `0..n` from `seed`, the same on every run (SplitMix64).
fn pick(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) % n
}

/// What reading `dir` found of the `work` spans.
struct Work {
    /// Closed spans, as (thread, index).
    closed: HashSet<(u64, u64)>,
    /// Spans read as unclosed (open when the process died).
    unclosed: HashSet<(u64, u64)>,
    warnings: Vec<ReadWarningKind>,
}

/// The `work` spans read from `dir`; fails on a duplicate.
fn work_spans(dir: &Path, truncation: Truncation, what: &str) -> Work {
    let read = read_inputs_with(&[dir], truncation).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut work = Work {
        closed: HashSet::new(),
        unclosed: HashSet::new(),
        warnings: read.warnings.iter().map(|w| w.kind()).collect(),
    };
    for s in read.data.spans.iter().filter(|s| s.name == "work") {
        let number = |k: &str| {
            s.attribute(k).unwrap_or_else(|| panic!("{what}: no {k}")).to_string().parse::<u64>().unwrap()
        };
        let key = (number("t"), number("i"));
        let fresh = if s.attribute("ringtrace.unclosed").is_some() {
            !work.closed.contains(&key) && work.unclosed.insert(key)
        } else {
            !work.unclosed.contains(&key) && work.closed.insert(key)
        };
        assert!(fresh, "{what}: span {key:?} read twice");
    }
    work
}

fn fresh_dir(run: u64) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ringtrace-kill-{}-{run}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_killed_process_keeps_every_span_it_closed() {
    for run in 0..RUNS {
        let collector = if run % 2 == 0 { "subscriber" } else { "layer" };
        let what = format!("run {run} ({collector})");
        let dir = fresh_dir(run);
        let recordings = dir.join("rec");
        let counts = dir.join("counts");
        std::fs::write(&counts, [0u8; 8 * THREADS as usize]).unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &test_name(module_path!(), "kill_child"), "--ignored", "--nocapture"])
            .env("RINGTRACE_TEST_ROLE", "kill")
            .env("RINGTRACE_TEST_DIR", &recordings)
            .env("RINGTRACE_TEST_COUNTS", &counts)
            .env("RINGTRACE_TEST_COLLECTOR", collector)
            .env("RINGTRACE_QUIET", "1")
            .spawn()
            .unwrap();
        // A random moment: once a random number of spans is closed, after a random pause.
        let target = 500 + pick(run, THREADS * SPANS_PER_THREAD - 1_000);
        let deadline = Instant::now() + Duration::from_secs(300);
        while counted(&counts).iter().sum::<u64>() < target {
            assert!(child.try_wait().unwrap().is_none(), "{what}: the child exited before it was killed");
            assert!(Instant::now() < deadline, "{what}: the child made no progress in 5 minutes");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_micros(pick(run + 100, 5_000)));
        child.kill().unwrap();
        child.wait().unwrap();
        let closed = counted(&counts);

        let expected: HashSet<(u64, u64)> =
            (0..THREADS).flat_map(|t| (0..closed[t as usize]).map(move |i| (t, i))).collect();
        let Work { closed: seen, unclosed, warnings } = work_spans(&recordings, Truncation::Warn, &what);
        let missing: Vec<_> = expected.difference(&seen).take(5).collect();
        assert!(missing.is_empty(), "{what}: closed spans missing, e.g. {missing:?} (counted {closed:?})");
        // Only a span not yet counted (open at the kill, or closed and not yet counted) can be
        // read as unclosed.
        let early: Vec<_> = unclosed.iter().filter(|k| expected.contains(k)).collect();
        assert!(early.is_empty(), "{what}: spans counted as closed read as unclosed: {early:?}");
        assert!(
            warnings.iter().all(|w| matches!(
                w,
                ReadWarningKind::Recovered { .. } | ReadWarningKind::TruncatedTail { .. }
            )),
            "{what}: {warnings:?}"
        );

        // Recovery makes it a plain recording, with the same spans and no ring files.
        let recording = ringtrace::recover::with_leftovers(&recordings).unwrap();
        assert_eq!(recording.len(), 1, "{what}: the dead process's ring files are there");
        ringtrace::recover::recover(&recording[0]).unwrap().unwrap();
        assert!(!recordings.join(".rings").exists(), "{what}: the ring files are removed");
        let again = work_spans(&recordings, Truncation::Error, &what);
        assert_eq!(
            (again.closed, again.unclosed),
            (seen, unclosed),
            "{what}: the recovered recording reads the same"
        );
        assert!(again.warnings.is_empty(), "{what}: {:?}", again.warnings);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Runs this test binary's ignored test `entry` as a child process in `role`, recording into
/// `dir`, and waits for it to end (its stderr, a crash report, is dropped).
fn run_child(entry: &str, role: &str, dir: &Path) -> std::process::ExitStatus {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &test_name(module_path!(), entry), "--ignored", "--nocapture"])
        .env("RINGTRACE_TEST_ROLE", role)
        .env("RINGTRACE_TEST_DIR", dir)
        .env("RINGTRACE_QUIET", "1")
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
}

/// Spans the aborting child records before `abort`.
const ABORT_SPANS: u64 = 10_000;

#[test]
#[ignore = "entry point of the process started by `an_aborting_process_keeps_every_span`"]
fn abort_child() {
    if std::env::var("RINGTRACE_TEST_ROLE").as_deref() != Ok("abort") {
        return;
    }
    let (subscriber, _guard) = ringtrace::Builder::new()
        .node("node-a")
        .daemon("aborting")
        .recording_dir(std::env::var("RINGTRACE_TEST_DIR").unwrap())
        .ring_capacity(RING)
        .build_subscriber()
        .unwrap();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    for i in 0..ABORT_SPANS {
        drop(tracing::info_span!("work", t = 0u64, i).entered());
    }
    // What `panic = "abort"` ends in, and what no handler runs for: `SIGABRT`.
    std::process::abort();
}

/// A process that aborts (`panic = "abort"`, `std::process::abort`) keeps every span it closed,
/// as a killed one does: no exit handler runs, the ring files hold what the drain had not
/// written.
#[test]
fn an_aborting_process_keeps_every_span() {
    let dir = fresh_dir(2000);
    let status = run_child("abort_child", "abort", &dir);
    assert!(!status.success(), "the child aborted");
    let work = work_spans(&dir, Truncation::Warn, "abort");
    let expected: HashSet<(u64, u64)> = (0..ABORT_SPANS).map(|i| (0, i)).collect();
    assert_eq!(work.closed, expected);
    assert!(work.unclosed.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A collector that shuts down cleanly leaves no ring files.
#[test]
fn a_clean_shutdown_removes_the_ring_files() {
    let dir = fresh_dir(1000);
    let (subscriber, guard) =
        ringtrace::Builder::new().node("n").daemon("clean").recording_dir(&dir).build_subscriber().unwrap();
    tracing::subscriber::with_default(subscriber, || {
        drop(tracing::info_span!("work", t = 0u64, i = 0u64).entered());
        assert!(dir.join(".rings").is_dir(), "rings live in files while recording");
    });
    guard.shutdown().unwrap();
    assert!(!dir.join(".rings").exists());
    let work = work_spans(&dir, Truncation::Error, "clean");
    assert_eq!(work.closed.len(), 1);
    assert!(work.warnings.is_empty(), "{:?}", work.warnings);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Spans the dropping child makes, through rings far too small for them.
const DROP_SPANS: u64 = 20_000;
/// Threads the dropping child makes them on, all alive at once: more than the collector keeps
/// rings for once their threads exit (32), so that it removes some ring files.
const DROP_THREADS: u64 = 40;

/// The ring files left in `dir`'s ring directories.
fn ring_files(dir: &Path) -> usize {
    let Ok(dirs) = std::fs::read_dir(dir.join(".rings")) else { return 0 };
    dirs.filter_map(Result::ok)
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter(|f| f.path().extension().is_some_and(|e| e == "ring"))
        .count()
}

#[test]
#[ignore = "entry point of the process started by `a_killed_process_keeps_its_loss_counters`"]
fn drop_child() {
    if std::env::var("RINGTRACE_TEST_ROLE").as_deref() != Ok("drop") {
        return;
    }
    let dir = PathBuf::from(std::env::var("RINGTRACE_TEST_DIR").unwrap());
    let (subscriber, _guard) = ringtrace::Builder::new()
        .node("node-d")
        .daemon("dropping")
        .recording_dir(&dir)
        .ring_capacity(16)
        .build_subscriber()
        .unwrap();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let all_alive = std::sync::Arc::new(std::sync::Barrier::new(DROP_THREADS as usize));
    let threads: Vec<_> = (0..DROP_THREADS)
        .map(|t| {
            let all_alive = all_alive.clone();
            std::thread::spawn(move || {
                drop(tracing::info_span!("work", t, i = 0u64).entered());
                all_alive.wait();
                for i in 1..DROP_SPANS / DROP_THREADS {
                    drop(tracing::info_span!("work", t, i).entered());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Once the drain has removed the ring files it keeps no more, killed at once: the
    // recording's counters frame, written every tenth of a second, is behind the drops.
    while ring_files(&dir) > 32 {
        std::thread::sleep(Duration::from_micros(100));
    }
    // SAFETY: a plain system call.
    unsafe { libc::raise(libc::SIGKILL) };
}

/// A process killed while it drops records leaves its loss counters: every span it made is
/// read back or counted as dropped, exactly, before and after `recover` — however many drops
/// the recording's last counters frame missed.
#[test]
fn a_killed_process_keeps_its_loss_counters() {
    let dir = fresh_dir(3000);
    let status = run_child("drop_child", "drop", &dir);
    assert!(!status.success(), "the child was killed");
    for pass in ["read with the ring files", "recovered"] {
        let read = read_inputs_with(&[dir.as_path()], Truncation::Warn).unwrap();
        let spans = read.data.spans.iter().filter(|s| s.name == "work").count() as u64;
        let dropped = read.data.dropped_spans_total();
        assert!(dropped > 0, "{pass}: a ring of 16 records drops spans");
        assert_eq!(spans + dropped, DROP_SPANS, "{pass}: {spans} read, {dropped} counted as dropped");
        if pass == "read with the ring files" {
            let recording = ringtrace::recover::with_leftovers(&dir).unwrap();
            assert_eq!(recording.len(), 1);
            ringtrace::recover::recover(&recording[0]).unwrap().unwrap();
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Spans each side records in the fork test.
const FORK_SPANS: u64 = 200;

/// The spans named `work` in `dir` whose `who` is each of `whos`.
fn spans_by_who(dir: &Path, whos: &[&str]) -> Vec<usize> {
    let read = read_inputs_with(&[dir], Truncation::Error).unwrap();
    assert!(read.warnings.is_empty(), "{:?}", read.warnings);
    whos.iter()
        .map(|who| {
            read.data
                .spans
                .iter()
                .filter(|s| s.name == "work" && s.attribute("who").is_some_and(|w| w.to_string() == *who))
                .count()
        })
        .collect()
}

#[test]
#[ignore = "entry point of the process started by `a_child_made_by_fork_leaves_the_recording_alone`"]
fn fork_child() {
    if std::env::var("RINGTRACE_TEST_ROLE").as_deref() != Ok("fork") {
        return;
    }
    let (subscriber, guard) = ringtrace::Builder::new()
        .node("node-f")
        .daemon("forking")
        .recording_dir(std::env::var("RINGTRACE_TEST_DIR").unwrap())
        .build_subscriber()
        .unwrap();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let record = |who: &'static str| {
        std::thread::spawn(move || {
            for i in 0..FORK_SPANS {
                drop(tracing::info_span!("work", who, i).entered());
            }
        })
        .join()
        .unwrap()
    };
    // A thread that records and exits: once the drain has read its ring, the ring (a file) waits
    // in the pool for the next thread.
    record("before");
    // Each flush is a pass of the drain: a few see the ring read, written, freed and pooled.
    for _ in 0..20 {
        guard.flush().unwrap();
    }
    // SAFETY: the child only records through the collector (which, in a child, takes no lock
    // and touches no ring) and leaves with `_exit`.
    match unsafe { libc::fork() } {
        0 => {
            for i in 0..FORK_SPANS {
                drop(tracing::info_span!("work", who = "child", i).entered());
            }
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(0) }
        }
        -1 => panic!("fork failed: {}", std::io::Error::last_os_error()),
        child => {
            let mut status = 0;
            // SAFETY: waits for the child just made.
            assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status}");
        }
    }
    // The next thread takes the pooled ring the child did not write into.
    record("after");
    guard.shutdown().unwrap();
}

/// A child made by `fork` (as a pre-forking server makes its workers) that records spans leaves
/// its parent's recording alone: none of its spans reaches the parent's recording (through the
/// ring files it shares with the parent, or otherwise), it ends cleanly, and the parent's spans
/// before and after the fork are all there, the recording reading without a warning.
#[test]
fn a_child_made_by_fork_leaves_the_recording_alone() {
    let dir = fresh_dir(4000);
    let status = run_child("fork_child", "fork", &dir);
    assert!(status.success(), "the forking process ended with {status}");
    assert_eq!(
        spans_by_who(&dir, &["before", "child", "after"]),
        [FORK_SPANS as usize, 0, FORK_SPANS as usize]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
