//! `ringtrace demo`: starts the cluster as child processes, runs the client, shuts everything
//! down, and says where the recordings are.
//!
//! Every child is held by a [`Cluster`], whose `Drop` closes the children's stdin, waits briefly,
//! then kills and reaps whatever is left: an error or a panic in the orchestrator never leaves a
//! process behind. If the orchestrator itself dies, the stdin pipes close and the children stop
//! on their own (daemons shut down, the client abandons its remaining requests).

use std::fs::{self, File};
use std::io::{BufRead as _, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use ringtrace_core::identity::{DAEMON_ENV, NODE_ENV};

use crate::node::{Baseline, NodeArgs, Role, WorkerAddr, DEFAULT_REQUESTS};
use crate::{CLIENT_NODE, MASTER_NODE, NODE_SUBCOMMAND};

/// Environment variable naming the recording directory.
const RECORDING_DIR_ENV: &str = "RINGTRACE_DIR";
/// Environment variable naming the OTLP collector.
const OTLP_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// File that marks a directory as the demo's own, so a rerun may clear it.
const MARKER_FILE: &str = ".ringtrace-demo";

/// How long a daemon may take to print `READY <port>`.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long daemons may take to exit once their stdin is closed.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long daemons get to exit when the orchestrator is cleaning up after an error.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the orchestrator polls its children.
const POLL: Duration = Duration::from_millis(20);
/// Lines of a failed process's stderr quoted in the error.
const STDERR_TAIL_LINES: usize = 15;

/// What `ringtrace demo` runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoOptions {
    /// Worker daemons (`node-1` … `node-N`); at least 1, and 3 or more to see replication spread.
    pub workers: usize,
    /// Client requests in total.
    pub requests: usize,
    /// A worker (e.g. `node-2`) whose disk operations are slowed down.
    pub slow_node: Option<String>,
    /// The delay the slow worker adds to each disk operation, milliseconds.
    pub slow_io_ms: u64,
    /// Output directory: `recordings/`, `logs/`, `data/` are made (and cleared) inside it.
    pub out: PathBuf,
    /// An OTLP endpoint every process exports to (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub otlp: Option<String>,
    /// Record with ringtrace (the default); `false` runs the same cluster under a baseline
    /// (`RINGTRACE_DEMO_TRACING`: no subscriber at all, or the floor layer), to measure what
    /// recording costs.
    pub tracing: bool,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            workers: 3,
            requests: DEFAULT_REQUESTS,
            slow_node: None,
            slow_io_ms: crate::node::DEFAULT_SLOW_IO_MS,
            out: PathBuf::from("ringtrace-demo"),
            otlp: None,
            tracing: true,
        }
    }
}

/// A finished demo run.
#[derive(Debug, Clone)]
pub struct DemoRun {
    /// The directory holding every process's recording.
    pub recordings: PathBuf,
    /// The directory holding every process's stderr log.
    pub logs: PathBuf,
    /// The processes, in start order: workers, master, client.
    pub processes: Vec<ProcessSummary>,
    /// Client requests answered correctly.
    pub requests_ok: usize,
    /// Client requests that failed.
    pub requests_failed: usize,
    /// Wall time from the first spawn to the last exit.
    pub elapsed: Duration,
    /// How long the client spent issuing its requests (from its `DONE` line).
    pub request_phase: Option<Duration>,
}

impl DemoRun {
    /// Requests completed per second during the client's request phase.
    pub fn requests_per_second(&self) -> Option<f64> {
        let secs = self.request_phase?.as_secs_f64();
        (secs > 0.0).then(|| self.requests_ok as f64 / secs)
    }
}

/// One process of the run.
#[derive(Debug, Clone)]
pub struct ProcessSummary {
    /// Its role.
    pub role: Role,
    /// Its node name.
    pub node: String,
    /// Its process id.
    pub pid: u32,
    /// How it exited; `None` if it could not be reaped.
    pub status: Option<ExitStatus>,
    /// Where its stderr went.
    pub stderr_log: PathBuf,
}

impl std::fmt::Display for DemoRun {
    /// A few lines: the request counts, the time, and where the recordings and logs are.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "demo: {} processes, {} requests ok, {} failed, in {:.2} s",
            self.processes.len(),
            self.requests_ok,
            self.requests_failed,
            self.elapsed.as_secs_f64()
        )?;
        if let (Some(phase), Some(rate)) = (self.request_phase, self.requests_per_second()) {
            writeln!(f, "request phase: {:.3} s, {rate:.0} requests/s", phase.as_secs_f64())?;
        }
        writeln!(f, "recordings: {}", self.recordings.display())?;
        write!(f, "logs:       {}", self.logs.display())
    }
}

