//! Tokio's files and TCP sockets, recorded as the `std` wrappers are, and
//! [`Traced`] over `AsyncRead`/`AsyncWrite` (feature `io-tokio`).
//!
//! A call's span runs from the first poll of the operation to the poll that returns `Ready`:
//! the time the task waited for the socket or for tokio's blocking pool is in it.
//!
//! - The wrappers' own `read`, `read_exact`, `write`, `write_all`, `sync_all`… (which a
//!   `use tokio::io::AsyncReadExt` does not shadow) are `#[track_caller]`: their spans have the
//!   caller's location. An operation dropped before it completes leaves its span without
//!   `io.bytes`.
//! - Their `AsyncRead`/`AsyncWrite` implementations, for generic code (`tokio::io::copy`,
//!   codecs), record each `poll_read`/`poll_write` operation without a location. An operation
//!   abandoned while pending is finished by the next poll of the same kind.
//!
//! A tokio [`File`]'s writes return once the data is handed to the blocking pool; its `flush`
//! (a `write` span with `io.syscall = "poll_flush"`) waits for the write to complete.
//!
//! ```no_run
//! use ringtrace_subscriber::io::tokio::{File, TcpStream};
//!
//! # async fn run() -> std::io::Result<()> {
//! let mut stream = TcpStream::connect("127.0.0.1:7000").await?; // `connect`
//! stream.write_all(b"ping").await?; // `send` spans, at this line
//! let mut pong = [0; 4];
//! stream.read_exact(&mut pong).await?; // `recv` spans
//! let mut log = File::create("/tmp/pongs").await?; // `open`
//! log.write_all(&pong).await?; // `write`
//! log.sync_data().await?; // `fsync`
//! # Ok(())
//! # }
//! ```

use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ::tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};
use tracing::Span;

use super::{end, fd_of, run, start, After, Call, Ends, Fixed, How, IpText, Known, Op, Traced};

/// The spans of the operations under way through the poll traits.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    read: Option<Span>,
    write: Option<Span>,
    flush: Option<Span>,
}

/// An async wrapper: the object it wraps and what its calls are.
trait Wrapper {
    type Io: Unpin;
    /// The operation of a read (`read` or `recv`).
    const READ: Op;
    /// The operation of a write (`write` or `send`).
    const WRITE: Op;
    /// Whether a flush can write (and is recorded as a `write`).
    const FLUSH_WRITES: bool;
    fn call(&self, op: Op, how: How) -> Call<'_>;
    fn io(&mut self) -> &mut Self::Io;
    fn pending(&mut self) -> &mut Pending;
}

async fn read_how<W: Wrapper>(w: &mut W, buf: &mut [u8], how: How) -> io::Result<usize>
where
    W::Io: AsyncRead,
{
    let span = start(|| w.call(W::READ, how).asked(buf.len()));
    let mut buf = ReadBuf::new(buf);
    let io = w.io();
    let result = poll_fn(|cx| Pin::new(&mut *io).poll_read(cx, &mut buf)).await.map(|()| buf.filled().len());
    end(&span, W::READ, &result, |n| After::bytes(*n));
    result
}

async fn read_exact_how<W: Wrapper>(w: &mut W, buf: &mut [u8], how: How) -> io::Result<usize>
where
    W::Io: AsyncRead,
{
    let mut done = 0;
    while done < buf.len() {
        match read_how(w, &mut buf[done..], how).await? {
            0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "early eof")),
            n => done += n,
        }
    }
    Ok(done)
}

async fn write_how<W: Wrapper>(w: &mut W, buf: &[u8], how: How) -> io::Result<usize>
where
    W::Io: AsyncWrite,
{
    let span = start(|| w.call(W::WRITE, how).asked(buf.len()));
    let io = w.io();
    let result = poll_fn(|cx| Pin::new(&mut *io).poll_write(cx, buf)).await;
    end(&span, W::WRITE, &result, |n| After::bytes(*n));
    result
}

async fn write_all_how<W: Wrapper>(w: &mut W, mut buf: &[u8], how: How) -> io::Result<()>
where
    W::Io: AsyncWrite,
{
    while !buf.is_empty() {
        match write_how(w, buf, how).await? {
            0 => return Err(io::Error::new(io::ErrorKind::WriteZero, "failed to write whole buffer")),
            n => buf = &buf[n..],
        }
    }
    Ok(())
}

