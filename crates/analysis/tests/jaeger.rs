//! Jaeger query-API JSON: the shared oracle fixtures and a hand-written document covering the
//! mapping rules.

use std::collections::BTreeMap;

use crate::common::{oracle, TempDir};
use ringtrace_analysis::read::{read_inputs_with, Position, ReadErrorKind, ReadWarningKind, Truncation};
use ringtrace_analysis::{read_inputs, trace_tree, SpanId, SpanKind, Status, TraceId, TreeLine, Value};

fn sid(s: &str) -> SpanId {
    SpanId::from_hex(s).unwrap()
}

#[test]
fn trace_statistics_fixture_reads_with_parents_services_and_ns_times() {
    let path = oracle("jaeger-trace-stats/testTraceNormal.json");
    let data = read_inputs(&[&path]).unwrap();
    assert_eq!(data.spans.len(), 5);
    let services: Vec<&str> = data.processes.iter().map(|p| p.daemon.as_str()).collect();
    assert_eq!(services, ["customers-service", "api-gateway"]);
    // No host tags: the node is the service name.
    assert!(data.processes.iter().all(|p| p.node == p.daemon && p.source == path));

    let by_id: BTreeMap<SpanId, _> = data.spans.iter().map(|s| (s.span_id, s)).collect();
    let parent = |id: &str| by_id[&sid(id)].parent_span_id;
    assert_eq!(parent("150c193cf155b46b"), None);
    assert_eq!(parent("22be69e72cbcde0b"), Some(sid("150c193cf155b46b")));
    assert_eq!(parent("e821b549888cbc3b"), Some(sid("22be69e72cbcde0b")));
    assert_eq!(parent("622a5079b565623e"), Some(sid("e821b549888cbc3b")));
    assert_eq!(parent("4085dddb47429851"), Some(sid("e821b549888cbc3b")));

    let root = by_id[&sid("150c193cf155b46b")];
    assert_eq!(root.name, "GET /api/customer/owners/8/pets/10");
    assert_eq!(root.daemon, "api-gateway");
    assert_eq!(root.start_unix_ns, 1_579_070_675_083_000 * 1000);
    assert_eq!(root.duration_ns(), 4_902_000);
    assert_eq!(root.method(), root.name);
    let trace = TraceId::from_hex("4766f1209f70a5e2e55417fc296fd101").unwrap();
    assert!(data.spans.iter().all(|s| s.trace_id == trace));

    // The oracle's own numbers: trace duration and per-service count and total time.
    let expected: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let start = data.spans.iter().map(|s| s.start_unix_ns).min().unwrap();
    let end = data.spans.iter().map(|s| s.end_unix_ns).max().unwrap();
    assert_eq!(end - start, expected["trace_duration_us"].as_u64().unwrap() * 1000);
    for row in expected["expected_by_service"].as_array().unwrap() {
        let service = row["service"].as_str().unwrap();
        let spans: Vec<_> = data.spans.iter().filter(|s| s.daemon == service).collect();
        assert_eq!(spans.len() as u64, row["count"].as_u64().unwrap(), "{service}");
        let total: u64 = spans.iter().map(|s| s.duration_ns()).sum();
        assert_eq!(total, row["total_us"].as_u64().unwrap() * 1000, "{service}");
    }

    // The tree: gateway → gateway → (crossing) customers-service → two queries by start.
    let tree = trace_tree(&data, trace);
    let shape: Vec<(usize, SpanId, bool)> =
        tree.iter().map(|l| (l.depth, data.spans[l.span].span_id, l.cross_process)).collect();
    assert_eq!(
        shape,
        vec![
            (0, sid("150c193cf155b46b"), false),
            (1, sid("22be69e72cbcde0b"), false),
            (2, sid("e821b549888cbc3b"), true),
            (3, sid("4085dddb47429851"), false),
            (3, sid("622a5079b565623e"), false),
        ]
    );
}

