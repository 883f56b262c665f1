//! The recording sink: OTLP on disk, one file per process.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;

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
///
/// Frames are encoded on the drain thread and written by a thread of the sink's own, so that a
/// write held up by the file system (page-cache writeback, the journal) does not stop the drain
/// from emptying the rings meanwhile. At most 32 frames wait for it; beyond
/// that the drain waits.
pub struct RecordingSink {
    path: PathBuf,
    out: Pipe,
    counters_written: Option<crate::stats::Stats>,
    encoder: SpanEncoder,
}

/// Frames handed to the writer thread and not yet written, at most.
const FRAMES_IN_FLIGHT: usize = 32;

enum Job {
    Write(Vec<u8>),
    /// Write everything before, `fdatasync`, answer.
    Sync(SyncSender<std::io::Result<()>>),
}

/// The drain's end of the writer thread: a `Write` whose bytes the thread writes to the file.
struct Pipe {
    jobs: Option<SyncSender<Job>>,
    /// Buffers the writer is done with, for reuse.
    spare: Receiver<Vec<u8>>,
    /// The first write error the writer met (it stops writing then).
    failed: Receiver<std::io::Error>,
    /// That error, once received: every later export fails with it, so no frame is lost
    /// without an error.
    broken: Option<String>,
    thread: Option<JoinHandle<()>>,
}

impl Pipe {
    fn spawn(mut file: File, path: &Path) -> std::io::Result<Self> {
        let (jobs, rx) = mpsc::sync_channel::<Job>(FRAMES_IN_FLIGHT);
        let (spare_tx, spare) = mpsc::sync_channel::<Vec<u8>>(FRAMES_IN_FLIGHT);
        let (failed_tx, failed) = mpsc::sync_channel::<std::io::Error>(1);
        let name = format!("ringtrace-rec-{}", path.file_name().and_then(|n| n.to_str()).unwrap_or(""));
        let thread = std::thread::Builder::new().name(name.chars().take(15).collect()).spawn(move || {
            let mut broken = false;
            for job in rx {
                match job {
                    Job::Write(buf) => {
                        if !broken {
                            if let Err(e) = file.write_all(&buf) {
                                broken = true;
                                let _ = failed_tx.try_send(e);
                            }
                        }
                        let _ = spare_tx.try_send(buf);
                    }
                    Job::Sync(reply) => {
                        let result = if broken {
                            Err(std::io::Error::other("an earlier write to the recording failed"))
                        } else {
                            file.sync_data()
                        };
                        let _ = reply.send(result);
                    }
                }
            }
        })?;
        Ok(Self { jobs: Some(jobs), spare, failed, broken: None, thread: Some(thread) })
    }

    fn send(&mut self, job: Job) -> std::io::Result<()> {
        if let Ok(e) = self.failed.try_recv() {
            self.broken = Some(format!("writing the recording failed: {e}"));
        }
        if let Some(msg) = &self.broken {
            return Err(std::io::Error::other(msg.clone()));
        }
        self.jobs.as_ref().ok_or_else(writer_gone)?.send(job).map_err(|_| writer_gone())
    }

    /// Waits until everything sent is written and synced to disk.
    fn sync(&mut self) -> std::io::Result<()> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(Job::Sync(tx))?;
        rx.recv().unwrap_or_else(|_| Err(writer_gone()))
    }
}

fn writer_gone() -> std::io::Error {
    std::io::Error::other("the recording's writer thread has stopped")
}

impl Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let mut owned = self.spare.try_recv().unwrap_or_default();
        owned.clear();
        owned.extend_from_slice(buf);
        self.send(Job::Write(owned))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // The writer writes what it was given, then stops.
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl RecordingSink {
    /// Creates the directory if needed and the process's file in it (truncating an old one).
    pub fn create(dir: &Path, node: &str, daemon: &str, pid: u32) -> std::io::Result<Self> {
        fs::create_dir_all(dir)?;
        let name = format!("{}_{}_{}.otlp", sanitize(node), sanitize(daemon), pid);
        let path = dir.join(name);
        let file = File::create(&path)?;
        let out = Pipe::spawn(file, &path)?;
        Ok(Self { path, out, counters_written: None, encoder: SpanEncoder::default() })
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
        self.out.sync()?;
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A write error met by the writer thread fails the sync that follows and every later
    /// write: no frame is dropped without an error reaching the drain.
    #[test]
    fn a_failed_write_fails_every_later_export() {
        let path = Path::new("/dev/full");
        let mut pipe = Pipe::spawn(fs::OpenOptions::new().write(true).open(path).unwrap(), path).unwrap();
        pipe.write_all(&[1; 4096]).unwrap();
        assert!(pipe.sync().is_err(), "the write to /dev/full failed");
        for _ in 0..3 {
            let err = pipe.write_all(b"more").unwrap_err();
            assert!(err.to_string().contains("writing the recording failed"), "{err}");
        }
    }
}
