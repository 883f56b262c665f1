//! A fuzz campaign over every reader and every view: mutations of a real raw recording (written
//! by the subscriber), of an OTLP recording, of OTLP/JSON lines and of Jaeger JSON (bit flips, cuts, huge lengths, deep nesting, invalid UTF-8, copied
//! regions — duplicate ids) are read with warnings allowed, and whatever is read goes through
//! every analysis and every writer the `ringtrace` subcommands use. Nothing may panic, overflow
//! the stack or hang; an error names the file. Extreme inputs the mutations rarely reach (10 MB
//! lines, 100,000-deep nesting, parent cycles, one id used by many spans) have tests of their own.

use proptest::prelude::*;
use ringtrace_analysis::flame_output::{write_d3_json, write_folded};
use ringtrace_analysis::report::{build_report, write_html, ReportOptions};
use ringtrace_analysis::{
    anomalies, anomaly_output, bottlenecks, bottlenecks_output, breakdown, breakdown_output, build_causality,
    causality_output, dependency_graph, deps_output, detect_phases, diff, diff_output, flame_graph,
    for_each_batch_as, frequency_profile, profile_output, read_inputs_with, render_tree, self_times,
    stats_output, time_profile, trace_statistics, trace_tree, AnomalyOptions, CausalityOptions, Dataset,
    Detail, DiffSide, FlameScope, FrameLabel, GroupBy, Measure, PhaseOptions, ProfileQuery, SpanFilter,
    StackMode, StatsGroupBy, Truncation,
};
use ringtrace_analysis::{critical_path_output, critical_paths};
use ringtrace_core::otlp::KeyValue;
use ringtrace_core::otlp::KeyValueExt as _;

use crate::common::{fixture, frame, recording, resource, span, TempDir};
use crate::views_support::on_small_stack;

/// Runs every view on `data` and renders what the subcommands print (every table writer, trees,
/// flame graphs, the HTML report), into memory.
fn every_view(data: &Dataset) {
    let mut sink = Vec::new();
    for by in GroupBy::ALL {
        if let Ok(p) = frequency_profile(data, by, 1_000) {
            profile_output::write_table(&p, &mut sink).unwrap();
        }
        let query = ProfileQuery { by, bucket_ns: 1_000, filter: SpanFilter::default() };
        if let Ok(profile) = time_profile(data, &query) {
            for measure in Measure::ALL {
                profile_output::write_time_table(&profile, measure, &mut sink).unwrap();
            }
        }
        let _ = detect_phases(data, &query, &PhaseOptions::default());
    }
    if let Ok(result) = anomalies(data, &AnomalyOptions::default()) {
        anomaly_output::write_table(&result, &mut sink).unwrap();
    }
    let causality = build_causality(data, &CausalityOptions::default());
    causality_output::write_table(&causality_output::Requests::of(data, &causality), &mut sink).unwrap();
    let paths = critical_paths(data, &causality);
    critical_path_output::write_table(data, &causality, &paths, &mut sink).unwrap();
    for tree in causality.traces.iter().take(3) {
        let _ = self_times(tree);
        causality_output::write_tree(data, tree, &mut sink).unwrap();
        let lines = trace_tree(data, tree.trace_id);
        render_tree(data, &lines, &mut sink).unwrap();
    }
    for by in [StatsGroupBy::Service, StatsGroupBy::Operation, StatsGroupBy::ServiceOperation] {
        stats_output::write_table(&trace_statistics(data, &causality, by), &mut sink).unwrap();
    }
    deps_output::write_table(&dependency_graph(data, &causality), &mut sink).unwrap();
    breakdown_output::write_table(&breakdown(data, &causality), 2, &mut sink).unwrap();
    bottlenecks_output::write_table(&bottlenecks(data, &causality, None), None, &mut sink).unwrap();
    let side = DiffSide { data, trees: causality.traces.iter().collect() };
    diff_output::write_table(&diff(&side, &side), ("a", "b"), None, &mut sink).unwrap();
    for (stacks, label) in
        [(StackMode::Request, FrameLabel::Method), (StackMode::Process, FrameLabel::NodeDaemonMethod)]
    {
        let graph = flame_graph(data, &causality, &FlameScope { stacks, label, ..Default::default() });
        write_folded(&graph, &mut sink).unwrap();
        write_d3_json(&graph, &mut sink).unwrap();
    }
    let report = build_report(data, &ReportOptions::default(), &mut |_| {});
    write_html(&report, &mut sink).unwrap();
}

