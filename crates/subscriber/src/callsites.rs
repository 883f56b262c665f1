//! The callsites this process has registered, by address.
//!
//! Rings hold records in the recording's layout, which names a callsite and a field name by the
//! address it has in this process. The drain's raw recording and the assembler name them back
//! through this registry, filled by `register_callsite` (which `tracing` calls for every callsite
//! before its first span or event reaches a collector) and never emptied (callsites are
//! `'static`). A record naming an address the registry lacks (metadata made by hand and never
//! registered) is not decoded: it is skipped and counted, never dereferenced.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
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

/// A read lock on the registry.
pub(crate) struct Guard(RwLockReadGuard<'static, Option<Registry>>);

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
    use tracing_core::callsite::Callsite;
    use tracing_core::field::FieldSet;
    use tracing_core::subscriber::Interest;
    use tracing_core::{Kind, Level, Metadata};

    struct Site;
    static SITE: Site = Site;
    static META: Metadata<'static> = Metadata::new(
        "registered",
        "callsites::tests",
        Level::INFO,
        None,
        None,
        None,
        FieldSet::new(&["a"], tracing_core::identify_callsite!(&SITE)),
        Kind::EVENT,
    );
    impl Callsite for Site {
        fn set_interest(&self, _: Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            &META
        }
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
