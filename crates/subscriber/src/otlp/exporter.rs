//! The exporter thread: takes batches from the queue, sends them, retries with backoff.

use ringtrace_core::otlp::KeyValueExt as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringtrace_core::ids::IdGenerator;
use ringtrace_core::otlp::{self, KeyValue};

use super::config::Settings;
use super::queue::Condition;
use super::queue::{Batch, Next, OtlpStats, Queue};
use super::transport::{Failure, FailureKind, Transport};
use super::wire;
use crate::encode;
use crate::messages::message;
use crate::span_data::ResourceInfo;
use crate::stats::Stats;

/// Starts the exporter thread; returns once its runtime and client are set up (or failed).
pub(crate) fn spawn(queue: Arc<Queue>, settings: Settings) -> Result<std::thread::JoinHandle<()>, String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<(), String>>(1);
    let thread = std::thread::Builder::new()
        .name("ringtrace-otlp".into())
        .spawn(move || {
            // The HTTP and gRPC stacks use `tracing` themselves: their events must not loop back
            // into ringtrace (and out to the collector again).
            let _quiet = tracing::subscriber::set_default(tracing::subscriber::NoSubscriber::default());
            let runtime =
                match tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("starting the exporter's runtime: {e}")));
                        return;
                    }
                };
            runtime.block_on(async move {
                let transport = match Transport::new(&settings) {
                    Ok(t) => t,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                Exporter::new(queue, settings, transport).run().await;
            });
            // Do not wait for a name lookup still running on the blocking pool.
            runtime.shutdown_background();
        })
        .map_err(|e| format!("starting the exporter thread: {e}"))?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(thread),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => {
            let _ = thread.join();
            Err("the exporter thread died while starting".into())
        }
    }
}

struct Exporter {
    queue: Arc<Queue>,
    settings: Settings,
    transport: Transport,
    scope: otlp::InstrumentationScope,
    /// For jitter and the loss-report span ids.
    ids: IdGenerator,
    jitter_state: u64,
    /// In an outage (warned once; recovery is reported).
    failing: bool,
    /// Each kind of loss is explained on stderr once; later ones are counted.
    warned_rejected: bool,
    warned_gave_up: bool,
    /// Losses last reported in a `ringtrace.loss` span.
    reported_losses: (OtlpLosses, DrainLosses),
}

type OtlpLosses = (u64, u64, u64, u64);
type DrainLosses = (u64, u64, u64, u64);

enum Outcome {
    Sent,
    Stopped,
}

impl Exporter {
    fn new(queue: Arc<Queue>, settings: Settings, transport: Transport) -> Self {
        let mut ids = IdGenerator::from_entropy(u64::from(std::process::id()) << 21 | 0x1_0000);
        let jitter_state = ids.span_id().get() | 1;
        Self {
            queue,
            settings,
            transport,
            scope: wire::scope(),
            ids,
            jitter_state,
            failing: false,
            warned_rejected: false,
            warned_gave_up: false,
            reported_losses: Default::default(),
        }
    }

    async fn run(mut self) {
        loop {
            match self.queue.next(Instant::now()) {
                Next::Stop => return,
                Next::Wait(wait) => {
                    let sleep = tokio::time::sleep(wait.unwrap_or(Duration::from_secs(3600)));
                    tokio::select! {
                        _ = self.queue.wake.notified() => {}
                        _ = self.queue.stop.notified() => {}
                        _ = sleep => {}
                    }
                }
                Next::Send(batch) => {
                    if let Outcome::Stopped = self.send(*batch).await {
                        return;
                    }
                }
            }
        }
    }

