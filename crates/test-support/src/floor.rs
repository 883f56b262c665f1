//! The least any span recorder must do, as a yardstick for ringtrace's own cost.
//!
//! [`FloorLayer`] (over the registry) and [`FloorSubscriber`] (a subscriber of its own) read the
//! clock when a span opens and when it closes, take its fields, and store an open and a close
//! record of 64 bytes; for an event they read the clock, take its fields (formatting the
//! message) and store one record. Nothing more: no span or trace ids for export, no table of open
//! spans, no reader of the records (they go round a 64-record buffer per thread that stays in L1
//! and is overwritten), no filter, no sampling, no request ids; only the first two integer fields
//! and the first 16 bytes of the first formatted field are kept.
//!
//! What they cost is a lower bound for any recorder that timestamps spans under `tracing` on the
//! same machine: the benches (`span_cost`, `ringtrace-bench-peers`) and the demo cluster
//! (`RINGTRACE_DEMO_TRACING=floor`) measure it beside ringtrace. They record nothing anyone can
//! read; do not install them in a service.

use std::cell::Cell;
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ringtrace_core::clock::Clock;
use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record as Values};
use tracing_core::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

const RECORDS: usize = 64;
const DEPTH: usize = 64;

/// One record: id, parent, callsite and time; two integer fields; a text field's start.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Rec {
    head: [u64; 4],
    values: [u64; 2],
    text: [u8; 16],
}

const EMPTY: Rec = Rec { head: [0; 4], values: [0; 2], text: [0; 16] };

/// This thread's records, entered spans and span ids.
struct Local {
    records: [Cell<Rec>; RECORDS],
    next: Cell<usize>,
    stack: [Cell<u64>; DEPTH],
    depth: Cell<usize>,
    /// The last span id handed out on this thread ([`FloorSubscriber`]); 0 before the first.
    last_id: Cell<u64>,
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            records: [const { Cell::new(EMPTY) }; RECORDS],
            next: Cell::new(0),
            stack: [const { Cell::new(0) }; DEPTH],
            depth: Cell::new(0),
            last_id: Cell::new(0),
        }
    };
}

/// Threads that have taken span ids so far: each takes ids from a range of its own.
static ID_THREADS: AtomicU64 = AtomicU64::new(0);

impl Local {
    fn store(&self, record: Rec) {
        let i = self.next.get();
        self.records[i % RECORDS].set(record);
        self.next.set(i.wrapping_add(1));
    }

    fn parent(&self) -> u64 {
        self.depth.get().checked_sub(1).map_or(0, |d| self.stack[d % DEPTH].get())
    }

    /// A span id unique in the process: the thread's range in the high 24 bits, a count below.
    fn new_id(&self) -> u64 {
        let mut id = self.last_id.get();
        if id == 0 {
            id = (ID_THREADS.fetch_add(1, Ordering::Relaxed) + 1) << 40;
        }
        id += 1;
        self.last_id.set(id);
        id
    }
}

/// Takes fields into a record: integers into `values`, the first formatted field into `text`.
struct Fields<'a> {
    rec: &'a mut Rec,
    values: usize,
    text: usize,
}

impl std::fmt::Write for Fields<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.rec.text.len() - self.text);
        self.rec.text[self.text..self.text + n].copy_from_slice(&s.as_bytes()[..n]);
        self.text += n;
        Ok(())
    }
}

impl Visit for Fields<'_> {
    fn record_u64(&mut self, _: &Field, value: u64) {
        if let Some(slot) = self.rec.values.get_mut(self.values) {
            *slot = value;
            self.values += 1;
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, value as u64);
    }

    fn record_debug(&mut self, _: &Field, value: &dyn std::fmt::Debug) {
        if self.text == 0 {
            let _ = write!(self, "{value:?}");
        }
    }
}

fn record(head: [u64; 4], fields: impl FnOnce(&mut Fields<'_>)) -> Rec {
    let mut rec = Rec { head, ..EMPTY };
    fields(&mut Fields { rec: &mut rec, values: 0, text: 0 });
    rec
}

fn callsite(meta: &Metadata<'_>) -> u64 {
    meta as *const Metadata<'_> as u64
}

/// Records a span's opening: its id, its parent (the innermost entered span), its callsite, the
/// time and the fields `fields` visits. Returns the record.
fn open(clock: &Clock, id: u64, meta: &Metadata<'_>, fields: impl FnOnce(&mut Fields<'_>)) -> Rec {
    let start = clock.raw();
    LOCAL.with(|local| {
        let head = [id, local.parent(), callsite(meta), start];
        let rec = record(head, fields);
        local.store(rec);
        rec
    })
}

