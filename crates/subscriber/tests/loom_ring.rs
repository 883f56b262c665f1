//! Model checks of the per-thread SPSC ring (`src/ring.rs`) under loom: every interleaving, and
//! every value the memory model lets a load return, of a producer and a consumer.
//!
//! It checks the ring's own code: built with `--cfg ringtrace_loom`, the ring's atomics, cells
//! and `Arc` are loom's (`src/sync.rs`), and the crate exports the ring as `__loom` for this file
//! (and `tests/loom_table.rs`) only. Loom's cells check every slot access: a consumer reading a
//! slot, or a producer overwriting one, without a happens-before from the other side's last
//! access fails the model ("causality violation") even when the values happen to come out right.
//!
//! ```text
//! RUSTFLAGS="--cfg ringtrace_loom" cargo test -p ringtrace-subscriber --test loom_ring --release
//! ```
//!
//! Bugs planted in `src/ring.rs` one at a time, and the models that failed:
//! - `publish`'s store of the write index Relaxed instead of Release: (1), (2), (3) — loom
//!   reports the consumer's read of a slot concurrent with the producer's write of it;
//! - the consumer's load of the write index (`read_with`, `occupied`) Relaxed instead of
//!   Acquire: (1), (2), (3), likewise;
//! - `skip`'s store of the read index Relaxed instead of Release: (2) — the producer overwrites a
//!   slot concurrently with the consumer's read of it;
//! - `vacant_from`'s reload of the read index Relaxed instead of Acquire: (2), likewise;
//! - the producer's drop storing `writer_held = false` Relaxed instead of Release: (3) — the
//!   consumer sees the writer gone, yet its read misses the last group;
//! - `writer_gone`'s load Relaxed instead of Acquire: (3), likewise;
//! - `reuse` leaving `writer_held` false: (3);
//! - the slot of index `2 * capacity` taken as `capacity` (`>` for `>=` in `slot`): (2) — the
//!   write lands outside the storage;
//! - the used count of an empty ring taken as `2 * capacity` (`>` for `>=` in `used`): (1), (2),
//!   (3).
//!
//! Under `--release` each model takes a few seconds at most: (1) explores ~300 executions, (2)
//! ~62,000 (preemptions bounded at 5; unbounded, ~50 s), (3) ~19,000.
#![cfg(ringtrace_loom)]

use loom::thread;
use ringtrace_subscriber::__loom::{ring, Consumer, Producer};

/// Runs `f` under loom, and checks that loom explored more than one execution: a model whose
/// threads never interleave checks nothing. `LOOM_MAX_PREEMPTIONS` and the other loom variables
/// apply; without `LOOM_MAX_PREEMPTIONS`, `preemptions` bounds the preemptions per execution
/// (the spinning threads of some models make the unbounded search too long).
fn model(preemptions: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = executions.clone();
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = preemptions;
    }
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    let executions = executions.load(std::sync::atomic::Ordering::Relaxed);
    assert!(executions > 1, "loom explored {executions} execution(s)");
}

/// Records per group in every model.
const GROUP: usize = 2;

/// The records of group `g`: each depends on the group and its place in it, so a record of the
/// wrong group, a stale slot or a torn group is never equal to the expected one.
fn group(g: u64) -> [u64; GROUP] {
    [100 * (g + 1) + 1, 100 * (g + 1) + 2]
}

/// Writes `records` into the ring and publishes them with one store, waiting for room.
fn push_records(p: &mut Producer<u64>, records: &[u64]) {
    let write = p.write_index();
    while p.vacant_from(write, true) < records.len() {
        thread::yield_now();
    }
    for (k, &v) in records.iter().enumerate() {
        // SAFETY: `k < records.len()`, within the vacant count just checked.
        unsafe { p.write_at(write + k, v) };
    }
    // SAFETY: the `records.len()` slots from the write index on were just written.
    unsafe { p.publish(write + records.len()) };
}

/// Writes group `g` into the ring and publishes it, waiting for room.
fn push(p: &mut Producer<u64>, g: u64) {
    push_records(p, &group(g));
}

