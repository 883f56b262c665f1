//! A bounded single-producer single-consumer ring of `Copy` records: the per-thread ring. The
//! thread that owns the [`Producer`] writes groups of records (a span or an event) straight into
//! vacant slots and publishes each group with one release store of the write index; the drain
//! thread, owning the [`Consumer`], reads the published records in place and frees them with one
//! release store of the read index.
//!
//! Indices run modulo twice the capacity (as `ringbuf`'s do), so that a full ring (`capacity`
//! records between read and write) and an empty one (none) differ; the slot of index `i` is `i`
//! or `i - capacity`. Neither side divides on its way (every reduction is a comparison and a
//! subtraction), except the producer when it reloads the read position (rarely).
//!
//! The read index is shared as a *position*: the records freed since the ring was made, which
//! only grows (the read index is that modulo twice the capacity). A ring kept in a file
//! (`ringfile`) thus tells a reader of a dead process's ring which records it still holds and
//! where they stand in the ring's history. The consumer may also read records without freeing
//! them ([`Consumer::consume`]) and free them later ([`Consumer::release`]): the drain frees
//! records only once the recording holds them, so that a process killed at any moment leaves
//! every record it published either in the recording or in its ring.
//!
//! Orderings, the whole protocol:
//! - the producer writes slots, then stores the write index (Release); the consumer loads it
//!   (Acquire), then reads the slots below it: it sees the records whole;
//! - the consumer reads slots, then stores the read index (Release); the producer loads it
//!   (Acquire, only when its cached copy shows too little room), then overwrites the slots below
//!   it: it never overwrites a record being read;
//! - the producer's drop stores `writer_held = false` (Release) after its last publish; a
//!   consumer that loads `false` (Acquire) then sees every record ever published, so once it has
//!   read them all the ring can be freed or reused for another thread ([`Consumer::reuse`]).
//!
//! Why not `ringbuf` (the ecosystem's SPSC ring; issue #15 allows 2 ns per span for it): `ringbuf`
//! 0.6 can drive a ring buffer of ours whose indices live in the ring's file (its caching
//! producer works over any type implementing its `Observer`/`Raw`/`RingBuffer` traits), and was
//! built and measured that way (commit `28b3280`). On the hot path it cost more than 2 ns a span:
//! `cargo bench --bench span_cost`, the same run, alternated twice, `RingSubscriber` 64.1 / 65.0 ns
//! with `ringbuf`'s producer against 58.6 / 59.5 with this one (+5.5 ns), `RingLayer` 110.3 / 110.5
//! against 107.4 / 104.7 (+3 to +6 ns). Its producer reloads the consumer's read index on every
//! `vacant_slices_mut`, and the drain thread, on the other core, writes that cache line; this one
//! reloads it only when its cached copy shows too little room. In `benches/ring.rs`, where one
//! thread is both ends, the reload hits the cache and the gap is 1.2 ns (2.6 against 3.8 ns a
//! group). Figures in `benches/README.md`.
//!
//! The atomics and the slots' cells come from [`crate::sync`]: built with `--cfg ringtrace_loom`
//! they are loom's, and `tests/loom_ring.rs` model-checks this very code, including that no slot
//! is read and written without a happens-before between the two.

// Public for the loom model checks, which reach it through `__loom`.
#![cfg_attr(not(ringtrace_loom), allow(unreachable_pub))]

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::sync::cell::UnsafeCell;
use crate::sync::Arc;

/// A value alone on its cache line, so that the index one side stores does not evict the line
/// the other side keeps reading.
#[repr(align(64))]
struct CacheLine<T>(T);

/// The two indices both ends share, each on a cache line of its own: in the ring's own
/// allocation, or at the head of its file, where a reader of a dead process's ring finds them
/// (`repr(C)`: the write index at byte 0, the read position at byte 64, both `u64`).
#[repr(C)]
pub(crate) struct Indices {
    /// The index after the last published record (below `2 * capacity`). Stored only by the
    /// producer.
    write: CacheLine<AtomicU64>,
    /// The records freed so far: the read index is this modulo `2 * capacity`. Stored only by
    /// the consumer.
    read: CacheLine<AtomicU64>,
}

impl Indices {
    fn new() -> Self {
        Self { write: CacheLine(AtomicU64::new(0)), read: CacheLine(AtomicU64::new(0)) }
    }
}

