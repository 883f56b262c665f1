//! The open-span table: `tracing` span id → ringtrace span id and trace id, shared by all threads.
//!
//! A fixed-size, lock-free, open-addressing hash table. Inserting, finding and removing take a
//! bounded number of probes and never allocate. A `tracing` id is unique among *open* spans
//! (the subscriber may reuse it after the span closes), and a span is found only between its
//! creation and its close, so keys never collide while live.
//!
//! When every slot within the probe bound is taken, insertion fails: the caller drops the span
//! and counts it, exactly as for a full ring.

// Public for the loom model checks, which reach it through `__loom`.
#![cfg_attr(not(ringtrace_loom), allow(unreachable_pub))]

use std::num::NonZeroU64;

use crate::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use ringtrace_core::hash::GOLDEN;
use ringtrace_core::record::Meta;

use ringtrace_core::{SpanId, TraceId};

const EMPTY: u64 = 0;
const TOMBSTONE: u64 = u64::MAX;
const RESERVED: u64 = u64::MAX - 1;
/// How many low key bits choose a home slot (see `SpanTable::home`); the bits above are a
/// generation.
pub const HOME_BITS_COUNT: u32 = 50;
const HOME_BITS: u64 = (1 << HOME_BITS_COUNT) - 1;

/// Slots probed before giving up. Removal leaves a tombstone (turning it back into an empty slot
/// is unsafe without double-word atomics: a concurrent insert could become unreachable), so a
/// lookup for an absent key walks past tombstones up to this bound; inserts reuse the first
/// tombstone, which keeps live entries close to their home slot.
pub const MAX_PROBES: usize = 16;

struct Slot {
    key: AtomicU64,
    span: AtomicU64,
    trace_hi: AtomicU64,
    trace_lo: AtomicU64,
    parent: AtomicU64,
    meta: AtomicUsize,
    /// Bit 0: sampled; bit 1: recorded; bit 2: has a request id; bit 3: stands for a dropped span;
    /// bits 4 to 63: the carrier ([`OpenSpan::carrier`]), which thus costs no access of its own.
    flags: AtomicU64,
    /// Handles beyond the first (`clone_span`), for subscribers that count them.
    extra_refs: AtomicU32,
}

/// Slot-identity bits a key keeps when cut ([`cut_key`]).
const CUT_IDENTITY_BITS: u32 = HOME_BITS_COUNT - 4;
const CUT_IDENTITY: u64 = (1 << CUT_IDENTITY_BITS) - 1;

/// `key` as an entry names its [`carrier`](OpenSpan::carrier): in 60 bits, so that it shares a
/// word with the entry's flags. The generation is kept whole (two spans that held the same slot
/// identity in turn stay apart for 2^14 generations, as their keys do) and the slot identity
/// loses its top four bits, which the standalone subscriber's keys reach only after 2^46 fresh
/// identities (years at a million spans a second, even were every span to take a fresh one);
/// past that, a carrier still open may not be found by its cut key, and its request id is then
/// missed, never another's given.
#[inline]
pub fn cut_key(key: u64) -> u64 {
    (key >> HOME_BITS_COUNT) << CUT_IDENTITY_BITS | key & CUT_IDENTITY
}

/// What the table knows of an open span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenSpan {
    /// ringtrace's id for the span.
    pub span: SpanId,
    /// The span's trace.
    pub trace: TraceId,
    /// Whether the trace is sampled: unsampled spans are tracked only so that their children
    /// inherit the decision.
    pub sampled: bool,
    /// Whether its open record was pushed (sampled spans, and every local root so that a remote
    /// parent set later can still decide to sample it).
    pub recorded: bool,
    /// The table key of its recorded parent in this process, or a stand-in's (for walking up to
    /// a request id).
    pub parent_key: Option<u64>,
    /// The table key, [cut](cut_key), of the nearest span above it that carried a request id
    /// when it was made (see [`carrier_below`](Self::carrier_below)): where its request id is
    /// looked for when the walk up its open parents finds none (one of them closed).
    pub carrier: Option<NonZeroU64>,
    /// Its callsite, when the table's user stores it.
    pub meta: Option<Meta>,
    /// A request id is stored for it elsewhere.
    pub has_request: bool,
    /// It stands for a span the standalone subscriber dropped for want of ring room, under a
    /// recorded ancestor: `span`, `trace` and `sampled` are that ancestor's (what happens inside
    /// the dropped span belongs to it, as the layer finds through the registry), `recorded` is
    /// false (it has no record of its own), `parent_key` is that ancestor's key, of which it
    /// holds a handle until it closes.
    pub dropped: bool,
}

