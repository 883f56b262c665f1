//! `ringtrace export`: a raw recording written as OTLP protobuf, OTLP/JSON lines and Jaeger JSON
//! reads back as the same spans — ids, parents, names, times (to the microsecond for Jaeger),
//! kinds, statuses, attributes, events and links.

use std::collections::BTreeMap;

use crate::support::{ok, record, ringtrace, temp_dir, text};
use ringtrace_analysis::{read_inputs, Dataset, Span, Status};

/// What must survive every format, keyed by span id.
fn summary(data: &Dataset, micros: bool) -> BTreeMap<String, String> {
    let t = |ns: u64| if micros { ns / 1000 } else { ns };
    data.spans
        .iter()
        .map(|s: &Span| {
            let mut attrs: Vec<String> = s
                .attributes
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "span.kind" | "error" | "otel.status_code" | "otel.status_description"))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            attrs.sort();
            let events: Vec<String> = s
                .events
                .iter()
                .map(|e| {
                    let mut a: Vec<String> = e.attributes.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    a.sort();
                    format!("{}@{}[{}]", e.name, t(e.time_unix_ns), a.join(","))
                })
                .collect();
            let process = &data.processes[s.process];
            let line = format!(
                "trace={} parent={:?} name={} node={} daemon={} kind={} error={} start={} end={} request={:?} attrs=[{}] events=[{}] links={:?}",
                s.trace_id,
                s.parent_span_id.map(|p| p.to_string()),
                s.name,
                process.node,
                process.daemon,
                s.kind,
                matches!(s.status, Status::Error { .. }),
                t(s.start_unix_ns),
                // Jaeger keeps a start and a duration, both in microseconds.
                if micros { s.start_unix_ns / 1000 + s.duration_ns() / 1000 } else { s.end_unix_ns },
                s.request_id,
                attrs.join(","),
                events.join(";"),
                s.links.iter().map(|l| (l.trace_id.to_string(), l.span_id.to_string())).collect::<Vec<_>>(),
            );
            (s.span_id.to_string(), line)
        })
        .collect()
}

#[test]
fn a_raw_recording_exports_to_every_format_and_reads_back_the_same() {
    let dir = record("export", "node-e", "exporter", |_| {
        let root =
            tracing::info_span!("root", request.id = "req-1", otel.kind = "server", n = 7i64, ratio = 0.5f64);
        let _r = root.enter();
        let other = tracing::info_span!("other");
        let child = tracing::warn_span!(target: "app::io", "child", flag = true, text = "some text");
        child.follows_from(&other);
        let _c = child.enter();
        tracing::info!(bytes = 512u64, "read block");
        tracing::error!(code = 7i64, "failed");
    });
    let original = read_inputs(&[&dir]).unwrap();
    assert_eq!(original.spans.len(), 3);
    let out = temp_dir("export-out");
    std::fs::create_dir_all(&out).unwrap();
    for (format, file, micros) in
        [("otlp", "x.otlp", false), ("otlp-json", "x.jsonl", false), ("jaeger", "x.json", true)]
    {
        let path = out.join(file);
        ok(&["export", "--format", format, "-o", path.to_str().unwrap(), dir.to_str().unwrap()]);
        let back = read_inputs(&[&path]).unwrap_or_else(|e| panic!("{format}: {e}"));
        assert_eq!(summary(&back, micros), summary(&original, micros), "{format}");
    }
    // To standard output too.
    let stdout = ok(&["export", "--format", "jaeger", "-o", "-", dir.to_str().unwrap()]);
    assert!(stdout.starts_with("{\"data\":[{\"traceID\""), "{stdout}");
    // Bad arguments are refused with the problem named.
    let o = ringtrace(&["export", "--format", "zipkin", "-o", "-", dir.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("zipkin"), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&out);
}
