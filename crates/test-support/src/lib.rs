//! What ringtrace's tests, benches and examples share, in one crate that is never published, so
//! that none of it ships in a library and no test reaches into another package's folders.
//!
//! - [`otlp_collector`]: a real OTLP collector (`rotel-agent`) on loopback ports and a parser of
//!   what it receives, servers that misbehave, and readers of a recording's spans and counters.
//! - [`cpu`]: CPU time of this process and of another one (Unix), as the benches report it.
//! - [`floor`]: the least any span recorder must do, as a layer and as a subscriber: the lower
//!   bound the benches and the demo's floor mode measure ringtrace against.
//! - [`subscribers`]: the reference subscribers of the benches (a no-op layer, `tracing`'s
//!   dispatch floor, the floor recorders).
//! - [`spans`]: the spans the benches record, one definition each.
//! - [`synthetic`]: requests shaped like the demo cluster's, for the analysis benches and for
//!   writing large recordings.
//!
//! ```
//! use ringtrace_test_support::{spans, subscribers::FloorSubscriber};
//!
//! tracing::subscriber::with_default(FloorSubscriber::default(), || spans::one_span(7));
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]
#![deny(rustdoc::broken_intra_doc_links)]

#[cfg(unix)]
pub mod cpu;
pub mod floor;
pub mod otlp_collector;
pub mod spans;
pub mod subscribers;
pub mod synthetic;
