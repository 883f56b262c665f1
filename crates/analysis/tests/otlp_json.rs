//! OTLP/JSON lines (the Collector's file exporter format): the hand-written fixture reads the
//! same as its binary equivalent, and errors name the line.

use crate::common::{fixture, recording, TempDir};
use ringtrace_analysis::read::{read_inputs_with, Position, ReadErrorKind, ReadWarningKind, Truncation};
use ringtrace_analysis::{read_inputs, Dataset, SpanId, SpanKind, Status, TraceId, Value};
use ringtrace_core::otlp::KeyValueExt as _;
use ringtrace_core::otlp::{self, any_value, KeyValue};

fn av(v: any_value::Value) -> otlp::AnyValue {
    otlp::AnyValue { value: Some(v) }
}

/// The fixture `collector.jsonl`, built as prost messages.
fn fixture_as_protobuf() -> Vec<otlp::TracesData> {
    let trace = hex(b"5b8efff798038103d269b633813fc60c");
    let res = |attrs| otlp::Resource { attributes: attrs, ..Default::default() };
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

const UNDERSTOOD: &str = "understood: OTLP/JSON (`resourceSpans` or `resource_spans`, Tempo's \
    `batches`, either inside `trace` or `result`), Jaeger (`data`, or a trace object with \
    `traceID`, `spans` and `processes`, or a list of them)";

#[test]
fn unknown_json_is_an_error_listing_the_keys() {
    let (path, err, _dir) = json_err("{\"foo\": 1, \"bar\": []}");
    assert_eq!(err.kind(), ReadErrorKind::UnknownFormat);
    assert_eq!(
        err.to_string(),
        format!(
            "{}: line 1: no spans in a shape this reader knows: found keys [bar, foo]; {UNDERSTOOD}",
            path.display()
        )
    );
}

/// The fixture's lines as JSON values.
fn fixture_values() -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(fixture("collector.jsonl")).unwrap();
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Reads `values` written one per line, with every process's source set to the fixture's path
/// so that datasets compare equal.
fn read_values(values: &[serde_json::Value]) -> ringtrace_analysis::Dataset {
    let text: String = values.iter().map(|v| format!("{v}\n")).collect();
    let dir = TempDir::new("shapes");
    let mut data = read_inputs(&[dir.file("t.json", text.as_bytes())]).unwrap();
    for p in &mut data.processes {
        p.source = fixture("collector.jsonl");
    }
    data
}

/// Rewrites every object key with `f`, leaving values (attribute names among them) alone.
fn map_keys(v: &serde_json::Value, f: &dyn Fn(&str) -> String) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        J::Object(o) => J::Object(o.iter().map(|(k, v)| (f(k), map_keys(v, f))).collect()),
        J::Array(a) => J::Array(a.iter().map(|v| map_keys(v, f)).collect()),
        other => other.clone(),
    }
}

