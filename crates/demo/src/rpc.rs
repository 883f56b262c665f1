//! Request/response calls over TCP, with the trace context in every request frame.
//!
//! - The calling side is a [`Peer`]: it keeps a few idle connections to one remote node, and each
//!   [`Peer::call`] runs in an `rpc.call` span (`otel.kind = "client"`) whose context it writes
//!   into the request frame.
//! - The serving side is [`serve`]: an acceptor thread and one thread per connection, which read
//!   request frames, pass the decoded context and request to the node's handler, and write the
//!   response. Handlers open their span with [`server_span`], which makes the caller's span the
//!   remote parent. A malformed frame closes its connection with a `warn` event.
//! - A call sends two frames at once: its trace context, then the request. The server reads the
//!   context frame before any span exists, then opens an `rpc.serve` span (`otel.kind =
//!   "server"`) with that context as its remote parent, and reads the request, runs the handler
//!   and sends the response inside it.
//! - Network I/O goes through `ringtrace::io`: a call's `connect`, `send` and `recv` are I/O spans
//!   of its `rpc.call`, the server's reading of the request and sending of the response I/O spans
//!   of its `rpc.serve`, so `ringtrace io requests` links both ends of each exchange. Reading the
//!   context frame is not recorded (it comes before the request's span, as a server reads a
//!   request's headers), nor is closing an idle connection.

use std::io::{self, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};

use ringtrace_subscriber::io::TcpStream as TracedStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use ringtrace_core::propagation::TraceContext;
use ringtrace_subscriber::SpanExt as _;
use tracing::{info_span, warn, Span};

use crate::frame::{read_frame, write_frame};
use crate::message::{decode_context, decode_request, encode_context, encode_request, Request, Response};

/// The target of this module's spans and events, as the crate docs' "Spans" section says.
const TARGET: &str = "ringtrace::demo::rpc";

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Idle connections kept per peer.
const MAX_IDLE: usize = 8;

/// A remote node this process sends requests to.
#[derive(Debug)]
pub(crate) struct Peer {
    node: String,
    addr: SocketAddr,
    timeout: Duration,
    idle: Mutex<Vec<TracedStream>>,
}

impl Peer {
    /// A peer named `node` listening on `addr`; a call waits at most `timeout` for its response.
    pub(crate) fn new(node: impl Into<String>, addr: SocketAddr, timeout: Duration) -> Self {
        Self { node: node.into(), addr, timeout, idle: Mutex::new(Vec::new()) }
    }

    /// The peer's node name.
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// Sends `req` and waits for the response, in an `rpc.call` span that is the remote parent of
    /// the peer's handler span.
    ///
    /// Uses an idle connection when there is one; if that connection turns out to be closed, the
    /// call is retried once on a new connection (every demo operation is idempotent).
    pub(crate) fn call(&self, req: &Request) -> anyhow::Result<Response> {
        let span = info_span!(
            target: TARGET,
            "rpc.call",
            otel.kind = "client",
            rpc.method = req.method(),
            peer.node = %self.node,
            peer.addr = %self.addr,
            request.bytes = tracing::field::Empty,
            response.bytes = tracing::field::Empty,
        );
        let _entered = span.enter();
        let ctx = ringtrace_subscriber::current_context();
        // The context frame, then the request frame (no context of its own), sent together.
        let mut frame = Vec::new();
        write_frame(&mut frame, &encode_context(ctx.as_ref()))?;
        write_frame(&mut frame, &encode_request(None, req))?;
        span.record("request.bytes", frame.len());

        let reply = match self.take_idle() {
            Some(mut stream) => match exchange(&mut stream, &frame) {
                Ok(reply) => Some((stream, reply)),
                Err(e) if is_closed_connection(&e) => {
                    tracing::debug!(target: TARGET, error = %e, "idle connection was closed; reconnecting");
                    None
                }
                Err(e) => return Err(self.call_error(req, e)),
            },
            None => None,
        };
        let (stream, reply) = match reply {
            Some(done) => done,
            None => {
                let mut stream = self.connect()?;
                let reply = exchange(&mut stream, &frame).map_err(|e| self.call_error(req, e))?;
                (stream, reply)
            }
        };
        span.record("response.bytes", reply.len());
        let resp = Response::decode(&reply).map_err(|e| {
            warn!(target: TARGET, error = %e, "malformed response; closing the connection");
            anyhow!("{} to {} ({}): {e}", req.method(), self.node, self.addr)
        })?;
        self.put_idle(stream);
        Ok(resp)
    }

