//! Panics recorded on the spans they unwind through.
//!
//! A panic hook, installed once per process when the first collector starts, keeps the panic's
//! message, location and backtrace (when `RUST_BACKTRACE` asks for one) for the panicking
//! thread, then calls the hook installed before it, so the application's own hook (or the
//! default message) still runs. Each span the unwinding then closes gets, before its close, an
//! `exception` event as the OpenTelemetry semantic conventions describe it (`exception.type`,
//! `exception.message`, `exception.stacktrace`, at `ERROR` level) and status error with the
//! panic's message.
//!
//! A hook installed by the application *after* ringtrace starts replaces this one unless it
//! calls the hook it found (`std::panic::take_hook`); spans then close without the exception.

use std::cell::RefCell;
use std::sync::{Arc, Once};

use ringtrace_core::SpanId;
use tracing_core::callsite::Callsite;
use tracing_core::field::{FieldSet, Visit};
use tracing_core::{Interest, Kind, Level, Metadata};

use crate::local::LocalRing;
use crate::shared::Shared;

/// What the hook kept of a panic.
#[derive(Debug)]
struct PanicReport {
    message: String,
    /// Where it panicked: file, line and column.
    location: Option<(String, u32, u32)>,
    /// A captured backtrace, rendered.
    backtrace: Option<String>,
}

thread_local! {
    /// The thread's latest panic.
    static LATEST: RefCell<Option<Arc<PanicReport>>> = const { RefCell::new(None) };
}

struct ExceptionCallsite;

static EXCEPTION_CALLSITE: ExceptionCallsite = ExceptionCallsite;

const FIELDS: &[&str] = &[
    "exception.type",
    "exception.message",
    "exception.stacktrace",
    "code.filepath",
    "code.lineno",
    "code.column",
    "otel.status_code",
    "otel.status_message",
];

/// The callsite of the `exception` events: level `ERROR`, target `ringtrace::panic`.
static EXCEPTION: Metadata<'static> = Metadata::new(
    "exception",
    "ringtrace::panic",
    Level::ERROR,
    Some(file!()),
    Some(line!()),
    Some(module_path!()),
    FieldSet::new(FIELDS, tracing_core::identify_callsite!(&EXCEPTION_CALLSITE)),
    Kind::EVENT,
);

impl Callsite for ExceptionCallsite {
    fn set_interest(&self, _: Interest) {}
    fn metadata(&self) -> &Metadata<'_> {
        &EXCEPTION
    }
}

/// Installs the hook, once per process, in front of the hook installed before it.
pub(crate) fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            remember(info);
            previous(info);
            // The process aborts next: nothing else would write what the rings hold.
            if cfg!(panic = "abort") {
                crate::exit::shut_down_all();
            }
        }));
    });
}

fn remember(info: &std::panic::PanicHookInfo<'_>) {
    let payload = info.payload();
    let message = match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_owned(),
        (_, Some(s)) => s.clone(),
        _ => "Box<dyn Any>".to_owned(),
    };
    let location = info.location().map(|l| (l.file().to_owned(), l.line(), l.column()));
    let backtrace = std::backtrace::Backtrace::capture();
    let backtrace =
        (backtrace.status() == std::backtrace::BacktraceStatus::Captured).then(|| backtrace.to_string());
    let report = Arc::new(PanicReport { message, location, backtrace });
    let _ = LATEST.try_with(|latest| {
        if let Ok(mut latest) = latest.try_borrow_mut() {
            *latest = Some(report);
        }
    });
}

fn latest() -> Option<Arc<PanicReport>> {
    LATEST.try_with(|l| l.try_borrow().ok().and_then(|l| l.clone())).ok().flatten()
}

/// Visits the exception event's fields, in callsite order.
fn record_exception(report: &PanicReport, v: &mut dyn Visit) {
    let fields = EXCEPTION.fields();
    let mut each = |name: &str, value: &str| {
        if let Some(f) = fields.field(name) {
            v.record_str(&f, value);
        }
    };
    each("exception.type", "panic");
    each("exception.message", &report.message);
    if let Some(bt) = &report.backtrace {
        each("exception.stacktrace", bt);
    }
    if let Some((file, line, column)) = &report.location {
        each("code.filepath", file);
        for (name, n) in [("code.lineno", line), ("code.column", column)] {
            if let Some(f) = fields.field(name) {
                v.record_u64(&f, u64::from(*n));
            }
        }
    }
}

impl LocalRing {
    /// When the thread is unwinding from a panic the hook saw, pushes the panic onto `span`
    /// (about to close): an `exception` event and status error. Does nothing otherwise.
    #[cold]
    pub(crate) fn push_panic(&mut self, shared: &Shared, span: SpanId) {
        let Some(report) = latest() else { return };
        // Never reached through `tracing`'s registration: named for the drain and the ring
        // files here, before the first record that names it.
        shared.register_callsite(&EXCEPTION);
        self.push_event(shared, span, &EXCEPTION, |v| record_exception(&report, v));
        let message = match &report.location {
            Some((file, line, column)) => format!("panicked at {file}:{line}:{column}: {}", report.message),
            None => format!("panicked: {}", report.message),
        };
        self.push_update(span, |v| {
            let fields = EXCEPTION.fields();
            if let (Some(code), Some(text)) =
                (fields.field("otel.status_code"), fields.field("otel.status_message"))
            {
                v.record_str(&code, "error");
                v.record_str(&text, &message);
            }
        });
    }
}