fn snake_case(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

#[test]
fn protobuf_field_names_read_like_lower_camel_case() {
    let camel = fixture_values();
    let snake: Vec<_> = camel.iter().map(|v| map_keys(v, &snake_case)).collect();
    let text = snake[0].to_string();
    for key in
        ["resource_spans", "scope_spans", "trace_id", "span_id", "start_time_unix_nano", "string_value"]
    {
        assert!(text.contains(&format!("\"{key}\"")), "{key} missing from {text}");
    }
    assert!(snake[1].to_string().contains("\"parent_span_id\""));
    for key in ["int_value", "kvlist_value", "array_value", "bytes_value", "time_unix_nano"] {
        assert!(text.contains(&format!("\"{key}\"")), "{key} missing");
    }
    let expected = read_values(&camel);
    assert_eq!(expected.spans.len(), 2);
    assert_eq!(read_values(&snake), expected);
}

#[test]
fn tempo_and_jaeger_api_v3_envelopes_read_like_the_collector_lines() {
    let lines = fixture_values();
    let expected = read_values(&lines);
    let wrap = |key: &str, v: &serde_json::Value| serde_json::json!({ key: v });
    // Tempo v2: {"trace": TracesData}; Jaeger api_v3: {"result": TracesData}, one per chunk.
    let tempo: Vec<_> = lines.iter().map(|v| wrap("trace", v)).collect();
    assert_eq!(read_values(&tempo), expected);
    let v3: Vec<_> = lines.iter().map(|v| wrap("result", v)).collect();
    assert_eq!(read_values(&v3), expected);
    // Tempo v1: {"batches": [ResourceSpans]} with instrumentationLibrarySpans.
    let v1: Vec<_> = lines
        .iter()
        .map(|v| {
            let renamed = map_keys(v, &|k| {
                if k == "scopeSpans" {
                    "instrumentationLibrarySpans".into()
                } else {
                    k.to_owned()
                }
            });
            serde_json::json!({ "batches": renamed["resourceSpans"] })
        })
        .collect();
    assert_eq!(read_values(&v1), expected);
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Replaces the hex ids of spans and links with base64, as proto3 JSON writes bytes.
fn ids_to_base64(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        J::Object(o) => J::Object(
            o.iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("traceId" | "spanId" | "parentSpanId", J::String(h)) if !h.is_empty() => {
                        (k.clone(), J::String(base64(&hex(h.to_ascii_lowercase().as_bytes()))))
                    }
                    _ => (k.clone(), ids_to_base64(v)),
                })
                .collect(),
        ),
        J::Array(a) => J::Array(a.iter().map(ids_to_base64).collect()),
        other => other.clone(),
    }
}

#[test]
fn base64_ids_and_enum_names_read_like_hex_ids() {
    assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    assert_eq!(base64(b"fo"), "Zm8=");
    let lines = fixture_values();
    let base64_lines: Vec<_> = lines.iter().map(ids_to_base64).collect();
    let text = base64_lines[1].to_string();
    assert!(text.contains("\"traceId\":\"W47/95gDgQPSabYzgT/GDA==\""), "{text}");
    let expected = read_values(&lines);
    assert_eq!(read_values(&base64_lines), expected);
    let tempo: Vec<_> = base64_lines.iter().map(|v| serde_json::json!({ "trace": v })).collect();
    assert_eq!(read_values(&tempo), expected);

    // Tempo's own example, unpadded base64 too, and enums by name.
    let span = r#"{"traceId":"S/kvNXezTaajzpKdDg5HNg==","spanId":"AAAAAAAAAAE=","parentSpanId":"AAAAAAAAAAI",
        "name":"get","kind":"SPAN_KIND_SERVER","status":{"code":"STATUS_CODE_ERROR"}}"#;
    let dir = TempDir::new("tempo");
    let path = dir.file(
        "tempo.json",
        format!(r#"{{"trace":{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{span}]}}]}}]}}}}"#).as_bytes(),
    );
    let data = read_inputs(&[&path]).unwrap();
    let s = &data.spans[0];
    assert_eq!(s.trace_id, TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap());
    assert_eq!(s.span_id, SpanId::new(1).unwrap());
    assert_eq!(s.parent_span_id, SpanId::new(2));
    assert_eq!(s.kind, SpanKind::Server);
    assert_eq!(s.status, Status::Error { message: String::new() });

    // A base64-length id that is not base64 says so.
    let bad = span.replace("S/kvNXezTaajzpKdDg5HNg==", "S/kvNXezTaajzpKdDg5HN!==");
    let (_, err, _dir) = json_err(&line_with(&bad));
    assert!(err.message().contains("invalid base64 id"), "{err}");
}

#[test]
fn a_value_of_no_known_shape_is_an_error_naming_its_line() {
    let text = format!("{}\n{{\"resourceSpan\":[], \"other\": 1}}\n", line_with(SPAN_OK));
    let (path, err, _dir) = json_err(&text);
    assert_eq!(err.kind(), ReadErrorKind::UnknownFormat);
    assert_eq!(
        err.to_string(),
        format!(
            "{}: line 2: no spans in a shape this reader knows: found keys [other, resourceSpan]; {UNDERSTOOD}",
            path.display()
        )
    );
}

