//! The columnar store: spans written as Parquet files that other engines (DuckDB, Spark, Polars,
//! DataFusion) read as they are. The schema and the layout are documented in
//! `docs/parquet-store.md`; this module is their one implementation.
//!
//! # Layout
//! `DIR/day=YYYY-MM-DD/node=NODE/DAEMON-K.parquet`: Hive-style partitions by the UTC day a span
//! started and by its node, so that a reader prunes by time and node from the paths alone. Each
//! file's rows are sorted by trace id, then start time, so a trace's spans on that node and day
//! are together, in row groups of at most [`ROW_GROUP_ROWS`] rows whose statistics (minimum and
//! maximum of every column) let a reader skip by trace or time range inside a file as well.
//!
//! # Schema
//! One row per span; the partition values are also columns of their own (`node`, and the start
//! time the day comes from), so a file read without its path loses nothing. Attribute values are
//! written as text, as Jaeger shows them; their types are in the recording, not here.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{MapBuilder, StringBuilder};
use arrow_array::{
    Array, ArrayRef, Int64Array, ListArray, MapArray, RecordBatch, StringArray, StructArray,
    TimestampNanosecondArray,
};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use crate::model::{Dataset, Process, Span, Status, Value, BOOT_ID, HOST_ID};
use crate::time_format::utc_day;

/// Rows a row group holds at most.
pub const ROW_GROUP_ROWS: usize = 64 * 1024;

/// Bytes a data or dictionary page holds before the writer starts a new one (Parquet's default
/// is 1 MiB). A reader holds a page of each column of each file it reads, decompressed, and
/// the views merge every file of the store at once: small pages keep that memory small.
pub const PAGE_BYTES: usize = 64 * 1024;

/// Rows a file holds at most; a partition with more is split into several files.
pub const FILE_ROWS: usize = 1024 * 1024;

/// What [`write_dir`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Written {
    /// Spans written.
    pub spans: usize,
    /// Files written, relative to the directory, in the order written.
    pub files: Vec<PathBuf>,
}

/// An error writing the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file system refused.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Arrow or Parquet refused the data (a bug: the schema is ours), or the query engine
    /// failed.
    #[error("{0}")]
    Format(String),
    /// An input could not be read.
    #[error(transparent)]
    Read(#[from] crate::ReadError),
}

impl From<parquet::errors::ParquetError> for StoreError {
    fn from(e: parquet::errors::ParquetError) -> Self {
        StoreError::Format(e.to_string())
    }
}

impl From<arrow_schema::ArrowError> for StoreError {
    fn from(e: arrow_schema::ArrowError) -> Self {
        StoreError::Format(e.to_string())
    }
}

/// Writes every span of `data` (a copy of a span once) under `dir` (made if missing), partitioned by day and node, one
/// file (or more) per daemon. The files a previous export wrote for the same day, node and daemon
/// are replaced; all others are left alone.
pub fn write_dir(data: &Dataset, dir: &Path) -> Result<Written, StoreError> {
    let clocks: Vec<ClockIds> = data.processes.iter().map(ClockIds::of).collect();
    let none = ClockIds::default();
    // Partition and daemon → the spans, sorted by trace and start.
    let mut partitions: BTreeMap<(String, String, String), Vec<&Span>> = BTreeMap::new();
    // A copy of a span (the same file read twice) is written once: every view counts it once.
    let copies = data.copies();
    for (span, _) in data.spans.iter().zip(&copies).filter(|(_, copy)| !**copy) {
        partitions.entry(partition_of(span)).or_default().push(span);
    }
    let mut written = Written::default();
    for ((day, node, daemon), mut spans) in partitions {
        spans.sort_by(|a, b| {
            (a.trace_id, a.start_unix_ns, a.span_id).cmp(&(b.trace_id, b.start_unix_ns, b.span_id))
        });
        let mut files = PartitionFiles::open(dir, &day, &node, &daemon, FILE_ROWS)?;
        for chunk in spans.chunks(ROW_GROUP_ROWS) {
            let of: Vec<&ClockIds> = chunk.iter().map(|s| clocks.get(s.process).unwrap_or(&none)).collect();
            files.write(chunk, &of, &mut written)?;
        }
        files.finish(&mut written)?;
    }
    Ok(written)
}

/// Which clock a span's times come from: its process's `ringtrace.boot_id` and `host.id`
/// resource attributes (the `boot_id` and `host_id` columns), which tell nodes under one kernel,
/// whose differences are no clock skew, from nodes under two.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ClockIds {
    pub(crate) boot_id: Option<Arc<str>>,
    pub(crate) host_id: Option<Arc<str>>,
}

