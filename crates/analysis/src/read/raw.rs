//! Raw recordings (`.rtrace`): the records a ringtrace process captured, assembled into spans
//! by the subscriber's replay (the same assembly its drain runs), then turned into the model
//! with the attributes OTLP export gives them (`encode::span_attributes`), without encoding
//! them as OTLP first.

use std::io::Read;

use ringtrace_subscriber::encode::{self, AttributeValue};
use ringtrace_subscriber::replay::{replay, ReplayError};
use ringtrace_subscriber::SpanData;

use super::error::{Position, ReadError, ReadErrorKind, ReadWarning, ReadWarningKind};
use super::otlp::{self as read_otlp, ProcessTable, Surfaced};
use super::{Batch, Cut, Detail, Truncation};
use crate::model::{kept_when_compact, Process, Span, SpanEvent, SpanLink, Value};

/// The records the process of the raw recording at `path` left in ring files (it died), to read
/// after the recording's last whole frame, with a warning saying so; or a warning that they
/// could not be read. Nothing for a live process or one that shut down cleanly.
#[cfg(all(unix, not(ringtrace_loom)))]
pub(crate) fn leftovers(path: &std::path::Path) -> (Option<Leftovers>, Vec<ReadWarning>) {
    use ringtrace_subscriber::recover::RecoverError;
    match ringtrace_subscriber::recover::leftovers(path) {
        Ok(None) | Err(RecoverError::Live(_)) => (None, Vec::new()),
        Ok(Some(l)) => {
            let mut notes = Vec::new();
            if l.records > 0 || l.counters.is_some() {
                let counters = if l.counters.is_some() { ", and the loss counters they kept" } else { "" };
                notes.push(ReadWarning::new(
                    path,
                    None,
                    ReadWarningKind::Recovered { records: l.records },
                    format!(
                        "its process died: {} records read from its ring files in {}{counters} (`ringtrace recover` appends them to the file)",
                        l.records,
                        l.dir.display()
                    ),
                ));
            }
            if let Some(first) = &l.meta_first_damaged {
                notes.push(ReadWarning::new(
                    path,
                    None,
                    ReadWarningKind::SkippedMetadataFrames { frames: l.meta_damaged_frames },
                    format!(
                        "its process died, and its metadata file in {} has damaged frames: skipped {}, read on past them (records naming what they defined are not read); the first: {first}",
                        l.dir.display(),
                        l.meta_damaged_frames
                    ),
                ));
            }
            for (file, why) in &l.unreadable {
                notes.push(ReadWarning::new(
                    path,
                    None,
                    ReadWarningKind::RingFilesUnreadable,
                    format!("the ring file {} could not be read: {why}", file.display()),
                ));
            }
            (Some(l).filter(|l| !l.frames.is_empty()), notes)
        }
        Err(e) => (
            None,
            vec![ReadWarning::new(
                path,
                None,
                ReadWarningKind::RingFilesUnreadable,
                format!("its process died, and its ring files could not be read: {e}"),
            )],
        ),
    }
}

/// Without ring files (not Unix): nothing.
#[cfg(not(all(unix, not(ringtrace_loom))))]
pub(crate) fn leftovers(_: &std::path::Path) -> (Option<Leftovers>, Vec<ReadWarning>) {
    (None, Vec::new())
}

/// Leftovers of a dead process: where the recording's whole frames end, and frames to read
/// after them.
#[cfg(all(unix, not(ringtrace_loom)))]
pub(crate) use ringtrace_subscriber::recover::Leftovers;

/// Leftovers of a dead process (none without ring files).
#[cfg(not(all(unix, not(ringtrace_loom))))]
pub(crate) struct Leftovers {
    pub(crate) whole_len: u64,
    pub(crate) frames: Vec<u8>,
}

/// What reading a raw recording ended with besides its spans.
pub(crate) struct RawEnding {
    pub(crate) cut: Option<Cut>,
    /// Warnings for damaged frames passed over and for records that could not be decoded.
    pub(crate) skipped: Vec<ReadWarning>,
}

