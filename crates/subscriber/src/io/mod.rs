//! I/O calls as spans: files, sockets and any reader or writer, wrapped so that each call — an
//! `open`, a `read`, a `send` — is recorded as a span of its own, with the attributes of
//! `docs/io-records.md` (what the analysis's `ringtrace io` views read back).
//!
//! ```
//! use std::io::{Read, Write};
//! use ringtrace_subscriber::io::File;
//!
//! # fn main() -> std::io::Result<()> {
//! let path = std::env::temp_dir().join(format!("ringtrace-io-doc-{}", std::process::id()));
//! let _request = tracing::info_span!("handle_put", request.id = "req-7").entered();
//! let mut file = File::create(&path)?; // span `open`: file.path, io.fd, this line
//! file.write_all(b"block")?; //           span `write`: io.bytes_asked 5, io.bytes 5
//! file.sync_all()?; //                     span `fsync`
//! drop(file); //                           span `close`
//! let mut text = String::new();
//! File::open(&path)?.read_to_string(&mut text)?; // `open`, `read`s, `close`
//! assert_eq!(text, "block");
//! # std::fs::remove_file(&path)
//! # }
//! ```
//!
//! - [`File`] (with [`OpenOptions`]): `open`, `read`, `write`, `pread`/`pwrite`
//!   ([`File::read_at`], [`File::write_at`], Unix), `fsync` ([`File::sync_all`],
//!   [`File::sync_data`]) and `close` (dropped, or [`File::close`] to see the error); seeking is
//!   not recorded.
//! - [`TcpStream`] (`connect`, `recv`, `send`, `close`), [`TcpListener`] (`accept`) and
//!   [`UdpSocket`] (`connect`, `send`, `recv`; `send_to`, `recv_from`), with
//!   `network.transport` and both ends' addresses.
//! - [`Traced`]: any [`Read`] or [`Write`] (`read`, `write`; `flush` as a `write`), with a file
//!   descriptor and a path when given.
//! - `tokio` (feature `io-tokio`): tokio's `File`, `TcpStream` and `TcpListener`, and [`Traced`]
//!   over `AsyncRead`/`AsyncWrite`.
//!
//! # The spans
//! Each call is a `tracing` span with target [`TARGET`] (`ringtrace::io`), level `INFO` and the
//! operation as its name, created just before the call and closed just after it; it is a child
//! of the current span, so the call belongs to that span's trace and request. Its fields:
//!
//! | field | value |
//! |---|---|
//! | `io.op` | `open`, `read`, `write`, `pread`, `pwrite`, `send`, `recv`, `connect`, `accept`, `fsync`, `close` |
//! | `io.syscall` | the Rust method called: `read`, `read_exact`, `write_all`, `read_at`, `sync_data`, `drop`, `poll_read`… |
//! | `io.fd` | the file descriptor (Unix) |
//! | `io.bytes_asked`, `io.bytes` | the buffer's length and the bytes moved (0 when the call failed), for reads and writes |
//! | `io.offset` | the offset of `pread`/`pwrite` |
//! | `file.path` | the file's path as it was opened |
//! | `network.transport`, `network.{local,peer}.{address,port}` | `tcp` or `udp`, and both ends of the socket |
//! | `error.type` | the [`io::ErrorKind`] of a failed call (`NotFound`, `WouldBlock`, `ConnectionRefused`) |
//! | `otel.status_code`, `otel.status_message` | `error` and the error's text when the call failed: the span's status |
//! | `code.file.path`, `code.line.number` | the code that made the call |
//!
//! One span is recorded per call made on the wrapped object: `read_exact`, `write_all`,
//! `read_to_end` or `write!` record each `read` or `write` they make, every one with the method
//! called in `io.syscall` and its caller's location. Every recording method is
//! `#[track_caller]`: the location is [`Location::caller`], no backtrace is taken. A wrapper
//! dropped records its `close` without a location; `poll_*` calls of the async traits have none
//! either (the async wrappers' own `read`, `write`… methods do).
//!
//! Socket addresses are looked up (`getsockname`, `getpeername`) once per socket, the first
//! time a recorded span needs them, or taken from `connect` and `accept`; their text is made
//! the first time a recorded span needs it, and the socket's later spans record it without
//! formatting it again (a UDP peer given to `send_to` or returned by `recv_from` is formatted
//! for its span). The addresses are recorded as strings, as the spans' other text is. Paths are
//! kept as opened. When nobody records `ringtrace::io` spans, a call costs the wrapped call plus one
//! check: of the maximum level when there is no subscriber, of the callsite's interest when a
//! level or target filter or a paused ringtrace leaves them out. No field is computed.
//!
//! # Performance
//! Per call, one thread, on a busy 2-core VM (`cargo bench -p ringtrace-subscriber --bench io`):
//!
//! | | 1-byte `read` of `/dev/zero` | 1-byte `write` to `/dev/null` |
//! |---|---|---|
//! | `std::fs::File` | 191 ns | 176 ns |
//! | [`File`], no subscriber | 195 ns | 184 ns |
//! | [`File`], a subscriber leaving `ringtrace::io` out | 198 ns | 195 ns |
//! | [`File`], recorded by a [`RingSubscriber`](crate::RingSubscriber) into a raw recording | 381 ns | 391 ns |
//!
//! A recorded call costs about 190–215 ns more than the call (an empty span recorded by the
//! same subscriber: 72 ns): its span with nine fields, four of them strings, one update
//! (`io.bytes`) and the close.

