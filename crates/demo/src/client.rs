//! The client: runs the workload plan against the master, one request at a time, and checks
//! every answer.
//!
//! Each request is its own trace: a root `request` span carrying `request.id = "req-0001"` (and
//! so every span of the request, in every process, inherits the id), an operation span (`put`,
//! `get`, `wordcount`) and the `rpc.call` to the master.

use std::collections::HashMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{anyhow, bail, ensure};
use tracing::{info, info_span, warn};

use crate::message::{Request, Response};
use crate::rpc::Peer;
use crate::workload::{count_words, plan, Op, TOP_WORDS};
use crate::MASTER_NODE;

/// The target of this module's spans and events, as the crate docs' "Spans" section says.
const TARGET: &str = "ringtrace::demo::client";

/// How long the client waits for the master's response.
const MASTER_TIMEOUT: Duration = Duration::from_secs(20);

/// What the client's run came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Requests answered correctly.
    pub ok: usize,
    /// Requests that failed or got a wrong answer.
    pub failed: usize,
}

/// Runs `requests` requests of the plan for `seed` against the master at `master`, prints
/// `DONE ok=N failed=M request_us=T` on stdout (`T`: microseconds spent issuing the requests),
/// and returns the counts.
///
/// Stops early, with an error, once `stop` is set (the orchestrator has gone away).
pub(crate) fn run(
    master: SocketAddr,
    requests: usize,
    seed: u64,
    stop: &AtomicBool,
) -> anyhow::Result<Outcome> {
    let peer = Peer::new(MASTER_NODE, master, MASTER_TIMEOUT);
    let ops = plan(requests, seed);
    // Block texts by key, to check GET and WORDCOUNT answers against.
    let texts: HashMap<&str, &str> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Put { key, text } => Some((key.as_str(), text.as_str())),
            _ => None,
        })
        .collect();

    let mut outcome = Outcome { ok: 0, failed: 0 };
    let started = std::time::Instant::now();
    for (i, op) in ops.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            bail!("stdin closed after {i} of {} requests: the orchestrator has gone", ops.len());
        }
        let id = format!("req-{:04}", i + 1);
        let span = info_span!(target: TARGET, "request", request.id = %id, op = op.name());
        match span.in_scope(|| run_op(&peer, op, &texts)) {
            Ok(()) => outcome.ok += 1,
            Err(e) => {
                outcome.failed += 1;
                span.in_scope(|| warn!(target: TARGET, error = %format!("{e:#}"), "request failed"));
                eprintln!("{id} {} failed: {e:#}", op.name());
            }
        }
    }
    let mut stdout = std::io::stdout().lock();
    let request_us = started.elapsed().as_micros();
    writeln!(stdout, "DONE ok={} failed={} request_us={request_us}", outcome.ok, outcome.failed)?;
    stdout.flush()?;
    Ok(outcome)
}

fn run_op(peer: &Peer, op: &Op, texts: &HashMap<&str, &str>) -> anyhow::Result<()> {
    match op {
        Op::Put { key, text } => {
            let _span = info_span!(target: TARGET, "put", key = %key, bytes = text.len()).entered();
            let resp = peer.call(&Request::Put { key: key.clone(), text: text.clone() })?;
            ensure!(resp == Response::Ok, "PUT {key}: {}", answer(&resp));
            Ok(())
        }
        Op::Get { key } => {
            let _span = info_span!(target: TARGET, "get", key = %key).entered();
            match peer.call(&Request::Get { key: key.clone() })? {
                Response::Block { text } => {
                    info!(target: TARGET, bytes = text.len(), "block received");
                    ensure!(
                        texts.get(key.as_str()) == Some(&text.as_str()),
                        "GET {key}: the block differs from what was stored"
                    );
                    Ok(())
                }
                other => bail!("GET {key}: {}", answer(&other)),
            }
        }
        Op::WordCount { keys } => {
            let _span = info_span!(target: TARGET, "wordcount", blocks = keys.len()).entered();
            let req = Request::WordCount { keys: keys.clone(), top: TOP_WORDS };
            match peer.call(&req)? {
                Response::Counts { total_words, words } => {
                    let expected: u64 =
                        keys.iter().map(|k| texts.get(k.as_str()).map_or(0, |t| count_words(t).0)).sum();
                    info!(target: TARGET, total_words, top = ?words.first(), "counts received");
                    ensure!(
                        total_words == expected,
                        "WORDCOUNT: {total_words} words counted, {expected} stored"
                    );
                    ensure!(words.len() <= TOP_WORDS as usize, "WORDCOUNT: too many words returned");
                    Ok(())
                }
                other => Err(anyhow!("WORDCOUNT: {}", answer(&other))),
            }
        }
    }
}

fn answer(resp: &Response) -> String {
    match resp {
        Response::Ok => "unexpected OK".into(),
        Response::Block { .. } => "unexpected block".into(),
        Response::Counts { .. } => "unexpected counts".into(),
        Response::NotFound { key } => format!("not found: {key}"),
        Response::Error { message } => format!("error from the master: {message}"),
    }
}