impl OpenSpan {
    /// The context to send with a request made inside this span: its trace and span ids, its
    /// sampling decision, and `request`, the request id at or above it.
    pub fn context(&self, request: Option<&str>) -> ringtrace_core::propagation::TraceContext {
        ringtrace_core::propagation::TraceContext {
            trace_id: self.trace,
            span_id: self.span,
            sampled: self.sampled,
            request_id: request.map(String::from),
        }
    }

    /// What a span made under this one, whose table key is `key`, takes as its
    /// [`carrier`](Self::carrier): this span if it carries a request id, else the carrier it
    /// took itself.
    #[inline]
    pub fn carrier_below(&self, key: u64) -> Option<NonZeroU64> {
        if self.has_request {
            NonZeroU64::new(cut_key(key))
        } else {
            self.carrier
        }
    }

    fn flags(&self) -> u64 {
        u64::from(self.sampled)
            | u64::from(self.recorded) << 1
            | u64::from(self.has_request) << 2
            | u64::from(self.dropped) << 3
            | self.carrier.map_or(0, |c| {
                debug_assert!(c.get() < 1 << 60, "a carrier is a cut key");
                c.get() << 4
            })
    }
}

/// The last handle of a span was released: the span closes.
#[derive(Debug, PartialEq, Eq)]
pub enum Release {
    /// This was the last handle.
    Last,
    /// Other handles remain.
    Remaining,
    /// No such open span.
    Unknown,
}

/// The table. See the module documentation.
pub struct SpanTable {
    slots: Box<[Slot]>,
    mask: usize,
    shift: u32,
}

impl std::fmt::Debug for SpanTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanTable").field("capacity", &self.slots.len()).finish()
    }
}

impl SpanTable {
    /// A table for about `capacity` concurrently open spans (rounded up to a power of two).
    pub fn new(capacity: usize) -> Self {
        let n = capacity.max(MAX_PROBES).next_power_of_two();
        let slots = (0..n)
            .map(|_| Slot {
                key: AtomicU64::new(EMPTY),
                span: AtomicU64::new(0),
                trace_hi: AtomicU64::new(0),
                trace_lo: AtomicU64::new(0),
                parent: AtomicU64::new(0),
                meta: AtomicUsize::new(0),
                flags: AtomicU64::new(0),
                extra_refs: AtomicU32::new(0),
            })
            .collect();
        Self { slots, mask: n - 1, shift: 64 - n.trailing_zeros() }
    }

    /// The first slot probed for `key`. Only the low 50 bits are hashed: `tracing-subscriber`'s
    /// registry ids keep a generation above them that changes each time a registry slot is
    /// reused, and hashing it would send every new span to a random (cold) table slot; without
    /// it, a reused registry slot maps to the same, cache-warm table slot. Keys still compare
    /// in full.
    #[inline]
    fn home(&self, key: u64) -> usize {
        ((key & HOME_BITS).wrapping_mul(GOLDEN) >> self.shift) as usize
    }

    #[inline]
    fn valid_key(key: u64) -> bool {
        key != EMPTY && key != TOMBSTONE && key != RESERVED
    }

    /// Records `key` as open, in the first free slot from its home. Fails when no slot is free
    /// within the probe bound, or for the three key values the table reserves (never produced by
    /// `tracing-subscriber`'s registry).
    ///
    /// `key` must not be open already, which both callers guarantee: the registry's ids are
    /// unique among open spans, and so are the standalone subscriber's keys (`keys`, proptested).
    /// So the insert takes the first free slot rather than probing on to the end of the chain
    /// for a live duplicate, and the home slot, usually free (a recycled key's own tombstone),
    /// is tried on its own first: probing a whole chain, unrolled, cost 163 instructions an
    /// insert (`benches/README.md`). Debug builds still look for a duplicate, and panic.
    #[inline]
    pub fn insert(&self, key: u64, value: OpenSpan) -> Result<(), OpenSpan> {
        if !Self::valid_key(key) {
            return Err(value);
        }
        debug_assert!(self.find(key).is_none(), "open-span table: key {key:#x} is open already");
        let home = self.home(key);
        if Self::take(&self.slots[home]) {
            Self::fill(&self.slots[home], key, value);
            return Ok(());
        }
        self.insert_past_home(home, key, value)
    }