mod file;
mod net;
#[cfg(feature = "io-tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "io-tokio")))]
pub mod tokio;

use std::io::{self, IoSlice, IoSliceMut, Read, Seek, SeekFrom, Write};
use std::net::{IpAddr, SocketAddr};
use std::panic::Location;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use tracing::field::{debug, display, Empty};
use tracing::{Level, Span};

pub use file::{File, OpenOptions};
pub use net::{TcpListener, TcpStream, UdpSocket};

/// The target of every span the wrappers record.
pub const TARGET: &str = "ringtrace::io";

/// What a call does: `io.op` and the span's name.
pub(crate) use ringtrace_core::io::IoOp as Op;

/// How a call was made: the Rust method (`io.syscall`) and the code that called it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct How {
    syscall: &'static str,
    caller: Option<&'static Location<'static>>,
}

impl How {
    /// `syscall`, called by the caller of the `#[track_caller]` function that calls this.
    #[track_caller]
    #[inline]
    pub(crate) fn here(syscall: &'static str) -> How {
        How { syscall, caller: Some(Location::caller()) }
    }

    /// `syscall`, called from no known place (a drop, a poll).
    pub(crate) const fn unplaced(syscall: &'static str) -> How {
        How { syscall, caller: None }
    }
}

/// A socket's transport and ends, looked up only for a span that is recorded.
pub(crate) trait Ends {
    /// `tcp` or `udp`.
    fn transport(&self) -> &'static str;
    /// This side's address.
    fn local(&self) -> Option<SocketAddr>;
    /// The other side's.
    fn peer(&self) -> Option<SocketAddr>;
    /// This side's IP address as recorded (`network.local.address`): made from
    /// [`local`](Ends::local) for each span, unless the socket keeps it ([`Known`]).
    fn local_ip(&self) -> Option<IpText> {
        self.local().map(|a| IpText::new(a.ip()))
    }
    /// The other side's (`network.peer.address`).
    fn peer_ip(&self) -> Option<IpText> {
        self.peer().map(|a| IpText::new(a.ip()))
    }
}

/// An IP address's text, as its `Display` writes it, kept inline: canonical (an IPv4-mapped
/// IPv6 address as the IPv4 one, `127.0.0.1` rather than `::ffff:127.0.0.1`, as the socket's
/// other end records it).
///
/// A socket's spans record its ends' addresses as this text, made once per socket ([`Known`])
/// rather than formatted for each span: with both ends formatted by `fmt` and written into
/// ring records piece by piece, a recorded `send` cost the calling thread 6,399 instructions,
/// against 3,752 now (`benches/README.md`, "I/O spans' addresses made once a socket").
#[derive(Clone, Copy)]
pub(crate) struct IpText {
    len: u8,
    bytes: [u8; IpText::CAPACITY],
}

