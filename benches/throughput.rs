//! Sustained capture: two threads record spans at a fixed total rate while the drain writes the
//! local recording. For each rate it reports what was recorded, what was dropped, and the CPU
//! time per span of the recording threads, of the drain thread (with the assembler thread, which
//! exists only with sinks) and of the recording's writer thread, which exists only once a write
//! was slow (the drain writes the recording itself while the file system keeps up; from
//! `/proc/self/task/<tid>/schedstat`, Linux), and of the whole process
//! (`CLOCK_PROCESS_CPUTIME_ID`: every thread, from the first span until the recording is synced).
//!
//! Two recordings are compared at each rate, alternated: `raw`, the default (the drain copies
//! ring records to the `.rtrace` file; readers assemble), and `otlp`, the OTLP recording sink
//! (the drain assembles and encodes every span). `THROUGHPUT_FORMATS=raw` runs one of them;
//! `THROUGHPUT_EVENT=1` puts one `info!` event (one integer field) in every span.
//! `THROUGHPUT_DRAIN_MS=<ms>` makes the drain sleep that long between passes and
//! `THROUGHPUT_RING=<records>` sets the rings' size, so that records wait that long in the rings:
//! the backlog the drain works through (rate × sleep).
//! `THROUGHPUT_BACKLOG="<ms> <ms>…"` sweeps that backlog: a run for each drain sleep, at each
//! rate and for each recording, with rings of four times the records that wait (at least the
//! default 16,384), and a table whose first columns say how far behind the drain works.
//!
//! `cargo bench --bench throughput` — optional arguments: `-- <seconds per rate> <rates in M/s…>`.
//! Rates are paced per thread in batches of `BATCH` spans with a sleep between batches, so
//! within a batch a thread records as fast as it can.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tracing_subscriber::prelude::*;

const THREADS: u64 = 2;
/// Spans recorded between pacing sleeps, per thread.
const BATCH: u64 = 2048;

/// CPU time of this process's threads whose name starts with `prefix`, in nanoseconds.
fn threads_cpu_ns(prefix: &str) -> Option<u64> {
    let mut total = None;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim().starts_with(prefix) {
            let stat = std::fs::read_to_string(dir.join("schedstat")).ok()?;
            let ns: u64 = stat.split_whitespace().next()?.parse().ok()?;
            total = Some(total.unwrap_or(0) + ns);
        }
    }
    total
}

/// CPU time of the calling thread (`clock`: `libc::CLOCK_THREAD_CPUTIME_ID`) or of the whole
/// process (`libc::CLOCK_PROCESS_CPUTIME_ID`), in nanoseconds.
fn cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids are the kernel's.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The local recording compared.
#[derive(Clone, Copy, PartialEq)]
enum Format {
    /// The raw recording: ring records copied to disk.
    Raw,
    /// The OTLP recording sink: spans assembled and encoded by the drain.
    Otlp,
}

struct Outcome {
    produced: u64,
    recorded: u64,
    dropped: u64,
    app_ns_per_span: f64,
    drain_ns_per_span: f64,
    writer_ns_per_span: f64,
    process_ns_per_span: f64,
    achieved_per_s: f64,
}

fn run(format: Format, event: bool, rate_per_s: f64, seconds: f64, dir: &PathBuf) -> Outcome {
    let _ = std::fs::remove_dir_all(dir);
    let mut builder = ringtrace::Builder::new().node("bench").daemon("throughput");
    if let Ok(ms) = std::env::var("THROUGHPUT_DRAIN_MS") {
        builder = builder
            .drain_interval(Duration::from_millis(ms.parse().expect("THROUGHPUT_DRAIN_MS: milliseconds")));
    }
    if let Ok(n) = std::env::var("THROUGHPUT_RING") {
        builder = builder.ring_capacity(n.parse().expect("THROUGHPUT_RING: records"));
    }
    let builder = match format {
        Format::Raw => builder.recording_dir(dir),
        Format::Otlp => {
            let sink =
                ringtrace::RecordingSink::create(dir, "bench", "throughput", std::process::id()).unwrap();
            builder.no_recording().sink(sink)
        }
    };
    let process_before = cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID);
    let (layer, guard) = builder.build().unwrap();
    // Each run is a process of its own (see `main`), so the collector can be the global default,
    // as `ringtrace::init()` installs its collector (the registry and the layer here: the
    // figures in `benches/README.md` were taken with them).
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();
    let per_thread = rate_per_s / THREADS as f64;
    let total = (per_thread * seconds) as u64;
    let cpu_before = threads_cpu_ns("ringtrace-drain").unwrap_or(0);
    // The assembler thread (sinks only) starts with the collector: its whole CPU time is this run's.
    // The recording's writer thread, if a slow write made one, is this run's too.
    let start = Instant::now();
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                let cpu_before = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
                let begin = Instant::now();
                let mut i = 0u64;
                while i < total {
                    for _ in 0..BATCH {
                        let _s = tracing::info_span!("work", i = t * total + i).entered();
                        if event {
                            tracing::info!(i, "step");
                        }
                        i += 1;
                    }
                    // Sleep, not spin: a spinning producer would take the drain's core.
                    let due = Duration::from_secs_f64(i as f64 / per_thread);
                    if let Some(wait) = due.checked_sub(begin.elapsed()) {
                        std::thread::sleep(wait);
                    }
                }
                (i, cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) - cpu_before)
            })
        })
        .collect();
    let (produced, app_cpu) =
        handles.into_iter().map(|h| h.join().unwrap()).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let elapsed = start.elapsed().as_secs_f64();
    guard.flush().unwrap();
    let cpu = threads_cpu_ns("ringtrace-drain").map(|c| c - cpu_before).unwrap_or(0)
        + threads_cpu_ns("ringtrace-asm").unwrap_or(0);
    let writer_cpu = threads_cpu_ns("ringtrace-rec").unwrap_or(0);
    let stats = guard.shutdown().unwrap();
    let process_cpu = cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID) - process_before;
    let per_span = |ns: u64| ns as f64 / stats.recorded_spans.max(1) as f64;
    Outcome {
        produced,
        recorded: stats.recorded_spans,
        dropped: stats.dropped_spans,
        app_ns_per_span: per_span(app_cpu),
        drain_ns_per_span: per_span(cpu),
        writer_ns_per_span: per_span(writer_cpu),
        process_ns_per_span: per_span(process_cpu),
        achieved_per_s: produced as f64 / elapsed,
    }
}