impl std::fmt::Display for ProcessSummary {
    /// `worker node-2 (pid 4711): exit status: 0`, plus the stderr log of a failed process.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} (pid {})", self.role, self.node, self.pid)?;
        match self.status {
            Some(s) if s.success() => write!(f, ": {s}"),
            Some(s) => write!(f, ": {s} (see {})", self.stderr_log.display()),
            None => write!(f, ": still running"),
        }
    }
}

/// Runs the demo cluster: workers, then the master, then the client; waits for the client; shuts
/// the daemons down. Returns where the recordings are, or an error naming the process that failed
/// and why (its exit status and the end of its stderr).
pub fn run_demo(opts: &DemoOptions) -> anyhow::Result<DemoRun> {
    if opts.workers == 0 {
        bail!("the demo needs at least one worker");
    }
    let worker_nodes: Vec<String> = (1..=opts.workers).map(|k| format!("node-{k}")).collect();
    if let Some(slow) = &opts.slow_node {
        if !worker_nodes.contains(slow) {
            bail!("--slow-node {slow:?} is not a worker: expected one of node-1 … node-{}", opts.workers);
        }
    }
    let baseline = Baseline::from_env()?.unwrap_or(Baseline::Off);
    let dirs = OutDirs::prepare(&opts.out)?;
    let exe = std::env::current_exe().context("locating the ringtrace executable")?;
    let started = Instant::now();
    let mut cluster = Cluster {
        exe,
        recordings: dirs.recordings.clone(),
        logs: dirs.logs.clone(),
        otlp: opts.otlp.clone(),
        baseline: (!opts.tracing).then_some(baseline),
        procs: Vec::new(),
    };

    // Workers first, all at once; then wait for each to announce its port.
    for node in &worker_nodes {
        let mut args = NodeArgs::new(Role::Worker, node.clone(), &dirs.out);
        args.slow = opts.slow_node.as_deref() == Some(node.as_str());
        args.slow_io_ms = opts.slow_io_ms;
        cluster.spawn(&args)?;
    }
    let mut workers = Vec::with_capacity(opts.workers);
    for (idx, node) in worker_nodes.iter().enumerate() {
        let port = cluster.wait_ready(idx)?;
        workers.push(WorkerAddr { node: node.clone(), addr: loopback(port) });
    }

    let mut master = NodeArgs::new(Role::Master, MASTER_NODE, &dirs.out);
    master.workers = workers;
    let master_idx = cluster.spawn(&master)?;
    let master_port = cluster.wait_ready(master_idx)?;

    let mut client = NodeArgs::new(Role::Client, CLIENT_NODE, &dirs.out);
    client.master = Some(loopback(master_port));
    client.requests = opts.requests;
    let client_idx = cluster.spawn(&client)?;
    let client_timeout = Duration::from_secs(60) + Duration::from_millis(500) * opts.requests as u32;
    let client_status = cluster.wait_client(client_idx, client_timeout)?;
    let done = cluster.done_line(client_idx);
    if !client_status.success() {
        let why = match done {
            Some(((ok, failed), _)) => format!("exited with {client_status} (ok={ok} failed={failed})"),
            None => format!("exited with {client_status}"),
        };
        return Err(cluster.failure(client_idx, &why));
    }
    let ((requests_ok, requests_failed), request_phase) =
        done.ok_or_else(|| cluster.failure(client_idx, "exited without printing `DONE ok=N failed=M`"))?;

    cluster.shutdown()?;
    Ok(DemoRun {
        recordings: dirs.recordings,
        logs: dirs.logs,
        processes: cluster.summaries(),
        requests_ok,
        requests_failed,
        elapsed: started.elapsed(),
        request_phase,
    })
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// The demo's output directories, absolute so children see the same paths.
struct OutDirs {
    out: PathBuf,
    recordings: PathBuf,
    logs: PathBuf,
}

impl OutDirs {
    /// Creates `out` with fresh `recordings/`, `logs/` and `data/` inside. An existing `out` is
    /// reused only if it is empty or was made by an earlier demo run (it holds the marker file):
    /// the demo never clears a directory it did not make.
    fn prepare(out: &Path) -> anyhow::Result<Self> {
        let out = std::path::absolute(out)
            .with_context(|| format!("resolving the output directory {}", out.display()))?;
        let marker = out.join(MARKER_FILE);
        if out.exists() {
            if !out.is_dir() {
                bail!("the output path {} exists and is not a directory", out.display());
            }
            let mut entries = fs::read_dir(&out).with_context(|| format!("listing {}", out.display()))?;
            if entries.next().is_some() && !marker.exists() {
                bail!(
                    "{} is not empty and was not made by `ringtrace demo`; choose another output \
                     directory",
                    out.display()
                );
            }
        }
        fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        fs::write(&marker, "made by `ringtrace demo`; the demo clears this directory's recordings/, logs/ and data/ on each run\n")
            .with_context(|| format!("writing {}", marker.display()))?;
        for sub in ["recordings", "logs", "data"] {
            let dir = out.join(sub);
            if dir.exists() {
                fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
            }
            fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        Ok(Self { recordings: out.join("recordings"), logs: out.join("logs"), out })
    }
}

/// A child process of the demo.
struct Proc {
    role: Role,
    node: String,
    child: Child,
    /// The process's stdin; dropping it is the signal to stop.
    stdin: Option<ChildStdin>,
    /// Lines the process printed on stdout.
    stdout_lines: Receiver<String>,
    stderr_log: PathBuf,
    status: Option<ExitStatus>,
}

impl Proc {
    /// Reaps the process if it has exited.
    fn poll(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status =
                self.child.try_wait().with_context(|| format!("waiting for {} {}", self.role, self.node))?;
        }
        Ok(self.status)
    }

    /// Polls until the process exits or `within` passes.
    fn reap(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            match self.poll() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(POLL),
                _ => return None,
            }
        }
    }

    /// Kills the process (if still running) and reaps it.
    fn kill(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }
}

