//! OTLP `TracesData` into the model, and the binary recording reader (varint-delimited frames).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, Read};
use std::path::Path;

use prost::Message;
use ringtrace_core::otlp::{self, any_value};
use ringtrace_core::{SpanId, TraceId};

use super::{Batch, Cut, Position, ReadError, ReadErrorKind, Truncation};
use crate::model::{Process, Span, SpanEvent, SpanKind, SpanLink, Status, Value};

/// The largest frame a recording may declare. A larger length prefix means a corrupt file, and
/// refusing it keeps memory bounded.
pub(crate) const MAX_FRAME_BYTES: u64 = 1 << 30;

const COUNTERS: [&str; 4] = [
    "ringtrace.dropped_spans",
    "ringtrace.dropped_events",
    "ringtrace.unclosed_spans",
    "ringtrace.propagation_malformed",
];

/// The processes of one file, found by their resource attributes (counters aside), so that the
/// frames of one process, each repeating its resource, make one [`Process`].
pub(crate) struct ProcessTable<'p> {
    source: &'p Path,
    processes: Vec<Process>,
    /// Process indices by the hash of their identity; equal hashes are told apart by comparing.
    by_identity: HashMap<u64, Vec<usize>>,
    /// Identity comparisons made so far, to test that finding a process stays cheap.
    #[cfg(test)]
    comparisons: usize,
}

impl<'p> ProcessTable<'p> {
    pub(crate) fn new(source: &'p Path) -> Self {
        Self {
            source,
            processes: Vec::new(),
            by_identity: HashMap::new(),
            #[cfg(test)]
            comparisons: 0,
        }
    }

    /// The index of `process` (identity: node, daemon, pid, and attributes other than the
    /// `ringtrace.*` ones, `ringtrace.boot_id` being identity too), adding it if new; its
    /// counters are merged by maximum, since each frame repeats cumulative counters, and its
    /// other `ringtrace.*` attributes take the latest frame's values.
    pub(crate) fn intern(&mut self, process: Process) -> usize {
        let hash = identity_hash(&process);
        let candidates = self.by_identity.entry(hash).or_default();
        let mut found = None;
        for &i in candidates.iter() {
            #[cfg(test)]
            {
                self.comparisons += 1;
            }
            if same_identity(&self.processes[i], &process) {
                found = Some(i);
                break;
            }
        }
        match found {
            Some(i) => {
                let p = &mut self.processes[i];
                p.attributes = process.attributes;
                p.dropped_spans = p.dropped_spans.max(process.dropped_spans);
                p.dropped_events = p.dropped_events.max(process.dropped_events);
                p.unclosed_spans = p.unclosed_spans.max(process.unclosed_spans);
                p.propagation_malformed = p.propagation_malformed.max(process.propagation_malformed);
                i
            }
            None => {
                candidates.push(self.processes.len());
                self.processes.push(process);
                self.processes.len() - 1
            }
        }
    }

    pub(crate) fn get(&self, index: usize) -> &Process {
        &self.processes[index]
    }