/// Records an event: its span (the innermost entered), its callsite, the time and the fields
/// `fields` visits. Returns the record.
fn event(clock: &Clock, meta: &Metadata<'_>, fields: impl FnOnce(&mut Fields<'_>)) -> Rec {
    let time = clock.raw();
    LOCAL.with(|local| {
        let head = [0, local.parent(), callsite(meta), time];
        let rec = record(head, fields);
        local.store(rec);
        rec
    })
}

fn enter(id: u64) {
    LOCAL.with(|local| {
        let d = local.depth.get();
        local.stack[d % DEPTH].set(id);
        local.depth.set(d + 1);
    });
}

fn exit() {
    LOCAL.with(|local| local.depth.set(local.depth.get().saturating_sub(1)));
}

/// Records a span's end. Returns the record.
fn close(clock: &Clock, id: u64) -> Rec {
    let end = clock.raw();
    let rec = Rec { head: [id, end, 0, 0], ..EMPTY };
    LOCAL.with(|local| local.store(rec));
    rec
}

/// Bytes of every field's value a thread keeps ([`FloorLayer::all_fields`]) before it starts
/// over at the beginning of its buffer.
const FIELD_BYTES: usize = 64 * 1024;

thread_local! {
    /// Every field's value, as [`AllFields`] copies it (see [`FloorLayer::all_fields`]).
    static FIELDS: std::cell::RefCell<Kept> = const { std::cell::RefCell::new(Kept { buf: Vec::new(), file: None }) };
}

/// Copies every field into this thread's byte buffer: the field's address, then its value's
/// bytes (a number's eight, a string's, another value formatted with `Debug`).
struct AllFields<'a>(&'a mut Vec<u8>);

impl AllFields<'_> {
    fn field(&mut self, field: &Field) {
        self.0.extend_from_slice(&(field.name().as_ptr() as usize as u64).to_le_bytes());
    }
}

impl Visit for AllFields<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.field(field);
        self.0.extend_from_slice(&value.to_le_bytes());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, value as u64);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.record_u64(field, u64::from(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.field(field);
        self.0.extend_from_slice(value.as_bytes());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        use std::io::Write as _;
        self.field(field);
        let _ = write!(self.0, "{value:?}");
    }
}

/// A thread's kept bytes, and the file they go to ([`FloorLayer::to_file`]), if any: what is
/// left of them is written there when the thread exits.
struct Kept {
    buf: Vec<u8>,
    file: Option<Arc<File>>,
}

impl Drop for Kept {
    fn drop(&mut self) {
        if let (Some(file), false) = (&self.file, self.buf.is_empty()) {
            let _ = (&**file).write_all(&self.buf);
        }
    }
}

/// Copies the fields `record` visits into this thread's buffer ([`FloorLayer::all_fields`]).
/// With a `file` ([`FloorLayer::to_file`]), `rec` goes first, and a full buffer is written to
/// that file before it starts over (a thread keeps the first file it was given).
fn all_fields(file: Option<&Arc<File>>, rec: Option<(&Rec, usize)>, record: impl FnOnce(&mut dyn Visit)) {
    let _ = FIELDS.try_with(|fields| {
        let Ok(mut kept) = fields.try_borrow_mut() else { return };
        let kept = &mut *kept;
        if kept.file.is_none() {
            kept.file = file.cloned();
        }
        let buf = &mut kept.buf;
        if buf.capacity() == 0 {
            buf.reserve(FIELD_BYTES + 4096);
        }
        if buf.len() > FIELD_BYTES {
            if let Some(file) = &kept.file {
                // The floor's own loss is of no account: it measures cost, nothing reads it.
                let _ = (&**file).write_all(buf);
            }
            buf.clear();
        }
        if let Some((rec, len)) = rec {
            keep_record(buf, rec, len);
        }
        record(&mut AllFields(buf));
    });
}

