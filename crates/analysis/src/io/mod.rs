//! I/O calls: recorded as spans (`docs/io-records.md`), read back here as [`IoRecord`]s, linked
//! to the requests they served, and summarised.
//!
//! - [`IoRecord`]: one call, as the wrappers and the `strace` import record it.
//! - [`strace`]: reads `strace -f -ttt -T -yy [-k]` logs of any program into records.
//! - [`calls`]: records as spans and back; the I/O calls of a dataset ([`io_calls`]).
//! - [`import`]: an `strace` log as a dataset of I/O spans ([`import::import_strace`]).
//! - [`link`]: which request each call served ([`link_requests`]).
//! - [`attach`]: imported calls moved into the traces of the requests they served.
//! - [`views`]: time per client, server and operation; call types; transfer sizes; code
//!   locations.

pub mod attach;
pub mod calls;
pub mod import;
pub mod link;
pub mod strace;
pub mod views;

pub use attach::attach_to_traces;
pub use calls::{io_calls, is_network_wait, IoCall};
pub use link::{link_requests, IoLinks, IoRequest};

use std::fmt;

/// The attribute names of `docs/io-records.md`.
pub mod attr {
    /// The operation ([`IoOp`](super::IoOp)).
    pub const OP: &str = "io.op";
    /// The call as made (system call or Rust method).
    pub const SYSCALL: &str = "io.syscall";
    /// The file descriptor.
    pub const FD: &str = "io.fd";
    /// Bytes asked for.
    pub const BYTES_ASKED: &str = "io.bytes_asked";
    /// Bytes moved.
    pub const BYTES: &str = "io.bytes";
    /// File offset of `pread`/`pwrite`.
    pub const OFFSET: &str = "io.offset";
    /// The file.
    pub const FILE_PATH: &str = "file.path";
    /// `tcp`, `udp` or `unix`.
    pub const TRANSPORT: &str = "network.transport";
    /// This side's address.
    pub const LOCAL_ADDRESS: &str = "network.local.address";
    /// This side's port.
    pub const LOCAL_PORT: &str = "network.local.port";
    /// The other side's address.
    pub const PEER_ADDRESS: &str = "network.peer.address";
    /// The other side's port.
    pub const PEER_PORT: &str = "network.peer.port";
    /// The thread.
    pub const THREAD_ID: &str = "thread.id";
    /// Why the call failed.
    pub const ERROR_TYPE: &str = "error.type";
    /// The calling code's file.
    pub const CODE_FILE: &str = "code.file.path";
    /// The calling code's line.
    pub const CODE_LINE: &str = "code.line.number";
    /// The call's stack, one frame a line, innermost first.
    pub const STACKTRACE: &str = "code.stacktrace";
}

/// What an I/O call does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IoOp {
    /// Opens a file (`open`, `openat`, `creat`).
    Open,
    /// Reads from a file or a stream (`read`, `readv`).
    Read,
    /// Writes to a file or a stream (`write`, `writev`).
    Write,
    /// Reads at an offset (`pread64`, `preadv`).
    Pread,
    /// Writes at an offset (`pwrite64`, `pwritev`).
    Pwrite,
    /// Sends on a socket (`send`, `sendto`, `sendmsg`, `sendmmsg`, `sendfile`).
    Send,
    /// Receives on a socket (`recv`, `recvfrom`, `recvmsg`, `recvmmsg`).
    Recv,
    /// Connects a socket.
    Connect,
    /// Accepts a connection (`accept`, `accept4`).
    Accept,
    /// Flushes a file to its device (`fsync`, `fdatasync`).
    Fsync,
    /// Closes a descriptor.
    Close,
}

impl IoOp {
    /// Every operation, in declaration order.
    pub const ALL: [IoOp; 11] = [
        IoOp::Open,
        IoOp::Read,
        IoOp::Write,
        IoOp::Pread,
        IoOp::Pwrite,
        IoOp::Send,
        IoOp::Recv,
        IoOp::Connect,
        IoOp::Accept,
        IoOp::Fsync,
        IoOp::Close,
    ];

