//! The acceptance tests of `ringtrace`, in one test binary (each test binary links the whole
//! dependency tree): one module per area, each in its own file beside this one, and the helpers
//! they share in `common`. Run one area with `cargo test --test integration <module>::`.

mod common;

mod bad_day;
mod capture;
mod config;
mod cross_process;
mod exit;
mod fields;
#[cfg(unix)]
mod kill;
mod loss_properties;
#[cfg(target_os = "linux")]
mod memory;
mod recording;
