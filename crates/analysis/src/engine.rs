//! ringtrace's views over the Parquet store ([`crate::store`]), run on Apache DataFusion.
//!
//! A [`Store`] is a directory the store's writer filled (`ringtrace export --format parquet`),
//! registered with a DataFusion session as the table `spans`, its files declared sorted by
//! trace, then start, as the writer sorts them. The views use it two ways:
//!
//! - **Aggregations as plans.** [`Store::frequency_profile`] is a DataFusion `GROUP BY` of the
//!   spans by group and time bucket: only the counts reach ringtrace.
//! - **Per-trace views by streaming traces.** [`Store::for_each_trace`] runs the plan `ORDER BY
//!   trace_id, start_unix_ns`: DataFusion merges the sorted files (and sorts, spilling to disk
//!   under its memory limit, what is not sorted), and each trace reaches ringtrace's own
//!   algorithms whole, as a [`Dataset`] of its own — request trees, self times, calls — while
//!   only that trace is in memory. [`Store::trace_statistics`], [`Store::dependency_graph`],
//!   [`Store::bottlenecks`] and [`Store::flame_graph`] are built that way; their results equal
//!   the in-memory views' on the same spans (`tests/engine.rs` checks it over random datasets),
//!   except where the order spans were read in decides: within a trace they come in the
//!   store's order (start, then span id), so two spans sharing an id without being copies, or
//!   siblings starting at the same nanosecond, may be taken in another order than the
//!   recordings'.
//!
//! What the store does not keep is not here either: the processes are the (node, daemon) pairs
//! with their boot and host ids (no pid, other resource attributes or loss counters), and
//! attribute values are text. Clock skew is not estimated between nodes under one kernel, as
//! over the recordings; a store written before its `boot_id` and `host_id` columns has neither,
//! and skew is estimated between any two of its nodes.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, Int64Array, ListArray, MapArray, RecordBatch, StringArray, StructArray};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::functions::core::expr_fn::get_field;
use datafusion::functions_aggregate::expr_fn::{count, max, min};
use datafusion::logical_expr::Expr;
use datafusion::prelude::{col, lit, DataFrame, ParquetReadOptions, SessionConfig, SessionContext};
use futures::StreamExt;
use ringtrace_core::io::attr as io_attr;
use ringtrace_core::{SpanId, TraceId};

use crate::causality::{build_causality_into, CausalityOptions};
use crate::deps::{DependencyBuilder, DependencyGraph};
use crate::flame::{FlameBuilder, FlameGraph, FlameScope, RequestSelection};
use crate::model::{push_method, Dataset, Process, Span, SpanEvent, SpanKind, SpanLink, Status, Value};
use crate::profile::{FrequencyCounter, FrequencyProfile, GroupBy, ProfileError};
use crate::stats::{Finished, StatisticsBuilder, StatsGroupBy, TraceStatistics};
use crate::store::StoreError;

/// What a pass over the store's traces reads of each span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Columns {
    /// Every column: the spans whole.
    All,
    /// What a request's calls need ([`CALL_COLUMNS`], [`CLOCK_COLUMNS`], and the attributes in
    /// [`CALL_ATTRIBUTES`]): the trees, their repairs and clock skew, and the calls to peers
    /// nobody recorded, as `deps` counts them. Names, events, links and other attributes are
    /// left out, so spans that share an id may not be told apart from copies.
    Calls,
}

/// The columns a request's calls read ([`Columns::Calls`]).
const CALL_COLUMNS: [&str; 9] = [
    "trace_id",
    "span_id",
    "parent_span_id",
    "node",
    "daemon",
    "kind",
    "status",
    "start_unix_ns",
    "end_unix_ns",
];

/// The columns saying which clock a span's times come from ([`crate::store::ClockIds`]), which
/// clock skew needs: read by every pass that builds requests, when the store has them.
const CLOCK_COLUMNS: [&str; 2] = ["boot_id", "host_id"];

/// The attributes a request's calls read ([`Columns::Calls`]): those naming the peer a span
/// calls, and those of an I/O call that a `connect` to an uninstrumented peer reads.
const CALL_ATTRIBUTES: [&str; 9] = [
    "peer.service",
    "db.system",
    "server.address",
    io_attr::OP,
    io_attr::PEER_ADDRESS,
    io_attr::PEER_PORT,
    io_attr::LOCAL_ADDRESS,
    io_attr::LOCAL_PORT,
    io_attr::ERROR_TYPE,
];

/// Traces `deps` reads again whole, at most, when their spans share an id: past that, it
/// reads every trace again.
pub const REREAD_TRACES: usize = 4096;

/// Memory DataFusion may hold for a query before it spills to disk (sorts) or fails.
pub const MEMORY_LIMIT: usize = 512 << 20;

/// Durations `stats` holds for its exact percentiles (8 bytes each: 64 MiB) before it counts
/// them and reads the spans' times a second time ([`Store::trace_statistics_holding`]).
pub const HELD_DURATIONS: usize = 8 << 20;

/// Rows per record batch DataFusion hands over, when it merges few files.
const BATCH_ROWS: usize = 8192;

/// Rows per batch of all the files merged at once, in all: past 8 files, each file's batches
/// shrink (to 1,024 rows at least), since the merge holds a batch of every file and its
/// decoding buffers, and the memory would grow with the number of files.
const MERGED_ROWS: usize = 8 * BATCH_ROWS;

/// A Parquet store opened for queries.
pub struct Store {
    dir: PathBuf,
    /// The directory the engine reads the files from: `dir`, made absolute when opened.
    files: PathBuf,
    runtime: tokio::runtime::Runtime,
    ctx: SessionContext,
    /// The Ballista scheduler the plans run on ([`Store::open_on`]), if any.
    scheduler: Option<String>,
    /// What building the request trees repaired, and the client → server pairs across nodes,
    /// over the traces of the latest pass.
    pass: std::cell::RefCell<Pass>,
}

/// What a pass over the store's request trees found besides the trees.
#[derive(Default)]
struct Pass {
    repairs: crate::causality::CausalityWarnings,
    skew: crate::causality::SkewCollector,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// Files a store's plan reads as streams of their own, merged in trace order; a store with more
/// is sorted instead (spilling to disk past [`MEMORY_LIMIT`]). Each stream holds a batch.
pub const MERGED_FILES: usize = 64;

/// Whether `dir` is a Parquet store as the export lays it out: `.parquet` files directly in it,
/// or under its `day=…` partition directories, and no recording anywhere under it (a directory
/// of recordings that also holds a store somewhere is a directory of recordings).
pub fn is_store(dir: &Path) -> bool {
    dir.is_dir() && parquet_files(dir, 1) > 0 && crate::list_inputs(&[dir]).is_err()
}

/// The `.parquet` files of the store at `dir`, counted up to `most`: in it, and under its
/// partition directories (`name=value`, as DataFusion reads them: it passes over others).
fn parquet_files(dir: &Path, most: usize) -> usize {
    fn count(dir: &Path, depth: usize, most: usize, found: &mut usize) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for path in entries.filter_map(Result::ok).map(|e| e.path()) {
            if *found >= most {
                return;
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if depth > 0 && name.contains('=') && !name.starts_with('.') {
                    count(&path, depth - 1, most, found);
                }
            } else if name.ends_with(".parquet") && !name.starts_with('.') {
                *found += 1;
            }
        }
    }
    let mut found = 0;
    count(dir, 2, most, &mut found);
    found
}

/// The order of the store's rows in a file, as the export sorts them: trace, start, span id.
fn trace_order() -> Vec<datafusion::logical_expr::SortExpr> {
    ["trace_id", "start_unix_ns", "span_id"].into_iter().map(|c| col(c).sort(true, false)).collect()
}

/// The runtime the engine's plans run on: a thread a core (two at least), so that a plan
/// reads and merges the files while the calling thread takes the batches it made (an error
/// names `dir`).
fn runtime(dir: &Path) -> Result<tokio::runtime::Runtime, StoreError> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("ringtrace-engine")
        .build()
        .map_err(|source| StoreError::Io { path: dir.to_owned(), source })
}

/// Record batches a plan runs ahead of the thread that takes them ([`Store::each_batch`]).
const BATCHES_AHEAD: usize = 2;

/// The session for the store in `dir`: a partition a file, so that the plan in trace order
/// merges the files as they are sorted.
fn local_session(dir: &Path) -> Result<SessionContext, StoreError> {
    if !is_store(dir) {
        return Err(StoreError::Io {
            path: dir.to_owned(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no Parquet files here: not a store written by `ringtrace export --format parquet`",
            ),
        });
    }
    let partitions = parquet_files(dir, MERGED_FILES).max(2);
    let batch_rows = (MERGED_ROWS / partitions).clamp(1024, BATCH_ROWS);
    session(partitions, batch_rows, MEMORY_LIMIT)
}

