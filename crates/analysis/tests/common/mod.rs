//! Helpers shared by the integration tests: temporary directories and OTLP builders.

use ringtrace_core::otlp::KeyValueExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use ringtrace_core::otlp::{self, KeyValue};

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ringtrace-analysis-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The path of a shared oracle fixture, laid out beside the workspace as CI does.
pub fn oracle(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/oracles").join(rel)
}

/// A small test fixture under `tests/data`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// A ringtrace resource: identity plus the four counters (dropped spans, dropped events,
/// unclosed spans, malformed propagation).
pub fn resource(node: &str, daemon: &str, pid: i64, counters: [i64; 4]) -> otlp::Resource {
    otlp::Resource {
        attributes: vec![
            KeyValue::string("service.name", daemon),
            KeyValue::string("host.name", node),
            KeyValue::int("process.pid", pid),
            KeyValue::string("telemetry.sdk.name", "ringtrace"),
            KeyValue::int("ringtrace.dropped_spans", counters[0]),
            KeyValue::int("ringtrace.dropped_events", counters[1]),
            KeyValue::int("ringtrace.unclosed_spans", counters[2]),
            KeyValue::int("ringtrace.propagation_malformed", counters[3]),
        ],
        ..Default::default()
    }
}

/// One frame holding `spans` of one resource.
pub fn frame(resource: otlp::Resource, spans: Vec<otlp::Span>) -> otlp::TracesData {
    otlp::TracesData {
        resource_spans: vec![otlp::ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![otlp::ScopeSpans {
                scope: Some(otlp::InstrumentationScope { name: "ringtrace".into(), ..Default::default() }),
                spans,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// A minimal span: ids from small integers, times in ns, with a `target` attribute.
pub fn span(trace: u8, id: u8, parent: Option<u8>, name: &str, start: u64, end: u64) -> otlp::Span {
    otlp::Span {
        trace_id: [[0; 15].as_slice(), &[trace]].concat(),
        span_id: [[0; 7].as_slice(), &[id]].concat(),
        parent_span_id: parent.map(|p| [[0; 7].as_slice(), &[p]].concat()).unwrap_or_default(),
        name: name.into(),
        kind: otlp::SpanKind::Internal as i32,
        start_time_unix_nano: start,
        end_time_unix_nano: end,
        attributes: vec![KeyValue::string("target", "demo::app")],
        ..Default::default()
    }
}

/// Frames encoded as a recording.
pub fn recording(frames: &[otlp::TracesData]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        otlp::write_delimited(f, &mut out).unwrap();
    }
    out
}

/// A model span built directly, for analysis tests.
#[allow(clippy::too_many_arguments)]
pub fn model_span(
    id: u64,
    parent: Option<u64>,
    node: &str,
    daemon: &str,
    target: Option<&str>,
    name: &str,
    start_unix_ns: u64,
    duration_ns: u64,
    process: usize,
) -> ringtrace_analysis::Span {
    use ringtrace_analysis::{SpanId, SpanKind, Status, TraceId};
    ringtrace_analysis::Span {
        trace_id: TraceId::new(0xabc).unwrap(),
        span_id: SpanId::new(id).unwrap(),
        parent_span_id: parent.map(|p| SpanId::new(p).unwrap()),
        name: name.into(),
        target: target.map(Into::into),
        node: node.into(),
        daemon: daemon.into(),
        kind: SpanKind::Internal,
        status: Status::Unset,
        start_unix_ns,
        end_unix_ns: start_unix_ns + duration_ns,
        request_id: None,
        location: None,
        attributes: vec![],
        events: vec![],
        links: vec![],
        process,
    }
}
