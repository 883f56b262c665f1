//! [`TcpStream`], [`TcpListener`] and [`UdpSocket`]: `std::net`'s, recorded.

use std::cell::Cell;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Mutex;
use std::time::Duration;

use super::{
    close_owned, fd_of, run, total_len, After, Call, Ends, Fixed, How, IpText, Known, Op, ReadHow, WriteHow,
};

/// Calls `f` with each address of `addr` until one succeeds, as `std::net` does; the last
/// error otherwise.
pub(crate) fn each_addr<T>(
    addrs: impl Iterator<Item = SocketAddr>,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for addr in addrs {
        match f(addr) {
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    Err(last
        .unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "could not resolve to any addresses")))
}

/// A TCP connection whose calls are recorded: [`std::net::TcpStream`], recording `connect`,
/// `recv` (reads), `send` (writes) and `close` spans with `network.transport = "tcp"` and both
/// ends' addresses (see [the module](super)). `flush`, which does nothing on a socket, is not
/// recorded; nor are the socket options set through [`get_ref`](TcpStream::get_ref).
///
/// ```no_run
/// use std::io::{Read, Write};
/// use ringtrace_subscriber::io::TcpStream;
///
/// let mut stream = TcpStream::connect("127.0.0.1:7000")?; // a `connect` span per address tried
/// stream.get_ref().set_nodelay(true)?;
/// stream.write_all(b"ping")?; // `send` spans
/// let mut pong = [0; 4];
/// stream.read_exact(&mut pong)?; // `recv` spans
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct TcpStream {
    /// `Some` until dropped or given back by [`into_std`](TcpStream::into_std).
    inner: Option<std::net::TcpStream>,
    local: Known,
    peer: Known,
}

impl TcpStream {
    /// Connects to `addr`, trying each of its addresses in turn: a `connect` span per address
    /// tried, with its peer.
    #[track_caller]
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        let how = How::here("connect");
        each_addr(addr.to_socket_addrs()?, |peer| {
            TcpStream::connect_as(peer, how, || std::net::TcpStream::connect(peer))
        })
    }

    /// Connects to `addr`, giving up after `timeout`: a `connect` span
    /// (`io.syscall = "connect_timeout"`).
    #[track_caller]
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        let how = How::here("connect_timeout");
        TcpStream::connect_as(*addr, how, || std::net::TcpStream::connect_timeout(addr, timeout))
    }

    fn connect_as(
        peer: SocketAddr,
        how: How,
        connect: impl FnOnce() -> io::Result<std::net::TcpStream>,
    ) -> io::Result<TcpStream> {
        let ends = Fixed { transport: "tcp", local: None, peer: Some(peer) };
        let mut local = None;
        let call = || Call::new(Op::Connect, how).ends(&ends);
        let stream = run(call, connect, |s| {
            local = s.local_addr().ok();
            After { fd: fd_of(s), local, ..After::default() }
        })?;
        Ok(TcpStream { inner: Some(stream), local: Known::new(local), peer: Known::new(Some(peer)) })
    }

    /// Wraps a connection made elsewhere (nothing is recorded).
    pub fn from_std(stream: std::net::TcpStream) -> TcpStream {
        TcpStream { inner: Some(stream), local: Known::default(), peer: Known::default() }
    }

    /// The connection, for its socket options; calls made on it directly are not recorded.
    #[inline]
    pub fn get_ref(&self) -> &std::net::TcpStream {
        match &self.inner {
            Some(stream) => stream,
            None => unreachable!("a TcpStream's stream is only taken by drop and into_std"),
        }
    }

    /// The connection, unwrapped: its `close` is no longer recorded.
    pub fn into_std(mut self) -> std::net::TcpStream {
        self.inner.take().expect("a TcpStream's stream is only taken by drop and into_std")
    }

    /// A second handle on the connection (`dup`, not recorded), with the addresses known.
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        Ok(TcpStream {
            inner: Some(self.get_ref().try_clone()?),
            local: self.local.clone(),
            peer: self.peer.clone(),
        })
    }

    /// This side's address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.get_ref().local_addr()
    }

    /// The other side's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.get_ref().peer_addr()
    }

    /// The call `how` of operation `op`, made on this connection.
    #[inline]
    fn call(&self, op: Op, how: How) -> Call<'_> {
        Call::new(op, how).fd(fd_of(self.get_ref())).ends(self)
    }
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