/// A DataFusion session reading the store's files: `partitions` streams at once, in batches of
/// `batch_rows`, sorts spilling to disk past `memory` bytes.
fn session(partitions: usize, batch_rows: usize, memory: usize) -> Result<SessionContext, StoreError> {
    let mut config = SessionConfig::new().with_batch_size(batch_rows).with_target_partitions(partitions);
    // Strings as the store writes them (`Utf8`), not as views.
    config.options_mut().execution.parquet.schema_force_view_types = false;
    // Shared fairly among the operators that can spill, rather than first come, first served.
    let pool = Arc::new(datafusion::execution::memory_pool::FairSpillPool::new(memory));
    let env = RuntimeEnvBuilder::new().with_memory_pool(pool).build_arc().map_err(query)?;
    Ok(SessionContext::new_with_config_rt(config, env))
}

fn query(e: impl std::fmt::Display) -> StoreError {
    StoreError::Format(format!("query engine: {e}"))
}

impl Store {
    /// Opens the store in `dir`: every `.parquet` file under it, as the table `spans`.
    ///
    /// # Errors
    /// A directory without Parquet files; files whose schema is not the store's.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let ctx = local_session(dir)?;
        Store::register(dir, runtime(dir)?, ctx, None)
    }

    /// Opens the store in `dir` to run its plans on the Ballista cluster whose scheduler is at
    /// `scheduler` (`df://host:port`) rather than in this process: the cluster's executors
    /// read the files (at the same path, so on a shared file system), and the views that
    /// stream traces read them from the cluster in trace order. Every view gives what it gives
    /// in this process.
    ///
    /// # Errors
    /// As [`open`](Self::open); a scheduler address that is not a URL.
    #[cfg(feature = "distributed")]
    pub fn open_on(dir: &Path, scheduler: &str) -> Result<Self, StoreError> {
        use ballista::prelude::SessionContextExt;
        let local = local_session(dir)?;
        // Ballista's client talks to the scheduler and the executors from tasks of its own.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|source| StoreError::Io { path: dir.to_owned(), source })?;
        let ctx = runtime
            .block_on(SessionContext::remote_with_state(scheduler, local.state()))
            .map_err(|e| StoreError::Format(format!("the Ballista scheduler {scheduler:?}: {e}")))?;
        Store::register(dir, runtime, ctx, Some(scheduler.to_owned()))
    }

    /// The store in `dir` as the table `spans` of `ctx`.
    fn register(
        dir: &Path,
        runtime: tokio::runtime::Runtime,
        ctx: SessionContext,
        scheduler: Option<String>,
    ) -> Result<Self, StoreError> {
        let sorted = vec![trace_order()];
        let options = ParquetReadOptions::default().file_extension(".parquet").file_sort_order(sorted);
        let files = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
        let url = format!("{}/", files.display());
        runtime.block_on(ctx.register_parquet("spans", url, options)).map_err(query)?;
        Ok(Store { dir: dir.to_owned(), files, runtime, ctx, scheduler, pass: Default::default() })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What building the request trees repaired or found unusual (orphans, cycles, duplicate
    /// spans, …), summed over the traces of the latest pass over the store's requests (each
    /// view's last): what [`Causality::warnings`](crate::Causality::warnings) says of the same
    /// spans in memory.
    pub fn repairs(&self) -> crate::causality::CausalityWarnings {
        self.pass.borrow().repairs
    }

    /// The clock skew between nodes that the latest pass over the store's requests shows, as
    /// [`Causality::clock_skew`](crate::Causality::clock_skew) estimates it from the same spans
    /// in memory (in a store written before its `boot_id` and `host_id` columns, between nodes
    /// of one machine too).
    pub fn clock_skew(&self) -> Vec<crate::ClockSkew> {
        self.pass.borrow_mut().skew.estimates()
    }

    /// Hands each request's tree (one per trace) to `f`, with its trace's dataset, in trace
    /// order; the trees' repairs are counted in [`repairs`](Self::repairs) and their
    /// client → server pairs in [`clock_skew`](Self::clock_skew), both anew each pass.
    /// Returns how many trees.
    ///
    /// # Errors
    /// As [`for_each_trace`](Self::for_each_trace).
    pub fn for_each_request(
        &self,
        options: &CausalityOptions,
        f: &mut dyn FnMut(&Dataset, &crate::RequestTree) -> Result<(), StoreError>,
    ) -> Result<usize, StoreError> {
        self.for_each_request_of(None, options, f)
    }

    /// As [`for_each_request`](Self::for_each_request), over the traces in `traces` only when
    /// given (the plan filters them, so the store's statistics skip the rest).
    ///
    /// # Errors
    /// As [`for_each_trace`](Self::for_each_trace).
    pub fn for_each_request_of(
        &self,
        traces: Option<&[TraceId]>,
        options: &CausalityOptions,
        f: &mut dyn FnMut(&Dataset, &crate::RequestTree) -> Result<(), StoreError>,
    ) -> Result<usize, StoreError> {
        let mut trees = 0;
        self.for_each_trace_tree(traces, options, &mut |data, causality| {
            for tree in &causality.traces {
                trees += 1;
                f(data, tree)?;
            }
            Ok(())
        })?;
        Ok(trees)
    }

    /// Hands each trace (of `traces`, when given) to `f` with its request trees, counting what
    /// the trees repaired and their client → server pairs anew.
    fn for_each_trace_tree(
        &self,
        traces: Option<&[TraceId]>,
        options: &CausalityOptions,
        f: &mut dyn FnMut(&Dataset, &crate::Causality) -> Result<(), StoreError>,
    ) -> Result<usize, StoreError> {
        *self.pass.borrow_mut() = Pass::default();
        self.for_each_trace_of(traces, &mut |data| f(&data, &self.trees(&data, options)))
    }

    /// The request trees of `data`, one trace, with what they repaired and their client →
    /// server pairs counted in the pass.
    fn trees(&self, data: &Dataset, options: &CausalityOptions) -> crate::Causality {
        let mut pass = self.pass.borrow_mut();
        let causality = build_causality_into(data, options, &mut pass.skew);
        pass.repairs.add(&causality.warnings);
        causality
    }

    fn spans(&self) -> Result<DataFrame, StoreError> {
        self.runtime.block_on(self.ctx.table("spans")).map_err(query)
    }

    /// Runs `plan`, handing each record batch to `f` as it comes. The plan runs on the
    /// runtime's threads, up to [`BATCHES_AHEAD`] batches ahead of `f` on this one: reading
    /// and merging the files takes about as long as what the views do with the rows.
    fn each_batch(
        &self,
        plan: DataFrame,
        f: &mut dyn FnMut(&RecordBatch) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let failed = |e: datafusion::error::DataFusionError| match &self.scheduler {
            Some(url) => StoreError::Format(format!("the Ballista cluster of {url}: {e}")),
            None => query(e),
        };
        let mut stream = self.runtime.block_on(plan.execute_stream()).map_err(failed)?;
        let (batches, mut taken) = tokio::sync::mpsc::channel(BATCHES_AHEAD);
        // Stops at the first error, or when `f` stops taking batches (`taken` dropped).
        let mut running = AbortOnDrop(Some(self.runtime.spawn(async move {
            while let Some(batch) = stream.next().await {
                let failed = batch.is_err();
                if batches.send(batch).await.is_err() || failed {
                    break;
                }
            }
        })));
        while let Some(batch) = taken.blocking_recv() {
            f(&batch.map_err(failed)?)?;
        }
        // The batches end when the plan ends, or when it panicked: a panic is this thread's
        // again, as it was when the plan ran here, rather than a view of part of the store.
        if let Some(task) = running.0.take() {
            if let Err(e) = self.runtime.block_on(task) {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        }
        Ok(())
    }

    /// The frequency profile of every span, as [`frequency_profile`](crate::frequency_profile)
    /// counts it: a DataFusion aggregation by group and bucket of the start time.
    ///
    /// # Errors
    /// A zero bucket or too many cells ([`ProfileError`], as text); a query that fails.
    pub fn frequency_profile(&self, by: GroupBy, bucket_ns: u64) -> Result<FrequencyProfile, StoreError> {
        let mut counter = FrequencyCounter::new(by, bucket_ns).map_err(profile_error)?;
        let bucket_width = i64::try_from(bucket_ns).unwrap_or(i64::MAX);
        // The method is made from its parts here, as `Span::qualified_method` makes it.
        let keys: Vec<&str> = match by {
            GroupBy::Node => vec!["node"],
            GroupBy::Daemon => vec!["daemon"],
            GroupBy::Method => vec!["target", "name", "daemon"],
        };
        let mut group: Vec<_> = keys.iter().map(|k| col(*k)).collect();
        group.push((col("start_unix_ns") / lit(bucket_width)).alias("bucket"));
        let plan = self.spans()?.aggregate(group, vec![count(lit(1)).alias("spans")]).map_err(query)?;
        self.each_batch(plan, &mut |batch| {
            let text = |k: usize| column::<StringArray>(batch, keys[k]);
            let buckets = column::<Int64Array>(batch, "bucket")?;
            let counts = column::<Int64Array>(batch, "spans")?;
            let texts = (0..keys.len()).map(text).collect::<Result<Vec<_>, _>>()?;
            for row in 0..batch.num_rows() {
                let value = |k: usize| texts[k].is_valid(row).then(|| texts[k].value(row));
                let key = match by {
                    GroupBy::Node | GroupBy::Daemon => value(0).unwrap_or_default().to_owned(),
                    GroupBy::Method => {
                        let mut method = String::new();
                        let (daemon, name) = (value(2).unwrap_or_default(), value(1).unwrap_or_default());
                        push_method(&mut method, value(0), Some(daemon), name);
                        method
                    }
                };
                let n = counts.value(row).max(0) as u64;
                counter.add_cell(key, buckets.value(row).max(0) as u64, n);
            }
            Ok(())
        })?;
        counter.finish().map_err(profile_error)
    }

    /// The earliest start and the latest end (or start, for a span that ends before it starts)
    /// of the store's spans; `None` when it holds none.
    ///
    /// # Errors
    /// A query that fails.
    pub fn time_span(&self) -> Result<Option<(u64, u64)>, StoreError> {
        Ok(self.extent()?.map(|e| (e.first_start_unix_ns, e.end_unix_ns())))
    }

    /// The earliest start, the latest start and the latest end of the store's spans; `None`
    /// when it holds none.
    ///
    /// # Errors
    /// A query that fails.
    pub fn extent(&self) -> Result<Option<crate::report::Extent>, StoreError> {
        let plan = self
            .spans()?
            .aggregate(
                vec![],
                vec![
                    min(col("start_unix_ns")).alias("first"),
                    max(col("start_unix_ns")).alias("last_start"),
                    max(col("end_unix_ns")).alias("last_end"),
                ],
            )
            .map_err(query)?;
        let mut extent = None;
        self.each_batch(plan, &mut |batch| {
            let (first, last_start, last_end) = (
                column::<Int64Array>(batch, "first")?,
                column::<Int64Array>(batch, "last_start")?,
                column::<Int64Array>(batch, "last_end")?,
            );
            if batch.num_rows() > 0 && first.is_valid(0) {
                extent = Some(crate::report::Extent {
                    first_start_unix_ns: nanos(first, 0)?,
                    last_start_unix_ns: nanos(last_start, 0)?,
                    last_end_unix_ns: nanos(last_end, 0)?,
                });
            }
            Ok(())
        })?;
        Ok(extent)
    }

    /// The report [`build_report`](crate::report::build_report) makes of the same spans, but
    /// for what the store does not keep: the processes are (node, daemon) pairs without pid,
    /// and their loss counters are unknown ([`Summary::loss_counters`](crate::report::Summary)
    /// is false). Aggregations for the phases and anomalies, then one pass over the traces for
    /// the rest; `on_step` is called before each step. `None` for a store without spans.
    ///
    /// # Errors
    /// A query that fails; a span without its times.
    pub fn report(
        &self,
        options: &crate::report::ReportOptions,
        on_step: &mut dyn FnMut(crate::report::ReportStep),
    ) -> Result<Option<crate::report::Report>, StoreError> {
        use crate::report::{ReportBuilder, ReportStep};
        let Some(extent) = self.extent()? else { return Ok(None) };
        let mut report = ReportBuilder::new(options, extent);

        on_step(ReportStep::Profiles);
        on_step(ReportStep::Phases);
        let phases =
            self.phases(GroupBy::Node, report.bucket_ns(), extent, &crate::PhaseOptions::default())?;

        on_step(ReportStep::Anomalies);
        let anomaly_options = report.anomaly_options();
        let anomalies = match anomaly_options.window_ns {
            Some(0) => report.no_anomalies(),
            _ => self.anomalies(&anomaly_options)?,
        };

        on_step(ReportStep::Causality);
        let mut processes = ProcessTally::default();
        let causality_options = CausalityOptions { adjust_skew: options.adjust_skew };
        self.for_each_trace_tree(None, &causality_options, &mut |data, causality| {
            report.add_spans(data);
            report.add_requests(data, &causality.traces);
            processes.add(data, causality.traces.len());
            Ok(())
        })?;
        on_step(ReportStep::CriticalPaths);
        on_step(ReportStep::Dependencies);
        on_step(ReportStep::FlameGraph);
        on_step(ReportStep::Io);
        let parts = processes.parts(extent, self.repairs(), phases, anomalies);
        Ok(Some(report.finish(parts)))
    }

    /// The phase changes of the store's spans grouped `by`, as
    /// [`detect_phases`](crate::detect_phases) finds them: a DataFusion aggregation by group,
    /// method and bucket of the start time, judged by a [`PhaseCounter`](crate::PhaseCounter).
    /// `extent` is the store's. A grid too large gives no phase changes, as in the report.
    ///
    /// # Errors
    /// A query that fails.
    pub fn phases(
        &self,
        by: GroupBy,
        bucket_ns: u64,
        extent: crate::report::Extent,
        options: &crate::PhaseOptions,
    ) -> Result<Vec<crate::PhaseChange>, StoreError> {
        let first = extent.first_start_unix_ns;
        let Ok(mut counter) = crate::PhaseCounter::new(by, bucket_ns, first, extent.last_start_unix_ns)
        else {
            return Ok(Vec::new());
        };
        let bucket_width = i64::try_from(bucket_ns).unwrap_or(i64::MAX);
        let group_column = match by {
            GroupBy::Node => "node",
            GroupBy::Daemon | GroupBy::Method => "daemon",
        };
        let mut group: Vec<_> = ["target", "name", "daemon"].iter().map(|k| col(*k)).collect();
        if group_column != "daemon" {
            group.push(col(group_column));
        }
        group.push((col("start_unix_ns") / lit(bucket_width)).alias("bucket"));
        let plan = self.spans()?.aggregate(group, vec![count(lit(1)).alias("spans")]).map_err(query)?;
        let mut too_large = false;
        let mut method = String::new();
        self.each_batch(plan, &mut |batch| {
            let text = |name| column::<StringArray>(batch, name);
            let (target, name, daemon, key) =
                (text("target")?, text("name")?, text("daemon")?, text(group_column)?);
            let (buckets, counts) =
                (column::<Int64Array>(batch, "bucket")?, column::<Int64Array>(batch, "spans")?);
            for row in 0..batch.num_rows() {
                if too_large {
                    break;
                }
                // As `Span::qualified_method`.
                method.clear();
                let target = target.is_valid(row).then(|| target.value(row));
                push_method(&mut method, target, Some(daemon.value(row)), name.value(row));
                let group = if by == GroupBy::Method { "all" } else { key.value(row) };
                // A start within the bucket: the bucket's own start, or the first span's.
                let start = (buckets.value(row).max(0) as u64).saturating_mul(bucket_ns).max(first);
                let n = counts.value(row).max(0) as u64;
                too_large = counter.add(group, &method, start, n).is_err();
            }
            Ok(())
        })?;
        Ok(if too_large { Vec::new() } else { counter.finish(options) })
    }

    /// Hands each trace of the store to `f`, whole, as a dataset of its own, in trace order;
    /// returns how many. Only the trace at hand is held.
    ///
    /// # Errors
    /// A query that fails, a row that is not a span of the store's schema, or `f`'s error.
    pub fn for_each_trace(
        &self,
        f: &mut dyn FnMut(Dataset) -> Result<(), StoreError>,
    ) -> Result<usize, StoreError> {
        self.for_each_trace_of(None, f)
    }

    /// As [`for_each_trace`](Self::for_each_trace), over the traces in `traces` only when given.
    ///
    /// # Errors
    /// As [`for_each_trace`](Self::for_each_trace).
    pub fn for_each_trace_of(
        &self,
        traces: Option<&[TraceId]>,
        f: &mut dyn FnMut(Dataset) -> Result<(), StoreError>,
    ) -> Result<usize, StoreError> {
        self.each_trace(traces, Columns::All, f)
    }

    /// As [`for_each_trace_of`](Self::for_each_trace_of), each span read from `columns` only.
    fn each_trace(
        &self,
        traces: Option<&[TraceId]>,
        columns: Columns,
        f: &mut dyn FnMut(Dataset) -> Result<(), StoreError>,
    ) -> Result<usize, StoreError> {
        let mut plan = self.spans()?;
        if let Some(traces) = traces {
            let ids = traces.iter().map(|t| lit(t.to_string())).collect();
            plan = plan.filter(col("trace_id").in_list(ids, false)).map_err(query)?;
        }
        if let Columns::Calls = columns {
            let mut read: Vec<Expr> = CALL_COLUMNS.iter().map(|&c| col(c)).collect();
            // A store written before these columns has none.
            let has = |c: &str| plan.schema().has_column_with_unqualified_name(c);
            read.extend(CLOCK_COLUMNS.iter().filter(|c| has(c)).map(|&c| col(c)));
            if may_hold_call_attributes(&self.files) {
                read.extend(CALL_ATTRIBUTES.iter().map(|&key| get_field(col("attributes"), key).alias(key)));
            }
            plan = plan.select(read).map_err(query)?;
        }
        let plan = plan.sort(trace_order()).map_err(query)?;
        let mut trace = Dataset::default();
        // The text of the trace id of `trace`'s spans.
        let mut last_hex = String::new();
        let mut traces = 0;
        let mut flush = |trace: &mut Dataset| {
            if trace.spans.is_empty() {
                return Ok(());
            }
            traces += 1;
            f(std::mem::take(trace))
        };
        self.each_batch(plan, &mut |batch| {
            let rows = Rows::of(batch)?;
            for row in 0..batch.num_rows() {
                let known = trace.spans.last().map(|s| (last_hex.as_str(), s.trace_id));
                let mut span = rows.span(row, known)?;
                // Ids and their lowercase text are one to one.
                if known.map(|(_, id)| id) != Some(span.trace_id) {
                    last_hex.clear();
                    last_hex.push_str(rows.trace_id.value(row));
                }
                if let Some(last) = trace.spans.last().map(|s| s.trace_id).filter(|t| *t != span.trace_id) {
                    // A file declared sorted but not (not written by the export): the engine
                    // trusts the order a lone file declares.
                    if span.trace_id < last {
                        return Err(StoreError::Format(format!(
                            "a file of the store is not sorted by trace id (trace {} after {last}): it was not written by `ringtrace export --format parquet`; export the data again",
                            span.trace_id
                        )));
                    }
                    flush(&mut trace)?;
                }
                // A trace has few processes: found by a look along them. Nodes under one kernel
                // are told by their boot and host ids (clock skew is not estimated between them).
                let clock = rows.clock(row);
                let found = trace.processes.iter().position(|p| {
                    p.node == span.node && p.daemon == span.daemon && p.clock_ids() == clock
                });
                span.process = found.unwrap_or_else(|| {
                    let (node, daemon) = (span.node.clone(), span.daemon.clone());
                    let attributes = crate::store::clock_attributes(clock.0, clock.1);
                    trace.processes.push(Process { node, daemon, attributes, ..Process::default() });
                    trace.processes.len() - 1
                });
                trace.spans.push(span);
            }
            Ok(())
        })?;
        flush(&mut trace)?;
        Ok(traces)
    }

    /// Jaeger UI's trace statistics over every trace of the store, as
    /// [`trace_statistics`](crate::trace_statistics) computes them: each trace's request tree and
    /// self times from the stream of traces.
    ///
    /// # Errors
    /// As [`for_each_trace`](Self::for_each_trace).
    pub fn trace_statistics(
        &self,
        by: StatsGroupBy,
        options: &CausalityOptions,
    ) -> Result<TraceStatistics, StoreError> {
        self.trace_statistics_holding(by, options, HELD_DURATIONS)
    }

    /// As [`trace_statistics`](Self::trace_statistics), holding at most `most` durations for
    /// the exact percentiles. Past them, the durations are counted in a histogram and a second
    /// pass keeps only those in each percentile's bucket
    /// ([`StatisticsBuilder::holding`]): a scan of the spans' names and times, when the trees
    /// kept every span's duration as the store has it (the scan then meets, group by group, the
    /// same spans and summed durations); otherwise the trees again.
    ///
    /// # Errors
    /// As [`for_each_trace`](Self::for_each_trace); a store that changed between the passes.
    pub fn trace_statistics_holding(
        &self,
        by: StatsGroupBy,
        options: &CausalityOptions,
        most: usize,
    ) -> Result<TraceStatistics, StoreError> {
        let mut stats = StatisticsBuilder::holding(by, most);
        self.for_each_request(options, &mut |data, tree| {
            stats.add(data, tree);
            Ok(())
        })?;
        let mut pending = match stats.finish() {
            Finished::Done(statistics) => return Ok(statistics),
            Finished::Pending(pending) => pending,
        };
        let plan = self
            .spans()?
            .select_columns(&["daemon", "name", "start_unix_ns", "end_unix_ns"])
            .map_err(query)?;
        self.each_batch(plan, &mut |batch| {
            let (daemon, name) =
                (column::<StringArray>(batch, "daemon")?, column::<StringArray>(batch, "name")?);
            let (start, end) =
                (column::<Int64Array>(batch, "start_unix_ns")?, column::<Int64Array>(batch, "end_unix_ns")?);
            for row in 0..batch.num_rows() {
                let duration = nanos(end, row)?.saturating_sub(nanos(start, row)?);
                pending.offer(daemon.value(row), name.value(row), duration);
            }
            Ok(())
        })?;
        if !pending.agrees() {
            // The trees repaired a span's duration, or dropped a copy: their own durations.
            pending.clear();
            self.for_each_request(options, &mut |data, tree| {
                pending.offer_tree(data, tree);
                Ok(())
            })?;
        }
        pending.finish().ok_or_else(|| {
            StoreError::Format(
                "the store changed while its statistics were computed: run the view again".into(),
            )
        })
    }

    /// The service and node dependency graphs of every trace of the store, as
    /// [`dependency_graph`](crate::dependency_graph) computes them, from each trace's calls.
    ///
    /// The spans are read from the columns a call needs (ids, node, daemon, kind, status,
    /// times, and the attributes naming a called peer or an I/O call's ends, decoded only when
    /// a file may hold them): a trace whose spans share an id is read again whole, since
    /// whether one is a copy of another takes every column. Past [`REREAD_TRACES`] such
    /// traces, every trace is read again whole.
    ///
    /// # Errors
    /// As [`for_each_trace`](Self::for_each_trace).
    pub fn dependency_graph(&self, options: &CausalityOptions) -> Result<DependencyGraph, StoreError> {
        let add = |graph: &mut DependencyBuilder, data: &Dataset| {
            graph.add(data, &self.trees(data, options).traces);
        };
        let mut graph = DependencyBuilder::default();
        *self.pass.borrow_mut() = Pass::default();
        let (mut whole, mut ids) = (Vec::new(), Vec::new());
        self.each_trace(None, Columns::Calls, &mut |data| {
            if shares_span_ids(&data, &mut ids) {
                whole.push(data.spans[0].trace_id);
            } else {
                add(&mut graph, &data);
            }
            Ok(())
        })?;
        let again = if whole.len() > REREAD_TRACES {
            graph = DependencyBuilder::default();
            *self.pass.borrow_mut() = Pass::default();
            None
        } else if whole.is_empty() {
            return Ok(graph.finish());
        } else {
            Some(whole.as_slice())
        };
        self.each_trace(again, Columns::All, &mut |data| {
            add(&mut graph, &data);
            Ok(())
        })?;
        Ok(graph.finish())
    }

    /// The flame graph of the store's requests within `scope`, as
    /// [`flame_graph`](crate::flame_graph) draws it: each trace's request tree added as the
    /// traces stream. Selecting the slowest requests (or all but them) takes a first pass for
    /// every request's latency.
    ///
    /// # Errors
    /// As [`for_each_trace`](Self::for_each_trace).
    pub fn flame_graph(
        &self,
        scope: &FlameScope,
        options: &CausalityOptions,
    ) -> Result<FlameGraph, StoreError> {
        let selected: Option<(HashSet<TraceId>, bool)> = match scope.requests {
            RequestSelection::All => None,
            RequestSelection::Slowest(p) => Some((self.slowest(p, options)?, true)),
            RequestSelection::AllButSlowest(p) => Some((self.slowest(p, options)?, false)),
        };
        let mut graph = FlameBuilder::new(scope.clone());
        self.for_each_request(options, &mut |data, tree| {
            if selected.as_ref().is_none_or(|(set, wanted)| set.contains(&tree.trace_id) == *wanted) {
                graph.add(data, tree);
            }
            Ok(())
        })?;
        Ok(graph.finish())
    }

    /// The bottleneck ranking of the store's requests (all, or the slowest `slowest_percent` %),
    /// as [`bottlenecks`](fn@crate::bottlenecks) ranks them: each request's critical path from the
    /// stream of traces; selecting the slowest takes a first pass for their latencies.
    ///
    /// # Errors
    /// As [`for_each_trace`](Self::for_each_trace).
    pub fn bottlenecks(
        &self,
        slowest_percent: Option<f64>,
        options: &CausalityOptions,
    ) -> Result<crate::bottlenecks::Bottlenecks, StoreError> {
        let selected = slowest_percent.map(|p| self.slowest(p, options)).transpose()?;
        let mut ranking = crate::bottlenecks::BottlenecksBuilder::default();
        // One tree a trace: each trace's calls are added once.
        let requests = self.for_each_request(options, &mut |data, tree| {
            ranking.add_services(&crate::io::io_calls(data));
            if selected.as_ref().is_none_or(|set| set.contains(&tree.trace_id)) {
                ranking.add(data, tree);
            }
            Ok(())
        })?;
        Ok(ranking.finish(requests))
    }

    /// Where each request's time goes, and over all of them, as
    /// [`breakdown`](fn@crate::breakdown) charges it: each request's tree from the stream of
    /// traces. The result holds every request's rows.
    ///
    /// # Errors
    /// As [`for_each_trace`](Self::for_each_trace).
    pub fn breakdown(&self, options: &CausalityOptions) -> Result<crate::breakdown::Breakdown, StoreError> {
        let mut requests = Vec::new();
        let mut all = self.breakdown_each(options, &mut |request| {
            requests.push(request);
            Ok(())
        })?;
        all.requests = requests;
        Ok(all)
    }

    /// [`breakdown`](Self::breakdown), each request's rows handed to `f` as its trace streams
    /// by rather than kept: the result holds the totals, and no request.
    ///
    /// # Errors
    /// As [`for_each_trace`](Self::for_each_trace), or `f`'s.
    pub fn breakdown_each(
        &self,
        options: &CausalityOptions,
        f: &mut dyn FnMut(crate::breakdown::RequestBreakdown) -> Result<(), StoreError>,
    ) -> Result<crate::breakdown::Breakdown, StoreError> {
        let mut all = crate::breakdown::BreakdownBuilder::default();
        self.for_each_request(options, &mut |data, tree| f(all.add_totals(data, tree)))?;
        Ok(all.finish())
    }

    /// Every (node, daemon) compared with its peers, as [`anomalies`](crate::anomalies)
    /// compares them: the six columns it needs stream into an
    /// [`AnomalyBuilder`](crate::AnomalyBuilder), which holds a 32-byte record a span.
    ///
    /// # Errors
    /// A zero window (as text); a query that fails; a span without its times.
    pub fn anomalies(&self, options: &crate::AnomalyOptions) -> Result<crate::Anomalies, StoreError> {
        let anomaly = |e: crate::AnomalyError| StoreError::Format(e.to_string());
        // 1. Every (daemon, node, method)'s spans and earliest start.
        let keys = ["daemon", "node", "target", "name"];
        let plan = self
            .spans()?
            .aggregate(
                keys.iter().map(|k| col(*k)).collect(),
                vec![count(lit(1)).alias("spans"), min(col("start_unix_ns")).alias("first")],
            )
            .map_err(query)?;
        let mut groups = Vec::new();
        self.each_batch(plan, &mut |batch| {
            let each = MethodColumns::of(batch)?;
            let (spans, first) =
                (column::<Int64Array>(batch, "spans")?, column::<Int64Array>(batch, "first")?);
            for row in 0..batch.num_rows() {
                let mut method = String::new();
                let (daemon, node) = each.row(row, &mut method);
                groups.push((
                    daemon.to_owned(),
                    node.to_owned(),
                    method,
                    spans.value(row).max(0) as u64,
                    nanos(first, row)?,
                ));
            }
            Ok(())
        })?;
        let mut streamed = crate::StreamedAnomalies::new(groups, options).map_err(anomaly)?;
        let paired: Vec<_> = streamed.paired_daemons().map(|d| lit(d.to_owned())).collect();
        if paired.is_empty() {
            return streamed.finish().map_err(anomaly);
        }
        // 2. The paired daemons' spans by daemon, then start: a window at a time.
        let columns = ["daemon", "node", "target", "name", "start_unix_ns", "end_unix_ns"];
        let spans = self.spans()?.select_columns(&columns).map_err(query)?;
        let spans = spans.filter(col("daemon").in_list(paired, false)).map_err(query)?;
        let order = ["daemon", "start_unix_ns"].into_iter().map(|c| col(c).sort(true, false)).collect();
        let mut in_order = true;
        self.each_method_span(
            spans.clone().sort(order).map_err(query)?,
            &mut |daemon, node, method, start, d| {
                in_order &= streamed.add_in_order(daemon, node, method, start, d);
            },
        )?;
        if !in_order {
            return Err(anomaly(crate::AnomalyError::InputChanged));
        }
        // 3. The durations of the methods whose latency the reasons quote.
        if streamed.end_windows() {
            self.each_method_span(spans, &mut |daemon, node, method, _, d| {
                streamed.add_duration(daemon, node, method, d);
            })?;
        }
        streamed.finish().map_err(anomaly)
    }

    /// Runs `plan`, whose rows have the columns daemon, node, target, name, start and end,
    /// handing `f` each row's daemon, node, method (as [`Span::method`] writes it), start and
    /// duration.
    fn each_method_span(
        &self,
        plan: DataFrame,
        f: &mut dyn FnMut(&str, &str, &str, u64, u64),
    ) -> Result<(), StoreError> {
        let mut method = String::new();
        self.each_batch(plan, &mut |batch| {
            let each = MethodColumns::of(batch)?;
            let (start, end) =
                (column::<Int64Array>(batch, "start_unix_ns")?, column::<Int64Array>(batch, "end_unix_ns")?);
            for row in 0..batch.num_rows() {
                let (daemon, node) = each.row(row, &mut method);
                let (start, end) = (nanos(start, row)?, nanos(end, row)?);
                f(daemon, node, &method, start, end.saturating_sub(start));
            }
            Ok(())
        })
    }

    /// Every request's summary line, what building the trees repaired and the clock skew, as
    /// `ringtrace requests` prints them from the same spans in memory.
    ///
    /// # Errors
    /// As [`for_each_trace`](Self::for_each_trace).
    pub fn requests(
        &self,
        options: &CausalityOptions,
    ) -> Result<crate::causality_output::Requests, StoreError> {
        let mut lines = Vec::new();
        self.for_each_request(options, &mut |data, tree| {
            lines.push(crate::causality_output::RequestLine::of(data, tree));
            Ok(())
        })?;
        Ok(crate::causality_output::Requests {
            lines,
            warnings: self.repairs(),
            clock_skew: self.clock_skew(),
        })
    }

    /// The traces of the slowest `percent` % of requests, by
    /// [`Causality::slowest`](crate::Causality::slowest)'s rule.
    fn slowest(&self, percent: f64, options: &CausalityOptions) -> Result<HashSet<TraceId>, StoreError> {
        let mut latencies: Vec<(TraceId, u64)> = Vec::new();
        self.for_each_request(options, &mut |_, tree| {
            latencies.push((tree.trace_id, tree.duration_ns()));
            Ok(())
        })?;
        Ok(crate::causality::slowest(&latencies, percent).into_iter().map(|i| latencies[i].0).collect())
    }
}

/// What the report says of the store's processes, (node, daemon) pairs, tallied as the traces
/// stream: their spans, and their I/O calls in one list.
#[derive(Default)]
struct ProcessTally {
    /// Node → daemon → spans.
    spans: std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>>,
    calls: Vec<crate::io::IoCall>,
    traces: u64,
    distinct_spans: u64,
}

impl ProcessTally {
    fn add(&mut self, data: &Dataset, trees: usize) {
        self.traces += trees as u64;
        let base = self.distinct_spans as usize;
        for (_, span) in data.distinct_spans() {
            self.distinct_spans += 1;
            if !self.spans.contains_key(&span.node) {
                self.spans.insert(span.node.clone(), Default::default());
            }
            let daemons = self.spans.get_mut(&span.node).expect("inserted above");
            match daemons.get_mut(&span.daemon) {
                Some(n) => *n += 1,
                None => {
                    daemons.insert(span.daemon.clone(), 1);
                }
            }
        }
        // Span indices made unique across traces; processes renumbered at the end.
        self.calls.extend(crate::io::io_calls(data).into_iter().map(|mut call| {
            call.span += base;
            call
        }));
    }

    /// The report's parts that come from the processes, with those given.
    fn parts(
        mut self,
        extent: crate::report::Extent,
        warnings: crate::causality::CausalityWarnings,
        phases: Vec<crate::PhaseChange>,
        anomalies: crate::Anomalies,
    ) -> crate::report::ReportParts {
        let pairs: Vec<(&str, &str)> = self
            .spans
            .iter()
            .flat_map(|(node, daemons)| daemons.keys().map(move |d| (node.as_str(), d.as_str())))
            .collect();
        let index: std::collections::HashMap<(&str, &str), usize> =
            pairs.iter().enumerate().map(|(i, &pair)| (pair, i)).collect();
        let mut calls = std::mem::take(&mut self.calls);
        for call in &mut calls {
            call.process = index[&(call.node.as_str(), call.daemon.as_str())];
        }
        let io = crate::report::io_section_of(&calls);
        let summary = crate::report::Summary {
            spans: self.distinct_spans,
            traces: self.traces,
            processes: pairs.len() as u64,
            nodes: self.spans.len() as u64,
            daemons: pairs.iter().map(|(_, d)| d).collect::<HashSet<_>>().len() as u64,
            start_unix_ns: extent.first_start_unix_ns,
            end_unix_ns: extent.end_unix_ns(),
            loss_counters: false,
            dropped_spans: 0,
            dropped_events: 0,
            unclosed_spans: 0,
            warnings,
        };
        let volume = pairs
            .iter()
            .map(|&(node, daemon)| crate::report::ProcessVolume {
                node: node.to_owned(),
                daemon: daemon.to_owned(),
                pid: None,
                spans: self.spans[node][daemon],
                dropped_spans: 0,
                dropped_events: 0,
                unclosed_spans: 0,
            })
            .collect();
        crate::report::ReportParts { summary, phases, anomalies, volume, io }
    }
}

fn profile_error(e: ProfileError) -> StoreError {
    StoreError::Format(e.to_string())
}

fn bad_row(what: impl std::fmt::Display) -> StoreError {
    StoreError::Format(format!("not a span of the store's schema: {what}"))
}

/// `array` (`what`, named in errors: `column x`, `field y`) as an `A`.
fn downcast<'b, A: Array + 'static>(array: Option<&'b ArrayRef>, what: &str) -> Result<&'b A, StoreError> {
    let array = array.ok_or_else(|| bad_row(format!("no {what}")))?;
    array.as_any().downcast_ref::<A>().ok_or_else(|| bad_row(format!("{what} is {}", array.data_type())))
}

/// Column `name` of `batch` as an `A`.
fn column<'b, A: Array + 'static>(batch: &'b RecordBatch, name: &str) -> Result<&'b A, StoreError> {
    downcast(batch.column_by_name(name), &format!("column {name}"))
}

/// A start or end time of the store, which is never null nor negative.
fn nanos(a: &Int64Array, row: usize) -> Result<u64, StoreError> {
    if a.is_null(row) {
        return Err(bad_row("a span without its start or end time"));
    }
    u64::try_from(a.value(row)).map_err(|_| bad_row("a negative time"))
}

/// The daemon, node and method (as [`Span::method`](crate::Span::method) writes it) of a
/// batch's rows.
struct MethodColumns<'b> {
    daemon: &'b StringArray,
    node: &'b StringArray,
    target: &'b StringArray,
    name: &'b StringArray,
}

impl<'b> MethodColumns<'b> {
    fn of(batch: &'b RecordBatch) -> Result<Self, StoreError> {
        let text = |name| column::<StringArray>(batch, name);
        Ok(MethodColumns {
            daemon: text("daemon")?,
            node: text("node")?,
            target: text("target")?,
            name: text("name")?,
        })
    }

    /// The daemon and node of `row`, its method written into `method`.
    fn row(&self, row: usize, method: &mut String) -> (&'b str, &'b str) {
        method.clear();
        let target = self.target.is_valid(row).then(|| self.target.value(row));
        push_method(method, target, None, self.name.value(row));
        (self.daemon.value(row), self.node.value(row))
    }
}

/// A record batch's columns, as the store writes them: every column, or those a pass that
/// needs less of each span reads ([`Columns`]); a column left out reads as empty or none.
struct Rows<'b> {
    trace_id: &'b StringArray,
    span_id: &'b StringArray,
    parent_span_id: &'b StringArray,
    node: &'b StringArray,
    daemon: &'b StringArray,
    kind: &'b StringArray,
    status: &'b StringArray,
    start: &'b Int64Array,
    end: &'b Int64Array,
    boot_id: Option<&'b StringArray>,
    host_id: Option<&'b StringArray>,
    name: Option<&'b StringArray>,
    status_message: Option<&'b StringArray>,
    request_id: Option<&'b StringArray>,
    target: Option<&'b StringArray>,
    location: Option<&'b StringArray>,
    attributes: Option<Maps<'b>>,
    events: Option<Events<'b>>,
    links: Option<Links<'b>>,
    /// Attributes read one key a column (named by the key), when `attributes` is left out.
    keyed: Vec<(&'static str, &'b StringArray)>,
}

impl<'b> Rows<'b> {
    fn of(batch: &'b RecordBatch) -> Result<Self, StoreError> {
        let s = |name| column::<StringArray>(batch, name);
        let present = |name| batch.column_by_name(name).is_some();
        let maybe = |name| present(name).then(|| s(name)).transpose();
        let keyed = CALL_ATTRIBUTES
            .iter()
            .filter(|key| present(key))
            .map(|&key| Ok((key, s(key)?)))
            .collect::<Result<_, StoreError>>()?;
        Ok(Rows {
            trace_id: s("trace_id")?,
            span_id: s("span_id")?,
            parent_span_id: s("parent_span_id")?,
            node: s("node")?,
            daemon: s("daemon")?,
            kind: s("kind")?,
            status: s("status")?,
            start: column::<Int64Array>(batch, "start_unix_ns")?,
            end: column::<Int64Array>(batch, "end_unix_ns")?,
            boot_id: maybe("boot_id")?,
            host_id: maybe("host_id")?,
            name: maybe("name")?,
            status_message: maybe("status_message")?,
            request_id: maybe("request_id")?,
            target: maybe("target")?,
            location: maybe("location")?,
            attributes: present("attributes")
                .then(|| Maps::of(column::<MapArray>(batch, "attributes")?))
                .transpose()?,
            events: present("events")
                .then(|| Events::of(column::<ListArray>(batch, "events")?))
                .transpose()?,
            links: present("links").then(|| Links::of(column::<ListArray>(batch, "links")?)).transpose()?,
            keyed,
        })
    }

    /// The boot id and host id of `row`'s process (none in a store written before they were).
    fn clock(&self, row: usize) -> (Option<&'b str>, Option<&'b str>) {
        let text = |a: Option<&'b StringArray>| a.filter(|a| a.is_valid(row)).map(|a| a.value(row));
        (text(self.boot_id), text(self.host_id))
    }

    /// Row `row`'s span; `known`: a trace id already parsed from its text, taken again when
    /// the row's is the same (a trace's rows follow one another).
    fn span(&self, row: usize, known: Option<(&str, TraceId)>) -> Result<Span, StoreError> {
        let maybe = |a: Option<&StringArray>| a.filter(|a| a.is_valid(row)).map(|a| a.value(row).to_owned());
        let trace_hex = self.trace_id.value(row);
        let trace_id = match known {
            Some((hex, id)) if hex == trace_hex => id,
            _ => TraceId::from_hex(trace_hex).map_err(|e| bad_row(format!("trace_id: {e}")))?,
        };
        let span_id =
            SpanId::from_hex(self.span_id.value(row)).map_err(|e| bad_row(format!("span_id: {e}")))?;
        let parent_span_id = if self.parent_span_id.is_valid(row) {
            Some(
                SpanId::from_hex(self.parent_span_id.value(row))
                    .map_err(|e| bad_row(format!("parent_span_id: {e}")))?,
            )
        } else {
            None
        };
        let kind = match self.kind.value(row) {
            "internal" => SpanKind::Internal,
            "server" => SpanKind::Server,
            "client" => SpanKind::Client,
            "producer" => SpanKind::Producer,
            "consumer" => SpanKind::Consumer,
            _ => SpanKind::Unspecified,
        };
        let status = match self.status.value(row) {
            "ok" => Status::Ok,
            "error" => Status::Error { message: maybe(self.status_message).unwrap_or_default() },
            _ => Status::Unset,
        };
        let attributes = match &self.attributes {
            Some(maps) => maps.attributes(row),
            None => self
                .keyed
                .iter()
                .filter(|(_, values)| values.is_valid(row))
                .map(|(key, values)| ((*key).to_owned(), Value::Str(values.value(row).to_owned())))
                .collect(),
        };
        let nanos = |a: &Int64Array| nanos(a, row);
        Ok(Span {
            trace_id,
            span_id,
            parent_span_id,
            name: self.name.map(|a| a.value(row).to_owned()).unwrap_or_default(),
            target: maybe(self.target),
            node: self.node.value(row).to_owned(),
            daemon: self.daemon.value(row).to_owned(),
            kind,
            status,
            start_unix_ns: nanos(self.start)?,
            end_unix_ns: nanos(self.end)?,
            request_id: maybe(self.request_id),
            location: maybe(self.location),
            attributes,
            events: self.events.as_ref().map(|e| e.of_row(row)).transpose()?.unwrap_or_default(),
            links: self.links.as_ref().map(|l| l.of_row(row)).transpose()?.unwrap_or_default(),
            process: 0,
        })
    }
}

/// Stops a task of the runtime when dropped: a plan whose batches are no longer taken.
struct AbortOnDrop(Option<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}

/// Whether a span of the store in `dir` may hold an attribute [`Columns::Calls`] reads: a
/// Parquet file anywhere under `dir` lists one among its attribute keys
/// ([`ATTRIBUTE_KEYS`](crate::store::ATTRIBUTE_KEYS)), or lists none (a file of an older
/// export, or of many keys), or cannot be told (a symbolic link, a file whose footer does not
/// read). Only then do the calls' plans decode the `attributes` column.
fn may_hold_call_attributes(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return true };
    entries.into_iter().any(|entry| {
        let Ok(entry) = entry else { return true };
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => may_hold_call_attributes(&path),
            Ok(t) if t.is_file() => {
                // As DataFusion takes files: by the end of the name (`.parquet` alone too).
                entry.file_name().to_string_lossy().ends_with(".parquet")
                    && listed_keys(&path)
                        .is_none_or(|keys| keys.iter().any(|k| CALL_ATTRIBUTES.contains(&k.as_str())))
            }
            _ => true,
        }
    })
}

