//! The I/O envelope derived passively from recorded file I/O: what `ringtrace envelope` measures
//! with a benchmark, read off the calls a real run made (`ringtrace io envelope`).
//!
//! The recorded file calls are cut into *file sessions*, one per open descriptor of a process:
//! from its `open` to its `close`, with the reads, writes and syncs between. A session that wrote
//! is a file written (its `open` a create when it was one: `io.syscall` `create`/`creat`); one
//! that only read is a file read, *shared* when several processes read that path, *local*
//! otherwise. Sessions are grouped by kind and by size — the bytes they moved, to the nearest power
//! of two; a point's `bytes` is the median size of its group — and each group gives a point at
//! `procs` = how many processes were at that work at once (on average over the time any was:
//! processes that took turns count as one). Its rates are those of `procs` processes kept busy
//! with that work under the contention they met, as the benchmark's back-to-back phases measure
//! them: `procs` × sessions (or bytes) / the time spent in the sessions' calls — for a write, its
//! writes, syncs and close (the create is the create rate's); for a read, its open, reads and
//! close. Remote reads are not told
//! apart from local ones (a recording does not say which file system is remote): they are absent.
//! Calls on devices and kernel interfaces (`/dev/` but for the files of `/dev/shm/`, `/proc/`,
//! `/sys/`) and on sockets are left out. A create is known only from `ringtrace::io`'s
//! `File::create` (an strace log keeps no open flags, so its creates count as opens), and a file
//! created and closed without a byte written makes no point (its size, zero, has no place on the
//! envelope's axes).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ringtrace_core::io::IoOp;

use super::calls::{io_calls, IoCall};
use crate::envelope::{Envelope, EnvelopePoint, Param};
use crate::model::Dataset;

/// What a file session did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Write,
    Read,
}

/// One descriptor of one process, from open to close.
#[derive(Default)]
struct Session {
    process: usize,
    path: Option<String>,
    /// The open was a create, and how long it took.
    create_ns: Option<u64>,
    open_ns: u64,
    /// Time in the calls after the open: reads, writes, syncs and the close.
    rest_ns: u64,
    read: u64,
    written: u64,
    /// From the first call's start to the last one's end, Unix nanoseconds.
    span: (u64, u64),
}

impl Session {
    fn kind(&self) -> Option<Kind> {
        if self.written > 0 {
            Some(Kind::Write)
        } else if self.read > 0 {
            Some(Kind::Read)
        } else {
            None
        }
    }
}

/// The sessions of `calls` (file calls only), in the order they were opened.
fn sessions(calls: &[IoCall]) -> Vec<Session> {
    let mut by_process: BTreeMap<usize, Vec<&IoCall>> = BTreeMap::new();
    for c in calls {
        if c.record.ok()
            && c.record.transport.is_none()
            && !c.record.path.as_deref().is_some_and(not_a_file_system)
        {
            by_process.entry(c.process).or_default().push(c);
        }
    }
    let mut done = Vec::new();
    for (process, mut calls) in by_process {
        calls.sort_by_key(|c| (c.record.start_unix_ns, c.record.end_unix_ns));
        let mut open: HashMap<i64, Session> = HashMap::new();
        for c in calls {
            let (Some(op), Some(fd)) = (c.record.op, c.record.fd) else { continue };
            let ns = c.duration_ns();
            match op {
                IoOp::Open => {
                    let create = matches!(c.record.syscall.as_str(), "create" | "creat");
                    let session = Session {
                        process,
                        path: c.record.path.clone(),
                        create_ns: create.then_some(ns),
                        open_ns: ns,
                        span: (c.record.start_unix_ns, c.record.end_unix_ns),
                        ..Session::default()
                    };
                    // A descriptor opened again without a recorded close: the first session ends.
                    done.extend(open.insert(fd, session));
                }
                IoOp::Read | IoOp::Pread | IoOp::Write | IoOp::Pwrite | IoOp::Fsync | IoOp::Close => {
                    let Some(s) = open.get_mut(&fd) else { continue };
                    s.rest_ns += ns;
                    s.span.1 = s.span.1.max(c.record.end_unix_ns);
                    match op {
                        IoOp::Read | IoOp::Pread => s.read += c.record.bytes,
                        IoOp::Write | IoOp::Pwrite => s.written += c.record.bytes,
                        _ => {}
                    }
                    if op == IoOp::Close {
                        done.extend(open.remove(&fd));
                    }
                }
                _ => {}
            }
        }
        done.extend(open.into_values());
    }
    done
}

