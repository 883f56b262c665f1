//! The I/O wrappers of `ringtrace_subscriber::io`, recorded by ringtrace: each call is a span
//! with the attributes of `docs/io-records.md` (operation, method, descriptor, path, addresses,
//! bytes, error and status, the caller's file and line), a child of the span it was made in.
//! Each test runs under the standalone subscriber and under the layer. Run with
//! `--features io-tokio` for the tokio wrappers.
#![cfg(unix)]

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ringtrace_subscriber::io::{File, TcpListener, TcpStream, Traced, UdpSocket, TARGET};
use ringtrace_subscriber::{Builder, FnSink, ResourceInfo, SpanData, Value};
use tracing_subscriber::prelude::*;

/// The two collectors every test runs under.
#[derive(Clone, Copy, Debug)]
enum Collector {
    /// The standalone `RingSubscriber`.
    Subscriber,
    /// `RingLayer` on the registry.
    Layer,
}

const COLLECTORS: [Collector; 2] = [Collector::Subscriber, Collector::Layer];

/// Runs `f` under `collector` made by `builder`; what it returned and every span recorded, in
/// the order they started.
fn record_with<R>(collector: Collector, builder: Builder, f: impl FnOnce() -> R) -> (R, Vec<SpanData>) {
    eprintln!("under {collector:?}"); // says which one a failed assertion was under
    let kept: Arc<Mutex<Vec<SpanData>>> = Arc::default();
    let sink_kept = kept.clone();
    let sink = FnSink(move |batch: &[SpanData], _: &ResourceInfo| {
        sink_kept.lock().unwrap().extend_from_slice(batch);
    });
    let builder = builder.node("n").daemon("io").no_recording().quiet(true).sink(sink);
    let (out, guard) = match collector {
        Collector::Subscriber => {
            let (subscriber, guard) = builder.build_subscriber().unwrap();
            (tracing::subscriber::with_default(subscriber, f), guard)
        }
        Collector::Layer => {
            let (layer, guard) = builder.build().unwrap();
            (tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), f), guard)
        }
    };
    let stats = guard.shutdown().unwrap();
    assert_eq!(stats.dropped_spans, 0, "{collector:?}: {stats}");
    let mut spans = std::mem::take(&mut *kept.lock().unwrap());
    spans.sort_by_key(|s| s.start_unix_ns);
    (out, spans)
}

fn record<R>(collector: Collector, f: impl FnOnce() -> R) -> (R, Vec<SpanData>) {
    record_with(collector, Builder::new(), f)
}

/// The I/O spans among `spans`.
fn io_spans(spans: &[SpanData]) -> Vec<&SpanData> {
    spans.iter().filter(|s| s.meta.target() == TARGET).collect()
}

fn text<'a>(span: &'a SpanData, name: &str) -> Option<&'a str> {
    match span.field(name) {
        Some(Value::Str(v)) => Some(v),
        Some(other) => panic!("{name} = {other:?} is not a string"),
        None => None,
    }
}

fn int(span: &SpanData, name: &str) -> Option<i64> {
    match span.field(name) {
        Some(Value::I64(v)) => Some(*v),
        Some(Value::U64(v)) => Some(i64::try_from(*v).unwrap()),
        Some(other) => panic!("{name} = {other:?} is not an integer"),
        None => None,
    }
}

/// Asserts the span is operation `op` made by `syscall`, named and targeted as documented.
#[track_caller]
fn assert_op(span: &SpanData, op: &str, syscall: &str) {
    assert_eq!(span.meta.name(), op, "{span:#?}");
    assert_eq!(span.meta.target(), "ringtrace::io");
    assert_eq!(*span.meta.level(), tracing::Level::INFO);
    assert_eq!(text(span, "io.op"), Some(op), "{span:#?}");
    assert_eq!(text(span, "io.syscall"), Some(syscall), "{span:#?}");
}

/// Asserts the span was called from this file, at `line`.
#[track_caller]
fn assert_caller(span: &SpanData, line: u32) {
    assert_eq!(text(span, "code.file.path"), Some(file!()), "{span:#?}");
    assert_eq!(int(span, "code.line.number"), Some(i64::from(line)), "{span:#?}");
}