    pub(crate) fn source(&self) -> &'p Path {
        self.source
    }

    /// Converts one `TracesData` and hands one batch per resource to `f`, including resources
    /// without spans (they carry counters). `position` locates the message in the file.
    pub(crate) fn emit_traces_data(
        &mut self,
        data: otlp::TracesData,
        position: &Position,
        f: &mut dyn FnMut(Batch<'_>),
    ) -> Result<(), ReadError> {
        let source = self.source;
        for (r, rs) in data.resource_spans.into_iter().enumerate() {
            let attrs = rs.resource.map(|res| attributes(res.attributes)).unwrap_or_default();
            self.emit_resource(attrs, f, |index, process| {
                let mut spans = Vec::new();
                for (c, ss) in rs.scope_spans.into_iter().enumerate() {
                    spans.reserve(ss.spans.len());
                    for (s, span) in ss.spans.into_iter().enumerate() {
                        let span = convert_span(span, index, process).map_err(|what| {
                            ReadError::new(
                                source,
                                Some(position.clone()),
                                ReadErrorKind::Invalid,
                                format!("span {s} of scope {c} of resource {r}: {what}"),
                            )
                        })?;
                        spans.push(span);
                    }
                }
                Ok(spans)
            })?;
        }
        Ok(())
    }

    /// Hands `f` one batch of the process of the resource attributes `resource` (a resource
    /// without spans still carries counters), with the spans `spans` makes for it from the
    /// process's index and the process.
    pub(crate) fn emit_resource(
        &mut self,
        resource: Vec<(String, Value)>,
        f: &mut dyn FnMut(Batch<'_>),
        spans: impl FnOnce(usize, &Process) -> Result<Vec<Span>, ReadError>,
    ) -> Result<(), ReadError> {
        let index = self.intern(process_from_attributes(resource, self.source));
        let process = &self.processes[index];
        let spans = spans(index, process)?;
        f(Batch { process_index: index, process, spans });
        Ok(())
    }
}

/// The attributes that make a process's identity: all but the `ringtrace.*` ones (counters,
/// which grow from one export to the next), except `ringtrace.boot_id`: a process of the same
/// name and pid under another boot of its kernel (a container's pid 1 after a reboot) is
/// another process, and its times come from another clock (`causality::one_clock`).
fn identity(attrs: &[(String, Value)]) -> impl Iterator<Item = &(String, Value)> {
    attrs.iter().filter(|(k, _)| !k.starts_with("ringtrace.") || k == crate::model::BOOT_ID)
}

fn same_identity(a: &Process, b: &Process) -> bool {
    a.node == b.node
        && a.daemon == b.daemon
        && a.pid == b.pid
        && identity(&a.attributes).eq(identity(&b.attributes))
}

/// A hash consistent with [`same_identity`]: processes it calls the same hash the same.
fn identity_hash(p: &Process) -> u64 {
    let mut h = DefaultHasher::new();
    (&p.node, &p.daemon, p.pid).hash(&mut h);
    for (key, value) in identity(&p.attributes) {
        key.hash(&mut h);
        hash_value(value, &mut h);
    }
    h.finish()
}

fn hash_value(v: &Value, h: &mut DefaultHasher) {
    std::mem::discriminant(v).hash(h);
    match v {
        Value::Str(s) => s.hash(h),
        Value::Int(i) => i.hash(h),
        // 0.0 == -0.0, so both hash alike; NaN equals nothing, so its hash does not matter.
        Value::Float(x) => (if *x == 0.0 { 0 } else { x.to_bits() }).hash(h),
        Value::Bool(b) => b.hash(h),
        Value::Bytes(b) => b.hash(h),
        Value::Array(values) => {
            values.len().hash(h);
            values.iter().for_each(|v| hash_value(v, h));
        }
        Value::Map(pairs) => {
            pairs.len().hash(h);
            for (k, v) in pairs {
                k.hash(h);
                hash_value(v, h);
            }
        }
    }
}

/// A process from resource attributes: `service.name`, `host.name`, `process.pid` and the
/// ringtrace counters become fields, the rest stays in [`Process::attributes`].
pub(crate) fn process_from_attributes(attrs: Vec<(String, Value)>, source: &Path) -> Process {
    let mut p = Process { source: source.to_owned(), ..Process::default() };
    let mut daemon = None;
    let mut node = None;
    let counter = |v: &Value| v.as_i64().map_or(0, |i| u64::try_from(i).unwrap_or(0));
    for (key, value) in attrs {
        match key.as_str() {
            "service.name" if daemon.is_none() => daemon = Some(value.to_string()),
            "host.name" if node.is_none() => node = Some(value.to_string()),
            "process.pid" if p.pid.is_none() => {
                p.pid = value.as_i64().and_then(|i| u32::try_from(i).ok());
            }
            k if k == COUNTERS[0] => p.dropped_spans = p.dropped_spans.max(counter(&value)),
            k if k == COUNTERS[1] => p.dropped_events = p.dropped_events.max(counter(&value)),
            k if k == COUNTERS[2] => p.unclosed_spans = p.unclosed_spans.max(counter(&value)),
            k if k == COUNTERS[3] => {
                p.propagation_malformed = p.propagation_malformed.max(counter(&value));
            }
            _ => p.attributes.push((key, value)),
        }
    }
    p.daemon = daemon.unwrap_or_else(|| "unknown_service".to_owned());
    p.node = node.unwrap_or_else(|| "unknown".to_owned());
    p
}

pub(crate) fn attributes(kvs: Vec<otlp::KeyValue>) -> Vec<(String, Value)> {
    kvs.into_iter().map(|kv| (kv.key, value(kv.value))).collect()
}

/// An OTLP value; an empty value becomes an empty string.
fn value(v: Option<otlp::AnyValue>) -> Value {
    match v.and_then(|v| v.value) {
        None => Value::Str(String::new()),
        Some(any_value::Value::StringValue(s)) => Value::Str(s),
        Some(any_value::Value::BoolValue(b)) => Value::Bool(b),
        Some(any_value::Value::IntValue(i)) => Value::Int(i),
        Some(any_value::Value::DoubleValue(x)) => Value::Float(x),
        Some(any_value::Value::BytesValue(b)) => Value::Bytes(b),
        Some(any_value::Value::ArrayValue(a)) => {
            Value::Array(a.values.into_iter().map(|v| value(Some(v))).collect())
        }
        Some(any_value::Value::KvlistValue(kv)) => Value::Map(attributes(kv.values)),
        // An index into a profile's string table (the profiles signal's): no string to give.
        Some(any_value::Value::StringValueStrindex(i)) => Value::Int(i64::from(i)),
    }
}

pub(crate) fn trace_id(bytes: &[u8], what: &str) -> Result<TraceId, String> {
    let arr: [u8; 16] =
        bytes.try_into().map_err(|_| format!("{what} has {} bytes, expected 16", bytes.len()))?;
    TraceId::from_bytes(arr).ok_or_else(|| format!("{what} is all zeros"))
}

pub(crate) fn span_id(bytes: &[u8], what: &str) -> Result<SpanId, String> {
    let arr: [u8; 8] =
        bytes.try_into().map_err(|_| format!("{what} has {} bytes, expected 8", bytes.len()))?;
    SpanId::from_bytes(arr).ok_or_else(|| format!("{what} is all zeros"))
}

/// A parent id: empty or all zeros means none.
pub(crate) fn parent_id(bytes: &[u8]) -> Result<Option<SpanId>, String> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let arr: [u8; 8] =
        bytes.try_into().map_err(|_| format!("parent span id has {} bytes, expected 8 or 0", bytes.len()))?;
    Ok(SpanId::from_bytes(arr))
}