impl IpText {
    /// The longest text of an [`IpAddr`]: eight groups of four hex digits and seven colons
    /// (39), or six groups with an IPv4 address at the end (45).
    const CAPACITY: usize = 45;

    pub(crate) fn new(ip: IpAddr) -> IpText {
        use std::fmt::Write as _;
        let mut text = IpText { len: 0, bytes: [0; IpText::CAPACITY] };
        // Cannot fail: no address is longer than the buffer.
        let _ = write!(text, "{}", ip.to_canonical());
        text
    }

    pub(crate) fn as_str(&self) -> &str {
        // SAFETY: `bytes[..len]` holds only whole `str`s, appended by `write_str` (which
        // writes all of one or nothing). Not `from_utf8`: its check cost every recorded socket
        // span about 110 instructions an address (callgrind, `span_loop`).
        unsafe { std::str::from_utf8_unchecked(&self.bytes[..usize::from(self.len)]) }
    }
}

impl std::fmt::Write for IpText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let start = usize::from(self.len);
        let end = start + s.len();
        let slot = self.bytes.get_mut(start..end).ok_or(std::fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end as u8;
        Ok(())
    }
}

impl std::fmt::Debug for IpText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One end of a socket: its address, given when the socket was made or looked up when a
/// recorded span first needs it, and its IP address's text, made then too. A socket's spans
/// thus neither look it up nor format it again.
#[derive(Clone, Debug, Default)]
pub(crate) struct Known {
    addr: OnceLock<Option<SocketAddr>>,
    ip: OnceLock<Option<IpText>>,
}

impl Known {
    /// An end known already (`Some`), or to look up when first needed.
    pub(crate) fn new(addr: Option<SocketAddr>) -> Known {
        match addr {
            Some(a) => Known { addr: OnceLock::from(Some(a)), ip: OnceLock::new() },
            None => Known::default(),
        }
    }

    /// The address, looked up with `look_up` the first time.
    pub(crate) fn addr(&self, look_up: impl FnOnce() -> io::Result<SocketAddr>) -> Option<SocketAddr> {
        *self.addr.get_or_init(|| look_up().ok())
    }

    /// The IP address's text, made the first time (and the address looked up with `look_up`
    /// if not known yet).
    pub(crate) fn ip(&self, look_up: impl FnOnce() -> io::Result<SocketAddr>) -> Option<IpText> {
        *self.ip.get_or_init(|| self.addr(look_up).map(|a| IpText::new(a.ip())))
    }

    /// The address if known by now, without looking it up.
    pub(crate) fn get(&self) -> Option<SocketAddr> {
        self.addr.get().copied().flatten()
    }
}

/// Ends known before the call.
pub(crate) struct Fixed {
    pub(crate) transport: &'static str,
    pub(crate) local: Option<SocketAddr>,
    pub(crate) peer: Option<SocketAddr>,
}

impl Ends for Fixed {
    fn transport(&self) -> &'static str {
        self.transport
    }
    fn local(&self) -> Option<SocketAddr> {
        self.local
    }
    fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }
}

/// One call, as known before it is made.
pub(crate) struct Call<'a> {
    op: Op,
    how: How,
    fd: Option<i64>,
    asked: Option<u64>,
    offset: Option<u64>,
    path: Option<&'a str>,
    ends: Option<&'a dyn Ends>,
}

/// What is learnt from a successful call.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct After {
    pub(crate) bytes: Option<u64>,
    pub(crate) fd: Option<i64>,
    pub(crate) local: Option<SocketAddr>,
    pub(crate) peer: Option<SocketAddr>,
}

impl After {
    /// `n` bytes moved.
    #[inline]
    pub(crate) fn bytes(n: usize) -> After {
        After { bytes: Some(n as u64), ..After::default() }
    }
}

