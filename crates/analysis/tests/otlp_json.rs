//! OTLP/JSON lines (the Collector's file exporter format): the hand-written fixture reads the
//! same as its binary equivalent, and errors name the line.

use crate::common::{fixture, recording, TempDir};
use ringtrace_analysis::read::{Position, ReadErrorKind};
use ringtrace_analysis::{read_inputs, SpanId, SpanKind, Status, TraceId, Value};
use ringtrace_core::otlp::{self, any_value, KeyValue};

fn av(v: any_value::Value) -> otlp::AnyValue {
    otlp::AnyValue { value: Some(v) }
}

/// The fixture `collector.jsonl`, built as prost messages.
fn fixture_as_protobuf() -> Vec<otlp::TracesData> {
    let trace = hex(b"5b8efff798038103d269b633813fc60c");
    let res = |attrs| otlp::Resource { attributes: attrs, dropped_attributes_count: 0 };
    let scope = |spans| {
        vec![otlp::ScopeSpans {
            scope: Some(otlp::InstrumentationScope { name: "ringtrace".into(), ..Default::default() }),
            spans,
            schema_url: String::new(),
        }]
    };
    let handle = otlp::Span {
        trace_id: trace.clone(),
        span_id: hex(b"eee19b7ec3c1b174"),
        name: "handle".into(),
        kind: otlp::SpanKind::Server as i32,
        start_time_unix_nano: 1_700_000_000_000_000_000,
        end_time_unix_nano: 1_700_000_000_250_000_000,
        attributes: vec![
            KeyValue::string("target", "demo::master"),
            KeyValue::string("request.id", "req-0007"),
            KeyValue::string("code.filepath", "src/master.rs"),
            KeyValue::int("code.lineno", 17),
            KeyValue::new("blob", any_value::Value::BytesValue(vec![0, 1, 255])),
            KeyValue::new(
                "list",
                any_value::Value::ArrayValue(otlp::ArrayValue {
                    values: vec![
                        av(any_value::Value::IntValue(1)),
                        av(any_value::Value::StringValue("two".into())),
                        av(any_value::Value::DoubleValue(2.5)),
                    ],
                }),
            ),
            KeyValue::new(
                "nested",
                any_value::Value::KvlistValue(otlp::KeyValueList { values: vec![KeyValue::bool("a", true)] }),
            ),
            KeyValue::double("ratio", 0.25),
        ],
        events: vec![otlp::Event {
            time_unix_nano: 1_700_000_000_100_000_000,
            name: "retry".into(),
            attributes: vec![KeyValue::int("attempt", 2)],
            dropped_attributes_count: 0,
        }],
        status: Some(otlp::Status { message: "timed out".into(), code: 2 }),
        ..Default::default()
    };
    let store = otlp::Span {
        trace_id: trace,
        span_id: hex(b"00f067aa0ba902b7"),
        parent_span_id: hex(b"eee19b7ec3c1b174"),
        name: "store".into(),
        kind: otlp::SpanKind::Client as i32,
        start_time_unix_nano: 1_700_000_000_010_000_000,
        end_time_unix_nano: 1_700_000_000_200_000_000,
        attributes: vec![
            KeyValue::string("target", "demo::worker"),
            KeyValue::string("request.id", "req-0007"),
        ],
        links: vec![otlp::Link {
            trace_id: hex(b"4bf92f3577b34da6a3ce929d0e0e4736"),
            span_id: hex(b"00f067aa0ba902b8"),
            ..Default::default()
        }],
        status: Some(otlp::Status { message: String::new(), code: 1 }),
        ..Default::default()
    };
    vec![
        otlp::TracesData {
            resource_spans: vec![otlp::ResourceSpans {
                resource: Some(res(vec![
                    KeyValue::string("service.name", "master"),
                    KeyValue::string("host.name", "node-1"),
                    KeyValue::int("process.pid", 100),
                    KeyValue::string("telemetry.sdk.name", "ringtrace"),
                    KeyValue::int("ringtrace.dropped_spans", 3),
                    KeyValue::int("ringtrace.dropped_events", 0),
                ])),
                scope_spans: scope(vec![handle]),
                schema_url: String::new(),
            }],
        },
        otlp::TracesData {
            resource_spans: vec![otlp::ResourceSpans {
                resource: Some(res(vec![
                    KeyValue::string("service.name", "worker"),
                    KeyValue::string("host.name", "node-2"),
                    KeyValue::int("process.pid", 200),
                ])),
                scope_spans: scope(vec![store]),
                schema_url: String::new(),
            }],
        },
    ]
}