pub(crate) fn span_kind(kind: i32) -> SpanKind {
    match otlp::SpanKind::try_from(kind) {
        Ok(otlp::SpanKind::Internal) => SpanKind::Internal,
        Ok(otlp::SpanKind::Server) => SpanKind::Server,
        Ok(otlp::SpanKind::Client) => SpanKind::Client,
        Ok(otlp::SpanKind::Producer) => SpanKind::Producer,
        Ok(otlp::SpanKind::Consumer) => SpanKind::Consumer,
        Ok(otlp::SpanKind::Unspecified) | Err(_) => SpanKind::Unspecified,
    }
}

pub(crate) fn status(s: Option<otlp::Status>) -> Status {
    match s {
        Some(s) if s.code == otlp::StatusCode::Error as i32 => Status::Error { message: s.message },
        Some(s) if s.code == otlp::StatusCode::Ok as i32 => Status::Ok,
        _ => Status::Unset,
    }
}

/// The fields the model surfaces from span attributes: target, request id, location.
pub(crate) fn surfaced_fields(attrs: &[(String, Value)]) -> (Option<String>, Option<String>, Option<String>) {
    let mut surfaced = Surfaced::default();
    for (k, v) in attrs {
        surfaced.note(k, || v.clone());
    }
    surfaced.fields()
}

/// The first value of each attribute the model surfaces as a field of its own, gathered one
/// attribute at a time ([`surfaced_fields`]).
#[derive(Default)]
pub(crate) struct Surfaced {
    target: Option<Value>,
    request_id: Option<Value>,
    file: Option<Value>,
    line: Option<Value>,
}

impl Surfaced {
    /// Notes the attribute `key`, taking its `value` only when it is the first of a key
    /// surfaced. Returns whether the key is one of those.
    pub(crate) fn note(&mut self, key: &str, value: impl FnOnce() -> Value) -> bool {
        let slot = match key {
            "target" => &mut self.target,
            "request.id" => &mut self.request_id,
            "code.filepath" => &mut self.file,
            "code.lineno" => &mut self.line,
            _ => return false,
        };
        if slot.is_none() {
            *slot = Some(value());
        }
        true
    }

    /// Target, request id and location (`file:line`).
    pub(crate) fn fields(self) -> (Option<String>, Option<String>, Option<String>) {
        // A string value is taken as it is, not copied into a new `String`.
        let text = |v: Value| match v {
            Value::Str(s) => s,
            v => v.to_string(),
        };
        let location = self.file.map(|file| match self.line {
            Some(line) => format!("{file}:{line}"),
            None => text(file),
        });
        (self.target.map(text), self.request_id.map(text), location)
    }
}