impl ReadHow for TcpStream {
    #[inline]
    fn read_how(&mut self, buf: &mut [u8], how: How) -> io::Result<usize> {
        let mut stream = self.get_ref();
        let asked = buf.len();
        run(|| self.call(Op::Recv, how).asked(asked), || stream.read(buf), |n| After::bytes(*n))
    }

    fn read_vectored_how(&mut self, bufs: &mut [IoSliceMut<'_>], how: How) -> io::Result<usize> {
        let mut stream = self.get_ref();
        let asked = total_len(bufs);
        run(|| self.call(Op::Recv, how).asked(asked), || stream.read_vectored(bufs), |n| After::bytes(*n))
    }
}

impl WriteHow for TcpStream {
    #[inline]
    fn write_how(&mut self, buf: &[u8], how: How) -> io::Result<usize> {
        let mut stream = self.get_ref();
        run(|| self.call(Op::Send, how).asked(buf.len()), || stream.write(buf), |n| After::bytes(*n))
    }

    fn write_vectored_how(&mut self, bufs: &[IoSlice<'_>], how: How) -> io::Result<usize> {
        let mut stream = self.get_ref();
        let call = || self.call(Op::Send, how).asked(total_len(bufs));
        run(call, || stream.write_vectored(bufs), |n| After::bytes(*n))
    }

    fn flush_how(&mut self, _how: How) -> io::Result<()> {
        self.get_ref().flush()
    }
}

/// Each call recorded as a `recv`.
impl Read for TcpStream {
    super::read_methods!();
}

/// Each call recorded as a `send`; `flush` (which does nothing on a socket) is not recorded.
impl Write for TcpStream {
    super::write_methods!();
}

/// Records the `close` (`io.syscall = "drop"`), with the connection's ends when a call recorded
/// before looked them up (so that the analysis finds the close on its connection).
impl Drop for TcpStream {
    fn drop(&mut self) {
        let ends = Fixed { transport: "tcp", local: self.local.get(), peer: self.peer.get() };
        if let Some(stream) = self.inner.take() {
            let fd = fd_of(&stream);
            let call = || Call::new(Op::Close, How::unplaced("drop")).fd(fd).ends(&ends);
            let _ = run(call, move || close_owned(stream), |()| After::default());
        }
    }
}

/// A TCP listener whose `accept` calls are recorded: [`std::net::TcpListener`], returning
/// recorded [`TcpStream`]s (see [the module](super)). Binding is not recorded.
///
/// ```no_run
/// use ringtrace_subscriber::io::TcpListener;
///
/// let listener = TcpListener::bind("127.0.0.1:7000")?;
/// let (stream, peer) = listener.accept()?; // an `accept` span with both ends
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct TcpListener {
    /// `Some` until dropped or given back by [`into_std`](TcpListener::into_std).
    inner: Option<std::net::TcpListener>,
    local: Known,
}

impl TcpListener {
    /// Binds to `addr` (not recorded).
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        Ok(TcpListener::from_std(std::net::TcpListener::bind(addr)?))
    }

    /// Wraps a listener made elsewhere.
    pub fn from_std(listener: std::net::TcpListener) -> TcpListener {
        TcpListener { inner: Some(listener), local: Known::default() }
    }

    /// The listener; calls made on it directly are not recorded.
    #[inline]
    pub fn get_ref(&self) -> &std::net::TcpListener {
        match &self.inner {
            Some(listener) => listener,
            None => unreachable!("a TcpListener's listener is only taken by drop and into_std"),
        }
    }

    /// The listener, unwrapped: its `close` is no longer recorded.
    pub fn into_std(mut self) -> std::net::TcpListener {
        self.inner.take().expect("a TcpListener's listener is only taken by drop and into_std")
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.get_ref().local_addr()
    }

