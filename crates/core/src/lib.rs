//! # ringtrace-core
//!
//! The pieces every other ringtrace crate shares:
//! - [`ids`]: W3C-sized trace and span ids and a fast per-thread generator;
//! - [`clock`]: raw-tick timestamps and their conversion to Unix nanoseconds;
//! - [`record`]: the fixed-size records application threads write into their rings;
//! - [`raw`]: the raw recording: those records on disk, with their callsite metadata;
//! - [`identity`]: node and daemon resolution;
//! - [`propagation`]: W3C `traceparent` + `baggage` inject/extract and a compact byte form;
//! - [`otlp`]: OpenTelemetry protocol trace messages and the recording framing;
//! - [`hex`] and [`hash`]: hex digits and percent escapes, and the fast hashes' multiplier,
//!   shared by the ringtrace crates.
//!
//! Most users depend on the `ringtrace` facade instead of this crate.
//!
//! ## Feature flags
//! - `http`: `Injector`/`Extractor` for `http::HeaderMap`.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(unreachable_pub)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod clock;
mod error;
pub mod hash;
pub mod hex;
pub mod identity;
pub mod ids;
pub mod io;
pub mod otlp;
pub mod propagation;
pub mod raw;
pub mod record;

pub use clock::Clock;
pub use error::Error;
pub use identity::Identity;
pub use ids::{SpanId, TraceId};
