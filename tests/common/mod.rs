//! Test support: a sink that keeps the parts of each span the tests check, the name by which a
//! test that re-executes this test binary selects itself, and the two collectors with the macro
//! that runs one test body against each.

use std::sync::{Arc, Mutex};

use ringtrace::{FnSink, SpanData, Value};

/// The parts of a span the tests check.
#[derive(Debug, Clone)]
pub struct Seen {
    pub trace: ringtrace::TraceId,
    pub span: ringtrace::SpanId,
    pub parent: Option<ringtrace::SpanId>,
    pub name: &'static str,
    pub i: Option<u64>,
    pub thread: u64,
    pub unclosed: bool,
    pub request: Option<String>,
    pub events: usize,
}

pub type Store = Kept<Seen>;

/// What a `collecting_with` sink kept of each span, in export order.
pub type Kept<T> = Arc<Mutex<Vec<T>>>;

/// A sink that keeps `keep(span)` of every span it is handed, and the store it keeps them in.
// The sink's `impl FnMut` type cannot be named by a type alias on stable Rust.
#[allow(clippy::type_complexity)]
pub fn collecting_with<T: Send + 'static>(
    keep: impl Fn(&SpanData) -> T + Send + 'static,
) -> (Kept<T>, FnSink<impl FnMut(&[SpanData], &ringtrace::ResourceInfo) + Send + 'static>) {
    let store: Arc<Mutex<Vec<T>>> = Arc::default();
    let s = store.clone();
    let sink = FnSink(move |batch: &[SpanData], _: &ringtrace::ResourceInfo| {
        s.lock().unwrap().extend(batch.iter().map(&keep));
    });
    (store, sink)
}

pub fn collecting() -> (Store, FnSink<impl FnMut(&[SpanData], &ringtrace::ResourceInfo) + Send + 'static>) {
    collecting_with(|d| Seen {
        trace: d.trace_id,
        span: d.span_id,
        parent: d.parent_span_id,
        name: d.meta.name(),
        i: match d.field("i") {
            Some(Value::U64(v)) => Some(*v),
            Some(Value::I64(v)) => Some(*v as u64),
            _ => None,
        },
        thread: d.thread_id,
        unclosed: d.unclosed,
        request: d.request_id.as_deref().map(str::to_owned),
        events: d.events.len(),
    })
}

/// The name the test harness lists the test `test` of module `module` under, for `--exact` when a
/// test runs this test binary again as a child process: `module` is the caller's `module_path!()`,
/// which starts with this test crate's name; the harness names tests without it.
pub fn test_name(module: &str, test: &str) -> String {
    let (_crate, path) = module.split_once("::").expect("a module of the test crate");
    format!("{path}::{test}")
}

/// Checks that pausing `guard`'s collector, installed as `subscriber`, disables its callsites (a
/// paused `info_span!` is `Span::none()`, as for a disabled callsite), that resuming enables them
/// again, and that a span open across the pause still records its close; `store` is the
/// collector's `collecting()` sink.
pub fn pausing_disables_callsites(
    subscriber: impl tracing::Subscriber + Send + Sync + 'static,
    guard: ringtrace::Guard,
    store: &Store,
) {
    fn work() -> tracing::Span {
        tracing::info_span!("work")
    }
    let handle = guard.handle();
    tracing::subscriber::with_default(subscriber, || {
        let across = work();
        assert!(!across.is_disabled());
        handle.pause();
        assert!(work().is_disabled(), "a paused collector makes no span");
        assert!(!tracing::enabled!(tracing::Level::ERROR), "nothing is enabled while paused");
        drop(across);
        handle.resume();
        assert!(!work().is_disabled(), "resuming enables the callsite again");
    });
    let stats = guard.shutdown().unwrap();
    assert_eq!(stats.recorded_spans, 2, "{stats}");
    assert!(store.lock().unwrap().iter().all(|s| !s.unclosed));
}

/// The two ringtrace collectors: the layer in a registry, and the standalone subscriber.
#[derive(Debug, Clone, Copy)]
pub enum Collector {
    Layer,
    Standalone,
}

/// Both collectors, for tests that hold for each.
pub const BOTH: [Collector; 2] = [Collector::Layer, Collector::Standalone];

impl Collector {
    /// The collector whose name `case` ends with (`…layer`, `…subscriber`).
    pub fn named(case: &str) -> Self {
        match case {
            c if c.ends_with("layer") => Collector::Layer,
            c if c.ends_with("subscriber") => Collector::Standalone,
            other => panic!("unknown case {other}"),
        }
    }

    /// Builds this collector from `builder`, as a dispatcher to install, and its guard.
    pub fn start(self, builder: ringtrace::Builder) -> (tracing::Dispatch, ringtrace::Guard) {
        use tracing_subscriber::prelude::*;
        match self {
            Collector::Layer => {
                let (layer, guard) = builder.build().unwrap();
                (tracing::Dispatch::new(tracing_subscriber::registry().with(layer)), guard)
            }
            Collector::Standalone => {
                let (subscriber, guard) = builder.build_subscriber().unwrap();
                (tracing::Dispatch::new(subscriber), guard)
            }
        }
    }
}

/// Runs each listed test body, a `fn(Collector)` of the calling module, once per collector: as
/// `layer::<name>` (the layer in a registry) and `subscriber::<name>` (the standalone
/// subscriber), as ringbuf's `src/tests/` runs one suite over every ring type. A body left out of
/// the list is dead code, which the compiler reports.
macro_rules! for_both_collectors {
    ($($test:ident),+ $(,)?) => {
        mod layer {
            $(
                #[test]
                fn $test() {
                    super::$test($crate::common::Collector::Layer)
                }
            )+
        }
        mod subscriber {
            $(
                #[test]
                fn $test() {
                    super::$test($crate::common::Collector::Standalone)
                }
            )+
        }
    };
}
pub(crate) use for_both_collectors;