    fn call_error(&self, req: &Request, e: io::Error) -> anyhow::Error {
        warn!(target: TARGET, error = %e, "call failed");
        anyhow!("{} to {} ({}): {e}", req.method(), self.node, self.addr)
    }

    /// A new connection, whose `connect`, sends, receives and close are I/O spans in the
    /// `rpc.call` span that makes them (`ringtrace::io`).
    fn connect(&self) -> anyhow::Result<TracedStream> {
        let stream = TracedStream::connect_timeout(&self.addr, CONNECT_TIMEOUT)
            .with_context(|| format!("connecting to {} at {}", self.node, self.addr))?;
        let socket = stream.get_ref();
        socket.set_nodelay(true).context("setting TCP_NODELAY")?;
        socket.set_read_timeout(Some(self.timeout)).context("setting the read timeout")?;
        socket.set_write_timeout(Some(self.timeout)).context("setting the write timeout")?;
        Ok(stream)
    }

    fn take_idle(&self) -> Option<TracedStream> {
        self.idle.lock().ok()?.pop()
    }

    fn put_idle(&self, stream: TracedStream) {
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < MAX_IDLE {
                idle.push(stream);
            }
        }
    }
}

/// Idle connections are closed when the peer is, outside any request: not recorded.
impl Drop for Peer {
    fn drop(&mut self) {
        if let Ok(idle) = self.idle.get_mut() {
            idle.drain(..).for_each(|s| drop(s.into_std()));
        }
    }
}

/// A context and a request frame out (`frames`, one write), one response frame back.
fn exchange(stream: &mut TracedStream, frames: &[u8]) -> io::Result<Vec<u8>> {
    stream.write_all(frames)?;
    stream.flush()?;
    read_frame(stream)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before the response"))
}

/// Whether `e` means the peer had closed the connection (so a retry on a new one may succeed).
fn is_closed_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
    )
}

/// Makes `span` a handler span for a request that arrived with `ctx`: sets the caller's span as
/// its remote parent (before anything is recorded under it) and enters it.
///
/// Create `span` with `parent: None` and `otel.kind = "server"`.
pub(crate) fn server_span(span: Span, ctx: Option<&TraceContext>) -> tracing::span::EnteredSpan {
    if let Some(ctx) = ctx {
        span.set_remote_parent(ctx);
    }
    span.entered()
}

/// What a node does with a request: receives the caller's trace context and the request, returns
/// the response.
pub(crate) trait Handler: Send + Sync + 'static {
    /// Handles one request.
    fn handle(&self, ctx: Option<TraceContext>, req: Request) -> Response;
}

/// A running server: its address, and what [`ServerHandle::shutdown`] needs to stop it.
#[derive(Debug)]
pub(crate) struct ServerHandle {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    in_flight: Arc<AtomicUsize>,
    acceptor: JoinHandle<()>,
}

impl ServerHandle {
    /// The address the server listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections and waits, at most `drain`, for requests being handled to
    /// finish. Idle connections are left to close when the process exits.
    pub(crate) fn shutdown(self, drain: Duration) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the acceptor, which is blocked in accept().
        let _ = TcpStream::connect_timeout(&self.addr, CONNECT_TIMEOUT);
        if self.acceptor.join().is_err() {
            eprintln!("the acceptor thread panicked");
        }
        let deadline = Instant::now() + drain;
        while self.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        let left = self.in_flight.load(Ordering::SeqCst);
        if left > 0 {
            eprintln!("shutting down with {left} requests still being handled");
        }
    }
}

/// Serves `handler` on `listener` until [`ServerHandle::shutdown`].
pub(crate) fn serve<H: Handler>(listener: TcpListener, handler: Arc<H>) -> anyhow::Result<ServerHandle> {
    let addr = listener.local_addr().context("reading the listener's address")?;
    let stopping = Arc::new(AtomicBool::new(false));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let acceptor = {
        let stopping = Arc::clone(&stopping);
        let in_flight = Arc::clone(&in_flight);
        thread::Builder::new()
            .name("acceptor".into())
            .spawn(move || accept_loop(&listener, &handler, &stopping, &in_flight))
            .context("spawning the acceptor thread")?
    };
    Ok(ServerHandle { addr, stopping, in_flight, acceptor })
}

