//! The worker daemon: stores block replicas as files and counts their words.
//!
//! | request | span (server)  | children                     |
//! |---------|----------------|------------------------------|
//! | `STORE` | `handle_store` | `disk_write`                 |
//! | `FETCH` | `handle_fetch` | `disk_read`                  |
//! | `MAP`   | `handle_map`   | `disk_read`, `count_words`   |
//!
//! Disk I/O goes through `ringtrace::io`: each `open`, `read` and `write` is an I/O span inside
//! its `disk_*` span, with the block's path and this file's line. A slow worker (`--slow`) has a
//! slow disk: the first read or write of each opened block waits first, inside that call's span,
//! so the delay shows where a real slow disk's would — and `ringtrace bottlenecks` names the call,
//! the file and the line.

use std::fs;
use std::io::{self, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ringtrace_subscriber::io::{File, Traced};

use anyhow::Context as _;
use ringtrace_core::propagation::TraceContext;
use tracing::{info, info_span, warn};

use crate::message::{Request, Response};
use crate::rpc::{server_span, Handler};
use crate::workload::{count_words, top_words, validate_key};

/// The target of this module's spans and events, as the crate docs' "Spans" section says.
const TARGET: &str = "ringtrace::demo::worker";

/// A worker's state: where its blocks live and how slow its disk is.
#[derive(Debug)]
pub(crate) struct Worker {
    data_dir: PathBuf,
    io_delay: Option<Duration>,
}

impl Worker {
    /// A worker keeping its blocks under `data_dir` (created if missing), adding `io_delay` to
    /// every disk operation when given.
    pub(crate) fn new(data_dir: PathBuf, io_delay: Option<Duration>) -> anyhow::Result<Self> {
        fs::create_dir_all(&data_dir)
            .with_context(|| format!("creating the data directory {}", data_dir.display()))?;
        Ok(Self { data_dir, io_delay })
    }

    fn handle_store(&self, ctx: Option<TraceContext>, key: String, text: String) -> Response {
        let span = info_span!(
            target: TARGET,
            parent: None,
            "handle_store",
            otel.kind = "server",
            key = %key,
            bytes = text.len(),
        );
        let _entered = server_span(span, ctx.as_ref());
        if let Err(message) = validate_key(&key) {
            warn!(target: TARGET, %message, "refused");
            return Response::Error { message };
        }
        match self.disk_write(&key, &text) {
            Ok(()) => {
                info!(target: TARGET, bytes = text.len(), "block stored");
                Response::Ok
            }
            Err(e) => failure("store", &e),
        }
    }

    fn handle_fetch(&self, ctx: Option<TraceContext>, key: String) -> Response {
        let span = info_span!(target: TARGET, parent: None, "handle_fetch", otel.kind = "server", key = %key);
        let _entered = server_span(span, ctx.as_ref());
        if let Err(message) = validate_key(&key) {
            warn!(target: TARGET, %message, "refused");
            return Response::Error { message };
        }
        match self.disk_read(&key) {
            Ok(Some(text)) => Response::Block { text },
            Ok(None) => {
                warn!(target: TARGET, "block not found");
                Response::NotFound { key }
            }
            Err(e) => failure("fetch", &e),
        }
    }

    fn handle_map(&self, ctx: Option<TraceContext>, key: String) -> Response {
        let span = info_span!(target: TARGET, parent: None, "handle_map", otel.kind = "server", key = %key);
        let _entered = server_span(span, ctx.as_ref());
        if let Err(message) = validate_key(&key) {
            warn!(target: TARGET, %message, "refused");
            return Response::Error { message };
        }
        match self.disk_read(&key) {
            Ok(Some(text)) => {
                let (total_words, counts) = count_block_words(&text);
                let distinct = counts.len();
                Response::Counts { total_words, words: top_words(counts, distinct) }
            }
            Ok(None) => {
                warn!(target: TARGET, "block not found");
                Response::NotFound { key }
            }
            Err(e) => failure("map", &e),
        }
    }

    /// Writes a block atomically (a temporary file renamed over the old one), so a concurrent
    /// read sees the old or the new block, never half of one.
    #[tracing::instrument(
        target = TARGET,
        name = "disk_write",
        skip_all,
        fields(key = %key, bytes = text.len(), injected_delay_ms = self.delay_ms()),
    )]
    fn disk_write(&self, key: &str, text: &str) -> anyhow::Result<()> {
        let path = self.data_dir.join(key);
        let tmp = self.data_dir.join(format!(".{key}.tmp"));
        let file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut disk = self.disk(file, &tmp);
        disk.write_all(text.as_bytes()).with_context(|| format!("writing {}", tmp.display()))?;
        drop(disk);
        fs::rename(&tmp, &path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
    }

    /// Reads a block; `None` if this worker holds no block under `key`.
    #[tracing::instrument(
        target = TARGET,
        name = "disk_read",
        skip_all,
        fields(key = %key, bytes = tracing::field::Empty, injected_delay_ms = self.delay_ms()),
    )]
    fn disk_read(&self, key: &str) -> anyhow::Result<Option<String>> {
        let path = self.data_dir.join(key);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
        };
        let mut bytes = Vec::new();
        self.disk(file, &path)
            .read_to_end(&mut bytes)
            .with_context(|| format!("reading {}", path.display()))?;
        let text = String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
        tracing::Span::current().record("bytes", text.len());
        Ok(Some(text))
    }

    /// An opened block on this worker's disk: slow for a slow worker.
    fn disk(&self, file: File, path: &Path) -> Traced<SlowDisk> {
        Traced::with_fd(SlowDisk { file: file.into_std(), delay: self.io_delay }).with_path(path)
    }

    fn delay_ms(&self) -> u64 {
        self.io_delay.map_or(0, |d| d.as_millis() as u64)
    }
}

