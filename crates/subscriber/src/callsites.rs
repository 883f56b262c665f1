//! The callsites this process has registered, by address.
//!
//! Rings hold records in the recording's layout, which names a callsite and a field name by the
//! address it has in this process. The drain's raw recording and the assembler name them back
//! through this registry, filled by `register_callsite` (which `tracing` calls for every callsite
//! before its first span or event reaches a collector) and never emptied (callsites are
//! `'static`). A record naming an address the registry lacks (metadata made by hand and never
//! registered) is not decoded: it is skipped and counted, never dereferenced.
//!
//! The registry also keeps its callsites in the order they were registered, and how many there
//! are ([`count`]): a callsite is registered before any record naming it is published, so a
//! drain that has read a ring's records finds every callsite they name among the first
//! [`count`] ones, and writes new ones to its recording without looking at each record.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use ringtrace_core::propagation::REQUEST_ID_KEY;
use ringtrace_core::raw::{self, Names};
use ringtrace_core::record::Meta;

use crate::drain::IdHasher;

/// Callsites and field names by address.
#[derive(Default)]
pub(crate) struct Registry {
    callsites: HashMap<u64, Meta, BuildHasherDefault<IdHasher>>,
    names: HashMap<(u64, u32), &'static str, BuildHasherDefault<IdHasher>>,
    /// The callsites in the order they were registered.
    order: Vec<Meta>,
}

impl Registry {
    /// Adds `meta` and its field names; returns whether it was new.
    fn add(&mut self, meta: Meta) -> bool {
        if self.callsites.insert(raw::meta_address(meta), meta).is_some() {
            return false;
        }
        for field in meta.fields().iter() {
            self.add_name(field.name());
        }
        self.order.push(meta);
        // Under the write lock, after the push: whoever reads the count sees the callsites it
        // counts once it takes the read lock.
        COUNT.store(self.order.len(), Ordering::Release);
        true
    }

    fn add_name(&mut self, name: &'static str) {
        self.names.insert((raw::name_address(name), name.len() as u32), name);
    }
}

impl Names for Registry {
    fn callsite(&self, address: u64) -> Option<Meta> {
        self.callsites.get(&address).copied()
    }
    fn name(&self, address: u64, len: u32) -> Option<&'static str> {
        self.names.get(&(address, len)).copied()
    }
}

static REGISTRY: RwLock<Option<Registry>> = RwLock::new(None);

/// How many callsites the registry holds.
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// How many callsites the process has registered so far: one load, no lock. A reader that has
/// seen a published record finds the callsite it names among them: the recording thread either
/// registered it itself or saw it registered (through the `Registered` set's acquire loads, or
/// through `tracing`'s own cached interest, which `tracing` stores after registering the
/// callsite), before writing the record; the ring's publish is a release store and the reader's
/// load of it an acquire. `tracing` loads its cached interest with relaxed ordering: on that
/// path the order rests on `tracing`'s registration, as the drain's lookups record by record did
/// before.
#[inline]
pub(crate) fn count() -> usize {
    COUNT.load(Ordering::Acquire)
}

/// The `request.id` field name that records set through the API carry: one address for the
/// whole process (a `const` string may have several, one per codegen unit).
pub(crate) static REQUEST_ID_FIELD: &str = REQUEST_ID_KEY;

/// Registers `meta` (a callsite's metadata); returns whether it was new to the process.
pub(crate) fn register(meta: Meta) -> bool {
    // Quick path: already known (every collector registers every callsite).
    if read().callsite(raw::meta_address(meta)).is_some() {
        return false;
    }
    let mut registry = REGISTRY.write().unwrap_or_else(PoisonError::into_inner);
    registry.get_or_insert_with(new_registry).add(meta)
}

/// The registry, for resolving a batch of records (held for the batch, not per record).
pub(crate) fn read() -> Guard {
    {
        let guard = REGISTRY.read().unwrap_or_else(PoisonError::into_inner);
        if guard.is_some() {
            return Guard(guard);
        }
    }
    REGISTRY.write().unwrap_or_else(PoisonError::into_inner).get_or_insert_with(new_registry);
    Guard(REGISTRY.read().unwrap_or_else(PoisonError::into_inner))
}

/// A registry with the names the API sets besides callsites' fields.
fn new_registry() -> Registry {
    let mut r = Registry::default();
    r.add_name(REQUEST_ID_FIELD);
    r
}

