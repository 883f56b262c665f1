//! The atomics, cells and `Arc` the lock-free structures use: `std`'s, or loom's when built with
//! `--cfg ringtrace_loom`, so that the very same code is model-checked (`tests/loom_table.rs`,
//! `tests/loom_ring.rs`). Like sharded-slab's `src/sync.rs`; the cfg is ours rather than `loom`,
//! which tokio and sharded-slab also read.

/// `std::sync::atomic`, or `loom::sync::atomic` under `--cfg ringtrace_loom`.
pub(crate) mod atomic {
    #[cfg(ringtrace_loom)]
    pub(crate) use loom::sync::atomic::*;
    #[cfg(not(ringtrace_loom))]
    pub(crate) use std::sync::atomic::*;
}

/// `std::sync::Arc`, or `loom::sync::Arc` under `--cfg ringtrace_loom`.
#[cfg(ringtrace_loom)]
pub(crate) use loom::sync::Arc;
#[cfg(not(ringtrace_loom))]
pub(crate) use std::sync::Arc;

/// An `UnsafeCell` reached only through closures, `with(|*const T| ..)` and
/// `with_mut(|*mut T| ..)`: `loom::cell::UnsafeCell` under `--cfg ringtrace_loom`, which checks
/// that every read and write of the cell happens-before or -after every conflicting one, and
/// otherwise a zero-cost wrapper of `std::cell::UnsafeCell` with the same API (as in tokio's
/// and sharded-slab's shims).
pub(crate) mod cell {
    #[cfg(ringtrace_loom)]
    pub(crate) use loom::cell::UnsafeCell;

    /// `std::cell::UnsafeCell` behind loom's closure API. `repr(transparent)`: a slice of these
    /// has the layout of a slice of `T`.
    #[cfg(not(ringtrace_loom))]
    #[derive(Debug)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    #[cfg(not(ringtrace_loom))]
    impl<T> UnsafeCell<T> {
        /// A cell holding `data`.
        #[inline]
        pub(crate) const fn new(data: T) -> Self {
            Self(std::cell::UnsafeCell::new(data))
        }

        /// Calls `f` with a pointer for reading the contents. (The ring reads its slots through
        /// slices instead, except under loom: kept for parity with loom's API.)
        #[allow(dead_code)]
        #[inline]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Calls `f` with a pointer for writing the contents.
        #[inline]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}
