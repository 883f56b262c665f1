//! The hot path: per-thread rings and what application threads do on each callback.
//!
//! Each thread that records gets, per collector, one bounded SPSC ring ([`crate::ring`]) that
//! only it writes and only the drain thread reads. The records of a span or event (a group) are
//! written straight into the ring's vacant slots and published with one release store of the
//! write index, all or nothing: when the ring lacks room the whole group is dropped and counted.
//! No lock is taken; after a thread's first record, the only system call is a rare wake of a
//! sleeping drain when a ring reaches a quarter full (looked at once per eighth of a ring).
//!
//! A thread reaches its ring through a one-entry cache (`FAST`: collector id and pointer) in a
//! constant-initialised thread local with no destructor, which costs a few instructions; the
//! rings themselves live in `LOCAL`, reached only on a thread's first record for a collector or
//! when a thread alternates between collectors.

pub(crate) mod filter;
pub(crate) mod keys;
mod ops;
pub(crate) mod table;
pub(crate) mod visitor;

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ringtrace_core::ids::IdGenerator;
use ringtrace_core::raw::RawRecord;
use ringtrace_core::record::Record;

use crate::messages::message;
use crate::ring::Producer;
use crate::shared::{DrainWaker, PooledRing, Shared};
use crate::stats::{Dropped, ThreadCounters};

/// Records one group may hold; a larger group (a span with very many long string fields) is
/// dropped whole.
pub(crate) const MAX_GROUP: usize = 256;

/// Closes a thread keeps while its ring is full, to push later (see `push_close`).
pub(crate) const LATE_CLOSES: usize = 256;

/// The drain's end of one thread's ring.
pub(crate) struct RingHandle {
    pub ring: PooledRing,
    pub counters: Arc<ThreadCounters>,
    pub thread_id: u64,
    pub thread_name: Arc<str>,
    /// Records consumed and not yet freed: for each batch handed to the recording's writer
    /// with records of this ring, the batch's number and the ring's position after them. They
    /// are freed once the writer is done with the batch.
    pub unwritten: std::collections::VecDeque<(u64, u64)>,
}

/// The group being written: records `[write, write + len)` (modulo twice the capacity) hold it,
/// not yet published.
#[derive(Default)]
struct Group {
    write: usize,
    /// The slot of `write`: record `i` of the group is in the slot `i` places after it.
    slot: usize,
    len: usize,
    /// Slots known to be vacant from `write` on (at most [`MAX_GROUP`]).
    room: usize,
    /// A record did not fit: the group will be dropped at commit.
    failed: bool,
}

/// One thread's state for one collector.
pub(crate) struct LocalRing {
    collector: u64,
    prod: Producer<RawRecord>,
    group: Group,
    /// Records still to publish before the next look at how full the ring is.
    until_fill_check: usize,
    waker: Arc<DrainWaker>,
    pub counters: Arc<ThreadCounters>,
    pub ids: IdGenerator,
    pub scratch: String,
    pub filter_cache: filter::CallsiteCache,
    /// Spans entered on this thread, innermost last: the parent of contextual spans and events.
    pub stack: Vec<u64>,
    /// Closes that found the ring full, oldest first: span and timestamp.
    late_closes: Vec<(ringtrace_core::SpanId, u64)>,
    /// Table keys for the standalone subscriber's spans: closed spans' keys reused first (a
    /// reused key lands on a table slot still in cache), then fresh ones.
    keys: keys::ThreadKeys,
    /// The collector prints nothing to stderr.
    quiet: bool,
    /// Callsites `enabled` was asked about that this collector had not registered yet (another
    /// thread is registering them), by address: while any is pending, every span or event
    /// registers its own callsite if it is not yet known, before its first record.
    pub unregistered: Unregistered,
}

/// Callsite addresses a thread saw unregistered in `enabled`, at most [`Unregistered::CAPACITY`]
/// (more at once on one thread would take as many callsites mid-registration, each between its
/// `enabled` and its record; the oldest is then forgotten, and its record is still checked while
/// any other is pending).
#[derive(Default)]
pub(crate) struct Unregistered {
    addresses: [u64; Unregistered::CAPACITY],
    len: u8,
}

