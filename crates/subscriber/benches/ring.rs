//! The per-thread ring against `ringbuf`'s, on what the hot path does: write a group of records
//! in place and publish it with one store. One thread, a group of two 64-byte records (a span:
//! open and close) per iteration; when a ring is full the same thread empties it, in both cases,
//! inside the timed loop (a thread-local consumer, so the figures are the producer's path plus a
//! read of each record's slot once).
//!
//! `cargo bench -p ringtrace-subscriber --bench ring`; figures in `benches/README.md`.

use std::hint::black_box;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use ringbuf::traits::{Consumer as _, Observer as _, Producer as _, Raw as _, Split as _};
use ringbuf::HeapRb;
use ringtrace_core::raw::RawRecord;
use ringtrace_core::record::Record;
use ringtrace_core::SpanId;
use ringtrace_subscriber::__bench::ring;

/// Records per ring: the collectors' default.
const CAPACITY: usize = 16 * 1024;

fn record(i: u64) -> RawRecord {
    RawRecord::new(&Record::Close { span: SpanId::new(i | 1).unwrap(), ticks: i })
}

fn ours(iters: u64) -> Duration {
    let (mut p, mut c) = ring::<RawRecord>(CAPACITY);
    let start = Instant::now();
    for i in 0..iters {
        let w = p.write_index();
        if p.vacant_from(w, false) < 2 && p.vacant_from(w, true) < 2 {
            let n = c.occupied();
            c.read_with(|a, b| black_box((a.len(), b.len())));
            c.skip(n);
            p.vacant_from(w, true);
        }
        // SAFETY: two slots are vacant from the write index (checked above).
        unsafe {
            p.write_at(w, record(i));
            p.write_at(w + 1, record(i + 1));
            p.publish(w + 2);
        }
    }
    start.elapsed()
}

fn put(a: &mut [MaybeUninit<RawRecord>], b: &mut [MaybeUninit<RawRecord>], k: usize, r: RawRecord) {
    match a.get_mut(k) {
        Some(slot) => {
            slot.write(r);
        }
        None => {
            b[k - a.len()].write(r);
        }
    }
}

fn theirs(iters: u64) -> Duration {
    let (mut p, mut c) = HeapRb::<RawRecord>::new(CAPACITY).split();
    let start = Instant::now();
    for i in 0..iters {
        if p.vacant_len() < 2 {
            let n = c.occupied_len();
            let (a, b) = c.as_slices();
            black_box((a.len(), b.len()));
            c.skip(n);
        }
        let (a, b) = p.vacant_slices_mut();
        put(a, b, 0, record(i));
        put(a, b, 1, record(i + 1));
        // SAFETY: both slots were just written.
        unsafe { p.advance_write_index(2) };
    }
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring");
    g.bench_function("ringtrace_group_of_2", |b| b.iter_custom(ours));
    g.bench_function("ringbuf_caching_group_of_2", |b| b.iter_custom(theirs));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
