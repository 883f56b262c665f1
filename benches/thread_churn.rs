//! Thread churn: what a short-lived thread costs the whole process, beyond the work it does.
//!
//! A unit of work records some spans, each with an event. Each round runs a number of units
//! under one configuration either each on a thread of its own (spawn, work, join: churn) or all
//! on one thread, then flushes, so the drain's and the writer's work is in the round. It reports
//! process CPU time (user + system of every thread, exited ones included:
//! `getrusage(RUSAGE_SELF)`) and wall time per unit, as medians over alternated rounds. The
//! churn cost is churn minus one thread; the figure in brackets is what ringtrace adds to the
//! churn cost of a thread with no subscriber.
//!
//! `cargo bench --bench thread_churn` — optional arguments: `-- <rounds> <units per round>
//! <spans per unit> [config]`; a config (`NoSubscriber`, `Layer`, `Standalone`) runs the churn of
//! that one alone, for a profiler.

use std::time::Instant;

use tracing_subscriber::prelude::*;

/// Process CPU time (user + system, all threads), in nanoseconds.
fn process_cpu_ns() -> u64 {
    // SAFETY: `getrusage` writes into the zeroed struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    ns(usage.ru_utime) + ns(usage.ru_stime)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Config {
    /// No subscriber: what a thread costs anyway.
    NoSubscriber,
    /// The registry with `RingLayer`, recording to disk.
    Layer,
    /// `RingSubscriber`, recording to disk.
    Standalone,
}

const CONFIGS: [Config; 3] = [Config::NoSubscriber, Config::Layer, Config::Standalone];

/// One round: wall and CPU nanoseconds per thread.
fn round(config: Config, threads: u64, spans: u64, churn: bool, dir: &std::path::Path) -> (f64, f64) {
    let _ = std::fs::remove_dir_all(dir);
    let builder = || ringtrace::Builder::new().node("bench").daemon("churn").recording_dir(dir);
    let (dispatch, guard) = match config {
        Config::NoSubscriber => (tracing::Dispatch::none(), None),
        Config::Layer => {
            let (layer, guard) = builder().build().unwrap();
            (tracing::Dispatch::new(tracing_subscriber::registry().with(layer)), Some(guard))
        }
        Config::Standalone => {
            let (subscriber, guard) = builder().build_subscriber().unwrap();
            (tracing::Dispatch::new(subscriber), Some(guard))
        }
    };
    let (cpu, wall) = (process_cpu_ns(), Instant::now());
    let work = move |i: u64| {
        for _ in 0..spans {
            let _s = tracing::info_span!("short", i).entered();
            tracing::info!("lived briefly");
        }
    };
    if churn {
        for i in 0..threads {
            let dispatch = dispatch.clone();
            std::thread::spawn(move || tracing::dispatcher::with_default(&dispatch, || work(i)))
                .join()
                .unwrap();
        }
    } else {
        // The same work on one thread that lives through the round.
        let dispatch = dispatch.clone();
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || (0..threads).for_each(work));
        })
        .join()
        .unwrap();
    }
    if let Some(g) = &guard {
        g.flush().unwrap();
    }
    let (wall, cpu) = (wall.elapsed().as_nanos() as f64, (process_cpu_ns() - cpu) as f64);
    if let Some(g) = guard {
        let stats = g.shutdown().unwrap();
        assert_eq!(stats.recorded_spans + stats.dropped_spans, threads * spans, "{stats}");
        if stats.dropped_spans > 0 {
            eprintln!("{config:?} (churn: {churn}): the ring overflowed: {stats}");
        }
    }
    (wall / threads as f64, cpu / threads as f64)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let rounds = args.first().copied().unwrap_or(9);
    let threads = args.get(1).copied().unwrap_or(5_000);
    let spans = args.get(2).copied().unwrap_or(1);
    let dir = std::env::temp_dir().join(format!("ringtrace-bench-churn-{}", std::process::id()));
    let only = std::env::args().skip(1).find(|a| a.parse::<u64>().is_err() && !a.starts_with('-'));
    if let Some(name) = only {
        let config = *CONFIGS.iter().find(|c| format!("{c:?}") == name).expect("a config name");
        for _ in 0..rounds {
            let (wall, cpu) = round(config, threads, spans, true, &dir);
            println!("{config:?}: wall {:.1} µs/thread, CPU {:.1} µs/thread", wall / 1e3, cpu / 1e3);
        }
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let cases: Vec<(Config, bool)> = CONFIGS.iter().flat_map(|&c| [(c, true), (c, false)]).collect();
    for &(c, churn) in &cases {
        round(c, threads / 10, spans, churn, &dir); // warm-up
    }
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for r in 0..rounds {
        // Rotate the order, so no case always runs after the same one.
        for k in 0..cases.len() {
            let i = (k + r as usize) % cases.len();
            let (w, c) = round(cases[i].0, threads, spans, cases[i].1, &dir);
            wall[i].push(w);
            cpu[i].push(c);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let med = |v: &mut Vec<f64>| median(v) / 1e3;
    println!(
        "thread churn: {rounds} alternated rounds; {threads} units of work ({spans} spans with an event each), \
         each on a thread of its own or all on one thread; medians, µs per unit"
    );
    println!(
        "{:<14} {:>12} {:>12} {:>12} {:>12} {:>16}",
        "config", "CPU, churn", "CPU, 1 thr", "wall, churn", "wall, 1 thr", "churn CPU cost"
    );
    let mut base = 0.0;
    for (k, c) in CONFIGS.iter().enumerate() {
        let (cc, cl) = (med(&mut cpu[2 * k]), med(&mut cpu[2 * k + 1]));
        let (wc, wl) = (med(&mut wall[2 * k]), med(&mut wall[2 * k + 1]));
        if k == 0 {
            base = cc - cl;
        }
        println!(
            "{:<14} {:>12.1} {:>12.1} {:>12.1} {:>12.1} {:>9.1} ({:+.1})",
            format!("{c:?}"),
            cc,
            cl,
            wc,
            wl,
            cc - cl,
            cc - cl - base
        );
    }
}
