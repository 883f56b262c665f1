//! I/O records as spans and back: [`io_calls`] finds the I/O calls of a [`Dataset`] (spans with
//! an `io.op` attribute), [`record_to_span`] makes the span `docs/io-records.md` describes.

use std::hash::{Hash, Hasher};

use ringtrace_core::{SpanId, TraceId};

use super::{attr, Endpoint, IoOp, IoRecord, Transport};
use crate::model::{Dataset, Span, SpanKind, Status, Value};

/// The target of the spans `ringtrace io import` makes.
pub const IMPORT_TARGET: &str = "strace";

/// One I/O call of a dataset: its record, and where in the dataset it is.
#[derive(Clone, Debug, PartialEq)]
pub struct IoCall {
    /// Index of its span in [`Dataset::spans`].
    pub span: usize,
    /// Index of its process in [`Dataset::processes`].
    pub process: usize,
    /// The machine.
    pub node: String,
    /// The process role.
    pub daemon: String,
    /// The span's trace.
    pub trace_id: TraceId,
    /// Whether the call was made inside a span of an instrumented process (its span has a
    /// parent): that span's trace then names its request.
    pub in_span: bool,
    /// The call.
    pub record: IoRecord,
}

impl IoCall {
    /// `node/daemon`: the process, as views name it.
    pub fn process_name(&self) -> String {
        format!("{}/{}", self.node, self.daemon)
    }

    /// Duration, nanoseconds.
    pub fn duration_ns(&self) -> u64 {
        self.record.end_unix_ns.saturating_sub(self.record.start_unix_ns)
    }
}

/// The I/O calls of `data` (each distinct span with a valid `io.op`), in span order.
pub fn io_calls(data: &Dataset) -> Vec<IoCall> {
    // Most traces hold no I/O call: they are not sorted from their copies.
    if !data.spans.iter().any(|s| s.attribute(attr::OP).is_some()) {
        return Vec::new();
    }
    data.distinct_spans()
        .filter_map(|(i, span)| {
            let record = span_to_record(span, data.process_of(span).and_then(|p| p.pid))?;
            Some(IoCall {
                span: i,
                process: span.process,
                node: span.node.clone(),
                daemon: span.daemon.clone(),
                trace_id: span.trace_id,
                in_span: span.parent_span_id.is_some(),
                record,
            })
        })
        .collect()
}

/// Whether `span` is an I/O call that waits on the network: a receive, connect or accept on a
/// socket. When its parent also has children in other processes, it waits for their work: the
/// critical path does not follow it and self times do not count that work in it.
pub fn is_network_wait(span: &Span) -> bool {
    let Some(op) = span.attribute(attr::OP).and_then(Value::as_str) else { return false };
    match op {
        "recv" | "connect" | "accept" => true,
        "read" => span.attribute(attr::PEER_ADDRESS).is_some(),
        _ => false,
    }
}

fn int(span: &Span, key: &str) -> Option<i64> {
    span.attribute(key).and_then(Value::as_i64)
}

fn string(span: &Span, key: &str) -> Option<String> {
    span.attribute(key).map(|v| v.to_string())
}

fn endpoint(span: &Span, address: &str, port: &str) -> Option<Endpoint> {
    let address = string(span, address)?;
    let port = int(span, port).and_then(|p| u16::try_from(p).ok()).unwrap_or(0);
    Some(Endpoint { address, port })
}

/// The code that made an I/O call, `file:line`, from `code.file.path` and `code.line.number`
/// (where the span's own location is the wrapper's); `None` for other spans.
pub fn caller_location(span: &Span) -> Option<String> {
    span.attribute(attr::OP)?;
    call_location(span)
}

/// [`caller_location`] of a span known to have an `io.op`.
pub(crate) fn call_location(span: &Span) -> Option<String> {
    let file = span.attribute(attr::CODE_FILE)?;
    Some(match int(span, attr::CODE_LINE) {
        Some(line) => format!("{file}:{line}"),
        None => file.to_string(),
    })
}

/// The record of an I/O span: `None` when the span has no `io.op` naming an operation.
pub fn span_to_record(span: &Span, pid: Option<u32>) -> Option<IoRecord> {
    let op = IoOp::parse(span.attribute(attr::OP)?.as_str()?)?;
    let error = string(span, attr::ERROR_TYPE).or_else(|| match &span.status {
        Status::Error { message } => Some(if message.is_empty() { "error".into() } else { message.clone() }),
        _ => None,
    });
    let location = caller_location(span);
    let stack = string(span, attr::STACKTRACE)
        .map(|s| s.lines().map(str::to_owned).filter(|l| !l.is_empty()).collect())
        .unwrap_or_default();
    let to_u64 = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
    Some(IoRecord {
        pid: pid.unwrap_or(0),
        tid: to_u64(int(span, attr::THREAD_ID)).unwrap_or(0),
        op: Some(op),
        syscall: string(span, attr::SYSCALL).unwrap_or_else(|| op.as_str().to_owned()),
        fd: int(span, attr::FD),
        start_unix_ns: span.start_unix_ns,
        end_unix_ns: span.end_unix_ns.max(span.start_unix_ns),
        error,
        bytes_asked: to_u64(int(span, attr::BYTES_ASKED)),
        bytes: to_u64(int(span, attr::BYTES)).unwrap_or(0),
        offset: to_u64(int(span, attr::OFFSET)),
        path: string(span, attr::FILE_PATH),
        transport: span.attribute(attr::TRANSPORT).and_then(Value::as_str).and_then(Transport::parse),
        local: endpoint(span, attr::LOCAL_ADDRESS, attr::LOCAL_PORT),
        remote: endpoint(span, attr::PEER_ADDRESS, attr::PEER_PORT),
        location,
        stack,
    })
}