#[test]
fn critical_path_case5_follows_from_parent_and_span_kinds() {
    let data = read_inputs(&[oracle("jaeger-critical-path/case5.json")]).unwrap();
    assert_eq!(data.spans.len(), 3);
    let by_name: BTreeMap<&str, _> = data.spans.iter().map(|s| (s.name.as_str(), s)).collect();
    let (a, b, c) = (by_name["op-A"], by_name["op-B"], by_name["op-C"]);
    assert_eq!(a.parent_span_id, None);
    // B's only reference is FOLLOWS_FROM A: it is the parent, not a link.
    assert_eq!(b.parent_span_id, Some(a.span_id));
    assert!(b.links.is_empty());
    assert_eq!(c.parent_span_id, Some(b.span_id));
    assert_eq!((a.kind, b.kind, c.kind), (SpanKind::Producer, SpanKind::Consumer, SpanKind::Unspecified));
    assert_eq!((b.start_unix_ns, b.end_unix_ns), (10_000, 20_000));
    assert_eq!(a.attribute("fixture.span_id"), Some(&Value::Str("span-A".into())));
}

#[test]
fn critical_path_case3_has_two_processes_and_crosses_between_them() {
    let data = read_inputs(&[oracle("jaeger-critical-path/case3.json")]).unwrap();
    let daemons: Vec<&str> = data.processes.iter().map(|p| p.daemon.as_str()).collect();
    assert_eq!(daemons, ["service-one", "service-two"]);
    let tree = trace_tree(&data, data.spans[0].trace_id);
    assert_eq!(tree.len(), 2);
    assert_eq!(data.spans[tree[0].span].name, "send");
    assert_eq!(tree[1], TreeLine { depth: 1, span: tree[1].span, cross_process: true, orphan: false });
    assert_eq!(data.spans[tree[1].span].kind, SpanKind::Client);
}

const DOC: &str = r#"{"data":[
 {"traceID":"1f","spans":[
  {"traceID":"1f","spanID":"a1","operationName":"GET /x","startTime":1000,"duration":250,
   "references":[],
   "tags":[{"key":"span.kind","type":"string","value":"server"},
           {"key":"request.id","type":"string","value":"req-9"},
           {"key":"error","type":"bool","value":true},
           {"key":"otel.status_description","type":"string","value":"bad gateway"},
           {"key":"retries","type":"int64","value":"42"},
           {"key":"load","type":"float64","value":0.5},
           {"key":"raw","type":"binary","value":"AAH/"}],
   "logs":[{"timestamp":1100,"fields":[{"key":"event","type":"string","value":"retry"},
                                      {"key":"attempt","type":"int64","value":2}]},
           {"timestamp":1200,"fields":[{"key":"msg","type":"string","value":"hi"}]}],
   "processID":"p1"},
  {"spanID":"b2","operationName":"store","startTime":1010,"duration":100,
   "references":[{"refType":"FOLLOWS_FROM","traceID":"2e","spanID":"c3"},
                 {"refType":"CHILD_OF","traceID":"1f","spanID":"a1"}],
   "tags":[{"key":"otel.status_code","type":"string","value":"OK"},
           {"key":"target","type":"string","value":"demo::worker"}],
   "logs":null,"processID":"p2","warnings":null}],
  "processes":{"p1":{"serviceName":"gateway","tags":[{"key":"hostname","type":"string","value":"gw-host"}]},
               "p2":{"serviceName":"worker","tags":[{"key":"ip","type":"string","value":"10.0.0.2"},
                                                    {"key":"host.name","type":"string","value":"node-2"}]}}},
 {"traceID":"2e","spans":[
  {"traceID":"2e","spanID":"c3","operationName":"enqueue","startTime":900,"duration":1,"processID":"p1"},
  {"traceID":"2e","spanID":"d4","operationName":"other","startTime":900,"duration":1,"processID":"p2"}],
  "processes":{"p1":{"serviceName":"gateway","tags":[{"key":"hostname","type":"string","value":"gw-host"}]},
               "p2":{"serviceName":"batch","tags":null}}}
],"total":0,"limit":0,"offset":0,"errors":null}"#;