impl ClockIds {
    /// `process`'s ([`Process::clock_ids`]).
    pub(crate) fn of(process: &Process) -> Self {
        let (boot_id, host_id) = process.clock_ids();
        Self::from_row(boot_id, host_id)
    }

    /// A row's boot id and host id, as the store's columns hold them.
    pub(crate) fn from_row(boot_id: Option<&str>, host_id: Option<&str>) -> Self {
        ClockIds { boot_id: boot_id.map(Arc::from), host_id: host_id.map(Arc::from) }
    }

    /// Whether these are a row's boot id and host id.
    pub(crate) fn is_row(&self, boot_id: Option<&str>, host_id: Option<&str>) -> bool {
        self.boot_id.as_deref() == boot_id && self.host_id.as_deref() == host_id
    }
}

/// The resource attributes a process read back from the store gets for its boot id and host id.
pub(crate) fn clock_attributes(boot_id: Option<&str>, host_id: Option<&str>) -> Vec<(String, Value)> {
    [(HOST_ID, host_id), (BOOT_ID, boot_id)]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_owned(), Value::Str(v?.to_owned()))))
        .collect()
}

/// The partition a span is written in: the UTC day it started, its node, its daemon.
pub(crate) fn partition_of(span: &Span) -> (String, String, String) {
    (utc_day(span.start_unix_ns), span.node.clone(), span.daemon.clone())
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { path: path.to_owned(), source }
}

/// The files of one daemon in one partition, written in order: `DAEMON-00000.parquet`, … each
/// of at most `file_rows` rows, each under a temporary name and renamed when complete. Opening
/// removes the daemon's files an earlier export left there.
pub(crate) struct PartitionFiles {
    partition: PathBuf,
    relative: PathBuf,
    prefix: String,
    file_rows: usize,
    next: usize,
    /// The file being written: its writer, temporary path, name and rows so far.
    current: Option<(ArrowWriter<fs::File>, PathBuf, String, usize)>,
    /// The attribute keys of the file being written's spans, up to [`LISTED_KEYS`].
    keys: AttributeKeys,
}

/// The key of a file's metadata that lists the attribute keys its spans hold: a JSON array of
/// strings, sorted. A reader that needs some attributes skips decoding the `attributes` column
/// of a store none of whose files lists them. Absent when the spans hold more than
/// [`LISTED_KEYS`] keys.
pub const ATTRIBUTE_KEYS: &str = "ringtrace.attribute_keys";

/// Distinct attribute keys a file lists in its metadata ([`ATTRIBUTE_KEYS`]) at most.
pub const LISTED_KEYS: usize = 1024;

/// The distinct attribute keys of a file's spans, or `None` once past [`LISTED_KEYS`].
struct AttributeKeys(Option<foldhash::HashSet<String>>);

impl Default for AttributeKeys {
    fn default() -> Self {
        AttributeKeys(Some(foldhash::HashSet::default()))
    }
}

impl AttributeKeys {
    fn add(&mut self, span: &Span) {
        let Some(keys) = &mut self.0 else { return };
        for (key, _) in &span.attributes {
            if !keys.contains(key.as_str()) {
                keys.insert(key.clone());
            }
        }
        if keys.len() > LISTED_KEYS {
            self.0 = None;
        }
    }

    /// The metadata entry listing the keys, if they were few enough; the list starts anew.
    fn take(&mut self) -> Option<parquet::file::metadata::KeyValue> {
        let mut keys: Vec<String> = std::mem::take(self).0?.into_iter().collect();
        keys.sort_unstable();
        let list = serde_json::to_string(&keys).ok()?;
        Some(parquet::file::metadata::KeyValue::new(ATTRIBUTE_KEYS.to_owned(), list))
    }
}

impl PartitionFiles {
    pub(crate) fn open(
        root: &Path,
        day: &str,
        node: &str,
        daemon: &str,
        file_rows: usize,
    ) -> Result<Self, StoreError> {
        let relative = Path::new(&format!("day={day}")).join(format!("node={}", escape(node)));
        let partition = root.join(&relative);
        fs::create_dir_all(&partition).map_err(io_error(&partition))?;
        // This daemon's files from an earlier export go; each new file is written under a
        // temporary name and renamed, so a reader never sees one half written.
        let prefix = format!("{}-", escape(daemon));
        for old in fs::read_dir(&partition).map_err(io_error(&partition))? {
            let old = old.map_err(io_error(&partition))?.path();
            let name = old.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let number = name.strip_prefix(&prefix).and_then(|n| n.strip_suffix(".parquet"));
            if number.is_some_and(|n| n.len() == 5 && n.bytes().all(|b| b.is_ascii_digit())) {
                fs::remove_file(&old).map_err(io_error(&old))?;
            }
        }
        Ok(PartitionFiles {
            partition,
            relative,
            prefix,
            file_rows: file_rows.max(1),
            next: 0,
            current: None,
            keys: AttributeKeys::default(),
        })
    }

