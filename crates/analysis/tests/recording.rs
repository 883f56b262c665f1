//! Binary recordings: a lossless round trip, counters across frames, streaming, and errors that
//! name the file and the byte offset.

use crate::common::{frame, recording, resource, span, TempDir};
use prost::Message;
use ringtrace_analysis::read::{
    for_each_batch_with, read_inputs_with, Position, ReadErrorKind, ReadWarningKind, Truncation,
};
use ringtrace_analysis::{
    for_each_batch, read_inputs, Process, Span, SpanEvent, SpanId, SpanKind, SpanLink, Status, TraceId, Value,
};
use ringtrace_core::otlp::KeyValueExt as _;
use ringtrace_core::otlp::{self, any_value, KeyValue};

const T0: u64 = 1_700_000_000_123_456_789;

fn trace_bytes() -> Vec<u8> {
    (1..=16).collect()
}

fn rich_frame(counters: [i64; 4]) -> otlp::TracesData {
    let mut res = resource("node-1", "worker", 4242, counters);
    res.attributes.push(KeyValue::string("deployment.environment", "test"));
    let a = otlp::Span {
        trace_id: trace_bytes(),
        span_id: vec![0xa0, 1, 2, 3, 4, 5, 6, 7],
        trace_state: "k=v".into(),
        parent_span_id: vec![],
        flags: 1,
        name: "handle".into(),
        kind: otlp::SpanKind::Server as i32,
        start_time_unix_nano: T0,
        end_time_unix_nano: T0 + 5_000_000,
        attributes: vec![
            KeyValue::string("target", "demo::worker"),
            KeyValue::string("code.namespace", "demo::worker"),
            KeyValue::string("code.filepath", "src/worker.rs"),
            KeyValue::int("code.lineno", 42),
            KeyValue::string("level", "INFO"),
            KeyValue::int("thread.id", 3),
            KeyValue::string("thread.name", "main"),
            KeyValue::string("request.id", "req-0001"),
            KeyValue::double("ratio", 0.5),
            KeyValue::bool("ok", true),
            KeyValue::new("blob", any_value::Value::BytesValue(vec![0, 1, 255])),
            KeyValue::new(
                "list",
                any_value::Value::ArrayValue(otlp::ArrayValue {
                    values: vec![
                        otlp::AnyValue { value: Some(any_value::Value::IntValue(1)) },
                        otlp::AnyValue { value: Some(any_value::Value::StringValue("two".into())) },
                    ],
                }),
            ),
            KeyValue::new(
                "nested",
                any_value::Value::KvlistValue(otlp::KeyValueList { values: vec![KeyValue::int("a", -1)] }),
            ),
            KeyValue { key: "empty".into(), value: None, ..Default::default() },
        ],
        dropped_attributes_count: 0,
        events: vec![otlp::Event {
            time_unix_nano: T0 + 1_000,
            name: "cache miss".into(),
            attributes: vec![KeyValue::string("key", "user:7")],
            dropped_attributes_count: 0,
        }],
        dropped_events_count: 0,
        links: vec![otlp::Link {
            trace_id: vec![9; 16],
            span_id: vec![8; 8],
            attributes: vec![KeyValue::string("why", "batch")],
            ..Default::default()
        }],
        dropped_links_count: 0,
        status: Some(otlp::Status { message: "boom".into(), code: otlp::StatusCode::Error as i32 }),
    };
    let b = otlp::Span {
        trace_id: trace_bytes(),
        span_id: vec![0xb0, 0, 0, 0, 0, 0, 0, 1],
        parent_span_id: vec![0xa0, 1, 2, 3, 4, 5, 6, 7],
        name: "fetch".into(),
        kind: otlp::SpanKind::Client as i32,
        start_time_unix_nano: T0 + 10,
        end_time_unix_nano: T0 + 3_000_010,
        attributes: vec![KeyValue::string("code.filepath", "src/x.rs")],
        status: Some(otlp::Status { message: String::new(), code: otlp::StatusCode::Ok as i32 }),
        ..Default::default()
    };
    frame(res, vec![a, b])
}

