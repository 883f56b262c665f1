//! The HTML report: every top-level view of a dataset in one self-contained page.
//!
//! [`build_report`] runs the analyses — frequency profiles per node and per daemon with their
//! phase changes, top methods with total and self time, anomalies across peer nodes, the
//! critical paths of the slowest requests, the dependency graph, a flame graph, and trace
//! volume with the spans each process dropped — and returns them as a [`Report`].
//! [`write_html`] renders it as one HTML file with inline CSS, JavaScript and SVG and no
//! external resource, so it opens offline in any browser.
//!
//! The page's script draws the line charts and then marks the page: `data-rendered="ok"` on
//! `<body>` with `data-charts` the number of charts holding data, or `data-rendered="empty"`
//! with `data-empty-charts` naming the charts that drew nothing; errors raised while it runs
//! (and `console.error` calls) are listed in `#report-errors` and counted in `data-errors`.
//! Browser tests read those marks.

mod html;
mod svg;

use std::collections::BTreeMap;

pub use html::write_html;

use ringtrace_core::TraceId;

use crate::anomaly::{anomalies, Anomalies, AnomalyOptions};
use crate::causality::{
    build_causality, Causality, CausalityOptions, CausalityWarnings, RequestTree, Slowest,
};
use crate::critical_path::critical_path;
use crate::deps::{DependencyBuilder, DependencyGraph};
use crate::filter::SpanFilter;
use crate::flame::{FlameBuilder, FlameGraph, FlameScope, FrameLabel, StackMode, DEFAULT_MIN_PERCENT};
use crate::model::Dataset;
use crate::phase::{detect_phases, PhaseChange, PhaseOptions};
use crate::profile::{GroupBy, ProfileError, ProfileQuery, TimeProfile, TimeProfileBuilder};

/// What goes into a report.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportOptions {
    /// The page's title.
    pub title: String,
    /// Bucket width of the time series, nanoseconds; `None` picks a round width giving at most
    /// [`MAX_CHART_BUCKETS`] buckets.
    pub bucket_ns: Option<u64>,
    /// Anomaly window ([`AnomalyOptions::window_ns`]).
    pub anomaly_window_ns: Option<u64>,
    /// How many of the slowest requests show their critical path.
    pub slowest_requests: usize,
    /// How many methods the top-methods table lists.
    pub top_methods: usize,
    /// Flame-graph frames under this percentage of the total are folded into their parent.
    pub flame_min_percent: f64,
    /// Correct clock skew between nodes before building request trees.
    pub adjust_skew: bool,
    /// A file system's I/O envelope: the I/O section then shows heatmaps of the bandwidth it
    /// predicts for write and read stages.
    pub envelope: Option<crate::envelope::Envelope>,
}

impl Default for ReportOptions {
    fn default() -> Self {
        Self {
            title: "ringtrace report".into(),
            bucket_ns: None,
            anomaly_window_ns: AnomalyOptions::default().window_ns,
            slowest_requests: 5,
            top_methods: 15,
            flame_min_percent: DEFAULT_MIN_PERCENT,
            adjust_skew: false,
            envelope: None,
        }
    }
}

/// The most buckets an automatically chosen bucket width gives.
pub const MAX_CHART_BUCKETS: u64 = 60;

/// The analyses [`build_report`] runs, in order; it reports each before starting it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportStep {
    /// Profiles per node and per daemon, and per method for the top methods.
    Profiles,
    /// Phase changes per node.
    Phases,
    /// Anomalies across peer nodes.
    Anomalies,
    /// Request trees.
    Causality,
    /// Critical paths of the slowest requests.
    CriticalPaths,
    /// The dependency graph.
    Dependencies,
    /// The flame graph.
    FlameGraph,
    /// I/O calls linked to requests.
    Io,
}

impl ReportStep {
    /// Every step, in order.
    pub const ALL: [ReportStep; 8] = [
        ReportStep::Profiles,
        ReportStep::Phases,
        ReportStep::Anomalies,
        ReportStep::Causality,
        ReportStep::CriticalPaths,
        ReportStep::Dependencies,
        ReportStep::FlameGraph,
        ReportStep::Io,
    ];

