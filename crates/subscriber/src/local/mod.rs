//! The hot path: per-thread rings and what application threads do on each callback.
//!
//! Each thread that records gets, per collector, one bounded SPSC ring ([`ringbuf::HeapRb`]) that
//! only it writes and only the drain thread reads. A span or event is staged in a per-thread
//! vector (its capacity is kept, so no allocation after warm-up) and pushed to the ring in one
//! `push_slice`, all or nothing: when the ring lacks room the whole group is dropped and counted.
//! No lock is taken and no system call made after a thread's first record.

pub(crate) mod filter;
mod ops;
pub(crate) mod table;
pub(crate) mod visitor;

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ringbuf::traits::{Observer, Raw, Split};
use ringbuf::wrap::Wrap;
use ringbuf::{HeapCons, HeapProd, HeapRb};
use ringtrace_core::ids::IdGenerator;
use ringtrace_core::record::Record;

use crate::shared::Shared;
use crate::stats::ThreadCounters;

/// Records staged for one push; more than this many records in one group (a span with very many
/// long string fields) are dropped with the group.
pub(crate) const MAX_GROUP: usize = 256;

/// Closed spans' table keys a thread keeps for reuse.
const FREE_KEYS: usize = 64;

/// The drain's end of one thread's ring.
pub(crate) struct RingHandle {
    pub cons: HeapCons<Record>,
    pub counters: Arc<ThreadCounters>,
    pub thread_id: u64,
    pub thread_name: Arc<str>,
}

/// One thread's state for one collector.
pub(crate) struct LocalRing {
    collector: u64,
    prod: HeapProd<Record>,
    /// The consumer's read index as last fetched: it only moves forward, so free space computed
    /// from it is never more than the real free space. Refreshed only when it seems too small,
    /// so the hot path does not read the cache line the drain thread writes.
    cached_read: usize,
    /// The ring's capacity in records.
    capacity: usize,
    pub counters: Arc<ThreadCounters>,
    pub ids: IdGenerator,
    pub staging: Vec<Record>,
    pub scratch: String,
    pub filter_cache: filter::CallsiteCache,
    /// Spans entered on this thread, innermost last (used by the standalone subscriber).
    pub stack: Vec<u64>,
    /// Table keys of closed spans, reused first (standalone subscriber): a reused key lands on a
    /// slot still in cache, where a fresh random key would miss.
    free_keys: Vec<u64>,
    /// The next fresh key: this thread's stream in the high bits, a counter below.
    next_key: u64,
}

impl LocalRing {
    /// Pushes the staged group, all or nothing, publishing it with one index store. Returns
    /// whether it was pushed; the staging vector is cleared either way.
    #[inline]
    pub fn commit(&mut self) -> bool {
        let ok = self.push_group();
        self.staging.clear();
        ok
    }

    #[inline]
    fn push_group(&mut self) -> bool {
        let n = self.staging.len();
        let capacity = self.capacity;
        let modulus = 2 * capacity;
        // The producer's own write index is cached in the endpoint: reading it is not atomic.
        let write = self.prod.write_index();
        // Indices run modulo twice the capacity; `used` is at most `capacity`.
        let used = |read: usize| if write >= read { write - read } else { write + modulus - read };
        if capacity - used(self.cached_read) < n {
            self.cached_read = self.prod.read_index();
            if n > MAX_GROUP || capacity - used(self.cached_read) < n {
                return false;
            }
        }
        let end = if write + n >= modulus { write + n - modulus } else { write + n };
        // SAFETY: this thread owns the producer endpoint (`prod` is never shared), so no other
        // writer touches the vacant region. `[write, end)` spans `n` slots, and `n` is at most the
        // free space computed from a read index the consumer has already published; the consumer
        // only moves that index forward, so none of these slots holds an unread record. The two
        // slices cover exactly that modular range (`a.len() + b.len() == n`), they do not overlap
        // `staging`, and `Record: Copy` has no destructor to skip. `set_write_index` publishes the
        // whole group with one release store after it is written, so the drain sees all of it or
        // none of it.
        unsafe {
            let (a, b) = self.prod.unsafe_slices_mut(write, end);
            let src = self.staging.as_ptr();
            let first = a.len().min(n);
            std::ptr::copy_nonoverlapping(src, a.as_mut_ptr().cast::<Record>(), first);
            std::ptr::copy_nonoverlapping(src.add(first), b.as_mut_ptr().cast::<Record>(), n - first);
            self.prod.set_write_index(end);
        }
        true
    }