    /// The rest of [`insert`](Self::insert): the first free slot after `home`, probing again
    /// (a bounded number of times) when a racing insert takes it first.
    #[cold]
    #[inline(never)]
    fn insert_past_home(&self, home: usize, key: u64, value: OpenSpan) -> Result<(), OpenSpan> {
        for _ in 0..MAX_PROBES {
            let mut free = None;
            let mut i = home;
            for _ in 0..MAX_PROBES {
                let slot = &self.slots[i];
                let k = slot.key.load(Ordering::Relaxed);
                if k == EMPTY || k == TOMBSTONE {
                    free = Some(slot);
                    break;
                }
                i = (i + 1) & self.mask;
            }
            let slot = free.ok_or(value)?;
            if Self::take(slot) {
                Self::fill(slot, key, value);
                return Ok(());
            }
        }
        Err(value)
    }

    /// Reserves `slot` if it is free (empty or a tombstone); whether it was.
    #[inline]
    fn take(slot: &Slot) -> bool {
        let k = slot.key.load(Ordering::Relaxed);
        let taken = (k == EMPTY || k == TOMBSTONE)
            && slot.key.compare_exchange(k, RESERVED, Ordering::Acquire, Ordering::Relaxed).is_ok();
        if taken {
            // The writer's half of `get`'s check, as in a seqlock: a lookup that reads any field
            // stored after this fence also sees the key changed when it looks again, and drops
            // what it read. (On x86 it costs nothing: stores are not reordered there.)
            fence(Ordering::Release);
        }
        taken
    }

    /// Writes `value` into `slot`, reserved by [`take`](Self::take), and publishes it under `key`.
    #[inline]
    fn fill(slot: &Slot, key: u64, value: OpenSpan) {
        Self::write(slot, value);
        slot.key.store(key, Ordering::Release);
    }

    #[inline]
    fn write(slot: &Slot, value: OpenSpan) {
        let t = value.trace.get();
        slot.span.store(value.span.get(), Ordering::Relaxed);
        slot.trace_hi.store((t >> 64) as u64, Ordering::Relaxed);
        slot.trace_lo.store(t as u64, Ordering::Relaxed);
        slot.parent.store(value.parent_key.unwrap_or(0), Ordering::Relaxed);
        slot.meta.store(value.meta.map_or(0, |m| m as *const _ as usize), Ordering::Relaxed);
        slot.extra_refs.store(0, Ordering::Relaxed);
        slot.flags.store(value.flags(), Ordering::Relaxed);
    }