#[track_caller]
fn assert_no_caller(span: &SpanData) {
    assert_eq!(span.field("code.file.path"), None, "{span:#?}");
    assert_eq!(span.field("code.line.number"), None, "{span:#?}");
}

/// Asserts the span's bytes asked for and moved.
#[track_caller]
fn assert_bytes(span: &SpanData, asked: i64, moved: i64) {
    assert_eq!(int(span, "io.bytes_asked"), Some(asked), "{span:#?}");
    assert_eq!(int(span, "io.bytes"), Some(moved), "{span:#?}");
}

/// Asserts the span's transport and both ends.
#[track_caller]
fn assert_ends(span: &SpanData, transport: &str, local: Option<SocketAddr>, peer: Option<SocketAddr>) {
    assert_eq!(text(span, "network.transport"), Some(transport), "{span:#?}");
    let ip = |a: Option<SocketAddr>| a.map(|a| a.ip().to_string());
    let port = |a: Option<SocketAddr>| a.map(|a| i64::from(a.port()));
    assert_eq!(text(span, "network.local.address").map(str::to_owned), ip(local), "{span:#?}");
    assert_eq!(int(span, "network.local.port"), port(local), "{span:#?}");
    assert_eq!(text(span, "network.peer.address").map(str::to_owned), ip(peer), "{span:#?}");
    assert_eq!(int(span, "network.peer.port"), port(peer), "{span:#?}");
}

/// Asserts the span failed with `kind`, its status an error in OTLP as ringtrace exports it.
#[track_caller]
fn assert_failed(span: &SpanData, kind: io::ErrorKind, error: &io::Error) {
    assert_eq!(text(span, "error.type"), Some(format!("{kind:?}").as_str()), "{span:#?}");
    assert_eq!(text(span, "otel.status_code"), Some("error"), "{span:#?}");
    assert_eq!(text(span, "otel.status_message"), Some(error.to_string().as_str()), "{span:#?}");
    let status = ringtrace_subscriber::encode::span(span).status.expect("a status");
    assert_eq!(status.code, ringtrace_core::otlp::StatusCode::Error as i32, "{span:#?}");
    assert_eq!(status.message, error.to_string());
}

#[track_caller]
fn assert_ok(span: &SpanData) {
    assert_eq!(span.field("error.type"), None, "{span:#?}");
    assert_eq!(span.field("otel.status_code"), None, "{span:#?}");
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ringtrace-io-wrappers-{}-{name}", std::process::id()))
}

fn fd(io: &impl AsRawFd) -> i64 {
    i64::from(io.as_raw_fd())
}