fn expected_spans() -> Vec<Span> {
    let trace_id = TraceId::from_bytes(trace_bytes().try_into().unwrap()).unwrap();
    let a_id = SpanId::from_bytes([0xa0, 1, 2, 3, 4, 5, 6, 7]).unwrap();
    let s = |k: &str, v: &str| (k.to_owned(), Value::Str(v.to_owned()));
    let a = Span {
        trace_id,
        span_id: a_id,
        parent_span_id: None,
        name: "handle".into(),
        target: Some("demo::worker".into()),
        node: "node-1".into(),
        daemon: "worker".into(),
        kind: SpanKind::Server,
        status: Status::Error { message: "boom".into() },
        start_unix_ns: T0,
        end_unix_ns: T0 + 5_000_000,
        request_id: Some("req-0001".into()),
        location: Some("src/worker.rs:42".into()),
        attributes: vec![
            s("target", "demo::worker"),
            s("code.namespace", "demo::worker"),
            s("code.filepath", "src/worker.rs"),
            ("code.lineno".into(), Value::Int(42)),
            s("level", "INFO"),
            ("thread.id".into(), Value::Int(3)),
            s("thread.name", "main"),
            s("request.id", "req-0001"),
            ("ratio".into(), Value::Float(0.5)),
            ("ok".into(), Value::Bool(true)),
            ("blob".into(), Value::Bytes(vec![0, 1, 255])),
            ("list".into(), Value::Array(vec![Value::Int(1), Value::Str("two".into())])),
            ("nested".into(), Value::Map(vec![("a".into(), Value::Int(-1))])),
            s("empty", ""),
        ],
        events: vec![SpanEvent {
            name: "cache miss".into(),
            time_unix_ns: T0 + 1_000,
            attributes: vec![s("key", "user:7")],
        }],
        links: vec![SpanLink {
            trace_id: TraceId::from_bytes([9; 16]).unwrap(),
            span_id: SpanId::from_bytes([8; 8]).unwrap(),
            attributes: vec![s("why", "batch")],
        }],
        process: 0,
    };
    let b = Span {
        trace_id,
        span_id: SpanId::from_bytes([0xb0, 0, 0, 0, 0, 0, 0, 1]).unwrap(),
        parent_span_id: Some(a_id),
        name: "fetch".into(),
        target: None,
        node: "node-1".into(),
        daemon: "worker".into(),
        kind: SpanKind::Client,
        status: Status::Ok,
        start_unix_ns: T0 + 10,
        end_unix_ns: T0 + 3_000_010,
        request_id: None,
        location: Some("src/x.rs".into()),
        attributes: vec![s("code.filepath", "src/x.rs")],
        events: vec![],
        links: vec![],
        process: 0,
    };
    vec![a, b]
}

#[test]
fn round_trip_keeps_every_field_and_max_counters() {
    let dir = TempDir::new("roundtrip");
    // Frame 2 is the counters-only frame; frame 3 reports some counters lower (max wins).
    let mut counters_only = rich_frame([5, 2, 1, 7]);
    counters_only.resource_spans[0].scope_spans.clear();
    let mut later = rich_frame([3, 9, 0, 0]);
    later.resource_spans[0].scope_spans[0].spans.clear();
    let path =
        dir.file("node-1_worker_4242.otlp", &recording(&[rich_frame([1, 0, 0, 0]), counters_only, later]));

    let data = read_inputs(&[&path]).unwrap();
    assert_eq!(data.spans, expected_spans());
    assert_eq!(
        data.processes,
        vec![Process {
            node: "node-1".into(),
            daemon: "worker".into(),
            pid: Some(4242),
            source: path.clone(),
            dropped_spans: 5,
            dropped_events: 9,
            unclosed_spans: 1,
            propagation_malformed: 7,
            attributes: vec![
                ("telemetry.sdk.name".into(), Value::Str("ringtrace".into())),
                ("deployment.environment".into(), Value::Str("test".into())),
            ],
        }]
    );
    assert_eq!(data.dropped_spans_total(), 5);
    assert_eq!(data.spans[0].method(), "demo::worker::handle");
    assert_eq!(data.spans[1].method(), "fetch");
    assert_eq!(data.spans[0].duration_ns(), 5_000_000);
}