/// FNV-1a, 64 bits: a hash whose output no Rust release changes (`DefaultHasher`'s may).
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        ringtrace_core::hash::mix64(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// A stable, non-zero id from `parts`: an import gives the same ids every time, with every
/// build.
fn stable_id(parts: impl Hash) -> u128 {
    let mut a = Fnv(0xcbf2_9ce4_8422_2325);
    (1u8, &parts).hash(&mut a);
    let mut b = Fnv(0xcbf2_9ce4_8422_2325);
    (2u8, &parts).hash(&mut b);
    (u128::from(a.finish()) << 64 | u128::from(b.finish())).max(1)
}

/// The span of an I/O call made by process `process` of a dataset on `node`, by a program that
/// has no spans of its own (an import): a root span in a trace of its own (ids stable for the same
/// call), until request linking puts it in the trace of its request. `index` tells apart calls
/// that are otherwise equal.
pub fn record_to_span(record: &IoRecord, node: &str, daemon: &str, process: usize, index: usize) -> Span {
    let op = record.op.unwrap_or(IoOp::Read);
    let id = stable_id((node, record.pid, record.tid, record.start_unix_ns, index));
    let trace_id = TraceId::new(id).expect("non-zero");
    let span_id = SpanId::new((id as u64).max(1)).expect("non-zero");
    let mut a: Vec<(String, Value)> = Vec::new();
    let mut put = |k: &str, v: Value| a.push((k.to_owned(), v));
    put(attr::OP, Value::Str(op.as_str().into()));
    put(attr::SYSCALL, Value::Str(record.syscall.clone()));
    if let Some(fd) = record.fd {
        put(attr::FD, Value::Int(fd));
    }
    if let Some(asked) = record.bytes_asked {
        put(attr::BYTES_ASKED, Value::Int(asked as i64));
    }
    if op.moves_data() || record.bytes > 0 {
        put(attr::BYTES, Value::Int(record.bytes as i64));
    }
    if let Some(offset) = record.offset {
        put(attr::OFFSET, Value::Int(offset as i64));
    }
    if let Some(path) = &record.path {
        put(attr::FILE_PATH, Value::Str(path.clone()));
    }
    if let Some(t) = record.transport {
        put(attr::TRANSPORT, Value::Str(t.as_str().into()));
    }
    if let Some(e) = &record.local {
        put(attr::LOCAL_ADDRESS, Value::Str(e.address.clone()));
        put(attr::LOCAL_PORT, Value::Int(e.port.into()));
    }
    if let Some(e) = &record.remote {
        put(attr::PEER_ADDRESS, Value::Str(e.address.clone()));
        put(attr::PEER_PORT, Value::Int(e.port.into()));
    }
    put(attr::THREAD_ID, Value::Int(record.tid as i64));
    if let Some(e) = &record.error {
        put(attr::ERROR_TYPE, Value::Str(e.clone()));
    }
    if !record.stack.is_empty() {
        put(attr::STACKTRACE, Value::Str(record.stack.join("\n")));
    }
    Span {
        node: node.to_owned(),
        daemon: daemon.to_owned(),
        target: Some(IMPORT_TARGET.to_owned()),
        kind: SpanKind::Internal,
        status: match &record.error {
            Some(e) => Status::Error { message: e.clone() },
            None => Status::Unset,
        },
        location: record.location.clone(),
        attributes: a,
        process,
        ..Span::new(trace_id, span_id, None, op.as_str(), record.start_unix_ns, record.end_unix_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_survives_the_round_trip_through_a_span() {
        let record = IoRecord {
            pid: 7,
            tid: 9,
            op: Some(IoOp::Send),
            syscall: "sendto".into(),
            fd: Some(4),
            start_unix_ns: 1_000,
            end_unix_ns: 1_500,
            error: Some("EAGAIN".into()),
            bytes_asked: Some(100),
            bytes: 0,
            offset: None,
            path: None,
            transport: Some(Transport::Tcp),
            local: Some(Endpoint { address: "127.0.0.1".into(), port: 40000 }),
            remote: Some(Endpoint { address: "::1".into(), port: 80 }),
            location: None,
            stack: vec!["libc.so.6(__send+0x14) [0x1]".into(), "app(main+0x2) [0x2]".into()],
        };
        let span = record_to_span(&record, "h1", "client", 0, 3);
        assert_eq!(span.name, "send");
        assert!(span.status.is_error());
        assert_eq!(span_to_record(&span, Some(7)), Some(record.clone()));
        // Stable ids, distinct per index.
        assert_eq!(record_to_span(&record, "h1", "client", 0, 3).trace_id, span.trace_id);
        assert_ne!(record_to_span(&record, "h1", "client", 0, 4).trace_id, span.trace_id);
    }

    #[test]
    fn spans_without_a_known_op_are_not_io() {
        let mut span = Span::new(TraceId::new(1).unwrap(), SpanId::new(1).unwrap(), None, "read", 0, 1);
        assert_eq!(span_to_record(&span, None), None);
        span.attributes.push((attr::OP.into(), Value::Str("mmap".into())));
        assert_eq!(span_to_record(&span, None), None);
    }
}