#[test]
fn file_calls_record_path_descriptor_bytes_offset_and_caller() {
    for collector in COLLECTORS {
        let path = temp("file");
        let shown = path.display().to_string();
        let (lines, spans) = record(collector, || {
            let (f, create) = (File::create(&path), line!());
            let mut f = f.unwrap();
            let fd_w = fd(&f);
            let (r, write_all) = (f.write_all(b"hello world"), line!());
            r.unwrap();
            let (r, write_at) = (f.write_at(b"HELLO", 0), line!());
            assert_eq!(r.unwrap(), 5);
            let (r, sync_all) = (f.sync_all(), line!());
            r.unwrap();
            let (r, sync_data) = (f.sync_data(), line!());
            r.unwrap();
            drop(f);
            let (f, open) = (File::open(&path), line!());
            let mut f = f.unwrap();
            let fd_r = fd(&f);
            let mut buf = [0; 64];
            let (n, read) = (f.read(&mut buf), line!());
            assert_eq!(&buf[..n.unwrap()], b"HELLO world");
            let mut five = [0; 5];
            let (r, read_at) = (f.read_at(&mut five, 6), line!());
            assert_eq!((r.unwrap(), &five), (5, b"world"));
            f.seek(SeekFrom::Start(0)).unwrap();
            let (r, close) = (f.close(), line!());
            r.unwrap();
            (fd_w, fd_r, [create, write_all, write_at, sync_all, sync_data, open, read, read_at, close])
        });
        let _ = std::fs::remove_file(&path);
        let (fd_w, fd_r, [create, write_all, write_at, sync_all, sync_data, open, read, read_at, close]) =
            lines;
        let io = io_spans(&spans);
        assert_eq!(io.len(), 10, "seek is not recorded: {io:#?}");
        for s in &io {
            assert_eq!(text(s, "file.path"), Some(shown.as_str()), "{s:#?}");
            assert_ok(s);
            assert_eq!(s.field("network.transport"), None);
        }

        assert_op(io[0], "open", "create");
        assert_eq!(int(io[0], "io.fd"), Some(fd_w));
        assert_caller(io[0], create);
        assert_eq!(io[0].field("io.bytes"), None, "open moves no data");

        assert_op(io[1], "write", "write_all");
        assert_eq!(int(io[1], "io.fd"), Some(fd_w));
        assert_bytes(io[1], 11, 11);
        assert_eq!(io[1].field("io.offset"), None);
        assert_caller(io[1], write_all);

        assert_op(io[2], "pwrite", "write_at");
        assert_bytes(io[2], 5, 5);
        assert_eq!(int(io[2], "io.offset"), Some(0));
        assert_caller(io[2], write_at);

        assert_op(io[3], "fsync", "sync_all");
        assert_eq!(int(io[3], "io.fd"), Some(fd_w));
        assert_caller(io[3], sync_all);
        assert_op(io[4], "fsync", "sync_data");
        assert_caller(io[4], sync_data);

        assert_op(io[5], "close", "drop");
        assert_eq!(int(io[5], "io.fd"), Some(fd_w));
        assert_no_caller(io[5]);

        assert_op(io[6], "open", "open");
        assert_eq!(int(io[6], "io.fd"), Some(fd_r));
        assert_caller(io[6], open);

        assert_op(io[7], "read", "read");
        assert_eq!(int(io[7], "io.fd"), Some(fd_r));
        assert_bytes(io[7], 64, 11);
        assert_caller(io[7], read);

        assert_op(io[8], "pread", "read_at");
        assert_bytes(io[8], 5, 5);
        assert_eq!(int(io[8], "io.offset"), Some(6));
        assert_caller(io[8], read_at);

        assert_op(io[9], "close", "close");
        assert_eq!(int(io[9], "io.fd"), Some(fd_r));
        assert_caller(io[9], close);

        for s in &io {
            assert!(s.start_unix_ns <= s.end_unix_ns);
            assert_eq!(s.parent_span_id, None, "made outside any span: {s:#?}");
        }
    }
}

#[test]
fn a_failed_open_records_the_error_kind_and_an_error_status() {
    for collector in COLLECTORS {
        let missing = temp("missing/nothing-here");
        let ((err, line), spans) = record(collector, || {
            let (r, line) = (File::open(&missing), line!());
            (r.unwrap_err(), line)
        });
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        let io = io_spans(&spans);
        assert_eq!(io.len(), 1, "a file never opened is never closed: {io:#?}");
        assert_op(io[0], "open", "open");
        assert_eq!(text(io[0], "file.path"), Some(missing.display().to_string().as_str()));
        assert_eq!(io[0].field("io.fd"), None);
        assert_eq!(io[0].field("io.bytes"), None, "open moves no data");
        assert_failed(io[0], io::ErrorKind::NotFound, &err);
        assert_caller(io[0], line);
    }
}

