//! A bounded single-producer single-consumer ring of `Copy` records: the per-thread ring.
//!
//! The ring buffer itself, [`Ring`], is ours: its indices and slots live where its maker puts
//! them, in allocations of its own or in a mapped file (`ringfile`), where a reader of a dead
//! process's ring finds which records were published. It implements `ringbuf`'s `Observer`,
//! `Raw` and `RingBuffer` traits, and its writing end, [`Producer`], is `ringbuf`'s caching
//! producer over it: the thread that owns it takes the vacant slots as two slices
//! (`vacant_slices_mut`), writes a group of records (a span or an event) in place and publishes
//! the group with one release store of the write index (`advance_write_index`). The reading end,
//! [`Consumer`], held by the drain thread, is ours: it reads published records in place, and may
//! read records without freeing them ([`Consumer::consume`]) and free them later
//! ([`Consumer::release`]): the drain frees records only once the recording holds them, so that a
//! process killed at any moment leaves every record it published either in the recording or in
//! its ring. `ringbuf`'s consumer frees what it reads.
//!
//! Indices run modulo twice the capacity (`ringbuf`'s convention), so that a full ring
//! (`capacity` records between read and write) and an empty one (none) differ; the slot of index
//! `i` is `i` or `i - capacity`. The consumer shares how far it has freed twice: as the read
//! index, which the producer loads, and as a *position*, the records freed since the ring was
//! made, which only grows: a ring file thus tells a reader where its records stand in the ring's
//! history.
//!
//! Orderings, the whole protocol:
//! - the producer writes slots, then stores the write index (Release); the consumer loads it
//!   (Acquire), then reads the slots below it: it sees the records whole;
//! - the consumer reads slots, then stores the read position and index (Release); the producer
//!   loads the index (Acquire, on every `vacant_slices_mut`), then overwrites the slots below it:
//!   it never overwrites a record being read;
//! - the producer's drop clears `writer_held` (Release, a swap) after its last publish; a
//!   consumer that loads `false` (Acquire) then sees every record ever published, so once it has
//!   read them all the ring can be freed or reused for another thread ([`Consumer::reuse`]).
//!
//! Why `ringbuf`'s producer (issue #15): `cargo bench -p ringtrace-subscriber --bench ring`
//! writes a group of two records in place and publishes it. The hand-written producer this
//! replaced took 2.6 ns, `ringbuf` 0.6's caching producer over its own `HeapRb` 3.8 ns (it
//! reloads the consumer's index on every `vacant_slices_mut`): within the 2 ns the project
//! allows for using the ecosystem's ring. The figures of this ring are in `benches/README.md`.
//!
//! The atomics and the `Arc` come from [`crate::sync`]: built with `--cfg ringtrace_loom` they
//! are loom's, and `tests/loom_ring.rs` model-checks this very code with `ringbuf`'s producer
//! in it, including (through a loom cell per slot, `Ring::touch`) that no slot is read and
//! written without a happens-before between the two.

// Public for the loom model checks, which reach it through `__loom`.
#![cfg_attr(not(ringtrace_loom), allow(unreachable_pub))]

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::num::NonZeroUsize;
use std::ptr::NonNull;

use ringbuf::traits::{Observer, Producer as _, Raw, RingBuffer};
use ringbuf::wrap::CachingProd;

use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::sync::Arc;

/// A value alone on its cache line, so that the index one side stores does not evict the line
/// the other side keeps reading.
#[repr(align(64))]
struct CacheLine<T>(T);

/// What the consumer shares: how far it has freed, as a position and as an index.
#[repr(C)]
struct ReadSide {
    /// The records freed so far.
    position: AtomicU64,
    /// `position` modulo `2 * capacity`: the read index, which the producer loads (a division
    /// there on every group would cost more than the second store here).
    index: AtomicU64,
}

/// The indices both ends share, each side's on a cache line of its own: in the ring's own
/// allocation, or at the head of its file, where a reader of a dead process's ring finds them
/// (`repr(C)`: the write index at byte 0, the read position at byte 64 and the read index at
/// byte 72, all `u64`).
#[repr(C)]
pub(crate) struct Indices {
    /// The index after the last published record (below `2 * capacity`). Stored only by the
    /// producer.
    write: CacheLine<AtomicU64>,
    /// Stored only by the consumer.
    read: CacheLine<ReadSide>,
}