/// Byte offset of the write index in [`Indices`].
#[cfg_attr(ringtrace_loom, allow(dead_code))]
pub(crate) const WRITE_OFFSET: usize = 0;
/// Byte offset of the read position in [`Indices`].
#[cfg_attr(ringtrace_loom, allow(dead_code))]
pub(crate) const READ_OFFSET: usize = 64;
/// Bytes of [`Indices`].
#[cfg_attr(ringtrace_loom, allow(dead_code))]
pub(crate) const INDICES_SIZE: usize = 128;

const _: () = assert!(std::mem::size_of::<CacheLine<u64>>() == 64);

/// Where a ring's indices and slots live.
enum Memory<T> {
    /// Allocations of its own.
    Heap { _indices: Box<Indices>, _slots: Box<[UnsafeCell<MaybeUninit<T>>]> },
    /// Memory its maker keeps alive (a mapped file), dropped with the ring.
    #[cfg_attr(ringtrace_loom, allow(dead_code))]
    Kept(#[allow(dead_code)] Box<dyn Send + Sync>),
}

/// The state both ends share.
struct Ring<T> {
    indices: NonNull<Indices>,
    /// `capacity` slots; those between the read and the write index hold published records.
    slots: NonNull<UnsafeCell<MaybeUninit<T>>>,
    capacity: usize,
    /// Whether a [`Producer`] exists: cleared by its drop, set again by [`Consumer::reuse`].
    writer_held: AtomicBool,
    /// Whether the [`Consumer`] exists: cleared by its drop.
    reader_held: AtomicBool,
    _memory: Memory<T>,
}

// SAFETY: the pointers point into `_memory`, which the ring owns and which does not move (boxed
// or mapped); access to what they point at follows the protocol in the module docs, as for the
// atomics and cells the ring held inline before. `T: Send` because records cross threads.
unsafe impl<T: Send> Send for Ring<T> {}
// SAFETY: as above; both ends reach the ring through an `Arc`.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Ring<T> {
    #[inline]
    fn indices(&self) -> &Indices {
        // SAFETY: points into `_memory`, alive as long as `self`.
        unsafe { self.indices.as_ref() }
    }

    /// The slot `i` (below `capacity`).
    #[cfg(ringtrace_loom)]
    #[inline]
    fn slot(&self, i: usize) -> &UnsafeCell<MaybeUninit<T>> {
        debug_assert!(i < self.capacity);
        // SAFETY: `i < capacity`, inside the slots of `_memory`, alive as long as `self`.
        unsafe { &*self.slots.as_ptr().add(i) }
    }
}

/// `position` (records freed so far) as a read index.
#[inline]
fn read_index(position: u64, capacity: usize) -> usize {
    (position % (2 * capacity as u64)) as usize
}

/// Records between `read` and `write` (both below `2 * capacity`).
#[inline]
fn used(write: usize, read: usize, capacity: usize) -> usize {
    if write >= read {
        write - read
    } else {
        write + 2 * capacity - read
    }
}

/// The slot of `index`, for an index below `3 * capacity` (an index below `2 * capacity` plus
/// an offset below `capacity`, not reduced).
#[inline]
fn slot(index: usize, capacity: usize) -> usize {
    debug_assert!(index < 3 * capacity);
    let index = if index >= 2 * capacity { index - 2 * capacity } else { index };
    let slot = if index >= capacity { index - capacity } else { index };
    debug_assert!(slot < capacity);
    slot
}

/// `index` reduced modulo `2 * capacity`, for an index below `4 * capacity`.
#[inline]
fn wrap(index: usize, capacity: usize) -> usize {
    debug_assert!(index < 4 * capacity);
    if index >= 2 * capacity {
        index - 2 * capacity
    } else {
        index
    }
}

/// A new empty ring of `capacity` records (any capacity above zero; no rounding).
///
/// # Panics
/// If `capacity` is zero or above `usize::MAX / 4`.
pub fn ring<T: Copy>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    assert!(capacity > 0 && capacity <= usize::MAX / 4, "ring capacity {capacity} out of range");
    let indices = Box::new(Indices::new());
    let slots: Box<[UnsafeCell<MaybeUninit<T>>]> =
        (0..capacity).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect();
    let ring = Ring {
        indices: NonNull::from(&*indices),
        slots: NonNull::new(slots.as_ptr().cast_mut()).expect("a boxed slice is never null"),
        capacity,
        writer_held: AtomicBool::new(true),
        reader_held: AtomicBool::new(true),
        _memory: Memory::Heap { _indices: indices, _slots: slots },
    };
    ends(ring)
}

