//! The views over the Parquet store, run on DataFusion (`ringtrace_analysis::engine`), give the
//! in-memory views' answers on the same spans: random datasets are written to a store, and
//! statistics, dependency graphs, critical paths, bottlenecks, flame graphs, frequency
//! profiles, request lines, clock skew, anomalies and diffs are compared, field by field.

use proptest::prelude::*;
use ringtrace_analysis::causality_output::Requests;
use ringtrace_analysis::engine::{Store, StoreExport};
use ringtrace_analysis::report::{build_report, ReportOptions};
use ringtrace_analysis::store::write_dir;
use ringtrace_analysis::{
    anomalies, bottlenecks, build_causality, dependency_graph, detect_phases, diff, flame_graph,
    frequency_profile, trace_statistics, AnomalyOptions, CausalityOptions, Dataset, DiffBuilder, DiffSide,
    FlameScope, FrameLabel, GroupBy, PhaseOptions, Process, ProfileQuery, RequestSelection, Span, SpanId,
    SpanKind, StackMode, StatsGroupBy, Status, TraceId, Value,
};

use crate::common::TempDir;

/// 2026-11-26 23:00 UTC: two hours of spans reach into the next day's partition.
const BASE_NS: u64 = 1_764_198_000_000_000_000;

/// One span's choices: (parent: none / an earlier span / a missing one, node, daemon, name,
/// target, start ms, duration µs, kind, error, peer, copied).
type Choice = (u8, usize, usize, usize, usize, u64, u64, u8, bool, bool, bool);

fn choice() -> impl Strategy<Value = Choice> {
    (
        0u8..10,
        0usize..3,
        0usize..3,
        0usize..4,
        0usize..4,
        0u64..7_200_000,
        0u64..50_000,
        0u8..5,
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.05),
    )
}

/// Which clock a node's processes read: node-0 and node-1 run under one kernel (one boot id),
/// node-1 and node-2 on one machine by `host.id` (node-2 tells no boot id), so clock skew is
/// estimated between node-0 and node-2 only.
fn clock_attributes(node: &str) -> Vec<(String, Value)> {
    let text = |k: &str, v: &str| (k.to_owned(), Value::Str(v.to_owned()));
    match node {
        "node-0" => vec![text("ringtrace.boot_id", "boot-a")],
        "node-1" => vec![text("ringtrace.boot_id", "boot-a"), text("host.id", "host-b")],
        _ => vec![text("host.id", "host-b")],
    }
}