impl Unregistered {
    const CAPACITY: usize = 8;

    /// Whether any is pending: the hot path's one test.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.len != 0
    }

    /// Notes `address` as seen unregistered.
    pub(crate) fn add(&mut self, address: u64) {
        let len = usize::from(self.len);
        if self.addresses[..len].contains(&address) {
            return;
        }
        if len == Self::CAPACITY {
            self.addresses.copy_within(1.., 0);
            self.addresses[Self::CAPACITY - 1] = address;
        } else {
            self.addresses[len] = address;
            self.len += 1;
        }
    }

    /// Forgets the addresses `registered` now holds (by this thread or by the one registering).
    pub(crate) fn forget_registered(&mut self, registered: impl Fn(u64) -> bool) {
        let mut kept = 0;
        for i in 0..usize::from(self.len) {
            let a = self.addresses[i];
            if !registered(a) {
                self.addresses[kept] = a;
                kept += 1;
            }
        }
        self.len = kept as u8;
    }
}

impl LocalRing {
    /// Starts a group with `record`, forgetting anything staged and not committed (a callback
    /// that unwound midway). Always inlined, as [`stage`](Self::stage) is: each caller begins
    /// with one kind of record.
    #[inline(always)]
    pub(crate) fn begin(&mut self, record: Record) {
        let write = self.prod.write_index();
        let room = self.prod.vacant_from(write, false).min(MAX_GROUP);
        self.group = Group { write, slot: self.prod.slot_of(write), len: 0, room, failed: false };
        self.stage(record);
    }

    /// Writes `record` as the next one of the group started by [`begin`](Self::begin), in the
    /// recording's layout. When the ring has no room for it, the group is marked failed and
    /// will be dropped at commit.
    ///
    /// Always inlined: each caller stages one kind of record, and the encoding of that kind
    /// alone is then a few stores (callgrind: 80 instructions per record more when not).
    #[inline(always)]
    pub(crate) fn stage(&mut self, record: Record) {
        self.stage_raw(RawRecord::new(&record));
    }

    /// [`stage`](Self::stage) for a record already in the recording's layout.
    #[inline(always)]
    pub(crate) fn stage_raw(&mut self, record: RawRecord) {
        if let Some(slot) = self.next_slot() {
            // SAFETY: the group's next slot, vacant and unpublished (`next_slot`).
            unsafe { self.prod.write_slot(slot, record) };
            self.group.len += 1;
        }
    }

    /// [`stage`](Self::stage) for a record made in its ring slot: `make` is given the slot,
    /// zeroed, so that the record is not built elsewhere and copied.
    #[inline(always)]
    pub(crate) fn stage_made(&mut self, make: impl FnOnce(&mut RawRecord)) {
        if let Some(slot) = self.next_slot() {
            // SAFETY: the group's next slot, vacant and unpublished (`next_slot`); it is written
            // before it is amended.
            unsafe {
                self.prod.write_slot(slot, RawRecord::ZERO);
                self.prod.amend_slot(slot, make);
            }
            self.group.len += 1;
        }
    }

    /// The slot of the group's next record, for the caller to write and then count in `len`:
    /// the slot of index `write + len`, vacant (`len < room`, a vacant count for the group's
    /// start, the current write index) and not published until [`commit`](Self::commit).
    /// `None` when the ring has no room for it (the group is then marked failed).
    #[inline(always)]
    fn next_slot(&mut self) -> Option<usize> {
        if self.group.len >= self.group.room && !self.more_room() {
            return None;
        }
        Some(self.prod.slot_after(self.group.slot, self.group.len))
    }

    /// How many records the current group holds so far (the index the next one will take).
    #[inline]
    pub(crate) fn staged(&self) -> usize {
        self.group.len
    }

    /// Changes the `i`th record of the current group before it is published; nothing happens
    /// when the group failed or has no such record.
    #[inline]
    pub(crate) fn amend_staged(&mut self, i: usize, f: impl FnOnce(&mut RawRecord)) {
        if self.group.failed || i >= self.group.len {
            return;
        }
        let slot = self.prod.slot_after(self.group.slot, i);
        // SAFETY: record `i` of the group (index `write + i`, in this slot) was written by
        // `stage` since the last publish.
        unsafe { self.prod.amend_slot(slot, f) };
    }