/// The running children. Dropping it stops and reaps every one that is still running.
struct Cluster {
    exe: PathBuf,
    recordings: PathBuf,
    logs: PathBuf,
    otlp: Option<String>,
    /// What the processes run instead of ringtrace; `None`: ringtrace.
    baseline: Option<Baseline>,
    procs: Vec<Proc>,
}

impl Cluster {
    /// Starts `ringtrace __demo-node <args>` with the node's identity in its environment, stdout
    /// piped (for `READY`/`DONE`), stderr to `<out>/logs/<node>-<role>.stderr.log`, and stdin a
    /// pipe the cluster holds: closing it tells the process to stop.
    fn spawn(&mut self, args: &NodeArgs) -> anyhow::Result<usize> {
        let stderr_log = self.logs.join(format!("{}-{}.stderr.log", args.node, args.role));
        let stderr =
            File::create(&stderr_log).with_context(|| format!("creating {}", stderr_log.display()))?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg(NODE_SUBCOMMAND)
            .args(args.to_args())
            .env(NODE_ENV, &args.node)
            .env(DAEMON_ENV, args.role.as_str())
            .env(RECORDING_DIR_ENV, &self.recordings)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        if let Some(endpoint) = &self.otlp {
            cmd.env(OTLP_ENDPOINT_ENV, endpoint);
        }
        match self.baseline {
            Some(baseline) => cmd.env(crate::node::TRACING_ENV, baseline.as_str()),
            None => cmd.env_remove(crate::node::TRACING_ENV),
        };
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt as _;
            // A process group of its own: Ctrl-C in the terminal stops only the orchestrator,
            // whose exit closes the children's stdin, so they stop cleanly and keep their
            // recordings instead of dying mid-flush.
            cmd.process_group(0);
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {} {} ({})", args.role, args.node, self.exe.display()))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let (tx, stdout_lines) = mpsc::channel();
        self.procs.push(Proc {
            role: args.role,
            node: args.node.clone(),
            child,
            stdin,
            stdout_lines,
            stderr_log,
            status: None,
        });
        let idx = self.procs.len() - 1;
        let stdout = stdout.ok_or_else(|| anyhow!("{} {} has no stdout pipe", args.role, args.node))?;
        thread::Builder::new()
            .name(format!("stdout-{}", args.node))
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .context("spawning a stdout reader thread")?;
        Ok(idx)
    }