/// The span of one call, for the operation named `$op` (one callsite per operation, since a
/// span's name is its callsite's).
macro_rules! io_span {
    ($op:literal, $c:ident) => {
        tracing::span!(
            target: TARGET,
            Level::INFO,
            $op,
            "io.op" = $op,
            "io.syscall" = $c.how.syscall,
            "io.bytes" = Empty,
            "io.bytes_asked" = $c.asked,
            "io.fd" = $c.fd,
            "io.offset" = $c.offset,
            "file.path" = $c.path,
            "network.transport" = $c.ends.map(|e| e.transport()),
            "network.local.address" = $c.ends.and_then(|e| e.local_ip()).as_ref().map(IpText::as_str),
            "network.local.port" = $c.ends.and_then(|e| e.local()).map(|a| a.port()),
            "network.peer.address" = $c.ends.and_then(|e| e.peer_ip()).as_ref().map(IpText::as_str),
            "network.peer.port" = $c.ends.and_then(|e| e.peer()).map(|a| a.port()),
            "error.type" = Empty,
            "otel.status_code" = Empty,
            "otel.status_message" = Empty,
            "code.file.path" = $c.how.caller.map(|l| l.file()),
            "code.line.number" = $c.how.caller.map(|l| l.line()),
        )
    };
}

impl<'a> Call<'a> {
    #[inline]
    pub(crate) fn new(op: Op, how: How) -> Self {
        Call { op, how, fd: None, asked: None, offset: None, path: None, ends: None }
    }

    #[inline]
    pub(crate) fn fd(mut self, fd: Option<i64>) -> Self {
        self.fd = fd;
        self
    }

    #[inline]
    pub(crate) fn asked(mut self, len: usize) -> Self {
        self.asked = Some(len as u64);
        self
    }

    #[inline]
    pub(crate) fn offset(mut self, offset: u64) -> Self {
        self.offset = Some(offset);
        self
    }

    #[inline]
    pub(crate) fn path(mut self, path: Option<&'a str>) -> Self {
        self.path = path;
        self
    }

    #[inline]
    pub(crate) fn ends(mut self, ends: &'a dyn Ends) -> Self {
        self.ends = Some(ends);
        self
    }

    /// The call's span, made whether or not anyone records it.
    fn open_span(&self) -> Span {
        let c = self;
        match self.op {
            Op::Open => io_span!("open", c),
            Op::Read => io_span!("read", c),
            Op::Write => io_span!("write", c),
            Op::Pread => io_span!("pread", c),
            Op::Pwrite => io_span!("pwrite", c),
            Op::Send => io_span!("send", c),
            Op::Recv => io_span!("recv", c),
            Op::Connect => io_span!("connect", c),
            Op::Accept => io_span!("accept", c),
            Op::Fsync => io_span!("fsync", c),
            Op::Close => io_span!("close", c),
        }
    }
}

/// Opens the span of the call `call` describes: a disabled one, with nothing computed (not even
/// `call`), when nobody records it.
#[inline]
pub(crate) fn start<'a>(call: impl FnOnce() -> Call<'a>) -> Span {
    // Without a subscriber at `INFO` or above, one load and no call.
    if tracing::level_enabled!(Level::INFO) {
        call().open_span()
    } else {
        Span::none()
    }
}

/// Makes the call `f` inside the span of the call `call` describes; `after` says what the call
/// returned (only asked for when the span is recorded).
#[inline]
pub(crate) fn run<'a, T>(
    call: impl FnOnce() -> Call<'a>,
    f: impl FnOnce() -> io::Result<T>,
    after: impl FnOnce(&T) -> After,
) -> io::Result<T> {
    if !tracing::level_enabled!(Level::INFO) {
        return f();
    }
    let call = call();
    let span = call.open_span();
    let result = f();
    end(&span, call.op, &result, after);
    result
}

/// Records how a call of operation `op` ended on its `span` (nothing when it is disabled).
#[inline]
pub(crate) fn end<T>(span: &Span, op: Op, result: &io::Result<T>, after: impl FnOnce(&T) -> After) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(v) => succeeded(span, after(v)),
        Err(e) => failed(span, op, e),
    }
}

#[inline]
fn succeeded(span: &Span, after: After) {
    if let Some(n) = after.bytes {
        span.record("io.bytes", n);
    }
    if let Some(fd) = after.fd {
        span.record("io.fd", fd);
    }
    if let Some(a) = after.local {
        span.record("network.local.address", IpText::new(a.ip()).as_str());
        span.record("network.local.port", a.port());
    }
    if let Some(a) = after.peer {
        span.record("network.peer.address", IpText::new(a.ip()).as_str());
        span.record("network.peer.port", a.port());
    }
}