    /// Refreshes the read index when the group has outgrown the room known at its start;
    /// returns whether the next record fits, and marks the group failed if not.
    #[cold]
    fn more_room(&mut self) -> bool {
        if !self.group.failed {
            self.group.room = self.prod.vacant_from(self.group.write, true).min(MAX_GROUP);
            if self.group.len < self.group.room {
                return true;
            }
        }
        self.group.failed = true;
        false
    }

    /// Publishes the staged group with one release store of the write index, or drops it if a
    /// record did not fit. Returns whether it was published.
    #[inline]
    pub(crate) fn commit(&mut self) -> bool {
        let group = &self.group;
        if group.failed {
            return false;
        }
        let len = group.len;
        let end = group.write + len;
        // SAFETY: `stage` wrote every slot from the write index up to `end` since the last
        // publish (the group did not fail).
        unsafe { self.prod.publish(end) };
        if self.until_fill_check <= len {
            self.check_fill();
        } else {
            self.until_fill_check -= len;
        }
        true
    }

    /// Once per eighth of a ring of records: when the ring is at least a quarter full, wakes the
    /// drain if it sleeps.
    #[cold]
    fn check_fill(&mut self) {
        let capacity = self.prod.capacity();
        self.until_fill_check = (capacity / 8).max(1);
        let write = self.prod.write_index();
        if capacity - self.prod.vacant_from(write, true) >= capacity / 4 {
            self.waker.wake();
        }
    }

    /// Removes the span `key` from the entered-span stack: the innermost entry, usually the top
    /// (spans may be exited out of order).
    #[inline]
    pub(crate) fn exited(&mut self, key: u64) {
        if self.stack.last() == Some(&key) {
            self.stack.pop();
        } else if let Some(i) = self.stack.iter().rposition(|k| *k == key) {
            self.stack.remove(i);
        }
    }

    /// The table key of the parent of a new span or event: the explicit parent's, else, for a
    /// contextual one, the innermost span entered on this thread.
    #[inline]
    pub(crate) fn parent_key(
        &self,
        explicit: Option<&tracing_core::span::Id>,
        contextual: bool,
    ) -> Option<u64> {
        match explicit {
            Some(p) => Some(p.into_u64()),
            None if contextual => self.stack.last().copied(),
            None => None,
        }
    }

    /// The parent of a new span or event under the standalone subscriber, whose stack holds
    /// dropped spans as `dropped`: the explicit parent's key, else the innermost entered span
    /// that was not dropped. The flag says whether a dropped span was passed over (or named).
    #[inline]
    pub(crate) fn parent_key_past(
        &self,
        explicit: Option<&tracing_core::span::Id>,
        contextual: bool,
        dropped: u64,
    ) -> (Option<u64>, bool) {
        match explicit {
            Some(p) if p.into_u64() == dropped => (None, true),
            Some(p) => (Some(p.into_u64()), false),
            None if contextual => match self.stack.last() {
                Some(&k) if k == dropped => self.innermost_kept(dropped),
                top => (top.copied(), false),
            },
            None => (None, false),
        }
    }

    #[cold]
    fn innermost_kept(&self, dropped: u64) -> (Option<u64>, bool) {
        (self.innermost_past(Some(dropped)), true)
    }

    /// The innermost span entered on this thread, passing over entries equal to `skip`.
    fn innermost_past(&self, skip: Option<u64>) -> Option<u64> {
        self.stack.iter().rev().find(|&&k| Some(k) != skip).copied()
    }

    /// A table key no open span uses (see [`keys`]); `None` only once the key space is spent.
    #[inline]
    pub(crate) fn take_key(&mut self, shared: &Shared) -> Option<u64> {
        self.keys.take(&shared.keys)
    }

    /// Returns the key of a span that is closed (no longer in the table) for reuse.
    #[inline]
    pub(crate) fn recycle_key(&mut self, key: u64) {
        self.keys.recycle(key);
    }