/// Reads what is published, checks that it is whole groups, in order, from group `*next` on,
/// frees it, and advances `*next`. Returns the number of records read.
fn pop(c: &mut Consumer<u64>, next: &mut u64) -> usize {
    let n = c.read_with(|a, b| {
        let records: Vec<u64> = a.iter().chain(b).copied().collect();
        assert_eq!(records.len() % GROUP, 0, "a group was seen in part: {records:?}");
        for (i, chunk) in records.chunks(GROUP).enumerate() {
            assert_eq!(chunk, group(*next + i as u64), "records {records:?} from group {next}");
        }
        records.len()
    });
    c.skip(n);
    *next += (n / GROUP) as u64;
    n
}

/// (1) Hand-off: the producer publishes two groups while the consumer reads twice. The
/// consumer sees nothing, one group or both, each whole, with its own records, in order; the
/// rest is there after both threads end.
#[test]
fn groups_are_handed_off_whole() {
    model(None, || {
        let (mut p, mut c) = ring::<u64>(4);
        let producer = thread::spawn(move || {
            push(&mut p, 0);
            push(&mut p, 1);
            p
        });
        let consumer = thread::spawn(move || {
            let mut next = 0;
            pop(&mut c, &mut next);
            pop(&mut c, &mut next);
            (c, next)
        });
        let _p = producer.join().unwrap();
        let (mut c, mut next) = consumer.join().unwrap();
        pop(&mut c, &mut next);
        assert_eq!(next, 2);
        assert!(c.is_empty());
    });
}

/// (2) Wrap-around: four groups of two through a ring of three, so the producer waits for the
/// consumer to free slots and then overwrites them. One record written and read beforehand
/// shifts the groups to indices 1-2, 3-4, 5-6 and 1-2 (modulo six): groups wrap past the end of
/// the storage (slots 2 and 0), and past the end of the indices (5 and 6, the slot of 6 being 0).
#[test]
fn wraps_around_a_ring_of_three() {
    const GROUPS: u64 = 4;
    model(Some(5), || {
        let (mut p, mut c) = ring::<u64>(3);
        push_records(&mut p, &[0]);
        assert_eq!(c.occupied(), 1);
        c.skip(1);
        let producer = thread::spawn(move || {
            for g in 0..GROUPS {
                push(&mut p, g);
            }
        });
        let consumer = thread::spawn(move || {
            let mut next = 0;
            while next < GROUPS {
                if pop(&mut c, &mut next) == 0 {
                    thread::yield_now();
                }
            }
            c
        });
        producer.join().unwrap();
        let c = consumer.join().unwrap();
        assert!(c.writer_gone() && c.is_empty());
    });
}

/// Reads until the writer is gone, checking each read as [`pop`] does, and checks that the read
/// after seeing the writer gone found every group it published: `groups` from group `first` on.
fn drain_until_gone(c: &mut Consumer<u64>, first: u64, groups: u64) {
    let mut next = first;
    loop {
        let gone = c.writer_gone();
        let n = pop(c, &mut next);
        if gone {
            assert_eq!(next, first + groups, "the writer is gone, yet records are missing");
            assert!(c.is_empty());
            return;
        }
        if n == 0 {
            thread::yield_now();
        }
    }
}

/// (3) Thread exit and reuse: the producer publishes a group and is dropped (its thread exits).
/// A consumer that sees it gone and then reads finds the group whole — which is what lets the
/// drain free or pool the ring. The ring then serves a new producer on another thread
/// (`reuse`), whose group is read the same way.
#[test]
fn an_exited_writers_records_are_all_read_and_the_ring_reused() {
    model(None, || {
        let (mut p, mut c) = ring::<u64>(3);
        let producer = thread::spawn(move || push(&mut p, 0));
        let consumer = thread::spawn(move || {
            drain_until_gone(&mut c, 0, 1);
            let p = c.reuse().expect("the writer is gone and the ring empty");
            (c, p)
        });
        producer.join().unwrap();
        let (mut c, mut p) = consumer.join().unwrap();
        assert!(!c.writer_gone());
        // The pooled ring on a new thread: indices carry on from where the old writer stopped.
        let producer = thread::spawn(move || push(&mut p, 1));
        let consumer = thread::spawn(move || drain_until_gone(&mut c, 1, 1));
        producer.join().unwrap();
        consumer.join().unwrap();
    });
}