fn dataset(traces: &[Vec<Choice>]) -> Dataset {
    let mut data = Dataset::default();
    for (t, choices) in traces.iter().enumerate() {
        let trace_id = TraceId::new(0x5eed_0000 + t as u128 * 7919).unwrap();
        for (i, &(parent, node, daemon, name, target, start_ms, len_us, kind, error, peer, copied)) in
            choices.iter().enumerate()
        {
            let (node, daemon) = (format!("node-{node}"), ["master", "worker", "store"][daemon].to_owned());
            let process = match data.processes.iter().position(|p| p.node == node && p.daemon == daemon) {
                Some(p) => p,
                None => {
                    data.processes.push(Process {
                        node: node.clone(),
                        daemon: daemon.clone(),
                        attributes: clock_attributes(&node),
                        ..Process::default()
                    });
                    data.processes.len() - 1
                }
            };
            let parent_span_id = match parent {
                0..=1 => None,
                2 => Some(SpanId::new(0xdead).unwrap()),
                _ if i > 0 => Some(SpanId::new(1 + (parent as u64 * 31) % i as u64).unwrap()),
                _ => None,
            };
            let start = BASE_NS + start_ms * 1_000_000 / 7;
            let mut span = Span {
                node,
                daemon,
                kind: [
                    SpanKind::Internal,
                    SpanKind::Client,
                    SpanKind::Server,
                    SpanKind::Producer,
                    SpanKind::Unspecified,
                ][kind as usize],
                target: [
                    None,
                    Some(String::new()),
                    Some("demo::worker".to_owned()),
                    Some("demo::rpc".to_owned()),
                ][target]
                    .clone(),
                process,
                ..Span::new(
                    trace_id,
                    SpanId::new(1 + i as u64).unwrap(),
                    parent_span_id,
                    ["read", "write", "GET", "POST"][name],
                    start,
                    start + len_us * 1_000,
                )
            };
            if error {
                span.status = Status::Error { message: "boom".into() };
            }
            if peer {
                span.attributes.push(("peer.service".into(), Value::Str("postgres".into())));
            }
            span.request_id = Some(format!("req-{t}"));
            if copied {
                data.spans.push(span.clone());
            }
            data.spans.push(span);
        }
    }
    data
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn views_over_the_store_equal_the_in_memory_views(
        traces in prop::collection::vec(prop::collection::vec(choice(), 1..25), 1..8),
        bucket_ms in 1u64..600_000,
        slowest in 1.0f64..100.0,
    ) {
        let data = dataset(&traces);
        let dir = TempDir::new("engine");
        write_dir(&data, dir.path()).unwrap();
        let store = Store::open(dir.path()).unwrap();
        let options = CausalityOptions::default();
        let causality = build_causality(&data, &options);

        for by in StatsGroupBy::ALL {
            let expected = trace_statistics(&data, &causality, by);
            prop_assert_eq!(&store.trace_statistics(by, &options).unwrap(), &expected);
            // Holding no duration: the percentiles from a second pass (a scan of the times, or
            // the trees again when they dropped a copy).
            prop_assert_eq!(&store.trace_statistics_holding(by, &options, 0).unwrap(), &expected);
        }
        prop_assert_eq!(store.dependency_graph(&options).unwrap(), dependency_graph(&data, &causality));
        // `deps` reads fewer columns: its trees repair what the whole spans' trees repair.
        let mut repaired = causality.warnings;
        repaired.duplicate_spans_dropped -= data.copies().iter().filter(|c| **c).count() as u64;
        prop_assert_eq!(store.repairs(), repaired);
        prop_assert_eq!(store.clock_skew(), causality.clock_skew.clone());
        // Every request's critical path, as span ids and times.
        let path = |data: &Dataset, tree: &ringtrace_analysis::RequestTree| {
            let sections = ringtrace_analysis::critical_path(data, tree);
            (tree.trace_id, sections.iter().map(|s| (data.spans[s.span].span_id, s.start_unix_ns, s.end_unix_ns)).collect::<Vec<_>>())
        };
        // As they are, and with clock skew corrected as Jaeger's adjuster does (`--adjust-skew`):
        // the same shifts, nodes under one kernel or on one machine left alone on both sides.
        for adjust_skew in [false, true] {
            let options = CausalityOptions { adjust_skew };
            let causality = build_causality(&data, &options);
            let mut streamed = Vec::new();
            store.for_each_request(&options, &mut |data, tree| {
                streamed.push(path(data, tree));
                Ok(())
            }).unwrap();
            prop_assert_eq!(streamed, causality.traces.iter().map(|t| path(&data, t)).collect::<Vec<_>>());
            prop_assert_eq!(store.repairs().skew_adjusted_spans, causality.warnings.skew_adjusted_spans);
        }
        prop_assert_eq!(store.breakdown(&options).unwrap(), ringtrace_analysis::breakdown(&data, &causality));
        for p in [None, Some(slowest)] {
            prop_assert_eq!(store.bottlenecks(p, &options).unwrap(), bottlenecks(&data, &causality, p));
        }
        for (stacks, requests) in [
            (StackMode::Request, RequestSelection::All),
            (StackMode::Process, RequestSelection::Slowest(slowest)),
            (StackMode::Request, RequestSelection::AllButSlowest(slowest)),
        ] {
            let scope = FlameScope { stacks, requests, label: FrameLabel::NodeDaemonMethod, ..FlameScope::default() };
            prop_assert_eq!(store.flame_graph(&scope, &options).unwrap(), flame_graph(&data, &causality, &scope));
        }
        for by in GroupBy::ALL {
            let bucket_ns = bucket_ms * 1_000_000;
            prop_assert_eq!(store.frequency_profile(by, bucket_ns).unwrap(), frequency_profile(&data, by, bucket_ns).unwrap());
        }
        // What the trees repaired, summed over the traces of one view's last pass (the flame
        // graph's two passes above count once): what the whole dataset's trees say, but for the
        // copies, which the store does not hold; the clock skew as the whole dataset shows it.
        let expected = repaired;
        prop_assert_eq!(store.repairs(), expected);
        prop_assert_eq!(store.clock_skew(), causality.clock_skew.clone());
        let mut requests = Requests::of(&data, &causality);
        requests.warnings = expected;
        prop_assert_eq!(store.requests(&options).unwrap(), requests);
        for window_ns in [None, Some(bucket_ms * 1_000_000)] {
            let options = AnomalyOptions { window_ns, max_reasons: 4 };
            prop_assert_eq!(store.anomalies(&options).unwrap(), anomalies(&data, &options).unwrap());
        }
        // The slowest requests against the rest, as `ringtrace diff --slowest` compares them.
        let slow: Vec<usize> = causality.slowest(slowest);
        let (b, a): (Vec<_>, Vec<_>) =
            causality.traces.iter().enumerate().partition(|(i, _)| slow.contains(i));
        let (a, b) = (a.into_iter().map(|(_, t)| t).collect(), b.into_iter().map(|(_, t)| t).collect());
        let expected_diff = diff(&DiffSide { data: &data, trees: a }, &DiffSide { data: &data, trees: b });
        let slow_ids: Vec<TraceId> = slow.iter().map(|&i| causality.traces[i].trace_id).collect();
        let mut builder = DiffBuilder::default();
        store.for_each_request(&options, &mut |data, tree| {
            if slow_ids.contains(&tree.trace_id) { builder.add_b(data, tree) } else { builder.add_a(data, tree) }
            Ok(())
        }).unwrap();
        prop_assert_eq!(builder.finish(), expected_diff);
        // The report, but for what the store does not keep: loss counters and pids.
        let report_options = ReportOptions { bucket_ns: Some(bucket_ms * 1_000_000), slowest_requests: 3, ..ReportOptions::default() };
        let mut expected_report = build_report(&data, &report_options, &mut |_| {});
        expected_report.summary.loss_counters = false;
        expected_report.summary.warnings = expected;
        prop_assert_eq!(store.report(&report_options, &mut |_| {}).unwrap(), Some(expected_report));
        let extent = store.extent().unwrap().unwrap();
        for by in GroupBy::ALL {
            let query = ProfileQuery { by, bucket_ns: bucket_ms * 100_000, filter: Default::default() };
            let options = PhaseOptions { min_spans: 4, window_buckets: 2, ..PhaseOptions::default() };
            // A grid too large for the in-memory path is no phase change for the store's, as
            // in the report.
            let expected = detect_phases(&data, &query, &options).unwrap_or_default();
            prop_assert_eq!(store.phases(by, query.bucket_ns, extent, &options).unwrap(), expected);
        }
        // Only the traces asked for.
        let mut only = Vec::new();
        store.for_each_request_of(Some(&slow_ids), &options, &mut |_, tree| {
            only.push(tree.trace_id);
            Ok(())
        }).unwrap();
        let mut wanted = slow_ids.clone();
        wanted.sort();
        prop_assert_eq!(only, wanted);
        let mut spans = 0;
        let traces_read = store.for_each_trace(&mut |trace| {
            spans += trace.spans.len();
            Ok(())
        }).unwrap();
        prop_assert_eq!(traces_read, traces.len());
        prop_assert_eq!(spans as u64, causality.span_count() as u64 + causality.warnings.duplicate_spans_dropped - data.copies().iter().filter(|c| **c).count() as u64);
    }
}