#[test]
fn a_document_of_a_known_shape_without_spans_warns() {
    let dir = TempDir::new("nospans");
    let empty = dir.file("empty.json", b"{\"resourceSpans\": []}\n{\"resource_spans\": null}");
    let outcome = read_inputs_with(&[&empty], Truncation::Error).unwrap();
    assert!(outcome.data.spans.is_empty());
    assert_eq!(outcome.warnings.len(), 1);
    let w = &outcome.warnings[0];
    assert_eq!(w.kind(), ReadWarningKind::NoSpans);
    assert_eq!(w.to_string(), format!("{}: the OTLP/JSON document holds no spans", empty.display()));
    // Files with spans give no warning.
    let full = read_inputs_with(&[fixture("collector.jsonl")], Truncation::Warn).unwrap();
    assert!(full.warnings.is_empty());
}

/// The fixture's lines, then a copy of its first line cut `cut` bytes short.
fn cut_lines(cut: usize) -> (String, usize) {
    let text = std::fs::read_to_string(fixture("collector.jsonl")).unwrap();
    let first = text.lines().next().unwrap();
    let whole = format!("{}\n", text.trim_end());
    let start = whole.len();
    (format!("{whole}{}", &first[..first.len() - cut]), start)
}

#[test]
fn a_last_line_cut_short_is_a_warning_when_asked() {
    let (text, start) = cut_lines(40);
    let lines = text.lines().count();
    let dir = TempDir::new("cutline");
    let path = dir.file("cut.jsonl", text.as_bytes());

    let err = read_inputs(&[&path]).unwrap_err();
    assert_eq!(err.kind(), ReadErrorKind::Json);
    assert!(err.message().starts_with("truncated JSON"), "{err}");

    let outcome = read_inputs_with(&[&path], Truncation::Warn).unwrap();
    assert_eq!(outcome.data, read_values(&fixture_values()).with_source(&path));
    let [w] = &outcome.warnings[..] else { panic!("{:?}", outcome.warnings) };
    let ignored = text.len() - start;
    assert_eq!(
        w.kind(),
        ReadWarningKind::TruncatedTail {
            read: 2,
            spans: 2,
            from_byte: start as u64,
            ignored_bytes: ignored as u64
        }
    );
    assert_eq!(w.position(), Some(&Position::Line { line: lines, column: None }));
    assert_eq!(
        w.to_string(),
        format!(
            "{}: line {lines}: the file ends inside this line (cut short mid-write?): read 2 lines \
             holding 2 spans, ignored the last {ignored} bytes from byte {start}",
            path.display()
        )
    );

    // A value cut over several lines is damage, not a cut last line.
    let pretty = format!("{}\n{{\"resourceSpans\":\n[", text.lines().next().unwrap());
    let path = dir.file("pretty.json", pretty.as_bytes());
    let err = read_inputs_with(&[&path], Truncation::Warn).unwrap_err();
    assert!(err.message().starts_with("truncated JSON"), "{err}");
}

#[test]
fn line_numbers_stay_right_in_a_long_file() {
    // 20,000 lines; the last one is bad in three ways in turn.
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

    let path = dir.file("c.jsonl", format!("{text}{}", &good[..good.len() - 3]).as_bytes());
    let outcome = read_inputs_with(&[&path], Truncation::Warn).unwrap();
    assert_eq!(outcome.data.spans.len(), 19_999);
    assert_eq!(outcome.warnings[0].position(), Some(&Position::Line { line: 20_000, column: None }));
}

trait WithSource {
    fn with_source(self, path: &std::path::Path) -> Self;
}

impl WithSource for Dataset {
    fn with_source(mut self, path: &std::path::Path) -> Self {
        self.processes.iter_mut().for_each(|p| p.source = path.to_owned());
        self
    }
}
