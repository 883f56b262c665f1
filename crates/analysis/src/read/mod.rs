//! Readers: trace files into the [model](crate::model).
//!
//! Four formats are read, told apart by content, not by file name:
//!
//! | format | first bytes, or first JSON value |
//! |---|---|
//! | raw recording (`.rtrace`, `docs/raw-format.md`): ring records, assembled by `ringtrace_subscriber::replay` | the magic `RINGTRAC` |
//! | OTLP/JSON, one `TracesData` object per line (the Collector's file exporter) | key `resourceSpans` or `resource_spans`; Tempo's `batches`; any of them inside `trace` (Tempo's v2 API) or `result` (Jaeger's api_v3) |
//! | Jaeger query-API JSON (one document) | key `data` (a list of traces, one trace, or `null`); `data` inside `trace` (the oracle fixtures' envelope); one trace object (`traceID`, `spans`, `processes`, as Jaeger UI saves it); a list of trace objects |
//! | OTLP recording: varint-delimited protobuf `TracesData` frames | anything else that is not JSON (`{`, or `[` then `{` or `]`) |
//!
//! An empty (or all-whitespace) file holds no spans and is not an error. A JSON document of none
//! of these shapes is an error listing its keys; one of a known shape without any span gives a
//! [`ReadWarning`] of kind [`ReadWarningKind::NoSpans`]. Readers never panic on bad input:
//! every problem is a [`ReadError`] naming the file, the position (frame and byte offset, line
//! and column, or JSON path) and what was expected.
//!
//! A file cut short by a crash mid-write — a recording ending inside its last frame, or JSON
//! lines ending inside the last line — is an error for [`read_inputs`] and [`for_each_batch`].
//! With [`Truncation::Warn`] ([`read_inputs_with`], [`for_each_batch_with`]) the intact frames or
//! lines are read and the cut is a [`ReadWarning`] with the counts. A JSON value cut across
//! several lines, or a file whose first JSON value is cut, is still an error: there is no intact
//! line to read, or the damage is not a cut last line.
//!
//! Within a file, a process is one distinct resource (attributes compared without the ringtrace
//! counters) or one distinct Jaeger process (service name and tags, whatever its `processID`
//! in each trace). A resource without `service.name` gets the daemon `unknown_service`, one
//! without `host.name` the node `unknown`.
//!
//! [`read_inputs`] loads everything into a [`Dataset`]; [`for_each_batch`] streams one file
//! batch by batch, for callers that aggregate without holding every span. Binary recordings are
//! streamed frame by frame (memory: one frame); JSON files are read whole.
//!
//! [`fetch_jaeger`] ([`jaeger_fetch`]) reads the same Jaeger JSON from a Jaeger query service
//! instead of a file.

mod encoding;
mod error;
mod jaeger;
pub mod jaeger_fetch;
mod otlp;
mod otlp_json;
mod raw;

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File};
use std::io::{BufReader, Cursor, Read};
use std::path::{Path, PathBuf};

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

pub use error::{Position, ReadError, ReadErrorKind, ReadWarning, ReadWarningKind};
pub use jaeger_fetch::{fetch_jaeger, FetchError, JaegerQuery};

use crate::model::{Dataset, Process, Span};

/// File extensions taken from a directory.
const EXTENSIONS: [&str; 4] = ["rtrace", "otlp", "json", "jsonl"];

/// One batch of spans from one process of a file, handed out by [`for_each_batch`].
#[derive(Debug)]
pub struct Batch<'a> {
    /// The process's index within this file (0-based, in order of first appearance). A file
    /// holds one process for a ringtrace recording, possibly many for other formats.
    pub process_index: usize,
    /// The process as known so far. Its counters are the largest seen up to this batch; the
    /// last batch of a process carries its totals.
    pub process: &'a Process,
    /// The spans; their [`Span::process`] is `process_index`. May be empty: a batch without
    /// spans still updates the process's counters.
    pub spans: Vec<Span>,
}