/// A directory without Parquet files is refused with a message that says what it is not.
#[test]
fn a_directory_without_parquet_files_is_not_a_store() {
    let dir = TempDir::new("engine-empty");
    let e = Store::open(dir.path()).unwrap_err().to_string();
    assert!(e.contains("no Parquet files"), "{e}");
}

/// Every file under `dir`, relative to it, sorted.
fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().to_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A Parquet file's rows, as record batches.
fn rows(path: &std::path::Path) -> Vec<arrow_array::RecordBatch> {
    let file = std::fs::File::open(path).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    reader.map(Result::unwrap).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// The export that spills and sorts through DataFusion writes the files the in-memory
    /// export writes, row for row, however the spans come in batches and however often it
    /// spills; and its spill directory is gone after.
    #[test]
    fn the_streaming_export_writes_what_the_whole_export_writes(
        traces in prop::collection::vec(prop::collection::vec(choice(), 1..25), 1..8),
        batch in 1usize..40,
        spill in 1usize..60,
        twins in 2usize..12,
    ) {
        let mut data = dataset(&traces);
        // Spans that share a trace, start and id with another and are not copies of it: one
        // differs only in an attribute's type (`1` and `"1"`), so they stay two spans, in the
        // order they came.
        let mut with_twins = Vec::new();
        for (i, span) in data.spans.drain(..).enumerate() {
            if i % twins == 0 {
                let mut twin = span.clone();
                twin.attributes.push(("n".into(), Value::Int(1)));
                with_twins.push(twin);
                let mut other = span.clone();
                other.attributes.push(("n".into(), Value::Str("1".into())));
                with_twins.push(other);
            }
            with_twins.push(span);
        }
        data.spans = with_twins;
        let (whole, streamed) = (TempDir::new("export-whole"), TempDir::new("export-streamed"));
        let expected = write_dir(&data, whole.path()).unwrap();
        let mut export = StoreExport::with_limits(streamed.path(), spill, ringtrace_analysis::store::FILE_ROWS).unwrap();
        for spans in data.spans.chunks(batch) {
            // A process's spans at a time, as readers hand them over.
            for (p, process) in data.processes.iter().enumerate() {
                let of: Vec<Span> = spans.iter().filter(|s| s.process == p).cloned().collect();
                export.add(of, process).unwrap();
            }
        }
        let got = export.finish().unwrap();
        prop_assert_eq!(got, expected);
        prop_assert_eq!(files(streamed.path()), files(whole.path()));
        for file in files(whole.path()) {
            prop_assert_eq!(rows(&streamed.path().join(&file)), rows(&whole.path().join(&file)), "{}", file.display());
        }
    }
}

