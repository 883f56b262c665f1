//! The atomics the lock-free structures use: `std`'s, or loom's when built with
//! `--cfg ringtrace_loom`, so that the very same code is model-checked (`tests/loom_table.rs`).
//! Like sharded-slab's `src/sync.rs`; the cfg is ours rather than `loom`, which tokio and
//! sharded-slab also read.

/// `std::sync::atomic`, or `loom::sync::atomic` under `--cfg ringtrace_loom`.
pub(crate) mod atomic {
    #[cfg(ringtrace_loom)]
    pub(crate) use loom::sync::atomic::*;
    #[cfg(not(ringtrace_loom))]
    pub(crate) use std::sync::atomic::*;
}