/// How a reader treats a file whose end was cut short, as by a crash mid-write: a recording
/// ending inside its last frame, or JSON lines ending inside the last line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Truncation {
    /// An error ([`ReadErrorKind::Truncated`] or [`ReadErrorKind::Json`]), like any damage.
    #[default]
    Error,
    /// A [`ReadWarning`] of kind [`ReadWarningKind::TruncatedTail`]; what came before is read.
    Warn,
}

/// How much of each span a reader keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Detail {
    /// Everything the file holds.
    #[default]
    Full,
    /// Each span [compact](Span::compact), as the views read it. A raw recording's spans are
    /// built compact, never holding what would be dropped.
    Compact,
}

/// What [`read_inputs_with`] read: the spans, and the problems that did not stop it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadOutcome {
    /// The spans and processes.
    pub data: Dataset,
    /// One per file cut short or holding no span, in reading order.
    pub warnings: Vec<ReadWarning>,
}

/// Where a file was cut short: a reader's report, made a [`ReadWarning`] by [`for_each_batch_with`].
pub(crate) struct Cut {
    /// The cut frame or line.
    position: Position,
    /// "frame" or "line".
    unit: &'static str,
    /// Intact frames or JSON values before it.
    read: usize,
    from_byte: u64,
    ignored_bytes: u64,
}

