//! Reading a raw recording: its records replayed, pass by pass, through the assembly the drain
//! of the recording process would have run, so that a reader gets the very spans a live sink
//! would have been handed.
//!
//! A raw recording names callsites by the address they had in the recording process; the
//! reader rebuilds each from its callsite frame as `'static` `tracing` metadata, interned
//! process-wide by content, so that reading many files (or one file many times) adds each
//! distinct callsite once.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::io::Read;
use std::sync::{Arc, Mutex, OnceLock};

use ringtrace_core::raw::{
    self, CallsiteInfo, Frame, FrameReader, Names, RawError, RawRecord, SkipDamage, RECORD_SIZE,
};
use ringtrace_core::record::{Meta, Record};
use ringtrace_core::{Clock, Identity};
use tracing_core::callsite::Callsite;
use tracing_core::field::FieldSet;
use tracing_core::subscriber::Interest;
use tracing_core::{Kind, Metadata};

use super::assemble::Records;
use super::{Drain, IdHasher};
use crate::shared::Config;
use crate::sink::raw::set_counter;
use crate::sink::{Sink, SinkError};
use crate::span_data::{ResourceInfo, SpanData};
use crate::stats::Stats;

/// The process a raw recording comes from.
#[derive(Debug, Clone)]
pub struct RecordedProcess {
    /// Its identity, pid and counters: the recording's loss counters and the assembly's (the
    /// totals once the file is read).
    pub resource: ResourceInfo,
    /// Its other resource attributes (`service.instance.id` included), for
    /// [`encode::traces_data_of`](crate::encode::traces_data_of).
    pub attributes: Vec<(String, String)>,
}

/// What reading a raw recording found besides its spans.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Replay {
    /// The process, with its totals; `None` when the file holds no process frame.
    pub process: Option<RecordedProcess>,
    /// Frames read.
    pub frames: u64,
    /// Records that could not be decoded (damaged bytes, a callsite no frame defines): skipped.
    pub bad_records: u64,
    /// The first of them, with its frame and byte offset.
    pub first_bad_record: Option<String>,
    /// Damaged frames passed over (see [`replay`]): what they held is missing.
    pub bad_frames: u64,
    /// The first of them: its number, byte offset and damage.
    pub first_bad_frame: Option<String>,
    /// The collector shut down cleanly (an end frame): spans still open then are unclosed.
    /// Without it the process died, and open spans end at the last time recorded.
    pub ended: bool,
    /// Where the file was cut short (it ends inside a frame), if it was: what came before was
    /// read.
    pub cut: Option<Cut>,
}

/// A frame cut short at the end of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The frame's number (0-based).
    pub frame: u64,
    /// Its first byte.
    pub offset: u64,
    /// Its bytes the file holds.
    pub present: u64,
    /// Bytes missing.
    pub missing: u64,
}

/// Why a raw recording could not be read (to its end).
pub type ReplayError = RawError;

/// Spans one call of the callback gets at most.
const BATCH: usize = 4096;

/// Reads the raw recording `input`, handing its spans to `f` in batches with the process they
/// come from (its counters as known so far). A file cut short in its last frame (a crash
/// mid-write) is read up to the cut, which [`Replay::cut`] reports.
///
/// A damaged frame (an unknown kind, a payload that does not parse) is passed over and counted
/// in [`Replay::bad_frames`] when the frame after it reads whole and undamaged, which confirms
/// its length (`raw::SkipDamage`); so is a second process frame. What it held is missing
/// (records of a callsite it defined are then skipped records). Damage that leaves the next
/// frame's place unknown, or a frame that needs the process frame before any, stops reading
/// with an error that names the frame and byte offset (the damage that took the process frame,
/// if any); what was assembled before has been handed out.
pub fn replay(
    input: impl Read,
    f: &mut dyn FnMut(&[SpanData], &RecordedProcess),
) -> Result<Replay, ReplayError> {
    let mut reader = FrameReader::new(input)?;
    let mut state = State::default();
    let mut skip = SkipDamage::default();
    let stopped = reader.read_past_damage(&mut skip, |frame, frame_no, offset, skip| {
        match state.apply(frame, frame_no, offset, f) {
            Ok(()) => Ok(()),
            Err(Misplaced::Skip(what)) => {
                skip.note(RawError::Frame { frame: frame_no, offset, what });
                Ok(())
            }
            // Nothing can be read without the process frame: the damage that took it, if any,
            // is the error.
            Err(Misplaced::Stop(what)) => {
                Err(skip.first.take().unwrap_or(RawError::Frame { frame: frame_no, offset, what }))
            }
        }
    });
    let result = match stopped {
        Ok(None) => Ok(()),
        Ok(Some(RawError::Truncated { frame, offset, present, missing })) => {
            state.out.cut = Some(Cut { frame, offset, present, missing });
            Ok(())
        }
        Ok(Some(e)) | Err(e) => Err(e),
    };
    state.finish(f);
    state.out.frames = reader.frames();
    state.out.bad_frames = skip.skipped;
    state.out.first_bad_frame = skip.first.map(|e| e.to_string());
    result.map(|()| state.out)
}