impl Indices {
    fn new() -> Self {
        Self {
            write: CacheLine(AtomicU64::new(0)),
            read: CacheLine(ReadSide { position: AtomicU64::new(0), index: AtomicU64::new(0) }),
        }
    }
}

/// Byte offset of the write index in [`Indices`].
#[cfg_attr(ringtrace_loom, allow(dead_code))]
pub(crate) const WRITE_OFFSET: usize = 0;
/// Byte offset of the read position in [`Indices`].
#[cfg_attr(ringtrace_loom, allow(dead_code))]
pub(crate) const READ_OFFSET: usize = 64;
/// Byte offset of the read index in [`Indices`].
#[cfg_attr(ringtrace_loom, allow(dead_code))]
pub(crate) const READ_INDEX_OFFSET: usize = 72;
/// Bytes of [`Indices`].
#[cfg_attr(ringtrace_loom, allow(dead_code))]
pub(crate) const INDICES_SIZE: usize = 128;

const _: () = assert!(std::mem::size_of::<CacheLine<u64>>() == 64);
const _: () = assert!(std::mem::size_of::<Indices>() == INDICES_SIZE);

/// Where a ring's indices and slots live.
enum Memory<T> {
    /// Allocations of its own.
    Heap { _indices: Box<Indices>, _slots: Box<[std::cell::UnsafeCell<MaybeUninit<T>>]> },
    /// Memory its maker keeps alive (a mapped file), dropped with the ring.
    #[cfg_attr(ringtrace_loom, allow(dead_code))]
    Kept(#[allow(dead_code)] Box<dyn Send + Sync>),
}

/// The state both ends share: a ring buffer in `ringbuf`'s sense (it implements its
/// `Observer`, `Raw` and `RingBuffer` traits), whose producer is `ringbuf`'s own.
pub(crate) struct Ring<T> {
    indices: NonNull<Indices>,
    /// `capacity` slots; those between the read and the write index hold published records.
    /// Written through raw pointers only (the memory is an `UnsafeCell`'s or a mapping's).
    slots: NonNull<MaybeUninit<T>>,
    capacity: NonZeroUsize,
    /// Whether a [`Producer`] exists: set by its making, cleared by its drop.
    writer_held: AtomicBool,
    /// Whether the [`Consumer`] exists.
    reader_held: AtomicBool,
    /// Under loom, one cell a slot, through which every access to the slots is reported to
    /// loom (the slots themselves must be plain memory, for `ringbuf`'s slices): a read or
    /// write of a slot with no happens-before from the other side's last access to it fails
    /// the model.
    #[cfg(ringtrace_loom)]
    shadow: Box<[crate::sync::cell::UnsafeCell<()>]>,
    _memory: Memory<T>,
}

// SAFETY: the pointers point into `_memory`, which the ring owns and which does not move (boxed
// or mapped); access to what they point at follows the protocol in the module docs. `T: Send`
// because records cross threads.
unsafe impl<T: Send> Send for Ring<T> {}
// SAFETY: as above; both ends reach the ring through an `Arc`.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Ring<T> {
    fn new(indices: NonNull<Indices>, slots: NonNull<MaybeUninit<T>>, capacity: usize, memory: Memory<T>) -> Self {
        assert!(capacity > 0 && capacity <= usize::MAX / 4, "ring capacity {capacity} out of range");
        Self {
            indices,
            slots,
            capacity: NonZeroUsize::new(capacity).expect("checked above"),
            writer_held: AtomicBool::new(false),
            reader_held: AtomicBool::new(false),
            #[cfg(ringtrace_loom)]
            shadow: (0..capacity).map(|_| crate::sync::cell::UnsafeCell::new(())).collect(),
            _memory: memory,
        }
    }

    #[inline]
    fn indices(&self) -> &Indices {
        // SAFETY: points into `_memory`, alive as long as `self`.
        unsafe { self.indices.as_ref() }
    }