    #[inline]
    fn read(slot: &Slot) -> Option<OpenSpan> {
        let span = SpanId::new(slot.span.load(Ordering::Relaxed))?;
        let t = (u128::from(slot.trace_hi.load(Ordering::Relaxed)) << 64)
            | u128::from(slot.trace_lo.load(Ordering::Relaxed));
        let flags = slot.flags.load(Ordering::Relaxed);
        let meta = slot.meta.load(Ordering::Relaxed);
        Some(OpenSpan {
            span,
            trace: TraceId::new(t)?,
            sampled: flags & 1 != 0,
            recorded: flags & 2 != 0,
            parent_key: Some(slot.parent.load(Ordering::Relaxed)).filter(|k| *k != 0),
            carrier: NonZeroU64::new(flags >> 4),
            // SAFETY: a non-zero value was stored by `write` from a `&'static Metadata<'static>`
            // (`Meta`), which lives for the whole program; it is only ever read back as one.
            meta: (meta != 0).then(|| unsafe { &*(meta as *const tracing_core::Metadata<'static>) }),
            has_request: flags & 4 != 0,
            dropped: flags & 8 != 0,
        })
    }

    #[inline]
    fn find(&self, key: u64) -> Option<&Slot> {
        if !Self::valid_key(key) {
            return None;
        }
        self.find_where(key, |k| k == key)
    }

    /// The first slot from `key`'s home whose key `matches`, before an empty one.
    #[inline]
    fn find_where(&self, key: u64, matches: impl Fn(u64) -> bool) -> Option<&Slot> {
        let home = self.home(key);
        for i in 0..MAX_PROBES {
            let slot = &self.slots[(home + i) & self.mask];
            match slot.key.load(Ordering::Acquire) {
                k if matches(k) => return Some(slot),
                EMPTY => return None,
                _ => {}
            }
        }
        None
    }

    /// The open span with `key`, if it was inserted and not yet removed.
    #[inline]
    pub fn get(&self, key: u64) -> Option<OpenSpan> {
        Self::read_checked(self.find(key)?, key)
    }

    /// The open span whose key, [cut](cut_key), is `carrier`, and its whole key.
    pub fn get_carrier(&self, carrier: NonZeroU64) -> Option<(u64, OpenSpan)> {
        let c = carrier.get();
        let matches = |k| Self::valid_key(k) && cut_key(k) == c;
        let slot = self.find_where(c & CUT_IDENTITY, matches)?;
        let key = slot.key.load(Ordering::Acquire);
        if !matches(key) {
            return None;
        }
        Some((key, Self::read_checked(slot, key)?))
    }

    /// What `slot` holds, if it still holds `key` once read.
    #[inline]
    fn read_checked(slot: &Slot, key: u64) -> Option<OpenSpan> {
        let value = Self::read(slot);
        // A slot removed and reused while it was read would give a mix of two spans: check that
        // it still holds `key` (the fence keeps the reads above before this load).
        fence(Ordering::Acquire);
        (slot.key.load(Ordering::Relaxed) == key).then_some(value).flatten()
    }

    /// Replaces the trace and sampling decision of an open span (when it is given a remote
    /// parent). Returns whether the span was found. Spans created under it afterwards inherit
    /// the new values.
    pub fn set_trace(&self, key: u64, trace: TraceId, sampled: bool) -> bool {
        match self.find(key) {
            Some(slot) => {
                let t = trace.get();
                slot.trace_hi.store((t >> 64) as u64, Ordering::Relaxed);
                slot.trace_lo.store(t as u64, Ordering::Relaxed);
                // Only bit 0: another thread may be setting bit 2 (`set_has_request`).
                if sampled {
                    slot.flags.fetch_or(1, Ordering::Relaxed);
                } else {
                    slot.flags.fetch_and(!1, Ordering::Relaxed);
                }
                true
            }
            None => false,
        }
    }

    /// The keys of the open spans flagged as carrying a request id, nearest first, among the open
    /// span `key` (whose entry is `open`) and its ancestors in the table (recorded ones and
    /// stand-ins, followed by `parent_key`).
    ///
    /// The walk goes up only to entries of the same trace: a parent that closed leaves its key to
    /// be reused, and a key's generation wraps (after 2^14 reuses of a standalone subscriber's
    /// key, which its thread takes first), so the span under a closed parent's old key may be
    /// another's, whose request id must not be taken.
    pub fn request_carriers(&self, key: u64, open: OpenSpan) -> impl Iterator<Item = u64> + '_ {
        let mut next = Some((key, open));
        // Bounded: the table holds each open span once, and parents are older than children.
        let mut steps = 0;
        std::iter::from_fn(move || {
            while let Some((k, o)) = next {
                steps += 1;
                next = o
                    .parent_key
                    .filter(|_| steps < 10_000)
                    .and_then(|p| self.get(p).filter(|po| po.trace == o.trace).map(|po| (p, po)));
                if o.has_request {
                    return Some(k);
                }
            }
            None
        })
    }

    /// Marks that a request id is stored for the open span `key`.
    pub fn set_has_request(&self, key: u64) {
        if let Some(slot) = self.find(key) {
            slot.flags.fetch_or(4, Ordering::Relaxed);
        }
    }

    /// Counts one more handle to the open span `key`. Returns whether it was found.
    pub fn add_ref(&self, key: u64) -> bool {
        match self.find(key) {
            Some(slot) => {
                slot.extra_refs.fetch_add(1, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Releases one handle to the open span `key`; on the last one, removes it.
    pub fn release(&self, key: u64) -> (Release, Option<OpenSpan>) {
        let Some(slot) = self.find(key) else { return (Release::Unknown, None) };
        let mut extra = slot.extra_refs.load(Ordering::Acquire);
        // With no extra handle the caller holds the only one: no other thread can race here.
        while extra > 0 {
            match slot.extra_refs.compare_exchange_weak(extra, extra - 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return (Release::Remaining, None),
                Err(now) => extra = now,
            }
        }
        let value = Self::read(slot);
        slot.key.store(TOMBSTONE, Ordering::Release);
        (Release::Last, value)
    }

    /// Removes `key`, returning what it held.
    #[inline]
    pub fn remove(&self, key: u64) -> Option<OpenSpan> {
        let slot = self.find(key)?;
        let value = Self::read(slot);
        slot.key.store(TOMBSTONE, Ordering::Release);
        value
    }
}

#[cfg(all(test, not(ringtrace_loom)))]
mod tests {
    use super::*;

    fn v(n: u64) -> OpenSpan {
        OpenSpan {
            span: SpanId::new(n).unwrap(),
            trace: TraceId::new(u128::from(n) << 70 | 1).unwrap(),
            sampled: n % 3 != 0,
            recorded: n % 2 == 0,
            parent_key: Some(n / 2).filter(|k| *k != 0),
            carrier: NonZeroU64::new(n / 4),
            meta: None,
            has_request: false,
            dropped: n % 5 == 0,
        }
    }

    #[test]
    fn request_carriers_are_the_flagged_spans_up_the_recorded_parents_nearest_first() {
        let t = SpanTable::new(128);
        // 1 <- 2 <- 3 <- 4 (parent keys), one trace, with request ids on 1 and 3.
        for k in 1..=4u64 {
            let open = OpenSpan {
                parent_key: Some(k - 1).filter(|p| *p != 0),
                has_request: false,
                trace: v(1).trace,
                ..v(k)
            };
            t.insert(k, open).unwrap();
        }
        t.set_has_request(1);
        t.set_has_request(3);
        // What a span made under each takes as its carrier.
        assert_eq!(t.get(3).unwrap().carrier_below(3), NonZeroU64::new(3), "it carries one itself");
        let two = OpenSpan { carrier: NonZeroU64::new(1), ..t.get(2).unwrap() };
        assert_eq!(two.carrier_below(2), NonZeroU64::new(1), "the carrier it took");
        let carriers = |k: u64| t.request_carriers(k, t.get(k).unwrap()).collect::<Vec<_>>();
        assert_eq!(carriers(4), [3, 1]);
        assert_eq!(carriers(3), [3, 1]);
        assert_eq!(carriers(2), [1]);
        t.remove(1);
        assert!(carriers(2).is_empty(), "a closed ancestor ends the walk");
        // Key 1 reused by a span of another trace: not an ancestor of 2.
        t.insert(1, OpenSpan { parent_key: None, trace: v(7).trace, ..v(1) }).unwrap();
        t.set_has_request(1);
        t.remove(3);
        t.insert(3, OpenSpan { parent_key: Some(2), trace: v(9).trace, ..v(3) }).unwrap();
        t.set_has_request(3);
        assert!(carriers(2).is_empty(), "key 1 holds another trace's span now");
        assert_eq!(carriers(4), [] as [u64; 0], "key 3 holds another trace's span now");
    }

    #[test]
    fn a_carrier_is_found_by_its_key_cut() {
        // Generations 1,024 apart stay apart; slot identities that differ only in their top
        // four bits do not.
        let key = |generation: u64, identity: u64| generation << HOME_BITS_COUNT | identity;
        assert_ne!(cut_key(key(1, 77)), cut_key(key(1 + 1024, 77)));
        assert_ne!(cut_key(key(3, 77)), cut_key(key(3 + 8192, 77)));
        assert_eq!(cut_key(key(3, 77)), cut_key(key(3, 77 | 0b1010 << 46)));
        assert!(cut_key(u64::MAX) < 1 << 60);
        let t = SpanTable::new(128);
        let key = key(0b10_1100_0000_0011, 5);
        let cut = NonZeroU64::new(cut_key(key)).unwrap();
        let open = OpenSpan { has_request: true, ..v(5) };
        t.insert(key, open).unwrap();
        assert_eq!(open.carrier_below(key), Some(cut));
        assert_eq!(t.get_carrier(cut), Some((key, open)));
        let child = OpenSpan { carrier: Some(cut), has_request: false, ..v(6) };
        t.insert(6, child).unwrap();
        assert_eq!(t.get(6).unwrap().carrier, Some(cut), "kept beside the flags");
        let trace = TraceId::new(0x77).unwrap();
        assert!(t.set_trace(6, trace, false));
        t.set_has_request(6);
        let changed = t.get(6).unwrap();
        assert_eq!((changed.carrier, changed.trace, changed.sampled), (Some(cut), trace, false));
        assert_eq!(t.get_carrier(NonZeroU64::new(5).unwrap()), None, "another generation");
        t.remove(key);
        assert_eq!(t.get_carrier(cut), None);
    }

    #[test]
    fn insert_get_remove() {
        let t = SpanTable::new(128);
        for k in 1..=100 {
            t.insert(k, v(k)).unwrap();
        }
        for k in 1..=100 {
            assert_eq!(t.get(k), Some(v(k)));
        }
        for k in (1..=100).step_by(2) {
            assert_eq!(t.remove(k), Some(v(k)));
        }
        for k in 1..=100 {
            assert_eq!(t.get(k).is_some(), k % 2 == 0, "key {k}");
        }
        // Tombstones are reused.
        for k in 1000..1050 {
            t.insert(k, v(k)).unwrap();
        }
        assert_eq!(t.get(1049), Some(v(1049)));
    }

    #[test]
    fn full_table_refuses_and_recovers() {
        let t = SpanTable::new(64);
        let mut inserted = Vec::new();
        let refused = (1..=1000u64)
            .find(|&k| {
                let ok = t.insert(k, v(k)).is_ok();
                if ok {
                    inserted.push(k);
                }
                !ok
            })
            .expect("a 64-slot table fills up");
        assert!(inserted.len() <= 64);
        assert_eq!(t.get(refused), None);
        for k in &inserted {
            t.remove(*k).unwrap();
        }
        t.insert(refused, v(refused)).unwrap();
        assert_eq!(t.get(refused), Some(v(refused)));
        for k in &inserted {
            assert_eq!(t.get(*k), None);
        }
    }

    #[test]
    fn handles_are_counted_before_release() {
        let t = SpanTable::new(64);
        t.insert(7, v(7)).unwrap();
        assert!(t.add_ref(7));
        assert!(t.add_ref(7));
        assert_eq!(t.release(7).0, Release::Remaining);
        assert_eq!(t.release(7).0, Release::Remaining);
        assert_eq!(t.release(7), (Release::Last, Some(v(7))));
        assert_eq!(t.release(7).0, Release::Unknown);
    }

    /// A key open already is a caller's bug. Debug builds catch it wherever the live entry sits
    /// in the chain, behind a tombstone too, where the first free slot comes before it.
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "is open already")]
    fn a_live_duplicate_is_caught_in_debug_builds_wherever_it_sits_in_the_chain() {
        let t = SpanTable::new(64);
        // Keys with the same home slot: the first two fill it and the next; removing the first
        // leaves a tombstone in front of the second.
        let home = t.home(1);
        let same: Vec<u64> = (1..).filter(|&k| t.home(k) == home).take(2).collect();
        t.insert(same[0], v(same[0])).unwrap();
        t.insert(same[1], v(same[1])).unwrap();
        t.remove(same[0]).unwrap();
        let _ = t.insert(same[1], v(99));
    }

    /// An insert takes the first free slot of its chain: its home when free, else the first
    /// empty slot or tombstone after it, wrapping at the table's end; every key is still found.
    #[test]
    fn an_insert_takes_the_first_free_slot_and_every_key_is_still_found() {
        let t = SpanTable::new(64);
        let last = t.slots.len() - 1;
        // Keys at home in the table's last slot, so that the chain wraps to slot 0.
        let same: Vec<u64> = (1..).filter(|&k| t.home(k) == last).take(4).collect();
        for &k in &same[..3] {
            t.insert(k, v(k)).unwrap();
        }
        let at = |i: usize| t.slots[i].key.load(Ordering::Relaxed);
        assert_eq!((at(last), at(0), at(1)), (same[0], same[1], same[2]), "home, then past the end");
        t.remove(same[1]).unwrap();
        t.insert(same[3], v(same[3])).unwrap();
        assert_eq!(at(0), same[3], "the tombstone after the taken home is reused");
        t.remove(same[0]).unwrap();
        t.insert(same[1], v(same[1])).unwrap();
        assert_eq!(at(last), same[1], "a free home is taken");
        for &k in &same[1..] {
            assert_eq!(t.get(k), Some(v(k)));
        }
        assert_eq!(t.get(same[0]), None);
    }

    #[test]
    fn reserved_keys_are_refused() {
        let t = SpanTable::new(64);
        assert!(t.insert(0, v(1)).is_err());
        assert!(t.insert(u64::MAX, v(1)).is_err());
        assert_eq!(t.get(0), None);
    }

    #[test]
    fn concurrent_threads_see_their_own_spans() {
        let t = std::sync::Arc::new(SpanTable::new(4096));
        let handles: Vec<_> = (0..4u64)
            .map(|th| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for round in 0..2000u64 {
                        let k = th * 1_000_000 + round + 1;
                        t.insert(k, v(k)).unwrap();
                        assert_eq!(t.get(k), Some(v(k)));
                        assert_eq!(t.remove(k), Some(v(k)));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}
