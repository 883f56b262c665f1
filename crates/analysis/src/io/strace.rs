//! Reads `strace` logs into [`IoRecord`]s, so that the I/O of any program — not only of a Rust
//! one using the `ringtrace::io` wrappers — can be viewed and linked to requests.
//!
//! The log is the output of `strace -f -ttt -T -yy [-k] [-s N] -o LOG PROGRAM`:
//! - `-f` prefixes each line with the thread's id (`1234 1700000000.000001 read(...)`, or
//!   `[pid  1234] ...` on strace's stderr, where the first process's lines have no prefix);
//!   without `-f` (or for unprefixed lines) the pid is 0.
//! - `-ttt` gives the Unix time a call began, `-T` (`<0.000031>` at the end) how long it took;
//!   without `-T` a record ends when it begins.
//! - `-yy` decorates descriptors with their file (`3</etc/passwd>`) or socket
//!   (`3<TCP:[127.0.0.1:8000->127.0.0.1:45678]>`), which gives records their path, transport
//!   and addresses.
//! - `-k` prints the call's stack after it, one ` > frame` line each, innermost first.
//!
//! Opens, reads, writes, sends, receives, connects, accepts, syncs and closes become records
//! (see [`IoOp`] for the calls each operation covers); every other call is only counted, by
//! name, in [`StraceLog::ignored_syscalls`]. A call that another thread's line interrupted
//! (`read(3,  <unfinished ...>` … `<... read resumed>"abc", 100) = 3`) is joined back, per
//! pid. Reads and writes on sockets stay reads and writes, with their transport and addresses
//! filled in, so [`IoRecord::is_network`] counts them as network I/O. A `connect` whose socket
//! had no address yet gets its local address from the next record on the same descriptor.
//!
//! Lines that are not strace output are counted and the first [`MAX_PROBLEMS`] reported with
//! their line numbers; reading goes on. A log cut short — its last line incomplete, or calls
//! left unfinished — is marked [`truncated`](StraceLog::truncated). The reader never panics and
//! takes time linear in the size of the log.
//!
//! ```
//! use ringtrace_analysis::io::{strace, IoOp};
//!
//! let log = strace::parse(concat!(
//!     "7 1700000000.000100 execve(\"/usr/bin/cat\", [\"cat\"], 0x7ffd /* 9 vars */) = 0 <0.000200>\n",
//!     "7 1700000000.000500 read(3</etc/hosts>, \"127.0.0.1 localhost\\n\"..., 4096) = 20 <0.000031>\n",
//!     "7 1700000000.000600 +++ exited with 0 +++\n",
//! ));
//! let read = &log.records[0];
//! assert_eq!(read.op, Some(IoOp::Read));
//! assert_eq!(read.path.as_deref(), Some("/etc/hosts"));
//! assert_eq!((read.bytes, read.bytes_asked), (20, Some(4096)));
//! assert_eq!(read.end_unix_ns - read.start_unix_ns, 31_000);
//! assert_eq!(log.programs[&7], "cat");
//! assert_eq!(log.ignored_syscalls["execve"], 1);
//! assert_eq!((log.other_lines, log.malformed, log.truncated), (1, 0, false));
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::BufRead;

use super::{Endpoint, IoOp, IoRecord, Transport};

/// How many malformed lines [`StraceLog::problems`] describes; later ones are only counted.
pub const MAX_PROBLEMS: usize = 100;

/// What an `strace` log holds: its I/O calls as records, and counts of everything else.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StraceLog {
    /// The I/O calls, in the order they completed in the log. A record's `tid` is the id strace
    /// printed; its `pid` the process, which differs for threads made by `clone(CLONE_THREAD)`.
    pub records: Vec<IoRecord>,
    /// Each pid's program: the file name of what it last `execve`d; a child made by `fork` or
    /// `clone` has its parent's until it `execve`s.
    pub programs: BTreeMap<u32, String>,
    /// Calls that are not I/O (`mmap`, `brk`, `futex`…), counted by name.
    pub ignored_syscalls: BTreeMap<String, u64>,
    /// Lines that are strace output but no call: signals (`--- SIGCHLD … ---`), exits
    /// (`+++ exited with 0 +++`), strace's notes about itself (`strace: Process 12 attached`),
    /// and the `<... resumed>` ends of calls whose start is not in the log.
    pub other_lines: u64,
    /// Lines that are not strace output.
    pub malformed: u64,
    /// The first [`MAX_PROBLEMS`] malformed lines, and what was wrong with them.
    pub problems: Vec<Problem>,
    /// Whether the log ends early: inside a line, or with calls left unfinished.
    pub truncated: bool,
    /// Calls left `<unfinished ...>` and never resumed: at the end of the log, or (in a
    /// corrupt log) followed by another call of the same pid.
    pub unfinished: u64,
}

/// A line of a log that is not strace output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The line's number, from 1.
    pub line: usize,
    /// What was expected and what was found instead.
    pub message: String,
}

/// `line N: message`.
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Reads the strace log `text`.
pub fn parse(text: &str) -> StraceLog {
    let mut parser = Parser::default();
    for line in text.split_inclusive('\n') {
        parser.line(line);
    }
    parser.finish()
}

/// Reads an strace log from `reader`, a line at a time. Bytes that are not UTF-8 are replaced
/// (strace escapes them, so only a damaged log has any); only I/O errors are errors.
pub fn read(mut reader: impl BufRead) -> std::io::Result<StraceLog> {
    let mut parser = Parser::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(parser.finish());
        }
        parser.line(&String::from_utf8_lossy(&line));
    }
}

/// The state of a read between lines.
#[derive(Default)]
struct Parser {
    log: StraceLog,
    /// The number of the line being read, from 1.
    line_no: usize,
    /// Each pid's call left `<unfinished ...>`.
    pending: HashMap<u32, Pending>,
    /// The record that the `-k` frames which follow belong to.
    stack_target: Option<usize>,
    /// `connect` records without a local address, by (descriptor table, fd).
    connects: HashMap<(u32, i64), usize>,
    /// The pid owning the descriptor table of each thread made by `clone(CLONE_FILES)`.
    fd_tables: HashMap<u32, u32>,
    /// The process (thread group) of each thread made by `clone(CLONE_THREAD)`: under `-f`
    /// strace names threads by their own id.
    thread_groups: HashMap<u32, u32>,
}

/// The first half of a call that strace printed as `<unfinished ...>`.
struct Pending {
    name: String,
    start_ns: u64,
    /// The arguments printed so far, after the `(`.
    args: String,
}

/// The result of a call: `= 3</etc/passwd>`, `= -1 EAGAIN (Resource temporarily unavailable)`.
struct Outcome<'a> {
    /// The returned value; `None` for `?`.
    value: Option<i128>,
    /// The returned descriptor's decoration, without the angle brackets.
    decoration: Option<&'a str>,
    /// The errno's name; "unfinished" for a call that never returned (`= ?`).
    error: Option<String>,
}

impl Parser {
    fn line(&mut self, raw: &str) {
        self.line_no += 1;
        let terminated = raw.ends_with('\n');
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Err(message) = self.interpret(line, terminated) {
            self.stack_target = None;
            if terminated {
                self.log.malformed += 1;
                if self.log.problems.len() < MAX_PROBLEMS {
                    self.log.problems.push(Problem { line: self.line_no, message });
                }
            } else {
                // Only the last line can lack its newline: the log was cut inside it.
                self.log.truncated = true;
            }
        }
    }

    fn finish(mut self) -> StraceLog {
        if !self.pending.is_empty() {
            self.log.unfinished += self.pending.len() as u64;
            self.log.truncated = true;
        }
        // A thread's calls printed before its `clone` returned (`<... clone resumed> = N`) took
        // its own id as their process: now every clone is known.
        for i in 0..self.log.records.len() {
            let tid = u32::try_from(self.log.records[i].tid).unwrap_or(u32::MAX);
            let group = self.thread_group(tid);
            if group != tid {
                self.log.records[i].pid = group;
            }
        }
        self.log
    }

    fn interpret(&mut self, line: &str, terminated: bool) -> Result<(), String> {
        if let Some(frame) = line.strip_prefix(" > ") {
            let frame = frame.trim();
            if !terminated && !frame.ends_with(']') {
                return Err(format!(
                    "expected a stack frame ending in `[address]`, found {}",
                    excerpt(frame)
                ));
            }
            if let Some(at) = self.stack_target {
                self.log.records[at].stack.push(frame.to_owned());
            }
            return Ok(());
        }
        self.stack_target = None;
        let line = line.trim_start();
        if line.is_empty() {
            return Ok(());
        }
        if line.starts_with("strace: ") || line.starts_with("[ Process PID=") || line.starts_with("<detached")
        {
            self.log.other_lines += 1;
            return Ok(());
        }
        let (pid, rest) = split_pid(line)?;
        let (start_ns, body) = split_timestamp(rest)?;
        let signal = body.starts_with("--- ") && body.ends_with(" ---");
        if signal || (body.starts_with("+++ ") && body.ends_with(" +++")) {
            self.log.other_lines += 1;
            return Ok(());
        }
        if let Some(resumed) = body.strip_prefix("<... ") {
            return self.resumed(pid, resumed);
        }
        let (name, rest) = body.split_at(name_len(body));
        let rest = match rest.strip_prefix('(') {
            Some(rest) if !name.is_empty() => rest,
            _ if body.starts_with(|c: char| c.is_ascii_digit()) => {
                return Err(format!(
                    "expected a `-ttt` timestamp (`seconds.fraction`) or `name(args) = result`, found {}",
                    excerpt(body)
                ))
            }
            _ => return Err(format!("expected `name(args) = result`, found {}", excerpt(body))),
        };
        if let Some(args) = rest.strip_suffix("<unfinished ...>") {
            let call = Pending { name: name.to_owned(), start_ns, args: args.to_owned() };
            if self.pending.insert(pid, call).is_some() {
                self.log.unfinished += 1;
            }
            return Ok(());
        }
        self.complete(pid, start_ns, name, rest)
    }

    /// `text` follows `<... `.
    fn resumed(&mut self, pid: u32, text: &str) -> Result<(), String> {
        let (name, rest) = text.split_at(name_len(text));
        let rest = match rest.strip_prefix(" resumed>") {
            Some(rest) if !name.is_empty() => rest,
            _ => return Err(format!("expected `<... name resumed>`, found {}", excerpt(text))),
        };
        match self.pending.remove(&pid) {
            None => {
                // The call began before the log did.
                self.log.other_lines += 1;
                Ok(())
            }
            Some(call) if call.name != name => {
                let message = format!(
                    "expected `<... {} resumed>` for pid {pid}, found `<... {name} resumed>`",
                    call.name
                );
                self.pending.insert(pid, call);
                Err(message)
            }
            Some(call) => {
                let mut args = call.args;
                args.push_str(rest);
                self.complete(pid, call.start_ns, &call.name, &args)
            }
        }
    }

    /// `rest` is what follows the call's `(`: its arguments, `)`, ` = ` and its result.
    fn complete(&mut self, pid: u32, start_ns: u64, name: &str, rest: &str) -> Result<(), String> {
        let mut args = Vec::new();
        let Some(close) = scan_list(rest, Some(&mut args)) else {
            return Err(format!("expected `)` closing the arguments of `{name}`, found the end of the line"));
        };
        let after = rest[close..].trim_start();
        let Some(result) = after.strip_prefix('=') else {
            return Err(format!(
                "expected `= result` after the arguments of `{name}`, found {}",
                excerpt(after)
            ));
        };
        let Some((outcome, duration_ns)) = parse_result(result.trim_start()) else {
            return Err(format!(
                "expected a result (a number, `-1 ERRNO` or `?`, then `<seconds>`) of `{name}`, found {}",
                excerpt(result.trim())
            ));
        };
        self.on_call(pid, name, start_ns, start_ns.saturating_add(duration_ns), &args, &outcome);
        Ok(())
    }

