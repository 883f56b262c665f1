//! Writes a large synthetic recording — one ringtrace `.otlp` file per process, frames of 1,000
//! spans — shaped like the demo cluster's word counts, with node-2's disk ten times slower.
//!
//! ```text
//! cargo run --release -p ringtrace-analysis --example synthetic_recording -- OUT_DIR [SPANS]
//! ```
//!
//! `SPANS` defaults to 1,000,000 (in requests of 43 spans). The files are what `ringtrace`'s
//! analysis subcommands read, for measuring their time and memory at scale.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use ringtrace_analysis::SpanKind;
use ringtrace_core::otlp::{self, KeyValue};
use ringtrace_test_support::synthetic;

const FANOUT: usize = 8;
const FRAME_SPANS: usize = 1000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out: PathBuf = args.next().ok_or("usage: synthetic_recording OUT_DIR [SPANS]")?.into();
    let spans: usize = match args.next() {
        Some(s) => s.parse().map_err(|_| format!("SPANS {s:?} is not a number"))?,
        None => 1_000_000,
    };
    std::fs::create_dir_all(&out)?;
    let data = synthetic::dataset(spans.div_ceil(3 + 5 * FANOUT), FANOUT, 7);
    for (p, (node, daemon)) in synthetic::PROCESSES.iter().enumerate() {
        let path = out.join(format!("{node}_{daemon}_{}.otlp", 1000 + p));
        let mut file = BufWriter::new(File::create(&path)?);
        let resource = otlp::Resource {
            attributes: vec![
                KeyValue::string("service.name", *daemon),
                KeyValue::string("host.name", *node),
                KeyValue::int("process.pid", 1000 + p as i64),
                KeyValue::string("telemetry.sdk.name", "ringtrace"),
            ],
            dropped_attributes_count: 0,
        };
        let mine: Vec<otlp::Span> = data.spans.iter().filter(|s| s.process == p).map(to_otlp).collect();
        for chunk in mine.chunks(FRAME_SPANS) {
            let frame = otlp::TracesData {
                resource_spans: vec![otlp::ResourceSpans {
                    resource: Some(resource.clone()),
                    scope_spans: vec![otlp::ScopeSpans { spans: chunk.to_vec(), ..Default::default() }],
                    ..Default::default()
                }],
            };
            otlp::write_delimited(&frame, &mut file)?;
        }
        println!("{}: {} spans", path.display(), mine.len());
    }
    Ok(())
}

fn to_otlp(s: &ringtrace_analysis::Span) -> otlp::Span {
    let kind = match s.kind {
        SpanKind::Unspecified => otlp::SpanKind::Unspecified,
        SpanKind::Internal => otlp::SpanKind::Internal,
        SpanKind::Server => otlp::SpanKind::Server,
        SpanKind::Client => otlp::SpanKind::Client,
        SpanKind::Producer => otlp::SpanKind::Producer,
        SpanKind::Consumer => otlp::SpanKind::Consumer,
    };
    let (file, line) = s.location.as_deref().and_then(|l| l.rsplit_once(':')).unwrap_or(("", "0"));
    otlp::Span {
        trace_id: s.trace_id.to_bytes().to_vec(),
        span_id: s.span_id.to_bytes().to_vec(),
        parent_span_id: s.parent_span_id.map(|p| p.to_bytes().to_vec()).unwrap_or_default(),
        name: s.name.clone(),
        kind: kind as i32,
        start_time_unix_nano: s.start_unix_ns,
        end_time_unix_nano: s.end_unix_ns,
        attributes: vec![
            KeyValue::string("target", s.target.clone().unwrap_or_default()),
            KeyValue::string("code.filepath", file),
            KeyValue::int("code.lineno", line.parse().unwrap_or(0)),
            KeyValue::string("request.id", s.request_id.clone().unwrap_or_default()),
            KeyValue::int("thread.id", 7),
            KeyValue::string("thread.name", "tokio-runtime-worker"),
        ],
        ..Default::default()
    }
}