/// Appends the first `len` of `rec`'s 64 bytes to `buf`.
fn keep_record(buf: &mut Vec<u8>, rec: &Rec, len: usize) {
    let mut bytes = [0u8; 64];
    for (i, v) in rec.head.iter().chain(&rec.values).enumerate() {
        bytes[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
    }
    bytes[48..].copy_from_slice(&rec.text);
    buf.extend_from_slice(&bytes[..len.min(64)]);
}

/// The least a layer recording spans and events adds to the registry (see the module).
#[derive(Debug, Default)]
pub struct FloorLayer {
    clock: Clock,
    all_fields: bool,
    /// Where its records and fields go ([`FloorLayer::to_file`]).
    file: Option<Arc<File>>,
}

impl FloorLayer {
    /// The least a layer does that keeps every field, not only the first two numbers and the
    /// start of the first formatted one: it copies each field's value (every `Debug` value
    /// formatted) into a per-thread buffer of 64 KiB that starts over when full, and the values
    /// a span records after it opened (`Span::record`) too; its records then take no field, so
    /// that each field is visited once. A recorder that exports every field can do no less.
    pub fn all_fields() -> Self {
        Self { all_fields: true, ..Self::default() }
    }

    /// The least a layer does that keeps every field on disk: [`all_fields`](Self::all_fields),
    /// with each open, close and event record (64 bytes) in the same per-thread buffer, which
    /// the application thread itself appends to `file` with one `write` each time it passes
    /// 64 KiB, and once more with the rest when the thread exits. No other thread, no
    /// hand-over, no ids for export: a lower bound for any recorder that writes what the
    /// demo's spans hold.
    pub fn to_file(file: File) -> Self {
        Self { all_fields: true, file: Some(Arc::new(file)), ..Self::default() }
    }

    /// Keeps the fields `record` visits (the function `all_fields`), after `rec` when they go to
    /// a file.
    fn keep(&self, rec: Option<&Rec>, record: impl FnOnce(&mut dyn Visit)) {
        let file = self.file.as_ref();
        all_fields(file, rec.filter(|_| file.is_some()).map(|r| (r, 64)), record);
    }
}

impl<S: Subscriber> Layer<S> for FloorLayer {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        if self.all_fields {
            // Every field is kept: the record takes none of them, so that they are visited
            // once, as a recorder keeping every field needs.
            let rec = open(&self.clock, id.into_u64(), attrs.metadata(), |_| {});
            self.keep(Some(&rec), |v| attrs.record(v));
        } else {
            open(&self.clock, id.into_u64(), attrs.metadata(), |f| attrs.record(f));
        }
    }

    fn on_record(&self, _: &Id, values: &Values<'_>, _: Context<'_, S>) {
        if self.all_fields {
            self.keep(None, |v| values.record(v));
        }
    }

    fn on_event(&self, e: &Event<'_>, _: Context<'_, S>) {
        if self.all_fields {
            let rec = event(&self.clock, e.metadata(), |_| {});
            self.keep(Some(&rec), |v| e.record(v));
        } else {
            event(&self.clock, e.metadata(), |f| e.record(f));
        }
    }

    fn on_enter(&self, id: &Id, _: Context<'_, S>) {
        enter(id.into_u64());
    }

    fn on_exit(&self, _: &Id, _: Context<'_, S>) {
        exit();
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        let rec = close(&self.clock, id.into_u64());
        if self.file.is_some() {
            self.keep(Some(&rec), |_| {});
        }
    }
}

/// The least a subscriber of its own (no registry) does to record spans and events (see the
/// module): span ids from a per-thread counter, then what [`FloorLayer`] does.
pub type FloorSubscriber = FloorSubscriberOf<false>;

/// The least a subscriber of its own does that keeps its spans on disk: [`FloorSubscriber`],
/// with what each record holds in a per-thread buffer that the application thread itself
/// appends to a file with one `write` each time it passes 64 KiB, and once more with the rest
/// when the thread exits. An open record keeps its id, parent, callsite, time and first two
/// integer fields (48 bytes), a close its id and time (16), an event all 64: a span with a field
/// takes 64 bytes, fewer than ringtrace's 88. No other thread, no hand-over, no ids for export,
/// no disk space reserved ahead, no `fsync`: near the least any `tracing` subscriber that keeps
/// its spans costs the whole process. Made by [`DiskFloorSubscriber::new`].
pub type DiskFloorSubscriber = FloorSubscriberOf<true>;