    /// Appends `spans`, in order, the clock of each in `clocks`, starting a new file whenever one
    /// is full.
    pub(crate) fn write(
        &mut self,
        mut spans: &[&Span],
        mut clocks: &[&ClockIds],
        written: &mut Written,
    ) -> Result<(), StoreError> {
        while !spans.is_empty() {
            if self.current.is_none() {
                let name = format!("{}{:05}.parquet", self.prefix, self.next);
                self.next += 1;
                let temporary = self.partition.join(format!(".{name}.tmp"));
                let file = fs::File::create(&temporary).map_err(io_error(&temporary))?;
                let writer = ArrowWriter::try_new(file, Arc::new(schema()), Some(properties()))?;
                self.current = Some((writer, temporary, name, 0));
            }
            let Some((writer, _, _, rows)) = &mut self.current else { continue };
            let take = (self.file_rows - *rows).min(spans.len());
            writer.write(&batch(&spans[..take], &clocks[..take])?)?;
            spans[..take].iter().for_each(|span| self.keys.add(span));
            *rows += take;
            spans = &spans[take..];
            clocks = &clocks[take..];
            if *rows == self.file_rows {
                self.close(written)?;
            }
        }
        Ok(())
    }

    /// Closes the file being written and gives it its name.
    fn close(&mut self, written: &mut Written) -> Result<(), StoreError> {
        if let Some((mut writer, temporary, name, rows)) = self.current.take() {
            if let Some(keys) = self.keys.take() {
                writer.append_key_value_metadata(keys);
            }
            writer.close()?;
            let path = self.partition.join(&name);
            fs::rename(&temporary, &path).map_err(io_error(&path))?;
            written.spans += rows;
            written.files.push(self.relative.join(name));
        }
        Ok(())
    }

    /// Closes the last file.
    pub(crate) fn finish(mut self, written: &mut Written) -> Result<(), StoreError> {
        self.close(written)
    }
}

/// The store's schema: that of [`batch`]'s record batches, whatever spans they hold.
fn schema() -> Schema {
    batch(&[], &[]).map(|b| b.schema().as_ref().clone()).unwrap_or_else(|_| Schema::empty())
}

fn properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_data_page_size_limit(PAGE_BYTES)
        .set_dictionary_page_size_limit(PAGE_BYTES)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_created_by(format!("ringtrace {}", env!("CARGO_PKG_VERSION")))
        .build()
}

/// `value` for a Hive partition directory: letters, digits, `.`, `_` and `-` as they are, every
/// other byte as `%XX` (as Hive and Spark escape partition values); an empty value as Hive's
/// default partition, and `.` or `..` escaped whole.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    match out.as_str() {
        // Hive's name for an empty partition value.
        "" => "__HIVE_DEFAULT_PARTITION__".into(),
        "." | ".." => out.replace('.', "%2E"),
        _ => out,
    }
}

fn strings<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(values.collect::<StringArray>())
}

/// Nanoseconds as Parquet's signed 64-bit integers (good until the year 2262).
fn nanos(values: impl Iterator<Item = u64>) -> Vec<i64> {
    values.map(|t| i64::try_from(t).unwrap_or(i64::MAX)).collect()
}

/// A timestamp column (nanoseconds, UTC). Readers may keep less: DuckDB reads a time-zoned
/// timestamp to the microsecond, hence the exact `*_unix_ns` columns beside.
fn timestamps(values: impl Iterator<Item = u64>) -> ArrayRef {
    Arc::new(TimestampNanosecondArray::from(nanos(values)).with_timezone("UTC"))
}

fn integers(values: impl Iterator<Item = u64>) -> ArrayRef {
    Arc::new(Int64Array::from(nanos(values)))
}

/// A map column of text keys and values: one map per item of `lists`.
fn attribute_map<'a>(lists: impl Iterator<Item = &'a [(String, Value)]>) -> Result<MapArray, StoreError> {
    let mut builder = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for list in lists {
        for (k, v) in list {
            builder.keys().append_value(k);
            builder.values().append_value(v.to_string());
        }
        builder.append(true)?;
    }
    Ok(builder.finish())
}