    /// The slots from index `start` up to index `end` (both below `2 * capacity`, at most
    /// `capacity` apart): the first slot, and the lengths of the part up to the end of the
    /// storage and of the part that wraps to its start.
    #[inline]
    fn ranges(&self, start: usize, end: usize) -> (usize, usize, usize) {
        let capacity = self.capacity.get();
        let len = used(end, start, capacity);
        let first_slot = slot(start, capacity);
        let first = len.min(capacity - first_slot);
        (first_slot, first, len - first)
    }

    /// Reports to loom an access to `len` slots from slot `first` on.
    #[cfg(ringtrace_loom)]
    fn touch(&self, first: usize, len: usize, write: bool) {
        let capacity = self.capacity.get();
        for k in 0..len {
            let cell = &self.shadow[(first + k) % capacity];
            if write {
                cell.with_mut(|_| ());
            } else {
                cell.with(|_| ());
            }
        }
    }

    /// Stores how far the consumer has freed: `position` and its read index.
    #[inline]
    fn store_read(&self, position: u64) {
        let read = &self.indices().read.0;
        // Release, both: the consumer's reads of the freed slots happen-before the producer,
        // loading the index with Acquire, overwrites them. The position is for readers of the
        // ring's file (`recover`); stored first, it is never behind the index.
        read.position.store(position, Ordering::Release);
        read.index.store(read_index(position, self.capacity.get()) as u64, Ordering::Release);
    }
}

impl<T> Observer for Ring<T> {
    type Item = T;

    #[inline]
    fn capacity(&self) -> NonZeroUsize {
        self.capacity
    }

    /// Acquire, pairing with the consumer's release: the slots it freed are then the
    /// producer's to overwrite.
    #[inline]
    fn read_index(&self) -> usize {
        self.indices().read.0.index.load(Ordering::Acquire) as usize
    }

    /// Acquire, pairing with the producer's release: the records below it are then visible.
    #[inline]
    fn write_index(&self) -> usize {
        self.indices().write.0.load(Ordering::Acquire) as usize
    }

    #[inline]
    fn read_is_held(&self) -> bool {
        self.reader_held.load(Ordering::Acquire)
    }

    #[inline]
    fn write_is_held(&self) -> bool {
        self.writer_held.load(Ordering::Acquire)
    }
}

// SAFETY: `capacity` is fixed and in range (checked by `new`); the indices stay below
// `2 * capacity` (the producer's through `ringbuf`'s arithmetic, the consumer's through
// `read_index`); `ranges` covers exactly the slots from `start` to `end`, the first part non-empty
// when the range is; every store publishes at once, and the hold flags are swapped atomically.
unsafe impl<T> Raw for Ring<T> {
    #[inline]
    unsafe fn unsafe_slices(&self, start: usize, end: usize) -> (&[MaybeUninit<T>], &[MaybeUninit<T>]) {
        let (first_slot, first, second) = self.ranges(start, end);
        #[cfg(ringtrace_loom)]
        self.touch(first_slot, first + second, false);
        let slots = self.slots.as_ptr();
        // SAFETY: `first_slot + first <= capacity` and `second <= first_slot`: both ranges are
        // inside the storage, disjoint; the caller holds the rights to read them.
        unsafe {
            (std::slice::from_raw_parts(slots.add(first_slot), first), std::slice::from_raw_parts(slots, second))
        }
    }

    #[inline]
    unsafe fn unsafe_slices_mut(&self, start: usize, end: usize) -> (&mut [MaybeUninit<T>], &mut [MaybeUninit<T>]) {
        let (first_slot, first, second) = self.ranges(start, end);
        #[cfg(ringtrace_loom)]
        self.touch(first_slot, first + second, true);
        let slots = self.slots.as_ptr();
        // SAFETY: as in `unsafe_slices`; the memory is interior-mutable (an `UnsafeCell`'s or a
        // shared mapping's), and the caller holds the only rights to these slots.
        unsafe {
            (
                std::slice::from_raw_parts_mut(slots.add(first_slot), first),
                std::slice::from_raw_parts_mut(slots, second),
            )
        }
    }