#[test]
fn jaeger_mapping_rules() {
    let dir = TempDir::new("jaeger");
    let path = dir.file("traces.json", DOC.as_bytes());
    let data = read_inputs(&[&path]).unwrap();

    // "p1" is the same process in both traces; "p2" differs, so three processes.
    let procs: Vec<(&str, &str)> =
        data.processes.iter().map(|p| (p.daemon.as_str(), p.node.as_str())).collect();
    assert_eq!(procs, [("gateway", "gw-host"), ("worker", "node-2"), ("batch", "batch")]);
    assert_eq!(data.processes[0].attributes, vec![("hostname".into(), Value::Str("gw-host".into()))]);

    let by_id: BTreeMap<SpanId, _> = data.spans.iter().map(|s| (s.span_id, s)).collect();
    let a = by_id[&sid("00000000000000a1")];
    assert_eq!(a.trace_id, TraceId::from_hex("0000000000000000000000000000001f").unwrap());
    assert_eq!((a.start_unix_ns, a.end_unix_ns), (1_000_000, 1_250_000));
    assert_eq!(a.kind, SpanKind::Server);
    assert_eq!(a.status, Status::Error { message: "bad gateway".into() });
    assert_eq!(a.request_id.as_deref(), Some("req-9"));
    assert_eq!(a.attribute("retries"), Some(&Value::Int(42)));
    assert_eq!(a.attribute("load"), Some(&Value::Float(0.5)));
    assert_eq!(a.attribute("raw"), Some(&Value::Bytes(vec![0, 1, 255])));
    assert_eq!(a.events.len(), 2);
    assert_eq!(a.events[0].name, "retry");
    assert_eq!(a.events[0].time_unix_ns, 1_100_000);
    assert_eq!(a.events[0].attributes, vec![("attempt".into(), Value::Int(2))]);
    assert_eq!(a.events[1].name, "log");
    assert_eq!(a.process, 0);

    // The span's own trace id is missing: the trace's is used. The earlier FOLLOWS_FROM names a
    // span of another trace object, so the CHILD_OF is the parent and the FOLLOWS_FROM a link.
    let b = by_id[&sid("00000000000000b2")];
    assert_eq!(b.trace_id, a.trace_id);
    assert_eq!(b.parent_span_id, Some(a.span_id));
    assert_eq!(b.links.len(), 1);
    assert_eq!(b.links[0].trace_id, TraceId::from_hex("0000000000000000000000000000002e").unwrap());
    assert_eq!(b.links[0].span_id, sid("00000000000000c3"));
    assert_eq!(b.links[0].attributes, vec![("jaeger.ref_type".into(), Value::Str("FOLLOWS_FROM".into()))]);
    assert_eq!(b.status, Status::Ok);
    assert_eq!(b.method(), "demo::worker::store");
    assert_eq!((b.node.as_str(), b.process), ("node-2", 1));

    assert_eq!(by_id[&sid("00000000000000c3")].process, 0);
    assert_eq!(by_id[&sid("00000000000000d4")].process, 2);
    assert_eq!(data.traces().len(), 2);
}