/// [`FloorSubscriber`] and [`DiskFloorSubscriber`]: the one keeps its records in a buffer that
/// stays in L1, the other also writes them to a file (`DISK`, so that the first's callbacks
/// hold no test for a file).
#[derive(Debug, Default)]
pub struct FloorSubscriberOf<const DISK: bool> {
    clock: Clock,
    /// Where its records go, when `DISK`.
    file: Option<Arc<File>>,
}

impl DiskFloorSubscriber {
    /// The floor subscriber writing its records to `file`.
    pub fn new(file: File) -> Self {
        Self { file: Some(Arc::new(file)), ..Self::default() }
    }
}

impl<const DISK: bool> FloorSubscriberOf<DISK> {
    /// Appends the first `len` bytes of `rec` to this thread's buffer, when the records go to
    /// a file.
    #[inline]
    fn keep(&self, rec: &Rec, len: usize) {
        if DISK {
            all_fields(self.file.as_ref(), Some((rec, len)), |_| {});
        }
    }
}

impl<const DISK: bool> Subscriber for FloorSubscriberOf<DISK> {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = LOCAL.with(Local::new_id);
        let rec = open(&self.clock, id, attrs.metadata(), |f| attrs.record(f));
        self.keep(&rec, 48);
        Id::from_u64(id)
    }

    fn record(&self, _: &Id, _: &Values<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, e: &Event<'_>) {
        let rec = event(&self.clock, e.metadata(), |f| e.record(f));
        self.keep(&rec, 64);
    }

    fn enter(&self, id: &Id) {
        enter(id.into_u64());
    }

    fn exit(&self, _: &Id) {
        exit();
    }

    fn try_close(&self, id: Id) -> bool {
        let rec = close(&self.clock, id.into_u64());
        self.keep(&rec, 16);
        true
    }
}

/// The least a subscriber of its own (no registry) does that keeps every field on disk: what
/// [`FloorLayer::to_file`] does, with span ids from a per-thread counter as [`FloorSubscriber`]
/// takes them, levels up to `INFO` (`ringtrace::init()`'s default) decided once per callsite,
/// and the current span known (`Span::current().record(..)` reaches it, as the demo uses it),
/// from the callsites of the thread's last 64 spans. The yardstick beside ringtrace's standalone
/// subscriber, which `init()` installs for such directives, as [`FloorLayer::to_file`] is beside
/// the registry and ringtrace's layer.
#[derive(Debug)]
pub struct DiskFieldsFloorSubscriber {
    clock: Clock,
    file: Arc<File>,
}

thread_local! {
    /// The callsites of this thread's last [`DEPTH`] spans ([`DiskFieldsFloorSubscriber`]), by
    /// span id modulo their number.
    static CALLSITES: [Cell<(u64, Option<&'static Metadata<'static>>)>; DEPTH] =
        const { [const { Cell::new((0, None)) }; DEPTH] };
}

impl DiskFieldsFloorSubscriber {
    /// The floor subscriber keeping every field, writing to `file`.
    pub fn new(file: File) -> Self {
        Self { clock: Clock::default(), file: Arc::new(file) }
    }

    /// Appends `rec` (all 64 bytes, as [`FloorLayer::to_file`] does) and the fields `record`
    /// visits to this thread's buffer.
    fn keep(&self, rec: Option<&Rec>, record: impl FnOnce(&mut dyn Visit)) {
        all_fields(Some(&self.file), rec.map(|r| (r, 64)), record);
    }
}

impl Subscriber for DiskFieldsFloorSubscriber {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> tracing_core::subscriber::Interest {
        if self.enabled(meta) {
            tracing_core::subscriber::Interest::always()
        } else {
            tracing_core::subscriber::Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        *meta.level() <= tracing_core::Level::INFO
    }

    fn max_level_hint(&self) -> Option<tracing_core::LevelFilter> {
        Some(tracing_core::LevelFilter::INFO)
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = LOCAL.with(Local::new_id);
        let rec = open(&self.clock, id, attrs.metadata(), |_| {});
        self.keep(Some(&rec), |v| attrs.record(v));
        CALLSITES.with(|c| c[id as usize % DEPTH].set((id, Some(attrs.metadata()))));
        Id::from_u64(id)
    }