/// The attribute keys the Parquet file at `path` lists in its metadata, if it does and
/// ringtrace wrote it (another writer may carry a list over from the file it rewrote).
fn listed_keys(path: &Path) -> Option<Vec<String>> {
    let file = std::fs::File::open(path).ok()?;
    let footer = parquet::file::metadata::ParquetMetaDataReader::new().parse_and_finish(&file).ok()?;
    footer.file_metadata().created_by().filter(|by| by.starts_with("ringtrace "))?;
    let entries = footer.file_metadata().key_value_metadata()?;
    let list = entries.iter().find(|kv| kv.key == crate::store::ATTRIBUTE_KEYS)?.value.as_deref()?;
    serde_json::from_str(list).ok()
}

/// Whether two spans of `data` share an id (`ids`: room to sort them in).
fn shares_span_ids(data: &Dataset, ids: &mut Vec<SpanId>) -> bool {
    ids.clear();
    ids.extend(data.spans.iter().map(|s| s.span_id));
    ids.sort_unstable();
    ids.windows(2).any(|w| w[0] == w[1])
}

/// A column of `map<string, string>`: each row's entries, read by offset (no array is sliced
/// per row).
struct Maps<'b> {
    offsets: &'b [i32],
    keys: &'b StringArray,
    values: &'b StringArray,
}