    /// A short description for progress displays.
    pub fn label(self) -> &'static str {
        match self {
            ReportStep::Profiles => "frequency profiles",
            ReportStep::Phases => "phase changes",
            ReportStep::Anomalies => "anomalies across nodes",
            ReportStep::Causality => "request trees",
            ReportStep::CriticalPaths => "critical paths",
            ReportStep::Dependencies => "dependency graph",
            ReportStep::FlameGraph => "flame graph",
            ReportStep::Io => "I/O calls and requests",
        }
    }
}

/// Everything the report shows.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The page's title.
    pub title: String,
    /// Totals over the dataset.
    pub summary: Summary,
    /// Span counts, span time and self time per node.
    pub by_node: TimeProfile,
    /// The same per daemon.
    pub by_daemon: TimeProfile,
    /// Phase changes per node.
    pub phases: Vec<PhaseChange>,
    /// The most frequent methods.
    pub top_methods: Vec<MethodRow>,
    /// Anomalies across peer nodes.
    pub anomalies: Anomalies,
    /// The slowest requests with their critical paths, slowest first.
    pub slow_requests: Vec<SlowRequest>,
    /// Which daemons and nodes call which.
    pub dependencies: DependencyGraph,
    /// Span time by stack across processes, pruned.
    pub flame: FlameGraph,
    /// Spans kept and lost per process.
    pub volume: Vec<ProcessVolume>,
    /// I/O calls linked to requests.
    pub io: IoSection,
}

/// The I/O calls of the dataset (`docs/io-records.md`), linked to requests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IoSection {
    /// I/O calls.
    pub calls: u64,
    /// Requests they served.
    pub requests: u64,
    /// Connections found.
    pub connections: u64,
    /// Time per (client, serving host, operation), the largest rows.
    pub breakdown: Vec<crate::io::views::BreakdownRow>,
    /// Count and time per call type and host, the largest rows.
    pub call_types: Vec<crate::io::views::CallTypeRow>,
    /// Bytes sent against bytes asked for, per sender and receiver.
    pub flows: Vec<crate::io::views::FlowRow>,
    /// With an envelope: heatmaps (SVG) of the predicted bandwidth of write and read stages.
    pub model: Option<String>,
}

/// Heatmaps of a write and a read stage of 64 tasks on the middle measured process count, each
/// task's file 1 MiB.
fn model_heatmaps(envelope: &crate::envelope::Envelope) -> String {
    use crate::envelope::{heatmaps, heatmaps_svg, measured_axes, Stage, StageKind};
    let (procs, _) = measured_axes(envelope);
    let nodes = procs.get(procs.len() / 2).copied().unwrap_or(1);
    [StageKind::Write, StageKind::Read]
        .into_iter()
        .map(|kind| {
            let stage =
                Stage { kind, tasks: 64, nodes, bytes: 1 << 20, local_fraction: 1.0, shared_bytes: None };
            let name = if kind == StageKind::Write { "write" } else { "read" };
            heatmaps_svg(&heatmaps(envelope, &stage), &format!("{name} stage, {nodes} nodes, 64 tasks"))
        })
        .collect()
}

/// Rows the report's I/O tables show.
const IO_ROWS: usize = 12;

fn io_section(data: &Dataset) -> IoSection {
    io_section_of(&crate::io::io_calls(data))
}

/// The I/O section of `calls`, linked to requests.
pub fn io_section_of(calls: &[crate::io::IoCall]) -> IoSection {
    if calls.is_empty() {
        return IoSection::default();
    }
    let links = crate::io::link_requests(calls);
    let mut breakdown = crate::io::views::io_breakdown(calls, &links);
    breakdown.truncate(IO_ROWS);
    let mut call_types = crate::io::views::io_call_types(calls);
    call_types.truncate(IO_ROWS);
    let mut flows = crate::io::views::io_sizes(calls).flows;
    flows.truncate(IO_ROWS);
    IoSection {
        calls: calls.len() as u64,
        requests: links.requests.len() as u64,
        connections: links.connections as u64,
        breakdown,
        call_types,
        flows,
        model: None,
    }
}

