//! # ringtrace-demo
//!
//! The demo cluster behind `ringtrace demo`: a small distributed block store, run as real
//! processes on `127.0.0.1`, every one recording with ringtrace.
//!
//! A library, not a binary: the processes of the cluster are the hosting binary itself, started
//! again with [`NODE_SUBCOMMAND`]. The host runs [`run_demo`] for the whole cluster and
//! [`run_node`] when it finds itself started as one node:
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! let args: Vec<String> = std::env::args().skip(1).collect();
//! if args.first().map(String::as_str) == Some(ringtrace_demo::NODE_SUBCOMMAND) {
//!     return ringtrace_demo::run_node(ringtrace_demo::node_args_from(&args[1..])?);
//! }
//! let run = ringtrace_demo::run_demo(&ringtrace_demo::DemoOptions::default())?;
//! println!("{run}");
//! # Ok(())
//! # }
//! ```
//!
//! [`report`] writes what `ringtrace demo` prints about the recordings after the run.
//!
//! `ringtrace demo` starts N workers (`node-1` … `node-N`), a master (`node-0`) and a client
//! (`client-1`), each a separate OS process (the `ringtrace` binary re-executing itself as
//! `ringtrace __demo-node --role … --node …`). The client's requests fan out across the cluster,
//! and each request is one trace across every process it touches:
//!
//! ```text
//!                                                       STORE / FETCH / MAP
//!                                                    ┌──────▶ worker node-1 ──▶ <out>/data/node-1/
//!  client-1 ──PUT / GET / WORDCOUNT──▶ master node-0 ├──────▶ worker node-2 ──▶ <out>/data/node-2/
//!                                                    └──────▶ worker node-3 ──▶ <out>/data/node-3/
//! ```
//!
//! - **PUT** `key, text`: the master places the block on two workers by key hash and sends
//!   `STORE` to both in parallel; each worker writes the block to a file.
//! - **GET** `key`: the master sends `FETCH` to the first live replica (falling back to the
//!   second); the worker reads the file.
//! - **WORDCOUNT** `keys`: the master sends `MAP key` for every block in parallel; each worker
//!   reads its block and counts the words; the master reduces the counts to the top words.
//!
//! `--slow-node node-2` gives that worker a slow disk: the first read or write of each block it
//! opens waits 15 ms (`--slow-io-ms`) inside the I/O call, a fault the analysis should find.
//!
//! # Processes
//! The orchestrator ([`run_demo`]) starts the workers, reads `READY <port>` from each one's
//! stdout, starts the master with the workers' addresses, then the client with the master's.
//! Each child gets its identity in the environment — `RINGTRACE_NODE`, `OTEL_SERVICE_NAME`
//! (`master`, `worker`, `client`), `RINGTRACE_DIR=<out>/recordings`, and
//! `OTEL_EXPORTER_OTLP_ENDPOINT` when `--otlp` is given — and calls
//! `ringtrace_subscriber::init()`. Stderr goes to `<out>/logs/<node>-<role>.stderr.log`.
//!
//! The client prints `DONE ok=N failed=M` and exits (non-zero if a request failed). The
//! orchestrator then closes the daemons' stdin; a daemon returns from [`run_node`] on end of
//! file, dropping its ringtrace guard so its recording is flushed. Daemons still running after
//! 10 s are killed. If anything fails — a child exits early or unsuccessfully, a READY times
//! out — the orchestrator stops every child and reports which process failed, its exit status
//! and the end of its stderr. The orchestrator holds every child's stdin, so if it dies (Ctrl-C
//! included: on Unix the children run in their own process group) the pipes close and the whole
//! cluster stops by itself, flushing its recordings.
//!
//! # Wire protocol
//! TCP, length-prefixed frames: a `u32` little-endian payload length, then the payload
//! (`frame.rs`). Connections are persistent; a caller keeps a few idle ones per peer and each
//! connection carries one request at a time. A request payload is a trace-context flag byte
//! (`0` none, `1` present) followed by `TraceContext::write_bytes` (trace id, span id, sampled,
//! request id), then the message: a tag byte and its fields, strings as `u32` length + UTF-8
//! (`message.rs`). A response payload is the message alone. A frame that does not decode closes
//! its connection with a `warn` event; it never panics a node.
//!
//! # Spans
//! | process | spans                                                                          |
//! |---------|--------------------------------------------------------------------------------|
//! | client  | `request` (`request.id = "req-0001"`) → `put` / `get` / `wordcount` → `rpc.call` |
//! | master  | `handle_put` → `replicate` → `rpc.call`; `handle_get` → `rpc.call`;            |
//! |         | `handle_wordcount` → `map_block` → `rpc.call`, then `reduce`                   |
//! | worker  | `handle_store` → `disk_write`; `handle_fetch` → `disk_read`;                   |
//! |         | `handle_map` → `disk_read`, `count_words`                                      |
//!
//! Each request a master or worker serves runs in an `rpc.serve` span (`otel.kind = "server"`),
//! the caller's `rpc.call` its remote parent, the `handle_*` span inside it.
//!
//! Disk and network I/O goes through `ringtrace::io`: `disk_*` spans hold the `open`, `read` and
//! `write` spans of the block files, `rpc.call` spans the `connect`, `send` and `recv` spans of
//! the call, `rpc.serve` spans the `recv` of the request and the `send` of the response (target
//! `ringtrace::io`).
//!
//! `rpc.call` spans carry `otel.kind = "client"`, `handle_*` spans `otel.kind = "server"`. The
//! sender writes `ringtrace_subscriber::current_context()` into the frame; the receiver creates its
//! handler span and calls `SpanExt::set_remote_parent` before entering it, so the request id and
//! trace id follow the request into every process.
//!
//! Every span and event has the target `ringtrace::demo::<module>` (`ringtrace::demo::worker`
//! for `disk_read`), the module paths the demo had when it lived in the `ringtrace` binary: the
//! method names in recordings, profiles and flame graphs (`target::name`) stay as they were.
//! The code locations the spans carry (`code.namespace`, `code.filepath`, `code.lineno`) are
//! where the code is now, `ringtrace_demo::…` in `crates/demo/src/`.

#![deny(missing_docs)]
#![warn(unreachable_pub)]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod client;
mod frame;
mod master;
mod message;
mod node;
mod orchestrator;
pub mod report;
mod rpc;
mod worker;
mod workload;

pub use node::{node_args_from, run_node, NodeArgs, Role, WorkerAddr, DEFAULT_SLOW_IO_MS};
pub use orchestrator::{run_demo, DemoOptions, DemoRun, ProcessSummary};

/// The hidden subcommand the orchestrator runs each node with: `ringtrace __demo-node <args>`.
pub const NODE_SUBCOMMAND: &str = "__demo-node";

/// The master's node name.
pub const MASTER_NODE: &str = "node-0";

/// The client's node name.
pub const CLIENT_NODE: &str = "client-1";