/// A frame that read whole but does not fit where it stands.
enum Misplaced {
    /// Passed over, counted: a second process frame.
    Skip(String),
    /// Ends the reading: a frame that needs the process frame before it.
    Stop(String),
}

/// The reader's state while it replays one file.
#[derive(Default)]
struct State {
    out: Replay,
    names: FileNames,
    drain: Option<Drain>,
    kept: Arc<Mutex<Vec<SpanData>>>,
    threads: HashMap<u64, Arc<str>, BuildHasherDefault<IdHasher>>,
    records: Vec<Record>,
    /// Scratch: a records frame's records, as the ring held them.
    raw: Vec<RawRecord>,
    /// Records applied since the current pass began.
    pass_has_records: bool,
    /// The counters the recording process wrote last.
    counters: Stats,
    /// The latest time any record holds, in ticks: where open spans end when the process died.
    last_ticks: u64,
    end_ticks: Option<u64>,
}

impl State {
    /// Applies frame number `frame_no`, which starts at byte `offset`.
    fn apply(
        &mut self,
        frame: Frame<'_>,
        frame_no: u64,
        offset: u64,
        f: &mut dyn FnMut(&[SpanData], &RecordedProcess),
    ) -> Result<(), Misplaced> {
        match frame {
            Frame::Process(p) => {
                if self.drain.is_some() {
                    return Err(Misplaced::Skip("a second process frame".into()));
                }
                let identity = Identity { node: p.node.clone(), daemon: p.daemon.clone() };
                self.drain =
                    Some(offline_drain(identity.clone(), p.span_event_limit as usize, self.kept.clone()));
                let resource = ResourceInfo { identity, pid: p.pid, stats: Stats::default() };
                self.out.process = Some(RecordedProcess { resource, attributes: p.attributes });
            }
            Frame::Callsite(c) => {
                let meta = intern(&c);
                for (field, (address, _)) in meta.fields().iter().zip(&c.fields) {
                    self.names.names.insert((*address, field.name().len() as u32), field.name());
                }
                self.names.callsites.insert(c.address, meta);
            }
            Frame::Name { address, name } => {
                self.names.names.insert((address, name.len() as u32), intern_str(&name));
            }
            Frame::Thread { thread_id, name } => {
                self.threads.insert(thread_id, Arc::from(name));
            }
            Frame::Pass(anchor) => {
                self.end_pass(f);
                self.drain_mut()?.clock = Clock::from_anchor(anchor);
            }
            Frame::Records { thread_id, records, damage, .. } => {
                self.records(thread_id, records)?;
                // The rest of a damaged compact frame: counted as one record skipped.
                if let Some(what) = damage {
                    self.out.bad_records += 1;
                    let first = &mut self.out.first_bad_record;
                    first.get_or_insert_with(|| {
                        format!("the rest of frame {frame_no} at byte {offset} (thread {thread_id}): {what}")
                    });
                }
            }
            Frame::Counters(counters) => {
                for (name, value) in counters {
                    set_counter(&mut self.counters, &name, value);
                }
            }
            Frame::End { ticks } => {
                self.end_ticks = Some(ticks);
                self.out.ended = true;
            }
            Frame::Loss(loss) => {
                let marker = loss_span(&loss, frame_no);
                self.kept.lock().unwrap_or_else(|e| e.into_inner()).push(marker);
            }
        }
        Ok(())
    }

    fn drain_mut(&mut self) -> Result<&mut Drain, Misplaced> {
        self.drain.as_mut().ok_or_else(|| Misplaced::Stop("comes before the process frame".to_owned()))
    }