/// Totals over the dataset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Spans read, a copy of a span ([`Span::is_copy_of`](crate::Span::is_copy_of)) once.
    pub spans: u64,
    /// Traces (requests).
    pub traces: u64,
    /// Processes that recorded spans.
    pub processes: u64,
    /// Distinct nodes.
    pub nodes: u64,
    /// Distinct daemons.
    pub daemons: u64,
    /// Earliest span start, Unix nanoseconds (0 when empty).
    pub start_unix_ns: u64,
    /// Latest span end, Unix nanoseconds (0 when empty).
    pub end_unix_ns: u64,
    /// Whether the inputs hold the processes' loss counters (recordings do; a Parquet store
    /// does not, and its drops and spans left open read 0).
    pub loss_counters: bool,
    /// Spans the processes dropped.
    pub dropped_spans: u64,
    /// Events the processes dropped.
    pub dropped_events: u64,
    /// Spans left open at shutdown.
    pub unclosed_spans: u64,
    /// What building the request trees repaired.
    pub warnings: CausalityWarnings,
}

/// One method's share of the work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodRow {
    /// [`Span::qualified_method`](crate::Span::qualified_method): `target::name`, or
    /// `daemon: name` for a span without a target.
    pub method: String,
    /// Spans.
    pub count: u64,
    /// Summed durations, nanoseconds.
    pub total_ns: u64,
    /// Summed self time, nanoseconds.
    pub self_ns: u64,
}

/// One slow request and the sections of its critical path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowRequest {
    /// The trace id, 32 hex digits.
    pub trace_id: String,
    /// The application request id, when recorded.
    pub request_id: Option<String>,
    /// Earliest span start, Unix nanoseconds.
    pub start_unix_ns: u64,
    /// Latency, nanoseconds.
    pub duration_ns: u64,
    /// Spans in the request.
    pub spans: usize,
    /// The critical path, in time order.
    pub path: Vec<PathStep>,
}

/// One section of a critical path, named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathStep {
    /// The node.
    pub node: String,
    /// The daemon.
    pub daemon: String,
    /// The method.
    pub method: String,
    /// Start, Unix nanoseconds.
    pub start_unix_ns: u64,
    /// End, Unix nanoseconds.
    pub end_unix_ns: u64,
}

/// One process's trace volume and losses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessVolume {
    /// The node.
    pub node: String,
    /// The daemon.
    pub daemon: String,
    /// The OS process id, when known.
    pub pid: Option<u32>,
    /// Spans read from it, copies of spans read before not counted.
    pub spans: u64,
    /// Spans it dropped.
    pub dropped_spans: u64,
    /// Events it dropped.
    pub dropped_events: u64,
    /// Spans it left open.
    pub unclosed_spans: u64,
}

/// A round bucket width (1, 2 or 5 times a power of ten nanoseconds, at least 1 µs) giving at
/// most [`MAX_CHART_BUCKETS`] buckets over `span_ns`.
pub fn auto_bucket_ns(span_ns: u64) -> u64 {
    let mut unit = 1_000u64;
    loop {
        for step in [1, 2, 5] {
            let width = unit.saturating_mul(step);
            if span_ns / width < MAX_CHART_BUCKETS || width == u64::MAX {
                return width;
            }
        }
        unit = unit.saturating_mul(10);
    }
}

/// Runs every analysis over `data` and gathers what the page shows, calling `on_step` before
/// each analysis.
pub fn build_report(data: &Dataset, options: &ReportOptions, on_step: &mut dyn FnMut(ReportStep)) -> Report {
    let extent = Extent::of(data);
    let mut report = ReportBuilder::new(options, extent);

    on_step(ReportStep::Profiles);
    report.add_spans(data);

    on_step(ReportStep::Phases);
    let phases = detect_phases(data, &query(GroupBy::Node, report.bucket_ns), &PhaseOptions::default())
        .unwrap_or_default();

    on_step(ReportStep::Anomalies);
    let anomalies = anomalies(data, &report.anomaly_options()).unwrap_or_else(|_| report.no_anomalies());

    on_step(ReportStep::Causality);
    let causality = build_causality(data, &CausalityOptions { adjust_skew: options.adjust_skew });

    on_step(ReportStep::CriticalPaths);
    report.add_requests(data, &causality.traces);
    on_step(ReportStep::Dependencies);
    on_step(ReportStep::FlameGraph);

    on_step(ReportStep::Io);
    let io = io_section(data);

    let (volume, distinct_spans) = volume(data);
    let summary = summary(data, &causality, distinct_spans, extent);
    report.finish(ReportParts { summary, phases, anomalies, volume, io })
}

