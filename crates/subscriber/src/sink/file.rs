//! The recording sink: OTLP on disk, one file per process.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use super::{Sink, SinkError};
use crate::encode;
use crate::span_data::{ResourceInfo, SpanData};
use crate::wire::SpanEncoder;

/// Writes spans to `<dir>/<node>_<daemon>_<pid>.otlp`.
///
/// The file is a sequence of OTLP `TracesData` protobuf messages, each preceded by its length as
/// a varint (the delimited framing of the OpenTelemetry file-exporter specification). Every frame
/// repeats the process's resource with the cumulative loss counters, so the last frame holds the
/// totals; the sink writes a final frame without spans on flush so the totals are always there.
pub struct RecordingSink {
    path: PathBuf,
    out: File,
    counters_written: Option<crate::stats::Stats>,
    encoder: SpanEncoder,
}

impl RecordingSink {
    /// Creates the directory if needed and the process's file in it (truncating an old one).
    pub fn create(dir: &Path, node: &str, daemon: &str, pid: u32) -> std::io::Result<Self> {
        fs::create_dir_all(dir)?;
        let name = format!("{}_{}_{}.otlp", sanitize(node), sanitize(daemon), pid);
        let path = dir.join(name);
        let file = File::create(&path)?;
        Ok(Self { path, out: file, counters_written: None, encoder: SpanEncoder::default() })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Keeps file names portable: anything but `[A-Za-z0-9.-]` becomes `-`.
fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '-' }).collect()
}

impl Sink for RecordingSink {
    fn name(&self) -> &str {
        "recording"
    }

    fn export(&mut self, batch: &[SpanData], resource: &ResourceInfo) -> Result<(), SinkError> {
        self.encoder.write_frame(batch, &encode::resource(resource), &mut self.out)?;
        self.counters_written = Some(resource.stats);
        Ok(())
    }

    fn flush(&mut self, resource: &ResourceInfo) -> Result<(), SinkError> {
        if self.counters_written != Some(resource.stats) {
            self.encoder.write_frame(&[], &encode::resource(resource), &mut self.out)?;
            self.counters_written = Some(resource.stats);
        }
        self.out.sync_data()?;
        Ok(())
    }
}