/// Reads one trace file, handing its spans to `f` batch by batch (per recording frame and
/// resource, per OTLP/JSON line and resource, or per Jaeger trace and process). A file cut
/// short is an error: see [`for_each_batch_with`] to read what is intact.
///
/// Batches seen before an error have been handed out when the error is returned.
pub fn for_each_batch(path: &Path, f: &mut dyn FnMut(Batch<'_>)) -> Result<(), ReadError> {
    for_each_batch_with(path, Truncation::Error, f).map(drop)
}

/// [`for_each_batch`], with a choice of how a file cut short is treated; returns the problems
/// that did not stop reading (at most one per file).
pub fn for_each_batch_with(
    path: &Path,
    truncation: Truncation,
    f: &mut dyn FnMut(Batch<'_>),
) -> Result<Vec<ReadWarning>, ReadError> {
    for_each_batch_as(path, truncation, Detail::Full, f)
}

/// [`for_each_batch_with`], keeping of each span what `detail` says.
pub fn for_each_batch_as(
    path: &Path,
    truncation: Truncation,
    detail: Detail,
    f: &mut dyn FnMut(Batch<'_>),
) -> Result<Vec<ReadWarning>, ReadError> {
    let file = File::open(path).map_err(|e| ReadError::io(path, "cannot open", e))?;
    let mut input = BufReader::with_capacity(1 << 16, file);
    let mut table = otlp::ProcessTable::new(path);
    let mut spans = 0usize;
    let Start { prefix, content } = Start::read(&mut input, path)?;
    // The raw reader builds its spans compact; other readers' are compacted here.
    let compact_here = detail == Detail::Compact && !matches!(content, Content::Raw);
    let mut f = |mut batch: Batch<'_>| {
        spans += batch.spans.len();
        if compact_here {
            batch.spans.iter_mut().for_each(Span::compact);
        }
        f(batch)
    };
    let mut input = Cursor::new(prefix).chain(input);
    let ending = match content {
        Content::Empty => return Ok(Vec::new()),
        Content::Recording => Ending {
            cut: otlp::read_recording(&mut table, &mut input, truncation, &mut f)?,
            document: None,
            notes: Vec::new(),
        },
        Content::Raw => {
            let (leftovers, mut notes) = raw::leftovers(path);
            let raw::RawEnding { cut, skipped } = match &leftovers {
                Some(l) => {
                    let mut input = (&mut input).take(l.whole_len).chain(Cursor::new(&l.frames[..]));
                    raw::read_raw(&mut table, &mut input, truncation, detail, &mut f)?
                }
                None => raw::read_raw(&mut table, &mut input, truncation, detail, &mut f)?,
            };
            notes.extend(skipped);
            Ending { cut, document: None, notes }
        }
        Content::Json => read_json(&mut table, &mut input, truncation, &mut f)?,
    };
    Ok(ending.warnings(path, spans))
}

/// What a file holds, as told by its first significant bytes.
enum Content {
    /// Nothing but whitespace.
    Empty,
    /// A JSON document or JSON lines.
    Json,
    /// A raw recording (starts with `ringtrace_core::raw::MAGIC`).
    Raw,
    /// Anything else: a binary recording.
    Recording,
}

/// The start of a file: the bytes read to tell its content, to be put back before reading it.
struct Start {
    prefix: Vec<u8>,
    content: Content,
}

impl Start {
    /// Reads up to the first significant byte, or two after a `[`: JSON has `{` or `]` next,
    /// where a recording's first frame would have a field tag.
    fn read(input: &mut impl Read, path: &Path) -> Result<Start, ReadError> {
        let mut prefix = Vec::new();
        let mut significant = Vec::new();
        while significant.len() < 2 {
            let mut byte = [0u8; 1];
            let n = input.read(&mut byte).map_err(|e| ReadError::io(path, "cannot read", e))?;
            if n == 0 {
                break;
            }
            prefix.push(byte[0]);
            if !byte[0].is_ascii_whitespace() {
                significant.push(byte[0]);
                if byte[0] != b'[' {
                    break;
                }
            }
        }
        if significant == [ringtrace_core::raw::MAGIC[0]] {
            // Perhaps a raw recording: read as far as its magic.
            let rest = ringtrace_core::raw::MAGIC.len() as u64 - 1;
            (&mut *input)
                .take(rest)
                .read_to_end(&mut prefix)
                .map_err(|e| ReadError::io(path, "cannot read", e))?;
            if ringtrace_core::raw::is_raw(&prefix) {
                return Ok(Start { prefix, content: Content::Raw });
            }
        }
        let content = match significant[..] {
            [] => Content::Empty,
            [b'{', ..] | [b'[', b'{' | b']'] => Content::Json,
            _ => Content::Recording,
        };
        Ok(Start { prefix, content })
    }
}

/// How reading a file ended.
struct Ending {
    /// Where the file was cut short, if it was read up to a cut.
    cut: Option<Cut>,
    /// The format of a JSON document read whole ("OTLP/JSON" or "Jaeger"), which is worth a
    /// warning when it holds no span; `None` for a recording or an empty JSON file.
    document: Option<&'static str>,
    /// Warnings of a raw recording: records skipped (undecodable), records recovered from a
    /// dead process's ring files.
    notes: Vec<ReadWarning>,
}

impl Ending {
    /// The warnings of a file that held `spans` spans: its cut, or a document without spans.
    fn warnings(self, path: &Path, spans: usize) -> Vec<ReadWarning> {
        let mut warnings = self.notes;
        warnings.extend(match (self.cut, self.document) {
            (Some(cut), _) => vec![cut.warning(path, spans)],
            (None, Some(what)) if spans == 0 => vec![ReadWarning::new(
                path,
                None,
                ReadWarningKind::NoSpans,
                format!("the {what} document holds no spans"),
            )],
            (None, _) => Vec::new(),
        });
        warnings
    }
}

/// Reads a JSON file whole and hands it to the reader of its format, told by its first value.
fn read_json(
    table: &mut otlp::ProcessTable<'_>,
    input: &mut impl Read,
    truncation: Truncation,
    f: &mut dyn FnMut(Batch<'_>),
) -> Result<Ending, ReadError> {
    let path = table.source();
    let mut text = Vec::new();
    input.read_to_end(&mut text).map_err(|e| ReadError::io(path, "cannot read", e))?;
    let outline = match serde_json::Deserializer::from_slice(&text).into_iter::<Outline>().next() {
        Some(Ok(outline)) => outline,
        Some(Err(e)) => return Err(json_error(path, &e)),
        None => return Ok(Ending { cut: None, document: None, notes: Vec::new() }),
    };
    match outline.format() {
        Ok(JsonFormat::Otlp) => Ok(Ending {
            cut: otlp_json::read_otlp_json(table, &text, truncation, f)?,
            document: Some("OTLP/JSON"),
            notes: Vec::new(),
        }),
        Ok(JsonFormat::Jaeger) => {
            jaeger::read_jaeger(table, &text, f)?;
            Ok(Ending { cut: None, document: Some("Jaeger"), notes: Vec::new() })
        }
        Err(found) => Err(ReadError::new(
            path,
            Some(Position::Line { line: 1, column: None }),
            ReadErrorKind::UnknownFormat,
            format!("no spans in a shape this reader knows: found {found}; {UNDERSTOOD}"),
        )),
    }
}

impl Cut {
    fn warning(self, path: &Path, spans: usize) -> ReadWarning {
        let Cut { position, unit, read, from_byte, ignored_bytes } = self;
        ReadWarning::new(
            path,
            Some(position),
            ReadWarningKind::TruncatedTail { read, spans, from_byte, ignored_bytes },
            format!(
                "the file ends inside this {unit} (cut short mid-write?): read {read} {unit}s \
                 holding {spans} spans, ignored the last {ignored_bytes} bytes from byte {from_byte}"
            ),
        )
    }
}

/// The shapes of JSON documents understood, for the error on any other.
const UNDERSTOOD: &str = "understood: OTLP/JSON (`resourceSpans` or `resource_spans`, Tempo's \
    `batches`, either inside `trace` or `result`), Jaeger (`data`, or a trace object with \
    `traceID`, `spans` and `processes`, or a list of them)";

/// Keys that hold OTLP resource spans.
const OTLP_KEYS: [&str; 3] = ["resourceSpans", "resource_spans", "batches"];

/// The readers of JSON documents.
enum JsonFormat {
    Otlp,
    Jaeger,
}

/// The outline of a file's first JSON value, enough to tell its format: an object's keys with
/// the keys of each value that is an object, or the keys of an array's first element.
enum Outline {
    Object(BTreeMap<String, Keys>),
    Array(Option<Keys>),
    Other,
}

/// An object's keys; `None` for any other value.
struct Keys(Option<Vec<String>>);

impl Keys {
    fn has(&self, key: &str) -> bool {
        self.0.as_ref().is_some_and(|keys| keys.iter().any(|k| k == key))
    }
}

impl Outline {
    /// The format, or a description of what was found instead.
    fn format(&self) -> Result<JsonFormat, String> {
        let jaeger_trace = |keys: &Keys| keys.has("spans") && (keys.has("traceID") || keys.has("processes"));
        match self {
            Outline::Object(map) => {
                let has = |key: &str| map.contains_key(key);
                let inner_otlp = |key: &str| map.get(key).is_some_and(|k| OTLP_KEYS.iter().any(|o| k.has(o)));
                if OTLP_KEYS.iter().any(|k| has(k)) || inner_otlp("trace") || inner_otlp("result") {
                    Ok(JsonFormat::Otlp)
                } else if has("data")
                    || map.get("trace").is_some_and(|k| k.has("data"))
                    || (has("spans") && (has("traceID") || has("processes")))
                {
                    Ok(JsonFormat::Jaeger)
                } else {
                    let keys: Vec<&str> = map.keys().map(String::as_str).take(10).collect();
                    Err(format!("keys [{}]", keys.join(", ")))
                }
            }
            Outline::Array(None) => Ok(JsonFormat::Jaeger),
            Outline::Array(Some(first)) if jaeger_trace(first) => Ok(JsonFormat::Jaeger),
            Outline::Array(Some(Keys(Some(keys)))) => {
                let keys: Vec<&str> = keys.iter().map(String::as_str).take(10).collect();
                Err(format!("a list whose first element has keys [{}]", keys.join(", ")))
            }
            Outline::Array(Some(Keys(None))) => Err("a list of non-objects".to_owned()),
            Outline::Other => Err("a JSON value that is not an object".to_owned()),
        }
    }
}

impl<'de> Deserialize<'de> for Keys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Keys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some((key, IgnoredAny)) = map.next_entry::<String, IgnoredAny>()? {
                    keys.push(key);
                }
                Ok(Keys(Some(keys)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Keys, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Keys(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Keys, E> {
                Ok(Keys(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Keys, E> {
                Ok(Keys(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Keys, E> {
                Ok(Keys(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Keys, E> {
                Ok(Keys(None))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Keys, E> {
                Ok(Keys(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Keys, E> {
                Ok(Keys(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Outline {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Outline;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object or array")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Outline, A::Error> {
                let mut keys = BTreeMap::new();
                while let Some((key, value)) = map.next_entry::<String, Keys>()? {
                    keys.insert(key, value);
                }
                Ok(Outline::Object(keys))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Outline, A::Error> {
                let first = seq.next_element::<Keys>()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Outline::Array(first))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Outline, E> {
                Ok(Outline::Other)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Outline, E> {
                Ok(Outline::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Outline, E> {
                Ok(Outline::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Outline, E> {
                Ok(Outline::Other)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Outline, E> {
                Ok(Outline::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Outline, E> {
                Ok(Outline::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// The files `paths` name: each path is a file, or a directory searched recursively for
/// regular files ending in `.rtrace`, `.otlp`, `.json` or `.jsonl` (hidden files and directories skipped,
/// symbolic links to directories not followed, sorted by path). A directory without such a
/// file is an error.
pub fn list_inputs(paths: &[impl AsRef<Path>]) -> Result<Vec<PathBuf>, ReadError> {
    let mut files = Vec::new();
    for path in paths {
        let path = path.as_ref();
        let meta = fs::metadata(path).map_err(|e| ReadError::io(path, "cannot open", e))?;
        if !meta.is_dir() {
            files.push(path.to_owned());
            continue;
        }
        let mut found = Vec::new();
        find_trace_files(path, &mut found)?;
        if found.is_empty() {
            return Err(ReadError::new(
                path,
                None,
                ReadErrorKind::NoInputs,
                "directory has no .rtrace, .otlp, .json or .jsonl file, nor have its subdirectories",
            ));
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Adds the trace files under `dir` to `found`.
fn find_trace_files(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), ReadError> {
    let entries = fs::read_dir(dir).map_err(|e| ReadError::io(dir, "cannot list", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| ReadError::io(dir, "cannot list", e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        // Not following links to directories keeps a link cycle from recursing forever.
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            find_trace_files(&path, found)?;
            continue;
        }
        let wanted =
            Path::new(&*name).extension().and_then(|e| e.to_str()).is_some_and(|e| EXTENSIONS.contains(&e));
        if wanted && fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            found.push(path);
        }
    }
    Ok(())
}

/// Reads files and directories (see [`list_inputs`]) into one [`Dataset`]. A file cut short is
/// an error: see [`read_inputs_with`] to read what is intact.
///
/// Processes are numbered in reading order; a process's counters are the largest values its
/// file reports (recordings repeat cumulative counters in every frame).
pub fn read_inputs(paths: &[impl AsRef<Path>]) -> Result<Dataset, ReadError> {
    read_inputs_with(paths, Truncation::Error).map(|outcome| outcome.data)
}

/// [`read_inputs`], with a choice of how a file cut short is treated; returns the spans and the
/// problems that did not stop reading.
pub fn read_inputs_with(
    paths: &[impl AsRef<Path>],
    truncation: Truncation,
) -> Result<ReadOutcome, ReadError> {
    read_inputs_as(paths, truncation, Detail::Full, &mut |_, _| {})
}

/// [`read_inputs_with`], keeping of each span what `detail` says, and calling
/// `on_file(done, total)` after each file.
pub fn read_inputs_as(
    paths: &[impl AsRef<Path>],
    truncation: Truncation,
    detail: Detail,
    on_file: &mut dyn FnMut(usize, usize),
) -> Result<ReadOutcome, ReadError> {
    let mut outcome = ReadOutcome::default();
    let data = &mut outcome.data;
    let files = list_inputs(paths)?;
    for (done, file) in files.iter().enumerate() {
        let base = data.processes.len();
        let warnings = for_each_batch_as(file, truncation, detail, &mut |batch| {
            let index = base + batch.process_index;
            if index >= data.processes.len() {
                data.processes.resize_with(index + 1, Default::default);
            }
            data.processes[index] = batch.process.clone();
            let from = data.spans.len();
            data.spans.extend(batch.spans);
            data.spans[from..].iter_mut().for_each(|span| span.process = index);
        })?;
        outcome.warnings.extend(warnings);
        on_file(done + 1, files.len());
    }
    Ok(outcome)
}

/// Reads a Jaeger query-API document held in memory — such as a response fetched from a Jaeger
/// query service — into a [`Dataset`]. `source` names the document in errors and becomes each
/// process's [`Process::source`].
pub fn read_jaeger_bytes(source: &Path, text: &[u8]) -> Result<Dataset, ReadError> {
    let mut table = otlp::ProcessTable::new(source);
    let mut data = Dataset::default();
    jaeger::read_jaeger(&mut table, text, &mut |batch| {
        if batch.process_index >= data.processes.len() {
            data.processes.resize_with(batch.process_index + 1, Process::default);
        }
        data.processes[batch.process_index] = batch.process.clone();
        data.spans.extend(batch.spans);
    })?;
    Ok(data)
}

/// A serde_json error as a [`ReadError`] at its line and column.
fn json_error(path: &Path, e: &serde_json::Error) -> ReadError {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = text.strip_suffix(&suffix).unwrap_or(&text);
    let position = (e.line() > 0)
        .then_some(Position::Line { line: e.line(), column: (e.column() > 0).then_some(e.column()) });
    let what = if e.is_eof() { format!("truncated JSON: {message}") } else { message.to_owned() };
    ReadError::new(path, position, ReadErrorKind::Json, what)
}

/// The 1-based lines of increasing byte offsets in a text, each byte looked at once: a file of
/// many values costs time in proportion to its size, not to its size times its values.
pub(crate) struct LineCounter<'t> {
    text: &'t [u8],
    offset: usize,
    line: usize,
    /// Bytes looked at so far.
    #[cfg(test)]
    scanned: usize,
}

impl<'t> LineCounter<'t> {
    pub(crate) fn new(text: &'t [u8]) -> Self {
        Self {
            text,
            offset: 0,
            line: 1,
            #[cfg(test)]
            scanned: 0,
        }
    }

    /// The line of byte `offset` (clamped to the text's end); offsets must not decrease
    /// between calls — a smaller one starts counting again from the beginning.
    pub(crate) fn line_at(&mut self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        if offset < self.offset {
            (self.offset, self.line) = (0, 1);
        }
        let between = &self.text[self.offset..offset];
        #[cfg(test)]
        {
            self.scanned += between.len();
        }
        self.line += between.iter().filter(|&&b| b == b'\n').count();
        self.offset = offset;
        self.line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_count_from_one() {
        let mut lines = LineCounter::new(b"a\nb\nc");
        assert_eq!(lines.line_at(0), 1);
        assert_eq!(lines.line_at(2), 2);
        assert_eq!(lines.line_at(99), 3);
        assert_eq!(lines.line_at(1), 1);
    }

    #[test]
    fn line_counting_looks_at_each_byte_once() {
        let text = "{\"a\": 1}\n".repeat(20_000);
        let mut lines = LineCounter::new(text.as_bytes());
        for i in 0..20_000 {
            assert_eq!(lines.line_at(i * 9), i + 1);
        }
        assert_eq!(lines.line_at(text.len()), 20_001);
        assert_eq!(lines.scanned, text.len());
    }

    #[test]
    fn json_errors_carry_line_and_column() {
        let e = serde_json::from_str::<serde_json::Value>("{\n  \"a\": ]").unwrap_err();
        let err = json_error(Path::new("x.json"), &e);
        assert_eq!(err.position(), Some(&Position::Line { line: 2, column: Some(8) }));
        assert_eq!(err.to_string(), "x.json: line 2 column 8: expected value");
    }
}