    /// Sends one batch, retrying retryable failures; counts the outcome.
    async fn send(&mut self, batch: Batch) -> Outcome {
        let spans = batch.spans as u64;
        let body = self.request(&batch);
        drop(batch);
        let body = self.transport.prepare(body);
        let started = Instant::now();
        let retry = self.settings.retry;
        let timeout = self.settings.timeout;
        let mut backoff = retry.initial_backoff;
        let endpoint = self.settings.endpoint_text.clone();
        let queue = self.queue.clone();
        let sent = || queue.lock().attempt_under_way = true;
        loop {
            let attempt = self.transport.export(body.clone(), timeout, &sent);
            let result = tokio::select! {
                r = attempt => r,
                _ = self.queue.stop.notified() => return Outcome::Stopped,
            };
            match result {
                Ok(accepted) => {
                    if self.failing {
                        self.failing = false;
                        message!(self.settings.quiet, "ringtrace: OTLP export to {endpoint} works again");
                    }
                    let rejected = accepted.rejected_spans.min(spans);
                    if rejected > 0 {
                        let text = format!("partial success: {}", accepted.message);
                        if !self.warned_rejected {
                            self.warned_rejected = true;
                            message!(
                self.settings.quiet,
                                "ringtrace: the collector at {endpoint} rejected {rejected} spans: {} (further rejections are counted)",
                                accepted.message
                            );
                        }
                        self.queue.lock().rejection = Some(text);
                    }
                    self.queue.lock().condition = Condition::Healthy;
                    self.queue.finish_batch(|s| {
                        s.exported_spans += spans - rejected;
                        s.rejected_spans += rejected;
                        s.requests += 1;
                    });
                    return Outcome::Sent;
                }
                Err(failure) => {
                    let timed_out = failure.kind == FailureKind::Timeout;
                    {
                        let mut st = self.queue.lock();
                        st.stats.failed_attempts += 1;
                        st.attempt_under_way = false;
                        if timed_out {
                            st.attempt_timed_out();
                        }
                        st.condition = condition(&failure);
                    }
                    let wait = if failure.kind.retryable() {
                        let wait = failure
                            .retry_after
                            .unwrap_or_else(|| self.jitter(backoff))
                            .min(retry.max_backoff);
                        (started.elapsed() + wait < retry.max_elapsed).then_some(wait)
                    } else {
                        None
                    };
                    let Some(wait) = wait else {
                        self.give_up(spans, &failure, started.elapsed());
                        return Outcome::Sent;
                    };
                    if !self.failing {
                        self.failing = true;
                        message!(
                            self.settings.quiet,
                            "ringtrace: OTLP export: {}; retrying with backoff \
                             (spans beyond the queue bound are dropped and counted)",
                            self.queue.lock().diagnosis(&endpoint, Instant::now())
                        );
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = self.queue.stop.notified() => return Outcome::Stopped,
                    }
                    backoff = (backoff * 2).min(retry.max_backoff);
                }
            }
        }
    }

    /// Counts a batch that will not be sent again: rejected when the collector refused it,
    /// unconfirmed when an attempt went unanswered (the collector may have it), else failed.
    fn give_up(&mut self, spans: u64, failure: &Failure, retried_for: Duration) {
        let endpoint = &self.settings.endpoint_text;
        let maybe_delivered = self.queue.lock().in_flight_maybe_delivered();
        match failure.kind {
            FailureKind::Rejected => {
                if !self.warned_rejected {
                    self.warned_rejected = true;
                    message!(
                self.settings.quiet,
                        "ringtrace: the collector at {endpoint} rejected {spans} spans: {} (further rejections are counted)",
                        failure.reason
                    );
                }
                self.queue.lock().rejection = Some(failure.reason.clone());
                self.queue.finish_batch(|s| s.rejected_spans += spans);
            }
            _ if maybe_delivered => {
                if !self.warned_gave_up {
                    self.warned_gave_up = true;
                    message!(
                self.settings.quiet,
                        "ringtrace: OTLP export to {endpoint}: no answer for {spans} spans after retrying for {retried_for:?} ({}); \
                         counted as unconfirmed: the collector may have stored them (further ones are counted)",
                        failure.reason
                    );
                }
                self.queue.finish_batch(|s| s.unconfirmed_spans += spans);
            }
            kind => {
                if !self.warned_gave_up {
                    self.warned_gave_up = true;
                    let what = if kind == FailureKind::WrongProtocol {
                        format!("wrong port or protocol? {} (not retried)", failure.reason)
                    } else if kind.retryable() {
                        format!("{} (retried for {retried_for:?})", failure.reason)
                    } else {
                        format!("{} (not retried)", failure.reason)
                    };
                    message!(
                self.settings.quiet,
                        "ringtrace: OTLP export to {endpoint} gave up on {spans} spans: {what} (further losses are counted)"
                    );
                }
                self.queue.finish_batch(|s| s.failed_spans += spans);
            }
        }
    }

    /// A random wait between half and all of `backoff`.
    fn jitter(&mut self, backoff: Duration) -> Duration {
        let mut x = self.jitter_state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.jitter_state = x;
        let fraction = 0.5 + (x >> 11) as f64 / (1u64 << 53) as f64 / 2.0;
        backoff.mul_f64(fraction)
    }