fn convert_span(s: otlp::Span, process_index: usize, process: &Process) -> Result<Span, String> {
    let trace_id = trace_id(&s.trace_id, "trace id")?;
    let span_id = span_id(&s.span_id, "span id")?;
    let parent_span_id = parent_id(&s.parent_span_id)?;
    let attributes = attributes(s.attributes);
    let (target, request_id, location) = surfaced_fields(&attributes);
    let links = s
        .links
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            Ok(SpanLink {
                trace_id: self::trace_id(&l.trace_id, &format!("link {i} trace id"))?,
                span_id: self::span_id(&l.span_id, &format!("link {i} span id"))?,
                attributes: self::attributes(l.attributes),
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Span {
        trace_id,
        span_id,
        parent_span_id,
        name: s.name,
        target,
        node: process.node.clone(),
        daemon: process.daemon.clone(),
        kind: span_kind(s.kind),
        status: status(s.status),
        start_unix_ns: s.start_time_unix_nano,
        end_unix_ns: s.end_time_unix_nano,
        request_id,
        location,
        attributes,
        events: s
            .events
            .into_iter()
            .map(|e| SpanEvent {
                name: e.name,
                time_unix_ns: e.time_unix_nano,
                attributes: self::attributes(e.attributes),
            })
            .collect(),
        links,
        process: process_index,
    })
}

/// Reads a binary recording: `TracesData` messages, each after its varint length. With
/// [`Truncation::Warn`], a file ending inside a frame is reported as a [`Cut`].
pub(crate) fn read_recording(
    table: &mut ProcessTable<'_>,
    mut input: impl BufRead,
    truncation: Truncation,
    f: &mut dyn FnMut(Batch<'_>),
) -> Result<Option<Cut>, ReadError> {
    let mut at = FrameCursor { path: table.source(), truncation, index: 0, offset: 0 };
    let mut buf = Vec::new();
    loop {
        let bytes = match at.read_frame(&mut input, &mut buf)? {
            FrameRead::End => return Ok(None),
            FrameRead::Cut(cut) => return Ok(Some(cut)),
            FrameRead::Whole { bytes } => bytes,
        };
        let data = otlp::TracesData::decode(buf.as_slice())
            .map_err(|e| at.error(ReadErrorKind::Protobuf, format!("invalid protobuf: {e}")))?;
        table.emit_traces_data(data, &at.position(), f)?;
        at.offset += bytes;
        at.index += 1;
    }
}

/// The frame a recording reader is at, for reading it and naming it in errors.
struct FrameCursor<'p> {
    path: &'p Path,
    truncation: Truncation,
    /// The frame's index from 0.
    index: usize,
    /// The byte offset of its length prefix.
    offset: u64,
}

/// What reading one frame gave.
enum FrameRead {
    /// The input ended cleanly before the frame.
    End,
    /// The input ended inside the frame, read with [`Truncation::Warn`].
    Cut(Cut),
    /// The frame's message is in the buffer; `bytes` counts it with its length prefix.
    Whole { bytes: u64 },
}

impl FrameCursor<'_> {
    fn position(&self) -> Position {
        Position::Frame { index: self.index, byte_offset: self.offset }
    }

    /// An error at this frame; at the first, with a hint that the file may not be a recording.
    fn error(&self, kind: ReadErrorKind, mut what: String) -> ReadError {
        if self.index == 0 {
            what.push_str(" (is this a trace file? JSON input must start with `{`)");
        }
        ReadError::new(self.path, Some(self.position()), kind, what)
    }

    fn io_error(&self, e: std::io::Error) -> ReadError {
        ReadError::io(self.path, &format!("{}: cannot read", self.position()), e)
    }

    fn cut(&self, ignored_bytes: u64) -> Cut {
        Cut {
            position: self.position(),
            unit: "frame",
            read: self.index,
            from_byte: self.offset,
            ignored_bytes,
        }
    }

    /// Reads this frame's length prefix and its message into `buf`.
    fn read_frame(&self, input: &mut impl BufRead, buf: &mut Vec<u8>) -> Result<FrameRead, ReadError> {
        let warn = self.truncation == Truncation::Warn;
        let (len, prefix_bytes) = match read_prefix(input).map_err(|e| self.io_error(e))? {
            Prefix::End => return Ok(FrameRead::End),
            Prefix::Length { value, bytes } => (value, bytes),
            Prefix::Truncated { bytes } if warn => return Ok(FrameRead::Cut(self.cut(u64::from(bytes)))),
            Prefix::Truncated { bytes } => {
                return Err(self.error(
                    ReadErrorKind::Truncated,
                    format!("truncated: the file ends inside a length prefix after {bytes} bytes"),
                ))
            }
            Prefix::Invalid(what) => {
                return Err(self.error(ReadErrorKind::Protobuf, format!("invalid length prefix: {what}")))
            }
        };
        if len > MAX_FRAME_BYTES {
            return Err(self.error(
                ReadErrorKind::Protobuf,
                format!(
                    "length prefix says {len} bytes, more than the {MAX_FRAME_BYTES}-byte frame \
                     limit (not a ringtrace recording, or corrupt)"
                ),
            ));
        }
        buf.clear();
        (&mut *input).take(len).read_to_end(buf).map_err(|e| self.io_error(e))?;
        if (buf.len() as u64) < len && warn {
            return Ok(FrameRead::Cut(self.cut(prefix_bytes + buf.len() as u64)));
        }
        if (buf.len() as u64) < len {
            return Err(self.error(
                ReadErrorKind::Truncated,
                format!("truncated: length prefix says {len} bytes, {} remain", buf.len()),
            ));
        }
        Ok(FrameRead::Whole { bytes: prefix_bytes + len })
    }
}

