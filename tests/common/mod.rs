//! Test support: a sink that keeps the parts of each span the tests check.
#![allow(dead_code)] // each test binary uses a different part

use std::sync::{Arc, Mutex};

use ringtrace::{FnSink, SpanData, Value};

/// The parts of a span the tests check.
#[derive(Debug, Clone)]
pub struct Seen {
    pub trace: ringtrace::TraceId,
    pub span: ringtrace::SpanId,
    pub parent: Option<ringtrace::SpanId>,
    pub name: &'static str,
    pub i: Option<u64>,
    pub thread: u64,
    pub unclosed: bool,
    pub request: Option<String>,
    pub events: usize,
}

pub type Store = Arc<Mutex<Vec<Seen>>>;

pub fn collecting() -> (Store, FnSink<impl FnMut(&[SpanData], &ringtrace::ResourceInfo) + Send + 'static>) {
    let store: Store = Arc::default();
    let s = store.clone();
    let sink = FnSink(move |batch: &[SpanData], _: &ringtrace::ResourceInfo| {
        let mut s = s.lock().unwrap();
        s.extend(batch.iter().map(|d| Seen {
            trace: d.trace_id,
            span: d.span_id,
            parent: d.parent_span_id,
            name: d.meta.name(),
            i: match d.field("i") {
                Some(Value::U64(v)) => Some(*v),
                Some(Value::I64(v)) => Some(*v as u64),
                _ => None,
            },
            thread: d.thread_id,
            unclosed: d.unclosed,
            request: d.request_id.as_deref().map(str::to_owned),
            events: d.events.len(),
        }));
    });
    (store, sink)
}