    /// Counts a drop in `counter` and warns once per thread and collector.
    #[cold]
    pub(crate) fn drop_counted(&self, counter: Dropped, what: &str) {
        self.counters.count(counter, false);
        if !self.counters.warned.swap(true, Ordering::Relaxed) {
            let name = std::thread::current().name().map(str::to_owned);
            message!(
                self.quiet,
                "ringtrace: thread {}: dropping records: {what} (every drop is counted and reported at shutdown; a full ring is the usual cause: raise RINGTRACE_RING_CAPACITY or Builder::ring_capacity)",
                name.as_deref().unwrap_or("<unnamed>")
            );
        }
    }
}

impl Drop for LocalRing {
    /// The thread is exiting: a last try for closes still kept (the drain frees the ring only
    /// after reading everything in it).
    fn drop(&mut self) {
        if !self.late_closes.is_empty() {
            self.retry_late_closes();
        }
    }
}

/// The rings of a thread, one per collector it has recorded for. Boxed, so that `FAST`'s pointer
/// stays valid while the vector grows.
#[allow(clippy::vec_box)] // the boxes are the point: a ring must not move when the vector grows
struct Rings(Vec<Box<LocalRing>>);

impl Drop for Rings {
    fn drop(&mut self) {
        // The thread is exiting: the rings go, so the cache must not point at them. `FAST` has no
        // destructor and stays readable until the thread is gone.
        let _ = FAST.try_with(Fast::clear);
        // Each ring's writer is released with it; the drain takes the ring back for the pool,
        // so that a new thread reuses it instead of allocating (and the kernel mapping, then
        // unmapping) a fresh one.
        while let Some(ring) = self.0.pop() {
            let waker = ring.waker.clone();
            drop(ring);
            waker.thread_exited();
        }
    }
}

/// The thread's last-used ring, and whether a ring is in use (re-entrance guard: a field's
/// `Debug` implementation may itself emit `tracing` events).
struct Fast {
    collector: Cell<u64>,
    ring: Cell<*mut LocalRing>,
    busy: Cell<bool>,
}

impl Fast {
    fn clear(&self) {
        self.collector.set(0);
        self.ring.set(std::ptr::null_mut());
    }
}

/// Marks the thread's rings in use for as long as it lives, even if the callback unwinds.
struct Busy<'a>(&'a Cell<bool>);

impl<'a> Busy<'a> {
    #[inline]
    fn take(flag: &'a Cell<bool>) -> Option<Self> {
        if flag.replace(true) {
            return None;
        }
        Some(Busy(flag))
    }
}

impl Drop for Busy<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.set(false);
    }
}