/// Reads `bytes` as the file `name`, warnings allowed, and runs every view on what was read; an
/// error must name the file.
fn campaign_case(dir: &TempDir, name: &str, bytes: &[u8]) {
    let path = dir.file(name, bytes);
    match read_inputs_with(&[&path], Truncation::Warn) {
        Ok(outcome) => {
            for w in &outcome.warnings {
                assert_eq!(w.path(), path, "{w}");
            }
            every_view(&outcome.data);
        }
        Err(e) => {
            assert_eq!(e.path(), path, "{e}");
            assert!(!e.to_string().is_empty());
        }
    }
}

/// A raw recording the subscriber writes: spans with numbers, short and long strings, request
/// ids, a remote parent, a link, events, one span left open; the bytes of the file.
fn raw_recording() -> Vec<u8> {
    use std::sync::OnceLock;
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES
        .get_or_init(|| {
            let dir = TempDir::new("fuzz-raw-seed");
            let (subscriber, guard) = ringtrace_subscriber::Builder::new()
                .node("node-1")
                .daemon("worker")
                .recording_dir(dir.path())
                .no_otlp()
                .quiet(true)
                .build_subscriber()
                .unwrap();
            tracing::subscriber::with_default(subscriber, || {
                let root = tracing::info_span!("root", request.id = "req-1", n = 5u64, ratio = 0.5f64);
                let _r = root.enter();
                let long = "y".repeat(200);
                for i in 0..4u64 {
                    let child = tracing::info_span!("child", i, text = "short", long = long.as_str());
                    child.follows_from(&root);
                    let _c = child.enter();
                    tracing::info!(i, "step");
                    tracing::error!("failed");
                }
                let remote = tracing::info_span!("remote");
                ringtrace_subscriber::SpanExt::set_remote_parent(
                    &remote,
                    &ringtrace_core::propagation::TraceContext {
                        trace_id: ringtrace_core::TraceId::new(0xabc).unwrap(),
                        span_id: ringtrace_core::SpanId::new(0xdef).unwrap(),
                        sampled: true,
                        request_id: Some("req-remote".into()),
                    },
                );
                std::mem::forget(tracing::info_span!("held").entered());
            });
            guard.shutdown().unwrap();
            let file = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
            std::fs::read(file).unwrap()
        })
        .clone()
}

/// The seeds: a raw recording, an OTLP recording of three processes (request ids, a
/// cross-process child, numbers and strings), the Collector's OTLP/JSON lines, and Jaeger JSON.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut rec = Vec::new();
    for p in 0..3u8 {
        let mut spans: Vec<_> = (1..=5)
            .map(|i| span(1 + p % 2, 10 * p + i, (i > 1).then_some(10 * p + 1), "op", 10, 20 + u64::from(i)))
            .collect();
        spans[0].attributes.push(KeyValue::string("request.id", "req-1"));
        spans[1].attributes.push(KeyValue::int("bytes", 4096));
        let data = frame(
            resource("node", ["master", "worker"][usize::from(p % 2)], i64::from(p), [0, 0, 0, 0]),
            spans,
        );
        rec.extend(recording(&[data]));
    }
    let otlp_json = std::fs::read(fixture("collector.jsonl")).unwrap();
    let jaeger = br#"{"data":[{"traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spans":[
 {"traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"00000000000000a1","operationName":"GET /",
  "references":[],"startTime":1700000000000000,"duration":900,"processID":"p1",
  "tags":[{"key":"span.kind","type":"string","value":"server"},{"key":"http.status_code","type":"int64","value":200}],
  "logs":[{"timestamp":1700000000000100,"fields":[{"key":"event","type":"string","value":"cache miss"}]}]},
 {"traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"00000000000000a2","operationName":"SELECT",
  "references":[{"refType":"CHILD_OF","traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"00000000000000a1"}],
  "startTime":1700000000000200,"duration":500,"processID":"p2","tags":[{"key":"error","type":"bool","value":true}]},
 {"traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"00000000000000a3","operationName":"publish",
  "references":[{"refType":"FOLLOWS_FROM","traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"00000000000000a2"}],
  "startTime":1700000000000300,"duration":100,"processID":"p1","tags":[]}],
 "processes":{"p1":{"serviceName":"frontend","tags":[{"key":"hostname","type":"string","value":"node-1"}]},
              "p2":{"serviceName":"db","tags":[]}}}]}"#
        .to_vec();
    vec![
        ("seed.rtrace", raw_recording()),
        ("seed.otlp", rec),
        ("seed.jsonl", otlp_json),
        ("seed.json", jaeger),
    ]
}

