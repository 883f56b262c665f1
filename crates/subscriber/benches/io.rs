//! Cost per call of the I/O wrappers (`ringtrace_subscriber::io`): a 1-byte `read` of
//! `/dev/zero` and a 1-byte `write` to `/dev/null`, on one thread, as
//! - `std`: `std::fs::File`, the floor;
//! - `wrapped_no_subscriber`: `io::File` with no subscriber;
//! - `wrapped_excluded`: `io::File` under a `RingSubscriber` that leaves the target
//!   `ringtrace::io` out (its callsites disabled);
//! - `wrapped_recorded`: `io::File` under a `RingSubscriber` writing a raw recording to a
//!   temporary directory, every call recorded (a span with its fields, an update with
//!   `io.bytes`, the close);
//!
//! and, for reference, an empty `info_span!` created and dropped (`empty_span/no_subscriber`,
//! `empty_span/recorded`).
//!
//! Every configuration runs in a process with a second, idle thread: the kernel and libc take a
//! slower path for a `read` in a process with more than one thread (the file position's lock,
//! cancellation points), which the recorded runs' drain thread would otherwise add to their
//! figures alone.
//!
//! Recorded runs are timed in bursts; between bursts (untimed) the drain empties the ring into
//! the recording, so that every timed call is really recorded: the bench asserts nothing was
//! dropped.
//!
//! `cargo bench -p ringtrace-subscriber --bench io`

use std::hint::black_box;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use ringtrace_subscriber::{io, Builder, Guard};

/// Calls per timed burst; the ring holds a whole burst's records.
const BURST: u64 = 1024;
const RING: usize = 1 << 16;

/// Times `iters` calls of `one` in bursts, calling `between` after each burst, untimed.
fn bursts(iters: u64, mut one: impl FnMut(), mut between: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = BURST.min(iters - done);
        let start = Instant::now();
        for _ in 0..n {
            one();
        }
        total += start.elapsed();
        done += n;
        between();
    }
    total
}

/// A standalone subscriber writing a raw recording into `dir`.
fn recording(dir: &Path) -> (tracing::Dispatch, Guard) {
    let builder =
        Builder::new().node("bench").daemon("io").quiet(true).recording_dir(dir).ring_capacity(RING);
    let (subscriber, guard) = builder.build_subscriber().unwrap();
    (tracing::Dispatch::new(subscriber), guard)
}

/// A standalone subscriber that records everything but the I/O wrappers' spans.
fn excluding_io() -> (tracing::Dispatch, Guard) {
    let builder =
        Builder::new().node("bench").daemon("io").quiet(true).no_recording().exclude_target(io::TARGET);
    let (subscriber, guard) = builder.build_subscriber().unwrap();
    (tracing::Dispatch::new(subscriber), guard)
}

fn read_one(f: &mut impl Read, buf: &mut [u8; 1]) {
    black_box(f.read(buf).unwrap());
}

fn write_one(f: &mut impl Write) {
    black_box(f.write(black_box(b"x")).unwrap());
}

/// One group: the call on `std`'s file, then on the wrapper with no subscriber, with one that
/// leaves `ringtrace::io` out, and recorded.
fn group(
    c: &mut Criterion,
    dir: &Path,
    name: &str,
    mut std_call: impl FnMut(),
    mut wrapped_call: impl FnMut(),
) {
    let mut g = c.benchmark_group(name);
    g.bench_function("std", |b| b.iter(&mut std_call));
    g.bench_function("wrapped_no_subscriber", |b| b.iter(&mut wrapped_call));
    let (dispatch, guard) = excluding_io();
    g.bench_function("wrapped_excluded", |b| {
        tracing::dispatcher::with_default(&dispatch, || b.iter(&mut wrapped_call))
    });
    assert_eq!(guard.shutdown().unwrap().recorded_spans, 0, "excluded: nothing recorded");
    let (dispatch, guard) = recording(dir);
    let handle = guard.handle();
    g.bench_function("wrapped_recorded", |b| {
        tracing::dispatcher::with_default(&dispatch, || {
            b.iter_custom(|iters| {
                bursts(iters, &mut wrapped_call, || {
                    handle.flush(Duration::from_secs(10)).unwrap();
                })
            })
        })
    });
    let stats = guard.shutdown().unwrap();
    eprintln!("{name}, recorded: {stats}");
    assert_eq!((stats.dropped_spans, stats.dropped_updates), (0, 0), "dropped: {stats}");
    g.finish();
}

fn io_cost(c: &mut Criterion) {
    let dir: PathBuf = std::env::temp_dir().join(format!("ringtrace-bench-io-{}", std::process::id()));
    std::thread::spawn(|| loop {
        std::thread::park();
    });
    let (mut std_zero, mut zero) =
        (std::fs::File::open("/dev/zero").unwrap(), io::File::open("/dev/zero").unwrap());
    let (mut buf_a, mut buf_b) = ([1u8; 1], [1u8; 1]);
    group(
        c,
        &dir,
        "io_read_1_byte",
        || read_one(&mut std_zero, &mut buf_a),
        || read_one(&mut zero, &mut buf_b),
    );
    let mut std_null = std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap();
    let mut null = io::File::options().write(true).open("/dev/null").unwrap();
    group(c, &dir, "io_write_1_byte", || write_one(&mut std_null), || write_one(&mut null));

    let mut g = c.benchmark_group("empty_span");
    let empty = || black_box(tracing::info_span!("empty"));
    g.bench_function("no_subscriber", |b| b.iter(empty));
    let (dispatch, guard) = recording(&dir);
    let handle = guard.handle();
    g.bench_function("recorded", |b| {
        tracing::dispatcher::with_default(&dispatch, || {
            b.iter_custom(|iters| {
                bursts(
                    iters,
                    || drop(empty()),
                    || {
                        handle.flush(Duration::from_secs(10)).unwrap();
                    },
                )
            })
        })
    });
    let stats = guard.shutdown().unwrap();
    assert_eq!(stats.dropped_spans, 0, "dropped: {stats}");
    g.finish();
    drop((zero, null));
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, io_cost);
criterion_main!(benches);