#[test]
fn tcp_connect_accept_send_recv_record_both_ends_on_both_sides() {
    for collector in COLLECTORS {
        struct Seen {
            listener: SocketAddr,
            client: SocketAddr,
            fds: [i64; 3],
            lines: [u32; 5],
            would_block: io::Error,
        }
        let (seen, spans) = record(collector, || {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let (client, connect) = (TcpStream::connect(addr), line!());
            let mut client = client.unwrap();
            let (accepted, accept) = (listener.accept(), line!());
            let (mut server, peer) = accepted.unwrap();
            assert_eq!(peer, client.local_addr().unwrap());
            let (r, send) = (client.write_all(b"ping"), line!());
            r.unwrap();
            let mut buf = [0; 4];
            let (r, recv) = (server.read_exact(&mut buf), line!());
            r.unwrap();
            assert_eq!(&buf, b"ping");
            server.get_ref().set_nonblocking(true).unwrap();
            let (r, would_block) = (server.read(&mut buf), line!());
            let seen = Seen {
                listener: addr,
                client: client.local_addr().unwrap(),
                fds: [fd(&listener), fd(&client), fd(&server)],
                lines: [connect, accept, send, recv, would_block],
                would_block: r.unwrap_err(),
            };
            drop(client);
            drop(server);
            drop(listener);
            seen
        });
        let Seen { listener, client, fds: [fd_l, fd_c, fd_s], lines, would_block } = seen;
        let [connect, accept, send, recv, wb] = lines;
        let io = io_spans(&spans);
        assert_eq!(io.len(), 8, "{io:#?}");

        assert_op(io[0], "connect", "connect");
        assert_eq!(int(io[0], "io.fd"), Some(fd_c));
        assert_ends(io[0], "tcp", Some(client), Some(listener));
        assert_caller(io[0], connect);
        assert_eq!(io[0].field("io.bytes"), None);

        assert_op(io[1], "accept", "accept");
        assert_eq!(int(io[1], "io.fd"), Some(fd_s), "the accepted connection's descriptor");
        assert_ne!(fd_s, fd_l);
        assert_ends(io[1], "tcp", Some(listener), Some(client));
        assert_caller(io[1], accept);
        assert_eq!(
            io[1].fields.iter().filter(|(k, _)| *k == "network.local.port").count(),
            1,
            "the local address is recorded once"
        );

        assert_op(io[2], "send", "write_all");
        assert_eq!(int(io[2], "io.fd"), Some(fd_c));
        assert_ends(io[2], "tcp", Some(client), Some(listener));
        assert_bytes(io[2], 4, 4);
        assert_caller(io[2], send);

        assert_op(io[3], "recv", "read_exact");
        assert_eq!(int(io[3], "io.fd"), Some(fd_s));
        assert_ends(io[3], "tcp", Some(listener), Some(client));
        assert_bytes(io[3], 4, 4);
        assert_caller(io[3], recv);

        assert_op(io[4], "recv", "read");
        assert_ends(io[4], "tcp", Some(listener), Some(client));
        assert_bytes(io[4], 4, 0);
        assert_failed(io[4], io::ErrorKind::WouldBlock, &would_block);
        assert_caller(io[4], wb);

        for (s, fd) in io[5..].iter().zip([fd_c, fd_s, fd_l]) {
            assert_op(s, "close", "drop");
            assert_eq!(int(s, "io.fd"), Some(fd));
            assert_no_caller(s);
        }
        for (i, s) in io.iter().enumerate() {
            assert_eq!(s.field("file.path"), None);
            if i != 4 {
                assert_ok(s);
            }
        }
    }
}

#[test]
fn a_refused_connect_records_its_peer_and_the_error() {
    for collector in COLLECTORS {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let ((err, line), spans) = record(collector, || {
            let (r, line) = (TcpStream::connect(closed), line!());
            (r.unwrap_err(), line)
        });
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
        let io = io_spans(&spans);
        assert_eq!(io.len(), 1, "{io:#?}");
        assert_op(io[0], "connect", "connect");
        assert_ends(io[0], "tcp", None, Some(closed));
        assert_eq!(io[0].field("io.fd"), None);
        assert_failed(io[0], io::ErrorKind::ConnectionRefused, &err);
        assert_caller(io[0], line);
    }
}