    fn records(&mut self, thread_id: u64, bytes: &[u8]) -> Result<(), Misplaced> {
        self.drain_mut()?;
        let thread_name = self.threads.get(&thread_id).cloned().unwrap_or_else(|| Arc::from(""));
        self.records.clear();
        self.raw.clear();
        self.raw.extend(bytes.chunks_exact(RECORD_SIZE).map(|chunk| {
            let mut b = [0u8; RECORD_SIZE];
            b.copy_from_slice(chunk);
            RawRecord(b)
        }));
        // Whole groups, as the drain decodes them: the field records of a damaged header are
        // skipped with it, never taken for the group before.
        let out = &mut self.out;
        raw::decode_groups(&self.raw, &self.names, &mut self.records, &mut |k, e| {
            out.bad_records += 1;
            if out.first_bad_record.is_none() {
                out.first_bad_record = Some(format!("record {k} of thread {thread_id}'s records: {e}"));
            }
        });
        for r in &self.records {
            if let Record::Open { ticks, .. } | Record::Close { ticks, .. } | Record::Event { ticks, .. } = *r
            {
                self.last_ticks = self.last_ticks.max(ticks);
            }
        }
        let records = std::mem::take(&mut self.records);
        if let Some(drain) = &mut self.drain {
            drain.apply_all(Records { a: &records, b: &[] }, thread_id, &thread_name);
        }
        self.records = records;
        self.pass_has_records = true;
        Ok(())
    }

    /// Ends the pass the records so far belong to, as the drain does after reading every ring.
    fn end_pass(&mut self, f: &mut dyn FnMut(&[SpanData], &RecordedProcess)) {
        if !std::mem::take(&mut self.pass_has_records) {
            return;
        }
        if let Some(drain) = &mut self.drain {
            drain.pass_once();
            drain.export_ready(false);
        }
        self.hand_out(f);
    }

    fn finish(&mut self, f: &mut dyn FnMut(&[SpanData], &RecordedProcess)) {
        self.end_pass(f);
        if let Some(drain) = &mut self.drain {
            drain.finish_at(Some(self.end_ticks.unwrap_or(self.last_ticks)));
        }
        // The last batch carries the totals, with or without spans.
        let handed = self.hand_out(f);
        if let (false, Some(process)) = (handed, &self.out.process) {
            f(&[], process);
        }
    }

    /// Hands the spans the assembly exported to `f`; returns whether there were any.
    fn hand_out(&mut self, f: &mut dyn FnMut(&[SpanData], &RecordedProcess)) -> bool {
        let spans = std::mem::take(&mut *self.kept.lock().unwrap_or_else(|e| e.into_inner()));
        let Some(process) = &mut self.out.process else { return false };
        if let Some(drain) = &self.drain {
            process.resource.stats = merged(&self.counters, drain.stats());
        }
        for batch in spans.chunks(BATCH) {
            f(batch, process);
        }
        !spans.is_empty()
    }
}

/// Names of the loss marker's fields.
static LOSS_FIELDS: [&str; 4] =
    ["ringtrace.lost_spans", "error.type", "otel.status_code", "otel.status_message"];
static LOSS_CALLSITE: Recovered = Recovered { meta: OnceLock::new() };
static LOSS_META: Metadata<'static> = Metadata::new(
    crate::sink::LOSS_SPAN_NAME,
    "ringtrace",
    tracing_core::Level::ERROR,
    None,
    None,
    None,
    FieldSet::new(&LOSS_FIELDS, tracing_core::identify_callsite!(&LOSS_CALLSITE)),
    Kind::SPAN,
);

/// The `ringtrace.loss` span (status error) that marks frames the recording process could not
/// write, as its OTLP recording would have held one; `n` makes its ids.
fn loss_span(loss: &raw::Loss, n: u64) -> SpanData {
    use crate::span_data::Value;
    let seed = ringtrace_core::hash::mix64(loss.start_unix_ns ^ n.rotate_left(32));
    let mut ids = ringtrace_core::ids::IdGenerator::new(seed, n);
    SpanData {
        trace_id: ids.trace_id(),
        span_id: ids.span_id(),
        parent_span_id: None,
        parent_is_remote: false,
        sampled: true,
        meta: &LOSS_META,
        start_unix_ns: loss.start_unix_ns,
        end_unix_ns: loss.end_unix_ns.max(loss.start_unix_ns),
        thread_id: 0,
        thread_name: Arc::from(""),
        fields: vec![
            (LOSS_FIELDS[0], Value::U64(loss.lost_spans)),
            (LOSS_FIELDS[1], Value::Str("recording_write_failed".into())),
            (LOSS_FIELDS[2], Value::Str("error".into())),
            (
                LOSS_FIELDS[3],
                Value::Str(format!("the recording lost {} spans: {}", loss.lost_spans, loss.error)),
            ),
        ],
        events: Vec::new(),
        links: Vec::new(),
        request_id: None,
        unclosed: false,
        dropped_events: 0,
    }
}

/// The recording's counters with the assembly's: spans recorded, unclosed and orphaned, events
/// over the limit and sampled out come from reading; losses from the recording process.
fn merged(recorded: &Stats, assembled: Stats) -> Stats {
    Stats {
        recorded_spans: assembled.recorded_spans,
        recorded_events: assembled.recorded_events,
        events_over_limit: assembled.events_over_limit,
        unclosed_spans: assembled.unclosed_spans,
        orphan_records: assembled.orphan_records,
        sampled_out: assembled.sampled_out,
        rings_in_use: 0,
        ..*recorded
    }
}

