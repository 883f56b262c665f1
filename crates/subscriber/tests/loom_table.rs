//! Model checks of the lock-free open-span table (`src/local/table.rs`) under loom: every
//! interleaving, and every value the memory model lets a relaxed or acquire load return, of a
//! few threads using the table at once.
//!
//! It checks the table's own code: built with `--cfg ringtrace_loom`, the table's atomics are
//! loom's (`src/sync.rs`) and the crate exports the table as `__loom` for this file only.
//!
//! ```text
//! RUSTFLAGS="--cfg ringtrace_loom" cargo test -p ringtrace-subscriber --test loom_table --release
//! ```
//!
//! The models make keys collide on purpose (same home slot), so that threads race for one slot
//! and probe past each other's slots. The keys are computed with the table's hash (Fibonacci
//! hashing of the key, top bits, in the smallest table: `MAX_PROBES` slots): if `table.rs`
//! changes its hash or its smallest size, change `same_home` with it, or the races these models
//! exist for are no longer set up.
#![cfg(ringtrace_loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;
use ringtrace_core::hash::GOLDEN;
use ringtrace_core::{SpanId, TraceId};
use ringtrace_subscriber::__loom::{OpenSpan, Release, SpanTable, MAX_PROBES};

/// Slots in every table here: the smallest the table makes.
const SLOTS: usize = MAX_PROBES;

/// `count` keys with the same home slot in a table of `SLOTS` slots.
fn same_home(count: usize) -> Vec<u64> {
    let shift = 64 - SLOTS.trailing_zeros();
    let home = |k: u64| k.wrapping_mul(GOLDEN) >> shift;
    let target = home(1);
    (1..).filter(|&k| home(k) == target).take(count).collect()
}

/// A value whose every part depends on `n`, so a value torn between two writes is never equal
/// to either.
fn value(n: u64) -> OpenSpan {
    OpenSpan {
        span: SpanId::new(n).unwrap(),
        trace: TraceId::new(u128::from(n) << 64 | u128::from(n + 0x100)).unwrap(),
        sampled: n % 2 == 0,
        recorded: true,
        parent_key: Some(n + 0x200),
        carrier: std::num::NonZeroU64::new(n + 0x300),
        meta: None,
        has_request: n % 3 == 0,
        dropped: n % 5 == 0,
    }
}

/// Runs `f` under loom (`LOOM_MAX_PREEMPTIONS` and the other loom variables apply), and checks
/// that loom explored more than one execution: a model whose threads never interleave checks
/// nothing. (The racing operations all run on spawned threads: loom explored a single schedule
/// when the main thread raced a spawned one.)
fn model(f: impl Fn() + Sync + Send + 'static) {
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = executions.clone();
    loom::model::Builder::new().check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    let executions = executions.load(std::sync::atomic::Ordering::Relaxed);
    assert!(executions > 1, "loom explored {executions} execution(s)");
}