/// Files hold at most their number of rows: a partition's rows continue in the next file, in
/// order.
#[test]
fn the_streaming_export_splits_a_partition_into_files_in_order() {
    let choices: Vec<Choice> =
        (0..40).map(|i| (0, 0, 0, 0, 0, i * 100, 10, 0, false, false, false)).collect();
    let data = dataset(&[choices.clone(), choices]);
    let dir = TempDir::new("export-split");
    let mut export = StoreExport::with_limits(dir.path(), 7, 30).unwrap();
    export.add(data.spans.clone(), &data.processes[0]).unwrap();
    let written = export.finish().unwrap();
    assert_eq!(written.spans, 80);
    let names: Vec<String> =
        files(dir.path()).iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["master-00000.parquet", "master-00001.parquet", "master-00002.parquet"]);
    let counts: Vec<usize> = files(dir.path())
        .iter()
        .map(|f| rows(&dir.path().join(f)).iter().map(|b| b.num_rows()).sum())
        .collect();
    assert_eq!(counts, [30, 30, 20]);
    let store = Store::open(dir.path()).unwrap();
    let mut seen = Vec::new();
    store
        .for_each_trace(&mut |trace| {
            seen.extend(trace.spans.into_iter().map(|s| (s.trace_id, s.start_unix_ns)));
            Ok(())
        })
        .unwrap();
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted);
    assert_eq!(seen.len(), 80);
}

/// `export_files` streams files into the same store `write_dir` makes of them, and hands back
/// (writing nothing) inputs with I/O calls both inside spans and outside any, which only the
/// whole dataset can place. Spans whose `io.op` names no operation are no calls, for it as for
/// `attach_to_traces`.
#[test]
fn export_files_streams_or_says_the_inputs_need_the_whole_dataset() {
    use ringtrace_analysis::engine::export_files;
    use ringtrace_analysis::export::{write, ExportFormat};
    use ringtrace_analysis::Truncation;
    let plain = dataset(&[(0..30)
        .map(|i| (i as u8 % 10, 1, 1, 2, 2, i * 1000, 5, 0, false, false, i % 7 == 0))
        .collect()]);
    let with_op = |op: &str| {
        let mut data = plain.clone();
        for (k, span) in data.spans.iter_mut().take(2).enumerate() {
            span.attributes.push((ringtrace_analysis::io::attr::OP.to_owned(), Value::Str(op.into())));
            span.parent_span_id = (k == 0).then(|| SpanId::new(0xbeef).unwrap());
        }
        data
    };
    let (mixed, unknown) = (with_op("read"), with_op("frobnicate"));
    let dir = TempDir::new("export-files");
    for (name, data) in [("plain", &plain), ("mixed", &mixed), ("unknown", &unknown)] {
        let mut bytes = Vec::new();
        write(data, ExportFormat::OtlpJson, &mut bytes).unwrap();
        let input = dir.file(&format!("{name}.jsonl"), &bytes);
        let store = dir.path().join(format!("{name}-store"));
        let exported = export_files(std::slice::from_ref(&input), Truncation::Error, &store).unwrap();
        if name == "mixed" {
            assert!(exported.is_none(), "mixed I/O calls need the whole dataset");
            assert!(!store.exists(), "nothing written, not even the directory");
            continue;
        }
        let exported = exported.unwrap();
        let whole = dir.path().join("whole-store");
        let read = ringtrace_analysis::read_inputs(&[&input]).unwrap();
        assert_eq!(exported.written, write_dir(&read, &whole).unwrap());
        assert_eq!(exported.processes, read.processes.len());
        for file in files(&whole) {
            assert_eq!(rows(&store.join(&file)), rows(&whole.join(&file)), "{}", file.display());
        }
    }
}

