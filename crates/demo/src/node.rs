//! One demo process: its arguments (`ringtrace __demo-node --key value ...`) and its life.
//!
//! A daemon (master or worker) binds `127.0.0.1:0`, prints `READY <port>` on stdout, serves until
//! its stdin reaches end of file, then stops accepting, lets requests in progress finish, drops
//! the ringtrace guard (flushing the recording) and returns. The client runs its requests, prints
//! `DONE ok=N failed=M` and returns; it stops early if its stdin reaches end of file.

use std::io::{self, Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};

use crate::client;
use crate::master::Master;
use crate::rpc::{self, Handler};
use crate::worker::Worker;
use crate::workload::DEFAULT_SEED;

/// The target of this module's spans and events, as the crate docs' "Spans" section says.
const TARGET: &str = "ringtrace::demo::node";

/// Default latency a slow worker adds to each disk operation.
pub const DEFAULT_SLOW_IO_MS: u64 = 15;

/// Default number of client requests.
pub(crate) const DEFAULT_REQUESTS: usize = 40;

/// How long a daemon lets requests in progress finish after its stdin closes.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the flush before exit may take (the guard's own flush on drop is bounded too).
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The part a process plays in the demo cluster; also its `OTEL_SERVICE_NAME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Places blocks and fans requests out to workers.
    Master,
    /// Stores block replicas on disk and counts words.
    Worker,
    /// Issues the workload's requests to the master.
    Client,
}

impl Role {
    /// The role's name: `master`, `worker` or `client`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Worker => "worker",
            Role::Client => "client",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s {
            "master" => Ok(Role::Master),
            "worker" => Ok(Role::Worker),
            "client" => Ok(Role::Client),
            other => bail!("unknown role {other:?}: expected master, worker or client"),
        }
    }
}

/// A worker as the master knows it: node name and address (`--worker node-1=127.0.0.1:4000`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerAddr {
    /// The worker's node name.
    pub node: String,
    /// Where it listens.
    pub addr: SocketAddr,
}

/// The arguments of one demo process.
///
/// Written by [`NodeArgs::to_args`] and read by [`node_args_from`] as `--key value` pairs:
///
/// | flag                  | meaning                                              | for     |
/// |-----------------------|------------------------------------------------------|---------|
/// | `--role R`            | `master`, `worker` or `client` (required)            | all     |
/// | `--node N`            | node name, e.g. `node-1` (required)                  | all     |
/// | `--out DIR`           | the demo's output directory (required)               | all     |
/// | `--worker N=ADDR`     | a worker, repeated once per worker                   | master  |
/// | `--master ADDR`       | the master's address                                 | client  |
/// | `--slow`              | add latency to every disk operation                  | worker  |
/// | `--slow-io-ms MS`     | that latency (default 15)                            | worker  |
/// | `--requests N`        | requests to issue (default 40)                       | client  |
/// | `--seed S`            | workload seed (default 42)                           | client  |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeArgs {
    /// The process's role.
    pub role: Role,
    /// The node name (`node-0` for the master, `node-1`… for workers, `client-1`).
    pub node: String,
    /// The demo's output directory; a worker keeps its blocks in `<out>/data/<node>/`.
    pub out: PathBuf,
    /// The workers (master only).
    pub workers: Vec<WorkerAddr>,
    /// The master's address (client only).
    pub master: Option<SocketAddr>,
    /// Whether this worker's disk is slow.
    pub slow: bool,
    /// Latency a slow worker adds to each disk operation, in milliseconds.
    pub slow_io_ms: u64,
    /// Requests the client issues.
    pub requests: usize,
    /// The client's workload seed.
    pub seed: u64,
}

impl NodeArgs {
    /// Arguments for `role` on `node` with every optional setting at its default.
    pub fn new(role: Role, node: impl Into<String>, out: impl Into<PathBuf>) -> Self {
        Self {
            role,
            node: node.into(),
            out: out.into(),
            workers: Vec::new(),
            master: None,
            slow: false,
            slow_io_ms: DEFAULT_SLOW_IO_MS,
            requests: DEFAULT_REQUESTS,
            seed: DEFAULT_SEED,
        }
    }

    /// The `--key value` list [`node_args_from`] reads back (without the subcommand name).
    pub fn to_args(&self) -> Vec<String> {
        let mut a = vec![
            "--role".into(),
            self.role.as_str().into(),
            "--node".into(),
            self.node.clone(),
            "--out".into(),
            self.out.to_string_lossy().into_owned(),
        ];
        for w in &self.workers {
            a.push("--worker".into());
            a.push(format!("{}={}", w.node, w.addr));
        }
        if let Some(m) = self.master {
            a.push("--master".into());
            a.push(m.to_string());
        }
        if self.slow {
            a.push("--slow".into());
        }
        a.extend([
            "--slow-io-ms".into(),
            self.slow_io_ms.to_string(),
            "--requests".into(),
            self.requests.to_string(),
            "--seed".into(),
            self.seed.to_string(),
        ]);
        a
    }

    /// The directory a worker keeps its blocks in.
    pub fn data_dir(&self) -> PathBuf {
        self.out.join("data").join(&self.node)
    }
}

/// Parses the arguments of `ringtrace __demo-node` (everything after the subcommand).
///
/// Errors name the offending flag or value; the role's required arguments are checked (a master
/// needs `--worker`s, a client needs `--master`).
pub fn node_args_from(args: &[String]) -> anyhow::Result<NodeArgs> {
    let mut role = None;
    let mut node = None;
    let mut out = None;
    let mut parsed = NodeArgs::new(Role::Client, "", "");
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--slow" {
            parsed.slow = true;
            continue;
        }
        let value = it.next().ok_or_else(|| anyhow!("{flag} needs a value"))?;
        let bad = |what: &str| format!("{flag} {value:?}: expected {what}");
        match flag.as_str() {
            "--role" => role = Some(value.parse::<Role>()?),
            "--node" => {
                if value.is_empty() {
                    bail!("{}", bad("a node name"));
                }
                node = Some(value.clone());
            }
            "--out" => out = Some(PathBuf::from(value)),
            "--worker" => {
                let (name, addr) = value.split_once('=').ok_or_else(|| anyhow!(bad("NODE=IP:PORT")))?;
                let addr = addr.parse().with_context(|| bad("NODE=IP:PORT"))?;
                parsed.workers.push(WorkerAddr { node: name.to_owned(), addr });
            }
            "--master" => parsed.master = Some(value.parse().with_context(|| bad("IP:PORT"))?),
            "--slow-io-ms" => parsed.slow_io_ms = value.parse().with_context(|| bad("milliseconds"))?,
            "--requests" => parsed.requests = value.parse().with_context(|| bad("a count"))?,
            "--seed" => parsed.seed = value.parse().with_context(|| bad("an unsigned integer"))?,
            other => bail!("unknown demo-node argument {other:?}"),
        }
    }
    parsed.role = role.ok_or_else(|| anyhow!("missing --role"))?;
    parsed.node = node.ok_or_else(|| anyhow!("missing --node"))?;
    parsed.out = out.ok_or_else(|| anyhow!("missing --out"))?;
    match parsed.role {
        Role::Master if parsed.workers.is_empty() => bail!("a master needs at least one --worker"),
        Role::Client if parsed.master.is_none() => bail!("a client needs --master"),
        _ => {}
    }
    Ok(parsed)
}

/// Runs one demo process to completion: what `ringtrace __demo-node` calls.
///
/// Initialises ringtrace from the environment the orchestrator set (`RINGTRACE_NODE`,
/// `OTEL_SERVICE_NAME`, `RINGTRACE_DIR`), runs the role, and drops the guard before returning so
/// the recording is flushed on every path, success or error. With `RINGTRACE_DEMO_TRACING` set
/// (`ringtrace demo --no-tracing`), it runs the role under that baseline instead (`off`: no
/// subscriber; `floor`: the floor layer; `floor-fields`: the floor layer keeping every field;
/// `floor-disk`: the same writing what it keeps to a file; `floor-subscriber-disk`: that floor
/// without the registry).
pub fn run_node(args: NodeArgs) -> anyhow::Result<()> {
    let context = || format!("{} {}", args.role, args.node);
    if let Some(baseline) = Baseline::from_env()? {
        if baseline == Baseline::FloorSubscriberDisk {
            let floor = ringtrace_test_support::floor::DiskFieldsFloorSubscriber::new(floor_file(&args)?);
            tracing::subscriber::set_global_default(floor)
                .map_err(|e| anyhow!("installing the floor subscriber: {e}"))?;
        }
        let floor = match baseline {
            Baseline::Off | Baseline::FloorSubscriberDisk => None,
            Baseline::Floor => Some(ringtrace_test_support::floor::FloorLayer::default()),
            Baseline::FloorFields => Some(ringtrace_test_support::floor::FloorLayer::all_fields()),
            Baseline::FloorDisk => {
                Some(ringtrace_test_support::floor::FloorLayer::to_file(floor_file(&args)?))
            }
        };
        if let Some(floor) = floor {
            ringtrace_test_support::floor::install_layer(floor)
                .map_err(|e| anyhow!("installing the floor layer: {e}"))?;
        }
        eprintln!("{}: {TRACING_ENV}={}, nothing is recorded", context(), baseline.as_str());
        return run_role(&args).with_context(context);
    }
    let guard = ringtrace_subscriber::init().map_err(|e| anyhow!("initialising ringtrace: {e}"))?;
    let result = run_role(&args);
    match guard.handle().flush(FLUSH_TIMEOUT) {
        Ok(stats) => eprintln!(
            "{} {}: {} spans recorded, {} dropped",
            args.role, args.node, stats.recorded_spans, stats.dropped_spans
        ),
        Err(e) => eprintln!("{} {}: flushing the recording failed: {e}", args.role, args.node),
    }
    drop(guard);
    result.with_context(context)
}

/// The file the `floor-disk` baseline writes: `<RINGTRACE_DIR>/<node>_<role>_<pid>.floor`
/// (the recordings' directory the orchestrator sets), created new.
fn floor_file(args: &NodeArgs) -> anyhow::Result<std::fs::File> {
    let dir = std::env::var_os("RINGTRACE_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{}_{}_{}.floor", args.node, args.role, std::process::id()));
    std::fs::File::create_new(&path).with_context(|| format!("creating {}", path.display()))
}

/// Environment variable: what the demo's processes run instead of ringtrace under
/// `ringtrace demo --no-tracing` ([`Baseline`]); the orchestrator passes it on to them.
pub(crate) const TRACING_ENV: &str = "RINGTRACE_DEMO_TRACING";

/// What `ringtrace demo --no-tracing` runs in each process instead of ringtrace, to measure what
/// recording costs against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Baseline {
    /// No subscriber at all (`off`, the default).
    Off,
    /// The least any recorder does (`floor`): registry + level filter +
    /// [`ringtrace_test_support::floor::FloorLayer`], which timestamps spans and events into a
    /// per-thread buffer and exports nothing.
    Floor,
    /// The same floor keeping every field (`floor-fields`): it also copies each field's value,
    /// formatted, into a per-thread buffer
    /// ([`FloorLayer::all_fields`](ringtrace_test_support::floor::FloorLayer::all_fields)).
    FloorFields,
    /// The floor keeping every field, and writing its records and fields to a file in the
    /// recordings' directory from the application threads (`floor-disk`,
    /// [`FloorLayer::to_file`](ringtrace_test_support::floor::FloorLayer::to_file)): the least a
    /// recorder pays that keeps the demo's spans on disk.
    FloorDisk,
    /// The same without the registry (`floor-subscriber-disk`,
    /// [`DiskFieldsFloorSubscriber`](ringtrace_test_support::floor::DiskFieldsFloorSubscriber)):
    /// the least a subscriber of its own pays for it, the yardstick of ringtrace's standalone
    /// subscriber, which the recording processes run (`init()` with its default `info` level).
    FloorSubscriberDisk,
}

impl Baseline {
    /// `off`, `floor`, `floor-fields`, `floor-disk` or `floor-subscriber-disk`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Baseline::Off => "off",
            Baseline::Floor => "floor",
            Baseline::FloorFields => "floor-fields",
            Baseline::FloorDisk => "floor-disk",
            Baseline::FloorSubscriberDisk => "floor-subscriber-disk",
        }
    }

    /// The baseline `RINGTRACE_DEMO_TRACING` names; `None` when it is not set or empty (as
    /// OpenTelemetry's variables treat an empty value).
    pub(crate) fn from_env() -> anyhow::Result<Option<Self>> {
        let Some(v) = std::env::var_os(TRACING_ENV) else { return Ok(None) };
        match v.to_str() {
            Some("") => Ok(None),
            Some("off") => Ok(Some(Baseline::Off)),
            Some("floor") => Ok(Some(Baseline::Floor)),
            Some("floor-fields") => Ok(Some(Baseline::FloorFields)),
            Some("floor-disk") => Ok(Some(Baseline::FloorDisk)),
            Some("floor-subscriber-disk") => Ok(Some(Baseline::FloorSubscriberDisk)),
            _ => bail!(
                "{TRACING_ENV}={v:?}: expected off, floor, floor-fields, floor-disk or floor-subscriber-disk"
            ),
        }
    }
}

fn run_role(args: &NodeArgs) -> anyhow::Result<()> {
    match args.role {
        Role::Worker => {
            let delay = args.slow.then(|| Duration::from_millis(args.slow_io_ms));
            Worker::new(args.data_dir(), delay).and_then(serve_until_stdin_closes)
        }
        Role::Master => Master::new(&args.workers).and_then(serve_until_stdin_closes),
        Role::Client => run_client(args),
    }
}

fn run_client(args: &NodeArgs) -> anyhow::Result<()> {
    let master = args.master.ok_or_else(|| anyhow!("a client needs --master"))?;
    // Like the daemons, the client treats the end of stdin as the orchestrator's exit.
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        thread::Builder::new()
            .name("stdin-watch".into())
            .spawn(move || {
                wait_for_stdin_eof();
                stop.store(true, Ordering::Relaxed);
            })
            .context("spawning the stdin watcher")?;
    }
    let outcome = client::run(master, args.requests, args.seed, &stop)?;
    if outcome.failed > 0 {
        bail!("{} of {} requests failed", outcome.failed, outcome.ok + outcome.failed);
    }
    Ok(())
}

/// Serves `handler` on an ephemeral loopback port, announces it, and returns once stdin closes.
fn serve_until_stdin_closes<H: Handler>(handler: H) -> anyhow::Result<()> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding a port on 127.0.0.1")?;
    let server = rpc::serve(listener, Arc::new(handler))?;
    let port = server.addr().port();
    {
        let mut stdout = io::stdout().lock();
        writeln!(stdout, "READY {port}").context("announcing the port on stdout")?;
        stdout.flush().context("announcing the port on stdout")?;
    }
    tracing::info!(target: TARGET, port, "serving");
    wait_for_stdin_eof();
    tracing::info!(target: TARGET, "stdin closed; shutting down");
    server.shutdown(DRAIN_TIMEOUT);
    Ok(())
}

/// Blocks until stdin reaches end of file (or fails): the orchestrator's signal to stop.
fn wait_for_stdin_eof() {
    let mut stdin = io::stdin().lock();
    let mut buf = [0u8; 256];
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn args_round_trip() {
        let mut master = NodeArgs::new(Role::Master, "node-0", "/tmp/out");
        master.workers = vec![
            WorkerAddr { node: "node-1".into(), addr: "127.0.0.1:4001".parse().unwrap() },
            WorkerAddr { node: "node-2".into(), addr: "127.0.0.1:4002".parse().unwrap() },
        ];
        assert_eq!(node_args_from(&master.to_args()).unwrap(), master);

        let mut worker = NodeArgs::new(Role::Worker, "node-3", "out dir");
        worker.slow = true;
        worker.slow_io_ms = 30;
        assert_eq!(node_args_from(&worker.to_args()).unwrap(), worker);

        let mut client = NodeArgs::new(Role::Client, "client-1", "o");
        client.master = Some("127.0.0.1:5000".parse().unwrap());
        client.requests = 7;
        client.seed = 9;
        assert_eq!(node_args_from(&client.to_args()).unwrap(), client);
    }

    #[test]
    fn bad_args_name_the_problem() {
        let err = |a: &[&str]| node_args_from(&strings(a)).unwrap_err().to_string();
        assert!(err(&["--role", "boss"]).contains("boss"));
        assert!(err(&["--node"]).contains("--node needs a value"));
        assert!(err(&["--bogus", "1"]).contains("--bogus"));
        assert!(
            err(&["--role", "worker", "--node", "n", "--requests", "many", "--out", "o"]).contains("many")
        );
        assert!(err(&["--role", "worker", "--out", "o"]).contains("missing --node"));
        assert!(err(&["--role", "master", "--node", "node-0", "--out", "o"]).contains("--worker"));
        assert!(err(&["--role", "client", "--node", "c", "--out", "o"]).contains("--master"));
        assert!(err(&["--role", "master", "--worker", "node-1"]).contains("NODE=IP:PORT"));
    }
}