impl<'b> Maps<'b> {
    fn of(map: &'b MapArray) -> Result<Self, StoreError> {
        let text = |a: &'b ArrayRef| {
            a.as_any().downcast_ref::<StringArray>().ok_or_else(|| bad_row("a map of other than text"))
        };
        Ok(Maps { offsets: map.value_offsets(), keys: text(map.keys())?, values: text(map.values())? })
    }

    /// Row `row`'s entries, as attributes.
    /// A null value (which the store's writer never writes) is no attribute, as an engine's
    /// `attributes['key']` reads it: the same whether the map is read whole or a key at a time
    /// ([`Columns::Calls`]).
    fn attributes(&self, row: usize) -> Vec<(String, Value)> {
        let (from, to) = (self.offsets[row] as usize, self.offsets[row + 1] as usize);
        (from..to)
            .filter(|&i| self.values.is_valid(i))
            .map(|i| (self.keys.value(i).to_owned(), Value::Str(self.values.value(i).to_owned())))
            .collect()
    }
}

/// The rows of a list of structs: the child rows of row `row`.
fn list_rows(list: &ListArray, row: usize) -> std::ops::Range<usize> {
    let offsets = list.value_offsets();
    offsets[row] as usize..offsets[row + 1] as usize
}

/// Field `name` of the structs `s` as an `A`.
fn field<'a, A: Array + 'static>(s: &'a StructArray, name: &str) -> Result<&'a A, StoreError> {
    downcast(s.column_by_name(name), &format!("field {name}"))
}

/// The `events` column: every row's events.
struct Events<'b> {
    list: &'b ListArray,
    time: &'b Int64Array,
    name: &'b StringArray,
    attributes: Maps<'b>,
}