    /// The name in `io.op` and in span names.
    pub fn as_str(self) -> &'static str {
        match self {
            IoOp::Open => "open",
            IoOp::Read => "read",
            IoOp::Write => "write",
            IoOp::Pread => "pread",
            IoOp::Pwrite => "pwrite",
            IoOp::Send => "send",
            IoOp::Recv => "recv",
            IoOp::Connect => "connect",
            IoOp::Accept => "accept",
            IoOp::Fsync => "fsync",
            IoOp::Close => "close",
        }
    }

    /// The operation named `name` (as [`as_str`](Self::as_str) writes it).
    pub fn parse(name: &str) -> Option<IoOp> {
        IoOp::ALL.into_iter().find(|op| op.as_str() == name)
    }

    /// Whether the operation moves data (reads, writes, sends, receives).
    pub fn moves_data(self) -> bool {
        matches!(self, IoOp::Read | IoOp::Write | IoOp::Pread | IoOp::Pwrite | IoOp::Send | IoOp::Recv)
    }

    /// Whether the data goes out of the process (writes and sends).
    pub fn is_output(self) -> bool {
        matches!(self, IoOp::Write | IoOp::Pwrite | IoOp::Send)
    }
}

impl fmt::Display for IoOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The transport of a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// A Unix domain socket.
    Unix,
}

impl Transport {
    /// The name in `network.transport`.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
            Transport::Unix => "unix",
        }
    }

    /// The transport named `name`.
    pub fn parse(name: &str) -> Option<Transport> {
        [Transport::Tcp, Transport::Udp, Transport::Unix].into_iter().find(|t| t.as_str() == name)
    }
}

/// A socket address: an IP address (IPv4 dotted, IPv6 without brackets) or a Unix socket's
/// path, and a port (0 for Unix sockets).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    /// The address.
    pub address: String,
    /// The port.
    pub port: u16,
}

/// `address:port`, with IPv6 addresses in brackets.
impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.address.contains(':') {
            write!(f, "[{}]:{}", self.address, self.port)
        } else {
            write!(f, "{}:{}", self.address, self.port)
        }
    }
}

/// One I/O call, as recorded (the fields of `docs/io-records.md`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct IoRecord {
    /// The process (0 when unknown).
    pub pid: u32,
    /// The thread (the Linux tid for imports; equal to `pid` for a single-threaded one).
    pub tid: u64,
    /// The operation; `None` only while a parser builds the record.
    pub op: Option<IoOp>,
    /// The call as made: `sendto`, `pread64`, `read_exact`.
    pub syscall: String,
    /// The file descriptor, when known.
    pub fd: Option<i64>,
    /// When the call began, Unix nanoseconds.
    pub start_unix_ns: u64,
    /// When it returned, Unix nanoseconds.
    pub end_unix_ns: u64,
    /// The error (`EAGAIN`, `WouldBlock`) when the call failed.
    pub error: Option<String>,
    /// Bytes asked for (reads and writes).
    pub bytes_asked: Option<u64>,
    /// Bytes moved: the call's result, 0 when it failed.
    pub bytes: u64,
    /// File offset of `pread`/`pwrite`.
    pub offset: Option<u64>,
    /// The file, for descriptors of files.
    pub path: Option<String>,
    /// The socket's transport.
    pub transport: Option<Transport>,
    /// This side's socket address.
    pub local: Option<Endpoint>,
    /// The other side's.
    pub remote: Option<Endpoint>,
    /// The code that made the call, `file:line` (wrappers).
    pub location: Option<String>,
    /// The call's stack, innermost frame first (`strace -k`).
    pub stack: Vec<String>,
}

impl IoRecord {
    /// Whether the call succeeded.
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// Whether the call is on a socket (network I/O): it has a peer or is a send, receive,
    /// connect or accept.
    pub fn is_network(&self) -> bool {
        self.remote.is_some()
            || self.transport.is_some()
            || matches!(self.op, Some(IoOp::Send | IoOp::Recv | IoOp::Connect | IoOp::Accept))
    }
}
