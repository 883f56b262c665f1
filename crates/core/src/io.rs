//! The vocabulary of I/O records (`docs/io-records.md`), shared by what records them
//! (`ringtrace::io`) and what reads them (the analysis): the operations and the attribute
//! names.

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

    /// Every name above: what an I/O call is made of.
    pub const ALL: [&str; 17] = [
        OP,
        SYSCALL,
        FD,
        BYTES_ASKED,
        BYTES,
        OFFSET,
        FILE_PATH,
        TRANSPORT,
        LOCAL_ADDRESS,
        LOCAL_PORT,
        PEER_ADDRESS,
        PEER_PORT,
        THREAD_ID,
        ERROR_TYPE,
        CODE_FILE,
        CODE_LINE,
        STACKTRACE,
    ];
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