#[test]
fn udp_send_to_recv_from_connect_send_recv_record_their_peers() {
    for collector in COLLECTORS {
        let ((a_addr, b_addr, lines), spans) = record(collector, || {
            let a = UdpSocket::bind("127.0.0.1:0").unwrap();
            let b = UdpSocket::bind("127.0.0.1:0").unwrap();
            let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            let mut buf = [0; 16];
            let (r, send_to) = (a.send_to(b"one", b_addr), line!());
            assert_eq!(r.unwrap(), 3);
            let (r, recv_from) = (b.recv_from(&mut buf), line!());
            assert_eq!(r.unwrap(), (3, a_addr));
            let (r, connect) = (a.connect(b_addr), line!());
            r.unwrap();
            b.connect(a_addr).unwrap();
            let (r, send) = (a.send(b"two!"), line!());
            assert_eq!(r.unwrap(), 4);
            let (r, recv) = (b.recv(&mut buf), line!());
            assert_eq!(r.unwrap(), 4);
            (a_addr, b_addr, [send_to, recv_from, connect, send, recv])
        });
        let [send_to, recv_from, connect, send, recv] = lines;
        let io = io_spans(&spans);
        assert_eq!(io.len(), 8, "{io:#?}");

        assert_op(io[0], "send", "send_to");
        assert_ends(io[0], "udp", Some(a_addr), Some(b_addr));
        assert_bytes(io[0], 3, 3);
        assert_caller(io[0], send_to);

        assert_op(io[1], "recv", "recv_from");
        assert_ends(io[1], "udp", Some(b_addr), Some(a_addr));
        assert_bytes(io[1], 16, 3);
        assert_caller(io[1], recv_from);

        assert_op(io[2], "connect", "connect");
        assert_ends(io[2], "udp", Some(a_addr), Some(b_addr));
        assert_caller(io[2], connect);
        assert_op(io[3], "connect", "connect");

        assert_op(io[4], "send", "send");
        assert_ends(io[4], "udp", Some(a_addr), Some(b_addr));
        assert_bytes(io[4], 4, 4);
        assert_caller(io[4], send);

        assert_op(io[5], "recv", "recv");
        assert_ends(io[5], "udp", Some(b_addr), Some(a_addr));
        assert_bytes(io[5], 16, 4);
        assert_caller(io[5], recv);

        assert_op(io[6], "close", "drop");
        assert_op(io[7], "close", "drop");
        assert!(io.iter().all(|s| int(s, "io.fd").is_some()));
    }
}