/// A list column whose items are `structs` rows, `counts[i]` of them for row `i`.
fn list_of(structs: StructArray, counts: impl Iterator<Item = usize>) -> ArrayRef {
    let field = Arc::new(Field::new("item", structs.data_type().clone(), false));
    Arc::new(ListArray::new(field, OffsetBuffer::from_lengths(counts), Arc::new(structs), None))
}

fn struct_of(columns: Vec<(&str, ArrayRef)>) -> StructArray {
    let fields: Fields = columns
        .iter()
        .map(|(name, a)| Field::new(*name, a.data_type().clone(), a.null_count() > 0))
        .collect();
    StructArray::new(fields, columns.into_iter().map(|(_, a)| a).collect(), None)
}

/// The spans as one record batch of the store's schema, the clock of each in `clocks`.
pub(crate) fn batch(spans: &[&Span], clocks: &[&ClockIds]) -> Result<RecordBatch, StoreError> {
    debug_assert_eq!(spans.len(), clocks.len());
    let status_message = |s: &Span| match &s.status {
        Status::Error { message } if !message.is_empty() => Some(message.clone()),
        _ => None,
    };
    let events: Vec<_> = spans.iter().flat_map(|s| &s.events).collect();
    let event_rows = struct_of(vec![
        ("time_unix_ns", integers(events.iter().map(|e| e.time_unix_ns))),
        ("name", strings(events.iter().map(|e| Some(e.name.as_str())))),
        ("attributes", Arc::new(attribute_map(events.iter().map(|e| e.attributes.as_slice()))?)),
    ]);
    let links: Vec<_> = spans.iter().flat_map(|s| &s.links).collect();
    let link_traces: Vec<String> = links.iter().map(|l| l.trace_id.to_string()).collect();
    let link_spans: Vec<String> = links.iter().map(|l| l.span_id.to_string()).collect();
    let link_rows = struct_of(vec![
        ("trace_id", strings(link_traces.iter().map(|s| Some(s.as_str())))),
        ("span_id", strings(link_spans.iter().map(|s| Some(s.as_str())))),
        ("attributes", Arc::new(attribute_map(links.iter().map(|l| l.attributes.as_slice()))?)),
    ]);
    let traces: Vec<String> = spans.iter().map(|s| s.trace_id.to_string()).collect();
    let ids: Vec<String> = spans.iter().map(|s| s.span_id.to_string()).collect();
    let parents: Vec<Option<String>> =
        spans.iter().map(|s| s.parent_span_id.map(|p| p.to_string())).collect();
    let messages: Vec<Option<String>> = spans.iter().map(|s| status_message(s)).collect();
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("trace_id", strings(traces.iter().map(|s| Some(s.as_str())))),
        ("span_id", strings(ids.iter().map(|s| Some(s.as_str())))),
        ("parent_span_id", strings(parents.iter().map(Option::as_deref))),
        ("node", strings(spans.iter().map(|s| Some(s.node.as_str())))),
        ("daemon", strings(spans.iter().map(|s| Some(s.daemon.as_str())))),
        ("name", strings(spans.iter().map(|s| Some(s.name.as_str())))),
        ("kind", strings(spans.iter().map(|s| Some(s.kind.as_str())))),
        ("status", strings(spans.iter().map(|s| Some(status_code(&s.status))))),
        ("status_message", strings(messages.iter().map(Option::as_deref))),
        ("start_time", timestamps(spans.iter().map(|s| s.start_unix_ns))),
        ("end_time", timestamps(spans.iter().map(|s| s.end_unix_ns))),
        ("start_unix_ns", integers(spans.iter().map(|s| s.start_unix_ns))),
        ("end_unix_ns", integers(spans.iter().map(|s| s.end_unix_ns))),
        ("duration_ns", integers(spans.iter().map(|s| s.end_unix_ns.saturating_sub(s.start_unix_ns)))),
        ("request_id", strings(spans.iter().map(|s| s.request_id.as_deref()))),
        ("target", strings(spans.iter().map(|s| s.target.as_deref()))),
        ("location", strings(spans.iter().map(|s| s.location.as_deref()))),
        ("attributes", Arc::new(attribute_map(spans.iter().map(|s| s.attributes.as_slice()))?)),
        ("events", list_of(event_rows, spans.iter().map(|s| s.events.len()))),
        ("links", list_of(link_rows, spans.iter().map(|s| s.links.len()))),
        // Last, so that a reader taking columns by position reads a store from before them
        // the same way.
        ("boot_id", strings(clocks.iter().map(|c| c.boot_id.as_deref()))),
        ("host_id", strings(clocks.iter().map(|c| c.host_id.as_deref()))),
    ];
    let schema = Schema::new(
        columns
            .iter()
            .map(|(name, a)| Field::new(*name, a.data_type().clone(), nullable(name)))
            .collect::<Vec<_>>(),
    );
    Ok(RecordBatch::try_new(Arc::new(schema), columns.into_iter().map(|(_, a)| a).collect())?)
}

