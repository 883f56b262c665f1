//! Open-span table keys for the standalone subscriber, unique among live spans for any number
//! of threads.
//!
//! A key has two parts: its low [`HOME_BITS_COUNT`] bits, the **slot identity** (the part the
//! table hashes), and the bits above them, a **generation**. Fresh slot identities come from one
//! process-wide counter, in blocks of [`KEY_BLOCK`] taken by one thread at a time, so no two
//! threads ever take the same one. When a span closes, its key goes to the free list of the
//! thread that closed it with the generation advanced: that thread reuses it (a cache-warm table
//! slot), while a stale `Id` of the closed span no longer matches. A slot identity therefore
//! belongs, at any moment, to exactly one live span or one thread's free list, and two live spans
//! never share a key, however many threads come and go.

use std::sync::atomic::{AtomicU64, Ordering};

use super::table::HOME_BITS_COUNT;

/// Fresh slot identities a thread takes from the shared counter at once.
pub(crate) const KEY_BLOCK: u64 = 1024;

/// Closed spans' keys a thread keeps for reuse.
const FREE_KEYS: usize = 64;

/// The first slot identity past the last one that can be handed out.
const SLOT_LIMIT: u64 = 1 << HOME_BITS_COUNT;

/// The process-wide source of fresh slot identities for one collector.
#[derive(Debug)]
pub(crate) struct KeySpace {
    next_block: AtomicU64,
}

impl Default for KeySpace {
    fn default() -> Self {
        // Block 0 would hand out key 0, which the table reserves.
        Self { next_block: AtomicU64::new(1) }
    }
}

impl KeySpace {
    /// The first key of a block nobody else has, or `None` once all 2^50 slot identities are
    /// spent (a billion threads each taking a block would not get there).
    fn take_block(&self) -> Option<u64> {
        let block = self.next_block.fetch_add(1, Ordering::Relaxed);
        let start = block.checked_mul(KEY_BLOCK)?;
        (start + KEY_BLOCK <= SLOT_LIMIT).then_some(start)
    }
}

/// One thread's keys: a block of fresh ones and the recycled ones.
#[derive(Debug, Default)]
pub(crate) struct ThreadKeys {
    free: Vec<u64>,
    next: u64,
    end: u64,
}

impl ThreadKeys {
    /// A key no live span uses: a recycled one if any, else a fresh one (taking a new block from
    /// `space` when this thread's is spent). `None` only when the key space is exhausted.
    #[inline]
    pub(crate) fn take(&mut self, space: &KeySpace) -> Option<u64> {
        if let Some(key) = self.free.pop() {
            return Some(key);
        }
        if self.next == self.end {
            self.refill(space)?;
        }
        let key = self.next;
        self.next += 1;
        Some(key)
    }

    #[cold]
    fn refill(&mut self, space: &KeySpace) -> Option<()> {
        let start = space.take_block()?;
        self.next = start;
        self.end = start + KEY_BLOCK;
        Some(())
    }

    /// Takes back the key of a span that is closed (no longer in the table), advancing its
    /// generation; a full free list lets the key go (its slot identity is never handed out
    /// again).
    #[inline]
    pub(crate) fn recycle(&mut self, key: u64) {
        if self.free.len() < FREE_KEYS {
            self.free.push(key.wrapping_add(SLOT_LIMIT));
        }
    }
}

#[cfg(all(test, not(ringtrace_loom)))]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// Thread `t` opens a span.
        Open(usize),
        /// Thread `t` closes the live span chosen by `i` (any thread may close any span).
        Close(usize, usize),
        /// Thread `t` exits, losing its free list, and a new thread takes its place.
        Restart(usize),
    }

    fn op(threads: usize) -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..threads).prop_map(Op::Open),
            4 => (0..threads, any::<usize>()).prop_map(|(t, i)| Op::Close(t, i)),
            1 => (0..threads).prop_map(Op::Restart),
        ]
    }

    proptest! {
        /// Whatever the threads do, no two live spans share a key or a slot identity, and no key
        /// is reserved by the table.
        #[test]
        fn live_keys_are_unique(ops in proptest::collection::vec(op(6), 1..600)) {
            let space = KeySpace::default();
            let mut threads: Vec<ThreadKeys> = (0..6).map(|_| ThreadKeys::default()).collect();
            let mut live: Vec<u64> = Vec::new();
            let mut slots: HashMap<u64, u64> = HashMap::new();
            for op in ops {
                match op {
                    Op::Open(t) => {
                        let key = threads[t].take(&space).unwrap();
                        prop_assert!(key != 0 && key != u64::MAX && key != u64::MAX - 1);
                        let slot = key & (SLOT_LIMIT - 1);
                        prop_assert!(slots.insert(slot, key).is_none(), "slot {slot:#x} live twice");
                        live.push(key);
                    }
                    Op::Close(t, i) if !live.is_empty() => {
                        let key = live.swap_remove(i % live.len());
                        slots.remove(&(key & (SLOT_LIMIT - 1)));
                        threads[t].recycle(key);
                    }
                    Op::Close(..) => {}
                    Op::Restart(t) => threads[t] = ThreadKeys::default(),
                }
            }
        }
    }

    #[test]
    fn threads_past_the_thousandth_get_keys_of_their_own() {
        // The old scheme put a thread's stream above bit 40, so the 1,025th thread's first key
        // equalled the first thread's first key reused once.
        let space = KeySpace::default();
        let mut first = ThreadKeys::default();
        let k = first.take(&space).unwrap();
        first.recycle(k);
        let reused = first.take(&space).unwrap();
        let mut seen = std::collections::HashSet::from([reused & (SLOT_LIMIT - 1)]);
        for _ in 0..5000 {
            let key = ThreadKeys::default().take(&space).unwrap();
            assert_ne!(key, reused);
            assert!(seen.insert(key & (SLOT_LIMIT - 1)));
        }
    }

    #[test]
    fn an_exhausted_key_space_refuses_instead_of_wrapping() {
        let space = KeySpace { next_block: AtomicU64::new(SLOT_LIMIT / KEY_BLOCK - 1) };
        let mut keys = ThreadKeys::default();
        for _ in 0..KEY_BLOCK {
            assert!(keys.take(&space).unwrap() < SLOT_LIMIT);
        }
        assert_eq!(keys.take(&space), None);
    }
}