    #[inline]
    unsafe fn set_read_index(&self, value: usize) {
        let read = &self.indices().read.0;
        let old = read.index.load(Ordering::Relaxed) as usize;
        let freed = used(value, old, self.capacity.get()) as u64;
        self.store_read(read.position.load(Ordering::Relaxed) + freed);
    }

    /// Release: the slot writes before it happen-before the consumer's Acquire load of the
    /// index, and so before its reads of the slots.
    #[inline]
    unsafe fn set_write_index(&self, value: usize) {
        self.indices().write.0.store(value as u64, Ordering::Release);
    }

    unsafe fn hold_read(&self, flag: bool) -> bool {
        self.reader_held.swap(flag, Ordering::AcqRel)
    }

    /// Cleared (Release) by the producer's drop after its last publish: a consumer that loads
    /// `false` with Acquire then sees every record it published.
    unsafe fn hold_write(&self, flag: bool) -> bool {
        self.writer_held.swap(flag, Ordering::AcqRel)
    }
}

impl<T> RingBuffer for Ring<T> {}

/// The handle `ringbuf`'s producer holds: an `Arc` of ours (loom's under loom, which `ringbuf`
/// does not know).
pub(crate) struct RingRef<T>(Arc<Ring<T>>);

impl<T> Clone for RingRef<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> AsRef<Ring<T>> for RingRef<T> {
    fn as_ref(&self) -> &Ring<T> {
        &self.0
    }
}

// SAFETY: every clone points at the one ring the `Arc` keeps alive.
unsafe impl<T> ringbuf::rb::RbRef for RingRef<T> {
    type Rb = Ring<T>;
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

/// The slot of `index` (below `2 * capacity`).
#[inline]
fn slot(index: usize, capacity: usize) -> usize {
    debug_assert!(index < 2 * capacity);
    if index >= capacity {
        index - capacity
    } else {
        index
    }
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
    let slots: Box<[std::cell::UnsafeCell<MaybeUninit<T>>]> =
        (0..capacity).map(|_| std::cell::UnsafeCell::new(MaybeUninit::uninit())).collect();
    let ring = Ring::new(
        NonNull::from(&*indices),
        // `UnsafeCell` is `repr(transparent)`: the slice is laid out as `[MaybeUninit<T>]`.
        NonNull::new(slots.as_ptr().cast_mut().cast()).expect("a boxed slice is never null"),
        capacity,
        Memory::Heap { _indices: indices, _slots: slots },
    );
    ends(ring)
}

/// A ring in memory its caller provides (a mapped file), whose indices read zero (a ring file
/// reused after a process restart is not: files are made new and zeroed).
///
/// # Safety
/// `indices` points at an [`Indices`] and `slots` at `capacity` slots of `T`, both properly
/// aligned, disjoint, used by nothing else, writable through these pointers, and valid as long
/// as `keep` lives; the indices hold zero.
#[cfg(not(ringtrace_loom))]
pub unsafe fn ring_in<T: Copy>(
    indices: NonNull<Indices>,
    slots: NonNull<T>,
    capacity: usize,
    keep: Box<dyn Send + Sync>,
) -> (Producer<T>, Consumer<T>) {
    ends(Ring::new(indices, slots.cast(), capacity, Memory::Kept(keep)))
}

fn ends<T: Copy>(ring: Ring<T>) -> (Producer<T>, Consumer<T>) {
    let capacity = ring.capacity.get();
    let ring = Arc::new(ring);
    // SAFETY: the flag is clear (a new ring); the consumer below is the only one.
    let held = unsafe { ring.hold_read(true) };
    debug_assert!(!held);
    let producer = Producer::new(&ring);
    let consumer = Consumer { ring, capacity, read: 0, seen: 0, freed: 0, known_write: Cell::new(0) };
    (producer, consumer)
}

/// The writing end of a ring: `ringbuf`'s caching producer, which keeps the write index and a
/// copy of the read index to itself and reloads the read index on each
/// [`vacant`](Self::vacant). Exactly one exists while the ring's `writer_held` is set.
pub struct Producer<T> {
    inner: CachingProd<RingRef<T>>,
}

/// The vacant slots a [`Producer`] handed out: the records of a group go into slots `0..len`,
/// in order, and are published with [`Producer::publish`].
pub struct Vacant<T> {
    first: *mut MaybeUninit<T>,
    first_len: usize,
    second: *mut MaybeUninit<T>,
    len: usize,
}

impl<T> Default for Vacant<T> {
    /// No slots.
    fn default() -> Self {
        Self { first: std::ptr::null_mut(), first_len: 0, second: std::ptr::null_mut(), len: 0 }
    }
}

// SAFETY: plain pointers into a ring's slots, used only by the thread holding the ring's producer
// (moving the `Vacant` with it).
unsafe impl<T: Send> Send for Vacant<T> {}

impl<T: Copy> Vacant<T> {
    /// How many slots.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none (the ring is full).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `k`th vacant slot, from the write index on.
    ///
    /// # Safety
    /// `k < len()`, and the producer that handed the slots out has published nothing and handed
    /// out no slots since: the slot is still vacant, and only this producer's thread touches it.
    #[inline]
    pub unsafe fn slot(&self, k: usize) -> *mut T {
        debug_assert!(k < self.len);
        // SAFETY: `k < len`: slot `k` of the first part, or of the second.
        unsafe {
            if k < self.first_len {
                self.first.add(k).cast()
            } else {
                self.second.add(k - self.first_len).cast()
            }
        }
    }
}

impl<T: Copy> Producer<T> {
    fn new(ring: &Arc<Ring<T>>) -> Self {
        // `CachingProd::new` sets `writer_held` (and panics if it was set: never, as `ends` and
        // `Consumer::reuse` make a producer only for a ring without one).
        Self { inner: CachingProd::new(RingRef(ring.clone())) }
    }

