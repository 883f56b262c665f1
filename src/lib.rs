//! ringtrace facade (being written).
pub use ringtrace_core as core;