    /// Accepts a connection: an `accept` span with the new connection's descriptor (as
    /// `accept(2)` returns it, and as an `strace` import records it: the calls on the connection
    /// share it), its local address and its peer.
    #[track_caller]
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let how = How::here("accept");
        let listener = self.get_ref();
        let mut local = None;
        let call = || Call::new(Op::Accept, how).ends(self);
        let (stream, peer) = run(
            call,
            || listener.accept(),
            |(s, peer)| {
                local = s.local_addr().ok();
                // The listener's address, recorded already, unless bound to a wildcard.
                let new = local.filter(|l| Some(*l) != Ends::local(self));
                After { local: new, peer: Some(*peer), fd: fd_of(s), ..After::default() }
            },
        )?;
        let stream =
            TcpStream { inner: Some(stream), local: Known::new(local), peer: Known::new(Some(peer)) };
        Ok((stream, peer))
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

/// Records the `close` (`io.syscall = "drop"`), a socket's (with its address when known).
impl Drop for TcpListener {
    fn drop(&mut self) {
        let ends = Fixed { transport: "tcp", local: self.local.get(), peer: None };
        if let Some(listener) = self.inner.take() {
            let fd = fd_of(&listener);
            let call = || Call::new(Op::Close, How::unplaced("drop")).fd(fd).ends(&ends);
            let _ = run(call, move || close_owned(listener), |()| After::default());
        }
    }
}

/// A UDP socket whose calls are recorded: [`std::net::UdpSocket`], recording `connect`, `send`
/// (`send`, `send_to`), `recv` (`recv`, `recv_from`) and `close` spans with
/// `network.transport = "udp"`, this side's address and the peer: the connected one, the one
/// sent to or the one received from (see [the module](super)). Binding is not recorded.
///
/// ```no_run
/// use ringtrace_subscriber::io::UdpSocket;
///
/// let socket = UdpSocket::bind("127.0.0.1:0")?;
/// socket.send_to(b"ping", "127.0.0.1:7001")?; // a `send` span with its peer
/// let mut buf = [0; 1500];
/// let (n, from) = socket.recv_from(&mut buf)?; // a `recv` span with its peer
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct UdpSocket {
    /// `Some` until dropped or given back by [`into_std`](UdpSocket::into_std).
    inner: Option<std::net::UdpSocket>,
    /// Changed by `connect`: the local address may change with it.
    ends: Mutex<UdpEnds>,
}

#[derive(Clone, Copy, Debug, Default)]
struct UdpEnds {
    /// `None` until looked up.
    local: Option<Option<SocketAddr>>,
    /// The connected peer.
    peer: Option<SocketAddr>,
    /// Their IP addresses' text, made when a recorded span first needs it.
    local_ip: Option<IpText>,
    peer_ip: Option<IpText>,
}

impl UdpEnds {
    /// This side's address, looked up on `socket` the first time.
    fn local(&mut self, socket: &std::net::UdpSocket) -> Option<SocketAddr> {
        *self.local.get_or_insert_with(|| socket.local_addr().ok())
    }
}

/// Which peer a UDP call has.
#[derive(Clone, Copy)]
enum UdpPeer {
    /// The connected one.
    Connected,
    /// This one (`send_to`).
    To(SocketAddr),
    /// The one it returns (`recv_from`): recorded after the call.
    Returned,
}

/// A UDP socket's ends for one call, looked up once under the lock, with their text.
struct UdpView<'a> {
    socket: &'a UdpSocket,
    peer: UdpPeer,
    seen: Cell<Option<UdpSeen>>,
}

/// What a call's span records of a UDP socket's ends: both taken under one lock, so that a
/// `connect` on another thread cannot pair one end's address with another's text.
#[derive(Clone, Copy)]
struct UdpSeen {
    local: Option<SocketAddr>,
    peer: Option<SocketAddr>,
    local_ip: Option<IpText>,
    peer_ip: Option<IpText>,
}

impl UdpView<'_> {
    fn ends(&self) -> UdpSeen {
        if let Some(seen) = self.seen.get() {
            return seen;
        }
        let mut ends = self.socket.ends();
        let local = ends.local(self.socket.get_ref());
        // Made once a socket (until `connect` changes the ends), as a TCP stream's.
        let local_ip = local.map(|a| *ends.local_ip.get_or_insert_with(|| IpText::new(a.ip())));
        let (peer, peer_ip) = match self.peer {
            UdpPeer::Connected => {
                let peer = ends.peer;
                (peer, peer.map(|a| *ends.peer_ip.get_or_insert_with(|| IpText::new(a.ip()))))
            }
            // Another peer for each call: formatted for its span.
            UdpPeer::To(a) => (Some(a), Some(IpText::new(a.ip()))),
            UdpPeer::Returned => (None, None),
        };
        let seen = UdpSeen { local, peer, local_ip, peer_ip };
        self.seen.set(Some(seen));
        seen
    }
}

