//! Span builders shared by the view tests (`views_*`).

use ringtrace_analysis::{Dataset, Process, Span, SpanId, TraceId};

/// Nanoseconds of the first span.
pub const T0: u64 = 1_700_000_000_000_000_000;

/// A span of trace `trace` on `node`/`daemon` in `process`, times in ns after [`T0`].
#[allow(clippy::too_many_arguments)]
pub fn span(
    trace: u128,
    id: u64,
    parent: Option<u64>,
    name: &str,
    (node, daemon, process): (&str, &str, usize),
    start: u64,
    end: u64,
) -> Span {
    Span {
        node: node.into(),
        daemon: daemon.into(),
        process,
        ..Span::new(
            TraceId::new(trace).unwrap(),
            SpanId::new(id).unwrap(),
            parent.map(|p| SpanId::new(p).unwrap()),
            name,
            T0 + start,
            T0 + end,
        )
    }
}

/// A dataset of `spans` with one process per distinct [`Span::process`] index.
pub fn dataset(spans: Vec<Span>) -> Dataset {
    let n = spans.iter().map(|s| s.process + 1).max().unwrap_or(0);
    let mut processes = vec![Process::default(); n];
    for s in &spans {
        processes[s.process] =
            Process { node: s.node.clone(), daemon: s.daemon.clone(), ..Process::default() };
    }
    Dataset { processes, spans }
}

/// A chain `depth` spans deep under a root: root `all` (id 1) [0, 1 ms), then `op` spans 2,
/// 3, … each the child of the previous, all [0, 1 µs): only the deepest has self time, and the
/// chain holds 0.1 % of the time, so a flame graph pruned at 1 % folds it into the root.
pub fn deep_chain(depth: u64) -> Dataset {
    let place = ("node-1", "svc", 0);
    let mut spans = vec![span(1, 1, None, "all", place, 0, 1_000_000)];
    spans.extend((0..depth).map(|i| span(1, i + 2, Some(i + 1), "op", place, 0, 1_000)));
    dataset(spans)
}

/// Runs `f` on a thread with the default 2 MiB test-thread stack, so that a recursive walk over
/// a deep tree fails the test whatever `RUST_MIN_STACK` says.
pub fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(2 << 20).spawn(f).unwrap().join().unwrap()
}