/// The times a report's charts span: from the first start to the last end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extent {
    /// The earliest start, Unix nanoseconds.
    pub first_start_unix_ns: u64,
    /// The latest start.
    pub last_start_unix_ns: u64,
    /// The latest end.
    pub last_end_unix_ns: u64,
}

impl Extent {
    /// The extent of `data`'s spans (all zero without spans).
    pub fn of(data: &Dataset) -> Self {
        let starts = data.spans.iter().map(|s| s.start_unix_ns);
        Extent {
            first_start_unix_ns: starts.clone().min().unwrap_or(0),
            last_start_unix_ns: starts.max().unwrap_or(0),
            last_end_unix_ns: data.spans.iter().map(|s| s.end_unix_ns).max().unwrap_or(0),
        }
    }

    /// The latest end, or start for a span that ends before it starts.
    pub fn end_unix_ns(&self) -> u64 {
        self.last_end_unix_ns.max(self.last_start_unix_ns)
    }
}

/// What the report takes whole from elsewhere: what the data says of itself (processes, losses,
/// repairs), and the analyses that are not built a request at a time.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportParts {
    /// Totals.
    pub summary: Summary,
    /// Phase changes per node.
    pub phases: Vec<PhaseChange>,
    /// Anomalies across peer nodes.
    pub anomalies: Anomalies,
    /// Spans kept and lost per process.
    pub volume: Vec<ProcessVolume>,
    /// I/O calls linked to requests.
    pub io: IoSection,
}

/// A [`Report`] built from datasets and requests added one at a time: the whole dataset and
/// its requests in memory, or each trace of a store as it streams.
pub struct ReportBuilder {
    options: ReportOptions,
    bucket_ns: u64,
    by_node: Result<TimeProfileBuilder, ProfileError>,
    by_daemon: Result<TimeProfileBuilder, ProfileError>,
    methods: Result<TimeProfileBuilder, ProfileError>,
    /// The slowest requests so far (ties by trace id), at most `options.slowest_requests`.
    slow: Slowest<TraceId, SlowRequest>,
    dependencies: DependencyBuilder,
    flame: FlameBuilder,
}

impl std::fmt::Debug for ReportBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportBuilder").field("bucket_ns", &self.bucket_ns).finish_non_exhaustive()
    }
}

impl ReportBuilder {
    /// A report with `options` over spans within `extent`.
    pub fn new(options: &ReportOptions, extent: Extent) -> Self {
        let span_ns = extent.end_unix_ns() - extent.first_start_unix_ns.min(extent.end_unix_ns());
        let bucket_ns = options.bucket_ns.filter(|&b| b > 0).unwrap_or_else(|| auto_bucket_ns(span_ns));
        let profile = |by: GroupBy, bucket_ns: u64| {
            let (start, buckets) = TimeProfileBuilder::range(
                extent.first_start_unix_ns,
                extent.last_start_unix_ns,
                extent.last_end_unix_ns,
                bucket_ns,
            );
            TimeProfileBuilder::new(by, bucket_ns, start, buckets)
        };
        let scope =
            FlameScope { stacks: StackMode::Request, label: FrameLabel::DaemonMethod, ..Default::default() };
        ReportBuilder {
            options: options.clone(),
            bucket_ns,
            by_node: profile(GroupBy::Node, bucket_ns),
            by_daemon: profile(GroupBy::Daemon, bucket_ns),
            methods: profile(GroupBy::Method, u64::MAX),
            slow: Slowest::new(options.slowest_requests),
            dependencies: DependencyBuilder::default(),
            flame: FlameBuilder::new(scope),
        }
    }

    /// The time series' bucket width: the options', or a round width giving at most
    /// [`MAX_CHART_BUCKETS`] buckets.
    pub fn bucket_ns(&self) -> u64 {
        self.bucket_ns
    }