/// Hands out at most two bytes a read.
struct Trickle(&'static [u8]);

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(2).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn the_generic_wrapper_records_each_inner_call_with_the_callers_line() {
    for collector in COLLECTORS {
        let (lines, spans) = record(collector, || {
            let mut input = Traced::new(Trickle(b"abcde")).with_path("trickle.txt");
            let mut buf = [0; 5];
            let (r, read_exact) = (input.read_exact(&mut buf), line!());
            r.unwrap();
            assert_eq!(&buf, b"abcde");
            let mut out = Traced::new(Vec::new());
            let (r, write_fmt) = (write!(out, "{}-{}", 1, 22), line!());
            r.unwrap();
            let (r, flush) = (out.flush(), line!());
            r.unwrap();
            assert_eq!(out.get_ref(), b"1-22");
            let mut null = Traced::with_fd(std::fs::File::open("/dev/null").unwrap());
            let fd_null = null.fd().unwrap();
            let (r, read) = (null.read(&mut buf), line!());
            assert_eq!(r.unwrap(), 0);
            (fd_null, [read_exact, write_fmt, flush, read])
        });
        let (fd_null, [read_exact, write_fmt, flush, read]) = lines;
        let io = io_spans(&spans);

        let reads: Vec<_> = io.iter().filter(|s| text(s, "io.syscall") == Some("read_exact")).collect();
        assert_eq!(reads.len(), 3, "one span per inner read: {io:#?}");
        for (s, (asked, moved)) in reads.iter().zip([(5, 2), (3, 2), (1, 1)]) {
            assert_op(s, "read", "read_exact");
            assert_bytes(s, asked, moved);
            assert_eq!(text(s, "file.path"), Some("trickle.txt"));
            assert_eq!(s.field("io.fd"), None);
            assert_caller(s, read_exact);
        }

        let writes: Vec<_> = io.iter().filter(|s| text(s, "io.syscall") == Some("write_fmt")).collect();
        assert!(!writes.is_empty());
        for s in &writes {
            assert_op(s, "write", "write_fmt");
            assert_eq!(s.field("file.path"), None);
            assert_caller(s, write_fmt);
        }
        assert_eq!(writes.iter().map(|s| int(s, "io.bytes").unwrap()).sum::<i64>(), 4);

        let flushes: Vec<_> = io.iter().filter(|s| text(s, "io.syscall") == Some("flush")).collect();
        assert_eq!(flushes.len(), 1);
        assert_op(flushes[0], "write", "flush");
        assert_eq!(flushes[0].field("io.bytes"), None, "a flush's bytes are not known");
        assert_caller(flushes[0], flush);

        let null: Vec<_> = io.iter().filter(|s| text(s, "io.syscall") == Some("read")).collect();
        assert_eq!(null.len(), 1);
        assert_op(null[0], "read", "read");
        assert_eq!(int(null[0], "io.fd"), Some(fd_null));
        assert_bytes(null[0], 5, 0);
        assert_caller(null[0], read);
        assert_eq!(io.len(), 3 + writes.len() + 1 + 1, "{io:#?}");
    }
}

#[test]
fn io_inside_a_span_is_its_child_in_its_trace_and_request() {
    for collector in COLLECTORS {
        let (_, spans) = record(collector, || {
            let handle = tracing::info_span!("handle", request.id = "req-io");
            let _in = handle.enter();
            let step = tracing::info_span!("step");
            let _step = step.enter();
            let mut f = File::open("/dev/zero").unwrap();
            let mut byte = [1];
            f.read_exact(&mut byte).unwrap();
            assert_eq!(byte, [0]);
        });
        let handle = spans.iter().find(|s| s.meta.name() == "handle").unwrap();
        let step = spans.iter().find(|s| s.meta.name() == "step").unwrap();
        let io = io_spans(&spans);
        assert_eq!(io.iter().map(|s| s.meta.name()).collect::<Vec<_>>(), ["open", "read", "close"]);
        for s in io {
            assert_eq!(s.parent_span_id, Some(step.span_id), "{s:#?}");
            assert_eq!(s.trace_id, handle.trace_id);
            assert_eq!(s.request_id.as_deref(), Some("req-io"));
            assert!(step.start_unix_ns <= s.start_unix_ns && s.end_unix_ns <= step.end_unix_ns);
        }
    }
}

#[test]
fn nothing_is_recorded_when_no_one_wants_io_spans() {
    for collector in COLLECTORS {
        // No subscriber at all.
        let mut f = File::open("/dev/zero").unwrap();
        let mut buf = [1; 8];
        f.read_exact(&mut buf).unwrap();
        assert_eq!(buf, [0; 8]);
        drop(f);
        // A subscriber that leaves the target out: the calls work, no span is made.
        let (_, spans) = record_with(collector, Builder::new().exclude_target("ringtrace::io"), || {
            let _span = tracing::info_span!("handle").entered();
            let mut f = File::open("/dev/zero").unwrap();
            f.read_exact(&mut buf).unwrap();
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (mut server, _) = listener.accept().unwrap();
            client.write_all(b"x").unwrap();
            server.read_exact(&mut buf[..1]).unwrap();
        });
        assert_eq!(spans.iter().map(|s| s.meta.name()).collect::<Vec<_>>(), ["handle"]);
    }
}

#[cfg(feature = "io-tokio")]
mod tokio_wrappers {
    use super::*;
    use ringtrace_subscriber::io::tokio::{File, TcpListener, TcpStream};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn send<T: Send>(_: &T) {}

    /// The futures can move between a multi-threaded runtime's threads (built, never polled).
    #[test]
    fn the_futures_are_send() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            send(&listener.accept());
            send(&TcpStream::connect(addr));
            send(&File::open("/dev/null"));
            send(&File::create("/dev/null"));
            let mut stream = TcpStream::connect(addr).await.unwrap();
            let mut file = File::open("/dev/null").await.unwrap();
            let mut buf = [0; 4];
            send(&stream.read(&mut buf));
            send(&stream.read_exact(&mut buf));
            send(&stream.write(&buf));
            send(&stream.write_all(&buf));
            send(&file.read(&mut buf));
            send(&file.write_all(&buf));
            send(&file.sync_all());
            send(&AsyncReadExt::read(&mut stream, &mut buf));
        });
    }

    #[test]
    fn tokio_files_and_sockets_record_as_the_std_ones() {
        for collector in COLLECTORS {
            let path = temp("tokio-file");
            let shown = path.display().to_string();
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let (seen, spans) = record(collector, || {
                rt.block_on(async {
                    let (f, create) = (File::create(&path).await, line!());
                    let mut f = f.unwrap();
                    let fd_w = fd(f.get_ref());
                    let (r, write_all) = (f.write_all(b"async").await, line!());
                    r.unwrap();
                    let (r, sync_data) = (f.sync_data().await, line!());
                    r.unwrap();
                    drop(f);
                    let (f, open) = (File::open(&path).await, line!());
                    let mut f = f.unwrap();
                    let mut buf = [0; 5];
                    let (r, read_exact) = (f.read_exact(&mut buf).await, line!());
                    assert_eq!(r.unwrap(), 5);
                    assert_eq!(&buf, b"async");
                    drop(f);

                    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                    let addr = listener.local_addr().unwrap();
                    let (client, connect) = (TcpStream::connect(addr).await, line!());
                    let mut client = client.unwrap();
                    let (accepted, accept) = (listener.accept().await, line!());
                    let (mut server, _) = accepted.unwrap();
                    let (r, send) = (client.write_all(b"ping").await, line!());
                    r.unwrap();
                    let mut four = [0; 4];
                    let (r, recv) = (server.read_exact(&mut four).await, line!());
                    r.unwrap();
                    // Through the traits, as generic code calls them: no location.
                    AsyncWriteExt::write_all(&mut server, b"pong").await.unwrap();
                    AsyncReadExt::read_exact(&mut client, &mut four).await.unwrap();
                    assert_eq!(&four, b"pong");
                    let mut traced = Traced::new(&b"xyz"[..]);
                    let mut all = Vec::new();
                    AsyncReadExt::read_to_end(&mut traced, &mut all).await.unwrap();
                    assert_eq!(all, b"xyz");
                    let client_addr = client.local_addr().unwrap();
                    drop(client);
                    drop(server);
                    drop(listener);
                    (
                        fd_w,
                        addr,
                        client_addr,
                        [create, write_all, sync_data, open, read_exact, connect, accept, send, recv],
                    )
                })
            });
            let _ = std::fs::remove_file(&path);
            let (fd_w, listener, client, lines) = seen;
            let [create, write_all, sync_data, open, read_exact, connect, accept, send, recv] = lines;
            let io = io_spans(&spans);
            let names: Vec<_> = io.iter().map(|s| s.meta.name()).collect();
            assert_eq!(
                names,
                [
                    "open", "write", "fsync", "close", "open", "read", "close", "connect", "accept", "send",
                    "recv", "send", "recv", "read", "read", "close", "close", "close"
                ],
                "{io:#?}"
            );
            for s in &io[..7] {
                assert_eq!(text(s, "file.path"), Some(shown.as_str()));
                assert_ok(s);
            }
            assert_op(io[0], "open", "create");
            assert_eq!(int(io[0], "io.fd"), Some(fd_w));
            assert_caller(io[0], create);
            assert_op(io[1], "write", "write_all");
            assert_bytes(io[1], 5, 5);
            assert_caller(io[1], write_all);
            assert_op(io[2], "fsync", "sync_data");
            assert_caller(io[2], sync_data);
            assert_op(io[3], "close", "drop");
            assert_op(io[4], "open", "open");
            assert_caller(io[4], open);
            assert_op(io[5], "read", "read_exact");
            assert_bytes(io[5], 5, 5);
            assert_caller(io[5], read_exact);

            assert_op(io[7], "connect", "connect");
            assert_ends(io[7], "tcp", Some(client), Some(listener));
            assert_caller(io[7], connect);
            assert_op(io[8], "accept", "accept");
            assert_ends(io[8], "tcp", Some(listener), Some(client));
            assert_caller(io[8], accept);
            assert_op(io[9], "send", "write_all");
            assert_ends(io[9], "tcp", Some(client), Some(listener));
            assert_bytes(io[9], 4, 4);
            assert_caller(io[9], send);
            assert_op(io[10], "recv", "read_exact");
            assert_ends(io[10], "tcp", Some(listener), Some(client));
            assert_bytes(io[10], 4, 4);
            assert_caller(io[10], recv);
            assert_op(io[11], "send", "poll_write");
            assert_ends(io[11], "tcp", Some(listener), Some(client));
            assert_bytes(io[11], 4, 4);
            assert_no_caller(io[11]);
            assert_op(io[12], "recv", "poll_read");
            assert_ends(io[12], "tcp", Some(client), Some(listener));
            assert_bytes(io[12], 4, 4);
            assert_no_caller(io[12]);
            assert_op(io[13], "read", "poll_read");
            assert_eq!(int(io[13], "io.bytes"), Some(3));
            assert_op(io[14], "read", "poll_read");
            assert_eq!(int(io[14], "io.bytes"), Some(0), "the end of the data");
        }
    }
}
