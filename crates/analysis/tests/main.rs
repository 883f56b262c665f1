//! The integration tests of `ringtrace-analysis`, in one test binary (each test binary links the
//! whole dependency tree): one module per area, each in its own file beside this one, and the
//! helpers they share in `common`. Run one area with `cargo test -p ringtrace-analysis --test
//! analysis <module>::`.

mod common;

mod anomaly;
mod causality;
#[cfg(feature = "store")]
mod engine;
mod flame;
mod fuzz_campaign;
mod inputs;
mod jaeger;
mod jaeger_fetch;
mod no_panic;
mod otlp_json;
mod profile;
mod profile_zoom;
mod recording;
mod report;
mod top_views_no_panic;
mod tree;
mod views_critical_path;
mod views_deep;
mod views_duplicates;
mod views_methods;
mod views_support;
mod views_text;