    /// How the report compares peer nodes.
    pub fn anomaly_options(&self) -> AnomalyOptions {
        AnomalyOptions { window_ns: self.options.anomaly_window_ns, ..Default::default() }
    }

    /// The anomalies shown when they cannot be computed.
    pub fn no_anomalies(&self) -> Anomalies {
        Anomalies { window_ns: self.options.anomaly_window_ns, anomalies: vec![], unpaired_daemons: vec![] }
    }

    /// Adds the spans of `data` to the time series and the top methods; `data` holds each
    /// span's children (a whole dataset, or a whole trace).
    pub fn add_spans(&mut self, data: &Dataset) {
        for profile in [&mut self.by_node, &mut self.by_daemon, &mut self.methods].into_iter().flatten() {
            profile.add(data);
        }
    }

    /// Adds the requests `trees` of `data` (every tree that `data` holds, at once: the calls
    /// between processes are found over the dataset): each one's critical path if it is among
    /// the slowest, its calls, its stacks.
    pub fn add_requests(&mut self, data: &Dataset, trees: &[RequestTree]) {
        for tree in trees {
            // Slowest first, ties by trace id: `Causality::slowest`'s order.
            self.slow.offer(tree.duration_ns(), tree.trace_id, || slow_request(data, tree));
            self.flame.add(data, tree);
        }
        self.dependencies.add(data, trees);
    }

    /// The report, with the parts taken whole.
    pub fn finish(self, parts: ReportParts) -> Report {
        let empty = |by: GroupBy, bucket_ns: u64| TimeProfile {
            group_by: by,
            bucket_ns,
            start_unix_ns: 0,
            filter: SpanFilter::default(),
            groups: vec![],
        };
        let bucket_ns = self.bucket_ns;
        let profile = |p: Result<TimeProfileBuilder, ProfileError>, by: GroupBy| {
            p.and_then(TimeProfileBuilder::finish).unwrap_or_else(|_| empty(by, bucket_ns))
        };
        let (by_node, by_daemon) =
            (profile(self.by_node, GroupBy::Node), profile(self.by_daemon, GroupBy::Daemon));
        let top_methods =
            method_rows(self.methods.and_then(TimeProfileBuilder::finish), self.options.top_methods);
        let mut io = parts.io;
        io.model = self.options.envelope.as_ref().map(model_heatmaps);
        Report {
            title: self.options.title.clone(),
            summary: parts.summary,
            by_node,
            by_daemon,
            phases: parts.phases,
            top_methods,
            anomalies: parts.anomalies,
            slow_requests: self.slow.into_sorted(),
            dependencies: self.dependencies.finish(),
            flame: self.flame.finish().prune(self.options.flame_min_percent),
            volume: parts.volume,
            io,
        }
    }
}

/// Every span kept, grouped `by`, in buckets of `bucket_ns`.
fn query(by: GroupBy, bucket_ns: u64) -> ProfileQuery {
    ProfileQuery { by, bucket_ns, filter: SpanFilter::default() }
}