/// (a) Two threads insert distinct keys with the same home slot at once: they race for the
/// slot, and the loser probes on. Each then finds its own value under its own key, never the
/// other's; a lookup of the other's key finds nothing or exactly the other's value.
#[test]
fn concurrent_inserts_of_colliding_keys() {
    let keys = same_home(2);
    model(move || {
        let table = Arc::new(SpanTable::new(SLOTS));
        let threads: Vec<_> = (0..2)
            .map(|t| {
                let (table, mine, theirs) = (table.clone(), keys[t], keys[1 - t]);
                thread::spawn(move || {
                    table.insert(mine, value(mine)).unwrap();
                    assert_eq!(table.get(mine), Some(value(mine)));
                    let other = table.get(theirs);
                    assert!(other.is_none() || other == Some(value(theirs)), "{other:?}");
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for &k in &keys {
            assert_eq!(table.remove(k), Some(value(k)));
            assert_eq!(table.get(k), None);
        }
    });
}

/// (b) One thread inserts a key into a slot that held another key's value (a tombstone);
/// another looks it up. A lookup racing the insert finds nothing or the whole new value — never
/// fields of the old value mixed in (a torn trace id). Once the insert happened-before the
/// lookup (here through a release/acquire flag), the lookup finds the whole value.
#[test]
fn lookup_sees_a_whole_value() {
    let keys = same_home(2);
    let (old, new) = (keys[0], keys[1]);
    model(move || {
        let table = Arc::new(SpanTable::new(SLOTS));
        // The home slot now holds `old`'s fields under a tombstone; `new` will reuse it.
        table.insert(old, value(old)).unwrap();
        table.remove(old).unwrap();
        let published = Arc::new(AtomicBool::new(false));
        let writer = {
            let (table, published) = (table.clone(), published.clone());
            thread::spawn(move || {
                table.insert(new, value(new)).unwrap();
                published.store(true, Ordering::Release);
            })
        };
        let reader = {
            let (table, published) = (table.clone(), published.clone());
            thread::spawn(move || {
                let after = published.load(Ordering::Acquire);
                let seen = table.get(new);
                if after {
                    assert_eq!(seen, Some(value(new)));
                } else {
                    assert!(seen.is_none() || seen == Some(value(new)), "{seen:?}");
                }
            })
        };
        writer.join().unwrap();
        reader.join().unwrap();
        assert_eq!(table.get(new), Some(value(new)));
        assert_eq!(table.get(old), None);
    });
}

/// (c) `a` and `b` share a home slot, `b` one slot further on. One thread removes `a` and
/// inserts `c` (same home again), reusing `a`'s tombstone; another thread meanwhile looks up `b`
/// — probing through the slot being reused — and `c`. `b` is always found whole; `c` is either
/// not there yet or whole.
#[test]
fn tombstone_reuse_beside_a_lookup() {
    let keys = same_home(3);
    let (a, b, c) = (keys[0], keys[1], keys[2]);
    model(move || {
        let table = Arc::new(SpanTable::new(SLOTS));
        table.insert(a, value(a)).unwrap();
        table.insert(b, value(b)).unwrap();
        let churn = {
            let table = table.clone();
            thread::spawn(move || {
                assert_eq!(table.remove(a), Some(value(a)));
                table.insert(c, value(c)).unwrap();
            })
        };
        let lookup = {
            let table = table.clone();
            thread::spawn(move || {
                assert_eq!(table.get(b), Some(value(b)));
                let seen = table.get(c);
                assert!(seen.is_none() || seen == Some(value(c)), "{seen:?}");
            })
        };
        churn.join().unwrap();
        lookup.join().unwrap();
        assert_eq!(table.get(a), None);
        assert_eq!(table.get(b), Some(value(b)));
        assert_eq!(table.get(c), Some(value(c)));
    });
}

/// (d) A span with two handles, released on two threads at once: exactly one release is the
/// last, it returns the whole value, and the span is gone afterwards.
#[test]
fn concurrent_releases_close_once() {
    let key = same_home(1)[0];
    model(move || {
        let table = Arc::new(SpanTable::new(SLOTS));
        table.insert(key, value(key)).unwrap();
        assert!(table.add_ref(key));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let table = table.clone();
                thread::spawn(move || table.release(key))
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let last: Vec<_> = results.iter().filter(|(r, _)| *r == Release::Last).collect();
        assert_eq!(last.len(), 1, "{results:?}");
        assert_eq!(last[0].1, Some(value(key)));
        assert!(results.contains(&(Release::Remaining, None)), "{results:?}");
        assert_eq!(table.get(key), None);
    });
}

/// (e) One thread removes a key and inserts another that reuses its slot, while another thread
/// looks the first key up. The lookup finds the first key's whole value or nothing: never the
/// second key's fields under the first key (the table's `get` checks the key again after
/// reading, and the insert fences after reserving the slot, as a seqlock's writer does).
#[test]
fn a_lookup_of_a_key_whose_slot_is_reused_sees_its_own_value_or_none() {
    let keys = same_home(2);
    let (old, new) = (keys[0], keys[1]);
    model(move || {
        let table = Arc::new(SpanTable::new(SLOTS));
        table.insert(old, value(old)).unwrap();
        let writer = {
            let table = table.clone();
            thread::spawn(move || {
                assert_eq!(table.remove(old), Some(value(old)));
                table.insert(new, value(new)).unwrap();
            })
        };
        let reader = {
            let table = table.clone();
            thread::spawn(move || {
                let seen = table.get(old);
                assert!(seen.is_none() || seen == Some(value(old)), "{seen:?}");
            })
        };
        writer.join().unwrap();
        reader.join().unwrap();
        assert_eq!(table.get(new), Some(value(new)));
        assert_eq!(table.get(old), None);
    });
}

/// (f) A remote parent sets an open span's trace and sampling decision while another thread flags
/// it as carrying a request id: both updates stay (each touches only its own bit of the flags).
#[test]
fn a_trace_set_beside_a_request_flag_keeps_both() {
    model(|| {
        let table = Arc::new(SpanTable::new(SLOTS));
        // Not sampled, no request id, not a stand-in.
        let start = OpenSpan { sampled: false, has_request: false, dropped: false, ..value(8) };
        table.insert(8, start).unwrap();
        let trace = TraceId::new(0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736).unwrap();
        let remote = {
            let table = table.clone();
            thread::spawn(move || assert!(table.set_trace(8, trace, true)))
        };
        let request = {
            let table = table.clone();
            thread::spawn(move || table.set_has_request(8))
        };
        remote.join().unwrap();
        request.join().unwrap();
        let now = table.get(8).unwrap();
        assert_eq!((now.trace, now.sampled, now.has_request), (trace, true, true));
        assert_eq!((now.recorded, now.dropped), (start.recorded, false));
        assert_eq!(now.carrier, start.carrier, "the carrier shares the flags' word");
    });
}