fn poll_read_traced<W: Wrapper>(
    w: &mut W,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>>
where
    W::Io: AsyncRead,
{
    if w.pending().read.is_none() {
        let span = start(|| w.call(W::READ, How::unplaced("poll_read")).asked(buf.remaining()));
        w.pending().read = Some(span);
    }
    let before = buf.filled().len();
    let poll = Pin::new(w.io()).poll_read(cx, buf);
    if let Poll::Ready(result) = &poll {
        if let Some(span) = w.pending().read.take() {
            end(&span, W::READ, result, |()| After::bytes(buf.filled().len() - before));
        }
    }
    poll
}

fn poll_write_traced<W: Wrapper>(w: &mut W, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>>
where
    W::Io: AsyncWrite,
{
    if w.pending().write.is_none() {
        let span = start(|| w.call(W::WRITE, How::unplaced("poll_write")).asked(buf.len()));
        w.pending().write = Some(span);
    }
    let poll = Pin::new(w.io()).poll_write(cx, buf);
    if let Poll::Ready(result) = &poll {
        if let Some(span) = w.pending().write.take() {
            end(&span, W::WRITE, result, |n| After::bytes(*n));
        }
    }
    poll
}

fn poll_flush_traced<W: Wrapper>(w: &mut W, cx: &mut Context<'_>) -> Poll<io::Result<()>>
where
    W::Io: AsyncWrite,
{
    if !W::FLUSH_WRITES {
        return Pin::new(w.io()).poll_flush(cx);
    }
    if w.pending().flush.is_none() {
        let span = start(|| w.call(W::WRITE, How::unplaced("poll_flush")));
        w.pending().flush = Some(span);
    }
    let poll = Pin::new(w.io()).poll_flush(cx);
    if let Poll::Ready(result) = &poll {
        if let Some(span) = w.pending().flush.take() {
            end(&span, W::WRITE, result, |()| After::default());
        }
    }
    poll
}

/// `AsyncRead` and `AsyncWrite` for a [`Wrapper`].
macro_rules! async_io {
    ($ty:ty $(, $g:ident)?) => {
        /// Each operation recorded, from its first poll to its `Ready`, without a location.
        impl$(<$g: AsyncRead + Unpin>)? AsyncRead for $ty {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                poll_read_traced(self.get_mut(), cx, buf)
            }
        }

        /// Each operation recorded, from its first poll to its `Ready`, without a location;
        /// shutting down is not recorded.
        impl$(<$g: AsyncWrite + Unpin>)? AsyncWrite for $ty {
            fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                poll_write_traced(self.get_mut(), cx, buf)
            }
            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                poll_flush_traced(self.get_mut(), cx)
            }
            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Pin::new(self.get_mut().io()).poll_shutdown(cx)
            }
        }
    };
}

/// The async methods a wrapper records with its caller's location.
macro_rules! async_methods {
    () => {
        /// Reads into `buf`: a read span (`io.syscall = "read"`).
        #[track_caller]
        pub fn read<'a>(&'a mut self, buf: &'a mut [u8]) -> impl Future<Output = io::Result<usize>> + 'a {
            read_how(self, buf, How::here("read"))
        }

        /// Fills `buf`, failing with `UnexpectedEof` at the end of the data: a read span per
        /// read made (`io.syscall = "read_exact"`).
        #[track_caller]
        pub fn read_exact<'a>(
            &'a mut self,
            buf: &'a mut [u8],
        ) -> impl Future<Output = io::Result<usize>> + 'a {
            read_exact_how(self, buf, How::here("read_exact"))
        }

        /// Writes from `buf`: a write span (`io.syscall = "write"`).
        #[track_caller]
        pub fn write<'a>(&'a mut self, buf: &'a [u8]) -> impl Future<Output = io::Result<usize>> + 'a {
            write_how(self, buf, How::here("write"))
        }

        /// Writes all of `buf`: a write span per write made (`io.syscall = "write_all"`).
        #[track_caller]
        pub fn write_all<'a>(&'a mut self, buf: &'a [u8]) -> impl Future<Output = io::Result<()>> + 'a {
            write_all_how(self, buf, How::here("write_all"))
        }
    };
}

/// A tokio file whose calls are recorded: `open`, `read`, `write`, `fsync` and `close` spans
/// with its path (see [the module](self)). Seeking is not recorded.
#[derive(Debug)]
pub struct File {
    /// `Some` until dropped or given back by [`into_inner`](File::into_inner).
    inner: Option<::tokio::fs::File>,
    path: Arc<str>,
    pending: Pending,
}