    fn record(&self, _: &Id, values: &Values<'_>) {
        self.keep(None, |v| values.record(v));
    }

    fn current_span(&self) -> tracing_core::span::Current {
        let id = LOCAL.with(Local::parent);
        match CALLSITES.with(|c| c[id as usize % DEPTH].get()) {
            (known, Some(meta)) if known == id && id != 0 => {
                tracing_core::span::Current::new(Id::from_u64(id), meta)
            }
            _ => tracing_core::span::Current::none(),
        }
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, e: &Event<'_>) {
        let rec = event(&self.clock, e.metadata(), |_| {});
        self.keep(Some(&rec), |v| e.record(v));
    }

    fn enter(&self, id: &Id) {
        enter(id.into_u64());
    }

    fn exit(&self, _: &Id) {
        exit();
    }

    fn try_close(&self, id: Id) -> bool {
        let rec = close(&self.clock, id.into_u64());
        self.keep(Some(&rec), |_| {});
        true
    }
}

/// Installs the registry, an `INFO` level filter (`ringtrace::init()`'s default) and a
/// [`FloorLayer`] as the global default subscriber: the layer stack, with the floor in
/// ringtrace's place.
pub fn install() -> Result<(), tracing_subscriber::util::TryInitError> {
    install_layer(FloorLayer::default())
}

/// [`install`] with `layer` (such as [`FloorLayer::all_fields`]) as the floor.
pub fn install_layer(layer: FloorLayer) -> Result<(), tracing_subscriber::util::TryInitError> {
    use tracing_subscriber::prelude::*;
    let level = tracing_subscriber::filter::Targets::new().with_default(tracing_core::Level::INFO);
    tracing_subscriber::registry().with(level).with(layer).try_init()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registry-free floor keeping every field writes each enabled span's fields to its file
    /// (when the thread exits, with what its buffer holds), and nothing of a disabled one.
    #[test]
    fn the_disk_fields_floor_subscriber_writes_every_enabled_field() {
        let dir = std::env::temp_dir().join(format!("ringtrace-floor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("floor");
        let subscriber = DiskFieldsFloorSubscriber::new(File::create(&path).unwrap());
        std::thread::spawn(move || {
            tracing::subscriber::with_default(subscriber, || {
                let span = tracing::info_span!("kept", text = "needle-1234", later = tracing::field::Empty);
                span.in_scope(|| {
                    tracing::Span::current().record("later", "needle-5678");
                    tracing::info!(said = "needle-9012", "event");
                });
                tracing::debug_span!("disabled", text = "needle-3456").in_scope(|| {});
            });
        })
        .join()
        .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let has = |needle: &str| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
        assert!(has("needle-1234") && has("needle-5678") && has("needle-9012"));
        assert!(!has("needle-3456"), "a span above INFO is not kept");
    }

    /// The floor really stores what it is said to: a span's open record carries its parent,
    /// its fields and a start no later than the close record's end.
    #[test]
    fn floor_records_parents_fields_and_times() {
        let dispatch = tracing::Dispatch::new(FloorSubscriber::default());
        tracing::dispatcher::with_default(&dispatch, || {
            let outer = tracing::info_span!("outer", a = 7u64, b = -2i64, c = 9u64);
            let outer_id = outer.id().unwrap().into_u64();
            let _e = outer.enter();
            let inner = tracing::info_span!("inner");
            let inner_id = inner.id().unwrap().into_u64();
            tracing::info!("a message longer than sixteen bytes");
            drop(inner);
            LOCAL.with(|local| {
                let n = local.next.get();
                let rec = |back: usize| local.records[(n - back) % RECORDS].get();
                let (open_outer, open_inner, ev, close_inner) = (rec(4), rec(3), rec(2), rec(1));
                assert_eq!(open_outer.head[0], outer_id);
                assert_eq!(open_outer.values, [7, (-2i64) as u64], "the first two integers");
                assert_eq!(open_inner.head[..2], [inner_id, outer_id]);
                assert_eq!(ev.head[1], outer_id, "the event's span is the entered one");
                assert_eq!(&ev.text, b"a message longer");
                assert_eq!(close_inner.head[0], inner_id);
                assert!(open_inner.head[3] <= close_inner.head[1]);
            });
        });
    }

    /// The all-fields floor keeps every field's value, the ones recorded later included.
    #[test]
    fn the_all_fields_floor_keeps_every_value() {
        use tracing_subscriber::prelude::*;
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(FloorLayer::all_fields()));
        tracing::dispatcher::with_default(&dispatch, || {
            FIELDS.with(|f| f.borrow_mut().buf.clear());
            let addr = std::net::Ipv4Addr::new(10, 0, 0, 7);
            let span = tracing::info_span!("io", n = 5u64, peer = %addr, path = "/data/b", late = tracing::field::Empty);
            span.record("late", 77u64);
            tracing::info!(parent: &span, "a message");
            let text = FIELDS.with(|f| String::from_utf8_lossy(&f.borrow().buf).into_owned());
            for value in ["10.0.0.7", "/data/b", "a message"] {
                assert!(text.contains(value), "{value} in {text:?}");
            }
            let bytes = FIELDS.with(|f| f.borrow().buf.clone());
            for n in [5u64, 77] {
                assert!(bytes.windows(8).any(|w| w == n.to_le_bytes()), "{n}");
            }
        });
    }

    /// Runs 5,000 spans with a `marker` field on a thread of their own under the subscriber
    /// `make` returns for a file, then returns what the file holds and the spans' ids.
    fn spans_to_disk(
        name: &str,
        make: impl FnOnce(std::fs::File) -> tracing::Dispatch,
    ) -> (Vec<u8>, Vec<u64>) {
        let path =
            std::env::temp_dir().join(format!("ringtrace-floor-test-{name}-{}.floor", std::process::id()));
        let dispatch = make(std::fs::File::create(&path).unwrap());
        let ids = std::thread::spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
                (0..5_000u64)
                    .map(|i| {
                        let span = tracing::info_span!("disk", marker = 0x000F_1007_0000 + i);
                        span.id().unwrap().into_u64()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .join()
        .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        (bytes, ids)
    }

    /// `bytes` hold at least `per_span` bytes for each of 5,000 spans, the `marker` values of
    /// the first, middle and last, and the last span's id, written when its thread exited.
    fn assert_written(bytes: &[u8], ids: &[u64], per_span: usize) {
        assert!(bytes.len() >= 5_000 * per_span, "{} bytes", bytes.len());
        let has = |v: u64| bytes.windows(8).any(|w| w == v.to_le_bytes());
        for i in [0, 2_500, 4_999] {
            assert!(has(0x000F_1007_0000 + i), "field value {i}");
        }
        assert!(has(ids[4_999]), "the last span's id, written when its thread exited");
    }

    /// The disk floor writes its records and fields: those of a thread that filled its buffer
    /// more than once, and the rest when it exits.
    #[test]
    fn the_disk_floor_writes_records_and_fields_to_its_file() {
        use tracing_subscriber::prelude::*;
        let (bytes, ids) = spans_to_disk("layer", |file| {
            tracing::Dispatch::new(tracing_subscriber::registry().with(FloorLayer::to_file(file)))
        });
        // Each span: an open and a close record of 64 bytes, and its field's address and value.
        assert_written(&bytes, &ids, 64 + 64 + 16);
    }

    /// The floor subscriber writing to a file writes what each span's open record (with its
    /// field) and close record hold: 64 bytes a span.
    #[test]
    fn the_disk_floor_subscriber_writes_its_records_to_its_file() {
        let (bytes, ids) =
            spans_to_disk("subscriber", |file| tracing::Dispatch::new(DiskFloorSubscriber::new(file)));
        assert_written(&bytes, &ids, 48 + 16);
        assert_eq!(bytes.len(), 5_000 * 64);
    }

    #[test]
    fn span_ids_differ_across_threads() {
        let ids = || LOCAL.with(|l| [l.new_id(), l.new_id()]);
        let here = ids();
        let there = std::thread::spawn(ids).join().unwrap();
        assert_eq!(here[1], here[0] + 1);
        assert_ne!(here[0] >> 40, there[0] >> 40);
    }
}