    /// The ring's capacity in records.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.inner.capacity().get()
    }

    /// The write index (below `2 * capacity`): where the next group starts. The producer's own
    /// copy; no atomic access.
    #[inline]
    pub fn write_index(&self) -> usize {
        self.inner.write_index()
    }

    /// The vacant slots, from the write index on: `ringbuf`'s `vacant_slices_mut`, which
    /// reloads the read index (Acquire: the consumer's reads of the slots it freed happen-before
    /// our overwriting them).
    #[inline]
    pub fn vacant(&mut self) -> Vacant<T> {
        let (first, second) = self.inner.vacant_slices_mut();
        Vacant {
            first: first.as_mut_ptr(),
            first_len: first.len(),
            second: second.as_mut_ptr(),
            len: first.len() + second.len(),
        }
    }

    /// Publishes the first `count` slots of the last [`vacant`](Self::vacant) with one release
    /// store of the write index (`ringbuf`'s `advance_write_index`), all at once: the consumer
    /// sees none of them or all of them.
    ///
    /// # Safety
    /// Those slots were all written since that call, and `count` is at most its `len()`.
    #[inline]
    pub unsafe fn publish(&mut self, count: usize) {
        // SAFETY: the caller's contract is `advance_write_index`'s.
        unsafe { self.inner.advance_write_index(count) };
    }

    /// The records published and not yet freed (the read index reloaded).
    #[inline]
    pub fn occupied(&self) -> usize {
        self.inner.occupied_len()
    }

    /// Whether the consumer has been dropped (its collector shut down): nothing will read the
    /// ring any more, and the producer may as well be dropped.
    pub fn reader_gone(&self) -> bool {
        !self.inner.read_is_held()
    }
}