/// A drain with no rings and no thread, whose assembly the reader feeds.
fn offline_drain(identity: Identity, span_event_limit: usize, kept: Arc<Mutex<Vec<SpanData>>>) -> Drain {
    let config = Config {
        identity,
        ring_capacity: 1024,
        span_event_limit,
        max_open_spans: 1,
        targets: Default::default(),
        drain_interval: std::time::Duration::from_millis(1),
        batch_size: BATCH,
        quiet: true,
        sampler: crate::Sampler::AlwaysOn,
    };
    Drain::detached(config, vec![Box::new(Keep(kept))])
}

/// A sink that keeps what it is handed: the offline drain's, for the reader.
pub(super) struct Keep(pub(super) Arc<Mutex<Vec<SpanData>>>);

impl Sink for Keep {
    fn name(&self) -> &str {
        "keep"
    }

    fn export(&mut self, batch: &[SpanData], _: &ResourceInfo) -> Result<(), SinkError> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(batch);
        Ok(())
    }
}

/// The callsites one file defines, by address, and its field names, by address and length.
#[derive(Default)]
struct FileNames {
    callsites: HashMap<u64, Meta, BuildHasherDefault<IdHasher>>,
    names: HashMap<(u64, u32), &'static str, BuildHasherDefault<IdHasher>>,
}

impl Names for FileNames {
    fn callsite(&self, address: u64) -> Option<Meta> {
        self.callsites.get(&address).copied()
    }

    fn name(&self, address: u64, len: u32) -> Option<&'static str> {
        self.names.get(&(address, len)).copied()
    }
}

/// A callsite rebuilt from a recording.
struct Recovered {
    meta: OnceLock<Metadata<'static>>,
}

static NO_METADATA: Metadata<'static> = Metadata::new(
    "unknown",
    "ringtrace::replay",
    tracing_core::Level::INFO,
    None,
    None,
    None,
    FieldSet::new(&[], tracing_core::identify_callsite!(&NO_CALLSITE)),
    Kind::EVENT,
);
static NO_CALLSITE: Recovered = Recovered { meta: OnceLock::new() };

impl Callsite for Recovered {
    fn set_interest(&self, _: Interest) {}

    fn metadata(&self) -> &Metadata<'_> {
        // Set right after the callsite is made, before anyone can reach it.
        self.meta.get().unwrap_or(&NO_METADATA)
    }
}

/// The key of a callsite's content: everything but its address.
type CallsiteKey = (bool, u8, Option<u32>, String, String, Option<String>, Option<String>, Vec<String>);

/// `'static` metadata for the callsite `c` describes; one per distinct content, process-wide.
fn intern(c: &CallsiteInfo) -> Meta {
    static CALLSITES: OnceLock<Mutex<HashMap<CallsiteKey, Meta>>> = OnceLock::new();
    let key: CallsiteKey = (
        c.is_span,
        c.level,
        c.line,
        c.name.clone(),
        c.target.clone(),
        c.module_path.clone(),
        c.file.clone(),
        c.fields.iter().map(|(_, n)| n.clone()).collect(),
    );
    let mut callsites = CALLSITES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(meta) = callsites.get(&key) {
        return meta;
    }
    let fields: Vec<&'static str> = c.fields.iter().map(|(_, n)| intern_str(n)).collect();
    let fields: &'static [&'static str] = Box::leak(fields.into_boxed_slice());
    let callsite: &'static Recovered = Box::leak(Box::new(Recovered { meta: OnceLock::new() }));
    let meta = Metadata::new(
        intern_str(&c.name),
        intern_str(&c.target),
        raw::level_of(c.level).unwrap_or(tracing_core::Level::INFO),
        c.file.as_deref().map(intern_str),
        c.line,
        c.module_path.as_deref().map(intern_str),
        FieldSet::new(fields, tracing_core::identify_callsite!(callsite)),
        if c.is_span { Kind::SPAN } else { Kind::EVENT },
    );
    let _ = callsite.meta.set(meta);
    let meta: Meta = callsite.metadata();
    callsites.insert(key, meta);
    meta
}

/// A `'static` copy of `s`, one per distinct string, process-wide.
fn intern_str(s: &str) -> &'static str {
    static STRINGS: OnceLock<Mutex<std::collections::HashSet<&'static str>>> = OnceLock::new();
    let mut strings = STRINGS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = strings.get(s) {
        return s;
    }
    let s: &'static str = Box::leak(s.to_owned().into_boxed_str());
    strings.insert(s);
    s
}