/// Reads a raw recording, handing its spans to `f` per batch of the replay.
pub(crate) fn read_raw(
    table: &mut ProcessTable<'_>,
    input: impl Read,
    truncation: Truncation,
    detail: Detail,
    f: &mut dyn FnMut(Batch<'_>),
) -> Result<RawEnding, ReadError> {
    let path = table.source();
    let mut failure: Option<ReadError> = None;
    let mut frames = 0usize;
    let result = replay(input, &mut |spans, process| {
        if failure.is_some() {
            return;
        }
        let resource = encode::resource_of_recorded(&process.resource, &process.attributes);
        let resource = read_otlp::attributes(resource.attributes);
        let position = Position::Frame { index: frames, byte_offset: 0 };
        let converted = table.emit_resource(resource, f, |index, process| {
            let span = |(i, s)| {
                span_of(s, index, process, detail).map_err(|what| {
                    let what = format!("span {i} of scope 0 of resource 0: {what}");
                    ReadError::new(path, Some(position.clone()), ReadErrorKind::Invalid, what)
                })
            };
            spans.iter().enumerate().map(span).collect()
        });
        if let Err(e) = converted {
            failure = Some(e);
        }
        frames += 1;
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let out = match result {
        Ok(out) => out,
        Err(ReplayError::Io(e)) => return Err(ReadError::io(path, "cannot read", e)),
        Err(ReplayError::Header(what)) => {
            return Err(ReadError::new(path, None, ReadErrorKind::UnknownFormat, what))
        }
        Err(ReplayError::Truncated { .. }) => unreachable!("the replay reports a cut as `Replay::cut`"),
        Err(ReplayError::Frame { frame, offset, what }) => {
            let position = Position::Frame { index: frame as usize, byte_offset: offset };
            return Err(ReadError::new(path, Some(position), ReadErrorKind::Invalid, what));
        }
    };
    let cut = match out.cut {
        None => None,
        Some(c) if truncation == Truncation::Warn => Some(Cut {
            position: Position::Frame { index: c.frame as usize, byte_offset: c.offset },
            unit: "frame",
            read: c.frame as usize,
            from_byte: c.offset,
            ignored_bytes: c.present,
        }),
        Some(c) => {
            let position = Position::Frame { index: c.frame as usize, byte_offset: c.offset };
            return Err(ReadError::new(
                path,
                Some(position),
                ReadErrorKind::Truncated,
                format!("truncated: the file ends inside this frame, {} bytes short", c.missing),
            ));
        }
    };
    let warning = |kind, first: Option<String>, what: String| {
        first.map(|first| ReadWarning::new(path, None, kind, format!("{what}; the first: {first}")))
    };
    let frames = warning(
        ReadWarningKind::SkippedFrames { frames: out.bad_frames },
        out.first_bad_frame,
        format!("skipped {} damaged frames, read on past them", out.bad_frames),
    );
    let records = warning(
        ReadWarningKind::SkippedRecords { records: out.bad_records },
        out.first_bad_record,
        format!("skipped {} records that could not be decoded", out.bad_records),
    );
    Ok(RawEnding { cut, skipped: frames.into_iter().chain(records).collect() })
}

fn value(v: AttributeValue<'_>) -> Value {
    match v {
        AttributeValue::Int(i) => Value::Int(i),
        AttributeValue::Double(x) => Value::Float(x),
        AttributeValue::Bool(b) => Value::Bool(b),
        AttributeValue::Str(s) => Value::Str(s.into_owned()),
    }
}

/// A replayed span in the model, as its OTLP export would read (the reading of OTLP's
/// `convert_span`, with the same checks and messages), or [compact](Span::compact): then what
/// compacting drops is never built.
fn span_of(s: &SpanData, process_index: usize, process: &Process, detail: Detail) -> Result<Span, String> {
    let trace_id = read_otlp::trace_id(&s.trace_id.to_bytes(), "trace id")?;
    let span_id = read_otlp::span_id(&s.span_id.to_bytes(), "span id")?;
    let parent_span_id = match s.parent_span_id {
        Some(p) => read_otlp::parent_id(&p.to_bytes())?,
        None => None,
    };
    let compact = detail == Detail::Compact;
    let io_call = compact && s.fields.iter().any(|(k, _)| *k == crate::io::attr::OP);
    let mut attributes = Vec::with_capacity(match (compact, io_call) {
        (false, _) => s.fields.len() + 8,
        (true, true) => s.fields.len(),
        (true, false) => 0,
    });
    let mut surfaced = Surfaced::default();
    encode::span_attributes(s, |k, v| {
        if !compact || kept_when_compact(io_call, k) {
            let v = value(v);
            surfaced.note(k, || v.clone());
            attributes.push((k.to_owned(), v));
        } else {
            surfaced.note(k, || value(v));
        }
    });
    let (target, request_id, location) = surfaced.fields();
    let links = match compact {
        true => Vec::new(),
        false => s
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                Ok(SpanLink {
                    trace_id: read_otlp::trace_id(&l.trace_id.to_bytes(), &format!("link {i} trace id"))?,
                    span_id: read_otlp::span_id(&l.span_id.to_bytes(), &format!("link {i} span id"))?,
                    attributes: Vec::new(),
                })
            })
            .collect::<Result<_, String>>()?,
    };
    let events = match compact {
        true => Vec::new(),
        false => s
            .events
            .iter()
            .map(|e| {
                let mut attributes = Vec::with_capacity(e.fields.len() + 2);
                encode::event_attributes(e, |k, v| attributes.push((k.to_owned(), value(v))));
                SpanEvent { name: encode::event_name(e), time_unix_ns: e.unix_ns, attributes }
            })
            .collect(),
    };
    Ok(Span {
        trace_id,
        span_id,
        parent_span_id,
        name: s.name().into_owned(),
        target,
        node: process.node.clone(),
        daemon: process.daemon.clone(),
        kind: read_otlp::span_kind(encode::kind_of(s) as i32),
        status: read_otlp::status(encode::status_of(s)),
        start_unix_ns: s.start_unix_ns,
        end_unix_ns: s.end_unix_ns,
        request_id,
        location,
        attributes,
        events,
        links,
        process: process_index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw recording with numbers of every kind (a `u64` above `i64::MAX` among them),
    /// `otel.*` fields, events with and without a message and at `ERROR`, a link, a remote
    /// parent with a request id, a named thread and a span left open.
    fn recording() -> Vec<u8> {
        // A directory of its own per call: tests run at once.
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ringtrace-raw-read-{}-{call}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (subscriber, guard) = ringtrace_subscriber::Builder::new()
            .node("node-1")
            .daemon("worker")
            .recording_dir(&dir)
            .no_otlp()
            .quiet(true)
            .build_subscriber()
            .unwrap();
        tracing::subscriber::with_default(subscriber, || {
            let root = tracing::info_span!(
                "root",
                request.id = "req-1",
                n = 5u64,
                big = u64::MAX,
                neg = -3i64,
                ratio = 0.5f64,
                ok = true,
                otel.kind = "server",
            );
            let _r = root.enter();
            for i in 0..3u64 {
                let child = tracing::info_span!(
                    "child",
                    i,
                    text = "short",
                    otel.name = "renamed",
                    otel.status_code = tracing::field::Empty,
                    otel.status_message = tracing::field::Empty,
                );
                child.follows_from(&root);
                let _c = child.enter();
                tracing::info!(i, "step");
                tracing::warn!(message = "first", message2 = "second");
                tracing::info!(k = 1u8);
                if i == 1 {
                    tracing::error!("failed");
                } else {
                    child.record("otel.status_code", "ok");
                    child.record("otel.status_message", "fine");
                }
            }
            let remote = tracing::info_span!("remote", otel.kind = "client");
            let parent = "00-00000000000000000000000000000abc-0000000000000def-01";
            let mut parent = ringtrace_core::propagation::TraceContext::parse_traceparent(parent).unwrap();
            parent.request_id = Some("req-remote".into());
            ringtrace_subscriber::SpanExt::set_remote_parent(&remote, &parent);
            drop(remote);
            let dispatch = tracing::dispatcher::get_default(Clone::clone);
            std::thread::Builder::new()
                .name("named".into())
                .spawn(move || {
                    tracing::dispatcher::with_default(&dispatch, || {
                        drop(tracing::info_span!("on a thread", x = 1.25f64).entered());
                    });
                })
                .unwrap()
                .join()
                .unwrap();
            drop(tracing::info_span!("query", peer.service = "db", n = 1u64).entered());
            drop(tracing::info_span!("call", io.op = "read", n = 2u64, peer.service = "db").entered());
            // Edge cases of what compacting keeps: a field named as an attribute the model
            // surfaces, a number for `io.op`, an I/O field recorded twice, a big number.
            let odd = tracing::info_span!(
                "odd",
                target = "a field",
                code.filepath = "field.rs",
                io.op = 7u64,
                io.bytes = tracing::field::Empty,
                io.fd = u64::MAX,
            );
            odd.record("io.bytes", 1u64);
            odd.record("io.bytes", 2u64);
            drop(odd);
            std::mem::forget(tracing::info_span!("held").entered());
        });
        guard.shutdown().unwrap();
        let file = std::fs::read_dir(&dir).unwrap().find_map(|e| {
            let path = e.unwrap().path();
            path.extension().is_some_and(|x| x == "rtrace").then_some(path)
        });
        let bytes = std::fs::read(file.unwrap()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        bytes
    }

    #[test]
    fn replayed_spans_read_as_their_otlp_export_reads() {
        let bytes = recording();
        let source = std::path::Path::new("r.rtrace");
        let mut batches = Vec::new();
        let mut direct = ProcessTable::new(source);
        read_raw(&mut direct, bytes.as_slice(), Truncation::Error, Detail::Full, &mut |b| {
            batches.push((b.process_index, b.process.clone(), b.spans));
        })
        .unwrap();
        // The same spans exported as OTLP, and that read as OTLP is read.
        let mut exported = Vec::new();
        let mut through_otlp = ProcessTable::new(source);
        let position = Position::Frame { index: 0, byte_offset: 0 };
        replay(bytes.as_slice(), &mut |spans, process| {
            let data = encode::traces_data_of(spans, &process.resource, &process.attributes);
            through_otlp
                .emit_traces_data(data, &position, &mut |b| {
                    exported.push((b.process_index, b.process.clone(), b.spans));
                })
                .unwrap();
        })
        .unwrap();
        assert_eq!(batches, exported);
        // What the comparison covered.
        let spans: Vec<&Span> = batches.iter().flat_map(|(_, _, s)| s).collect();
        assert_eq!(spans.len(), 10);
        let attribute = |name: &str, key: &str| {
            spans.iter().find(|s| s.name == name).and_then(|s| s.attribute(key)).cloned()
        };
        assert_eq!(attribute("root", "big"), Some(Value::Str(u64::MAX.to_string())));
        assert_eq!(attribute("root", "neg"), Some(Value::Int(-3)));
        assert_eq!(attribute("on a thread", "thread.name"), Some(Value::Str("named".into())));
        assert_eq!(attribute("held", "ringtrace.unclosed"), Some(Value::Bool(true)));
        let renamed: Vec<_> = spans.iter().filter(|s| s.name == "renamed").collect();
        assert_eq!(renamed.len(), 3);
        assert!(renamed.iter().all(|s| s.links.len() == 1 && s.events.len() >= 3));
        assert!(renamed.iter().any(|s| matches!(s.status, crate::model::Status::Error { .. })));
        assert!(renamed.iter().any(|s| s.status == crate::model::Status::Ok));
        let remote = spans.iter().find(|s| s.name == "remote").unwrap();
        assert_eq!(remote.request_id.as_deref(), Some("req-remote"));
        assert!(remote.parent_span_id.is_some());
    }

    /// Read compact, a raw recording's spans are what its full spans are once compacted.
    #[test]
    fn compact_spans_are_full_spans_compacted() {
        let bytes = recording();
        let read = |detail| {
            let mut spans = Vec::new();
            let mut table = ProcessTable::new(std::path::Path::new("r.rtrace"));
            read_raw(&mut table, bytes.as_slice(), Truncation::Error, detail, &mut |b| spans.extend(b.spans))
                .unwrap();
            spans
        };
        let (full, compact) = (read(Detail::Full), read(Detail::Compact));
        let mut compacted = full.clone();
        compacted.iter_mut().for_each(Span::compact);
        assert_eq!(compact, compacted);
        // What compacting kept and dropped.
        let find = |spans: &[Span], name: &str| spans.iter().find(|s| s.name == name).unwrap().clone();
        assert_eq!(
            find(&compact, "query").attributes,
            [("peer.service".to_owned(), Value::Str("db".into()))]
        );
        let keys = |s: Span| s.attributes.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(keys(find(&compact, "call")), ["io.op", "peer.service", "thread.id"]);
        assert!(keys(find(&full, "call")).len() > 5);
        let odd = find(&compact, "odd");
        // The first of each surfaced name wins: the fields, then the callsite's line.
        assert_eq!(odd.target.as_deref(), Some("a field"));
        assert!(odd.location.as_deref().is_some_and(|l| l.starts_with("field.rs:")), "{:?}", odd.location);
        assert_eq!(keys(odd.clone()), ["io.op", "io.fd", "io.bytes", "io.bytes", "thread.id"]);
        assert_eq!(odd.attribute("io.fd"), Some(&Value::Str(u64::MAX.to_string())));
        let root = find(&compact, "root");
        assert_eq!((root.target, root.request_id), (find(&full, "root").target, Some("req-1".into())));
        assert!(root.location.is_some() && root.attributes.is_empty());
        assert!(compact.iter().all(|s| s.events.is_empty() && s.links.is_empty()));
        assert!(full.iter().any(|s| !s.events.is_empty()) && full.iter().any(|s| !s.links.is_empty()));
        let failed = |spans: &[Span]| {
            spans.iter().filter(|s| matches!(s.status, crate::model::Status::Error { .. })).count()
        };
        assert_eq!((failed(&compact), failed(&full)), (1, 1), "a status set by an ERROR event stays");
    }
}