/// A ring in memory its caller provides (a mapped file), whose indices read `write` and `read`
/// already (a ring file reused after a process restart is not: files are made new and zeroed).
///
/// # Safety
/// `indices` points at an [`Indices`] and `slots` at `capacity` slots of `T`, both properly
/// aligned, disjoint, used by nothing else, and valid as long as `keep` lives; the indices hold
/// zero.
#[cfg(not(ringtrace_loom))]
pub unsafe fn ring_in<T: Copy>(
    indices: NonNull<Indices>,
    slots: NonNull<T>,
    capacity: usize,
    keep: Box<dyn Send + Sync>,
) -> (Producer<T>, Consumer<T>) {
    assert!(capacity > 0 && capacity <= usize::MAX / 4, "ring capacity {capacity} out of range");
    let ring = Ring {
        indices,
        // `sync::cell::UnsafeCell` and `MaybeUninit` are `repr(transparent)`.
        slots: slots.cast(),
        capacity,
        writer_held: AtomicBool::new(true),
        reader_held: AtomicBool::new(true),
        _memory: Memory::Kept(keep),
    };
    ends(ring)
}

fn ends<T: Copy>(ring: Ring<T>) -> (Producer<T>, Consumer<T>) {
    let capacity = ring.capacity;
    let ring = Arc::new(ring);
    let producer = Producer::new(ring.clone(), 0, 0);
    let consumer = Consumer {
        ring,
        capacity,
        read: 0,
        seen: 0,
        freed: 0,
        known_write: Cell::new(0),
        #[cfg(all(target_os = "linux", not(ringtrace_loom)))]
        prefaulted: 0,
    };
    (producer, consumer)
}

/// The writing end of a ring. Exactly one exists while the ring's `writer_held` is set.
pub struct Producer<T> {
    ring: Arc<Ring<T>>,
    /// `ring.slots`' first slot (the boxed slice never moves): no bounds check on the hot path.
    slots: *const UnsafeCell<MaybeUninit<T>>,
    capacity: usize,
    /// The write index: the ring's, which only this producer stores.
    write: usize,
    /// The read index as last loaded. It only moves forward, so the room computed from it is
    /// never more than the real room; reloaded only on request, so that the hot path does not
    /// read the cache line the consumer writes.
    cached_read: usize,
}

// SAFETY: a `Producer` is the ring's only writer, and moving it to another thread moves that role
// with it; what it shares with the consumer is synchronised by the protocol in the module docs.
// The records it writes are read on the consumer's thread, hence `T: Send`. It is not `Sync`
// (its raw pointer keeps the auto trait off): two threads must not write through one producer.
unsafe impl<T: Send> Send for Producer<T> {}

impl<T: Copy> Producer<T> {
    fn new(ring: Arc<Ring<T>>, write: usize, cached_read: usize) -> Self {
        let slots = ring.slots.as_ptr().cast_const();
        let capacity = ring.capacity;
        Self { ring, slots, capacity, write, cached_read }
    }

    /// The ring's capacity in records.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The write index (below `2 * capacity`): where the next group starts. This producer's own
    /// copy; no atomic access.
    #[inline]
    pub fn write_index(&self) -> usize {
        self.write
    }

    /// The vacant slots from index `write` on, as far as the cached read index tells; with
    /// `refresh`, the read index is reloaded first (Acquire), which can only raise the count.
    ///
    /// `write` is the write index, or an index past it by records written but not yet published
    /// (reduced below `2 * capacity`): the count then excludes those records.
    #[inline]
    pub fn vacant_from(&mut self, write: usize, refresh: bool) -> usize {
        debug_assert!(write < 2 * self.capacity);
        if refresh {
            // Acquire: the consumer's reads of the slots it has freed happen-before our
            // overwriting them (its store of the read index is a release).
            self.cached_read = read_index(self.ring.indices().read.0.load(Ordering::Acquire), self.capacity);
        }
        let used = used(write, self.cached_read, self.capacity);
        debug_assert!(used <= self.capacity, "index {write} is not past the write index");
        self.capacity - used
    }