/// Whether `path` is a device or a kernel interface (`/dev/null`, `/proc/…`, `/sys/…`), whose
/// calls say nothing of a file system. `/dev/shm/` holds files (a tmpfs mounted there, where
/// POSIX shared memory and many programs' scratch files live): it is a file system.
fn not_a_file_system(path: &str) -> bool {
    if path.starts_with("/dev/shm/") {
        return false;
    }
    ["/dev/", "/proc/", "/sys/"].iter().any(|p| path.starts_with(p))
}

/// How many processes were at this work at once, on average over the time any was: the
/// sessions' summed lengths over the length of their union, rounded, at least 1 and at most the
/// processes that took part. Processes that took turns count as one.
fn concurrency(group: &[&Session]) -> u32 {
    let mut spans: Vec<(u64, u64)> = group.iter().map(|s| s.span).collect();
    spans.sort_unstable();
    let (mut union, mut current): (u64, Option<(u64, u64)>) = (0, None);
    for (start, end) in spans.iter().copied() {
        current = match current {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                union += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    union += current.map_or(0, |(s, e)| e - s);
    let summed: u64 = spans.iter().map(|(s, e)| e - s).sum();
    let processes = group.iter().map(|s| s.process).collect::<BTreeSet<_>>().len() as u32;
    let mean = if union == 0 { 1.0 } else { summed as f64 / union as f64 };
    (mean.round() as u32).clamp(1, processes.max(1))
}

/// The size group of `bytes`: its power of two, rounded in the logarithm.
fn size_group(bytes: u64) -> i32 {
    (bytes.max(1) as f64).log2().round() as i32
}

/// The envelope of the file I/O in `data` (of the nodes in `nodes`, or all when empty); an
/// envelope without points when nothing was read or written.
pub fn passive_envelope(data: &Dataset, nodes: &[String]) -> Envelope {
    let calls: Vec<IoCall> =
        io_calls(data).into_iter().filter(|c| nodes.is_empty() || nodes.contains(&c.node)).collect();
    let sessions = sessions(&calls);
    // Paths read by more than one process: their reads are N-to-1.
    let mut readers: HashMap<&str, BTreeSet<usize>> = HashMap::new();
    for s in &sessions {
        if let (Some(Kind::Read), Some(path)) = (s.kind(), s.path.as_deref()) {
            readers.entry(path).or_default().insert(s.process);
        }
    }
    let shared = |s: &Session| s.path.as_deref().is_some_and(|p| readers.get(p).is_some_and(|r| r.len() > 1));
    // (kind, shared, size group) → sessions.
    let mut groups: BTreeMap<(Kind, bool, i32), Vec<&Session>> = BTreeMap::new();
    for s in &sessions {
        let Some(kind) = s.kind() else { continue };
        let size = if kind == Kind::Write { s.written } else { s.read };
        groups.entry((kind, kind == Kind::Read && shared(s), size_group(size))).or_default().push(s);
    }
    let mut points: BTreeMap<(u32, u64), EnvelopePoint> = BTreeMap::new();
    for ((kind, shared, _), group) in groups {
        let procs = concurrency(&group);
        let mut sizes: Vec<u64> =
            group.iter().map(|s| if kind == Kind::Write { s.written } else { s.read }).collect();
        sizes.sort_unstable();
        let bytes = sizes[sizes.len() / 2];
        let total: u64 = sizes.iter().sum();
        let n = group.len() as f64;
        // Aggregate rates of `procs` processes each kept busy: per busy second, times `procs`.
        let rate = |count: f64, busy_ns: u64| {
            (busy_ns > 0).then(|| f64::from(procs) * count / (busy_ns as f64 / 1e9))
        };
        let point = points.entry((procs, bytes)).or_insert_with(|| EnvelopePoint::new(procs, bytes));
        let mut set = |param, value: Option<f64>| {
            if let Some(v) = value {
                point.set(param, v);
            }
        };
        match kind {
            Kind::Write => {
                let busy: u64 = group.iter().map(|s| s.rest_ns).sum();
                set(Param::WriteOps, rate(n, busy));
                set(Param::WriteBytes, rate(total as f64, busy));
                let creates: Vec<u64> = group.iter().filter_map(|s| s.create_ns).collect();
                set(Param::CreateOps, rate(creates.len() as f64, creates.iter().sum()));
            }
            Kind::Read => {
                let busy: u64 = group.iter().map(|s| s.open_ns + s.rest_ns).sum();
                let (ops, bw) = if shared {
                    (Param::ReadSharedOps, Param::ReadSharedBytes)
                } else {
                    (Param::ReadLocalOps, Param::ReadLocalBytes)
                };
                set(ops, rate(n, busy));
                set(bw, rate(total as f64, busy));
            }
        }
    }
    Envelope { points: points.into_values().collect() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::calls::record_to_span;
    use crate::io::IoRecord;
    use crate::model::Process;

    /// A call of process `pid` (process index `pid - 1`, on node `n<pid>`).
    fn call(
        pid: u32,
        op: IoOp,
        syscall: &str,
        fd: i64,
        path: &str,
        (start, ns): (u64, u64),
        bytes: u64,
    ) -> IoRecord {
        IoRecord {
            pid,
            tid: u64::from(pid),
            op: Some(op),
            syscall: syscall.into(),
            fd: Some(fd),
            start_unix_ns: start,
            end_unix_ns: start + ns,
            bytes,
            path: Some(path.into()),
            ..IoRecord::default()
        }
    }

    fn dataset(records: &[IoRecord]) -> Dataset {
        let mut data = Dataset::default();
        for pid in 1..=3u32 {
            data.processes.push(Process {
                node: format!("n{pid}"),
                daemon: "worker".into(),
                ..Process::default()
            });
        }
        for (i, r) in records.iter().enumerate() {
            let p = r.pid as usize - 1;
            data.spans.push(record_to_span(r, &format!("n{}", r.pid), "worker", p, i));
        }
        data
    }

    /// Two processes each create and write two 4 KiB files: creates of 10 µs, then writes of
    /// 30 µs, syncs of 50 µs and closes of 20 µs (100 µs of writing a file). Both then read the other's
    /// files (open 5 µs, read 10 µs, close 5 µs), and process 3 and 1 read one 1 MiB file.
    #[test]
    fn rates_by_hand() {
        let mut r = Vec::new();
        let mut t = 1_000_000;
        // Processes 1 and 2 at work at once, file after file.
        for k in 0..2 {
            for pid in [1, 2] {
                let path = format!("/d/w{pid}-{k}");
                r.push(call(pid, IoOp::Open, "create", 3, &path, (t, 10_000), 0));
                r.push(call(pid, IoOp::Write, "write_all", 3, &path, (t + 10_000, 30_000), 4096));
                r.push(call(pid, IoOp::Fsync, "sync_all", 3, &path, (t + 40_000, 50_000), 0));
                r.push(call(pid, IoOp::Close, "drop", 3, &path, (t + 90_000, 20_000), 0));
            }
            t += 200_000;
        }
        for k in 0..2 {
            for pid in [1, 2] {
                let other = 3 - pid;
                let path = format!("/d/w{other}-{k}");
                r.push(call(pid, IoOp::Open, "open", 4, &path, (t, 5_000), 0));
                r.push(call(pid, IoOp::Read, "read", 4, &path, (t + 5_000, 10_000), 4096));
                r.push(call(pid, IoOp::Read, "read", 4, &path, (t + 15_000, 0), 0));
                r.push(call(pid, IoOp::Close, "drop", 4, &path, (t + 15_000, 5_000), 0));
            }
            t += 100_000;
        }
        // Not a file system's: left out.
        r.push(call(3, IoOp::Open, "open", 6, "/dev/null", (t, 1_000), 0));
        r.push(call(3, IoOp::Write, "write_all", 6, "/dev/null", (t + 1_000, 1_000), 1));
        r.push(call(3, IoOp::Close, "drop", 6, "/dev/null", (t + 2_000, 1_000), 0));
        t += 10_000;
        for pid in [3, 1] {
            r.push(call(pid, IoOp::Open, "open", 5, "/d/shared", (t, 100_000), 0));
            r.push(call(pid, IoOp::Read, "read", 5, "/d/shared", (t + 100_000, 800_000), 1 << 20));
            r.push(call(pid, IoOp::Close, "drop", 5, "/d/shared", (t + 900_000, 100_000), 0));
            t += 2_000_000;
        }
        let env = passive_envelope(&dataset(&r), &[]);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b;
        let at = |procs, bytes, p| {
            env.points
                .iter()
                .find(|x| x.procs == Some(procs) && x.bytes == Some(bytes))
                .and_then(|x| x.get(p))
        };
        // Writes: 4 files, 100 µs each after the create → 2 × 4 / 400 µs.
        assert!(close(at(2, 4096, Param::WriteOps).unwrap(), 2.0 * 4.0 / 400e-6));
        assert!(close(at(2, 4096, Param::WriteBytes).unwrap(), 2.0 * 4.0 * 4096.0 / 400e-6));
        // Creates: 4 of 10 µs → 2 × 4 / 40 µs.
        assert!(close(at(2, 4096, Param::CreateOps).unwrap(), 2.0 * 4.0 / 40e-6));
        // Own-file reads: 4 of 20 µs in all (open, two reads, close).
        assert!(close(at(2, 4096, Param::ReadLocalOps).unwrap(), 2.0 * 4.0 / 80e-6));
        // The shared file: read by 2 processes one after the other (so at 1 process), 1 ms each.
        assert!(close(at(1, 1 << 20, Param::ReadSharedBytes).unwrap(), 2.0 * f64::from(1 << 20) / 2e-3));
        assert_eq!(at(1, 1 << 20, Param::ReadLocalOps), None, "the shared file is not a local read");
        assert_eq!(env.points.len(), 2);
        // One node's calls only.
        let one = passive_envelope(&dataset(&r), &["n3".into()]);
        assert_eq!(one.points.len(), 1);
        assert_eq!((one.points[0].procs, one.points[0].bytes), (Some(1), Some(1 << 20)));
        assert!(one.points[0].get(Param::ReadLocalOps).is_some(), "alone, n3 reads it 1-to-1");
    }

    /// Files under `/dev/shm` (a tmpfs) are a file system's; `/dev/null` and `/dev/zero` are not.
    #[test]
    fn files_in_dev_shm_count_and_devices_do_not() {
        assert!(!not_a_file_system("/dev/shm/stage/task-0"));
        assert!(not_a_file_system("/dev/null"));
        assert!(not_a_file_system("/dev/zero"));
        assert!(not_a_file_system("/dev/shmem"));
        assert!(not_a_file_system("/proc/self/status"));
        assert!(!not_a_file_system("/tmp/stage/task-0"));
        let mut r = Vec::new();
        let path = "/dev/shm/w-0";
        r.push(call(1, IoOp::Open, "create", 4, path, (1_000, 10_000), 0));
        r.push(call(1, IoOp::Write, "write_all", 4, path, (11_000, 90_000), 4096));
        r.push(call(1, IoOp::Close, "drop", 4, path, (101_000, 10_000), 0));
        let env = passive_envelope(&dataset(&r), &[]);
        assert_eq!(env.points.len(), 1, "{:?}", env.points);
        assert!(env.points[0].get(Param::WriteOps).is_some());
    }

    #[test]
    fn no_file_io_gives_no_points() {
        assert!(passive_envelope(&Dataset::default(), &[]).points.is_empty());
    }
}