#[cold]
fn failed(span: &Span, op: Op, e: &io::Error) {
    if op.moves_data() {
        span.record("io.bytes", 0u64);
    }
    span.record("error.type", debug(e.kind()));
    span.record("otel.status_code", "error");
    span.record("otel.status_message", display(e));
}

/// The file descriptor of `io` (Unix).
#[cfg(unix)]
#[inline]
pub(crate) fn fd_of<T: std::os::fd::AsRawFd + ?Sized>(io: &T) -> Option<i64> {
    Some(i64::from(io.as_raw_fd()))
}

/// No file descriptors off Unix.
#[cfg(not(unix))]
#[inline]
pub(crate) fn fd_of<T: ?Sized>(_io: &T) -> Option<i64> {
    None
}

/// Closes `io`'s descriptor, with `close`'s error (which dropping it would ignore).
#[cfg(unix)]
pub(crate) fn close_owned<T: std::os::fd::IntoRawFd>(io: T) -> io::Result<()> {
    let fd = io.into_raw_fd();
    // SAFETY: `fd` was just taken out of the value that owned it: it is open, owned here alone,
    // and closed once.
    if unsafe { libc::close(fd) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Closes `io` by dropping it.
#[cfg(not(unix))]
pub(crate) fn close_owned<T>(io: T) -> io::Result<()> {
    drop(io);
    Ok(())
}

/// Reads of a wrapper, made by a named method from a known place.
pub(crate) trait ReadHow {
    fn read_how(&mut self, buf: &mut [u8], how: How) -> io::Result<usize>;
    fn read_vectored_how(&mut self, bufs: &mut [IoSliceMut<'_>], how: How) -> io::Result<usize>;
}

/// Writes of a wrapper, made by a named method from a known place.
pub(crate) trait WriteHow {
    fn write_how(&mut self, buf: &[u8], how: How) -> io::Result<usize>;
    fn write_vectored_how(&mut self, bufs: &[IoSlice<'_>], how: How) -> io::Result<usize>;
    fn flush_how(&mut self, how: How) -> io::Result<()>;
}

/// A wrapper seen through one method and caller: `read_exact`, `write_all` and the like run
/// std's own loops over it, and each call they make is recorded as theirs.
pub(crate) struct Via<'a, T: ?Sized> {
    io: &'a mut T,
    how: How,
}

/// `io` seen as called by `syscall` from the caller of the `#[track_caller]` function calling
/// this.
#[track_caller]
#[inline]
pub(crate) fn via<'a, T: ?Sized>(io: &'a mut T, syscall: &'static str) -> Via<'a, T> {
    Via { io, how: How::here(syscall) }
}

impl<T: ReadHow + ?Sized> Read for Via<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.read_how(buf, self.how)
    }
    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.io.read_vectored_how(bufs, self.how)
    }
}

impl<T: WriteHow + ?Sized> Write for Via<'_, T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.io.write_how(buf, self.how)
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.io.write_vectored_how(bufs, self.how)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.io.flush_how(self.how)
    }
}

/// The total length of vectored buffers.
pub(crate) fn total_len<B: std::ops::Deref<Target = [u8]>>(bufs: &[B]) -> usize {
    bufs.iter().map(|b| b.len()).sum()
}

/// `Read`'s methods for a [`ReadHow`] type: each records its caller.
macro_rules! read_methods {
    () => {
        #[track_caller]
        #[inline]
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            $crate::io::ReadHow::read_how(self, buf, $crate::io::How::here("read"))
        }
        #[track_caller]
        fn read_vectored(&mut self, bufs: &mut [std::io::IoSliceMut<'_>]) -> std::io::Result<usize> {
            $crate::io::ReadHow::read_vectored_how(self, bufs, $crate::io::How::here("read_vectored"))
        }
        #[track_caller]
        fn read_exact(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
            std::io::Read::read_exact(&mut $crate::io::via(self, "read_exact"), buf)
        }
        #[track_caller]
        fn read_to_end(&mut self, buf: &mut Vec<u8>) -> std::io::Result<usize> {
            std::io::Read::read_to_end(&mut $crate::io::via(self, "read_to_end"), buf)
        }
        #[track_caller]
        fn read_to_string(&mut self, buf: &mut String) -> std::io::Result<usize> {
            std::io::Read::read_to_string(&mut $crate::io::via(self, "read_to_string"), buf)
        }
    };
}