/// The `top` methods by span count, then span time, then name, from a profile of one bucket.
fn method_rows(profile: Result<TimeProfile, ProfileError>, top: usize) -> Vec<MethodRow> {
    let mut rows: Vec<MethodRow> = match profile {
        Ok(p) => p
            .groups
            .into_iter()
            .map(|g| MethodRow {
                method: g.key,
                count: g.count,
                total_ns: g.total_time_ns,
                self_ns: g.self_time_ns,
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    rows.sort_by(|a, b| {
        b.count.cmp(&a.count).then(b.total_ns.cmp(&a.total_ns)).then_with(|| a.method.cmp(&b.method))
    });
    rows.truncate(top);
    rows
}

/// One request with its critical path, by start time.
fn slow_request(data: &Dataset, tree: &RequestTree) -> SlowRequest {
    let mut path: Vec<PathStep> = critical_path(data, tree)
        .into_iter()
        .map(|section| {
            let span = &data.spans[section.span];
            PathStep {
                node: span.node.clone(),
                daemon: span.daemon.clone(),
                method: span.method(),
                start_unix_ns: section.start_unix_ns,
                end_unix_ns: section.end_unix_ns,
            }
        })
        .collect();
    path.sort_by_key(|s| s.start_unix_ns);
    SlowRequest {
        trace_id: tree.trace_id.to_string(),
        request_id: tree.request_id(data).map(str::to_owned),
        start_unix_ns: tree.start_unix_ns(),
        duration_ns: tree.duration_ns(),
        spans: tree.spans.len(),
        path,
    }
}

/// Spans kept and lost per process (by node, daemon and pid), and the distinct spans in all.
fn volume(data: &Dataset) -> (Vec<ProcessVolume>, u64) {
    let mut spans_per_process = vec![0u64; data.processes.len()];
    let mut distinct_spans = 0u64;
    for (_, s) in data.distinct_spans() {
        distinct_spans += 1;
        if let Some(n) = spans_per_process.get_mut(s.process) {
            *n += 1;
        }
    }
    let volume = data
        .processes
        .iter()
        .zip(spans_per_process)
        .map(|(p, spans)| ProcessVolume {
            node: p.node.clone(),
            daemon: p.daemon.clone(),
            pid: p.pid,
            spans,
            dropped_spans: p.dropped_spans,
            dropped_events: p.dropped_events,
            unclosed_spans: p.unclosed_spans,
        })
        .collect();
    (sorted_volume(volume), distinct_spans)
}

/// `volume` by node, daemon and pid.
pub fn sorted_volume(mut volume: Vec<ProcessVolume>) -> Vec<ProcessVolume> {
    volume.sort_by(|a, b| (&a.node, &a.daemon, a.pid).cmp(&(&b.node, &b.daemon, b.pid)));
    volume
}

/// The dataset at a glance.
fn summary(data: &Dataset, causality: &Causality, distinct_spans: u64, extent: Extent) -> Summary {
    let distinct = |f: &dyn Fn(&crate::model::Span) -> &str| {
        data.spans.iter().map(f).collect::<std::collections::BTreeSet<_>>().len() as u64
    };
    Summary {
        spans: distinct_spans,
        traces: causality.traces.len() as u64,
        processes: data.processes.len() as u64,
        nodes: distinct(&|s| s.node.as_str()),
        daemons: distinct(&|s| s.daemon.as_str()),
        start_unix_ns: extent.first_start_unix_ns,
        end_unix_ns: extent.end_unix_ns(),
        loss_counters: true,
        dropped_spans: data.dropped_spans_total(),
        dropped_events: data.dropped_events_total(),
        unclosed_spans: data.unclosed_spans_total(),
        warnings: causality.warnings,
    }
}

/// What [`volume_by`] sums the processes' volume by.
#[derive(Clone, Copy)]
pub(crate) enum VolumeKey {
    /// Per node.
    Node,
    /// Per daemon.
    Daemon,
}

/// The spans of one node or daemon, summed over its processes.
pub(crate) struct VolumeTotals {
    /// The node or daemon.
    pub(crate) key: String,
    /// Spans recorded.
    pub(crate) spans: u64,
    /// Spans dropped because a buffer was full.
    pub(crate) dropped_spans: u64,
}

/// Spans kept and lost per node or per daemon (summed over processes), for the volume table.
pub(crate) fn volume_by(report: &Report, by: VolumeKey) -> Vec<VolumeTotals> {
    let mut out: BTreeMap<&str, VolumeTotals> = BTreeMap::new();
    for v in &report.volume {
        let key = match by {
            VolumeKey::Node => &v.node,
            VolumeKey::Daemon => &v.daemon,
        };
        let e =
            out.entry(key).or_insert_with(|| VolumeTotals { key: key.clone(), spans: 0, dropped_spans: 0 });
        e.spans += v.spans;
        e.dropped_spans += v.dropped_spans;
    }
    out.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_buckets_are_round_and_few() {
        assert_eq!(auto_bucket_ns(0), 1_000);
        assert_eq!(auto_bucket_ns(500_000_000), 10_000_000);
        assert_eq!(auto_bucket_ns(60_000_000_000), 2_000_000_000);
        for span in [1, 999, 123_456_789, 3_600_000_000_000, u64::MAX] {
            let b = auto_bucket_ns(span);
            assert!(span / b < MAX_CHART_BUCKETS, "{span}: {b}");
        }
    }
}