thread_local! {
    static LOCAL: RefCell<Rings> = const { RefCell::new(Rings(Vec::new())) };
    static FAST: Fast = const {
        Fast { collector: Cell::new(0), ring: Cell::new(std::ptr::null_mut()), busy: Cell::new(false) }
    };
    static THREAD_NUM: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

/// A small process-wide number for the calling thread (OpenTelemetry's `thread.id`).
pub(crate) fn thread_number() -> u64 {
    THREAD_NUM.try_with(|n| *n).unwrap_or(0)
}

/// In a child made by `fork`: lets the forking thread's rings go without touching them (they
/// may be shared with the parent, mapped from its ring files). Leaks them; the child's next
/// record registers a new ring. Called by the `fork` handler, which may take no lock.
#[cfg(all(unix, not(ringtrace_loom)))]
pub(crate) fn forget_rings_after_fork() {
    let _ = FAST.try_with(Fast::clear);
    let _ = LOCAL.try_with(|cell| {
        if let Ok(mut rings) = cell.try_borrow_mut() {
            for ring in rings.0.drain(..) {
                std::mem::forget(ring);
            }
        }
    });
}

/// Runs `f` with the calling thread's ring for `shared`, registering one on first use.
///
/// Returns `None` when thread-local storage is gone (the thread is exiting) or re-entered.
#[inline]
pub(crate) fn with_local<R>(shared: &Shared, f: impl FnOnce(&mut LocalRing) -> R) -> Option<R> {
    FAST.try_with(|fast| {
        let _busy = Busy::take(&fast.busy)?;
        let ring = if fast.collector.get() == shared.id { fast.ring.get() } else { find_ring(shared, fast)? };
        // SAFETY: `ring` points into a `Box` owned by this thread's `LOCAL`, which frees rings only
        // in `find_ring` (which re-points the cache) or on thread exit (which clears it). The busy
        // flag, held until `f` returns, makes this the only reference: a re-entrant call gets
        // `None` above, and `find_ring` runs only under the flag.
        Some(f(unsafe { &mut *ring }))
    })
    .ok()
    .flatten()
}

/// The innermost span the calling thread has entered under the collector `shared`, passing over
/// entries equal to `skip` (the standalone subscriber's dropped spans), if any. Never registers a
/// ring (a thread that never recorded has entered nothing).
pub(crate) fn innermost_entered(shared: &Shared, skip: Option<u64>) -> Option<u64> {
    FAST.try_with(|fast| {
        let _busy = Busy::take(&fast.busy)?;
        if fast.collector.get() == shared.id {
            // SAFETY: as in `with_local`: the cached pointer is valid, and the busy flag makes
            // this the only access.
            return unsafe { (*fast.ring.get()).innermost_past(skip) };
        }
        LOCAL
            .try_with(|cell| {
                let rings = cell.try_borrow().ok()?;
                rings.0.iter().find(|r| r.collector == shared.id)?.innermost_past(skip)
            })
            .ok()
            .flatten()
    })
    .ok()
    .flatten()
}

/// The thread's ring for `shared`, registered if new; makes it the cached one.
#[cold]
fn find_ring(shared: &Shared, fast: &Fast) -> Option<*mut LocalRing> {
    LOCAL
        .try_with(|cell| {
            let mut rings = cell.try_borrow_mut().ok()?;
            let pos = match rings.0.iter().position(|r| r.collector == shared.id) {
                Some(p) => p,
                // A child made by `fork`: taking a ring would take the collector's locks, which
                // a parent's thread may have held at the fork, for records nobody would read.
                None if shared.forked_away() => return None,
                None => register(shared, &mut rings.0),
            };
            let ring: *mut LocalRing = &mut *rings.0[pos];
            fast.collector.set(shared.id);
            fast.ring.set(ring);
            Some(ring)
        })
        .ok()
        .flatten()
}

#[cold]
#[allow(clippy::vec_box)] // see `Rings`
fn register(shared: &Shared, rings: &mut Vec<Box<LocalRing>>) -> usize {
    // Rings of collectors that have shut down are released here.
    rings.retain(|r| !r.prod.reader_gone());
    // A pooled ring is empty and its old producer is gone (the drain pools a ring only then), so
    // it takes a new producer.
    let pooled = shared.take_pooled_ring().and_then(|mut ring| ring.cons.reuse().map(|prod| (prod, ring)));
    let (prod, ring) = pooled.unwrap_or_else(|| shared.new_ring());
    let counters = Arc::new(ThreadCounters {
        #[cfg(all(unix, not(ringtrace_loom)))]
        file: ring.file.clone(),
        ..ThreadCounters::default()
    });
    let thread = std::thread::current();
    let thread_id = thread_number();
    let thread_name: Arc<str> = Arc::from(thread.name().unwrap_or(""));
    // The ring file names the thread before its first record can be read.
    #[cfg(all(unix, not(ringtrace_loom)))]
    if let Some(file) = &ring.file {
        file.set_owner(thread_id, &thread_name);
    }
    let handle = RingHandle {
        ring,
        counters: counters.clone(),
        thread_id,
        thread_name,
        unwritten: Default::default(),
    };
    let stream = shared.next_stream.fetch_add(1, Ordering::Relaxed);
    shared.register_ring(handle);
    let until_fill_check = (prod.capacity() / 8).max(1);
    rings.push(Box::new(LocalRing {
        collector: shared.id,
        prod,
        group: Group::default(),
        until_fill_check,
        waker: shared.waker.clone(),
        counters,
        ids: IdGenerator::new(shared.seed, stream),
        // Allocated on first use: a short-lived thread often needs neither.
        scratch: String::new(),
        filter_cache: filter::CallsiteCache::default(),
        stack: Vec::with_capacity(32),
        late_closes: Vec::new(),
        keys: keys::ThreadKeys::default(),
        quiet: shared.config.quiet,
        unregistered: Unregistered::default(),
    }));
    rings.len() - 1
}