/// Whether column `name` may hold nulls (fixed by the schema, whatever a batch holds).
fn nullable(name: &str) -> bool {
    matches!(
        name,
        "parent_span_id" | "boot_id" | "host_id" | "status_message" | "request_id" | "target" | "location"
    )
}

fn status_code(status: &Status) -> &'static str {
    match status {
        Status::Unset => "unset",
        Status::Ok => "ok",
        Status::Error { .. } => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Span;
    use crate::{SpanId, TraceId};
    use parquet::file::reader::{FileReader, SerializedFileReader};

    #[test]
    fn days_are_utc_calendar_days() {
        assert_eq!(utc_day(0), "1970-01-01");
        assert_eq!(utc_day(86_400_000_000_000 - 1), "1970-01-01");
        assert_eq!(utc_day(86_400_000_000_000), "1970-01-02");
        // 2000-02-29 (a leap day of a year divisible by 400) and 2026-11-26, from `date -d … +%s`.
        assert_eq!(utc_day(951_782_400 * 1_000_000_000), "2000-02-29");
        assert_eq!(utc_day(1_795_651_200 * 1_000_000_000 + 5), "2026-11-26");
    }

    #[test]
    fn partition_values_are_escaped_as_hive_escapes_them() {
        assert_eq!(escape("node-1.b_2"), "node-1.b_2");
        assert_eq!(escape("node b/2"), "node%20b%2F2");
        assert_eq!(escape("a=b%"), "a%3Db%25");
        assert_eq!(escape("é"), "%C3%A9");
        assert_eq!(escape(""), "__HIVE_DEFAULT_PARTITION__");
        assert_eq!(escape(".."), "%2E%2E");
    }

    /// Three nodes' spans, 70,000 on one of them: sorted by trace, in row groups of at most
    /// `ROW_GROUP_ROWS`, one partition a node.
    #[test]
    fn each_partition_is_sorted_by_trace_in_bounded_row_groups() {
        let mut data = Dataset::default();
        for i in 0..70_010u64 {
            let node = if i < 70_000 {
                "big"
            } else if i % 2 == 0 {
                "n1"
            } else {
                "n2"
            };
            // Traces out of order, several spans each.
            let trace = TraceId::new(u128::from((i * 7919) % 1000 + 1)).unwrap();
            let start = 1_795_651_200_000_000_000 + i;
            let span = Span::new(trace, SpanId::new(i + 1).unwrap(), None, "op", start, start + 10);
            data.spans.push(Span { node: node.into(), ..span });
        }
        let dir = std::env::temp_dir().join(format!("ringtrace-store-unit-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let written = write_dir(&data, &dir).unwrap();
        assert_eq!(written.spans, 70_010);
        let mut files: Vec<String> = written.files.iter().map(|f| f.display().to_string()).collect();
        files.sort();
        assert_eq!(
            files,
            [
                "day=2026-11-26/node=big/unknown_service-00000.parquet",
                "day=2026-11-26/node=n1/unknown_service-00000.parquet",
                "day=2026-11-26/node=n2/unknown_service-00000.parquet"
            ]
        );
        let reader = SerializedFileReader::new(fs::File::open(dir.join(&files[0])).unwrap()).unwrap();
        let meta = reader.metadata();
        assert_eq!(meta.file_metadata().num_rows(), 70_000);
        assert_eq!(meta.num_row_groups(), 2);
        assert!(meta.row_groups().iter().all(|g| g.num_rows() as usize <= ROW_GROUP_ROWS));
        // Sorted by trace id: the row groups' trace ranges do not overlap, in order.
        let trace_range = |g: usize| {
            let stats = meta.row_group(g).column(0).statistics().unwrap();
            let bytes = |b: Option<&[u8]>| String::from_utf8(b.unwrap().to_vec()).unwrap();
            (bytes(stats.min_bytes_opt()), bytes(stats.max_bytes_opt()))
        };
        assert!(trace_range(0).1 <= trace_range(1).0, "{:?} {:?}", trace_range(0), trace_range(1));
        let _ = fs::remove_dir_all(&dir);
    }
}