#[derive(Debug, Clone)]
enum Mutation {
    /// XOR the byte at a fraction of the length.
    Flip(f64, u8),
    /// Keep only a fraction of the file.
    Cut(f64),
    /// Insert a varint length prefix of about 2^62 (a frame or string "of" exabytes).
    HugeLength(f64),
    /// Insert bytes that are not UTF-8.
    NotUtf8(f64),
    /// Insert a run of nested arrays or objects.
    Nest(f64, usize, bool),
    /// Copy a region after itself: duplicate spans, ids and frames.
    Repeat(f64, f64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = 0.0..=1.0f64;
    prop_oneof![
        4 => (at.clone(), 1..=255u8).prop_map(|(a, m)| Mutation::Flip(a, m)),
        2 => at.clone().prop_map(Mutation::Cut),
        1 => at.clone().prop_map(Mutation::HugeLength),
        1 => at.clone().prop_map(Mutation::NotUtf8),
        1 => (at.clone(), 1..5_000usize, any::<bool>()).prop_map(|(a, n, o)| Mutation::Nest(a, n, o)),
        2 => (at.clone(), 0.0..0.5f64).prop_map(|(a, l)| Mutation::Repeat(a, l)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let at = |f: f64, len: usize| ((len as f64 * f) as usize).min(len);
    match *m {
        Mutation::Flip(f, mask) if !bytes.is_empty() => {
            let i = at(f, bytes.len() - 1);
            bytes[i] ^= mask;
        }
        Mutation::Flip(..) => {}
        Mutation::Cut(f) => bytes.truncate(at(f, bytes.len())),
        Mutation::HugeLength(f) => {
            let i = at(f, bytes.len());
            bytes.splice(i..i, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f]);
        }
        Mutation::NotUtf8(f) => {
            let i = at(f, bytes.len());
            bytes.splice(i..i, [0xff, 0xfe, 0xc3, 0x28, 0xa0]);
        }
        Mutation::Nest(f, n, object) => {
            let i = at(f, bytes.len());
            let open: &[u8] = if object { br#"{"a":"# } else { b"[" };
            let run: Vec<u8> = open.iter().copied().cycle().take(open.len() * n).collect();
            bytes.splice(i..i, run);
        }
        Mutation::Repeat(f, l) => {
            let i = at(f, bytes.len());
            let end = (i + at(l, bytes.len())).min(bytes.len());
            let region = bytes[i..end].to_vec();
            bytes.splice(end..end, region);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Up to four mutations of a seed: read, then every view.
    #[test]
    fn mutated_real_files_never_panic_in_any_reader_or_view(
        seed in 0..4usize,
        mutations in proptest::collection::vec(mutation(), 1..=4),
    ) {
        let (name, mut bytes) = seeds().swap_remove(seed);
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let dir = TempDir::new("fuzz-campaign");
        on_small_stack(move || campaign_case(&dir, name, &bytes));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Up to six mutations of the raw recording, read only (the views are the campaign's): an
    /// error naming the file, or spans, never a panic. Read compact, as the views read, the
    /// same file gives the same spans compacted, the same warnings or the same error.
    #[test]
    fn mutated_raw_recordings_never_panic(mutations in proptest::collection::vec(mutation(), 1..=6)) {
        let mut bytes = raw_recording();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let dir = TempDir::new("fuzz-raw");
        let path = dir.file("mutated.rtrace", &bytes);
        match read_inputs_with(&[&path], Truncation::Warn) {
            Ok(outcome) => prop_assert!(outcome.warnings.iter().all(|w| w.path() == path)),
            Err(e) => prop_assert_eq!(e.path(), path.as_path()),
        }
        let read = |detail| {
            let mut spans = Vec::new();
            let read = for_each_batch_as(&path, Truncation::Warn, detail, &mut |b| spans.extend(b.spans));
            (read.map_err(|e| e.to_string()), spans)
        };
        let (full, mut compacted) = read(Detail::Full);
        compacted.iter_mut().for_each(ringtrace_analysis::Span::compact);
        let (compact, spans) = read(Detail::Compact);
        prop_assert_eq!(compact, full);
        prop_assert_eq!(spans, compacted);
    }
}

#[test]
fn the_seeds_read_and_go_through_every_view() {
    let dir = TempDir::new("fuzz-seeds");
    for (name, bytes) in seeds() {
        let path = dir.file(name, &bytes);
        let outcome = read_inputs_with(&[&path], Truncation::Error).unwrap();
        assert!(!outcome.data.spans.is_empty(), "{name}");
        every_view(&outcome.data);
    }
}

/// A 10 MB line in each text format, and 100,000 levels of nesting: an error naming the file or
/// a read, never a panic or a stack overflow.
#[test]
fn ten_megabyte_lines_and_deep_nesting_are_handled() {
    let long = "x".repeat(10 << 20);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("long.jsonl", format!("{{\"resourceSpans\":[],\"pad\":\"{long}\"}}\n").into_bytes()),
        (
            "long.json",
            format!("{{\"data\":[{{\"traceID\":\"{long}\",\"spans\":[],\"processes\":{{}}}}]}}").into_bytes(),
        ),
        ("nested.json", "[".repeat(100_000).into_bytes()),
        ("nested.jsonl", "{\"a\":".repeat(100_000).into_bytes()),
    ];
    for (name, bytes) in cases {
        on_small_stack(move || {
            let dir = TempDir::new("fuzz-extreme-case");
            campaign_case(&dir, name, &bytes);
        });
    }
}

/// Parent cycles, self-parents and one span id used by many spans, in one trace: every view
/// still answers.
#[test]
fn cycles_and_duplicate_ids_go_through_every_view() {
    use crate::views_support::{dataset, span as vspan};
    let p = ("node", "svc", 0);
    let mut spans = vec![
        vspan(1, 1, Some(2), "a", p, 0, 100),
        vspan(1, 2, Some(3), "b", p, 10, 90),
        vspan(1, 3, Some(1), "c", p, 20, 80),
        vspan(1, 4, Some(4), "self", p, 30, 40),
    ];
    spans.extend((0..1_000).map(|i| vspan(1, 5, Some(1), "same-id", p, i, i + 5)));
    spans.extend((0..1_000).map(|i| vspan(2, 100 + i, Some(99 + i), "orphan-chain", p, i, 2_000 - i)));
    let data = dataset(spans);
    on_small_stack(move || every_view(&data));
}

/// An empty file and a file of only whitespace, in every format.
#[test]
fn empty_files_are_handled() {
    let dir = TempDir::new("fuzz-empty");
    for name in ["e.rtrace", "e.otlp", "e.json", "e.jsonl"] {
        campaign_case(&dir, name, b"");
        campaign_case(&dir, name, b" \n\t\n");
    }
}

/// A span name of 70,000 characters and a 10 MB attribute value in a recording: read and through
/// every view and writer (table columns are bounded, nothing panics).
#[test]
fn huge_names_and_values_go_through_every_view() {
    let name = "n".repeat(70_000);
    let mut spans = vec![span(1, 1, None, &name, 10, 20), span(1, 2, Some(1), "child", 11, 19)];
    spans[1].attributes.push(KeyValue::string("blob", "v".repeat(10 << 20)));
    let bytes = recording(&[frame(resource(&name, "daemon", 1, [0, 0, 0, 0]), spans)]);
    on_small_stack(move || {
        let dir = TempDir::new("fuzz-huge");
        let path = dir.file("huge.otlp", &bytes);
        let outcome = read_inputs_with(&[&path], Truncation::Error).unwrap();
        assert_eq!(outcome.data.spans.len(), 2);
        every_view(&outcome.data);
    });
}
