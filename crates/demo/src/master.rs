//! The master daemon: places blocks on workers and fans requests out to them.
//!
//! | request     | span (server)      | fan-out                                                 |
//! |-------------|--------------------|---------------------------------------------------------|
//! | `PUT`       | `handle_put`       | one `replicate` thread per replica → `rpc.call` `STORE` |
//! | `GET`       | `handle_get`       | `rpc.call` `FETCH` to the first live replica            |
//! | `WORDCOUNT` | `handle_wordcount` | one `map_block` thread per key → `rpc.call` `MAP`; then `reduce` |
//!
//! Placement is by key hash: a block lives on worker `hash(key) mod n` and the next one around
//! the ring (replication factor 2, or 1 with a single worker).

use std::collections::HashMap;
use std::thread;
use std::time::Duration;

use anyhow::{anyhow, bail};
use ringtrace_core::propagation::TraceContext;
use tracing::{info, info_span, warn, Span};

use crate::message::{Request, Response};
use crate::rpc::{server_span, Handler, Peer};
use crate::workload::{replicas, top_words, validate_key};
use crate::WorkerAddr;

/// The target of this module's spans and events, as the crate docs' "Spans" section says.
const TARGET: &str = "ringtrace::demo::master";

/// Copies kept of every block.
pub(crate) const REPLICATION: usize = 2;

/// Most blocks one `WORDCOUNT` may cover (each gets a thread).
const MAX_WORDCOUNT_KEYS: usize = 64;

/// How long the master waits for a worker's response.
const WORKER_TIMEOUT: Duration = Duration::from_secs(10);

/// The master's state: its workers.
#[derive(Debug)]
pub(crate) struct Master {
    workers: Vec<Peer>,
}

impl Master {
    /// A master over `workers` (at least one).
    pub(crate) fn new(workers: &[WorkerAddr]) -> anyhow::Result<Self> {
        if workers.is_empty() {
            bail!("a master needs at least one worker");
        }
        let workers = workers.iter().map(|w| Peer::new(&w.node, w.addr, WORKER_TIMEOUT)).collect();
        Ok(Self { workers })
    }

    /// The workers holding `key`, in preference order.
    fn replicas_of(&self, key: &str) -> Vec<&Peer> {
        replicas(key, self.workers.len(), REPLICATION).into_iter().map(|i| &self.workers[i]).collect()
    }

    fn handle_put(&self, ctx: Option<TraceContext>, key: String, text: String) -> Response {
        let span = info_span!(
            target: TARGET,
            parent: None,
            "handle_put",
            otel.kind = "server",
            key = %key,
            bytes = text.len(),
        );
        let _entered = server_span(span, ctx.as_ref());
        if let Err(message) = validate_key(&key) {
            return refuse(message);
        }
        let targets = self.replicas_of(&key);
        let names: Vec<&str> = targets.iter().map(|p| p.node()).collect();
        info!(target: TARGET, replicas = ?names, "replicas chosen");

        let results = fan_out(&targets, |peer| {
            let span = info_span!(target: TARGET, "replicate", peer.node = %peer.node(), key = %key);
            let store = Request::Store { key: key.clone(), text: text.clone() };
            (span, move || match peer.call(&store)? {
                Response::Ok => Ok(()),
                other => Err(anyhow!("{} answered STORE with {}", peer.node(), describe(&other))),
            })
        });
        let failed: Vec<String> =
            results.into_iter().filter_map(Result::err).map(|e| format!("{e:#}")).collect();
        if failed.is_empty() {
            Response::Ok
        } else {
            fail(format!(
                "PUT {key}: {} of {} replicas failed: {}",
                failed.len(),
                targets.len(),
                failed.join("; ")
            ))
        }
    }

    fn handle_get(&self, ctx: Option<TraceContext>, key: String) -> Response {
        let span = info_span!(target: TARGET, parent: None, "handle_get", otel.kind = "server", key = %key);
        let _entered = server_span(span, ctx.as_ref());
        if let Err(message) = validate_key(&key) {
            return refuse(message);
        }
        match self.first_live_replica(&key, |key| Request::Fetch { key }) {
            Ok(Response::Block { text }) => {
                info!(target: TARGET, bytes = text.len(), "block fetched");
                Response::Block { text }
            }
            Ok(Response::NotFound { key }) => Response::NotFound { key },
            Ok(other) => fail(format!("GET {key}: unexpected {}", describe(&other))),
            Err(e) => fail(format!("GET {key}: {e:#}")),
        }
    }

    fn handle_wordcount(&self, ctx: Option<TraceContext>, keys: Vec<String>, top: u32) -> Response {
        let span = info_span!(
            target: TARGET,
            parent: None,
            "handle_wordcount",
            otel.kind = "server",
            blocks = keys.len(),
            top,
        );
        let _entered = server_span(span, ctx.as_ref());
        if keys.len() > MAX_WORDCOUNT_KEYS {
            return refuse(format!("WORDCOUNT over {} blocks; at most {MAX_WORDCOUNT_KEYS}", keys.len()));
        }
        if let Some(message) = keys.iter().find_map(|k| validate_key(k).err()) {
            return refuse(message);
        }

        let maps = fan_out(&keys, |key| {
            let span = info_span!(target: TARGET, "map_block", key = %key, words = tracing::field::Empty);
            (span, move || self.map_block(key))
        });
        let mut partials = Vec::with_capacity(maps.len());
        for (key, map) in keys.iter().zip(maps) {
            match map {
                Ok(partial) => partials.push(partial),
                Err(e) => return fail(format!("WORDCOUNT: block {key}: {e:#}")),
            }
        }
        let (total_words, words) = reduce(partials, top as usize);
        Response::Counts { total_words, words }
    }

