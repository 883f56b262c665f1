//! The spans the benches and `examples/span_loop.rs` record: one definition each, so that every
//! figure measures the same span.
//!
//! Each is inlined into its caller's loop (`#[inline(always)]`), as the local copies it replaced
//! were: `span_loop`'s instruction counts stay comparable with those measured before.

use std::hint::black_box;

/// `info_span!` with one integer field, entered, exited and dropped.
#[inline(always)]
pub fn one_span(i: u64) {
    let span = tracing::info_span!("work", i);
    let _e = span.enter();
    black_box(&span);
}

/// [`one_span`] with one `info!` event (one integer field) inside.
#[inline(always)]
pub fn span_with_event(i: u64) {
    let span = tracing::info_span!("work", i);
    let _e = span.enter();
    tracing::info!(n = i, "event");
    black_box(&span);
}

/// [`one_span`] with eight integer fields instead of one.
#[inline(always)]
pub fn fields_8(i: u64) {
    let span = tracing::info_span!(
        "work",
        a = i,
        b = i + 1,
        c = i + 2,
        d = i + 3,
        e = i + 4,
        f = i + 5,
        g = i + 6,
        h = i + 7
    );
    let _e = span.enter();
    black_box(&span);
}

/// [`one_span`] with four short string fields instead of an integer: two `&str`, two `Display`.
#[inline(always)]
pub fn strings_4(i: u64) {
    let span = tracing::info_span!("work", a = "alpha", b = "beta", c = %i, d = %"delta");
    let _e = span.enter();
    black_box(&span);
}