    /// Writes `value` into the slot of `index`, unpublished until [`publish`](Self::publish).
    ///
    /// # Safety
    /// `index` is `self.write_index() + k`, reduced below `2 * capacity` or not, for a `k` below
    /// a count [`vacant_from`](Self::vacant_from) returned for the current write index: the slot
    /// is inside the storage and holds no record the consumer may still read.
    #[inline]
    pub unsafe fn write_at(&mut self, index: usize, value: T) {
        // SAFETY: the slot of an index that satisfies this function's contract.
        unsafe { self.write_slot(slot(index, self.capacity), value) };
    }

    /// The slot of `index` (an index [`write_at`](Self::write_at) takes), below the capacity:
    /// with [`slot_after`](Self::slot_after), [`write_slot`](Self::write_slot) and
    /// [`amend_slot`](Self::amend_slot), a writer of a group of records reduces the group's
    /// start once, and each record's slot with one comparison (callgrind: the two of `write_at`
    /// for every record staged or amended were 144 instructions of a recorded `send`).
    #[inline]
    pub fn slot_of(&self, index: usize) -> usize {
        slot(index, self.capacity)
    }

    /// The slot `k` places after `slot` (both below the capacity, so the sum is below twice
    /// it), going round.
    #[inline]
    pub fn slot_after(&self, slot: usize, k: usize) -> usize {
        debug_assert!(slot < self.capacity && k < self.capacity);
        let s = slot + k;
        if s >= self.capacity {
            s - self.capacity
        } else {
            s
        }
    }

    /// [`write_at`](Self::write_at) by slot.
    ///
    /// # Safety
    /// `slot` is [`slot_of`](Self::slot_of) an index that satisfies `write_at`'s contract.
    #[inline]
    pub unsafe fn write_slot(&mut self, slot: usize, value: T) {
        debug_assert!(slot < self.capacity);
        // SAFETY: `slot < capacity` (the slot of an index below `3 * capacity`), so the pointer
        // is inside the boxed slice, which the `Arc` in `self.ring` keeps alive. The slot is
        // vacant (the caller's contract): the consumer read it, if ever, before storing the read
        // index this producer loaded with Acquire, and reads it again only after a publish that
        // follows this write. `T: Copy` has no destructor, so overwriting a stale record is fine.
        unsafe { (*self.slots.add(slot)).with_mut(|p| p.write(MaybeUninit::new(value))) };
    }

    /// Changes a record written by [`write_slot`](Self::write_slot) and not yet published.
    ///
    /// # Safety
    /// `slot` satisfies [`write_slot`](Self::write_slot)'s contract and was written by it since
    /// the last publish (so it is initialised and the consumer does not read it).
    #[inline]
    pub unsafe fn amend_slot(&mut self, slot: usize, f: impl FnOnce(&mut T)) {
        debug_assert!(slot < self.capacity);
        // SAFETY: in bounds as for `write_slot`; the slot holds an initialised record (the
        // caller's contract) that only this producer accesses until it is published.
        unsafe { (*self.slots.add(slot)).with_mut(|p| f((*p).assume_init_mut())) };
    }

    /// Publishes the records from the write index up to `end` (exclusive; reduced below
    /// `2 * capacity` or not) with one release store of the write index, all at once: the
    /// consumer sees none of them or all of them.
    ///
    /// # Safety
    /// Every slot from the write index up to `end` was written by [`write_at`](Self::write_at)
    /// since the last publish (so `end` is at most a vacant count past the write index): the
    /// consumer will read them as initialised records.
    #[inline]
    pub unsafe fn publish(&mut self, end: usize) {
        let end = wrap(end, self.capacity);
        debug_assert!(used(end, self.cached_read, self.capacity) <= self.capacity);
        // Release: the slot writes above happen-before the consumer's Acquire load of this index
        // and so before its reads of the slots.
        self.ring.indices().write.0.store(end as u64, Ordering::Release);
        self.write = end;
    }

    /// Whether the consumer has been dropped (its collector shut down): nothing will read the
    /// ring any more, and the producer may as well be dropped.
    pub fn reader_gone(&self) -> bool {
        // Acquire for symmetry with `writer_gone`; nothing is read on the strength of it.
        !self.ring.reader_held.load(Ordering::Acquire)
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        // Release, after every publish of this producer: a consumer that loads `false` with
        // Acquire then sees the final write index and every record below it.
        self.ring.writer_held.store(false, Ordering::Release);
    }
}