#[test]
fn streaming_sees_one_batch_per_frame_with_growing_counters() {
    let dir = TempDir::new("stream");
    let frames = [
        frame(resource("n", "d", 1, [0, 0, 0, 0]), vec![span(1, 1, None, "a", 10, 20)]),
        frame(resource("n", "d", 1, [2, 0, 0, 0]), vec![span(1, 2, Some(1), "b", 12, 18)]),
        frame(resource("n", "d", 1, [4, 1, 0, 0]), vec![]),
    ];
    let path = dir.file("n_d_1.otlp", &recording(&frames));
    let mut seen = Vec::new();
    for_each_batch(&path, &mut |batch| {
        assert!(batch.spans.iter().all(|s| s.process == batch.process_index));
        seen.push((batch.process_index, batch.spans.len(), batch.process.dropped_spans));
    })
    .unwrap();
    assert_eq!(seen, vec![(0, 1, 0), (0, 1, 2), (0, 0, 4)]);
}

#[test]
fn a_file_with_two_resources_has_two_processes() {
    let dir = TempDir::new("tworesources");
    let mut data = frame(resource("n1", "master", 1, [1, 0, 0, 0]), vec![span(1, 1, None, "a", 1, 2)]);
    data.resource_spans.extend(
        frame(resource("n2", "worker", 2, [0, 0, 0, 0]), vec![span(1, 2, Some(1), "b", 1, 2)]).resource_spans,
    );
    let path = dir.file("mixed.otlp", &recording(&[data.clone(), data]));
    let read = read_inputs(&[&path]).unwrap();
    assert_eq!(read.processes.len(), 2);
    assert_eq!(read.processes[1].daemon, "worker");
    assert_eq!(read.spans.len(), 4);
    let procs: Vec<usize> = read.spans.iter().map(|s| s.process).collect();
    assert_eq!(procs, vec![0, 1, 0, 1]);
    assert_eq!(read.spans[1].node, "n2");
}

#[test]
fn a_hundred_thousand_distinct_processes_read_each_once() {
    // A resource each, every one seen twice: each span must land on its own process.
    const N: usize = 100_000;
    let one = |i: usize| {
        let id = (i % 250 + 1) as u8;
        frame(
            resource(&format!("node-{}", i % 97), "d", i as i64, [0; 4]),
            vec![span(1, id, None, "a", 1, 2)],
        )
    };
    let mut data = otlp::TracesData::default();
    for i in (0..N).chain(0..N) {
        data.resource_spans.extend(one(i).resource_spans);
    }
    let dir = TempDir::new("manyprocs");
    let path = dir.file("many.otlp", &recording(&[data]));
    let read = read_inputs(&[&path]).unwrap();
    assert_eq!(read.processes.len(), N);
    assert_eq!(read.spans.len(), 2 * N);
    for (i, s) in read.spans.iter().enumerate() {
        assert_eq!(s.process, i % N);
        assert_eq!(read.processes[s.process].pid, Some((i % N) as u32));
        assert_eq!(read.processes[s.process].node, format!("node-{}", i % N % 97));
    }
}

fn read_err(bytes: &[u8]) -> (std::path::PathBuf, ringtrace_analysis::ReadError, TempDir) {
    let dir = TempDir::new("errors");
    let path = dir.file("bad.otlp", bytes);
    let err = read_inputs(&[&path]).unwrap_err();
    (path, err, dir)
}

