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

/// `loom::cell::UnsafeCell`, under `--cfg ringtrace_loom` only: the ring reports each access to
/// its slots through one (`Ring::touch`), so that loom checks that every read and write of a slot
/// happens-before or -after every conflicting one. Without loom the slots are plain memory.
#[cfg(ringtrace_loom)]
pub(crate) mod cell {
    pub(crate) use loom::cell::UnsafeCell;
}