fn hex(s: &[u8]) -> Vec<u8> {
    s.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap()).collect()
}

#[test]
fn collector_lines_read_like_the_binary_recording() {
    let json = read_inputs(&[fixture("collector.jsonl")]).unwrap();
    let dir = TempDir::new("jsonequiv");
    let bin_path = dir.file("same.otlp", &recording(&fixture_as_protobuf()));
    let mut bin = read_inputs(&[&bin_path]).unwrap();
    for p in &mut bin.processes {
        p.source = fixture("collector.jsonl");
    }
    assert_eq!(json, bin);
}

#[test]
fn collector_lines_map_to_the_model() {
    let data = read_inputs(&[fixture("collector.jsonl")]).unwrap();
    assert_eq!(data.processes.len(), 2);
    assert_eq!(data.processes[0].daemon, "master");
    assert_eq!(data.processes[0].node, "node-1");
    assert_eq!(data.processes[0].pid, Some(100));
    assert_eq!(data.processes[0].dropped_spans, 3);
    assert_eq!(data.processes[1].pid, Some(200));

    let [handle, store] = &data.spans[..] else { panic!("expected two spans") };
    let trace = TraceId::from_hex("5b8efff798038103d269b633813fc60c").unwrap();
    assert_eq!(handle.trace_id, trace);
    assert_eq!(store.trace_id, trace);
    assert_eq!(handle.parent_span_id, None);
    assert_eq!(store.parent_span_id, Some(SpanId::from_hex("eee19b7ec3c1b174").unwrap()));
    assert_eq!(handle.kind, SpanKind::Server);
    assert_eq!(store.kind, SpanKind::Client);
    assert_eq!(handle.status, Status::Error { message: "timed out".into() });
    assert_eq!(store.status, Status::Ok);
    assert_eq!(handle.start_unix_ns, 1_700_000_000_000_000_000);
    assert_eq!(handle.duration_ns(), 250_000_000);
    assert_eq!(handle.location.as_deref(), Some("src/master.rs:17"));
    assert_eq!(handle.request_id.as_deref(), Some("req-0007"));
    assert_eq!(handle.attribute("blob"), Some(&Value::Bytes(vec![0, 1, 255])));
    assert_eq!(handle.events[0].name, "retry");
    assert_eq!(handle.events[0].attributes, vec![("attempt".into(), Value::Int(2))]);
    assert_eq!(store.method(), "demo::worker::store");
    assert_eq!(store.links[0].span_id, SpanId::from_hex("00f067aa0ba902b8").unwrap());
    assert_eq!((store.process, &*store.node, &*store.daemon), (1, "node-2", "worker"));
}

fn json_err(text: &str) -> (std::path::PathBuf, ringtrace_analysis::ReadError, TempDir) {
    let dir = TempDir::new("jsonerr");
    let path = dir.file("bad.jsonl", text.as_bytes());
    let err = read_inputs(&[&path]).unwrap_err();
    (path, err, dir)
}

const SPAN_OK: &str =
    r#"{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"a"}"#;

fn line_with(span: &str) -> String {
    format!(r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{span}]}}]}}]}}"#)
}

#[test]
fn syntax_errors_name_line_and_column() {
    let text = format!("{}\n\n{{\"resourceSpans\": [}}\n", line_with(SPAN_OK));
    let (path, err, _dir) = json_err(&text);
    assert_eq!(err.kind(), ReadErrorKind::Json);
    assert_eq!(err.position(), Some(&Position::Line { line: 3, column: Some(20) }));
    assert_eq!(err.to_string(), format!("{}: line 3 column 20: expected value", path.display()));
}

#[test]
fn truncated_json_says_so() {
    let full = line_with(SPAN_OK);
    let (_, err, _dir) = json_err(&full[..full.len() - 5]);
    assert_eq!(err.kind(), ReadErrorKind::Json);
    assert!(err.message().starts_with("truncated JSON: EOF while parsing"), "{err}");
}

