//! Raw recordings (`.rtrace`): the records a ringtrace process captured, assembled into spans
//! by the subscriber's replay (the same assembly its drain runs), then read as OTLP.

use std::io::Read;

use ringtrace_subscriber::encode;
use ringtrace_subscriber::replay::{replay, ReplayError};

use super::error::{Position, ReadError, ReadErrorKind, ReadWarning, ReadWarningKind};
use super::otlp::ProcessTable;
use super::{Batch, Cut, Truncation};

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
    f: &mut dyn FnMut(Batch<'_>),
) -> Result<RawEnding, ReadError> {
    let path = table.source();
    let mut failure: Option<ReadError> = None;
    let mut frames = 0usize;
    let result = replay(input, &mut |spans, process| {
        if failure.is_some() {
            return;
        }
        let data = encode::traces_data_of(spans, &process.resource, &process.attributes);
        let position = Position::Frame { index: frames, byte_offset: 0 };
        if let Err(e) = table.emit_traces_data(data, &position, f) {
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
