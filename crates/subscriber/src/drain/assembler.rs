//! The assembly for sinks (OTLP export, your own), on a thread of its own.
//!
//! The drain thread only reads the rings and copies their records: to the raw recording, and,
//! when sinks are configured, pass by pass to this thread, which assembles spans from them with
//! the same code a reader of the recording runs and hands them to the sinks. Assembling or a
//! slow sink therefore does not hold up the rings or the local recording: when this thread is
//! [`PASSES_IN_FLIGHT`] passes behind, the drain keeps the passes that follow and hands them
//! over together once it catches up (each ring's records with the clock anchor of their own
//! pass). Only past [`BACKLOG_RECORDS`] kept records does the drain wait for it, as it waited
//! for its own assembly before: then the rings fill, and a full ring drops and counts.

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringtrace_core::raw::{ClockAnchor, RawRecord};
use ringtrace_core::Clock;

use super::assemble::Records;
use super::Drain;
use crate::messages::message;
use crate::shared::Shared;
use crate::sink::Sink;
use crate::stats::Stats;

/// Passes handed to the assembler and not yet assembled, at most.
const PASSES_IN_FLIGHT: usize = 16;

/// Records the drain keeps for the assembler while it is behind, at most (64 MiB).
const BACKLOG_RECORDS: usize = 1 << 20;

/// The assembler thread's name.
const THREAD_NAME: &str = "ringtrace-asm";

/// One ring's records of one pass.
pub(super) struct RingRecords {
    /// How the pass's ticks convert.
    pub(super) anchor: ClockAnchor,
    pub(super) thread_id: u64,
    pub(super) thread_name: Arc<str>,
    /// As the ring held them: decoded on the assembler's thread.
    pub(super) records: Vec<RawRecord>,
}

enum Message {
    /// A pass (or several, kept while the assembler was behind): the records each ring held.
    Pass { rings: Vec<RingRecords> },
    /// Export every closed span, flush the sinks, answer with the totals.
    Flush(SyncSender<Stats>),
    /// Finish at these ticks, stop the sinks, answer with the totals, stop.
    Shutdown { end_ticks: u64, anchor: ClockAnchor, reply: SyncSender<Stats> },
}

/// The drain's end of the assembler thread.
pub(super) struct Assembler {
    tx: SyncSender<Message>,
    /// The assembler's totals after its latest pass.
    latest: Arc<Mutex<Stats>>,
    /// Passes kept while the assembler is behind, to hand over with the next.
    backlog: Vec<RingRecords>,
    /// Spans opened in passes the assembler could not take (its thread is gone).
    pub(super) dropped_spans: u64,
    quiet: bool,
}

impl Assembler {
    /// Starts the thread, with `sinks`, assembling as the drain of `shared` would.
    pub(super) fn spawn(shared: &Shared, sinks: Vec<Box<dyn Sink>>) -> std::io::Result<Self> {
        let mut drain = Drain::detached(shared.config.clone(), sinks);
        drain.summary_at_finish = false;
        let latest = Arc::new(Mutex::new(Stats::default()));
        let (tx, rx) = mpsc::sync_channel(PASSES_IN_FLIGHT);
        let thread_latest = latest.clone();
        std::thread::Builder::new().name(THREAD_NAME.into()).spawn(move || run(drain, rx, &thread_latest))?;
        Ok(Self { tx, latest, backlog: Vec::new(), dropped_spans: 0, quiet: shared.config.quiet })
    }

