//! One module per subcommand, each with its arguments (`Args`) and its `run`, which writes what
//! the command prints to the `out` it is given. Flags several commands share live in
//! [`crate::input`], values they parse in [`crate::parse`].

pub mod anomalies;
pub mod bottlenecks;
pub mod breakdown;
#[cfg(feature = "distributed")]
pub mod cluster;
pub mod critical_path;
pub mod demo;
pub mod demo_node;
pub mod deps;
pub mod diff;
pub mod envelope;
pub mod export;
pub mod flame;
pub mod io;
pub mod predict;
pub mod profile;
#[cfg(unix)]
pub mod recover;
pub mod report;
pub mod requests;
pub mod stats;
