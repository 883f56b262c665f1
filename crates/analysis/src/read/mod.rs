//! Readers: trace files into the [model](crate::model).
//!
//! Three formats are read, told apart by content, not by file name:
//!
//! | first non-whitespace byte | top-level keys | format |
//! |---|---|---|
//! | `{` | `data` | Jaeger query-API JSON (one document; also accepted inside a `trace` key, the envelope of the oracle fixtures) |
//! | `{` | `resourceSpans` | OTLP/JSON, one `TracesData` object per line (the Collector's file exporter) |
//! | anything else | | binary recording: varint-delimited protobuf `TracesData` frames |
//!
//! An empty (or all-whitespace) file holds no spans and is not an error. Readers never panic on
//! bad input: every problem is a [`ReadError`] naming the file, the position (frame and byte
//! offset, line and column, or JSON path) and what was expected.
//!
//! Within a file, a process is one distinct resource (attributes compared without the ringtrace
//! counters) or one distinct Jaeger process (service name and tags, whatever its `processID`
//! in each trace). A resource without `service.name` gets the daemon `unknown_service`, one
//! without `host.name` the node `unknown`.
//!
//! [`read_inputs`] loads everything into a [`Dataset`]; [`for_each_batch`] streams one file
//! batch by batch, for callers that aggregate without holding every span. Binary recordings are
//! streamed frame by frame (memory: one frame); JSON files are read whole.

mod encoding;
mod error;
mod jaeger;
mod otlp;
mod otlp_json;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufReader, Cursor, Read};
use std::path::{Path, PathBuf};

use serde::de::IgnoredAny;

pub use error::{Position, ReadError, ReadErrorKind};

use crate::model::{Dataset, Process, Span};

/// File extensions taken from a directory.
const EXTENSIONS: [&str; 3] = ["otlp", "json", "jsonl"];

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

/// Reads one trace file, handing its spans to `f` batch by batch (per recording frame and
/// resource, per OTLP/JSON line and resource, or per Jaeger trace and process).
///
/// Batches seen before an error have been handed out when the error is returned.
pub fn for_each_batch(path: &Path, f: &mut dyn FnMut(Batch<'_>)) -> Result<(), ReadError> {
    let file = File::open(path).map_err(|e| ReadError::io(path, "cannot open", e))?;
    let mut input = BufReader::with_capacity(1 << 16, file);
    let mut table = otlp::ProcessTable::new(path);

    // Whitespace is taken aside to find the first significant byte, then put back.
    let mut prefix = Vec::new();
    let first = loop {
        let mut byte = [0u8; 1];
        let n = input.read(&mut byte).map_err(|e| ReadError::io(path, "cannot read", e))?;
        if n == 0 {
            return Ok(());
        }
        prefix.push(byte[0]);
        if !byte[0].is_ascii_whitespace() {
            break byte[0];
        }
    };
    let mut input = Cursor::new(prefix).chain(input);

    if first != b'{' {
        return otlp::read_recording(&mut table, &mut input, f);
    }
    let mut text = Vec::new();
    input.read_to_end(&mut text).map_err(|e| ReadError::io(path, "cannot read", e))?;
    let mut first_value =
        serde_json::Deserializer::from_slice(&text).into_iter::<BTreeMap<String, IgnoredAny>>();
    let keys = match first_value.next() {
        Some(Ok(keys)) => keys,
        Some(Err(e)) => return Err(json_error(path, &e)),
        None => return Ok(()),
    };
    if keys.contains_key("data") {
        jaeger::read_jaeger(&mut table, &text, f)
    } else if keys.contains_key("resourceSpans") {
        otlp_json::read_otlp_json(&mut table, &text, f)
    } else if keys.contains_key("trace") {
        jaeger::read_jaeger(&mut table, &text, f)
    } else {
        let found: Vec<&str> = keys.keys().map(String::as_str).take(10).collect();
        Err(ReadError::new(
            path,
            Some(Position::Line { line: 1, column: None }),
            ReadErrorKind::UnknownFormat,
            format!(
                "expected a Jaeger document (key `data`) or OTLP/JSON (key `resourceSpans`), \
                 found keys: [{}]",
                found.join(", ")
            ),
        ))
    }
}

/// The files `paths` name: each path is a file, or a directory searched recursively for
/// regular files ending in `.otlp`, `.json` or `.jsonl` (hidden files and directories skipped,
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
                "directory has no .otlp, .json or .jsonl file, nor have its subdirectories",
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

/// Reads files and directories (see [`list_inputs`]) into one [`Dataset`].
///
/// Processes are numbered in reading order; a process's counters are the largest values its
/// file reports (recordings repeat cumulative counters in every frame).
pub fn read_inputs(paths: &[impl AsRef<Path>]) -> Result<Dataset, ReadError> {
    let mut data = Dataset::default();
    for file in list_inputs(paths)? {
        let base = data.processes.len();
        for_each_batch(&file, &mut |batch| {
            let index = base + batch.process_index;
            if index < data.processes.len() {
                data.processes[index] = batch.process.clone();
            } else {
                data.processes.push(batch.process.clone());
            }
            data.spans.extend(batch.spans.into_iter().map(|mut span| {
                span.process = index;
                span
            }));
        })?;
    }
    Ok(data)
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