impl<'b> Events<'b> {
    fn of(list: &'b ListArray) -> Result<Self, StoreError> {
        let events = list.values().as_struct_opt().ok_or_else(|| bad_row("events are not structs"))?;
        Ok(Events {
            list,
            time: field(events, "time_unix_ns")?,
            name: field(events, "name")?,
            attributes: Maps::of(field(events, "attributes")?)?,
        })
    }

    fn of_row(&self, row: usize) -> Result<Vec<SpanEvent>, StoreError> {
        list_rows(self.list, row)
            .map(|i| {
                Ok(SpanEvent {
                    name: self.name.value(i).to_owned(),
                    time_unix_ns: u64::try_from(self.time.value(i))
                        .map_err(|_| bad_row("a negative event time"))?,
                    attributes: self.attributes.attributes(i),
                })
            })
            .collect()
    }
}

/// The `links` column: every row's links.
struct Links<'b> {
    list: &'b ListArray,
    trace: &'b StringArray,
    span: &'b StringArray,
    attributes: Maps<'b>,
}

impl<'b> Links<'b> {
    fn of(list: &'b ListArray) -> Result<Self, StoreError> {
        let links = list.values().as_struct_opt().ok_or_else(|| bad_row("links are not structs"))?;
        Ok(Links {
            list,
            trace: field(links, "trace_id")?,
            span: field(links, "span_id")?,
            attributes: Maps::of(field(links, "attributes")?)?,
        })
    }