    /// Hands over a pass's records, with the passes kept before; keeps them all when the
    /// assembler is [`PASSES_IN_FLIGHT`] passes behind, unless that makes more than
    /// [`BACKLOG_RECORDS`]: then waits for it. Passes without records are handed over too: the
    /// assembly exports a closed span one complete pass after its close, as the drain would.
    pub(super) fn pass(&mut self, rings: Vec<RingRecords>) {
        let rings = if self.backlog.is_empty() {
            rings
        } else {
            let mut all = std::mem::take(&mut self.backlog);
            all.extend(rings);
            all
        };
        match self.tx.try_send(Message::Pass { rings }) {
            Ok(()) => {}
            Err(TrySendError::Full(Message::Pass { rings })) => {
                if rings.iter().map(|r| r.records.len()).sum::<usize>() <= BACKLOG_RECORDS {
                    self.backlog = rings;
                } else if let Err(mpsc::SendError(Message::Pass { rings })) =
                    self.tx.send(Message::Pass { rings })
                {
                    self.lost(&rings);
                }
            }
            Err(TrySendError::Disconnected(Message::Pass { rings })) => self.lost(&rings),
            Err(_) => {}
        }
    }

    /// Counts the spans opened in `rings`, which the assembler (its thread gone) cannot take.
    #[cold]
    fn lost(&mut self, rings: &[RingRecords]) {
        let opens =
            rings.iter().flat_map(|r| &r.records).filter(|r| r.open_sampled() == Some(true)).count() as u64;
        if self.dropped_spans == 0 && opens > 0 {
            message!(
                self.quiet,
                "ringtrace: the sinks' thread has stopped: spans are dropped for them (counted in ringtrace.sink_dropped_spans); the recording keeps them"
            );
        }
        self.dropped_spans += opens;
    }

    /// Hands over the passes kept, waiting for the assembler.
    fn send_backlog(&mut self) {
        if !self.backlog.is_empty() {
            let rings = std::mem::take(&mut self.backlog);
            if let Err(mpsc::SendError(Message::Pass { rings })) = self.tx.send(Message::Pass { rings }) {
                self.lost(&rings);
            }
        }
    }

    /// The assembler's totals after its latest pass.
    pub(super) fn latest(&self) -> Stats {
        *self.latest.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Has every pass handed over so far exported and the sinks flushed; its totals, or `None`
    /// when it does not answer within `timeout`.
    pub(super) fn flush(&mut self, timeout: Duration) -> Option<Stats> {
        self.send_backlog();
        let (reply, rx) = mpsc::sync_channel(1);
        self.tx.send(Message::Flush(reply)).ok()?;
        rx.recv_timeout(timeout).ok()
    }

    /// Has the assembler finish (spans still open end at `end_ticks`), stop the sinks and stop;
    /// its final totals, or `None` when it does not answer within `timeout`.
    pub(super) fn shutdown(
        &mut self,
        end_ticks: u64,
        anchor: ClockAnchor,
        timeout: Duration,
    ) -> Option<Stats> {
        self.send_backlog();
        let (reply, rx) = mpsc::sync_channel(1);
        self.tx.send(Message::Shutdown { end_ticks, anchor, reply }).ok()?;
        rx.recv_timeout(timeout).ok()
    }
}

fn run(mut drain: Drain, rx: Receiver<Message>, latest: &Mutex<Stats>) {
    crate::exit::on_drain_thread();
    let mut decoded = Vec::new();
    let publish = |drain: &Drain| *latest.lock().unwrap_or_else(|e| e.into_inner()) = drain.stats();
    for message in rx {
        match message {
            Message::Pass { rings } => {
                for r in &rings {
                    drain.clock = Clock::from_anchor(r.anchor);
                    decoded.clear();
                    drain.orphan_records += super::decode_local(&r.records, &mut decoded);
                    drain.apply_all(Records { a: &decoded, b: &[] }, r.thread_id, &r.thread_name);
                }
                drain.pass_once();
                drain.export_ready(false);
                publish(&drain);
            }
            Message::Flush(reply) => {
                drain.flush();
                publish(&drain);
                let _ = reply.send(drain.stats());
            }
            Message::Shutdown { end_ticks, anchor, reply } => {
                drain.clock = Clock::from_anchor(anchor);
                let stats = drain.finish_at(Some(end_ticks));
                publish(&drain);
                let _ = reply.send(stats);
                return;
            }
        }
    }
    // The drain is gone without a shutdown (its thread panicked): export what is left.
    drain.finish();
}
