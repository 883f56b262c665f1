//! [`File`] and [`OpenOptions`]: `std::fs`'s, recorded.

use std::io::{self, IoSlice, IoSliceMut, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use super::{close_owned, fd_of, run, total_len, After, Call, How, Op, ReadHow, WriteHow};

/// A file whose calls are recorded: [`std::fs::File`] with its path, recording `open`, `read`,
/// `write`, `pread`, `pwrite`, `fsync` and `close` spans (see [the module](super)). Seeking is
/// not recorded; neither is `flush`, which does nothing on a file.
///
/// ```
/// use std::io::{Read, Write};
/// use ringtrace_subscriber::io::File;
///
/// let path = std::env::temp_dir().join(format!("ringtrace-file-doc-{}", std::process::id()));
/// let mut file = File::options().read(true).write(true).create(true).truncate(true).open(&path)?;
/// file.write_all(b"0123456789")?;
/// # #[cfg(unix)] {
/// let mut four = [0; 4];
/// file.read_exact_at(&mut four, 3)?; // `pread` spans with io.offset
/// assert_eq!(&four, b"3456");
/// # }
/// file.sync_data()?;
/// file.close()?; // `close`, with its error if it fails
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct File {
    /// `Some` until dropped, closed or given back by [`into_std`](File::into_std).
    inner: Option<std::fs::File>,
    path: Arc<str>,
}

/// How to open a [`File`]: [`std::fs::OpenOptions`], whose [`open`](OpenOptions::open) is
/// recorded. Build one from a `std` one (`.into()`) for platform options such as a Unix mode.
#[derive(Clone, Debug)]
pub struct OpenOptions(std::fs::OpenOptions);

impl OpenOptions {
    /// Nothing set: see [`std::fs::OpenOptions::new`].
    pub fn new() -> Self {
        OpenOptions(std::fs::OpenOptions::new())
    }

    /// Open for reading.
    pub fn read(&mut self, read: bool) -> &mut Self {
        self.0.read(read);
        self
    }

    /// Open for writing.
    pub fn write(&mut self, write: bool) -> &mut Self {
        self.0.write(write);
        self
    }

    /// Open for appending.
    pub fn append(&mut self, append: bool) -> &mut Self {
        self.0.append(append);
        self
    }

    /// Truncate the file to 0 bytes.
    pub fn truncate(&mut self, truncate: bool) -> &mut Self {
        self.0.truncate(truncate);
        self
    }

    /// Create the file if it does not exist.
    pub fn create(&mut self, create: bool) -> &mut Self {
        self.0.create(create);
        self
    }

    /// Create the file, failing if it exists.
    pub fn create_new(&mut self, create_new: bool) -> &mut Self {
        self.0.create_new(create_new);
        self
    }

    /// Opens `path` with these options: an `open` span.
    #[track_caller]
    pub fn open(&self, path: impl AsRef<Path>) -> io::Result<File> {
        File::open_as(&self.0, path.as_ref(), How::here("open"))
    }
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions::new()
    }
}

impl From<std::fs::OpenOptions> for OpenOptions {
    fn from(options: std::fs::OpenOptions) -> Self {
        OpenOptions(options)
    }
}

impl File {
    /// Opens `path` for reading: an `open` span.
    #[track_caller]
    pub fn open(path: impl AsRef<Path>) -> io::Result<File> {
        File::open_as(std::fs::OpenOptions::new().read(true), path.as_ref(), How::here("open"))
    }

    /// Creates or truncates `path` and opens it for writing: an `open` span with
    /// `io.syscall = "create"`.
    #[track_caller]
    pub fn create(path: impl AsRef<Path>) -> io::Result<File> {
        let options = std::fs::OpenOptions::new().write(true).create(true).truncate(true).clone();
        File::open_as(&options, path.as_ref(), How::here("create"))
    }

    /// Options to open a file with.
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// Wraps a file opened elsewhere, with its path (nothing is recorded).
    pub fn from_std(file: std::fs::File, path: impl AsRef<Path>) -> File {
        File { inner: Some(file), path: Arc::from(path.as_ref().to_string_lossy()) }
    }

    fn open_as(options: &std::fs::OpenOptions, path: &Path, how: How) -> io::Result<File> {
        let shown = path.to_string_lossy();
        let call = || Call::new(Op::Open, how).path(Some(&shown));
        let file = run(call, || options.open(path), |f| After { fd: fd_of(f), ..After::default() })?;
        Ok(File { inner: Some(file), path: Arc::from(shown) })
    }

    /// The path, as opened.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The file; calls made on it directly are not recorded.
    #[inline]
    pub fn get_ref(&self) -> &std::fs::File {
        match &self.inner {
            Some(file) => file,
            None => unreachable!("a File's file is only taken by drop, close and into_std"),
        }
    }

    /// The file, unwrapped: its `close` is no longer recorded.
    pub fn into_std(mut self) -> std::fs::File {
        self.inner.take().expect("a File's file is only taken by drop, close and into_std")
    }

    /// A second handle on the file, with the same path (`dup`, not recorded).
    pub fn try_clone(&self) -> io::Result<File> {
        Ok(File { inner: Some(self.get_ref().try_clone()?), path: self.path.clone() })
    }