fn accept_loop<H: Handler>(
    listener: &TcpListener,
    handler: &Arc<H>,
    stopping: &AtomicBool,
    in_flight: &Arc<AtomicUsize>,
) {
    for conn in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            break;
        }
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                warn!(target: TARGET, error = %e, "accept failed");
                // Avoid spinning if the error persists (e.g. out of file descriptors).
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
        let handler = Arc::clone(handler);
        let in_flight = Arc::clone(in_flight);
        let spawned = thread::Builder::new()
            .name(format!("conn-{peer}"))
            .spawn(move || connection_loop(stream, &peer, &*handler, &in_flight));
        if let Err(e) = spawned {
            warn!(target: TARGET, error = %e, "could not spawn a connection thread; dropping the connection");
        }
    }
}

/// Counts a request as in flight for as long as it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Self(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves one connection. Each request comes as a context frame, read outside any span (as a
/// server reads a request's headers before its span exists) and not recorded, then a request
/// frame, read inside an `rpc.serve` span made with that context as its remote parent: its
/// receives, the handler's span and the response's send are the request's. Closing the
/// connection is not recorded.
fn connection_loop<H: Handler>(stream: TcpStream, peer: &str, handler: &H, in_flight: &AtomicUsize) {
    if let Err(e) = stream.set_nodelay(true) {
        warn!(target: TARGET, peer, error = %e, "setting TCP_NODELAY failed");
    }
    let mut stream = TracedStream::from_std(stream);
    serve_connection(&mut stream, peer, handler, in_flight);
    drop(stream.into_std());
}

fn serve_connection<H: Handler>(stream: &mut TracedStream, peer: &str, handler: &H, in_flight: &AtomicUsize) {
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        warn!(target: TARGET, peer, error = %e, "{what}; closing the connection");
        eprintln!("{what} from {peer}: {e}; closing the connection");
    };
    loop {
        let head = match read_frame(&mut stream.get_ref()) {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(e) => return bad("bad frame", &e),
        };
        let _busy = InFlight::new(in_flight);
        let ctx = match decode_context(&head) {
            Ok(ctx) => ctx,
            Err(e) => return bad("malformed context", &e),
        };
        let span =
            info_span!(target: TARGET, parent: None, "rpc.serve", otel.kind = "server", peer.addr = %peer);
        if let Some(ctx) = &ctx {
            span.set_remote_parent(ctx);
        }
        let _entered = span.enter();
        let frame = match read_frame(stream) {
            Ok(Some(frame)) => frame,
            Ok(None) => return bad("a request's context without the request", &"connection closed"),
            Err(e) => return bad("bad frame", &e),
        };
        let req = match decode_request(&frame) {
            Ok((_, req)) => req,
            Err(e) => return bad("malformed request", &e),
        };
        // The handler's span under this one.
        let resp = handler.handle(ringtrace_subscriber::current_context(), req);
        if let Err(e) = write_frame(stream, &resp.to_bytes()) {
            warn!(target: TARGET, peer, error = %e, "writing the response failed; closing the connection");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;

    impl Handler for Echo {
        fn handle(&self, _ctx: Option<TraceContext>, req: Request) -> Response {
            match req {
                Request::Fetch { key } => Response::Block { text: key },
                other => Response::Error { message: other.method().into() },
            }
        }
    }

    #[test]
    fn calls_reach_the_handler_and_bad_frames_close_the_connection() {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let server = serve(listener, Arc::new(Echo)).unwrap();
        let peer = Peer::new("node-x", server.addr(), Duration::from_secs(5));
        for i in 0..3 {
            let resp = peer.call(&Request::Fetch { key: format!("k{i}") }).unwrap();
            assert_eq!(resp, Response::Block { text: format!("k{i}") });
        }
        assert_eq!(peer.idle.lock().unwrap().len(), 1, "one connection, reused");

        // A malformed request: the server closes the connection instead of answering.
        let mut raw = TcpStream::connect(server.addr()).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write_frame(&mut raw, &[0x00, 0x7f]).unwrap();
        assert!(read_frame(&mut raw).unwrap().is_none());

        // The pooled connection is still good after that.
        let resp = peer.call(&Request::Map { key: "k".into() }).unwrap();
        assert_eq!(resp, Response::Error { message: "MAP".into() });
        server.shutdown(Duration::from_secs(1));
    }
}