    fn of_row(&self, row: usize) -> Result<Vec<SpanLink>, StoreError> {
        list_rows(self.list, row)
            .map(|i| {
                Ok(SpanLink {
                    trace_id: TraceId::from_hex(self.trace.value(i))
                        .map_err(|e| bad_row(format!("a link's trace_id: {e}")))?,
                    span_id: SpanId::from_hex(self.span.value(i))
                        .map_err(|e| bad_row(format!("a link's span_id: {e}")))?,
                    attributes: self.attributes.attributes(i),
                })
            })
            .collect()
    }
}

/// Spans buffered before they are spilled, over all partitions.
pub const SPILL_SPANS: usize = 64 * 1024;

/// Memory the export's sorts may hold before they spill to disk: less than the views'
/// [`MEMORY_LIMIT`], as the export also holds a row group being written and its reads' buffers.
pub const EXPORT_SORT_MEMORY: usize = 128 << 20;

/// Writes a Parquet store from spans handed over in batches, in bounded memory, as
/// [`write_dir`](crate::store::write_dir) writes one from a whole dataset — the same files, the
/// same rows in the same order, a copy of a span once.
///
/// Spans are buffered by partition (day, node, daemon); past [`SPILL_SPANS`] the buffers are
/// spilled as Parquet files into a directory of the export's own in the system's temporary
/// directory (`$TMPDIR/ringtrace-export-PID-N`; the store's directory is not touched before
/// [`finish`](Self::finish)). [`finish`](Self::finish) then has DataFusion sort each partition's spills
/// by trace, start and span id (spilling to disk past [`EXPORT_SORT_MEMORY`]) and writes the sorted
/// rows out, dropping copies as they pass. Held at most: the buffers, DataFusion's sort, and a
/// row group being written. The spill directory is removed when the export ends, written or not.
pub struct StoreExport {
    dir: PathBuf,
    spill: PathBuf,
    buffers: std::collections::BTreeMap<(String, String, String), Vec<(Span, crate::store::ClockIds)>>,
    buffered: usize,
    /// Spill files written, per partition.
    spills: std::collections::BTreeMap<(String, String, String), Vec<PathBuf>>,
    spill_spans: usize,
    file_rows: usize,
    /// Spans added so far: the next one's place in the input.
    ordinal: i64,
}

