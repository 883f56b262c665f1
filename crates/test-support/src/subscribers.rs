//! Reference subscribers shared by `benches/span_cost.rs`, `examples/span_loop.rs` and
//! `crates/bench-peers`.

/// A layer that does nothing: registry + this is the baseline a layer's cost is measured from.
pub struct NoopLayer;
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for NoopLayer {}

/// The least a `Subscriber` of its own must do: hand out span ids. `tracing`'s dispatch floor.
#[derive(Default)]
pub struct NullSubscriber(std::sync::atomic::AtomicU64);

impl tracing::Subscriber for NullSubscriber {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        use std::sync::atomic::Ordering::Relaxed;
        // One thread records: a load and a store, no read-modify-write.
        let id = self.0.load(Relaxed) + 1;
        self.0.store(id, Relaxed);
        tracing::span::Id::from_u64(id)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The least any span recorder must do, as a layer and as a subscriber of its own: lower bounds
/// for `RingLayer` and `RingSubscriber` (see [`crate::floor`]).
pub use crate::floor::{DiskFloorSubscriber, FloorLayer, FloorSubscriber, FloorSubscriberOf};