impl Ends for UdpView<'_> {
    fn transport(&self) -> &'static str {
        "udp"
    }
    fn local(&self) -> Option<SocketAddr> {
        self.ends().local
    }
    fn peer(&self) -> Option<SocketAddr> {
        self.ends().peer
    }
    fn local_ip(&self) -> Option<IpText> {
        self.ends().local_ip
    }
    fn peer_ip(&self) -> Option<IpText> {
        self.ends().peer_ip
    }
}

impl UdpSocket {
    /// Binds to `addr` (not recorded).
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        Ok(UdpSocket::from_std(std::net::UdpSocket::bind(addr)?))
    }

    /// Wraps a socket made elsewhere (its connected peer, if any, is looked up now).
    pub fn from_std(socket: std::net::UdpSocket) -> UdpSocket {
        let peer = socket.peer_addr().ok();
        UdpSocket { inner: Some(socket), ends: Mutex::new(UdpEnds { peer, ..UdpEnds::default() }) }
    }

    /// The socket, for its options; calls made on it directly are not recorded.
    #[inline]
    pub fn get_ref(&self) -> &std::net::UdpSocket {
        match &self.inner {
            Some(socket) => socket,
            None => unreachable!("a UdpSocket's socket is only taken by drop and into_std"),
        }
    }

    /// The socket, unwrapped: its `close` is no longer recorded.
    pub fn into_std(mut self) -> std::net::UdpSocket {
        self.inner.take().expect("a UdpSocket's socket is only taken by drop and into_std")
    }

    /// A second handle on the socket (`dup`, not recorded), with the addresses known now.
    pub fn try_clone(&self) -> io::Result<UdpSocket> {
        let ends = *self.ends();
        Ok(UdpSocket { inner: Some(self.get_ref().try_clone()?), ends: Mutex::new(ends) })
    }

    /// This side's address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.get_ref().local_addr()
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.get_ref().peer_addr()
    }

    /// Sets the peer of [`send`](UdpSocket::send) and [`recv`](UdpSocket::recv), trying each of
    /// `addr`'s addresses in turn: a `connect` span per address tried.
    #[track_caller]
    pub fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        let how = How::here("connect");
        let socket = self.get_ref();
        each_addr(addr.to_socket_addrs()?, |peer| {
            let ends = Fixed { transport: "udp", local: None, peer: Some(peer) };
            let call = || Call::new(Op::Connect, how).fd(fd_of(socket)).ends(&ends);
            let mut local = None;
            run(
                call,
                || socket.connect(peer),
                |()| {
                    local = socket.local_addr().ok();
                    After { local, ..After::default() }
                },
            )?;
            *self.ends() = UdpEnds { local: local.map(Some), peer: Some(peer), ..UdpEnds::default() };
            Ok(())
        })
    }

    /// Sends `buf` to the connected peer: a `send` span.
    #[track_caller]
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        let how = How::here("send");
        let view = self.view(UdpPeer::Connected);
        run(
            || self.call(Op::Send, how, &view).asked(buf.len()),
            || self.get_ref().send(buf),
            |n| After::bytes(*n),
        )
    }

    /// Receives from the connected peer: a `recv` span.
    #[track_caller]
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let how = How::here("recv");
        let view = self.view(UdpPeer::Connected);
        let asked = buf.len();
        run(
            || self.call(Op::Recv, how, &view).asked(asked),
            || self.get_ref().recv(buf),
            |n| After::bytes(*n),
        )
    }

    /// Sends `buf` to `addr` (its first address): a `send` span with that peer.
    #[track_caller]
    pub fn send_to(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<usize> {
        let how = How::here("send_to");
        let Some(to) = addr.to_socket_addrs()?.next() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no addresses to send data to"));
        };
        let view = self.view(UdpPeer::To(to));
        run(
            || self.call(Op::Send, how, &view).asked(buf.len()),
            || self.get_ref().send_to(buf, to),
            |n| After::bytes(*n),
        )
    }

    /// Receives a datagram and its sender: a `recv` span with that peer.
    #[track_caller]
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let how = How::here("recv_from");
        let view = self.view(UdpPeer::Returned);
        let asked = buf.len();
        run(
            || self.call(Op::Recv, how, &view).asked(asked),
            || self.get_ref().recv_from(buf),
            |(n, from)| After { peer: Some(*from), ..After::bytes(*n) },
        )
    }

    /// Its ends, locked (a thread that panicked holding them left them whole: they are plain
    /// values).
    fn ends(&self) -> std::sync::MutexGuard<'_, UdpEnds> {
        self.ends.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn view(&self, peer: UdpPeer) -> UdpView<'_> {
        UdpView { socket: self, peer, seen: Cell::new(None) }
    }

    fn call<'a>(&'a self, op: Op, how: How, view: &'a UdpView<'a>) -> Call<'a> {
        Call::new(op, how).fd(fd_of(self.get_ref())).ends(view)
    }
}

