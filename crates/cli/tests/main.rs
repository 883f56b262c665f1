//! The integration tests of the `ringtrace` command, in one test binary (each test binary links
//! the whole dependency tree): one module per area, each in its own file beside this one, and the
//! helpers they share in `support`. Run one area with `cargo test -p ringtrace-cli --test cli
//! <module>::`.

mod support;

mod anomalies;
mod causality_views;
mod closed_stdout;
mod cut_inputs;
mod demo_and_profile;
#[cfg(feature = "distributed")]
mod distributed;
mod export;
mod flame;
#[cfg(target_os = "linux")]
mod io_model;
#[cfg(unix)]
mod io_recorded;
#[cfg(target_os = "linux")]
mod io_strace;
mod jaeger_oracles;
mod newcomer;
mod otlp_demo;
#[cfg(feature = "store")]
mod parquet_store;
mod profile_zoom;
#[cfg(unix)]
mod recover;
mod report;
