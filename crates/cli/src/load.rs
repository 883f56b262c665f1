//! The one compacting reader, for every view but `profile` (which reads compact too, without
//! placing imported I/O calls into traces): spans without the attributes, events and links the
//! views never read, so a large input takes a fraction of the memory.
//!
//! A file cut short by a crash mid-write is read up to the cut, and the cut printed to stderr
//! as a warning, unless the caller asks for [`Truncation::Error`] (`--strict`).

use std::io::Write;
use std::path::PathBuf;

use ringtrace_analysis::read::{
    read_inputs_as, Detail, ReadOutcome, ReadWarning, ReadWarningKind, Truncation,
};
use ringtrace_analysis::{list_inputs, ReadError};

use crate::progress::{self, InputProgress};

/// Reads every input file (directories expanded) into one dataset of compact spans, calling
/// `on_file(done, total)` after each file. A file cut short is read up to the cut, with a
/// warning on stderr, unless `strict` (`--strict`), which refuses it.
pub fn read_compact(
    paths: &[PathBuf],
    strict: bool,
    on_file: &mut dyn FnMut(usize, usize),
) -> Result<ringtrace_analysis::Dataset, ReadError> {
    let outcome = read_compact_with(paths, truncation(strict), on_file)?;
    print_warnings(&outcome.warnings, &mut std::io::stderr().lock());
    Ok(outcome.data)
}

/// [`read_compact`] with a progress bar on stderr while the inputs are read ([`InputProgress`]).
pub fn read_compact_showing_progress(
    paths: &[PathBuf],
    strict: bool,
) -> Result<ringtrace_analysis::Dataset, ReadError> {
    showing_progress(paths, |files, on_file| read_compact(files, strict, on_file))
}

/// Runs `read` over the files `paths` name (directories searched once: the files found are the
/// inputs read) with a progress bar on stderr that `read`'s `on_file(done, total)` moves.
pub fn showing_progress<T>(
    paths: &[PathBuf],
    read: impl FnOnce(&[PathBuf], &mut dyn FnMut(usize, usize)) -> Result<T, ReadError>,
) -> Result<T, ReadError> {
    let files = list_inputs(paths)?;
    let progress = InputProgress::new(&files, "reading inputs", progress::on_stderr());
    let read = read(&files, &mut |done, total| progress.file_done(done, total));
    progress.finish();
    read
}

/// How `--strict` treats a file cut short.
pub fn truncation(strict: bool) -> Truncation {
    if strict {
        Truncation::Error
    } else {
        Truncation::Warn
    }
}

/// [`read_compact`] with a choice of how a file cut short is treated; returns the warnings
/// instead of printing them.
pub fn read_compact_with(
    paths: &[PathBuf],
    truncation: Truncation,
    on_file: &mut dyn FnMut(usize, usize),
) -> Result<ReadOutcome, ReadError> {
    let mut outcome = read_inputs_as(paths, truncation, Detail::Compact, on_file)?;
    // I/O calls imported from programs without spans join the traces of the requests they served.
    ringtrace_analysis::io::attach_to_traces(&mut outcome.data);
    Ok(outcome)
}

/// Prints one line per warning, saying for a file cut short how to refuse such files instead.
/// A failed write to stderr is ignored: there is nowhere left to report it.
pub fn print_warnings(warnings: &[ReadWarning], out: &mut dyn Write) {
    for w in warnings {
        let hint = match w.kind() {
            ReadWarningKind::TruncatedTail { .. } => " (--strict refuses such files)",
            _ => "",
        };
        let _ = writeln!(out, "ringtrace: warning: {w}{hint}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use ringtrace_analysis::read::ReadErrorKind;
    use ringtrace_core::otlp;
    use ringtrace_core::otlp::KeyValueExt as _;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("ringtrace-cli-load-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A recording of two one-span frames with its last 4 bytes cut off.
    fn cut_recording(dir: &TempDir) -> PathBuf {
        let frame = |id: u8| otlp::TracesData {
            resource_spans: vec![otlp::ResourceSpans {
                resource: Some(otlp::Resource {
                    attributes: vec![otlp::KeyValue::string("service.name", "d")],
                    ..Default::default()
                }),
                scope_spans: vec![otlp::ScopeSpans {
                    scope: None,
                    spans: vec![otlp::Span {
                        trace_id: vec![1; 16],
                        span_id: vec![id; 8],
                        name: "op".into(),
                        start_time_unix_nano: 1,
                        end_time_unix_nano: 2,
                        ..Default::default()
                    }],
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        let mut bytes = Vec::new();
        otlp::write_delimited(&frame(1), &mut bytes).unwrap();
        otlp::write_delimited(&frame(2), &mut bytes).unwrap();
        bytes.truncate(bytes.len() - 4);
        let path = dir.0.join("cut.otlp");
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn the_progress_bar_moves_by_each_files_bytes() {
        let dir = TempDir::new("progress");
        let first = cut_recording(&dir);
        let second = dir.0.join("second.otlp");
        std::fs::copy(&first, &second).unwrap();
        let size = std::fs::metadata(&first).unwrap().len();
        let files = list_inputs(std::slice::from_ref(&dir.0)).unwrap();
        let progress = InputProgress::new(&files, "reading", indicatif::ProgressDrawTarget::hidden());
        let bar = &progress.bar;
        assert_eq!((bar.length(), bar.position(), bar.message()), (Some(2 * size), 0, "0/2 files".into()));
        let data = read_compact(&files, false, &mut |done, total| progress.file_done(done, total)).unwrap();
        assert_eq!(data.spans.len(), 2, "one whole span from each file");
        assert_eq!((bar.position(), bar.message()), (2 * size, "2/2 files".into()));
        progress.file_done(1, 2);
        assert_eq!(bar.position(), size, "after the first file, its bytes");
    }

    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        input: crate::input::TraceInputs,
    }

    #[test]
    fn a_cut_recording_reads_with_a_warning_and_strict_refuses_it() {
        let dir = TempDir::new("cut");
        let path = cut_recording(&dir);
        let paths = [path.clone()];

        let outcome = read_compact_with(&paths, Truncation::Warn, &mut |_, _| {}).unwrap();
        assert_eq!(outcome.data.spans.len(), 1);
        assert!(outcome.data.spans[0].attributes.is_empty());
        let mut printed = Vec::new();
        print_warnings(&outcome.warnings, &mut printed);
        let printed = String::from_utf8(printed).unwrap();
        assert!(printed.starts_with(&format!("ringtrace: warning: {}: frame 1 at byte ", path.display())));
        assert!(printed.contains("read 1 frames holding 1 spans"), "{printed}");
        assert!(printed.ends_with(" (--strict refuses such files)\n"), "{printed}");

        let err = read_compact_with(&paths, Truncation::Error, &mut |_, _| {}).unwrap_err();
        assert_eq!(err.kind(), ReadErrorKind::Truncated);

        // The shared input options: lenient by default, `--strict` refuses.
        let path = path.to_str().unwrap();
        let lenient = Args::try_parse_from(["t", path]).unwrap();
        let loaded = lenient.input.load().unwrap();
        assert_eq!(loaded.data.spans.len(), 1);
        let strict = Args::try_parse_from(["t", "--strict", path]).unwrap();
        let err = strict.input.load().err().unwrap();
        assert!(err.to_string().contains("truncated"), "{err}");
    }
}
