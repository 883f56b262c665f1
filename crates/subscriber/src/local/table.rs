//! The open-span table: `tracing` span id → ringtrace span id and trace id, shared by all threads.
//!
//! A fixed-size, lock-free, open-addressing hash table. Inserting, finding and removing take a
//! bounded number of probes and never allocate. A `tracing` id is unique among *open* spans
//! (the subscriber may reuse it after the span closes), and a span is found only between its
//! creation and its close, so keys never collide while live.
//!
//! When every slot within the probe bound is taken, insertion fails: the caller drops the span
//! and counts it, exactly as for a full ring.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use ringtrace_core::{SpanId, TraceId};

const EMPTY: u64 = 0;
const TOMBSTONE: u64 = u64::MAX;
const RESERVED: u64 = u64::MAX - 1;
/// Slots probed before giving up.
pub const MAX_PROBES: usize = 64;

struct Slot {
    key: AtomicU64,
    span: AtomicU64,
    trace_hi: AtomicU64,
    trace_lo: AtomicU64,
    /// Bit 0: sampled; bit 1: recorded.
    flags: AtomicU8,
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
}

impl OpenSpan {
    fn flags(&self) -> u8 {
        u8::from(self.sampled) | u8::from(self.recorded) << 1
    }
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
                flags: AtomicU8::new(0),
            })
            .collect();
        Self { slots, mask: n - 1, shift: 64 - n.trailing_zeros() }
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    #[inline]
    fn valid_key(key: u64) -> bool {
        key != EMPTY && key != TOMBSTONE && key != RESERVED
    }

    /// Records `key` as open. Fails when no slot is free within the probe bound, or for the
    /// three key values the table reserves (never produced by `tracing-subscriber`'s registry).
    #[inline]
    pub fn insert(&self, key: u64, value: OpenSpan) -> Result<(), OpenSpan> {
        if !Self::valid_key(key) {
            return Err(value);
        }
        let home = self.home(key);
        for i in 0..MAX_PROBES {
            let slot = &self.slots[(home + i) & self.mask];
            let k = slot.key.load(Ordering::Relaxed);
            if (k == EMPTY || k == TOMBSTONE)
                && slot
                    .key
                    .compare_exchange(k, RESERVED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                Self::write(slot, value);
                slot.key.store(key, Ordering::Release);
                return Ok(());
            }
        }
        Err(value)
    }

    #[inline]
    fn write(slot: &Slot, value: OpenSpan) {
        let t = value.trace.get();
        slot.span.store(value.span.get(), Ordering::Relaxed);
        slot.trace_hi.store((t >> 64) as u64, Ordering::Relaxed);
        slot.trace_lo.store(t as u64, Ordering::Relaxed);
        slot.flags.store(value.flags(), Ordering::Relaxed);
    }

    #[inline]
    fn read(slot: &Slot) -> Option<OpenSpan> {
        let span = SpanId::new(slot.span.load(Ordering::Relaxed))?;
        let t = (u128::from(slot.trace_hi.load(Ordering::Relaxed)) << 64)
            | u128::from(slot.trace_lo.load(Ordering::Relaxed));
        let flags = slot.flags.load(Ordering::Relaxed);
        Some(OpenSpan { span, trace: TraceId::new(t)?, sampled: flags & 1 != 0, recorded: flags & 2 != 0 })
    }

    #[inline]
    fn find(&self, key: u64) -> Option<&Slot> {
        if !Self::valid_key(key) {
            return None;
        }
        let home = self.home(key);
        for i in 0..MAX_PROBES {
            let slot = &self.slots[(home + i) & self.mask];
            match slot.key.load(Ordering::Acquire) {
                k if k == key => return Some(slot),
                EMPTY => return None,
                _ => {}
            }
        }
        None
    }

    /// The open span with `key`, if it was inserted and not yet removed.
    #[inline]
    pub fn get(&self, key: u64) -> Option<OpenSpan> {
        Self::read(self.find(key)?)
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
                let recorded = slot.flags.load(Ordering::Relaxed) & 2;
                slot.flags.store(u8::from(sampled) | recorded, Ordering::Relaxed);
                true
            }
            None => false,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn v(n: u64) -> OpenSpan {
        OpenSpan { span: SpanId::new(n).unwrap(), trace: TraceId::new(u128::from(n) << 70 | 1).unwrap(), sampled: n % 3 != 0, recorded: n % 2 == 0 }
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
        for k in 1..=200u64 {
            if t.insert(k, v(k)).is_ok() {
                inserted.push(k);
            }
        }
        assert_eq!(inserted.len(), 64);
        assert!(t.insert(500, v(500)).is_err());
        t.remove(inserted[0]).unwrap();
        t.insert(500, v(500)).unwrap();
        assert_eq!(t.get(500), Some(v(500)));
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