    /// A table key no open span uses: a recycled one if any, else a fresh one from this
    /// thread's range (threads' ranges never overlap).
    #[inline]
    pub fn take_key(&mut self) -> u64 {
        self.free_keys.pop().unwrap_or_else(|| {
            self.next_key += 1;
            self.next_key
        })
    }

    /// Returns the key of a span that is closed (no longer in the table) for reuse, with its
    /// generation (the bits above the 50 the table hashes) advanced: the reused key lands on the
    /// same, cache-warm table slot, while a stale `Id` of the closed span matches nothing.
    #[inline]
    pub fn recycle_key(&mut self, key: u64) {
        if self.free_keys.len() < FREE_KEYS {
            self.free_keys.push(key.wrapping_add(1 << table::HOME_BITS_COUNT));
        }
    }

    /// Counts a drop in `counter` and warns once per thread and collector.
    #[cold]
    pub fn drop_counted(&self, counter: &AtomicU64, what: &str) {
        ThreadCounters::bump(counter);
        if !self.counters.warned.swap(true, Ordering::Relaxed) {
            let name = std::thread::current().name().map(str::to_owned);
            eprintln!(
                "ringtrace: ring full on thread {}: dropping {what} records (every drop is counted and reported at shutdown; raise the ring capacity with RINGTRACE_RING_CAPACITY or Builder::ring_capacity)",
                name.as_deref().unwrap_or("<unnamed>")
            );
        }
    }
}

thread_local! {
    static LOCAL: RefCell<Vec<LocalRing>> = const { RefCell::new(Vec::new()) };
    static THREAD_NUM: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

/// A small process-wide number for the calling thread (OpenTelemetry's `thread.id`).
pub(crate) fn thread_number() -> u64 {
    THREAD_NUM.try_with(|n| *n).unwrap_or(0)
}

/// Runs `f` with the calling thread's ring for `shared`, registering one on first use.
///
/// Returns `None` when thread-local storage is gone (the thread is exiting) or re-entered.
#[inline]
pub(crate) fn with_local<R>(shared: &Shared, f: impl FnOnce(&mut LocalRing) -> R) -> Option<R> {
    LOCAL
        .try_with(|cell| {
            let mut rings = cell.try_borrow_mut().ok()?;
            let pos = match rings.iter().position(|r| r.collector == shared.id) {
                Some(p) => p,
                None => register(shared, &mut rings),
            };
            Some(f(&mut rings[pos]))
        })
        .ok()
        .flatten()
}

#[cold]
fn register(shared: &Shared, rings: &mut Vec<LocalRing>) -> usize {
    // Rings of collectors that have shut down are released here.
    rings.retain(|r| r.prod.read_is_held());
    let (prod, cons) = match shared.take_pooled_ring() {
        // A pooled ring is empty and its old producer is gone (the drain pools a ring only then),
        // so its write end can be taken again.
        Some(cons) => (HeapProd::new(cons.rb_ref().clone()), cons),
        None => HeapRb::<Record>::new(shared.config.ring_capacity).split(),
    };
    let counters = Arc::new(ThreadCounters::default());
    let thread = std::thread::current();
    let handle = RingHandle {
        cons,
        counters: counters.clone(),
        thread_id: thread_number(),
        thread_name: Arc::from(thread.name().unwrap_or("")),
    };
    let stream = shared.next_stream.fetch_add(1, Ordering::Relaxed);
    shared.register_ring(handle);
    let cached_read = prod.read_index();
    rings.push(LocalRing {
        collector: shared.id,
        prod,
        cached_read,
        capacity: shared.config.ring_capacity,
        counters,
        ids: IdGenerator::new(shared.seed, stream),
        staging: Vec::with_capacity(MAX_GROUP),
        scratch: String::with_capacity(256),
        filter_cache: filter::CallsiteCache::default(),
        stack: Vec::with_capacity(32),
        free_keys: Vec::with_capacity(FREE_KEYS),
        next_key: (stream + 1) << 40,
    });
    rings.len() - 1
}