impl File {
    /// Opens `path` for reading: an `open` span.
    #[track_caller]
    pub fn open(path: impl AsRef<Path>) -> impl Future<Output = io::Result<File>> {
        let mut options = ::tokio::fs::OpenOptions::new();
        options.read(true);
        File::open_as(options, path.as_ref().to_path_buf(), How::here("open"))
    }

    /// Creates or truncates `path` and opens it for writing: an `open` span with
    /// `io.syscall = "create"`.
    #[track_caller]
    pub fn create(path: impl AsRef<Path>) -> impl Future<Output = io::Result<File>> {
        let mut options = ::tokio::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        File::open_as(options, path.as_ref().to_path_buf(), How::here("create"))
    }

    /// Opens `path` with `options`: an `open` span.
    #[track_caller]
    pub fn open_with(
        options: &::tokio::fs::OpenOptions,
        path: impl AsRef<Path>,
    ) -> impl Future<Output = io::Result<File>> {
        File::open_as(options.clone(), path.as_ref().to_path_buf(), How::here("open"))
    }

    async fn open_as(options: ::tokio::fs::OpenOptions, path: PathBuf, how: How) -> io::Result<File> {
        let shown: Arc<str> = Arc::from(path.to_string_lossy());
        let span = start(|| Call::new(Op::Open, how).path(Some(&shown)));
        let result = options.open(&path).await;
        end(&span, Op::Open, &result, |f| After { fd: fd_of(f), ..After::default() });
        Ok(File { inner: Some(result?), path: shown, pending: Pending::default() })
    }

    /// Wraps a file opened elsewhere, with its path (nothing is recorded).
    pub fn from_tokio(file: ::tokio::fs::File, path: impl AsRef<Path>) -> File {
        let path = Arc::from(path.as_ref().to_string_lossy());
        File { inner: Some(file), path, pending: Pending::default() }
    }

    /// The path, as opened.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The file; calls made on it directly are not recorded.
    pub fn get_ref(&self) -> &::tokio::fs::File {
        match &self.inner {
            Some(file) => file,
            None => unreachable!("a File's file is only taken by drop and into_inner"),
        }
    }

    /// The file, unwrapped: its `close` is no longer recorded.
    pub fn into_inner(mut self) -> ::tokio::fs::File {
        self.inner.take().expect("a File's file is only taken by drop and into_inner")
    }

    /// Waits for a write under way, then flushes the file's data and metadata to its device: an
    /// `fsync` span (`io.syscall = "sync_all"`).
    #[track_caller]
    pub fn sync_all(&self) -> impl Future<Output = io::Result<()>> + '_ {
        let how = How::here("sync_all");
        async move {
            let span = start(|| self.call(Op::Fsync, how));
            let result = self.get_ref().sync_all().await;
            end(&span, Op::Fsync, &result, |()| After::default());
            result
        }
    }

    /// Waits for a write under way, then flushes the file's data to its device: an `fsync`
    /// span (`io.syscall = "sync_data"`).
    #[track_caller]
    pub fn sync_data(&self) -> impl Future<Output = io::Result<()>> + '_ {
        let how = How::here("sync_data");
        async move {
            let span = start(|| self.call(Op::Fsync, how));
            let result = self.get_ref().sync_data().await;
            end(&span, Op::Fsync, &result, |()| After::default());
            result
        }
    }

    async_methods!();
}

impl Wrapper for File {
    type Io = ::tokio::fs::File;
    const READ: Op = Op::Read;
    const WRITE: Op = Op::Write;
    const FLUSH_WRITES: bool = true;
    #[inline]
    fn call(&self, op: Op, how: How) -> Call<'_> {
        Call::new(op, how).fd(fd_of(self.get_ref())).path(Some(&self.path))
    }
    fn io(&mut self) -> &mut Self::Io {
        match &mut self.inner {
            Some(file) => file,
            None => unreachable!("a File's file is only taken by drop and into_inner"),
        }
    }
    fn pending(&mut self) -> &mut Pending {
        &mut self.pending
    }
}

async_io!(File);

/// Not recorded.
impl AsyncSeek for File {
    fn start_seek(self: Pin<&mut Self>, position: io::SeekFrom) -> io::Result<()> {
        Pin::new(self.get_mut().io()).start_seek(position)
    }
    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        Pin::new(self.get_mut().io()).poll_complete(cx)
    }
}