    /// Waits for process `idx` to print `READY <port>`.
    fn wait_ready(&mut self, idx: usize) -> anyhow::Result<u16> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.procs[idx].stdout_lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(port) = line.strip_prefix("READY ") {
                        return port.trim().parse().map_err(|_| {
                            self.failure(idx, &format!("announced {line:?}, not `READY <port>`"))
                        });
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    let why = format!("did not print `READY <port>` within {READY_TIMEOUT:?}");
                    return Err(self.failure(idx, &why));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let why = match self.procs[idx].reap(Duration::from_secs(2)) {
                        Some(status) => format!("exited with {status} before printing READY"),
                        None => "closed its stdout before printing READY".to_owned(),
                    };
                    return Err(self.failure(idx, &why));
                }
            }
        }
    }

    /// Waits for the client to exit, watching the daemons: if one exits meanwhile, that is the
    /// error.
    fn wait_client(&mut self, client: usize, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.procs[client].poll()? {
                return Ok(status);
            }
            for idx in 0..self.procs.len() {
                if idx == client {
                    continue;
                }
                if let Some(status) = self.procs[idx].poll()? {
                    let why = format!("exited with {status} while the client was running");
                    return Err(self.failure(idx, &why));
                }
            }
            if Instant::now() >= deadline {
                return Err(self.failure(client, &format!("did not finish within {timeout:?}")));
            }
            thread::sleep(POLL);
        }
    }

    /// The `(ok, failed)` counts and the request phase from the client's `DONE` line, if it
    /// printed one.
    fn done_line(&self, client: usize) -> Option<((usize, usize), Option<Duration>)> {
        let mut done = None;
        // The client has exited; its stdout reader ends as soon as it has passed every line on.
        while let Ok(line) = self.procs[client].stdout_lines.recv_timeout(Duration::from_secs(2)) {
            if let Some(counts) = parse_done(&line) {
                done = Some((counts, parse_request_us(&line).map(Duration::from_micros)));
            }
        }
        done
    }

    /// Closes every process's stdin, waits up to [`SHUTDOWN_TIMEOUT`] for them to exit, and kills
    /// the rest. Any daemon that had to be killed or exited unsuccessfully is an error.
    fn shutdown(&mut self) -> anyhow::Result<()> {
        let killed = self.stop_all(SHUTDOWN_TIMEOUT);
        let mut problems = Vec::new();
        for (idx, proc) in self.procs.iter().enumerate() {
            if killed.contains(&idx) {
                let why = format!("did not exit within {SHUTDOWN_TIMEOUT:?} of its stdin closing; killed");
                problems.push(self.failure(idx, &why));
            } else if let Some(status) = proc.status.filter(|s| !s.success()) {
                problems.push(self.failure(idx, &format!("exited with {status} at shutdown")));
            }
        }
        match problems.len() {
            0 => Ok(()),
            1 => Err(problems.remove(0)),
            _ => {
                let all: Vec<String> = problems.iter().map(|e| format!("{e:#}")).collect();
                Err(anyhow!("{} processes failed at shutdown:\n{}", all.len(), all.join("\n")))
            }
        }
    }

    /// Closes every stdin, waits up to `grace` for the processes to exit, then kills and reaps the
    /// rest. Returns the indices of the processes that had to be killed.
    fn stop_all(&mut self, grace: Duration) -> Vec<usize> {
        for proc in &mut self.procs {
            proc.stdin = None;
        }
        let deadline = Instant::now() + grace;
        for proc in &mut self.procs {
            proc.reap(deadline.saturating_duration_since(Instant::now()));
        }
        let mut killed = Vec::new();
        for (idx, proc) in self.procs.iter_mut().enumerate() {
            if proc.status.is_none() {
                proc.kill();
                killed.push(idx);
            }
        }
        killed
    }

    /// An error naming process `idx` (role, node, pid), saying `why`, and quoting the end of its
    /// stderr.
    fn failure(&self, idx: usize, why: &str) -> anyhow::Error {
        let p = &self.procs[idx];
        let mut msg = format!("{} {} (pid {}) {why}", p.role, p.node, p.child.id());
        match stderr_tail(&p.stderr_log, STDERR_TAIL_LINES) {
            Some(tail) if !tail.is_empty() => {
                msg.push_str(&format!("\n  last lines of {}:", p.stderr_log.display()));
                for line in tail {
                    msg.push_str("\n    ");
                    msg.push_str(&line);
                }
            }
            _ => msg.push_str(&format!("\n  (nothing on stderr; see {})", p.stderr_log.display())),
        }
        anyhow!(msg)
    }

    fn summaries(&self) -> Vec<ProcessSummary> {
        self.procs
            .iter()
            .map(|p| ProcessSummary {
                role: p.role,
                node: p.node.clone(),
                pid: p.child.id(),
                status: p.status,
                stderr_log: p.stderr_log.clone(),
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop_all(CLEANUP_TIMEOUT);
    }
}

/// The last `n` lines of a log file, leaving out a trailing backtrace (from its `Stack
/// backtrace:` line on), which would otherwise push the error message out of view.
fn stderr_tail(path: &Path, n: usize) -> Option<Vec<String>> {
    let bytes = fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    if let Some(at) = lines.iter().rposition(|l| l.trim().eq_ignore_ascii_case("stack backtrace:")) {
        lines.truncate(at);
    }
    Some(lines[lines.len().saturating_sub(n)..].iter().map(|l| l.to_string()).collect())
}

/// Parses `DONE ok=N failed=M`.
/// The `request_us=T` part of a `DONE` line.
fn parse_request_us(line: &str) -> Option<u64> {
    line.trim()
        .strip_prefix("DONE ")?
        .split_whitespace()
        .find_map(|p| p.strip_prefix("request_us=")?.parse().ok())
}

fn parse_done(line: &str) -> Option<(usize, usize)> {
    let rest = line.trim().strip_prefix("DONE ")?;
    let mut ok = None;
    let mut failed = None;
    for part in rest.split_whitespace() {
        if let Some(v) = part.strip_prefix("ok=") {
            ok = v.parse().ok();
        } else if let Some(v) = part.strip_prefix("failed=") {
            failed = v.parse().ok();
        }
    }
    Some((ok?, failed?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_line_parses() {
        assert_eq!(parse_done("DONE ok=39 failed=1"), Some((39, 1)));
        assert_eq!(parse_done("DONE ok=x failed=1"), None);
        assert_eq!(parse_done("READY 4000"), None);
        assert_eq!(parse_request_us("DONE ok=39 failed=1 request_us=1200"), Some(1200));
        assert_eq!(parse_request_us("DONE ok=39 failed=1"), None);
    }

    #[test]
    fn stderr_tail_skips_the_backtrace() {
        let path = std::env::temp_dir().join(format!("ringtrace-demo-tail-{}", std::process::id()));
        fs::write(&path, "a\nError: boom\n\nStack backtrace:\n   0: main\n").unwrap();
        assert_eq!(stderr_tail(&path, 2).unwrap(), vec!["Error: boom", ""]);
        assert!(stderr_tail(&path.with_extension("missing"), 2).is_none());
        let _ = fs::remove_file(&path);
    }

    #[test]
    fn out_dir_is_cleared_only_if_the_demo_made_it() {
        let base = std::env::temp_dir().join(format!("ringtrace-demo-out-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let dirs = OutDirs::prepare(&base).unwrap();
        fs::write(dirs.recordings.join("old"), "x").unwrap();
        let dirs = OutDirs::prepare(&base).unwrap();
        assert!(!dirs.recordings.join("old").exists(), "a rerun starts with empty recordings");

        let foreign = base.join("foreign");
        fs::create_dir_all(&foreign).unwrap();
        fs::write(foreign.join("precious"), "x").unwrap();
        assert!(OutDirs::prepare(&foreign).is_err());
        assert!(foreign.join("precious").exists());
        let _ = fs::remove_dir_all(&base);
    }

    #[test]
    fn a_child_that_fails_before_ready_is_named_with_its_stderr() {
        let logs = std::env::temp_dir().join(format!("ringtrace-demo-logs-{}", std::process::id()));
        fs::create_dir_all(&logs).unwrap();
        // `/bin/sh` stands in for the ringtrace binary: `sh __demo-node --role ...` fails at once
        // with a message naming the missing script on stderr.
        let mut cluster = Cluster {
            exe: PathBuf::from("/bin/sh"),
            recordings: logs.clone(),
            logs: logs.clone(),
            otlp: None,
            baseline: None,
            procs: Vec::new(),
        };
        let args = NodeArgs::new(Role::Worker, "node-9", &logs);
        let idx = cluster.spawn(&args).unwrap();
        let err = format!("{:#}", cluster.wait_ready(idx).unwrap_err());
        assert!(err.starts_with("worker node-9 (pid "), "{err}");
        assert!(err.contains("before printing READY"), "{err}");
        assert!(err.contains("__demo-node"), "the stderr tail is quoted: {err}");
        drop(cluster);
        let _ = fs::remove_dir_all(&logs);
    }
}