/// A file on a disk that waits `delay` before the first read or write of each opened file (a
/// seek on a slow device).
struct SlowDisk {
    file: fs::File,
    delay: Option<Duration>,
}

impl SlowDisk {
    fn wait(&mut self) {
        if let Some(delay) = self.delay.take() {
            std::thread::sleep(delay);
        }
    }
}

impl io::Read for SlowDisk {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.wait();
        self.file.read(buf)
    }
}

impl io::Write for SlowDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.wait();
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl std::os::fd::AsRawFd for SlowDisk {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }
}

/// Counts a block's words, in a `count_words` span.
#[tracing::instrument(
    target = TARGET,
    name = "count_words",
    skip_all,
    fields(bytes = text.len(), words = tracing::field::Empty, distinct = tracing::field::Empty),
)]
fn count_block_words(text: &str) -> (u64, std::collections::HashMap<String, u64>) {
    let (total, counts) = count_words(text);
    let span = tracing::Span::current();
    span.record("words", total);
    span.record("distinct", counts.len());
    (total, counts)
}

fn failure(op: &str, e: &anyhow::Error) -> Response {
    let message = format!("{op} failed: {e:#}");
    warn!(target: TARGET, error = %message, "request failed");
    Response::Error { message }
}

impl Handler for Worker {
    fn handle(&self, ctx: Option<TraceContext>, req: Request) -> Response {
        match req {
            Request::Store { key, text } => self.handle_store(ctx, key, text),
            Request::Fetch { key } => self.handle_fetch(ctx, key),
            Request::Map { key } => self.handle_map(ctx, key),
            other => {
                let message = format!("a worker does not serve {}", other.method());
                warn!(target: TARGET, %message, "refused");
                Response::Error { message }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ringtrace-demo-worker-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn store_fetch_and_map_use_real_files() {
        let dir = scratch("files");
        let w = Worker::new(dir.clone(), None).unwrap();
        let put = Request::Store { key: "b1".into(), text: "Ring ring span.".into() };
        assert_eq!(w.handle(None, put), Response::Ok);
        assert_eq!(fs::read_to_string(dir.join("b1")).unwrap(), "Ring ring span.");
        assert_eq!(
            w.handle(None, Request::Fetch { key: "b1".into() }),
            Response::Block { text: "Ring ring span.".into() }
        );
        assert_eq!(
            w.handle(None, Request::Map { key: "b1".into() }),
            Response::Counts { total_words: 3, words: vec![("ring".into(), 2), ("span".into(), 1)] }
        );
        assert_eq!(
            w.handle(None, Request::Fetch { key: "b2".into() }),
            Response::NotFound { key: "b2".into() }
        );
        assert!(matches!(w.handle(None, Request::Fetch { key: "../b1".into() }), Response::Error { .. }));
        assert!(matches!(w.handle(None, Request::Get { key: "b1".into() }), Response::Error { .. }));
        let _ = fs::remove_dir_all(&dir);
    }
}