impl std::fmt::Debug for StoreExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreExport").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl StoreExport {
    /// An export into `dir` (made when the export finishes, if missing).
    ///
    /// # Errors
    /// The spill directory cannot be made.
    pub fn new(dir: &Path) -> Result<Self, StoreError> {
        Self::with_limits(dir, SPILL_SPANS, crate::store::FILE_ROWS)
    }

    /// [`new`](Self::new) spilling past `spill_spans` spans and with files of at most
    /// `file_rows` rows: for tests that spill and split with few spans.
    #[doc(hidden)]
    pub fn with_limits(dir: &Path, spill_spans: usize, file_rows: usize) -> Result<Self, StoreError> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let spill = std::env::temp_dir().join(format!("ringtrace-export-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&spill).map_err(|source| StoreError::Io { path: spill.clone(), source })?;
        Ok(StoreExport {
            dir: dir.to_owned(),
            spill,
            buffers: Default::default(),
            buffered: 0,
            spills: Default::default(),
            spill_spans: spill_spans.max(1),
            file_rows,
            ordinal: 0,
        })
    }

    /// Adds `spans`, of `process` (whose boot id and host id they are written with).
    ///
    /// # Errors
    /// A spill file cannot be written.
    pub fn add(&mut self, spans: Vec<Span>, process: &Process) -> Result<(), StoreError> {
        let clock = crate::store::ClockIds::of(process);
        for span in spans {
            self.buffers.entry(crate::store::partition_of(&span)).or_default().push((span, clock.clone()));
            self.buffered += 1;
        }
        if self.buffered >= self.spill_spans {
            self.spill_buffers()?;
        }
        Ok(())
    }

    fn spill_buffers(&mut self) -> Result<(), StoreError> {
        for (key, spans) in std::mem::take(&mut self.buffers) {
            let path = self.spill.join(format!("{}.parquet", self.spilled_files()));
            let refs: Vec<&Span> = spans.iter().map(|(s, _)| s).collect();
            let clocks: Vec<&crate::store::ClockIds> = spans.iter().map(|(_, c)| c).collect();
            let file = std::fs::File::create(&path)
                .map_err(|source| StoreError::Io { path: path.clone(), source })?;
            // Beside the store's columns: the order the spans came in (ties in the sort keep
            // it, as the whole export's stable sort does) and each span's content hash, taken
            // before attribute values become text (so that `1` and `"1"` stay two spans).
            let batch = crate::store::batch(&refs, &clocks)?;
            let first = self.ordinal;
            self.ordinal += spans.len() as i64;
            let ordinals: ArrayRef = Arc::new(Int64Array::from_iter_values(first..self.ordinal));
            let hashes: ArrayRef =
                Arc::new(Int64Array::from_iter_values(spans.iter().map(|(s, _)| s.content_hash() as i64)));
            let mut fields: Vec<_> = batch.schema().fields().iter().cloned().collect();
            fields.push(Arc::new(arrow_schema::Field::new(ORDINAL, arrow_schema::DataType::Int64, false)));
            fields.push(Arc::new(arrow_schema::Field::new(
                CONTENT_HASH,
                arrow_schema::DataType::Int64,
                false,
            )));
            let mut columns = batch.columns().to_vec();
            columns.extend([ordinals, hashes]);
            let batch = RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), columns)
                .map_err(|e| StoreError::Format(e.to_string()))?;
            let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None)?;
            writer.write(&batch)?;
            writer.close()?;
            self.spills.entry(key).or_default().push(path);
        }
        self.buffered = 0;
        Ok(())
    }

    fn spilled_files(&self) -> usize {
        self.spills.values().map(Vec::len).sum()
    }

    /// Writes the store: each partition's spans sorted, a copy of a span once.
    ///
    /// # Errors
    /// A file that cannot be read or written, or a query that fails.
    pub fn finish(mut self) -> Result<crate::store::Written, StoreError> {
        self.spill_buffers()?;
        let runtime = runtime(&self.dir)?;
        // One sort at a time, with all of the memory.
        let ctx = session(1, BATCH_ROWS, EXPORT_SORT_MEMORY)?;
        let mut written = crate::store::Written::default();
        for ((day, node, daemon), files) in std::mem::take(&mut self.spills) {
            let paths: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
            let mut order = trace_order();
            order.push(col(ORDINAL).sort(true, false));
            let plan = runtime
                .block_on(ctx.read_parquet(paths, ParquetReadOptions::default()))
                .and_then(|df| df.sort(order))
                .map_err(query)?;
            let mut out =
                crate::store::PartitionFiles::open(&self.dir, &day, &node, &daemon, self.file_rows)?;
            // Spans with their content hashes and clocks, handed to the writer a batch at a time.
            let mut chunk: Vec<(Span, i64, crate::store::ClockIds)> = Vec::with_capacity(BATCH_ROWS);
            let mut last_clock: Option<crate::store::ClockIds> = None;
            let write = |chunk: &mut Vec<(Span, i64, crate::store::ClockIds)>,
                         out: &mut crate::store::PartitionFiles,
                         written: &mut _| {
                let spans: Vec<&Span> = chunk.iter().map(|(s, _, _)| s).collect();
                let clocks: Vec<&crate::store::ClockIds> = chunk.iter().map(|(_, _, c)| c).collect();
                out.write(&spans, &clocks, written)?;
                chunk.clear();
                Ok::<_, StoreError>(())
            };
            let mut stream = runtime.block_on(plan.execute_stream()).map_err(query)?;
            while let Some(batch) = runtime.block_on(stream.next()) {
                let batch = batch.map_err(query)?;
                let (rows, hashes) = (Rows::of(&batch)?, column::<Int64Array>(&batch, CONTENT_HASH)?);
                for row in 0..batch.num_rows() {
                    let (span, hash) = (rows.span(row, None)?, hashes.value(row));
                    let key = |s: &Span| (s.trace_id, s.start_unix_ns, s.span_id);
                    // Copies sort together: among the spans of the same trace, start and id.
                    let same = |(s, _, _): &&(Span, i64, crate::store::ClockIds)| key(s) == key(&span);
                    if chunk.iter().rev().take_while(same).any(|(s, h, _)| *h == hash && span.is_copy_of(s)) {
                        continue;
                    }
                    // Never between spans of one key, which the next batch might copy.
                    if chunk.len() >= BATCH_ROWS && chunk.last().is_some_and(|last| !same(&last)) {
                        write(&mut chunk, &mut out, &mut written)?;
                    }
                    // A partition's rows mostly share their process's ids: the last row's are
                    // taken again rather than made anew.
                    let (boot_id, host_id) = rows.clock(row);
                    let clock = match last_clock.take() {
                        Some(c) if c.is_row(boot_id, host_id) => c,
                        _ => crate::store::ClockIds::from_row(boot_id, host_id),
                    };
                    last_clock = Some(clock.clone());
                    chunk.push((span, hash, clock));
                }
            }
            write(&mut chunk, &mut out, &mut written)?;
            out.finish(&mut written)?;
        }
        Ok(written)
    }
}