/// The reading end of a ring.
pub struct Consumer<T> {
    ring: Arc<Ring<T>>,
    capacity: usize,
    /// The index of the first record not yet read (consumed): at or past the ring's read index,
    /// which frees records.
    read: usize,
    /// Records consumed since the ring was made (`read` is this modulo `2 * capacity`).
    seen: u64,
    /// Records freed since the ring was made: the position this consumer last stored.
    freed: u64,
    /// The write index as last loaded (Acquire): every record below it is published and
    /// initialised, which bounds what [`skip`](Self::skip) accepts.
    known_write: Cell<usize>,
    /// Slots from the first on that are faulted in, or that need not be (`prefault`, Linux only).
    #[cfg(all(target_os = "linux", not(ringtrace_loom)))]
    prefaulted: usize,
}

// SAFETY: the ring's only reader; moving it to another thread moves that role (the drain pools a
// consumer and a registering thread takes it back). Its records come from the producer's thread,
// hence `T: Send`. Not `Sync` (its `Cell` keeps the auto trait off): two threads must not read
// and skip through one consumer.
unsafe impl<T: Send> Send for Consumer<T> {}

impl<T: Copy> Consumer<T> {
    /// The ring's capacity in records.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether the producer is gone (its thread exited). Check it *before* reading: when it
    /// returns `true`, a read that follows sees every record the producer ever published.
    #[inline]
    pub fn writer_gone(&self) -> bool {
        // Acquire, pairing with the producer drop's Release.
        !self.ring.writer_held.load(Ordering::Acquire)
    }

    /// Loads the write index (Acquire, pairing with `publish`'s Release: the records below it
    /// are then visible) and remembers it.
    #[inline]
    fn load_write(&self) -> usize {
        let write = self.ring.indices().write.0.load(Ordering::Acquire) as usize;
        self.known_write.set(write);
        write
    }

    /// The published records not yet consumed.
    #[inline]
    pub fn occupied(&self) -> usize {
        used(self.load_write(), self.read, self.capacity)
    }