/// `Write`'s methods for a [`WriteHow`] type: each records its caller.
macro_rules! write_methods {
    () => {
        #[track_caller]
        #[inline]
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            $crate::io::WriteHow::write_how(self, buf, $crate::io::How::here("write"))
        }
        #[track_caller]
        fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
            $crate::io::WriteHow::write_vectored_how(self, bufs, $crate::io::How::here("write_vectored"))
        }
        #[track_caller]
        fn flush(&mut self) -> std::io::Result<()> {
            $crate::io::WriteHow::flush_how(self, $crate::io::How::here("flush"))
        }
        #[track_caller]
        fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
            std::io::Write::write_all(&mut $crate::io::via(self, "write_all"), buf)
        }
        #[track_caller]
        fn write_fmt(&mut self, args: std::fmt::Arguments<'_>) -> std::io::Result<()> {
            std::io::Write::write_fmt(&mut $crate::io::via(self, "write_fmt"), args)
        }
    };
}

pub(crate) use {read_methods, write_methods};

/// Any reader or writer whose calls are recorded: `read` and `write` spans (a `flush` is
/// recorded as a `write` with `io.syscall = "flush"`, since it may write what was buffered), with
/// the file descriptor and path when given. Under the feature `io-tokio` it wraps
/// `AsyncRead`/`AsyncWrite` types too (those must be `Unpin`; pin others in a `Box`).
///
/// ```
/// use std::io::{Read, Write};
/// use ringtrace_subscriber::io::Traced;
///
/// let mut input = Traced::new(&b"abc"[..]).with_path("input.txt");
/// let mut buf = [0; 3];
/// input.read_exact(&mut buf)?; // one `read` span per read made, each at this line
/// let mut out = Traced::new(Vec::new());
/// write!(out, "{}", 42)?; // `write` spans, io.syscall = write_fmt
/// assert_eq!(out.get_ref(), b"42");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Traced<T> {
    inner: T,
    fd: Option<i64>,
    path: Option<Arc<str>>,
    #[cfg(feature = "io-tokio")]
    pending: tokio::Pending,
}

impl<T> Traced<T> {
    /// Wraps `inner`, with neither file descriptor nor path.
    pub fn new(inner: T) -> Self {
        Traced {
            inner,
            fd: None,
            path: None,
            #[cfg(feature = "io-tokio")]
            pending: tokio::Pending::default(),
        }
    }

    /// Wraps `inner`, recording its file descriptor (taken now) in `io.fd`.
    #[cfg(unix)]
    pub fn with_fd(inner: T) -> Self
    where
        T: std::os::fd::AsRawFd,
    {
        let fd = fd_of(&inner);
        Traced { fd, ..Traced::new(inner) }
    }

    /// Records `path` in `file.path` from now on.
    pub fn with_path(mut self, path: impl AsRef<Path>) -> Self {
        self.path = Some(Arc::from(path.as_ref().to_string_lossy()));
        self
    }

    /// The recorded file descriptor.
    pub fn fd(&self) -> Option<i64> {
        self.fd
    }

    /// The recorded path.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }

    /// The wrapped object.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The wrapped object; calls made on it directly are not recorded.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// The wrapped object, unwrapped.
    pub fn into_inner(self) -> T {
        self.inner
    }

    /// The call `how` of operation `op`, made on this object.
    #[inline]
    fn call(&self, op: Op, how: How) -> Call<'_> {
        Call::new(op, how).fd(self.fd).path(self.path.as_deref())
    }
}

impl<T: Read> ReadHow for Traced<T> {
    #[inline]
    fn read_how(&mut self, buf: &mut [u8], how: How) -> io::Result<usize> {
        let span = start(|| self.call(Op::Read, how).asked(buf.len()));
        let result = self.inner.read(buf);
        end(&span, Op::Read, &result, |n| After::bytes(*n));
        result
    }