/// Records the `close` (`io.syscall = "drop"`): tokio closes the file once an operation under
/// way is over.
impl Drop for File {
    fn drop(&mut self) {
        if let Some(file) = self.inner.take() {
            let fd = fd_of(&file);
            let call = || Call::new(Op::Close, How::unplaced("drop")).fd(fd).path(Some(&self.path));
            let _ = run(
                call,
                move || {
                    drop(file);
                    Ok(())
                },
                |()| After::default(),
            );
        }
    }
}

/// A tokio TCP connection whose calls are recorded: `connect`, `recv`, `send` and `close` spans
/// with both ends' addresses (see [the module](self)). `flush` and `shutdown` are not
/// recorded.
#[derive(Debug)]
pub struct TcpStream {
    /// `Some` until dropped or given back by [`into_inner`](TcpStream::into_inner).
    inner: Option<::tokio::net::TcpStream>,
    local: Known,
    peer: Known,
    pending: Pending,
}

impl TcpStream {
    /// Connects to `addr`, trying each of its addresses in turn: a `connect` span per address
    /// tried (looking the name up is not recorded).
    #[track_caller]
    pub fn connect<A: ::tokio::net::ToSocketAddrs>(addr: A) -> impl Future<Output = io::Result<TcpStream>> {
        let how = How::here("connect");
        async move {
            let mut last = None;
            for peer in ::tokio::net::lookup_host(addr).await? {
                match TcpStream::connect_as(peer, how).await {
                    Ok(stream) => return Ok(stream),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "could not resolve to any addresses")
            }))
        }
    }

    async fn connect_as(peer: SocketAddr, how: How) -> io::Result<TcpStream> {
        let ends = Fixed { transport: "tcp", local: None, peer: Some(peer) };
        let span = start(|| Call::new(Op::Connect, how).ends(&ends));
        let result = ::tokio::net::TcpStream::connect(peer).await;
        let mut local = None;
        end(&span, Op::Connect, &result, |s| {
            local = s.local_addr().ok();
            After { fd: fd_of(s), local, ..After::default() }
        });
        Ok(TcpStream::wrap(result?, local, Some(peer)))
    }

    fn wrap(stream: ::tokio::net::TcpStream, local: Option<SocketAddr>, peer: Option<SocketAddr>) -> Self {
        TcpStream {
            inner: Some(stream),
            local: Known::new(local),
            peer: Known::new(peer),
            pending: Pending::default(),
        }
    }

    /// Wraps a connection made elsewhere (nothing is recorded).
    pub fn from_tokio(stream: ::tokio::net::TcpStream) -> TcpStream {
        TcpStream::wrap(stream, None, None)
    }

    /// The connection, for its socket options; calls made on it directly are not recorded.
    pub fn get_ref(&self) -> &::tokio::net::TcpStream {
        match &self.inner {
            Some(stream) => stream,
            None => unreachable!("a TcpStream's stream is only taken by drop and into_inner"),
        }
    }

    /// The connection, unwrapped: its `close` is no longer recorded.
    pub fn into_inner(mut self) -> ::tokio::net::TcpStream {
        self.inner.take().expect("a TcpStream's stream is only taken by drop and into_inner")
    }

    /// This side's address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.get_ref().local_addr()
    }

    /// The other side's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.get_ref().peer_addr()
    }

    async_methods!();
}

impl Ends for TcpStream {
    fn transport(&self) -> &'static str {
        "tcp"
    }
    fn local(&self) -> Option<SocketAddr> {
        self.local.addr(|| self.get_ref().local_addr())
    }
    fn peer(&self) -> Option<SocketAddr> {
        self.peer.addr(|| self.get_ref().peer_addr())
    }
    fn local_ip(&self) -> Option<IpText> {
        self.local.ip(|| self.get_ref().local_addr())
    }
    fn peer_ip(&self) -> Option<IpText> {
        self.peer.ip(|| self.get_ref().peer_addr())
    }
}

impl Wrapper for TcpStream {
    type Io = ::tokio::net::TcpStream;
    const READ: Op = Op::Recv;
    const WRITE: Op = Op::Send;
    const FLUSH_WRITES: bool = false;
    #[inline]
    fn call(&self, op: Op, how: How) -> Call<'_> {
        Call::new(op, how).fd(fd_of(self.get_ref())).ends(self)
    }
    fn io(&mut self) -> &mut Self::Io {
        match &mut self.inner {
            Some(stream) => stream,
            None => unreachable!("a TcpStream's stream is only taken by drop and into_inner"),
        }
    }
    fn pending(&mut self) -> &mut Pending {
        &mut self.pending
    }
}