    /// Whether no published record is left unread (some may be consumed and not yet freed).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.occupied() == 0
    }

    /// Calls `f` with the published, unread records, oldest first, as two slices (the second
    /// non-empty only when they wrap past the end of the storage). They stay unread: free them
    /// with [`skip`](Self::skip).
    ///
    /// The slices point into the ring itself. Under `--cfg ringtrace_loom` they are copies,
    /// made through loom's cells so that loom checks each read against the producer's writes.
    #[inline]
    pub fn read_with<R>(&self, f: impl FnOnce(&[T], &[T]) -> R) -> R {
        let capacity = self.capacity;
        let count = used(self.load_write(), self.read, capacity);
        let start = slot(self.read, capacity);
        let first = count.min(capacity - start);
        #[cfg(not(ringtrace_loom))]
        {
            let slots = self.ring.slots.as_ptr().cast_const().cast::<T>();
            // SAFETY: `sync::cell::UnsafeCell`, `std::cell::UnsafeCell` and `MaybeUninit` are all
            // `repr(transparent)`, so the storage is laid out as `[T; capacity]`; `start + first
            // <= capacity` and `count - first <= start`, so both ranges are inside it and
            // disjoint. They hold the `count` records from the read index on, all below the
            // write index just loaded with Acquire: written and published, hence initialised and
            // visible. The producer writes no slot of them until the read index passes them,
            // which takes `skip(&mut self)`, so not while the slices (borrowing `self`) live.
            let (a, b) = unsafe {
                (
                    std::slice::from_raw_parts(slots.add(start), first),
                    std::slice::from_raw_parts(slots, count - first),
                )
            };
            f(a, b)
        }
        #[cfg(ringtrace_loom)]
        {
            let records: Vec<T> = (0..count)
                .map(|i| {
                    self.ring
                        .slot(slot(self.read + i, capacity))
                        // SAFETY: as in the std branch, the slot holds a published record.
                        .with(|p| unsafe { (*p).assume_init() })
                })
                .collect();
            let (a, b) = records.split_at(first);
            f(a, b)
        }
    }

    /// Consumes and frees the `n` oldest unread records ([`consume`](Self::consume), then
    /// [`release`](Self::release) of everything consumed).
    ///
    /// # Panics
    /// As [`consume`](Self::consume).
    #[inline]
    pub fn skip(&mut self, n: usize) {
        self.consume(n);
        self.release(self.seen);
    }

    /// Marks the `n` oldest unread records read, without freeing them: the next
    /// [`read_with`](Self::read_with) starts after them, and the producer may not overwrite
    /// them until [`release`](Self::release).
    ///
    /// # Panics
    /// If `n` is more than the records the last [`read_with`](Self::read_with),
    /// [`occupied`](Self::occupied) or [`is_empty`](Self::is_empty) found.
    #[inline]
    pub fn consume(&mut self, n: usize) {
        let available = used(self.known_write.get(), self.read, self.capacity);
        assert!(n <= available, "skipping {n} records of {available}");
        self.read = wrap(self.read + n, self.capacity);
        self.seen += n as u64;
    }

    /// Records consumed since the ring was made: the position of the next record to read.
    #[inline]
    pub fn position(&self) -> u64 {
        self.seen
    }

    /// Records freed since the ring was made.
    #[inline]
    pub fn freed(&self) -> u64 {
        self.freed
    }

    /// Frees every consumed record before `position` (at most [`position`](Self::position))
    /// for the producer, with one release store (none when nothing new is freed).
    ///
    /// # Panics
    /// If `position` is past the records consumed.
    #[inline]
    pub fn release(&mut self, position: u64) {
        assert!(position <= self.seen, "freeing up to {position} of {} records consumed", self.seen);
        if position <= self.freed {
            return;
        }
        self.freed = position;
        // Release: our reads of the freed slots happen-before the producer, loading this
        // position with Acquire, overwrites them.
        self.ring.indices().read.0.store(position, Ordering::Release);
    }

    /// Faults in, writable, the slots the producer writes next, so that its thread does not
    /// take a page fault on them: the kernel faults a range in at once for a fraction of what a
    /// fault a page costs the thread that writes (several µs a page on a file mapping, where
    /// the file system's hooks run and dirty-page throttling may put the writer to sleep;
    /// `benches/README.md`, "Ring pages faulted in ahead").
    ///
    /// Faults in from the producer's position to `ahead` slots past it (never past the end of
    /// the storage), skipping what an earlier call did, and only once at least half of that is
    /// new: a thread that writes a little at a time costs a system call per half window, not
    /// one per call. A producer that has gone round the ring once has touched every page, and
    /// nothing more is done. Only a hint: without
    /// `MADV_POPULATE_WRITE` (Linux before 5.14), or on any error, it stops for this ring and
    /// the producer faults its pages in itself, as it would without it.
    #[cfg(all(target_os = "linux", not(ringtrace_loom)))]
    pub fn prefault(&mut self, ahead: usize) {
        let published = self.seen + used(self.known_write.get(), self.read, self.capacity) as u64;
        let Ok(published) = usize::try_from(published) else { return };
        if published >= self.capacity {
            self.prefaulted = self.capacity;
        }
        let from = self.prefaulted.max(published);
        let to = published.saturating_add(ahead).min(self.capacity);
        if from >= to || (to - from < ahead / 2 && to < self.capacity) {
            return;
        }
        // SAFETY: `sysconf` reads a constant of the process.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let base = self.ring.slots.as_ptr() as usize;
        let size = std::mem::size_of::<T>();
        let start = (base + from * size) & !(page - 1);
        let end = (base + to * size).next_multiple_of(page);
        // SAFETY: every page of `start..end` holds some of the slots `from..to`, inside the
        // ring's storage, which is mapped while the ring lives. `MADV_POPULATE_WRITE` changes
        // no byte of memory (it faults pages in, as a write would, without writing), so the
        // producer's concurrent writes and the published records are untouched.
        let done =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_POPULATE_WRITE) };
        self.prefaulted = if done == 0 { to } else { self.capacity };
    }

    /// Slots from the first on that [`prefault`](Self::prefault) faulted in or found touched.
    #[cfg(all(target_os = "linux", not(ringtrace_loom)))]
    pub fn prefaulted(&self) -> usize {
        self.prefaulted
    }

    /// A new producer for this ring, when the old one is gone and every record it published has
    /// been skipped: a ring of an exited thread, handed to a new thread. `None` otherwise.
    pub fn reuse(&mut self) -> Option<Producer<T>> {
        // `writer_gone` first: its Acquire makes the final write index visible to `is_empty`.
        if !self.writer_gone() || !self.is_empty() || self.freed != self.seen {
            return None;
        }
        // Relaxed: only this consumer sets the flag, and only the new producer, made below and
        // handed to its thread through some synchronisation, clears it again.
        self.ring.writer_held.store(true, Ordering::Relaxed);
        Some(Producer::new(self.ring.clone(), self.known_write.get(), self.read))
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        self.ring.reader_held.store(false, Ordering::Release);
    }
}

