//! Raw recordings (`.rtrace`): the records a ringtrace process captured, assembled into spans
//! by the subscriber's replay (the same assembly its drain runs), then read as OTLP.

use std::io::Read;

use ringtrace_subscriber::encode;
use ringtrace_subscriber::replay::{replay, ReplayError};

use super::error::{Position, ReadError, ReadErrorKind, ReadWarning, ReadWarningKind};
use super::otlp::ProcessTable;
use super::{Batch, Cut, Truncation};

/// What reading a raw recording ended with besides its spans.
pub(crate) struct RawEnding {
    pub(crate) cut: Option<Cut>,
    /// A warning for records that could not be decoded and were skipped.
    pub(crate) skipped: Option<ReadWarning>,
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
    let skipped = out.first_bad_record.map(|first| {
        ReadWarning::new(
            path,
            None,
            ReadWarningKind::SkippedRecords { records: out.bad_records },
            format!("skipped {} records that could not be decoded; the first: {first}", out.bad_records),
        )
    });
    Ok(RawEnding { cut, skipped })
}