/// A frame's length prefix, as read.
enum Prefix {
    /// The input ended cleanly before a new frame.
    End,
    /// The frame's length and the prefix's own size.
    Length { value: u64, bytes: u64 },
    /// The input ended inside the prefix after `bytes` bytes.
    Truncated { bytes: u32 },
    /// Not a valid varint.
    Invalid(&'static str),
}

/// Reads a protobuf varint length prefix.
fn read_prefix(input: &mut impl BufRead) -> std::io::Result<Prefix> {
    let mut value: u64 = 0;
    for i in 0..10u32 {
        let mut byte = [0u8; 1];
        if input.read(&mut byte)? == 0 {
            return Ok(if i == 0 { Prefix::End } else { Prefix::Truncated { bytes: i } });
        }
        let b = byte[0];
        if i == 9 && b > 1 {
            return Ok(Prefix::Invalid("varint overflows 64 bits"));
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(Prefix::Length { value, bytes: u64::from(i) + 1 });
        }
    }
    Ok(Prefix::Invalid("varint longer than 10 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(daemon: &str, pid: u32, attrs: Vec<(String, Value)>) -> Process {
        Process {
            daemon: daemon.into(),
            node: "n".into(),
            pid: Some(pid),
            attributes: attrs,
            ..Process::default()
        }
    }

    #[test]
    fn interning_compares_only_processes_of_equal_hash() {
        let mut table = ProcessTable::new(Path::new("t"));
        for pid in 0..10_000 {
            assert_eq!(table.intern(process("d", pid, vec![])), pid as usize);
        }
        for pid in (0..10_000).rev() {
            assert_eq!(table.intern(process("d", pid, vec![])), pid as usize);
        }
        // One comparison per lookup of a known process (barring hash collisions), none for new ones.
        assert!(table.comparisons <= 10_010, "{} comparisons", table.comparisons);
        assert_eq!(table.processes.len(), 10_000);
    }

    #[test]
    fn identity_ignores_ringtrace_counters_and_signed_zero_not_the_boot_id() {
        let mut table = ProcessTable::new(Path::new("t"));
        let a = vec![("x".to_owned(), Value::Float(0.0)), ("ringtrace.build".to_owned(), Value::Int(1))];
        let b = vec![("x".to_owned(), Value::Float(-0.0)), ("ringtrace.build".to_owned(), Value::Int(2))];
        let c = vec![("x".to_owned(), Value::Array(vec![Value::Int(1)]))];
        assert_eq!(table.intern(process("d", 1, a)), 0);
        assert_eq!(table.intern(process("d", 1, b)), 0);
        assert_eq!(table.get(0).attributes[1].1, Value::Int(2));
        assert_eq!(table.intern(process("d", 1, c)), 1);
        assert_eq!(table.intern(process("e", 1, vec![])), 2);
        // The boot id is identity: the same name and pid under another boot is another process.
        let boot = |id: &str| vec![("ringtrace.boot_id".to_owned(), Value::Str(id.into()))];
        assert_eq!(table.intern(process("d", 1, boot("b1"))), 3);
        assert_eq!(table.intern(process("d", 1, boot("b1"))), 3);
        assert_eq!(table.intern(process("d", 1, boot("b2"))), 4);
    }
}