    fn on_call(
        &mut self,
        pid: u32,
        name: &str,
        start_ns: u64,
        end_ns: u64,
        args: &[&str],
        outcome: &Outcome<'_>,
    ) {
        self.track_process(pid, name, args, outcome);
        let Some(op) = io_op(name) else {
            match self.log.ignored_syscalls.get_mut(name) {
                Some(count) => *count += 1,
                None => {
                    self.log.ignored_syscalls.insert(name.to_owned(), 1);
                }
            }
            return;
        };
        let mut record = io_record(pid, op, name, start_ns, end_ns, args, outcome);
        record.pid = self.thread_group(pid);
        let at = self.log.records.len();
        if let Some(fd) = record.fd {
            self.link_connect(pid, fd, &record, at);
        }
        self.log.records.push(record);
        self.stack_target = Some(at);
    }

    /// Follows `execve` (program names) and `fork`/`clone` (inherited names, shared descriptor
    /// tables).
    fn track_process(&mut self, pid: u32, name: &str, args: &[&str], outcome: &Outcome<'_>) {
        match name {
            "execve" | "execveat" if outcome.value == Some(0) => {
                let path = args.get(usize::from(name == "execveat")).and_then(|a| unquote(a));
                if let Some(path) = path {
                    let program = path.rsplit('/').next().unwrap_or_default();
                    if !program.is_empty() {
                        self.log.programs.insert(pid, program.to_owned());
                    }
                }
            }
            "clone" | "clone3" | "fork" | "vfork" => {
                let Some(child) = outcome.value.and_then(|v| u32::try_from(v).ok()).filter(|&c| c > 0) else {
                    return;
                };
                if let Some(program) = self.log.programs.get(&pid).cloned() {
                    self.log.programs.entry(child).or_insert(program);
                }
                if name.starts_with("clone") && args.iter().any(|a| a.contains("CLONE_THREAD")) {
                    let group = self.thread_group(pid);
                    self.thread_groups.insert(child, group);
                } else {
                    self.thread_groups.remove(&child);
                }
                if name.starts_with("clone") && args.iter().any(|a| a.contains("CLONE_FILES")) {
                    let table = self.fd_table(pid);
                    self.fd_tables.insert(child, table);
                } else {
                    self.fd_tables.remove(&child);
                }
            }
            _ => {}
        }
    }

    /// The process a thread belongs to (itself, unless a `clone(CLONE_THREAD)` made it).
    fn thread_group(&self, tid: u32) -> u32 {
        self.thread_groups.get(&tid).copied().unwrap_or(tid)
    }

    fn fd_table(&self, pid: u32) -> u32 {
        self.fd_tables.get(&pid).copied().unwrap_or(pid)
    }

    /// Gives a `connect` made before its socket had an address the local address of the next
    /// record on the same descriptor (at `at`, not yet pushed).
    fn link_connect(&mut self, pid: u32, fd: i64, record: &IoRecord, at: usize) {
        let key = (self.fd_table(pid), fd);
        if record.op == Some(IoOp::Connect) {
            if record.local.is_none() {
                self.connects.insert(key, at);
            } else {
                self.connects.remove(&key);
            }
            return;
        }
        let Some(&connect) = self.connects.get(&key) else { return };
        // An open or accept returning this fd means the connected socket was closed unseen.
        let same_socket = !matches!(record.op, Some(IoOp::Open | IoOp::Accept));
        if same_socket && record.local.is_some() {
            let connect = &mut self.log.records[connect];
            connect.local.clone_from(&record.local);
            if connect.remote.is_none() {
                connect.remote.clone_from(&record.remote);
            }
        }
        if !same_socket || record.local.is_some() || record.op == Some(IoOp::Close) {
            self.connects.remove(&key);
        }
    }
}

/// The operation of the system call `name`, if it is I/O.
fn io_op(name: &str) -> Option<IoOp> {
    Some(match name {
        "open" | "openat" | "openat2" | "creat" => IoOp::Open,
        "read" | "readv" => IoOp::Read,
        "write" | "writev" => IoOp::Write,
        "pread64" | "preadv" | "preadv2" => IoOp::Pread,
        "pwrite64" | "pwritev" | "pwritev2" => IoOp::Pwrite,
        "send" | "sendto" | "sendmsg" | "sendmmsg" | "sendfile" | "sendfile64" => IoOp::Send,
        "recv" | "recvfrom" | "recvmsg" | "recvmmsg" => IoOp::Recv,
        "connect" => IoOp::Connect,
        "accept" | "accept4" => IoOp::Accept,
        "fsync" | "fdatasync" => IoOp::Fsync,
        "close" => IoOp::Close,
        _ => return None,
    })
}

fn io_record(
    pid: u32,
    op: IoOp,
    name: &str,
    start_unix_ns: u64,
    end_unix_ns: u64,
    args: &[&str],
    outcome: &Outcome<'_>,
) -> IoRecord {
    let mut record = IoRecord {
        pid,
        tid: u64::from(pid),
        op: Some(op),
        syscall: name.to_owned(),
        start_unix_ns,
        end_unix_ns,
        error: outcome.error.clone(),
        ..IoRecord::default()
    };
    let ok = record.error.is_none();
    let returned_fd = outcome.value.and_then(|v| i64::try_from(v).ok()).filter(|&fd| ok && fd >= 0);
    let (fd, decoration) = args.first().map_or((None, None), |a| fd_arg(a));
    match op {
        IoOp::Open => {
            record.fd = returned_fd;
            let path_arg = usize::from(name.starts_with("openat"));
            record.path = outcome
                .decoration
                .and_then(file_path)
                .or_else(|| args.get(path_arg).and_then(|a| unquote(a)));
        }
        IoOp::Accept => {
            if returned_fd.is_some() {
                record.fd = returned_fd;
                describe(&mut record, outcome.decoration);
            } else {
                record.fd = fd;
                describe(&mut record, decoration);
            }
            if record.remote.is_none() {
                record.remote = args.get(1).and_then(|a| sockaddr(a));
            }
        }
        _ => {
            record.fd = fd;
            describe(&mut record, decoration);
            if op == IoOp::Connect && record.remote.is_none() {
                record.remote = args.get(1).and_then(|a| sockaddr(a));
            }
            if op.moves_data() {
                data(&mut record, name, args, outcome.value.filter(|_| ok));
            }
        }
    }
    record
}

/// Fills the sizes, offset and peer of a call that moves data; `value` is its result if it
/// succeeded.
fn data(record: &mut IoRecord, name: &str, args: &[&str], value: Option<i128>) {
    let number_at = |i: usize| args.get(i).and_then(|a| number(a));
    let moved = value.and_then(|v| u64::try_from(v).ok()).unwrap_or(0);
    let iov_lens = || args.get(1).and_then(|a| sum_field(a, "iov_len="));
    match name {
        "readv" | "writev" | "preadv" | "preadv2" | "pwritev" | "pwritev2" | "sendmsg" | "recvmsg" => {
            record.bytes_asked = iov_lens();
            record.bytes = moved;
        }
        "sendmmsg" | "recvmmsg" => {
            // The result counts messages; their lengths are in `msg_len`.
            record.bytes_asked = iov_lens();
            record.bytes =
                value.and_then(|_| args.get(1)).and_then(|a| sum_field(a, "msg_len=")).unwrap_or(0);
        }
        "sendfile" | "sendfile64" => {
            record.bytes_asked = number_at(3);
            record.bytes = moved;
        }
        _ => {
            record.bytes_asked = number_at(2);
            record.bytes = moved;
        }
    }
    if matches!(record.op, Some(IoOp::Pread | IoOp::Pwrite)) {
        // pread64(fd, buf, count, offset), preadv2(fd, iov, iovcnt, offset, flags), …
        record.offset = number_at(3);
    }
    if record.remote.is_none() {
        record.remote = match name {
            "sendto" | "recvfrom" => args.get(4).and_then(|a| sockaddr(a)),
            "sendmsg" | "recvmsg" => args.get(1).and_then(|a| field(a, "msg_name=")).and_then(sockaddr),
            _ => None,
        };
    }
}

/// Fills a record's path, or its transport and addresses, from a descriptor's decoration.
fn describe(record: &mut IoRecord, decoration: Option<&str>) {
    let Some(decoration) = decoration else { return };
    if let Some(path) = file_path(decoration) {
        record.path = Some(path);
    } else if let Some(socket) = socket(decoration) {
        record.transport = Some(socket.transport);
        record.local = socket.local;
        record.remote = socket.remote;
    }
}

/// `1234 `, `[pid  1234] ` or nothing (pid 0) at the start of a line.
fn split_pid(line: &str) -> Result<(u32, &str), String> {
    if let Some(rest) = line.strip_prefix("[pid") {
        let rest = rest.trim_start();
        let n = digits_len(rest);
        return match (rest[..n].parse::<u32>(), rest[n..].strip_prefix(']')) {
            (Ok(pid), Some(rest)) => Ok((pid, rest.trim_start())),
            _ => Err(format!("expected `[pid N]`, found {}", excerpt(line))),
        };
    }
    let n = digits_len(line);
    if n == 0 || !line[n..].starts_with([' ', '\t']) {
        return Ok((0, line));
    }
    match line[..n].parse::<u32>() {
        Ok(pid) => Ok((pid, line[n..].trim_start())),
        Err(_) => Err(format!("expected a pid, found {}", excerpt(&line[..n]))),
    }
}

/// The `-ttt` timestamp `1700000000.000001 ` at the start of `text`, in Unix nanoseconds (0
/// when there is none).
fn split_timestamp(text: &str) -> Result<(u64, &str), String> {
    let n = digits_len(text);
    if n == 0 || !text[n..].starts_with('.') {
        return Ok((0, text));
    }
    let end = n + 1 + digits_len(&text[n + 1..]);
    let rest = &text[end..];
    if end == n + 1 || !rest.starts_with([' ', '\t']) {
        return Err(format!("expected a timestamp `seconds.fraction `, found {}", excerpt(text)));
    }
    match parse_seconds(&text[..end]) {
        Some(ns) => Ok((ns, rest.trim_start())),
        None => Err(format!("timestamp out of range: {}", excerpt(&text[..end]))),
    }
}