#[cfg(all(test, not(ringtrace_loom)))]
mod tests {
    use super::*;

    /// Writes `values` as one group and publishes it; returns false (writing nothing) when the
    /// ring lacks room.
    fn push_group<T: Copy>(p: &mut Producer<T>, values: &[T]) -> bool {
        let write = p.write_index();
        if p.vacant_from(write, false) < values.len() && p.vacant_from(write, true) < values.len() {
            return false;
        }
        // Even records by index, odd ones by slot, written first with another value and then
        // amended: the two ways agree wherever a group crosses the end of the storage.
        let first = p.slot_of(write);
        for (k, &v) in values.iter().enumerate() {
            // SAFETY: `k < values.len()`, within the vacant count just checked; the slot is that
            // of index `write + k`, written before it is amended.
            unsafe {
                if k % 2 == 0 {
                    p.write_at(write + k, v);
                } else {
                    let slot = p.slot_after(first, k);
                    p.write_slot(slot, values[0]);
                    p.amend_slot(slot, |r| *r = v);
                }
            }
        }
        // SAFETY: every slot up to `write + values.len()` was just written.
        unsafe { p.publish(write + values.len()) };
        true
    }

    /// Every unread record, in order.
    fn read_all<T: Copy>(c: &Consumer<T>) -> Vec<T> {
        c.read_with(|a, b| a.iter().chain(b).copied().collect())
    }

    #[test]
    fn wraps_around_with_any_capacity() {
        for capacity in [1, 5, 7] {
            let (mut p, mut c) = ring::<u64>(capacity);
            let (mut next, mut expected) = (0u64, 0u64);
            let mut split_seen = false;
            for round in 0..2000usize {
                let len = 1 + round % capacity.min(3);
                let group: Vec<u64> = (next..next + len as u64).collect();
                if push_group(&mut p, &group) {
                    next += len as u64;
                }
                assert!(p.write_index() < 2 * capacity);
                // Read everything, or only part of it, at varying times.
                if round % 3 != 0 {
                    let records = read_all(&c);
                    assert_eq!(records.len(), (next - expected) as usize);
                    assert_eq!(records, (expected..next).collect::<Vec<_>>());
                    split_seen |= c.read_with(|a, b| !a.is_empty() && !b.is_empty());
                    let n = if round % 5 == 0 { records.len() / 2 } else { records.len() };
                    c.skip(n);
                    expected += n as u64;
                }
            }
            assert!(next > 1000, "capacity {capacity}: only {next} records went through");
            assert_eq!(read_all(&c), (expected..next).collect::<Vec<_>>());
            assert!(split_seen || capacity == 1, "capacity {capacity}: never wrapped mid-read");
        }
    }

    #[test]
    fn a_full_ring_refuses() {
        let (mut p, mut c) = ring::<u32>(5);
        assert_eq!(p.vacant_from(p.write_index(), false), 5);
        assert!(push_group(&mut p, &[1, 2, 3]));
        assert!(push_group(&mut p, &[4, 5]));
        assert_eq!(p.vacant_from(p.write_index(), true), 0);
        assert!(!push_group(&mut p, &[6]));
        assert_eq!(c.occupied(), 5);
        assert_eq!(read_all(&c), [1, 2, 3, 4, 5]);
        c.skip(2);
        // The cached read index is stale until refreshed.
        assert_eq!(p.vacant_from(p.write_index(), false), 0);
        assert_eq!(p.vacant_from(p.write_index(), true), 2);
        assert!(!push_group(&mut p, &[6, 7, 8]));
        assert!(push_group(&mut p, &[6, 7]));
        assert_eq!(read_all(&c), [3, 4, 5, 6, 7]);
        assert_eq!(c.read_with(|a, b| (a.len(), b.len())), (3, 2));
    }