/// The spill files' column of the order spans came in.
const ORDINAL: &str = "ringtrace_ordinal";

/// The spill files' column of each span's content hash ([`Span::content_hash`]).
const CONTENT_HASH: &str = "ringtrace_content_hash";

impl Drop for StoreExport {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.spill);
    }
}

/// What [`export_files`] wrote.
#[derive(Debug)]
pub struct Exported {
    /// The spans and files.
    pub written: crate::store::Written,
    /// Processes read.
    pub processes: usize,
    /// What the readers had to say about the files (a file cut short, a dead process's rings).
    pub warnings: Vec<crate::ReadWarning>,
}

/// Exports the spans of `files` into the store at `dir` as [`write_dir`](crate::store::write_dir)
/// would after [`attach_to_traces`](crate::io::attach_to_traces), reading the files batch by
/// batch ([`StoreExport`]): memory does not grow with the inputs.
///
/// `Ok(None)`, with nothing written, when the inputs hold I/O calls made inside spans and others
/// made outside any (a program's calls imported from strace beside instrumented processes):
/// placing the latter in the traces of the requests they served takes every call at once, so
/// those inputs are for the whole-dataset path.
///
/// # Errors
/// A file that cannot be read, a store that cannot be written.
pub fn export_files(
    files: &[PathBuf],
    truncation: crate::Truncation,
    dir: &Path,
) -> Result<Option<Exported>, StoreError> {
    let mut export = StoreExport::new(dir)?;
    let (mut processes, mut warnings) = (0, Vec::new());
    let mut places = crate::io::attach::CallPlaces::default();
    let mut failed = None;
    for file in files {
        let mut seen = std::collections::BTreeSet::new();
        let read = crate::for_each_batch_with(file, truncation, &mut |batch| {
            seen.insert(batch.process_index);
            let mut spans = batch.spans;
            for span in &mut spans {
                places.place(span);
            }
            if failed.is_none() {
                failed = export.add(spans, batch.process).err();
            }
        });
        warnings.extend(read?);
        processes += seen.len();
        if let Some(e) = failed.take() {
            return Err(e);
        }
        if places.mixed() {
            return Ok(None);
        }
    }
    Ok(Some(Exported { written: export.finish()?, processes, warnings }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{MapBuilder, StringBuilder};

    /// A null attribute value (another writer's; ringtrace writes none) is no attribute, as
    /// `get_field` reads it for the call columns: both ways of reading a store agree.
    #[test]
    fn a_null_attribute_value_is_no_attribute() {
        let mut map = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
        for (key, value) in
            [("peer.service", None), ("db.system", Some("postgresql")), ("error.type", Some(""))]
        {
            map.keys().append_value(key);
            map.values().append_option(value);
        }
        map.append(true).unwrap();
        let map = map.finish();
        let attributes = Maps::of(&map).unwrap().attributes(0);
        let text = |s: &str| Value::Str(s.to_owned());
        assert_eq!(
            attributes,
            [("db.system".to_owned(), text("postgresql")), ("error.type".to_owned(), text(""))]
        );
    }
}
