//! Rule 4 of the linking, applied to the dataset itself: the I/O calls of a program nobody
//! instrumented (an `strace` import) that served a request of an instrumented one join that
//! request's trace, as spans of their own process, so that every view — request trees, critical
//! paths, breakdowns, the report — shows them where they happened.

use super::{io_calls, link_requests};
use crate::model::{Dataset, Span};

/// Places the I/O spans of `data`:
/// - each at its caller's code location (`code.file.path`, `code.line.number`: the code that
///   made the call, where the span's own location is the wrapper's);
/// - each made outside any span (an import, or a server's reads before its handler's span
///   exists) into the trace of the request it served, when a call of that request was made
///   inside a span: under the span that made the call at the other end of the same exchange (the
///   client's span that sent that part of the request), else under the span of the request's
///   first such call.
///
/// Returns how many spans moved to another trace.
pub fn attach_to_traces(data: &mut Dataset) -> usize {
    // Every copy of a span (a file read twice, a retried batch) is placed alike, so that copies
    // stay copies.
    let mut places = CallPlaces::default();
    for span in &mut data.spans {
        places.place(span);
    }
    // Nothing moves unless some calls were made inside a span and some outside: a dataset
    // recorded by ringtrace alone (every call in a span) is told apart before a record is made
    // of each call (that took a fifth of `ringtrace stats` over the demo's recordings).
    if !places.mixed() {
        return 0;
    }
    let calls = io_calls(data);
    let links = link_requests(&calls);
    // Request ids by span, for an anchor that carries none itself (its parent does).
    let request_ids: std::collections::HashMap<(ringtrace_core::TraceId, ringtrace_core::SpanId), &str> =
        data.spans.iter().filter_map(|s| Some(((s.trace_id, s.span_id), s.request_id.as_deref()?))).collect();
    // Each exchange's first call made inside a span of its request's trace: the caller's end.
    let mut exchange_anchor: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    for request in &links.requests {
        let Some(trace) = request.trace_id else { continue };
        for &i in &request.calls {
            if let (true, Some(e)) = (calls[i].in_span && calls[i].trace_id == trace, links.exchange_of[i]) {
                exchange_anchor.entry(e).or_insert(i);
            }
        }
    }
    let mut moves = Vec::new();
    for request in &links.requests {
        let Some(trace) = request.trace_id else { continue };
        // The request's first call made inside a span: the anchor of calls whose exchange has
        // none of its own.
        let Some(first) =
            request.calls.iter().copied().find(|&i| calls[i].in_span && calls[i].trace_id == trace)
        else {
            continue;
        };
        for &i in request.calls.iter().filter(|&&i| !calls[i].in_span) {
            // Under the span that made the call at the other end of the same exchange (the
            // caller's `rpc.call`, say), else under the request's first.
            let anchor = links.exchange_of[i].and_then(|e| exchange_anchor.get(&e)).copied().unwrap_or(first);
            let anchor_span = &data.spans[calls[anchor].span];
            let parent = anchor_span.parent_span_id;
            let request_id = anchor_span
                .request_id
                .clone()
                .or_else(|| parent.and_then(|p| request_ids.get(&(trace, p))).map(|r| (*r).to_owned()));
            moves.push((calls[i].span, trace, parent, request_id));
        }
    }
    let moved = moves.len();
    let moves: std::collections::HashMap<_, _> = moves
        .into_iter()
        .map(|(i, trace, parent, request_id)| {
            ((data.spans[i].trace_id, data.spans[i].span_id), (trace, parent, request_id))
        })
        .collect();
    for span in &mut data.spans {
        if let Some((trace, parent, request_id)) = moves.get(&(span.trace_id, span.span_id)) {
            span.trace_id = *trace;
            span.parent_span_id = *parent;
            if span.request_id.is_none() {
                span.request_id.clone_from(request_id);
            }
        }
    }
    moved
}

/// Where the I/O calls (spans whose `io.op` names an operation, as [`io_calls`] takes them) of
/// the spans seen so far were made: inside a span, outside any, or both.
/// What [`attach_to_traces`] does first, span by span, for readers that see a dataset a batch
/// at a time (the store's export): only calls made both ways need the whole dataset at once.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CallPlaces {
    inside: bool,
    outside: bool,
}

impl CallPlaces {
    /// Sets an I/O span's location to its caller's and notes where its call was made.
    pub(crate) fn place(&mut self, span: &mut Span) {
        let Some(op) = span.attribute(super::attr::OP) else { return };
        if op.as_str().and_then(super::IoOp::parse).is_some() {
            *if span.parent_span_id.is_some() { &mut self.inside } else { &mut self.outside } = true;
        }
        if let Some(location) = super::calls::call_location(span) {
            span.location = Some(location);
        }
    }

    /// Some calls were made inside a span and some outside any.
    pub(crate) fn mixed(&self) -> bool {
        self.inside && self.outside
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::calls::record_to_span;
    use crate::io::{Endpoint, IoOp, IoRecord, Transport};
    use crate::model::{Process, Span, Value};
    use ringtrace_core::{SpanId, TraceId};

    #[test]
    fn an_uninstrumented_servers_calls_join_the_clients_trace() {
        let ep = |port| Endpoint { address: "127.0.0.1".into(), port };
        let record = |op, t, local, remote| IoRecord {
            pid: 9,
            tid: 9,
            op: Some(op),
            syscall: "x".into(),
            fd: Some(5),
            start_unix_ns: t,
            end_unix_ns: t + 5,
            bytes: 10,
            transport: Some(Transport::Tcp),
            local: Some(ep(local)),
            remote: Some(ep(remote)),
            ..IoRecord::default()
        };
        let mut data = Dataset {
            processes: vec![
                Process { node: "a".into(), daemon: "client".into(), ..Process::default() },
                Process { node: "b".into(), daemon: "db".into(), ..Process::default() },
            ],
            spans: Vec::new(),
        };
        let trace = TraceId::new(77).unwrap();
        let root = Span {
            node: "a".into(),
            daemon: "client".into(),
            request_id: Some("r-1".into()),
            ..Span::new(trace, SpanId::new(1).unwrap(), None, "query", 0, 100)
        };
        let mut send = record_to_span(&record(IoOp::Send, 10, 4000, 5432), "a", "client", 0, 0);
        send.trace_id = trace;
        send.parent_span_id = Some(SpanId::new(1).unwrap());
        send.attributes.retain(|(k, _)| k != "thread.id");
        send.attributes.push(("thread.id".into(), Value::Int(1)));
        let recv = record_to_span(&record(IoOp::Recv, 12, 5432, 4000), "b", "db", 1, 1);
        let file = record_to_span(
            &IoRecord {
                op: Some(IoOp::Read),
                transport: None,
                local: None,
                remote: None,
                fd: Some(8),
                start_unix_ns: 20,
                ..record(IoOp::Read, 0, 0, 0)
            },
            "b",
            "db",
            1,
            2,
        );
        let reply = record_to_span(&record(IoOp::Send, 30, 5432, 4000), "b", "db", 1, 3);
        data.spans = vec![root, send, recv, file, reply];
        assert_eq!(attach_to_traces(&mut data), 3);
        for s in &data.spans[2..] {
            assert_eq!(s.trace_id, trace, "{}", s.name);
            assert_eq!(s.parent_span_id, SpanId::new(1));
            assert_eq!(s.request_id.as_deref(), Some("r-1"));
            assert_eq!(s.daemon, "db");
        }
    }
}