#[test]
fn bad_values_name_the_line() {
    let bad_hex = SPAN_OK.replace("eee19b7ec3c1b174", "eee19b7ec3c1b17z");
    let text = format!("{}\n{}\n", line_with(SPAN_OK), line_with(&bad_hex));
    let (_, err, _dir) = json_err(&text);
    assert_eq!(err.kind(), ReadErrorKind::Json);
    assert!(matches!(err.position(), Some(Position::Line { line: 2, column: Some(_) })));
    assert!(err.message().contains("invalid hex id"), "{err}");
    assert!(err.message().contains("character 15 is not a hex digit"), "{err}");

    let short = SPAN_OK.replace("5b8efff798038103d269b633813fc60c", "abcd");
    let text = format!("{}\n\n{}\n", line_with(SPAN_OK), line_with(&short));
    let (path, err, _dir) = json_err(&text);
    assert_eq!(err.kind(), ReadErrorKind::Invalid);
    assert_eq!(
        err.to_string(),
        format!(
            "{}: line 3: span 0 of scope 0 of resource 0: trace id has 2 bytes, expected 16",
            path.display()
        )
    );

    let bad_kind = SPAN_OK.replace(r#""name":"a""#, r#""name":"a","kind":"SPAN_KIND_BOGUS""#);
    let (_, err, _dir) = json_err(&line_with(&bad_kind));
    assert!(err.message().contains("SPAN_KIND_BOGUS"), "{err}");
    assert!(err.message().contains("SPAN_KIND_SERVER"), "{err}");
}

#[test]
fn numbers_enums_and_nulls_follow_the_json_mapping() {
    let span = r#"{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174",
        "parentSpanId":null,"name":"a","kind":"SPAN_KIND_CONSUMER","startTimeUnixNano":"5",
        "endTimeUnixNano":7,"status":{"code":"STATUS_CODE_OK"},"events":null,
        "attributes":[{"key":"big","value":{"intValue":"-9223372036854775808"}},
                      {"key":"nan","value":{"doubleValue":"NaN"}},
                      {"key":"none","value":{}}]}"#;
    let dir = TempDir::new("jsonmapping");
    // Pretty-printed over several lines: still one value.
    let path = dir.file("x.json", line_with(span).as_bytes());
    let data = read_inputs(&[&path]).unwrap();
    let s = &data.spans[0];
    assert_eq!((s.start_unix_ns, s.end_unix_ns), (5, 7));
    assert_eq!(s.kind, SpanKind::Consumer);
    assert_eq!(s.status, Status::Ok);
    assert_eq!(s.parent_span_id, None);
    assert_eq!(s.attribute("big"), Some(&Value::Int(i64::MIN)));
    assert!(matches!(s.attribute("nan"), Some(Value::Float(x)) if x.is_nan()));
    assert_eq!(s.attribute("none"), Some(&Value::Str(String::new())));
}

#[test]
fn unknown_json_is_an_error_listing_the_keys() {
    let (path, err, _dir) = json_err("{\"foo\": 1, \"bar\": []}");
    assert_eq!(err.kind(), ReadErrorKind::UnknownFormat);
    assert_eq!(
        err.to_string(),
        format!(
            "{}: line 1: expected a Jaeger document (key `data`) or OTLP/JSON (key \
             `resourceSpans`), found keys: [bar, foo]",
            path.display()
        )
    );
}

#[test]
fn line_numbers_stay_right_in_a_long_file() {
    // 20,000 lines; the last one is bad.
    let good = line_with(SPAN_OK);
    let mut text = String::new();
    for _ in 0..19_999 {
        text.push_str(&good);
        text.push('\n');
    }
    let dir = TempDir::new("longfile");

    let short_id = SPAN_OK.replace("5b8efff798038103d269b633813fc60c", "abcd");
    let path = dir.file("a.jsonl", format!("{text}{}\n", line_with(&short_id)).as_bytes());
    let err = read_inputs(&[&path]).unwrap_err();
    assert_eq!(err.kind(), ReadErrorKind::Invalid);
    assert_eq!(err.position(), Some(&Position::Line { line: 20_000, column: None }));

    let path = dir.file("b.jsonl", format!("{text}{{\"resourceSpans\": [}}\n").as_bytes());
    let err = read_inputs(&[&path]).unwrap_err();
    assert_eq!(err.position(), Some(&Position::Line { line: 20_000, column: Some(20) }));
}