    /// The request body: the resource with the loss counters, the batch's spans, and a
    /// `ringtrace.loss` span when losses grew since the last one.
    fn request(&mut self, batch: &Batch) -> Vec<u8> {
        let stats = self.queue.stats();
        let info = batch.resource.clone().unwrap_or_else(|| ResourceInfo {
            identity: ringtrace_core::Identity {
                node: "unknown-host".into(),
                daemon: "unknown-daemon".into(),
            },
            pid: std::process::id(),
            stats: Stats::default(),
        });
        let resource = encode::resource_with(&info, counter_attributes(&stats));
        let mut report = Vec::new();
        let otlp_losses =
            (stats.dropped_spans, stats.failed_spans, stats.rejected_spans, stats.unconfirmed_spans);
        let d = &info.stats;
        let drain_losses = (d.dropped_spans, d.dropped_closes, d.dropped_events, d.dropped_updates);
        if (otlp_losses, drain_losses) != self.reported_losses {
            self.reported_losses = (otlp_losses, drain_losses);
            let rejection = self.queue.lock().rejection.clone();
            wire::push_span(&self.loss_span(&stats, d, rejection), &mut report);
        }
        let chunks =
            batch.chunks.iter().map(|c| c.bytes.as_slice()).chain(std::iter::once(report.as_slice()));
        wire::request(&resource, &self.scope, chunks)
    }

    /// A span that makes losses visible in a trace viewer: its attributes are the counters.
    fn loss_span(&mut self, stats: &OtlpStats, drain: &Stats, rejection: Option<String>) -> otlp::Span {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let mut attributes: Vec<KeyValue> = counter_attributes(stats).collect();
        let sat = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        attributes.extend([
            KeyValue::int("ringtrace.dropped_spans", sat(drain.dropped_spans)),
            KeyValue::int("ringtrace.dropped_closes", sat(drain.dropped_closes)),
            KeyValue::int("ringtrace.dropped_events", sat(drain.dropped_events)),
            KeyValue::int("ringtrace.dropped_updates", sat(drain.dropped_updates)),
        ]);
        let message = match &rejection {
            Some(r) => format!("ringtrace lost spans; the collector said: {r}"),
            None => "ringtrace lost spans".into(),
        };
        if let Some(r) = rejection {
            attributes.push(KeyValue::string(REJECTION_ATTRIBUTE, r));
        }
        otlp::Span {
            trace_id: self.ids.trace_id().to_bytes().to_vec(),
            span_id: self.ids.span_id().to_bytes().to_vec(),
            flags: 0x101,
            name: crate::sink::LOSS_SPAN_NAME.into(),
            kind: otlp::SpanKind::Internal as i32,
            start_time_unix_nano: now,
            end_time_unix_nano: now,
            attributes,
            status: Some(otlp::Status { message, code: otlp::StatusCode::Error as i32 }),
            ..Default::default()
        }
    }
}

/// The attribute of the loss span that holds the collector's latest reason for refusing spans.
pub const REJECTION_ATTRIBUTE: &str = "ringtrace.otlp_rejection";

/// What a failed attempt says about the collector.
fn condition(f: &Failure) -> Condition {
    let r = f.reason.clone();
    match f.kind {
        FailureKind::Unreachable => Condition::Unreachable(r),
        FailureKind::Timeout => Condition::Slow(r),
        FailureKind::Broken => Condition::Broken(r),
        FailureKind::Unavailable | FailureKind::Rejected | FailureKind::Permanent => Condition::Rejecting(r),
        FailureKind::WrongProtocol => Condition::WrongProtocol(r),
    }
}

/// The exporter's counters as resource attributes.
pub(crate) fn counter_attributes(s: &OtlpStats) -> impl Iterator<Item = KeyValue> {
    let sat = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    [
        ("ringtrace.otlp_exported_spans", s.exported_spans),
        ("ringtrace.otlp_dropped_spans", s.dropped_spans),
        ("ringtrace.otlp_failed_spans", s.failed_spans),
        ("ringtrace.otlp_rejected_spans", s.rejected_spans),
        ("ringtrace.otlp_unconfirmed_spans", s.unconfirmed_spans),
    ]
    .into_iter()
    .map(move |(k, v)| KeyValue::int(k, sat(v)))
}