/// Nodes under one kernel (one boot id, or else one `host.id`) have no clock skew between them,
/// however their times differ: the store keeps each span's boot and host ids, and its views
/// leave those nodes alone as the recordings' own do. A store written before those columns
/// still reads, with skew estimated between every two nodes; so does a store holding files
/// from before and after, between the nodes of the older files and the others.
#[test]
fn nodes_under_one_kernel_have_no_clock_skew_over_the_store_either() {
    let trace = TraceId::new(0xc10c).unwrap();
    let mut data = Dataset::default();
    // node-0 calls node-1 (one boot id), which calls node-2 (one `host.id`); each server's span
    // starts 50 ms before its client's: skew, unless one clock.
    let calls = [("node-0", "node-1", 1u64, BASE_NS), ("node-1", "node-2", 3, BASE_NS + 10_000_000)];
    for (client_node, server_node, id, at) in calls {
        let mut client =
            Span::new(trace, SpanId::new(id).unwrap(), None, "call", at + 1_000_000, at + 2_000_000);
        client.kind = SpanKind::Client;
        let mut server = Span::new(
            trace,
            SpanId::new(id + 1).unwrap(),
            Some(client.span_id),
            "serve",
            at - 49_000_000,
            at - 48_500_000,
        );
        server.kind = SpanKind::Server;
        for (mut span, node) in [(client, client_node), (server, server_node)] {
            let process = match data.processes.iter().position(|p| p.node == node) {
                Some(p) => p,
                None => {
                    data.processes.push(Process {
                        node: node.into(),
                        daemon: "d".into(),
                        attributes: clock_attributes(node),
                        ..Process::default()
                    });
                    data.processes.len() - 1
                }
            };
            span.node = node.into();
            span.daemon = "d".into();
            span.process = process;
            data.spans.push(span);
        }
    }
    let options = CausalityOptions::default();
    let dir = TempDir::new("engine-one-kernel");
    write_dir(&data, dir.path()).unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.trace_statistics(StatsGroupBy::Service, &options).unwrap();
    assert!(build_causality(&data, &options).clock_skew.is_empty(), "in memory: one kernel, one machine");
    assert!(store.clock_skew().is_empty(), "over the store: one kernel, one machine");
    store.dependency_graph(&options).unwrap();
    assert!(store.clock_skew().is_empty(), "the calls' pass reads the ids too");

    // The same files without the two columns, as written before them: skew is estimated.
    let old = TempDir::new("engine-one-kernel-old");
    let strip = |file: &std::path::Path, to: &std::path::Path| {
        let batches = rows(&dir.path().join(file));
        let keep: Vec<usize> = (0..batches[0].num_columns())
            .filter(|&c| !["boot_id", "host_id"].contains(&batches[0].schema().field(c).name().as_str()))
            .collect();
        let path = to.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let projected: Vec<_> = batches.iter().map(|b| b.project(&keep).unwrap()).collect();
        let mut writer = parquet::arrow::ArrowWriter::try_new(
            std::fs::File::create(&path).unwrap(),
            projected[0].schema(),
            None,
        )
        .unwrap();
        for b in &projected {
            writer.write(b).unwrap();
        }
        writer.close().unwrap();
    };
    for file in files(dir.path()) {
        strip(&file, old.path());
    }
    let store = Store::open(old.path()).unwrap();
    store.dependency_graph(&options).unwrap();
    let pairs = |store: &Store| {
        let mut pairs: Vec<_> = store
            .clock_skew()
            .iter()
            .inspect(|s| assert!(s.detected()))
            .map(|s| (s.client_node.clone(), s.server_node.clone()))
            .collect();
        pairs.sort();
        pairs
    };
    let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    assert_eq!(
        pairs(&store),
        [pair("node-0", "node-1"), pair("node-1", "node-2")],
        "no ids: skew everywhere"
    );

    // node-2's file from before the columns, the others' from after: skew between node-1 and
    // node-2 only.
    let mixed = TempDir::new("engine-one-kernel-mixed");
    for file in files(dir.path()) {
        if file.to_string_lossy().contains("node=node-2") {
            strip(&file, mixed.path());
        } else {
            let to = mixed.path().join(&file);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(dir.path().join(&file), to).unwrap();
        }
    }
    let store = Store::open(mixed.path()).unwrap();
    assert_eq!(store.trace_statistics(StatsGroupBy::Service, &options).unwrap().spans, 4);
    assert_eq!(pairs(&store), [pair("node-1", "node-2")]);
    store.dependency_graph(&options).unwrap();
    assert_eq!(pairs(&store), [pair("node-1", "node-2")]);
}

/// A file whose rows are not in trace order (not written by the export, which sorts them) is
/// refused by the views that stream traces, with a message that says so, rather than read as
/// traces cut in pieces.
#[test]
fn a_file_out_of_trace_order_is_refused() {
    let choice = |i: u64| (0, 0, 0, 0, 0, i, 10, 0, false, false, false);
    let data = dataset(&[vec![choice(1), choice(2)], vec![choice(3), choice(4)]]);
    let (sorted, unsorted) = (TempDir::new("engine-sorted"), TempDir::new("engine-unsorted"));
    write_dir(&data, sorted.path()).unwrap();
    let file = files(sorted.path()).pop().unwrap();
    let batch = datafusion::arrow::compute::concat_batches(
        &rows(&sorted.path().join(&file))[0].schema(),
        &rows(&sorted.path().join(&file)),
    )
    .unwrap();
    let swapped =
        datafusion::arrow::compute::concat_batches(&batch.schema(), &[batch.slice(2, 2), batch.slice(0, 2)])
            .unwrap();
    let path = unsorted.path().join("spans.parquet");
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), swapped.schema(), None)
            .unwrap();
    writer.write(&swapped).unwrap();
    writer.close().unwrap();
    let store = Store::open(unsorted.path()).unwrap();
    let e =
        store.trace_statistics(StatsGroupBy::Service, &CausalityOptions::default()).unwrap_err().to_string();
    assert!(e.contains("not sorted by trace id"), "{e}");
    // The aggregation needs no order: the profile still reads it.
    assert_eq!(store.frequency_profile(GroupBy::Node, 1_000_000_000).unwrap().groups[0].total, 4);
}