/// The reading end of a ring. Ours rather than `ringbuf`'s: it reads records without freeing
/// them ([`consume`](Self::consume)) and frees them later ([`release`](Self::release)), and it
/// shares a read position as well as the index.
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
    /// initialised, which bounds what [`consume`](Self::consume) accepts.
    known_write: Cell<usize>,
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
        !self.ring.write_is_held()
    }

    /// Loads the write index (Acquire, pairing with `publish`'s Release: the records below it
    /// are then visible) and remembers it.
    #[inline]
    fn load_write(&self) -> usize {
        let write = self.ring.write_index();
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
    #[inline]
    pub fn read_with<R>(&self, f: impl FnOnce(&[T], &[T]) -> R) -> R {
        let write = self.load_write();
        // SAFETY: the slots from the read index to the write index just loaded with Acquire
        // (at most `capacity` of them) hold published records, visible and initialised; the
        // producer writes none of them until the read index passes them, which takes
        // `skip(&mut self)`, so not while the slices (borrowing `self`) live.
        let (a, b) = unsafe { self.ring.unsafe_slices(self.read, write) };
        // SAFETY: initialised, as above; `MaybeUninit<T>` has `T`'s layout.
        let (a, b) = unsafe {
            (
                std::slice::from_raw_parts(a.as_ptr().cast::<T>(), a.len()),
                std::slice::from_raw_parts(b.as_ptr().cast::<T>(), b.len()),
            )
        };
        f(a, b)
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
    /// for the producer, with one release store of each read index (none when nothing new is
    /// freed).
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
        self.ring.store_read(position);
    }

    /// A new producer for this ring, when the old one is gone and every record it published has
    /// been skipped: a ring of an exited thread, handed to a new thread. `None` otherwise.
    pub fn reuse(&mut self) -> Option<Producer<T>> {
        // `writer_gone` first: its Acquire makes the final write index visible to `is_empty`.
        if !self.writer_gone() || !self.is_empty() || self.freed != self.seen {
            return None;
        }
        Some(Producer::new(&self.ring))
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        // SAFETY: this consumer holds the role and reads nothing more.
        unsafe { self.ring.hold_read(false) };
    }
}

#[cfg(all(test, not(ringtrace_loom)))]
mod tests {
    use super::*;

    /// Writes `values` as one group and publishes it; returns false (writing nothing) when the
    /// ring lacks room.
    fn push_group<T: Copy>(p: &mut Producer<T>, values: &[T]) -> bool {
        let vacant = p.vacant();
        if vacant.len() < values.len() {
            return false;
        }
        for (k, &v) in values.iter().enumerate() {
            // SAFETY: `k < values.len() <= vacant.len()`; nothing published since `vacant`.
            unsafe { vacant.slot(k).write(v) };
        }
        // SAFETY: the first `values.len()` vacant slots were just written.
        unsafe { p.publish(values.len()) };
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
        assert_eq!(p.vacant().len(), 5);
        assert!(push_group(&mut p, &[1, 2, 3]));
        assert!(push_group(&mut p, &[4, 5]));
        assert!(p.vacant().is_empty());
        assert_eq!(p.occupied(), 5);
        assert!(!push_group(&mut p, &[6]));
        assert_eq!(c.occupied(), 5);
        assert_eq!(read_all(&c), [1, 2, 3, 4, 5]);
        c.skip(2);
        // The producer sees the freed slots at its next look.
        assert_eq!(p.vacant().len(), 2);
        assert_eq!(p.occupied(), 3);
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
        let vacant = p.vacant();
        assert_eq!(vacant.len(), 7);
        for k in 0..4 {
            // SAFETY: `k < 7`, the vacant count; nothing published since.
            unsafe { vacant.slot(k).write(10 + k as u32) };
            assert!(c.is_empty(), "record {k} visible before publish");
        }
        // SAFETY: the four slots were just written.
        unsafe { p.publish(4) };
        assert_eq!(c.occupied(), 4);
        assert_eq!(c.read_with(|a, b| (a.to_vec(), b.to_vec())), (vec![10, 11], vec![12, 13]));
        c.skip(4);
        assert!(c.is_empty());
    }

    /// The read position and index are both shared, and agree: what a ring file holds.
    #[test]
    fn the_read_position_and_index_are_shared() {
        let (mut p, mut c) = ring::<u32>(3);
        let indices = |c: &Consumer<u32>| {
            let read = &c.ring.indices().read.0;
            (read.position.load(Ordering::Relaxed), read.index.load(Ordering::Relaxed))
        };
        for round in 0..10u64 {
            assert!(push_group(&mut p, &[1, 2]));
            assert_eq!(c.occupied(), 2);
            c.consume(2);
            assert_eq!(indices(&c), (2 * round, (2 * round) % 6), "consumed, not freed");
            c.release(c.position());
            assert_eq!(indices(&c), (2 * round + 2, (2 * round + 2) % 6));
            assert_eq!(c.freed(), 2 * round + 2);
        }
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
        assert_eq!(p.vacant().len(), 3);
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
