//! The atomics the lock-free structures use: `std`'s, or loom's when built with `--cfg loom`,
//! so that the very same code is model-checked (`tests/loom_table.rs`). Like sharded-slab's
//! `src/sync.rs`.

/// `std::sync::atomic`, or `loom::sync::atomic` under `--cfg loom`.
pub(crate) mod atomic {
    #[cfg(loom)]
    pub(crate) use loom::sync::atomic::*;
    #[cfg(not(loom))]
    pub(crate) use std::sync::atomic::*;
}