    /// The call `how` of operation `op`, made on this file.
    #[inline]
    fn call(&self, op: Op, how: How) -> Call<'_> {
        Call::new(op, how).fd(fd_of(self.get_ref())).path(Some(&self.path))
    }

    /// Flushes the file's data and metadata to its device: an `fsync` span
    /// (`io.syscall = "sync_all"`).
    #[track_caller]
    pub fn sync_all(&self) -> io::Result<()> {
        let how = How::here("sync_all");
        run(|| self.call(Op::Fsync, how), || self.get_ref().sync_all(), |()| After::default())
    }

    /// Flushes the file's data to its device: an `fsync` span (`io.syscall = "sync_data"`).
    #[track_caller]
    pub fn sync_data(&self) -> io::Result<()> {
        let how = How::here("sync_data");
        run(|| self.call(Op::Fsync, how), || self.get_ref().sync_data(), |()| After::default())
    }

    /// Closes the file: a `close` span, and `close`'s error, which dropping the file ignores
    /// (dropping it records the `close` too, without the caller's location).
    #[track_caller]
    pub fn close(mut self) -> io::Result<()> {
        let how = How::here("close");
        self.close_as(how)
    }

    fn close_as(&mut self, how: How) -> io::Result<()> {
        let Some(file) = self.inner.take() else { return Ok(()) };
        let fd = fd_of(&file);
        let call = || Call::new(Op::Close, how).fd(fd).path(Some(&self.path));
        run(call, move || close_owned(file), |()| After::default())
    }
}

#[cfg(unix)]
impl File {
    /// Reads at `offset`, leaving the file position alone: a `pread` span with `io.offset`.
    #[track_caller]
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.read_at_how(buf, offset, How::here("read_at"))
    }

    /// Writes at `offset`, leaving the file position alone: a `pwrite` span with `io.offset`.
    #[track_caller]
    pub fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.write_at_how(buf, offset, How::here("write_at"))
    }

    /// Reads exactly `buf.len()` bytes at `offset`: a `pread` span per read made.
    #[track_caller]
    pub fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        let how = How::here("read_exact_at");
        while !buf.is_empty() {
            match self.read_at_how(buf, offset, how) {
                Ok(0) => break,
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if buf.is_empty() {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::UnexpectedEof, "failed to fill whole buffer"))
        }
    }

    /// Writes all of `buf` at `offset`: a `pwrite` span per write made.
    #[track_caller]
    pub fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        let how = How::here("write_all_at");
        while !buf.is_empty() {
            match self.write_at_how(buf, offset, how) {
                Ok(0) => {
                    return Err(io::Error::new(io::ErrorKind::WriteZero, "failed to write whole buffer"));
                }
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn read_at_how(&self, buf: &mut [u8], offset: u64, how: How) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let asked = buf.len();
        let call = || self.call(Op::Pread, how).asked(asked).offset(offset);
        run(call, || self.get_ref().read_at(buf, offset), |n| After::bytes(*n))
    }

    fn write_at_how(&self, buf: &[u8], offset: u64, how: How) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let call = || self.call(Op::Pwrite, how).asked(buf.len()).offset(offset);
        run(call, || self.get_ref().write_at(buf, offset), |n| After::bytes(*n))
    }
}

impl ReadHow for File {
    #[inline]
    fn read_how(&mut self, buf: &mut [u8], how: How) -> io::Result<usize> {
        let mut file = self.get_ref();
        let asked = buf.len();
        run(|| self.call(Op::Read, how).asked(asked), || file.read(buf), |n| After::bytes(*n))
    }

    fn read_vectored_how(&mut self, bufs: &mut [IoSliceMut<'_>], how: How) -> io::Result<usize> {
        let mut file = self.get_ref();
        let asked = total_len(bufs);
        let call = || self.call(Op::Read, how).asked(asked);
        run(call, || file.read_vectored(bufs), |n| After::bytes(*n))
    }
}

impl WriteHow for File {
    #[inline]
    fn write_how(&mut self, buf: &[u8], how: How) -> io::Result<usize> {
        let mut file = self.get_ref();
        run(|| self.call(Op::Write, how).asked(buf.len()), || file.write(buf), |n| After::bytes(*n))
    }

    fn write_vectored_how(&mut self, bufs: &[IoSlice<'_>], how: How) -> io::Result<usize> {
        let mut file = self.get_ref();
        let call = || self.call(Op::Write, how).asked(total_len(bufs));
        run(call, || file.write_vectored(bufs), |n| After::bytes(*n))
    }

    fn flush_how(&mut self, _how: How) -> io::Result<()> {
        self.get_ref().flush()
    }
}

/// Each call recorded as a `read`.
impl Read for File {
    super::read_methods!();
}

/// Each call recorded as a `write`; `flush` (which does nothing on a file) is not recorded.
impl Write for File {
    super::write_methods!();
}

/// Not recorded.
impl Seek for File {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.get_ref().seek(pos)
    }
}

/// Records the `close` (`io.syscall = "drop"`).
impl Drop for File {
    fn drop(&mut self) {
        let _ = self.close_as(How::unplaced("drop"));
    }
}

#[cfg(unix)]
impl std::os::fd::AsRawFd for File {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.get_ref().as_raw_fd()
    }
}

#[cfg(unix)]
impl std::os::fd::AsFd for File {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.get_ref().as_fd()
    }
}
