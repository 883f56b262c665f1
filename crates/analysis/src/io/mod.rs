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
pub mod envelope;
pub mod import;
pub mod link;
pub mod strace;
pub mod views;

pub use attach::attach_to_traces;
pub use calls::{io_calls, is_network_wait, IoCall};
pub use envelope::passive_envelope;
pub use link::{link_requests, IoLinks, IoRequest};

use std::fmt;

pub use ringtrace_core::io::{attr, IoOp};

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