/// A directory of recordings that holds a store somewhere inside is a directory of recordings;
/// a store is its partitions, or Parquet files directly in it.
#[test]
fn a_store_is_told_from_a_directory_of_recordings() {
    use ringtrace_analysis::engine::is_store;
    let choice = |i: u64| (0, 0, 0, 0, 0, i, 10, 0, false, false, false);
    let data = dataset(&[vec![choice(1)]]);
    let dir = TempDir::new("engine-which");
    write_dir(&data, &dir.path().join("store")).unwrap();
    assert!(is_store(&dir.path().join("store")));
    assert!(!is_store(dir.path()), "a store in a subdirectory of another name");
    let mut bytes = Vec::new();
    ringtrace_analysis::export::write(&data, ringtrace_analysis::export::ExportFormat::OtlpJson, &mut bytes)
        .unwrap();
    dir.file("store/spans.jsonl", &bytes);
    assert!(!is_store(&dir.path().join("store")), "recordings beside the partitions");
}

/// A store holding every span twice (its files copied): the request trees drop the copies, so
/// the second pass of `stats` (holding no duration) cannot be a scan of the rows, which meets
/// every span twice, and builds the trees again; the statistics are the dataset's all the same.
#[test]
fn stats_over_a_store_of_copies_reads_the_trees_twice() {
    let choices: Vec<Vec<Choice>> = (0..6u64)
        .map(|t| {
            (0..20u64)
                .map(|i| {
                    let (i_, t_) = (i as usize, t as usize);
                    let start_ms = (t * 1_000 + i * 37) % 7_200_000;
                    let len_us = (i * 977 + t * 31) % 50_000;
                    (
                        (i % 10) as u8,
                        i_ % 3,
                        (i_ + t_) % 3,
                        i_ % 4,
                        i_ % 4,
                        start_ms,
                        len_us,
                        (i % 5) as u8,
                        i % 7 == 0,
                        false,
                        false,
                    )
                })
                .collect()
        })
        .collect();
    let data = dataset(&choices);
    let dir = TempDir::new("engine-copies");
    write_dir(&data, dir.path()).unwrap();
    for file in files(dir.path()) {
        let from = dir.path().join(&file);
        let name = format!("copy-{}", file.file_name().unwrap().to_string_lossy());
        std::fs::copy(&from, from.with_file_name(name)).unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    let options = CausalityOptions::default();
    let causality = build_causality(&data, &options);
    for by in StatsGroupBy::ALL {
        let expected = trace_statistics(&data, &causality, by);
        assert_eq!(store.trace_statistics_holding(by, &options, 0).unwrap(), expected, "{by}");
        assert_eq!(store.trace_statistics(by, &options).unwrap(), expected, "{by}");
    }
    assert_eq!(store.repairs().duplicate_spans_dropped, data.spans.len() as u64, "every span was read twice");
}

/// A span of trace `trace` on `daemon`'s node, with `attributes` as text.
fn call_span(
    trace: u128,
    id: u64,
    parent: Option<u64>,
    daemon: &str,
    start_ms: u64,
    attributes: &[(&str, &str)],
) -> Span {
    let start = BASE_NS + start_ms * 1_000_000;
    Span {
        daemon: daemon.into(),
        node: format!("{daemon}-host"),
        attributes: attributes.iter().map(|(k, v)| ((*k).to_owned(), Value::Str((*v).to_owned()))).collect(),
        ..Span::new(
            TraceId::new(trace).unwrap(),
            SpanId::new(id).unwrap(),
            parent.map(|p| SpanId::new(p).unwrap()),
            "op",
            start,
            start + 10_000_000,
        )
    }
}

/// The dataset of `spans`, each span's process its (node, daemon).
fn with_processes(spans: Vec<Span>) -> Dataset {
    let mut data = Dataset { processes: Vec::new(), spans };
    for i in 0..data.spans.len() {
        let (node, daemon) = (data.spans[i].node.clone(), data.spans[i].daemon.clone());
        data.spans[i].process =
            data.processes.iter().position(|p| p.node == node && p.daemon == daemon).unwrap_or_else(|| {
                data.processes.push(Process { node, daemon, ..Process::default() });
                data.processes.len() - 1
            });
    }
    data
}

/// Calls to peers nobody recorded (named by attributes, or reached by an I/O `connect`), a
/// `connect` to a recorded process's socket, a parent cycle, a client and server sharing a span
/// id, and a span sharing an id with one that differs only by name.
fn calls_dataset() -> Dataset {
    use ringtrace_analysis::io::attr;
    let connect = |address: &'static str, port: &'static str| {
        vec![
            (attr::OP, "connect"),
            (attr::PEER_ADDRESS, address),
            (attr::PEER_PORT, port),
            (attr::TRANSPORT, "tcp"),
        ]
    };
    let mut spans = vec![
        call_span(1, 1, None, "api", 0, &[]),
        call_span(1, 2, Some(1), "api", 1, &[("db.system", "postgresql"), ("server.address", "db-1")]),
        call_span(1, 3, Some(1), "api", 2, &[("peer.service", "billing")]),
        call_span(1, 4, Some(1), "api", 3, &[("peer.service", "users")]),
        call_span(1, 5, Some(4), "users", 4, &[]),
        call_span(1, 6, Some(1), "api", 5, &connect("10.0.0.9", "6379")),
        // A connect to a socket the `users` process accepts on: a recorded call.
        call_span(1, 7, Some(1), "api", 6, &connect("10.0.0.5", "8080")),
        call_span(
            1,
            8,
            Some(5),
            "users",
            7,
            &[(attr::OP, "accept"), (attr::LOCAL_ADDRESS, "10.0.0.5"), (attr::LOCAL_PORT, "8080")],
        ),
        // A failed connect to a peer nobody recorded.
        call_span(
            1,
            9,
            Some(1),
            "api",
            8,
            &[connect("10.0.0.7", "11211"), vec![(attr::ERROR_TYPE, "ECONNREFUSED")]].concat(),
        ),
        // A parent cycle 11 → 12 → 11 under a root: cut at the earlier-starting span.
        call_span(2, 10, None, "api", 0, &[]),
        call_span(2, 11, Some(12), "api", 1, &[]),
        call_span(2, 12, Some(11), "users", 2, &[]),
        call_span(2, 13, Some(12), "users", 3, &[]),
    ];
    // A client span and the server span sharing its id (Zipkin's shared spans), in start order
    // as the store reads them, and the server's child.
    let (mut client, mut server) =
        (call_span(3, 21, Some(20), "api", 1, &[]), call_span(3, 21, Some(20), "users", 2, &[]));
    client.kind = SpanKind::Client;
    server.kind = SpanKind::Server;
    // And a span sharing its id with a span that differs only by name: no copy of it, which
    // the call columns alone cannot tell.
    let twin = Span { name: "twin".into(), ..call_span(3, 22, Some(21), "users", 3, &[]) };
    spans.extend([
        call_span(3, 20, None, "api", 0, &[]),
        client,
        server,
        call_span(3, 22, Some(21), "users", 3, &[]),
        twin,
    ]);
    with_processes(spans)
}

/// `deps` over a store reads only the columns calls need (ids, processes, kinds, status,
/// times, and the attributes naming a peer or an I/O call's ends) and reads again whole the
/// traces whose spans share an id: its graph and repairs are the in-memory ones.
#[test]
fn deps_over_a_store_reads_the_call_columns_and_agrees() {
    let data = calls_dataset();
    let dir = TempDir::new("engine-deps");
    write_dir(&data, dir.path()).unwrap();
    let store = Store::open(dir.path()).unwrap();
    let options = CausalityOptions::default();
    let causality = build_causality(&data, &options);
    let expected = dependency_graph(&data, &causality);
    let untraced: Vec<&str> =
        expected.services.iter().filter(|l| l.uninstrumented).map(|l| l.child.as_str()).collect();
    assert_eq!(
        untraced,
        ["10.0.0.7:11211", "10.0.0.9:6379", "billing", "postgresql"],
        "the case is what it says"
    );
    assert_eq!(causality.warnings.cycles_broken, 1);
    assert_eq!(causality.warnings.duplicate_span_ids, 2);
    assert_eq!(store.dependency_graph(&options).unwrap(), expected);
    assert_eq!(store.repairs(), causality.warnings);
}

/// Past `REREAD_TRACES` traces whose spans share an id, `deps` reads every trace again whole,
/// counting each trace's calls and repairs once.
#[test]
fn deps_reads_every_trace_again_past_the_traces_it_rereads() {
    let traces = ringtrace_analysis::engine::REREAD_TRACES as u128 + 1;
    let mut spans = Vec::new();
    for t in 1..=traces + 10 {
        spans.push(call_span(t, 1, None, "api", 0, &[]));
        // The first traces' root has a twin: the same id and all but the name.
        if t <= traces {
            spans.push(Span { name: "twin".into(), ..call_span(t, 1, None, "api", 0, &[]) });
        }
        spans.push(call_span(t, 2, Some(1), "users", 1, &[]));
    }
    let data = with_processes(spans);
    let dir = TempDir::new("engine-deps-reread");
    write_dir(&data, dir.path()).unwrap();
    let store = Store::open(dir.path()).unwrap();
    let options = CausalityOptions::default();
    let causality = build_causality(&data, &options);
    assert_eq!(causality.warnings.duplicate_span_ids, traces as u64);
    assert_eq!(store.dependency_graph(&options).unwrap(), dependency_graph(&data, &causality));
    assert_eq!(store.repairs(), causality.warnings);
}

/// The attribute keys a file lists in its metadata.
fn listed_keys(path: &std::path::Path) -> Option<Vec<String>> {
    let file = std::fs::File::open(path).unwrap();
    let footer = parquet::file::metadata::ParquetMetaDataReader::new().parse_and_finish(&file).unwrap();
    let entries = footer.file_metadata().key_value_metadata()?;
    let list =
        entries.iter().find(|kv| kv.key == ringtrace_analysis::store::ATTRIBUTE_KEYS)?.value.clone()?;
    Some(serde_json::from_str(&list).unwrap())
}

/// Writes every file under `dir` again with the same rows, its `created_by` and its list of
/// attribute keys (`None`: no list) as given, except the files `keep` names.
fn rewrite(dir: &std::path::Path, created_by: &str, keys: Option<&str>, keep: &[&str]) {
    use parquet::file::metadata::KeyValue;
    for file in files(dir).into_iter().filter(|f| !keep.iter().any(|k| f.ends_with(k))) {
        let path = dir.join(file);
        let batches = rows(&path);
        let list = keys
            .map(|k| vec![KeyValue::new(ringtrace_analysis::store::ATTRIBUTE_KEYS.to_owned(), k.to_owned())]);
        let properties = parquet::file::properties::WriterProperties::builder()
            .set_created_by(created_by.to_owned())
            .set_key_value_metadata(list)
            .build();
        let out = std::fs::File::create(&path).unwrap();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(out, batches[0].schema(), Some(properties)).unwrap();
        batches.iter().for_each(|b| writer.write(b).unwrap());
        writer.close().unwrap();
    }
}

/// Each file lists its spans' attribute keys, and `deps` decodes the attribute maps only when a
/// file may hold one it reads: it trusts the lists of files ringtrace wrote (shown here by
/// lists that leave the keys out: the peers they name are then not seen), not those of files
/// another writer wrote or that have none (their peers are found).
#[test]
fn files_list_their_attribute_keys_and_deps_decodes_the_maps_only_when_one_may_hold_a_call() {
    let data = calls_dataset();
    let options = CausalityOptions::default();
    let expected = dependency_graph(&data, &build_causality(&data, &options));
    let plain = Dataset {
        spans: data.spans.iter().map(|s| Span { attributes: Vec::new(), ..s.clone() }).collect(),
        ..data.clone()
    };
    let without_attributes = dependency_graph(&plain, &build_causality(&plain, &options));
    assert_ne!(without_attributes, expected, "the attributes make calls");
    let graph = |dir: &TempDir| Store::open(dir.path()).unwrap().dependency_graph(&options).unwrap();

    let dir = TempDir::new("engine-keys");
    write_dir(&data, dir.path()).unwrap();
    assert_eq!(
        listed_keys(&path_in(dir.path(), "users-00000.parquet")).unwrap(),
        ["io.op", "network.local.address", "network.local.port"]
    );
    assert!(listed_keys(&path_in(dir.path(), "api-00000.parquet"))
        .unwrap()
        .contains(&"peer.service".to_owned()));
    assert_eq!(graph(&dir), expected);

    // ringtrace's lists, leaving the keys out, are trusted: the maps are not decoded.
    rewrite(dir.path(), "ringtrace 0.1.0", Some("[]"), &[]);
    assert_eq!(graph(&dir), without_attributes);
    // Unless one file lists a call attribute (its list left as written) ...
    let dir = TempDir::new("engine-keys-one");
    write_dir(&data, dir.path()).unwrap();
    rewrite(dir.path(), "ringtrace 0.1.0", Some("[]"), &["users-00000.parquet"]);
    assert_eq!(graph(&dir), expected);
    // ... or the lists are another writer's, or there are none.
    rewrite(dir.path(), "parquet-rs", Some("[]"), &[]);
    assert_eq!(graph(&dir), expected);
    rewrite(dir.path(), "ringtrace 0.1.0", None, &[]);
    assert_eq!(graph(&dir), expected);
    // A file named `.parquet` alone is read too, and may hold them.
    let dir = TempDir::new("engine-keys-hidden");
    write_dir(&data, dir.path()).unwrap();
    rewrite(dir.path(), "ringtrace 0.1.0", Some("[]"), &["api-00000.parquet"]);
    let api = path_in(dir.path(), "api-00000.parquet");
    std::fs::rename(&api, api.with_file_name(".parquet")).unwrap();
    assert_eq!(graph(&dir), expected);
}

/// The file under `dir` whose name ends with `name`.
fn path_in(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    dir.join(files(dir).into_iter().find(|f| f.ends_with(name)).unwrap())
}