async_io!(TcpStream);

/// Records the `close` (`io.syscall = "drop"`).
impl Drop for TcpStream {
    fn drop(&mut self) {
        // The connection's ends when a call recorded before looked them up, as the std stream's.
        let ends = super::Fixed { transport: "tcp", local: self.local.get(), peer: self.peer.get() };
        if let Some(stream) = self.inner.take() {
            let fd = fd_of(&stream);
            let call = || Call::new(Op::Close, How::unplaced("drop")).fd(fd).ends(&ends);
            let _ = run(
                call,
                move || {
                    drop(stream);
                    Ok(())
                },
                |()| After::default(),
            );
        }
    }
}

/// A tokio TCP listener whose `accept` calls are recorded, returning recorded [`TcpStream`]s
/// (see [the module](self)). Binding is not recorded.
#[derive(Debug)]
pub struct TcpListener {
    /// `Some` until dropped or given back by [`into_inner`](TcpListener::into_inner).
    inner: Option<::tokio::net::TcpListener>,
    local: Known,
}

impl TcpListener {
    /// Binds to `addr` (not recorded).
    pub async fn bind(addr: impl ::tokio::net::ToSocketAddrs) -> io::Result<TcpListener> {
        Ok(TcpListener::from_tokio(::tokio::net::TcpListener::bind(addr).await?))
    }

    /// Wraps a listener made elsewhere.
    pub fn from_tokio(listener: ::tokio::net::TcpListener) -> TcpListener {
        TcpListener { inner: Some(listener), local: Known::default() }
    }

    /// The listener; calls made on it directly are not recorded.
    pub fn get_ref(&self) -> &::tokio::net::TcpListener {
        match &self.inner {
            Some(listener) => listener,
            None => unreachable!("a TcpListener's listener is only taken by drop and into_inner"),
        }
    }

    /// The listener, unwrapped: its `close` is no longer recorded.
    pub fn into_inner(mut self) -> ::tokio::net::TcpListener {
        self.inner.take().expect("a TcpListener's listener is only taken by drop and into_inner")
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.get_ref().local_addr()
    }

    /// Accepts a connection: an `accept` span with the listener's descriptor, the connection's
    /// local address and its peer.
    #[track_caller]
    pub fn accept(&self) -> impl Future<Output = io::Result<(TcpStream, SocketAddr)>> + '_ {
        let how = How::here("accept");
        async move {
            let span = start(|| Call::new(Op::Accept, how).fd(fd_of(self.get_ref())).ends(self));
            let result = self.get_ref().accept().await;
            let mut local = None;
            end(&span, Op::Accept, &result, |(s, peer)| {
                local = s.local_addr().ok();
                let new = local.filter(|l| Some(*l) != Ends::local(self));
                After { local: new, peer: Some(*peer), ..After::default() }
            });
            let (stream, peer) = result?;
            Ok((TcpStream::wrap(stream, local, Some(peer)), peer))
        }
    }
}

impl Ends for TcpListener {
    fn transport(&self) -> &'static str {
        "tcp"
    }
    fn local(&self) -> Option<SocketAddr> {
        self.local.addr(|| self.get_ref().local_addr())
    }
    fn peer(&self) -> Option<SocketAddr> {
        None
    }
    fn local_ip(&self) -> Option<IpText> {
        self.local.ip(|| self.get_ref().local_addr())
    }
}

/// Records the `close` (`io.syscall = "drop"`), a socket's (with its address when known), as
/// the std listener's.
impl Drop for TcpListener {
    fn drop(&mut self) {
        let ends = super::Fixed { transport: "tcp", local: self.local.get(), peer: None };
        if let Some(listener) = self.inner.take() {
            let fd = fd_of(&listener);
            let call = || Call::new(Op::Close, How::unplaced("drop")).fd(fd).ends(&ends);
            let _ = run(
                call,
                move || {
                    drop(listener);
                    Ok(())
                },
                |()| After::default(),
            );
        }
    }
}

impl<T: Unpin> Wrapper for Traced<T> {
    type Io = T;
    const READ: Op = Op::Read;
    const WRITE: Op = Op::Write;
    const FLUSH_WRITES: bool = true;
    #[inline]
    fn call(&self, op: Op, how: How) -> Call<'_> {
        Traced::call(self, op, how)
    }
    fn io(&mut self) -> &mut T {
        &mut self.inner
    }
    fn pending(&mut self) -> &mut Pending {
        &mut self.pending
    }
}

async_io!(Traced<T>, T);