    #[test]
    fn a_group_is_published_at_once() {
        let (mut p, mut c) = ring::<u32>(7);
        assert!(push_group(&mut p, &[0; 5]));
        assert_eq!(c.occupied(), 5);
        c.skip(5);
        // A group of four that wraps past the end of the storage, written and then published.
        let write = p.write_index();
        assert_eq!(p.vacant_from(write, true), 7);
        for k in 0..4 {
            // SAFETY: `k < 7`, the vacant count.
            unsafe { p.write_at(write + k, 10 + k as u32) };
            assert!(c.is_empty(), "record {k} visible before publish");
            // Vacant count after the staged records.
            assert_eq!(p.vacant_from(wrap(write + k + 1, 7), false), 7 - (k + 1));
        }
        // SAFETY: the four slots were just written.
        unsafe { p.publish(write + 4) };
        assert_eq!(c.occupied(), 4);
        assert_eq!(c.read_with(|a, b| (a.to_vec(), b.to_vec())), (vec![10, 11], vec![12, 13]));
        c.skip(4);
        assert!(c.is_empty());
    }

    #[test]
    #[should_panic(expected = "skipping 3 records of 2")]
    fn skipping_unread_records_panics() {
        let (mut p, mut c) = ring::<u8>(4);
        assert!(push_group(&mut p, &[1, 2]));
        assert_eq!(c.occupied(), 2);
        c.skip(3);
    }

    #[test]
    fn reuse_only_when_the_writer_is_gone_and_the_ring_empty() {
        let (mut p, mut c) = ring::<u32>(3);
        assert!(push_group(&mut p, &[1, 2]));
        assert!(!c.writer_gone());
        assert!(c.reuse().is_none(), "writer alive");
        drop(p);
        assert!(c.writer_gone());
        assert!(c.reuse().is_none(), "records unread");
        assert_eq!(read_all(&c), [1, 2]);
        c.skip(2);
        let mut p = c.reuse().expect("writer gone and ring empty");
        assert!(!c.writer_gone());
        assert!(c.reuse().is_none(), "the new writer is alive");
        assert_eq!(p.write_index(), 2);
        assert_eq!(p.vacant_from(p.write_index(), false), 3);
        assert!(push_group(&mut p, &[3, 4, 5]));
        assert_eq!(read_all(&c), [3, 4, 5]);
        drop(p);
        assert!(c.reuse().is_none(), "records unread");
        c.skip(3);
        assert!(c.reuse().is_some());
    }

    #[test]
    fn the_producer_sees_the_consumer_go() {
        let (p, c) = ring::<u8>(2);
        assert!(!p.reader_gone());
        drop(c);
        assert!(p.reader_gone());
    }

    /// One record of the stress test: its sequence number, and its place in its group.
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Rec {
        seq: u64,
        pos: u8,
        len: u8,
    }

    /// Two threads, 1,000,000 records in groups of 1 to 4, a ring of 61: the consumer sees the
    /// records in order and every read ends on a group boundary.
    #[test]
    fn stress_two_threads() {
        const TOTAL: u64 = if cfg!(miri) { 3_000 } else { 1_000_000 };
        const CAPACITY: usize = 61;
        let (mut p, mut c) = ring::<Rec>(CAPACITY);
        let producer = std::thread::spawn(move || {
            let (mut seq, mut rng) = (0u64, 0x2545_f491_4f6c_dd1du64);
            let mut group = Vec::with_capacity(4);
            while seq < TOTAL {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let len = (1 + rng % 4).min(TOTAL - seq) as u8;
                group.clear();
                group.extend((0..len).map(|pos| Rec { seq: seq + u64::from(pos), pos, len }));
                while !push_group(&mut p, &group) {
                    std::thread::yield_now();
                }
                seq += u64::from(len);
            }
        });
        let mut expected = 0u64;
        let mut reads = 0u64;
        while expected < TOTAL {
            let gone = c.writer_gone();
            let n = c.read_with(|a, b| {
                let mut pos = 0u8;
                for r in a.iter().chain(b) {
                    assert_eq!(r.seq, expected, "{r:?}");
                    assert_eq!(r.pos, pos, "{r:?}");
                    assert!(r.len >= 1 && r.len <= 4 && r.pos < r.len, "{r:?}");
                    pos = if r.pos + 1 == r.len { 0 } else { pos + 1 };
                    expected += 1;
                }
                assert_eq!(pos, 0, "a read ended inside a group");
                a.len() + b.len()
            });
            c.skip(n);
            if n == 0 {
                assert!(!gone, "the writer left with {expected} records of {TOTAL}");
                std::thread::yield_now();
            }
            reads += 1;
        }
        producer.join().unwrap();
        assert!(c.writer_gone() && c.is_empty());
        assert!(reads > 1);
        assert!(c.reuse().is_some());
    }
}