#[test]
fn truncated_frame_names_file_frame_and_offset() {
    let f1 = frame(resource("n", "d", 1, [0; 4]), vec![span(1, 1, None, "a", 1, 2)]);
    let f2 = frame(resource("n", "d", 1, [0; 4]), vec![span(1, 2, None, "b", 3, 4)]);
    let first = recording(std::slice::from_ref(&f1)).len();
    let bytes = recording(&[f1, f2.clone()]);
    let len2 = f2.encoded_len();
    let (path, err, _dir) = read_err(&bytes[..bytes.len() - 3]);
    assert_eq!(err.kind(), ReadErrorKind::Truncated);
    assert_eq!(err.position(), Some(&Position::Frame { index: 1, byte_offset: first as u64 }));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: frame 1 at byte {first}: truncated: length prefix says {len2} bytes, {} remain",
            path.display(),
            len2 - 3
        )
    );
}

#[test]
fn batches_before_an_error_are_delivered() {
    let f1 = frame(resource("n", "d", 1, [0; 4]), vec![span(1, 1, None, "a", 1, 2)]);
    let mut bytes = recording(&[f1]);
    bytes.push(0x80); // a length prefix cut after its first byte
    let dir = TempDir::new("partial");
    let path = dir.file("p.otlp", &bytes);
    let mut spans = 0;
    let err = for_each_batch(&path, &mut |b| spans += b.spans.len()).unwrap_err();
    assert_eq!(spans, 1);
    assert_eq!(err.kind(), ReadErrorKind::Truncated);
    let first = bytes.len() - 1;
    assert_eq!(
        err.to_string(),
        format!(
            "{}: frame 1 at byte {first}: truncated: the file ends inside a length prefix after 1 bytes",
            path.display()
        )
    );
}

#[test]
fn a_recording_cut_short_reads_its_intact_frames_when_asked() {
    let frames: Vec<_> = (1..=3)
        .map(|i| frame(resource("n", "d", 1, [i, 0, 0, 0]), vec![span(1, i as u8, None, "a", 1, 2)]))
        .collect();
    let two = recording(&frames[..2]).len();
    let bytes = recording(&frames);
    let dir = TempDir::new("cutrec");
    let path = dir.file("cut.otlp", &bytes[..bytes.len() - 5]);

    // Strict: an error, as before.
    let err = read_inputs(&[&path]).unwrap_err();
    assert_eq!(err.kind(), ReadErrorKind::Truncated);

    let outcome = read_inputs_with(&[&path], Truncation::Warn).unwrap();
    let names: Vec<_> = outcome.data.spans.iter().map(|s| s.span_id).collect();
    assert_eq!(names, [SpanId::new(1).unwrap(), SpanId::new(2).unwrap()]);
    assert_eq!(outcome.data.processes[0].dropped_spans, 2);
    let [w] = &outcome.warnings[..] else { panic!("{:?}", outcome.warnings) };
    let ignored = bytes.len() - 5 - two;
    assert_eq!(
        w.kind(),
        ReadWarningKind::TruncatedTail {
            read: 2,
            spans: 2,
            from_byte: two as u64,
            ignored_bytes: ignored as u64
        }
    );
    assert_eq!(w.position(), Some(&Position::Frame { index: 2, byte_offset: two as u64 }));
    assert_eq!(
        w.to_string(),
        format!(
            "{}: frame 2 at byte {two}: the file ends inside this frame (cut short mid-write?): read 2 \
             frames holding 2 spans, ignored the last {ignored} bytes from byte {two}",
            path.display()
        )
    );

    // Cut inside a length prefix: the prefix's bytes are ignored.
    let mut prefix_cut = recording(&frames[..1]);
    let one = prefix_cut.len();
    prefix_cut.push(0x80);
    let path = dir.file("prefix.otlp", &prefix_cut);
    let mut spans = 0;
    let warnings = for_each_batch_with(&path, Truncation::Warn, &mut |b| spans += b.spans.len()).unwrap();
    assert_eq!(spans, 1);
    assert_eq!(
        warnings[0].kind(),
        ReadWarningKind::TruncatedTail { read: 1, spans: 1, from_byte: one as u64, ignored_bytes: 1 }
    );

    // Damage that is not a cut stays an error.
    let mut corrupt = recording(&frames[..1]);
    corrupt.extend([0x03, 0x0a, 0xff, 0xff]);
    let path = dir.file("corrupt.otlp", &corrupt);
    let err = read_inputs_with(&[&path], Truncation::Warn).unwrap_err();
    assert_eq!(err.kind(), ReadErrorKind::Protobuf);
}