/// `seconds.fraction` in nanoseconds, exactly (digits past the ninth are dropped).
fn parse_seconds(text: &str) -> Option<u64> {
    let (seconds, fraction) = text.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(seconds) || !digits(fraction) {
        return None;
    }
    let ns = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(9)
        .fold(0, |ns, b| ns * 10 + u64::from(b - b'0'));
    seconds.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// Parses what follows `= `: the value or `?`, a decoration, an errno name, comments in
/// parentheses, and the `-T` duration.
fn parse_result(text: &str) -> Option<(Outcome<'_>, u64)> {
    let (body, duration_ns) = split_duration(text);
    let mut outcome = Outcome { value: None, decoration: None, error: None };
    let rest = if let Some(rest) = body.strip_prefix('?') {
        rest
    } else {
        let (value, mut i) = parse_int(body)?;
        outcome.value = Some(value);
        if body[i..].starts_with('<') {
            let end = skip_decoration(body.as_bytes(), i)?;
            outcome.decoration = Some(&body[i + 1..end - 1]);
            i = end;
        }
        &body[i..]
    };
    let mut rest = rest.trim_start();
    let errno_len =
        rest.bytes().take_while(|&b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_').count();
    if errno_len > 0 {
        if outcome.value.is_some_and(|v| v >= 0) {
            return None;
        }
        outcome.error = Some(rest[..errno_len].to_owned());
        rest = rest[errno_len..].trim_start();
    }
    let mut first_comment = None;
    while !rest.is_empty() {
        let inner = rest.strip_prefix('(')?;
        let end = scan_list(inner, None)?;
        first_comment.get_or_insert(&inner[..end - 1]);
        rest = inner[end..].trim_start();
    }
    if outcome.error.is_none() {
        if outcome.value.is_none() {
            outcome.error = Some("unfinished".to_owned());
        } else if outcome.value.is_some_and(|v| v < 0) {
            // `-1 (errno 523)`: an errno strace has no name for.
            outcome.error = Some(first_comment.unwrap_or("error").to_owned());
        }
    }
    Some((outcome, duration_ns))
}

/// Splits the `-T` duration (` <0.000031>` or ` <unavailable>`) from the end of a result.
fn split_duration(text: &str) -> (&str, u64) {
    let text = text.trim_end();
    if let Some(start) = text.strip_suffix('>').and_then(|t| t.rfind(" <")) {
        let inner = &text[start + 2..text.len() - 1];
        if inner == "unavailable" {
            return (text[..start].trim_end(), 0);
        }
        if let Some(ns) = parse_seconds(inner) {
            return (text[..start].trim_end(), ns);
        }
    }
    (text, 0)
}

/// A decimal or `0x` hexadecimal integer, maybe negative, at the start of `text`; and where it
/// ends.
fn parse_int(text: &str) -> Option<(i128, usize)> {
    let negative = text.starts_with('-');
    let start = usize::from(negative);
    let (radix, digits_start) = if text[start..].starts_with("0x") { (16, start + 2) } else { (10, start) };
    let len = text[digits_start..]
        .bytes()
        .take_while(|b| b.is_ascii_digit() || (radix == 16 && b.is_ascii_hexdigit()))
        .count();
    if len == 0 {
        return None;
    }
    let end = digits_start + len;
    let value = i128::from_str_radix(&text[digits_start..end], radix).ok()?;
    Some((if negative { -value } else { value }, end))
}

/// A non-negative decimal or `0x` hexadecimal number, the whole of `text`.
fn number(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => text.parse().ok(),
        None => None,
    }
}

/// The fd at the start of an argument (`3<TCP:[…]>`), and its decoration without the angle
/// brackets.
fn fd_arg(arg: &str) -> (Option<i64>, Option<&str>) {
    let sign = usize::from(arg.starts_with('-'));
    let digits = digits_len(&arg[sign..]);
    if digits == 0 {
        return (None, None);
    }
    let end = sign + digits;
    let decoration = if arg[end..].starts_with('<') {
        skip_decoration(arg.as_bytes(), end).map(|close| &arg[end + 1..close - 1])
    } else {
        None
    };
    (arg[..end].parse().ok(), decoration)
}

/// The file of a decoration `/path/to/file` (also `/dev/null<char 1:3>`), unescaped; `None`
/// for sockets, pipes and the like.
fn file_path(decoration: &str) -> Option<String> {
    if !decoration.starts_with('/') {
        return None;
    }
    let b = decoration.as_bytes();
    let mut end = b.len();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'<' => {
                end = i;
                break;
            }
            _ => {}
        }
        i += 1;
    }
    Some(unescape(&decoration[..end]))
}

/// What a socket's decoration tells.
struct Socket {
    transport: Transport,
    local: Option<Endpoint>,
    remote: Option<Endpoint>,
}

/// Reads `TCP:[127.0.0.1:8000->127.0.0.1:45678]`, `TCPv6:[[::1]:8000]`, `UDP:[12345]`,
/// `UNIX-STREAM:[12345->12346]`, `UNIX:[12345,"/run/x.sock"]` (ends named by inode, the path
/// left out: it names the listening socket); `None` for other decorations.
fn socket(decoration: &str) -> Option<Socket> {
    let (protocol, inner) = decoration.split_once(":[")?;
    let inner = inner.strip_suffix(']')?;
    let transport = match protocol {
        "TCP" | "TCPv6" => Transport::Tcp,
        "UDP" | "UDPv6" => Transport::Udp,
        p if p.starts_with("UNIX") => Transport::Unix,
        _ => return None,
    };
    if transport == Transport::Unix {
        // `local->peer` inodes, then the local side's path when it has one.
        let (inodes, path) = match inner.split_once(',') {
            Some((inodes, path)) => (inodes, unquote(path)),
            None => (inner, None),
        };
        let (local, remote) = match inodes.split_once("->") {
            Some((local, remote)) => (local, Some(remote)),
            None => (inodes, None),
        };
        let unix = |address: String| (!address.is_empty()).then_some(Endpoint { address, port: 0 });
        // Inodes on both sides, as the other end's decoration names them (its path names the
        // listening socket, not this connection).
        let _ = path;
        return Some(Socket {
            transport,
            local: unix(local.to_owned()),
            remote: remote.and_then(|r| unix(r.to_owned())),
        });
    }
    if inner.bytes().all(|b| b.is_ascii_digit()) {
        // The inode of a socket with no address yet.
        return Some(Socket { transport, local: None, remote: None });
    }
    let (local, remote) = match inner.split_once("->") {
        Some((local, remote)) => (local, Some(remote)),
        None => (inner, None),
    };
    Some(Socket { transport, local: ip_endpoint(local), remote: remote.and_then(ip_endpoint) })
}

/// `127.0.0.1:8000` or `[::1]:8000`.
fn ip_endpoint(text: &str) -> Option<Endpoint> {
    let (address, port) = match text.strip_prefix('[') {
        Some(rest) => rest.split_once("]:")?,
        None => text.rsplit_once(':')?,
    };
    if address.is_empty() || port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // An IPv4 peer of a dual-stack socket, as its other end names it.
    let address = match address.strip_prefix("::ffff:") {
        Some(v4) if v4.contains('.') => v4,
        _ => address,
    };
    Some(Endpoint { address: address.to_owned(), port: port.parse().ok()? })
}

/// A socket address argument: `{sa_family=AF_INET, sin_port=htons(8000),
/// sin_addr=inet_addr("127.0.0.1")}`, its `AF_INET6` form with
/// `inet_pton(AF_INET6, "::1", &sin6_addr)`, or `{sa_family=AF_UNIX, sun_path="/run/x.sock"}`.
fn sockaddr(text: &str) -> Option<Endpoint> {
    let family = text.trim_start().strip_prefix("{sa_family=")?;
    if family.starts_with("AF_UNIX") {
        // A Unix socket's ends are inodes (see `socket`): the next call on the descriptor names
        // the peer's.
        return None;
    }
    let address = if family.starts_with("AF_INET6") {
        after(family, "inet_pton(AF_INET6, \"")?
    } else if family.starts_with("AF_INET") {
        after(family, "inet_addr(\"")?
    } else {
        return None;
    };
    let address = &address[..address.find('"')?];
    let port = after(family, "_port=htons(")?;
    let port = port[..digits_len(port)].parse().ok()?;
    Some(Endpoint { address: address.to_owned(), port })
}

/// What follows the first `key` in `text`.
fn after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.find(key).map(|i| &text[i + key.len()..])
}

/// The quoted string (maybe `@"…"`, an abstract socket's name) at the start of `text`,
/// unescaped; what follows it (`...` when cut) is ignored.
fn unquote(text: &str) -> Option<String> {
    let text = text.trim_start();
    let (at, quoted) = match text.strip_prefix('@') {
        Some(rest) => ("@", rest),
        None => ("", text),
    };
    if !quoted.starts_with('"') {
        return None;
    }
    let end = skip_string(quoted.as_bytes(), 0)?;
    Some(format!("{at}{}", unescape(&quoted[1..end - 1])))
}

/// Undoes strace's escapes: `\"`, `\\`, `\n` and the like, octal `\177` and hex `\x7f` bytes.
fn unescape(text: &str) -> String {
    if !text.contains('\\') {
        return text.to_owned();
    }
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 == b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = b[i + 1];
        i += 2;
        match c {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0b),
            b'f' => out.push(0x0c),
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'x' => {
                let len = b[i..].iter().take(2).take_while(|d| d.is_ascii_hexdigit()).count();
                match u8::from_str_radix(&text[i..i + len], 16) {
                    Ok(byte) => out.push(byte),
                    Err(_) => out.extend_from_slice(b"\\x"),
                }
                i += len;
            }
            b'0'..=b'7' => {
                let mut byte = u32::from(c - b'0');
                let mut len = 0;
                while len < 2 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                    byte = byte * 8 + u32::from(b[i] - b'0');
                    i += 1;
                    len += 1;
                }
                out.push(byte as u8);
            }
            other => out.push(other),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Scans an argument list (or a parenthesised comment) whose `(` came just before `text`, to