#[test]
fn jaeger_errors_name_the_span_by_json_path() {
    let dir = TempDir::new("jaegererr");
    let bad_id = DOC.replace(r#""spanID":"b2""#, r#""spanID":"xyz""#);
    let path = dir.file("bad.json", bad_id.as_bytes());
    let err = read_inputs(&[&path]).unwrap_err();
    assert_eq!(err.kind(), ReadErrorKind::Invalid);
    assert_eq!(err.position(), Some(&Position::Path("data[0].spans[1]".into())));
    assert_eq!(
        err.to_string(),
        format!("{}: data[0].spans[1]: bad spanID: \"xyz\": character 2 is not a hex digit", path.display())
    );

    let long = DOC.replace(r#""spanID":"a1""#, r#""spanID":"0123456789abcdef01""#);
    let path = dir.file("long.json", long.as_bytes());
    let err = read_inputs(&[&path]).unwrap_err();
    assert!(err.message().contains("18 hex digits, at most 16 allowed"), "{err}");

    let orphan_process = DOC.replace(r#""processID":"p2","warnings""#, r#""processID":"p9","warnings""#);
    let path = dir.file("proc.json", orphan_process.as_bytes());
    let err = read_inputs(&[&path]).unwrap_err();
    assert_eq!(err.message(), "processID \"p9\" is not in the trace's processes");

    let negative = DOC.replace(r#""startTime":1010"#, r#""startTime":-1"#);
    let path = dir.file("neg.json", negative.as_bytes());
    let err = read_inputs(&[&path]).unwrap_err();
    assert_eq!(err.kind(), ReadErrorKind::Json);
    assert!(matches!(err.position(), Some(Position::Line { line: 16, column: Some(55) })), "{err}");
}

/// Reads `doc` with every process's source set to `x.json`, so that datasets compare equal.
fn read_doc(doc: &serde_json::Value) -> Result<ringtrace_analysis::Dataset, ringtrace_analysis::ReadError> {
    let dir = TempDir::new("jaegershape");
    let mut data = read_inputs(&[dir.file("x.json", doc.to_string().as_bytes())])?;
    data.processes.iter_mut().for_each(|p| p.source = "x.json".into());
    Ok(data)
}

#[test]
fn the_shapes_jaeger_ui_loads_read_like_the_api_response() {
    let doc: serde_json::Value = serde_json::from_str(DOC).unwrap();
    let whole = read_doc(&doc).unwrap();
    let first = serde_json::json!({ "data": [doc["data"][0].clone()] });
    let first = read_doc(&first).unwrap();
    assert_eq!(first.spans.len(), 2);

    // A list of trace objects; one bare trace object (Jaeger UI's fixtures); `data` holding one.
    assert_eq!(read_doc(&doc["data"]).unwrap(), whole);
    assert_eq!(read_doc(&doc["data"][0]).unwrap(), first);
    assert_eq!(read_doc(&serde_json::json!({ "data": doc["data"][0].clone() })).unwrap(), first);

    // Errors name the span by its path in each shape.
    let mut bad = doc.clone();
    bad["data"][0]["spans"][1]["spanID"] = "xyz".into();
    for (shape, path) in [
        (bad["data"].clone(), "[0].spans[1]"),
        (bad["data"][0].clone(), "spans[1]"),
        (serde_json::json!({ "data": bad["data"][0].clone() }), "data.spans[1]"),
    ] {
        let err = read_doc(&shape).unwrap_err();
        assert_eq!(err.position(), Some(&Position::Path(path.into())), "{err}");
    }

    // `data` wins over the fixtures' `trace.data` wherever each stands; a `trace` without data
    // changes nothing; `data` twice is an error.
    let other = serde_json::json!({ "data": [doc["data"][1].clone()] });
    let other = read_doc(&other).unwrap();
    assert_ne!(other, first);
    let trace_first = serde_json::json!({ "trace": { "data": [doc["data"][1].clone()] }, "data": [doc["data"][0].clone()] });
    assert_eq!(read_doc(&trace_first).unwrap(), first);
    let data_first = serde_json::json!({ "data": [doc["data"][0].clone()], "trace": { "data": [doc["data"][1].clone()] } });
    assert_eq!(read_doc(&data_first).unwrap(), first);
    let only_trace = serde_json::json!({ "trace": { "data": [doc["data"][1].clone()] } });
    assert_eq!(read_doc(&only_trace).unwrap(), other);
    assert_eq!(
        read_doc(&serde_json::json!({ "trace": null, "data": [doc["data"][0].clone()] })).unwrap(),
        first
    );
    let twice = format!(r#"{{"data": [], "data": {}}}"#, serde_json::json!([doc["data"][0].clone()]));
    let dir = TempDir::new("jaegertwice");
    let err = read_inputs(&[dir.file("twice.json", twice.as_bytes())]).unwrap_err();
    assert!(err.to_string().contains("duplicate field `data`"), "{err}");
}

#[test]
fn an_empty_response_warns_and_a_query_error_is_an_error() {
    let dir = TempDir::new("jaegerempty");
    let empty = dir.file("empty.json", br#"{"data":[],"total":0,"limit":0,"offset":0,"errors":null}"#);
    let outcome = read_inputs_with(&[&empty], Truncation::Error).unwrap();
    assert!(outcome.data.spans.is_empty());
    let [w] = &outcome.warnings[..] else { panic!("{:?}", outcome.warnings) };
    assert_eq!(w.kind(), ReadWarningKind::NoSpans);
    assert_eq!(w.to_string(), format!("{}: the Jaeger document holds no spans", empty.display()));

    let failed = dir.file("failed.json", br#"{"data":null,"errors":[{"code":500,"msg":"storage down"}]}"#);
    let err = read_inputs(&[&failed]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: errors: the query service reports errors instead of traces: code 500: \"storage down\"",
            failed.display()
        )
    );
}

#[test]
fn the_parent_is_the_first_reference_to_a_span_of_the_trace() {
    let span = |id: &str, refs: &[(&str, &str)]| {
        let refs: Vec<_> = refs
            .iter()
            .map(|(kind, id)| serde_json::json!({ "refType": kind, "traceID": "1f", "spanID": id }))
            .collect();
        serde_json::json!({ "spanID": id, "operationName": id, "startTime": 1, "duration": 1,
                            "processID": "p1", "references": refs })
    };
    let doc = serde_json::json!({ "traceID": "1f", "processes": { "p1": { "serviceName": "s" } }, "spans": [
        span("a", &[]),
        span("b", &[("CHILD_OF", "a")]),
        // The first reference names a span that is not in the trace, a later one one that is.
        span("c", &[("CHILD_OF", "99"), ("CHILD_OF", "b")]),
        // Only FOLLOWS_FROM: it is the parent.
        span("d", &[("FOLLOWS_FROM", "a")]),
        // Both present: the first in order, whatever its type.
        span("e", &[("FOLLOWS_FROM", "a"), ("CHILD_OF", "b")]),
        // None present: the first still names the parent, so the span is an orphan.
        span("f", &[("CHILD_OF", "98"), ("FOLLOWS_FROM", "97")]),
        // A reference to itself is never the parent.
        span("10", &[("CHILD_OF", "10"), ("child_of", "a")]),
    ]});
    let data = read_doc(&serde_json::json!({ "data": [doc] })).unwrap();
    let by_id: BTreeMap<SpanId, _> = data.spans.iter().map(|s| (s.span_id, s)).collect();
    let check = |id: &str, parent: &str, links: &[&str]| {
        let s = by_id[&sid(&format!("{id:0>16}"))];
        assert_eq!(s.parent_span_id, Some(sid(&format!("{parent:0>16}"))), "parent of {id}");
        let got: Vec<SpanId> = s.links.iter().map(|l| l.span_id).collect();
        let want: Vec<SpanId> = links.iter().map(|l| sid(&format!("{l:0>16}"))).collect();
        assert_eq!(got, want, "links of {id}");
    };
    assert_eq!(by_id[&sid("000000000000000a")].parent_span_id, None);
    check("b", "a", &[]);
    check("c", "b", &["99"]);
    check("d", "a", &[]);
    check("e", "a", &["b"]);
    check("f", "98", &["97"]);
    check("10", "a", &["10"]);
}