    fn read_vectored_how(&mut self, bufs: &mut [IoSliceMut<'_>], how: How) -> io::Result<usize> {
        let span = start(|| self.call(Op::Read, how).asked(total_len(bufs)));
        let result = self.inner.read_vectored(bufs);
        end(&span, Op::Read, &result, |n| After::bytes(*n));
        result
    }
}

impl<T: Write> WriteHow for Traced<T> {
    #[inline]
    fn write_how(&mut self, buf: &[u8], how: How) -> io::Result<usize> {
        let span = start(|| self.call(Op::Write, how).asked(buf.len()));
        let result = self.inner.write(buf);
        end(&span, Op::Write, &result, |n| After::bytes(*n));
        result
    }

    fn write_vectored_how(&mut self, bufs: &[IoSlice<'_>], how: How) -> io::Result<usize> {
        let span = start(|| self.call(Op::Write, how).asked(total_len(bufs)));
        let result = self.inner.write_vectored(bufs);
        end(&span, Op::Write, &result, |n| After::bytes(*n));
        result
    }

    fn flush_how(&mut self, how: How) -> io::Result<()> {
        let span = start(|| self.call(Op::Write, how));
        let result = self.inner.flush();
        end(&span, Op::Write, &result, |()| After::default());
        result
    }
}

/// Each call recorded as a `read`.
impl<T: Read> Read for Traced<T> {
    read_methods!();
}

/// Each call recorded as a `write`.
impl<T: Write> Write for Traced<T> {
    write_methods!();
}

/// Not recorded.
impl<T: Seek> Seek for Traced<T> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.inner.seek(pos)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

    use super::{IpText, Known};

    #[test]
    fn an_ip_address_reads_as_its_display_canonical() {
        let cases: [(IpAddr, &str); 6] = [
            (Ipv4Addr::LOCALHOST.into(), "127.0.0.1"),
            (Ipv4Addr::new(255, 255, 255, 255).into(), "255.255.255.255"),
            (Ipv6Addr::LOCALHOST.into(), "::1"),
            // An IPv4 peer of a dual-stack socket reads as its other end records it.
            (Ipv4Addr::new(10, 0, 0, 7).to_ipv6_mapped().into(), "10.0.0.7"),
            (Ipv6Addr::from([0xffff_u16; 8]).into(), "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
            (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 1, 0, 0, 0x1).into(), "2001:db8::1:0:0:1"),
        ];
        for (ip, text) in cases {
            assert_eq!(IpText::new(ip).as_str(), text);
            assert_eq!(text, ip.to_canonical().to_string());
        }
    }

    #[test]
    fn an_end_is_looked_up_and_its_text_made_once() {
        let addr: SocketAddr = "192.168.1.20:8080".parse().unwrap();
        let lookups = Cell::new(0);
        let look_up = || {
            lookups.set(lookups.get() + 1);
            Ok(addr)
        };
        let end = Known::default();
        assert_eq!(end.get(), None, "nothing is known before the first look-up");
        assert_eq!(end.ip(look_up).map(|t| t.as_str().to_owned()).as_deref(), Some("192.168.1.20"));
        assert_eq!(end.ip(look_up).map(|t| t.as_str().to_owned()).as_deref(), Some("192.168.1.20"));
        assert_eq!(end.addr(look_up), Some(addr));
        assert_eq!(end.get(), Some(addr));
        assert_eq!(lookups.get(), 1);

        // Given when the socket was made: never looked up; a failed look-up is not retried.
        let given = Known::new(Some(addr));
        assert_eq!(
            given.ip(|| unreachable!("a given address is not looked up")).unwrap().as_str(),
            "192.168.1.20"
        );
        let failing = Known::default();
        let failed = Cell::new(0);
        let fail = || {
            failed.set(failed.get() + 1);
            Err(std::io::Error::other("not connected"))
        };
        assert!(failing.ip(fail).is_none() && failing.addr(fail).is_none());
        assert_eq!(failed.get(), 1);
    }
}