/// the `)` that closes it, minding strings, brackets, braces, parentheses and descriptor
/// decorations; returns the index just past that `)`, and pushes the top-level arguments,
/// trimmed, to `args`. `None` when the list is not closed.
fn scan_list<'a>(text: &'a str, mut args: Option<&mut Vec<&'a str>>) -> Option<usize> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut start = 0;
    // A `<` after a number or a name starts a decoration, unless one has failed to close on
    // this line: then `<` is text (this keeps the scan linear).
    let mut decorations = true;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = skip_string(b, i)?;
                continue;
            }
            b'<' if decorations && i > 0 && is_word_byte(b[i - 1]) => {
                if let Some(end) = skip_decoration(b, i) {
                    i = end;
                    continue;
                }
                decorations = false;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' if depth > 0 => depth -= 1,
            b')' => {
                if let Some(args) = args.as_deref_mut() {
                    let last = text[start..i].trim();
                    if !last.is_empty() || !args.is_empty() {
                        args.push(last);
                    }
                }
                return Some(i + 1);
            }
            b']' | b'}' => return None,
            b',' if depth == 0 => {
                if let Some(args) = args.as_deref_mut() {
                    args.push(text[start..i].trim());
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index just past the string that opens at `b[at]` (a `"`).
fn skip_string(b: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The index just past the bracketed group (`[…]`, `{…}`, `(…)`) that opens at `b[at]`.
fn skip_group(b: &[u8], at: usize) -> Option<usize> {
    skip_nested(b, at, b"([{", b")]}", Passing::Strings)
}

/// What [`skip_nested`] passes over whole inside a group.
#[derive(Clone, Copy)]
enum Passing {
    /// Quoted strings (`"…"`, with strace's escapes).
    Strings,
    /// The byte after each backslash.
    Escapes,
}

/// The index just past the group that opens at `b[at]`, counting `opens` and `closes` as
/// nesting and passing over what `passing` says; `None` when it does not close.
fn skip_nested(b: &[u8], at: usize, opens: &[u8], closes: &[u8], passing: Passing) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = at;
    while i < b.len() {
        match (passing, b[i]) {
            (Passing::Strings, b'"') => {
                i = skip_string(b, i)?;
                continue;
            }
            (Passing::Escapes, b'\\') => i += 1,
            (_, c) if opens.contains(&c) => depth += 1,
            (_, c) if closes.contains(&c) => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index just past the decoration that opens at `b[at]` (a `<`): a socket's
/// `<TCP:[a->b]>` (whose `>` may appear inside the brackets) or a file's `</path>`, where
/// strace escapes `<` and `>` and a device adds `<char 1:3>`.
fn skip_decoration(b: &[u8], at: usize) -> Option<usize> {
    let word = b[at + 1..].iter().take_while(|&&c| is_word_byte(c) || c == b'-').count();
    let colon = at + 1 + word;
    if word > 0 && b.get(colon) == Some(&b':') && b.get(colon + 1) == Some(&b'[') {
        let end = skip_group(b, colon + 1)?;
        return (b.get(end) == Some(&b'>')).then_some(end + 1);
    }
    skip_nested(b, at, b"<", b">", Passing::Escapes)
}

/// The sum of the numbers after each `key` (such as `iov_len=`) in `text`, outside strings;
/// `None` when there is none, or when strace shortened an array (`..., ...]`), so the sum would
/// be short.
fn sum_field(text: &str, key: &str) -> Option<u64> {
    let b = text.as_bytes();
    let mut sum = 0u64;
    let mut found = false;
    let mut decorations = true;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = skip_string(b, i)?;
                continue;
            }
            b'<' if decorations && i > 0 && b[i - 1].is_ascii_digit() => {
                if let Some(end) = skip_decoration(b, i) {
                    i = end;
                    continue;
                }
                decorations = false;
            }
            b'.' if b[i..].starts_with(b"...") => {
                i += 3;
                if text[i..].trim_start().starts_with(']') {
                    return None;
                }
                continue;
            }
            _ if b[i..].starts_with(key.as_bytes()) && (i == 0 || !is_word_byte(b[i - 1])) => {
                i += key.len();
                let len = digits_len(&text[i..]);
                if len > 0 {
                    sum = sum.saturating_add(text[i..i + len].parse().unwrap_or(u64::MAX));
                    found = true;
                }
                i += len;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found.then_some(sum)
}

/// The bracketed value of the first `key` (such as `msg_name=`) in `text`, outside strings.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            i = skip_string(b, i)?;
            continue;
        }
        if b[i..].starts_with(key.as_bytes()) && (i == 0 || !is_word_byte(b[i - 1])) {
            let at = i + key.len();
            if !matches!(b.get(at), Some(b'{' | b'[')) {
                return None;
            }
            return skip_group(b, at).map(|end| &text[at..end]);
        }
        i += 1;
    }
    None
}

/// The length of a system call's name at the start of `text` (`???` for an unknown one).
fn name_len(text: &str) -> usize {
    text.bytes().take_while(|&b| is_word_byte(b) || b == b'?').count()
}

fn digits_len(text: &str) -> usize {
    text.bytes().take_while(u8::is_ascii_digit).count()
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The start of `text`, quoted, for messages.
fn excerpt(text: &str) -> String {
    const MAX_CHARS: usize = 60;
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None if text.is_empty() => "the end of the line".to_owned(),
        None => format!("{text:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use Transport::{Tcp, Udp, Unix};

    // Real logs, taken on Linux with strace 6.1 (see `real_*` below for how), trimmed to whole
    // lines: the server's begins at its listening socket, the client's at its first socket.
    const SERVER: &str = include_str!("../../tests/data/strace/http_server.log");
    const CLIENT: &str = include_str!("../../tests/data/strace/http_client.log");
    const SOCKETS: &str = include_str!("../../tests/data/strace/python_sockets.log");

    /// Parses `text`, checking that every line was understood and nothing was left over.
    fn clean(text: &str) -> StraceLog {
        let log = parse(text);
        assert_eq!(log.problems, [], "{text}");
        assert_eq!((log.malformed, log.truncated, log.unfinished), (0, false, 0), "{text}");
        log
    }

    /// The one record of `line`.
    fn one(line: &str) -> IoRecord {
        let mut log = clean(&format!("{line}\n"));
        assert_eq!(log.records.len(), 1, "{line}");
        log.records.pop().unwrap()
    }

    fn ep(address: &str, port: u16) -> Option<Endpoint> {
        Some(Endpoint { address: address.to_owned(), port })
    }

    fn count(log: &StraceLog, syscall: &str) -> usize {
        log.records.iter().filter(|r| r.syscall == syscall).count()
    }

    #[test]
    fn a_read_of_a_file_has_every_field() {
        let r =
            one(r#"1234 1700000000.000001 read(3</etc/passwd>, "root:x:0:0"..., 4096) = 1220 <0.000031>"#);
        let expected = IoRecord {
            pid: 1234,
            tid: 1234,
            op: Some(IoOp::Read),
            syscall: "read".into(),
            fd: Some(3),
            start_unix_ns: 1_700_000_000_000_001_000,
            end_unix_ns: 1_700_000_000_000_032_000,
            bytes_asked: Some(4096),
            bytes: 1220,
            path: Some("/etc/passwd".into()),
            ..IoRecord::default()
        };
        assert_eq!(r, expected);
        assert!(r.ok() && !r.is_network());
    }

    #[test]
    fn timestamps_and_durations_are_exact() {
        let log = clean(concat!(
            "1 1700000000.999999 close(3) = 0 <0.000001>\n",
            "1 1700000001.123456789 close(4) = 0 <1.5>\n",
            "1 1700000002.5 close(5) = 0\n",
            "1 close(6) = 0 <0.000007>\n",
        ));
        let times: Vec<_> = log.records.iter().map(|r| (r.start_unix_ns, r.end_unix_ns)).collect();
        assert_eq!(
            times,
            [
                (1_700_000_000_999_999_000, 1_700_000_001_000_000_000),
                (1_700_000_001_123_456_789, 1_700_000_002_623_456_789),
                (1_700_000_002_500_000_000, 1_700_000_002_500_000_000),
                (0, 7_000),
            ]
        );
    }

    #[test]
    fn socket_decorations_give_transport_and_addresses() {
        let cases = [
            ("3<TCP:[127.0.0.1:8000->127.0.0.1:45678]>", Tcp, ep("127.0.0.1", 8000), ep("127.0.0.1", 45678)),
            ("3<TCPv6:[[::1]:8000->[::1]:45678]>", Tcp, ep("::1", 8000), ep("::1", 45678)),
            ("3<UDP:[127.0.0.1:5000->127.0.0.1:6000]>", Udp, ep("127.0.0.1", 5000), ep("127.0.0.1", 6000)),
            ("3<UDPv6:[[fe80::1]:5000->[fe80::2]:6000]>", Udp, ep("fe80::1", 5000), ep("fe80::2", 6000)),
            ("3<TCP:[127.0.0.1:8000]>", Tcp, ep("127.0.0.1", 8000), None),
            ("3<TCPv6:[[::]:8000]>", Tcp, ep("::", 8000), None),
            ("3<TCP:[578086]>", Tcp, None, None),
            ("3<UNIX-STREAM:[12345->12346]>", Unix, ep("12345", 0), ep("12346", 0)),
            ("3<UNIX:[12345,\"/run/x.sock\"]>", Unix, ep("12345", 0), None),
            ("3<UNIX-STREAM:[579683->579682,\"/tmp/a,b.sock\"]>", Unix, ep("579683", 0), ep("579682", 0)),
            ("3<UNIX-DGRAM:[7]>", Unix, ep("7", 0), None),
        ];
        for (fd, transport, local, remote) in cases {
            let r = one(&format!("9 1700000000.000000 write({fd}, \"hi\", 2) = 2 <0.000010>"));
            assert_eq!(r.op, Some(IoOp::Write), "{fd}");
            assert_eq!(
                (r.fd, r.transport, &r.local, &r.remote, &r.path),
                (Some(3), Some(transport), &local, &remote, &None),
                "{fd}"
            );
            assert!(r.is_network(), "{fd}");
        }
    }

    #[test]
    fn pipes_anonymous_inodes_and_undetailed_sockets_have_no_path() {
        for fd in [
            "3<pipe:[578380]>",
            "3<anon_inode:[eventfd]>",
            "3<anon_inode:inotify>",
            "3<socket:[123]>",
            "3<NETLINK:[ROUTE:1234]>",
            "3",
        ] {
            let r = one(&format!("9 1700000000.000000 read({fd}, \"x\", 8) = 1 <0.000010>"));
            assert_eq!((r.fd, &r.path, r.transport, r.bytes), (Some(3), &None, None, 1), "{fd}");
        }
    }

    #[test]
    fn escaped_paths_are_decoded() {
        let cases = [
            (r"3</tmp/a\76b>", "/tmp/a>b"),
            (r"3</tmp/c\74d>", "/tmp/c<d"),
            (r#"3</tmp/q\"x>"#, "/tmp/q\"x"),
            (r"3</tmp/back\\sl>", "/tmp/back\\sl"),
            (r"3</tmp/nl\nx\ty>", "/tmp/nl\nx\ty"),
            (r"3</tmp/\303\251t\303\251>", "/tmp/été"),
            (r"3</tmp/\x7fdel>", "/tmp/\x7fdel"),
            ("3</tmp/sp ace, (x) = 1>", "/tmp/sp ace, (x) = 1"),
            ("3</tmp/x]y{z>", "/tmp/x]y{z"),
            ("3</dev/null<char 1:3>>", "/dev/null"),
            ("3</tmp/gone>(deleted)", "/tmp/gone"),
        ];
        for (fd, path) in cases {
            let r = one(&format!("9 1700000000.000000 write({fd}, \"x\", 1) = 1 <0.000010>"));
            assert_eq!((r.fd, r.path.as_deref(), r.bytes_asked), (Some(3), Some(path), Some(1)), "{fd}");
        }
    }

    #[test]
    fn arguments_split_around_strings_brackets_and_nesting() {
        let r = one(concat!(
            r#"9 1700000000.000000 write(1</dev/pts/0<char 136:0>>, "a) = 5, \"q\" {[<(]} \\ 3<x> ,"..., 4096)"#,
            " = 4096 <0.000010>"
        ));
        assert_eq!((r.path.as_deref(), r.bytes_asked, r.bytes), (Some("/dev/pts/0"), Some(4096), 4096));
        // Strace pads short calls' results to a column.
        let r = one("9 1700000000.000000 close(3</x>)          = 0 <0.000010>");
        assert_eq!((r.op, r.path.as_deref()), (Some(IoOp::Close), Some("/x")));
    }

    #[test]
    fn opens_take_the_returned_fd_and_its_path() {
        let log = clean(concat!(
            "5 1700000000.000001 openat(AT_FDCWD</home/u>, \"x.txt\", O_RDONLY|O_CLOEXEC) = 3</home/u/x.txt> <0.000010>\n",
            "5 1700000000.000002 openat(AT_FDCWD</home/u>, \"/nonexistent\", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000010>\n",
            "5 1700000000.000003 open(\"/etc/hosts\", O_RDONLY) = 4 <0.000010>\n",
            "5 1700000000.000004 creat(\"/tmp/new\", 0644) = 5</tmp/new> <0.000010>\n",
            "5 1700000000.000005 openat2(AT_FDCWD, \"/tmp/o\\\"2\", {flags=O_RDONLY, resolve=0}, 24) = 6 <0.000010>\n",
        ));
        let got: Vec<_> = log
            .records
            .iter()
            .map(|r| (r.syscall.as_str(), r.fd, r.path.as_deref(), r.error.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("openat", Some(3), Some("/home/u/x.txt"), None),
                ("openat", None, Some("/nonexistent"), Some("ENOENT")),
                ("open", Some(4), Some("/etc/hosts"), None),
                ("creat", Some(5), Some("/tmp/new"), None),
                ("openat2", Some(6), Some("/tmp/o\"2"), None),
            ]
        );
        assert!(log
            .records
            .iter()
            .all(|r| r.op == Some(IoOp::Open) && r.bytes == 0 && r.bytes_asked.is_none()));
    }

    #[test]
    fn connect_takes_its_peer_from_the_sockaddr_and_its_local_address_from_a_later_call() {
        let log = clean(concat!(
            "7 1700000000.000001 connect(5<TCP:[580165]>, {sa_family=AF_INET, sin_port=htons(8000), ",
            "sin_addr=inet_addr(\"127.0.0.1\")}, 16) = -1 EINPROGRESS (Operation now in progress) <0.000118>\n",
            "7 1700000000.000002 sendto(5<TCP:[127.0.0.1:55636->127.0.0.1:8000]>, \"GET / HTTP/1.1\\r\\n\"..., 85, ",
            "MSG_NOSIGNAL, NULL, 0) = 85 <0.000089>\n",
            "7 1700000000.000003 connect(6<TCPv6:[579675]>, {sa_family=AF_INET6, sin6_port=htons(36857), ",
            "sin6_flowinfo=htonl(0), inet_pton(AF_INET6, \"::1\", &sin6_addr), sin6_scope_id=0}, 28) = 0 <0.000259>\n",
            "7 1700000000.000004 connect(7<UNIX-STREAM:[579682]>, {sa_family=AF_UNIX, sun_path=\"/run/x.sock\"}, 17) = 0 <0.000038>\n",
            "7 1700000000.000005 connect(8<UNIX-STREAM:[579690]>, {sa_family=AF_UNIX, sun_path=@\"/tmp/.X11-unix/X0\"}, 20) = 0 <0.000038>\n",
            "7 1700000000.000006 close(6<TCPv6:[[::1]:53588->[::1]:36857]>) = 0 <0.000010>\n",
        ));
        let connects: Vec<_> = log
            .records
            .iter()
            .filter(|r| r.op == Some(IoOp::Connect))
            .map(|r| (r.fd, r.transport, r.local.clone(), r.remote.clone(), r.error.as_deref()))
            .collect();
        assert_eq!(
            connects,
            [
                (Some(5), Some(Tcp), ep("127.0.0.1", 55636), ep("127.0.0.1", 8000), Some("EINPROGRESS")),
                (Some(6), Some(Tcp), ep("::1", 53588), ep("::1", 36857), None),
                (Some(7), Some(Unix), ep("579682", 0), None, None),
                (Some(8), Some(Unix), ep("579690", 0), None, None),
            ]
        );
    }

    #[test]
    fn threads_belong_to_the_process_that_made_them() {
        let log = clean(concat!(
            "10 1700000000.000001 execve(\"/usr/bin/python3\", [\"python3\"], 0x7ffe /* 3 vars */) = 0 <0.000100>\n",
            "10 1700000000.000002 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD, exit_signal=0}, 88) = 11 <0.000010>\n",
            "11 1700000000.000003 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD, exit_signal=0}, 88) = 12 <0.000010>\n",
            "10 1700000000.000004 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLD, child_tidptr=0x7f) = 13 <0.000010>\n",
            "12 1700000000.000005 read(3</etc/hosts>, \"x\", 1) = 1 <0.000001>\n",
            "13 1700000000.000006 read(3</etc/hosts>, \"x\", 1) = 1 <0.000001>\n",
        ));
        let ids: Vec<(u32, u64)> = log.records.iter().map(|r| (r.pid, r.tid)).collect();
        assert_eq!(ids, [(10, 12), (13, 13)], "a thread of a thread is the process's; a fork is its own");
        assert_eq!(log.programs[&10], "python3");
    }

    #[test]
    fn a_thread_sharing_the_descriptor_table_completes_a_connect() {
        let log = clean(concat!(
            "10 1700000000.000001 connect(5<TCP:[1]>, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr(\"10.0.0.2\")}, 16)",
            " = -1 EINPROGRESS (Operation now in progress) <0.000010>\n",
            "10 1700000000.000002 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLD, child_tidptr=0x7f) = 11 <0.000010>\n",
            "11 1700000000.000003 write(5<TCP:[10.0.0.1:999->10.0.0.2:80]>, \"x\", 1) = 1 <0.000010>\n",
            "10 1700000000.000004 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD, exit_signal=0}",
            " => {parent_tid=[12]}, 88) = 12 <0.000010>\n",
            "12 1700000000.000005 write(5<TCP:[10.0.0.1:40000->10.0.0.2:80]>, \"x\", 1) = 1 <0.000010>\n",
        ));
        // The forked child 11 has a table of its own; the thread 12 shares its parent's.
        assert_eq!(log.records[0].local, ep("10.0.0.1", 40000));
    }

    #[test]
    fn accept_describes_the_returned_socket() {
        let log = clean(concat!(
            "8 1700000000.000001 accept4(3<TCP:[127.0.0.1:18733]>, {sa_family=AF_INET, sin_port=htons(37966), ",
            "sin_addr=inet_addr(\"127.0.0.1\")}, [16], SOCK_CLOEXEC) = 4<TCP:[127.0.0.1:18733->127.0.0.1:37966]> <0.000013>\n",
            "8 1700000000.000002 accept(3<TCP:[127.0.0.1:18733]>, {sa_family=AF_INET, sin_port=htons(37970), ",
            "sin_addr=inet_addr(\"127.0.0.1\")}, [16]) = 5 <0.000013>\n",
            "8 1700000000.000003 accept4(3<TCP:[127.0.0.1:18733]>, 0x7ffd6e1c1b40, [16], SOCK_CLOEXEC)",
            " = -1 EAGAIN (Resource temporarily unavailable) <0.000013>\n",
            "8 1700000000.000004 accept4(3<UNIX-STREAM:[579681,\"/tmp/x.sock\"]>, {sa_family=AF_UNIX}, [110 => 2], SOCK_CLOEXEC)",
            " = 5<UNIX-STREAM:[579683->579682,\"/tmp/x.sock\"]> <0.000038>\n",
        ));
        let accepts: Vec<_> = log
            .records
            .iter()
            .map(|r| (r.op, r.fd, r.transport, r.local.clone(), r.remote.clone(), r.error.as_deref()))
            .collect();
        let accept = Some(IoOp::Accept);
        assert_eq!(
            accepts,
            [
                (accept, Some(4), Some(Tcp), ep("127.0.0.1", 18733), ep("127.0.0.1", 37966), None),
                (accept, Some(5), None, None, ep("127.0.0.1", 37970), None),
                (accept, Some(3), Some(Tcp), ep("127.0.0.1", 18733), None, Some("EAGAIN")),
                (accept, Some(5), Some(Unix), ep("579683", 0), ep("579682", 0), None),
            ]
        );
        assert!(log.records.iter().all(IoRecord::is_network));
    }

    #[test]
    fn unfinished_calls_are_joined_per_pid() {
        let log = clean(concat!(
            "1234 1700000000.000001 read(3</x>,  <unfinished ...>\n",
            "1235 1700000000.000002 write(4<pipe:[99]>, \"a, b) = 7 <unfinished ...>\", 9 <unfinished ...>\n",
            "1236 1700000000.000003 futex(0x7f, FUTEX_WAIT_PRIVATE, 2, NULL <unfinished ...>\n",
            "1235 1700000000.000005 <... write resumed>) = 9 <0.000003>\n",
            "1236 1700000000.000006 <... futex resumed>) = -1 EAGAIN (Resource temporarily unavailable) <0.000003>\n",
            "1234 1700000000.000900 <... read resumed>\"abc\", 100) = 3 <0.000899>\n",
        ));
        let got: Vec<_> = log
            .records
            .iter()
            .map(|r| {
                (
                    r.pid,
                    r.syscall.as_str(),
                    r.fd,
                    r.path.as_deref(),
                    r.bytes,
                    r.bytes_asked,
                    r.start_unix_ns,
                    r.end_unix_ns,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    1235,
                    "write",
                    Some(4),
                    None,
                    9,
                    Some(9),
                    1_700_000_000_000_002_000,
                    1_700_000_000_000_005_000
                ),
                (
                    1234,
                    "read",
                    Some(3),
                    Some("/x"),
                    3,
                    Some(100),
                    1_700_000_000_000_001_000,
                    1_700_000_000_000_900_000
                ),
            ]
        );
        assert_eq!(log.ignored_syscalls["futex"], 1);
    }

    #[test]
    fn errors_name_the_errno_and_calls_that_never_returned_are_unfinished() {
        let log = clean(concat!(
            "1 1700000000.000001 read(3<TCP:[1.2.3.4:5->6.7.8.9:10]>, 0x7f00, 4096) = -1 EAGAIN (Resource temporarily unavailable) <0.000005>\n",
            "1 1700000000.000002 read(0</dev/pts/0<char 136:0>>,  <unfinished ...>\n",
            "1 1700000000.000003 --- SIGINT {si_signo=SIGINT, si_code=SI_KERNEL} ---\n",
            "1 1700000000.000004 <... read resumed>0x7ffc, 1024) = ? ERESTARTSYS (To be restarted if SA_RESTART is set) <1.000000>\n",
            "1 1700000000.000005 write(1</dev/null>, \"x\", 1) = ? <unavailable>\n",
            "2 1700000000.000006 recvfrom(3<UDP:[1.2.3.4:5]>,  <unfinished ...>\n",
            "1 1700000000.000007 exit_group(0)                = ?\n",
            "2 1700000000.000008 <... recvfrom resumed> <unfinished ...>) = ?\n",
            "2 1700000000.000009 +++ exited with 0 +++\n",
            "1 1700000000.000009 +++ exited with 0 +++\n",
        ));
        let got: Vec<_> = log
            .records
            .iter()
            .map(|r| (r.syscall.as_str(), r.error.as_deref(), r.bytes, r.bytes_asked))
            .collect();
        assert_eq!(
            got,
            [
                ("read", Some("EAGAIN"), 0, Some(4096)),
                ("read", Some("ERESTARTSYS"), 0, Some(1024)),
                ("write", Some("unfinished"), 0, Some(1)),
                ("recvfrom", Some("unfinished"), 0, None),
            ]
        );
        assert_eq!(log.records[3].end_unix_ns, log.records[3].start_unix_ns);
        assert!(log.records.iter().all(|r| !r.ok()));
        assert_eq!((log.other_lines, log.ignored_syscalls["exit_group"]), (3, 1));
    }

    #[test]
    fn stack_frames_belong_to_the_call_line_before_them() {
        let log = clean(concat!(
            "1 1700000000.000001 write(1</dev/null>, \"x\", 1) = 1 <0.000001>\n",
            " > /usr/lib/x86_64-linux-gnu/libc.so.6(__write+0x14) [0x10e1a4]\n",
            " > /usr/bin/prog(main+0x20) [0x1234]\n",
            "1 1700000000.000002 mmap(NULL, 8192, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f0000000000 <0.000001>\n",
            " > /usr/lib/x86_64-linux-gnu/libc.so.6(mmap64+0x26) [0x11b4c6]\n",
            "1 1700000000.000003 read(0</dev/null>,  <unfinished ...>\n",
            "2 1700000000.000004 close(5) = 0 <0.000001>\n",
            " > /usr/lib/libc.so.6(close+0x1) [0x1]\n",
            "1 1700000000.000005 <... read resumed>\"\", 10) = 0 <0.000004>\n",
            " > /usr/lib/libc.so.6(read+0x1) [0x2]\n",
            " > /usr/bin/prog() [0x3]\n",
            "1 1700000000.000006 --- SIGCHLD {si_signo=SIGCHLD} ---\n",
            " > /usr/lib/libc.so.6(kill+0x1) [0x4]\n",
        ));
        let stacks: Vec<_> = log.records.iter().map(|r| (r.syscall.as_str(), r.stack.clone())).collect();
        let frames = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            stacks,
            [
                (
                    "write",
                    frames(&[
                        "/usr/lib/x86_64-linux-gnu/libc.so.6(__write+0x14) [0x10e1a4]",
                        "/usr/bin/prog(main+0x20) [0x1234]"
                    ])
                ),
                ("close", frames(&["/usr/lib/libc.so.6(close+0x1) [0x1]"])),
                ("read", frames(&["/usr/lib/libc.so.6(read+0x1) [0x2]", "/usr/bin/prog() [0x3]"])),
            ]
        );
    }

    #[test]
    fn a_log_cut_inside_its_last_line_is_truncated_not_malformed() {
        let line = "1 1700000000.000001 write(1</dev/null>, \"hello\", 5) = 5 <0.000001>\n";
        let mut whole = Vec::new();
        for cut in 1..line.len() - 1 {
            let log = parse(&format!("{line}{}", &line[..cut]));
            assert_eq!((log.malformed, log.unfinished), (0, 0), "cut {cut}");
            assert_eq!(log.records.len(), if log.truncated { 1 } else { 2 }, "cut {cut}");
            if !log.truncated {
                whole.push(&line[..cut]);
            }
        }
        // Only a cut just before the duration leaves a line that parses.
        assert_eq!(whole, [&line[..line.len() - 12], &line[..line.len() - 11]]);

        let frame = " > /usr/lib/libc.so.6(__write+0x14) [0x10e1a4]";
        let log = parse(&format!("{line}{}", &frame[..20]));
        assert!(log.truncated && log.records[0].stack.is_empty());
        let log = parse(&format!("{line}{frame}"));
        assert!(!log.truncated && log.records[0].stack.len() == 1);
        let log = parse(&format!("{line}1 1700000000.000002 +++ exited with"));
        assert_eq!((log.truncated, log.other_lines, log.malformed), (true, 0, 0));
    }

    #[test]
    fn calls_unfinished_at_the_end_make_the_log_truncated() {
        let log = parse(concat!(
            "1 1700000000.000001 read(3</x>,  <unfinished ...>\n",
            "2 1700000000.000002 futex(0x7f, FUTEX_WAIT_PRIVATE, 2, NULL <unfinished ...>\n",
            "3 1700000000.000003 close(4) = 0 <0.000001>\n",
        ));
        assert_eq!((log.truncated, log.unfinished, log.records.len(), log.malformed), (true, 2, 1, 0));
    }

    #[test]
    fn lines_that_are_not_strace_output_are_counted_with_their_numbers() {
        let text = concat!(
            "1 1700000000.000001 close(3) = 0 <0.000001>\n",
            "hello world\n",
            "1 1700000000.000002 close(4) = 0 <0.000001>\n",
            "1 1700000000.000003 close(5 = 0\n",
            "1 1700000000.000004 close(5) 0\n",
            "1 1700000000.000005 close(5) = zero\n",
            "[pid 12 close(3) = 0\n",
            "\u{0}\u{1}\u{7f}\u{fffd}binary\n",
            "99999999999 1700000000.0 close(3) = 0\n",
            "1 99999999999999999999.0 close(3) = 0\n",
            "1 10:31:58 close(3) = 0\n",
            "1 1700000000.000006 <... close> = 0\n",
            "1 1700000000.000007 close(3) = 0 (x\n",
            "1 1700000000.000008 <... close resumed>) = 0\n",
            "\n",
            "1 1700000000.000009 close(6) = 0 <0.000001>\n",
        );
        let log = parse(text);
        let lines: Vec<_> = log.problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
        assert_eq!((log.malformed, log.records.len(), log.other_lines, log.truncated), (11, 3, 1, false));
        assert_eq!(
            log.problems[0].to_string(),
            "line 2: expected `name(args) = result`, found \"hello world\""
        );
        let messages: Vec<_> = log.problems.iter().map(|p| p.message.as_str()).collect();
        assert!(messages[1].starts_with("expected `)` closing the arguments of `close`"), "{messages:?}");
        assert!(
            messages[2].starts_with("expected `= result` after the arguments of `close`"),
            "{messages:?}"
        );
        assert!(messages[3].starts_with("expected a result"), "{messages:?}");
        assert!(messages[4].starts_with("expected `[pid N]`"), "{messages:?}");
        assert!(messages[6].starts_with("expected a pid"), "{messages:?}");
        assert!(messages[7].starts_with("timestamp out of range"), "{messages:?}");
        assert!(messages[8].starts_with("expected a `-ttt` timestamp"), "{messages:?}");

        let garbage = "not strace\n".repeat(150);
        let log = parse(&garbage);
        assert_eq!((log.malformed, log.problems.len(), log.problems[99].line), (150, MAX_PROBLEMS, 100));
    }

    #[test]
    fn a_resumed_call_of_another_name_is_malformed() {
        let log = parse(concat!(
            "1 1700000000.000001 read(3</x>,  <unfinished ...>\n",
            "1 1700000000.000002 <... write resumed>) = 1 <0.000001>\n",
            "1 1700000000.000003 <... read resumed>\"a\", 5) = 1 <0.000001>\n",
        ));
        assert_eq!((log.malformed, log.records.len(), log.unfinished), (1, 1, 0));
        assert_eq!(
            log.problems[0].message,
            "expected `<... read resumed>` for pid 1, found `<... write resumed>`"
        );
    }

    #[test]
    fn the_pid_comes_from_either_prefix_or_is_0() {
        let log = clean(concat!(
            "[pid  4321] 1700000000.000001 write(1</dev/pts/0<char 136:0>>, \"x\", 1) = 1 <0.000002>\n",
            "1700000000.000002 write(1</dev/pts/0<char 136:0>>, \"y\", 1) = 1 <0.000002>\n",
            "[pid  4321] 1700000000.000003 read(0</dev/null>,  <unfinished ...>\n",
            "1700000000.000004 read(0</dev/null>, \"\", 1) = 0 <0.000002>\n",
            "[pid  4321] 1700000000.000005 <... read resumed>\"\", 1) = 0 <0.000002>\n",
            "[pid  4321] 1700000000.000006 +++ exited with 0 +++\n",
            "321   1700000000.000007 close(3) = 0 <0.000002>\n",
        ));
        let pids: Vec<_> = log.records.iter().map(|r| (r.pid, r.tid)).collect();
        assert_eq!(pids, [(4321, 4321), (0, 0), (0, 0), (4321, 4321), (321, 321)]);
    }

    #[test]
    fn a_log_without_f_has_pid_0_and_its_program() {
        let log = clean(concat!(
            "1795684359.508000 execve(\"/usr/bin/cat\", [\"cat\", \"/etc/hostname\"], 0x7ffd /* 39 vars */) = 0 <0.000200>\n",
            "1795684359.511300 read(3</etc/hostname>, \"vm\\n\", 131072) = 3 <0.000030>\n",
            "1795684359.511394 close(3</etc/hostname>) = 0 <0.000033>\n",
            "1795684359.511641 exit_group(0)         = ?\n",
            "1795684359.511829 +++ exited with 0 +++\n",
        ));
        assert_eq!(log.programs, BTreeMap::from([(0, "cat".to_owned())]));
        assert!(log.records.iter().all(|r| r.pid == 0 && r.path.as_deref() == Some("/etc/hostname")));
        assert_eq!(log.records.len(), 2);
    }

    #[test]
    fn programs_follow_execve_and_are_inherited_by_children() {
        let log = clean(concat!(
            "100 1700000000.000001 execve(\"/usr/bin/bash\", [\"bash\", \"-c\", \"x\"], 0x7ffd /* 9 vars */) = 0 <0.000100>\n",
            "100 1700000000.000002 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLD, child_tidptr=0x7f) = 101 <0.000050>\n",
            "101 1700000000.000003 execve(\"/nope/cat\", [\"cat\"], 0x5 /* 9 vars */) = -1 ENOENT (No such file or directory) <0.000010>\n",
            "100 1700000000.000004 vfork( <unfinished ...>\n",
            "102 1700000000.000005 execve(\"/usr/bin/sleep\", [\"sleep\", \"1\"], 0x5 /* 9 vars */) = 0 <0.000010>\n",
            "100 1700000000.000006 <... vfork resumed>) = 102 <0.000020>\n",
            "100 1700000000.000007 fork() = 103 <0.000020>\n",
            "101 1700000000.000008 execve(\"/usr/bin/cat\", [\"cat\"], 0x5 /* 9 vars */) = 0 <0.000010>\n",
            "104 1700000000.000009 execveat(3</usr/bin>, \"env\", [\"env\"], 0x5 /* 9 vars */, 0) = 0 <0.000010>\n",
        ));
        let programs = [(100, "bash"), (101, "cat"), (102, "sleep"), (103, "bash"), (104, "env")];
        assert_eq!(log.programs, programs.map(|(pid, p)| (pid, p.to_owned())).into());
        assert_eq!((log.ignored_syscalls["execve"], log.ignored_syscalls["execveat"]), (4, 1));
    }

    #[test]
    fn other_lines_are_counted_and_other_calls_ignored_by_name() {
        let log = clean(concat!(
            "strace: Process 1234 attached\n",
            "[ Process PID=1234 runs in 32 bit mode. ]\n",
            "1234 1700000000.000001 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=1235, si_status=0} ---\n",
            "1234 1700000000.000002 +++ killed by SIGKILL +++\n",
            "1235 1700000000.000003 +++ exited with 0 +++\n",
            "1236 1700000000.000004 +++ superseded by execve in pid 1234 +++\n",
            "1237 1700000000.000005 --- stopped by SIGSTOP ---\n",
            "1238 1700000000.000006 +++ killed by SIGSEGV (core dumped) +++\n",
            "strace: Process 1234 detached\n",
            " <detached ...>\n",
            "1 1700000000.000007 brk(NULL)       = 0x55e000b31000 <0.000033>\n",
            "1 1700000000.000008 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7fdf506d9000 <0.000036>\n",
            "1 1700000000.000009 wait4(-1, [{WIFEXITED(s) && WEXITSTATUS(s) == 0}], 0, NULL) = 25446 <0.004922>\n",
            "1 1700000000.000010 poll([{fd=3<TCP:[127.0.0.1:18733]>, events=POLLIN}], 1, 500) = 1 ([{fd=3, revents=POLLIN}]) <0.35>\n",
            "1 1700000000.000011 select(4, [3], NULL, NULL, {tv_sec=1, tv_usec=0}) = 1 (in [3], left {tv_sec=0, tv_usec=9}) <0.1>\n",
            "1 1700000000.000012 fcntl(3, F_GETFL) = 0x2 (flags O_RDWR) <0.000001>\n",
            "1 1700000000.000013 getsockname(5<TCP:[127.0.0.1:37966->127.0.0.1:18733]>, {sa_family=AF_INET, ",
            "sin_port=htons(37966), sin_addr=inet_addr(\"127.0.0.1\")}, [128 => 16]) = 0 <0.000040>\n",
            "1 1700000000.000014 rt_sigaction(SIGINT, {sa_handler=SIG_IGN, sa_mask=[], sa_flags=SA_RESTORER}, NULL, 8) = 0 <0.000001>\n",
            "1 1700000000.000015 ???() = -1 ENOSYS (Function not implemented) <0.000001>\n",
            "1 1700000000.000016 syscall_0x1b6(0x1, 0x2) = -1 ENOSYS (Function not implemented) <0.000001>\n",
            "1 1700000000.000017 pipe2([3<pipe:[1]>, 4<pipe:[1]>], O_CLOEXEC) = 0 <0.000001>\n",
            "1 1700000000.000018 openat(AT_FDCWD, \"/x\", O_RDONLY) = -1 ENOENT (No such file or directory) (INJECTED) <0.000001>\n",
            "1 1700000000.000019 mmap(NULL, 4096, PROT_READ, MAP_SHARED, 3</x>, 0) = 0x7f0000000000 <0.000001>\n",
        ));
        assert_eq!(log.other_lines, 10);
        let ignored: Vec<_> = log.ignored_syscalls.iter().map(|(name, n)| (name.as_str(), *n)).collect();
        assert_eq!(
            ignored,
            [
                ("???", 1),
                ("brk", 1),
                ("fcntl", 1),
                ("getsockname", 1),
                ("mmap", 2),
                ("pipe2", 1),
                ("poll", 1),
                ("rt_sigaction", 1),
                ("select", 1),
                ("syscall_0x1b6", 1),
                ("wait4", 1),
            ]
        );
        assert_eq!(log.records.len(), 1);
    }

    #[test]
    fn vectored_calls_sum_their_iovecs_and_positioned_calls_have_offsets() {
        let log = clean(concat!(
            "1 1.0 readv(5<TCPv6:[[::1]:36857->[::1]:53588]>, [{iov_base=\"xy\", iov_len=2}, {iov_base=\"z\", iov_len=4}], 2) = 3 <0.1>\n",
            "1 1.0 writev(1</dev/null>, [{iov_base=\"a, iov_len=99}\", iov_len=12}], 1) = 12 <0.1>\n",
            "1 1.0 writev(1</dev/null>, [{iov_base=\"a\", iov_len=1}, {iov_base=\"b\", iov_len=1}, ...], 40) = 40 <0.1>\n",
            "1 1.0 readv(3</x>, 0x7ffc, 2) = -1 EFAULT (Bad address) <0.1>\n",
            "1 1.0 pread64(3</tmp/d>, \"2345\", 4, 102) = 4 <0.1>\n",
            "1 1.0 pwrite64(3</tmp/d>, \"0123456789\", 10, 100) = 10 <0.1>\n",
            "1 1.0 preadv2(3</tmp/d>, [{iov_base=\"\\0\\0a\", iov_len=3}], 1, 5, 0) = 3 <0.1>\n",
            "1 1.0 pwritev2(3</tmp/d>, [{iov_base=\"ab\", iov_len=2}, {iov_base=\"cd\", iov_len=2}], 2, 7, RWF_SYNC) = 4 <0.1>\n",
            "1 1.0 preadv(3</tmp/d>, [{iov_base=\"\", iov_len=8}], 1, 4096) = 0 <0.1>\n",
            "1 1.0 fsync(3</tmp/d>) = 0 <0.1>\n",
            "1 1.0 fdatasync(3</tmp/d>) = -1 EIO (Input/output error) <0.1>\n",
        ));
        let got: Vec<_> = log
            .records
            .iter()
            .map(|r| (r.syscall.as_str(), r.op.unwrap().as_str(), r.bytes, r.bytes_asked, r.offset))
            .collect();
        assert_eq!(
            got,
            [
                ("readv", "read", 3, Some(6), None),
                ("writev", "write", 12, Some(12), None),
                ("writev", "write", 40, None, None),
                ("readv", "read", 0, None, None),
                ("pread64", "pread", 4, Some(4), Some(102)),
                ("pwrite64", "pwrite", 10, Some(10), Some(100)),
                ("preadv2", "pread", 3, Some(3), Some(5)),
                ("pwritev2", "pwrite", 4, Some(4), Some(7)),
                ("preadv", "pread", 0, Some(8), Some(4096)),
                ("fsync", "fsync", 0, None, None),
                ("fdatasync", "fsync", 0, None, None),
            ]
        );
        assert_eq!(log.records[10].error.as_deref(), Some("EIO"));
    }

    #[test]
    fn message_calls_and_datagrams_find_their_sizes_and_peers() {
        let log = clean(concat!(
            "1 1.0 sendmsg(4<TCPv6:[[::1]:53588->[::1]:36857]>, {msg_name=NULL, msg_namelen=0, msg_iov=[{iov_base=\"ab\", ",
            "iov_len=2}, {iov_base=\"cde\", iov_len=3}], msg_iovlen=2, msg_controllen=0, msg_flags=0}, 0) = 5 <0.1>\n",
            "1 1.0 recvmsg(3<UDP:[0.0.0.0:5353]>, {msg_name={sa_family=AF_INET, sin_port=htons(5353), ",
            "sin_addr=inet_addr(\"192.168.1.7\")}, msg_namelen=16, msg_iov=[{iov_base=\"\\0\\0\\204\\0\", iov_len=9000}], ",
            "msg_iovlen=1, msg_control=[{cmsg_len=28, cmsg_level=SOL_IP, cmsg_type=IP_PKTINFO, cmsg_data={ipi_ifindex=",
            "if_nametoindex(\"eth0\"), ipi_spec_dst=inet_addr(\"192.168.1.8\"), ipi_addr=inet_addr(\"224.0.0.251\")}}], ",
            "msg_controllen=32, msg_flags=0}, 0) = 4 <0.1>\n",
            "1 1.0 sendmmsg(3<UDP:[10.0.0.1:40000->10.0.0.2:53]>, [{msg_hdr={msg_name=NULL, msg_namelen=0, msg_iov=[{",
            "iov_base=\"\\1\\2\", iov_len=30}], msg_iovlen=1, msg_controllen=0, msg_flags=0}, msg_len=30}, {msg_hdr={",
            "msg_name=NULL, msg_namelen=0, msg_iov=[{iov_base=\"\\3\\4\", iov_len=31}], msg_iovlen=1, msg_controllen=0, ",
            "msg_flags=0}, msg_len=31}], 2, MSG_NOSIGNAL) = 2 <0.1>\n",
            "1 1.0 sendto(3<UDP:[127.0.0.1:40517]>, \"back\", 4, 0, {sa_family=AF_INET, sin_port=htons(53229), ",
            "sin_addr=inet_addr(\"127.0.0.1\")}, 16) = 4 <0.1>\n",
            "1 1.0 recvfrom(3<UDPv6:[[::1]:56430]>, \"dgram\", 100, 0, {sa_family=AF_INET6, sin6_port=htons(33852), ",
            "sin6_flowinfo=htonl(0), inet_pton(AF_INET6, \"::1\", &sin6_addr), sin6_scope_id=0}, [28]) = 5 <0.1>\n",
            "1 1.0 sendfile(4<TCP:[1.2.3.4:80->5.6.7.8:9000]>, 3</srv/f>, [0] => [50], 50) = 50 <0.1>\n",
            "1 1.0 recv(4<TCP:[1.2.3.4:80->5.6.7.8:9000]>, \"\", 10, 0) = 0 <0.1>\n",
            "1 1.0 send(4<TCP:[1.2.3.4:80->5.6.7.8:9000]>, \"x\", 1, 0) = -1 EPIPE (Broken pipe) <0.1>\n",
        ));
        let got: Vec<_> = log
            .records
            .iter()
            .map(|r| {
                (r.syscall.as_str(), r.op.unwrap(), r.bytes, r.bytes_asked, r.local.clone(), r.remote.clone())
            })
            .collect();
        let (send, recv) = (IoOp::Send, IoOp::Recv);
        assert_eq!(
            got,
            [
                ("sendmsg", send, 5, Some(5), ep("::1", 53588), ep("::1", 36857)),
                ("recvmsg", recv, 4, Some(9000), ep("0.0.0.0", 5353), ep("192.168.1.7", 5353)),
                ("sendmmsg", send, 61, Some(61), ep("10.0.0.1", 40000), ep("10.0.0.2", 53)),
                ("sendto", send, 4, Some(4), ep("127.0.0.1", 40517), ep("127.0.0.1", 53229)),
                ("recvfrom", recv, 5, Some(100), ep("::1", 56430), ep("::1", 33852)),
                ("sendfile", send, 50, Some(50), ep("1.2.3.4", 80), ep("5.6.7.8", 9000)),
                ("recv", recv, 0, Some(10), ep("1.2.3.4", 80), ep("5.6.7.8", 9000)),
                ("send", send, 0, Some(1), ep("1.2.3.4", 80), ep("5.6.7.8", 9000)),
            ]
        );
        assert!(log.records.iter().all(|r| r.is_network() && r.transport.is_some()));
    }

    #[test]
    fn read_tolerates_bad_utf8_and_returns_io_errors() {
        let bytes = b"1 1700000000.000001 write(1</tmp/\xff>, \"\xfe\", 1) = 1 <0.000001>\n";
        let log = read(&bytes[..]).unwrap();
        assert_eq!(log.records[0].path.as_deref(), Some("/tmp/\u{fffd}"));

        struct FailsAfter<'a>(&'a [u8]);
        impl std::io::Read for FailsAfter<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0.is_empty() {
                    return Err(std::io::Error::other("disk on fire"));
                }
                let n = self.0.len().min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let reader = std::io::BufReader::new(FailsAfter(b"1 1700000000.000001 close(3) = 0\n"));
        assert_eq!(read(reader).unwrap_err().to_string(), "disk on fire");
        assert_eq!(read(&b""[..]).unwrap(), StraceLog::default());
        assert_eq!(parse(""), StraceLog::default());
    }

    #[test]
    fn huge_and_hostile_lines_end_quickly_without_panicking() {
        const MB: usize = 1 << 20;
        let call = "1 1700000000.000001 write(1</x>, ";
        let hostile = [
            format!("{call}\"{}\n", "a\\\"(".repeat(MB / 4)),
            format!("{call}{}) = 1\n", "1<".repeat(MB / 2)),
            format!("{call}{}) = 1\n", "1<A:[>".repeat(MB / 6)),
            format!("{call}{}) = 1\n", "1<A:[".repeat(MB / 5)),
            format!("{call}{}) = 1\n", "{".repeat(MB)),
            format!("{call}{}) = 1\n", "3</a>, ".repeat(MB / 7)),
            format!("1 1.0 sendmsg(3, {}) = 1\n", "{msg_iov=[".repeat(MB / 10)),
            format!("1 1.0 writev(3, [{}], 1) = 1\n", "{iov_len=1}, ".repeat(MB / 13)),
            format!("1 1.0 <... {}\n", "a".repeat(MB)),
            format!(" > {}\n", "f".repeat(MB)),
            "\u{0}\u{ff}".repeat(MB / 3) + "\n",
        ];
        for (i, line) in hostile.iter().enumerate() {
            let log = parse(line);
            assert!(log.malformed + log.records.len() as u64 <= 1, "line {i}");
        }
        // Valid decorations by the thousand are fine.
        let log = parse(&hostile[5]);
        assert_eq!((log.malformed, log.records[0].path.as_deref()), (0, Some("/x")));
        assert_eq!(parse(&hostile[7]).records[0].bytes_asked, Some((MB / 13) as u64));
    }

    /// `strace -f -ttt -T -yy -s 64 -o server.log python3 -S -m http.server --bind 127.0.0.1 18733`
    /// in a directory with `f1.txt`…`f3.txt`, while the client below fetched the three files;
    /// then SIGTERM.
    #[test]
    fn real_http_server_log() {
        let log = clean(SERVER);
        let (accepts, recvs, sends) =
            (count(&log, "accept4"), count(&log, "recvfrom"), count(&log, "sendto"));
        assert_eq!((accepts, recvs, sends), (3, 3, 6));
        assert_eq!(log.records.iter().filter(|r| r.is_network()).count(), 3 + 3 + 6 + 3 + 2 + 2);
        // The main thread accepts; a thread per connection reads the request and sends the
        // headers, then the file.
        let main = 29108;
        let threads = [29129, 29130, 29131];
        assert_eq!(log.programs, [main, 29129, 29130, 29131].map(|pid| (pid, "python3".to_owned())).into());
        for (n, (&thread, port)) in threads.iter().zip([43088, 43104, 43116]).enumerate() {
            let on_conn: Vec<_> = log.records.iter().filter(|r| r.remote == ep("127.0.0.1", port)).collect();
            assert!(on_conn.iter().all(|r| r.pid == main), "the threads are the main process's");
            let calls: Vec<_> = on_conn.iter().map(|r| (r.tid as u32, r.syscall.as_str(), r.bytes)).collect();
            let file = [1354, 2704, 4053][n];
            assert_eq!(
                calls,
                [
                    (main, "accept4", 0),
                    (thread, "recvfrom", 85),
                    (thread, "sendto", 188),
                    (thread, "sendto", file),
                    (thread, "close", 0)
                ]
            );
            assert!(on_conn
                .iter()
                .all(|r| r.transport == Some(Tcp) && r.local == ep("127.0.0.1", 18733) && r.fd == Some(4)));
            let opened = format!("/tmp/st/www/f{}.txt", n + 1);
            assert!(log.records.iter().any(|r| r.tid == u64::from(thread)
                && r.op == Some(IoOp::Open)
                && r.path == Some(opened.clone())));
        }
        // The second thread's recvfrom was interrupted by another thread's line.
        assert_eq!(SERVER.matches("<... recvfrom resumed>").count(), 1);
        assert_eq!(
            (log.ignored_syscalls["futex"], log.ignored_syscalls["clone3"], log.ignored_syscalls["poll"]),
            (22, 3, 12)
        );
        // Three threads exit, then SIGTERM and the kill.
        assert_eq!(log.other_lines, 5);
    }

    /// `strace -f -ttt -T -yy -k -e trace=socket,socketpair,connect,sendto,recvfrom,write,close,execve
    /// -o client.log curl -s -o /dev/null -o /dev/null -o /dev/null URL1 URL2 URL3`.
    #[test]
    fn real_http_client_log_matches_the_server() {
        let client = clean(CLIENT);
        let server = clean(SERVER);
        let connects: Vec<_> = client
            .records
            .iter()
            .filter(|r| r.op == Some(IoOp::Connect) && r.transport == Some(Tcp))
            .map(|r| (r.local.clone().unwrap(), r.remote.clone().unwrap(), r.error.as_deref()))
            .collect();
        let accepts: Vec<_> = server
            .records
            .iter()
            .filter(|r| r.op == Some(IoOp::Accept))
            .map(|r| (r.remote.clone().unwrap(), r.local.clone().unwrap(), Some("EINPROGRESS")))
            .collect();
        assert_eq!(connects.len(), 3);
        assert_eq!(connects, accepts);
        assert_eq!(
            (count(&client, "connect"), count(&client, "sendto"), count(&client, "recvfrom")),
            (5, 3, 3)
        );
        // The received responses are the server's headers and files; the files go to /dev/null.
        let received: Vec<_> =
            client.records.iter().filter(|r| r.syscall == "recvfrom").map(|r| r.bytes).collect();
        assert_eq!(received, [188 + 1354, 188 + 2704, 188 + 4053]);
        let written: Vec<_> = client
            .records
            .iter()
            .filter(|r| r.path.as_deref() == Some("/dev/null"))
            .map(|r| (r.syscall.as_str(), r.bytes))
            .collect();
        assert_eq!(
            written,
            [("write", 1354), ("close", 0), ("write", 2704), ("close", 0), ("write", 4053), ("close", 0)]
        );
        // Every call has its stack, innermost frame first.
        assert!(client.records.iter().all(|r| r.stack.len() >= 9));
        let send = client.records.iter().find(|r| r.syscall == "sendto").unwrap();
        assert_eq!(send.stack[0], "/usr/lib/x86_64-linux-gnu/libc.so.6(send+0x19) [0x10ab59]");
        assert_eq!(send.stack.last().map(String::as_str), Some("/usr/bin/curl() [0xbab1]"));
        assert_eq!(client.programs, BTreeMap::from([(29128, "curl".to_owned())]));
        assert_eq!(
            client.ignored_syscalls,
            BTreeMap::from([("execve".into(), 1), ("socket".into(), 5), ("socketpair".into(), 3)])
        );
    }

    /// `strace -f -ttt -T -yy -s 64 python3 -S sockets.py`: TCP over IPv6, UDP over both, a Unix
    /// socket, messages, vectors, positioned I/O, syncs and `sendfile`.
    #[test]
    fn real_python_sockets_log() {
        let log = clean(SOCKETS);
        let by_syscall = |name: &str| log.records.iter().find(|r| r.syscall == name).unwrap();
        let accept = by_syscall("accept4");
        let connect = by_syscall("connect");
        assert_eq!((&connect.local, &connect.remote), (&accept.remote, &accept.local));
        assert_eq!(accept.local, ep("::1", 36857));
        let (readv, sendmsg, recvmsg) = (by_syscall("readv"), by_syscall("sendmsg"), by_syscall("recvmsg"));
        assert_eq!((readv.bytes, readv.bytes_asked, readv.op), (3, Some(6), Some(IoOp::Read)));
        assert!(readv.is_network());
        assert_eq!((sendmsg.bytes, sendmsg.bytes_asked), (5, Some(5)));
        assert_eq!((recvmsg.bytes, recvmsg.bytes_asked), (5, Some(100)));
        let (pwritev2, preadv2) = (by_syscall("pwritev2"), by_syscall("preadv2"));
        assert_eq!((pwritev2.offset, pwritev2.bytes), (Some(7), 4));
        assert_eq!((preadv2.offset, preadv2.bytes_asked), (Some(5), Some(3)));
        let udp: Vec<_> =
            log.records.iter().filter(|r| r.transport == Some(Udp) && r.syscall != "close").collect();
        assert_eq!(udp.len(), 10);
        assert!(udp.iter().all(|r| r.local.is_some() && r.remote.is_some()));
        let unix: Vec<_> =
            log.records.iter().filter(|r| r.transport == Some(Unix)).map(|r| r.syscall.as_str()).collect();
        assert_eq!(unix, ["connect", "accept4", "sendto", "recvfrom", "close", "close", "close"]);
        let failed = log.records.iter().find(|r| r.error.is_some()).unwrap();
        assert_eq!(
            (failed.path.as_deref(), failed.error.as_deref()),
            (Some("/nonexistent/x"), Some("ENOENT"))
        );
    }

    #[test]
    fn read_and_parse_agree_on_the_real_logs() {
        for text in [SERVER, CLIENT, SOCKETS] {
            assert_eq!(read(text.as_bytes()).unwrap(), parse(text));
        }
    }

    /// The lines of the real logs.
    fn real_lines() -> Vec<&'static str> {
        [SERVER, CLIENT, SOCKETS].iter().flat_map(|t| t.lines()).collect()
    }

    proptest! {
        #[test]
        fn parse_never_panics_on_arbitrary_text(text in any::<String>()) {
            let log = parse(&text);
            prop_assert!(log.problems.len() as u64 <= log.malformed);
        }

        #[test]
        fn parse_never_panics_on_strace_like_text(text in "[0-9 .a-z_(){}\\[\\]<>\"\\\\,=?:/>+-]{0,300}(\n[0-9 .a-z(){}\\[\\]<>\",=?]{0,80}){0,4}") {
            let _ = parse(&text);
        }

        #[test]
        fn read_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
            let log = read(&bytes[..]).unwrap();
            prop_assert_eq!(log, parse(&String::from_utf8_lossy(&bytes)));
        }

        #[test]
        fn real_lines_cut_and_edited_never_panic(
            first in any::<prop::sample::Index>(),
            count in 1usize..8,
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let lines = real_lines();
            let first = first.index(lines.len());
            let mut bytes = lines[first..lines.len().min(first + count)].join("\n").into_bytes();
            bytes.push(b'\n');
            if !bytes.is_empty() {
                for (at, byte) in &edits {
                    let at = at.index(bytes.len());
                    bytes[at] = *byte;
                }
            }
            bytes.truncate(cut.index(bytes.len() + 1));
            // An edit that writes a newline makes a line two.
            let lines = bytes.iter().filter(|b| **b == b'\n').count() + 1;
            let log = read(&bytes[..]).unwrap();
            prop_assert!(log.problems.len() as u64 <= log.malformed);
            prop_assert!(log.problems.iter().all(|p| (1..=lines).contains(&p.line)));
            prop_assert!(log.records.len() <= lines);
        }
    }

    /// A synthetic log like a busy server's: `-f` threads, socket reads and writes, file I/O,
    /// unfinished calls, futexes. `cargo test --release … -- --ignored --nocapture` prints the
    /// parsing speed.
    #[test]
    #[ignore]
    fn parsing_speed() {
        let mut text = String::new();
        let mut n = 0;
        while n < 1_000_000 {
            let (pid, ts) = (1000 + n % 7, 1_700_000_000_000_000u64 + n as u64);
            let (s, us) = (ts / 1_000_000, ts % 1_000_000);
            text.push_str(&format!(
                "{pid} {s}.{us:06} recvfrom(4<TCP:[10.0.0.1:8080->10.0.0.2:{p}]>, \"GET /{n} HTTP/1.1\\r\\nHost: x\\r\\n\"..., 8192, 0, NULL, NULL) = 85 <0.000031>\n\
                 {pid} {s}.{us:06} openat(AT_FDCWD</srv>, \"/srv/www/f{n}.txt\", O_RDONLY|O_CLOEXEC) = 5</srv/www/f{n}.txt> <0.000011>\n\
                 {pid} {s}.{us:06} read(5</srv/www/f{n}.txt>, \"data data data data data data data\"..., 4096) = 4096 <0.000007>\n\
                 {pid} {s}.{us:06} futex(0x55e000d31d10, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, 0, NULL, FUTEX_BITSET_MATCH_ANY <unfinished ...>\n\
                 {pid} {s}.{us:06} <... futex resumed>) = 0 <0.000251>\n\
                 {pid} {s}.{us:06} sendto(4<TCP:[10.0.0.1:8080->10.0.0.2:{p}]>, \"HTTP/1.0 200 OK\\r\\nServer: x\\r\\n\"..., 4284, 0, NULL, 0) = 4284 <0.000021>\n\
                 {pid} {s}.{us:06} close(5</srv/www/f{n}.txt>) = 0 <0.000005>\n",
                p = 40000 + n % 20000,
            ));
            n += 7;
        }
        let started = std::time::Instant::now();
        let log = parse(&text);
        let seconds = started.elapsed().as_secs_f64();
        assert_eq!((log.malformed, log.records.len()), (0, n / 7 * 5));
        println!(
            "{n} lines, {:.0} MB: {seconds:.2} s, {:.0} lines/s, {:.0} MB/s",
            text.len() as f64 / 1e6,
            n as f64 / seconds,
            text.len() as f64 / 1e6 / seconds
        );
    }
}