/// Records the `close` (`io.syscall = "drop"`).
impl Drop for UdpSocket {
    fn drop(&mut self) {
        let ends = Fixed { transport: "udp", local: None, peer: None };
        if let Some(socket) = self.inner.take() {
            let fd = fd_of(&socket);
            let call = || Call::new(Op::Close, How::unplaced("drop")).fd(fd).ends(&ends);
            let _ = run(call, move || close_owned(socket), |()| After::default());
        }
    }
}

#[cfg(unix)]
mod fd_impls {
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

    use super::{TcpListener, TcpStream, UdpSocket};

    macro_rules! fd_impls {
        ($($ty:ty),*) => {$(
            impl AsRawFd for $ty {
                fn as_raw_fd(&self) -> RawFd {
                    self.get_ref().as_raw_fd()
                }
            }
            impl AsFd for $ty {
                fn as_fd(&self) -> BorrowedFd<'_> {
                    self.get_ref().as_fd()
                }
            }
        )*};
    }

    fd_impls!(TcpStream, TcpListener, UdpSocket);
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::{Ends, UdpPeer, UdpSocket, UdpView};

    /// A UDP socket keeps its connected peer's text once made, and forgets it (and the local
    /// address, which may change with the route) when it connects elsewhere.
    #[test]
    fn a_udp_socket_forgets_its_ends_text_when_it_connects_again() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let others = [UdpSocket::bind("127.0.0.1:0").unwrap(), UdpSocket::bind("127.0.0.1:0").unwrap()];
        for other in &others {
            socket.connect(other.local_addr().unwrap()).unwrap();
            assert!(socket.ends().peer_ip.is_none() && socket.ends().local_ip.is_none());
            let v = UdpView { socket: &socket, peer: UdpPeer::Connected, seen: Cell::new(None) };
            assert_eq!(v.peer(), Some(other.local_addr().unwrap()));
            assert_eq!(v.peer_ip().unwrap().as_str(), "127.0.0.1");
            assert_eq!(v.local_ip().unwrap().as_str(), "127.0.0.1");
            let ends = *socket.ends();
            assert!(ends.peer_ip.is_some() && ends.local_ip.is_some(), "kept once made");
            assert_eq!(ends.peer, Some(other.local_addr().unwrap()));
        }
    }
}