/// The environment variable that makes this process one run: `<raw|otlp> <spans/s> <seconds>`.
const CHILD: &str = "THROUGHPUT_CHILD";

/// One run, in this process (a child of `main`): prints its row of the table.
fn child(spec: &str) {
    let mut parts = spec.split(' ');
    let format = match parts.next() {
        Some("raw") => Format::Raw,
        Some("otlp") => Format::Otlp,
        other => panic!("{CHILD}: raw or otlp, not {other:?}"),
    };
    let mut number = || parts.next().and_then(|s| s.parse::<f64>().ok()).expect("THROUGHPUT_CHILD: a number");
    let (rate, seconds) = (number(), number());
    let event = std::env::var("THROUGHPUT_EVENT").as_deref() == Ok("1");
    let dir = std::env::temp_dir().join(format!("ringtrace-throughput-{}", std::process::id()));
    let o = run(format, event, rate, seconds, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.recorded + o.dropped, o.produced, "every span recorded or counted");
    println!(
        "{}| {} | {:.1} M | {:.2} M | {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} |",
        std::env::var(SWEEP_ROW).unwrap_or_default(),
        if format == Format::Raw { "raw" } else { "otlp" },
        rate / 1e6,
        o.achieved_per_s / 1e6,
        o.produced,
        o.recorded,
        o.dropped,
        o.app_ns_per_span,
        o.drain_ns_per_span,
        o.writer_ns_per_span,
        o.process_ns_per_span,
    );
}

/// Every run in a new process of its own (this bench started again with `THROUGHPUT_CHILD`), so
/// that each installs its collector as the global default subscriber, as a service does: a
/// scoped dispatcher hands every span a clone of one reference-counted subscriber, and the two
/// threads contending for that count would be measured too, more the more they overlap.
fn main() {
    if let Ok(spec) = std::env::var(CHILD) {
        child(&spec);
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let seconds: f64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let mut rates: Vec<f64> =
        args.iter().skip(1).filter_map(|s| s.parse::<f64>().ok()).map(|m| m * 1e6).collect();
    if rates.is_empty() {
        rates = vec![0.5e6, 1e6, 1.5e6, 2e6, 3e6, 4e6];
    }
    let formats: Vec<&str> = match std::env::var("THROUGHPUT_FORMATS").as_deref() {
        Ok("raw") => vec!["raw"],
        Ok("otlp") => vec!["otlp"],
        _ => vec!["raw", "otlp"],
    };
    let exe = std::env::current_exe().expect("the bench's own path");
    let sweep: Vec<u64> = std::env::var("THROUGHPUT_BACKLOG")
        .map(|v| {
            v.split_whitespace()
                .map(|ms| ms.parse().expect("THROUGHPUT_BACKLOG: drain sleeps in milliseconds"))
                .collect()
        })
        .unwrap_or_default();
    let sweep_columns =
        if sweep.is_empty() { "" } else { "| drain sleep | ring (records) | about spans behind " };
    println!(
        "{sweep_columns}| recording | target spans/s | achieved spans/s | produced | recorded | dropped | app threads CPU ns/span | drain | writer | whole process |"
    );
    println!(
        "{}|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        if sweep.is_empty() { "" } else { "|---:|---:|---:" }
    );
    for rate in rates {
        // Without a sweep, one run at the drain's sleep and rings of the environment or defaults.
        let sleeps: Vec<Option<u64>> =
            if sweep.is_empty() { vec![None] } else { sweep.iter().copied().map(Some).collect() };
        for sleep in sleeps {
            for format in &formats {
                let mut command = std::process::Command::new(&exe);
                command.arg("--bench").env(CHILD, format!("{format} {rate} {seconds}"));
                if let Some(ms) = sleep {
                    // Two records a span (three with an event) wait `ms` in each thread's ring.
                    let behind = rate / THREADS as f64 * ms as f64 / 1e3;
                    let ring = ((4.0 * 3.0 * behind) as usize).next_power_of_two().max(16_384);
                    command
                        .env("THROUGHPUT_DRAIN_MS", ms.to_string())
                        .env("THROUGHPUT_RING", ring.to_string())
                        .env(SWEEP_ROW, format!("| {ms} ms | {ring} | {:.0} ", behind * THREADS as f64));
                }
                let status = command.status().expect("run a measurement");
                assert!(status.success(), "the {format} run at {rate} spans/s failed");
            }
        }
    }
}

/// The environment variable that gives a run of a backlog sweep its first columns.
const SWEEP_ROW: &str = "THROUGHPUT_SWEEP_ROW";