    /// Counts one block's words on a replica (runs inside its `map_block` span).
    fn map_block(&self, key: &str) -> anyhow::Result<(u64, Vec<(String, u64)>)> {
        match self.first_live_replica(key, |key| Request::Map { key })? {
            Response::Counts { total_words, words } => {
                Span::current().record("words", total_words);
                Ok((total_words, words))
            }
            Response::NotFound { key } => Err(anyhow!("no replica holds {key}")),
            other => Err(anyhow!("unexpected {}", describe(&other))),
        }
    }

    /// Sends the request built by `make` to the replicas of `key` in order, until one answers
    /// with something other than an error or "not found".
    fn first_live_replica(&self, key: &str, make: impl Fn(String) -> Request) -> anyhow::Result<Response> {
        let mut last = None;
        for peer in self.replicas_of(key) {
            info!(target: TARGET, replica = %peer.node(), "replica chosen");
            match peer.call(&make(key.to_owned())) {
                Ok(resp @ (Response::Block { .. } | Response::Counts { .. })) => return Ok(resp),
                Ok(resp) => {
                    warn!(
                        target: TARGET,
                        replica = %peer.node(),
                        answer = %describe(&resp),
                        "replica failed; trying the next"
                    );
                    last = Some(Ok(resp));
                }
                Err(e) => {
                    warn!(
                        target: TARGET,
                        replica = %peer.node(),
                        error = %format!("{e:#}"),
                        "replica unreachable; trying the next"
                    );
                    last = Some(Err(e));
                }
            }
        }
        last.unwrap_or_else(|| Err(anyhow!("no replica for {key}")))
    }
}

/// Merges per-block counts into the `top` most frequent words, in a `reduce` span.
#[tracing::instrument(target = TARGET, name = "reduce", skip_all, fields(blocks = partials.len(), top))]
fn reduce(partials: Vec<(u64, Vec<(String, u64)>)>, top: usize) -> (u64, Vec<(String, u64)>) {
    let mut total = 0;
    let mut merged: HashMap<String, u64> = HashMap::new();
    for (words, counts) in partials {
        total += words;
        for (word, n) in counts {
            *merged.entry(word).or_insert(0) += n;
        }
    }
    info!(target: TARGET, total_words = total, distinct = merged.len(), "reduced");
    (total, top_words(merged, top))
}

/// Runs one job per item in parallel scoped threads and collects the results in item order.
///
/// `job` builds, on the calling thread, the span the job runs in (so it is a child of the current
/// span) and the work itself. A thread that cannot be spawned or that panics is an error result.
fn fan_out<'s, T, R, F, W>(items: &'s [T], job: F) -> Vec<anyhow::Result<R>>
where
    T: Sync,
    R: Send,
    F: Fn(&'s T) -> (Span, W),
    W: FnOnce() -> anyhow::Result<R> + Send + 's,
{
    thread::scope(|scope| {
        let handles: Vec<_> = items
            .iter()
            .map(|item| {
                let (span, work) = job(item);
                thread::Builder::new().name("fan-out".into()).spawn_scoped(scope, move || span.in_scope(work))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(handle) => handle.join().unwrap_or_else(|_| Err(anyhow!("a fan-out thread panicked"))),
                Err(e) => Err(anyhow!("spawning a fan-out thread: {e}")),
            })
            .collect()
    })
}

fn describe(resp: &Response) -> String {
    match resp {
        Response::Ok => "OK".into(),
        Response::Block { text } => format!("a block of {} bytes", text.len()),
        Response::Counts { total_words, .. } => format!("counts of {total_words} words"),
        Response::NotFound { key } => format!("not found: {key}"),
        Response::Error { message } => format!("error: {message}"),
    }
}

fn refuse(message: String) -> Response {
    warn!(target: TARGET, %message, "refused");
    Response::Error { message }
}

fn fail(message: String) -> Response {
    warn!(target: TARGET, error = %message, "request failed");
    Response::Error { message }
}

impl Handler for Master {
    fn handle(&self, ctx: Option<TraceContext>, req: Request) -> Response {
        match req {
            Request::Put { key, text } => self.handle_put(ctx, key, text),
            Request::Get { key } => self.handle_get(ctx, key),
            Request::WordCount { keys, top } => self.handle_wordcount(ctx, keys, top),
            other => refuse(format!("the master does not serve {}", other.method())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_merges_and_ranks() {
        let a = (3, vec![("ring".into(), 2), ("span".into(), 1)]);
        let b = (2, vec![("span".into(), 2)]);
        let (total, words) = reduce(vec![a, b], 1);
        assert_eq!(total, 5);
        assert_eq!(words, vec![("span".to_string(), 3)]);
    }

    #[test]
    fn fan_out_keeps_item_order() {
        let items = [3u64, 1, 2];
        let out = fan_out(&items, |&n| (Span::none(), move || Ok(n * 10)));
        let out: Vec<u64> = out.into_iter().map(Result::unwrap).collect();
        assert_eq!(out, vec![30, 10, 20]);
    }
}