/// The callsites one collector has registered (in the registry above and in its ring files),
/// by address: an insert-only, lock-free set, so that the capture path can ask for the price of
/// a few loads whether a callsite is known before writing a record that names it.
///
/// `tracing` registers a callsite once, on the first thread that reaches it. Another thread
/// reaching it meanwhile is told to ask `enabled` and goes on to record, before this collector's
/// `register_callsite` has run: the record would name a callsite the drain and the ring files do
/// not know, and be lost. `enabled` asks this set; the collector registers what it lacks.
pub(crate) struct Registered {
    slots: Box<[AtomicU64]>,
}

impl Registered {
    /// Slots (64 KiB a collector).
    const SLOTS: usize = 1 << 13;
    /// Slots probed from a callsite's home before giving up: a callsite that finds none free
    /// (thousands registered) is never remembered, and is registered again each time it is
    /// asked about, which is slower but as correct.
    const PROBES: usize = 32;

    fn probe(&self, address: u64) -> impl Iterator<Item = &AtomicU64> {
        let home = ringtrace_core::hash::mix64(address) as usize;
        (0..Self::PROBES).map(move |i| &self.slots[(home + i) & (Self::SLOTS - 1)])
    }

    /// Whether the callsite at `address` was registered (and its registration is visible).
    #[inline]
    pub(crate) fn contains(&self, address: u64) -> bool {
        for slot in self.probe(address) {
            match slot.load(Ordering::Acquire) {
                0 => return false,
                a if a == address => return true,
                _ => {}
            }
        }
        false
    }

    /// Remembers `address`, once its registration is complete.
    pub(crate) fn insert(&self, address: u64) {
        for slot in self.probe(address) {
            match slot.compare_exchange(0, address, Ordering::Release, Ordering::Acquire) {
                Ok(_) => return,
                Err(a) if a == address => return,
                Err(_) => {}
            }
        }
    }
}

impl Default for Registered {
    fn default() -> Self {
        Self { slots: (0..Self::SLOTS).map(|_| AtomicU64::new(0)).collect() }
    }
}

/// A read lock on the registry.
pub(crate) struct Guard(RwLockReadGuard<'static, Option<Registry>>);

impl Guard {
    /// The callsites registered after the first `n`, in the order they were registered.
    pub(crate) fn registered_after(&self, n: usize) -> &[Meta] {
        self.0.as_ref().map_or(&[], |r| r.order.get(n..).unwrap_or_default())
    }
}

impl Names for Guard {
    fn callsite(&self, address: u64) -> Option<Meta> {
        self.0.as_ref()?.callsite(address)
    }
    fn name(&self, address: u64, len: u32) -> Option<&'static str> {
        self.0.as_ref()?.name(address, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::shared::fixture::test_callsite!(Site, META = "registered", "callsites::tests", INFO, EVENT, ["a"]);

    #[test]
    fn the_registered_set_holds_what_was_inserted_even_when_probes_collide() {
        let set = Registered::default();
        // Addresses of 8-byte aligned statics, many more than a probe sequence holds.
        let addresses: Vec<u64> = (1..=3000u64).map(|i| 0x5555_0000_0000 + i * 8).collect();
        for &a in &addresses[..1500] {
            set.insert(a);
        }
        for &a in &addresses[..1500] {
            assert!(set.contains(a), "{a:#x} was inserted");
        }
        for &a in &addresses[1500..] {
            assert!(!set.contains(a), "{a:#x} was not");
        }
        set.insert(addresses[0]);
        assert!(set.contains(addresses[0]), "a second insert changes nothing");
    }

    #[test]
    fn a_registered_callsite_and_its_fields_resolve_and_nothing_else_does() {
        let address = raw::meta_address(&META);
        let field = META.fields().iter().next().unwrap().name();
        register(&META);
        assert!(!register(&META), "a second registration adds nothing");
        let r = read();
        assert!(std::ptr::eq(r.callsite(address).unwrap(), &META));
        assert_eq!(r.name(raw::name_address(field), 1), Some("a"));
        assert_eq!(r.name(raw::name_address(field), 2), None, "a name is known by address and length");
        let request = REQUEST_ID_FIELD;
        assert_eq!(r.name(raw::name_address(request), request.len() as u32), Some(REQUEST_ID_KEY));
        assert!(r.callsite(address + 8).is_none());
    }
}
