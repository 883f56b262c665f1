//! # ringtrace-bench-peers
//!
//! Holds one benchmark, `benches/peers.rs`: the per-span cost of ringtrace's `RingLayer` side by
//! side with its peers — no subscriber, a bare registry with a no-op layer, `tracing-subscriber`'s
//! `fmt`, `tracing-opentelemetry` with the SDK's batch processor, and fastrace — in one process,
//! on one machine, in one run. The library itself is empty.
//!
//! The peers are dev-dependencies of this package, which is not a default member of the
//! workspace, so `cargo test` at the workspace root never builds them. Run:
//!
//! ```text
//! cargo bench -p ringtrace-bench-peers
//! ```
//!
//! Results are recorded in `benches/PEERS.md` at the repository root.
#![deny(missing_docs)]