#[test]
fn corrupt_protobuf_is_reported() {
    let (path, err, _dir) = read_err(&[0x03, 0x0a, 0xff, 0xff]);
    assert_eq!(err.kind(), ReadErrorKind::Protobuf);
    assert_eq!(err.path(), path);
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{}: frame 0 at byte 0: invalid protobuf: ", path.display())),
        "{text}"
    );
}

#[test]
fn absurd_length_prefix_is_refused() {
    let (_, err, _dir) = read_err(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x0a]);
    assert_eq!(err.kind(), ReadErrorKind::Protobuf);
    assert!(err.message().contains("length prefix says 4294967295 bytes"), "{err}");
    let (_, err, _dir) = read_err(&[0xff; 12]);
    assert!(err.message().contains("invalid length prefix"), "{err}");
}

#[test]
fn bad_ids_name_the_span() {
    let mut bad = span(1, 1, None, "a", 1, 2);
    bad.trace_id = vec![1, 2, 3];
    let good = span(1, 2, None, "b", 1, 2);
    let mut data = frame(resource("n", "d", 1, [0; 4]), vec![good.clone(), bad]);
    let f0 = recording(&[frame(resource("n", "d", 1, [0; 4]), vec![good])]);
    let mut bytes = f0.clone();
    bytes.extend(recording(std::slice::from_ref(&data)));
    let (path, err, _dir) = read_err(&bytes);
    assert_eq!(err.kind(), ReadErrorKind::Invalid);
    assert_eq!(
        err.to_string(),
        format!(
            "{}: frame 1 at byte {}: span 1 of scope 0 of resource 0: trace id has 3 bytes, expected 16",
            path.display(),
            f0.len()
        )
    );

    data.resource_spans[0].scope_spans[0].spans[1] =
        otlp::Span { span_id: vec![0; 8], ..span(1, 1, None, "a", 1, 2) };
    let (_, err, _dir) = read_err(&recording(std::slice::from_ref(&data)));
    assert_eq!(err.message(), "span 1 of scope 0 of resource 0: span id is all zeros");

    data.resource_spans[0].scope_spans[0].spans[1] = span(1, 1, Some(1), "a", 1, 2);
    data.resource_spans[0].scope_spans[0].spans[1].parent_span_id = vec![1; 4];
    let (_, err, _dir) = read_err(&recording(&[data]));
    assert_eq!(err.message(), "span 1 of scope 0 of resource 0: parent span id has 4 bytes, expected 8 or 0");
}

#[test]
fn all_zero_parent_means_root() {
    let mut s = span(1, 1, None, "a", 1, 2);
    s.parent_span_id = vec![0; 8];
    let dir = TempDir::new("zeroparent");
    let path = dir.file("z.otlp", &recording(&[frame(resource("n", "d", 1, [0; 4]), vec![s])]));
    let data = read_inputs(&[&path]).unwrap();
    assert_eq!(data.spans[0].parent_span_id, None);
}

#[test]
fn missing_resource_attributes_get_defaults() {
    let data = otlp::TracesData {
        resource_spans: vec![otlp::ResourceSpans {
            resource: None,
            scope_spans: vec![otlp::ScopeSpans {
                spans: vec![span(1, 1, None, "a", 1, 2)],
                ..Default::default()
            }],
            schema_url: String::new(),
        }],
    };
    let dir = TempDir::new("defaults");
    let path = dir.file("x.otlp", &recording(&[data]));
    let read = read_inputs(&[&path]).unwrap();
    assert_eq!(read.processes[0].daemon, "unknown_service");
    assert_eq!(read.processes[0].node, "unknown");
    assert_eq!(read.processes[0].pid, None);
    assert_eq!(read.spans[0].node, "unknown");
}
