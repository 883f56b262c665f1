//! The error every reader returns: which file, where in it, and what was wrong.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Where in a file a [`ReadError`] happened.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Position {
    /// A frame of a binary recording: its 0-based index and the byte offset of its length prefix.
    Frame {
        /// 0-based frame number.
        index: usize,
        /// Byte offset of the frame's length prefix.
        byte_offset: u64,
    },
    /// A line (1-based) of a JSON file, with the column (1-based) when the JSON parser knows it.
    Line {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: Option<usize>,
    },
    /// A JSON path inside a document, such as `data[0].spans[3]`.
    Path(String),
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Frame { index, byte_offset } => {
                write!(f, "frame {index} at byte {byte_offset}")
            }
            Position::Line { line, column: Some(column) } => {
                write!(f, "line {line} column {column}")
            }
            Position::Line { line, column: None } => write!(f, "line {line}"),
            Position::Path(path) => f.write_str(path),
        }
    }
}

/// What kind of problem a [`ReadError`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadErrorKind {
    /// The file or directory could not be opened or read.
    Io,
    /// A directory holds no trace file.
    NoInputs,
    /// A binary recording ends inside a frame or its length prefix.
    Truncated,
    /// A frame is not a valid protobuf `TracesData`, or its length prefix is malformed.
    Protobuf,
    /// Invalid JSON, or JSON of the wrong shape.
    Json,
    /// JSON that is neither a Jaeger document nor OTLP/JSON.
    UnknownFormat,
    /// Well-formed input with an invalid value, such as a trace id of the wrong length.
    Invalid,
}

/// A trace input that could not be read. Displays as `<path>: <position>: <what>`.
#[derive(Debug)]
pub struct ReadError {
    path: PathBuf,
    position: Option<Position>,
    kind: ReadErrorKind,
    message: String,
    source: Option<io::Error>,
}

impl ReadError {
    pub(crate) fn new(
        path: &Path,
        position: Option<Position>,
        kind: ReadErrorKind,
        message: impl Into<String>,
    ) -> Self {
        Self { path: path.to_owned(), position, kind, message: message.into(), source: None }
    }

    pub(crate) fn io(path: &Path, doing: &str, err: io::Error) -> Self {
        Self {
            path: path.to_owned(),
            position: None,
            kind: ReadErrorKind::Io,
            message: format!("{doing}: {err}"),
            source: Some(err),
        }
    }

    /// The file (or directory) concerned.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where in the file, when the error concerns its content.
    pub fn position(&self) -> Option<&Position> {
        self.position.as_ref()
    }

    /// What kind of problem this is.
    pub fn kind(&self) -> ReadErrorKind {
        self.kind
    }

    /// What was expected or found, without the path and position.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path.display())?;
        if let Some(position) = &self.position {
            write!(f, "{position}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

/// What kind of problem a [`ReadWarning`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadWarningKind {
    /// The file ends inside its last frame (recording) or its last line (OTLP/JSON lines), as
    /// when the writer crashed mid-write: everything before was read, the rest ignored.
    TruncatedTail {
        /// Intact frames or JSON values read.
        read: usize,
        /// Spans in them.
        spans: usize,
        /// Byte offset where the cut frame or line starts.
        from_byte: u64,
        /// Bytes ignored, from `from_byte` to the end of the file.
        ignored_bytes: u64,
    },
    /// A JSON document of a known shape that holds no span, such as a Jaeger response to a
    /// search that matched nothing.
    NoSpans,
    /// Records of a raw recording that could not be decoded (damaged bytes): skipped, the rest
    /// read.
    SkippedRecords {
        /// Records skipped.
        records: u64,
    },
    /// Frames of a raw recording that were damaged (an unknown kind, a payload that does not
    /// parse) and whose length the next frame confirmed, or that read whole but did not fit
    /// where they stood (a second process frame): passed over, what they held missing, the
    /// frames after them read.
    SkippedFrames {
        /// Frames skipped.
        frames: u64,
    },
    /// The process that wrote a raw recording died and left ring files (`.rings/<name>/`
    /// beside it): the records they held that the recording lacks were read after it.
    /// `ringtrace recover` appends them to the file for good.
    Recovered {
        /// Records read from the ring files.
        records: u64,
    },
    /// The ring files a dead process left could not be read (all or some): their records are
    /// missing.
    RingFilesUnreadable,
    /// Frames of the metadata file a dead process left beside its ring files
    /// (`.rings/<name>/meta.rtrace`) that were damaged, passed over as in
    /// [`SkippedFrames`](Self::SkippedFrames): a callsite, name or thread they defined is
    /// missing, and records from the ring files that name it are skipped.
    SkippedMetadataFrames {
        /// Frames skipped.
        frames: u64,
    },
}

/// A problem that did not stop reading, for the caller to show. Displays as
/// `<path>: <position>: <what>`, like [`ReadError`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadWarning {
    path: PathBuf,
    position: Option<Position>,
    kind: ReadWarningKind,
    message: String,
}

impl ReadWarning {
    pub(crate) fn new(
        path: &Path,
        position: Option<Position>,
        kind: ReadWarningKind,
        message: impl Into<String>,
    ) -> Self {
        Self { path: path.to_owned(), position, kind, message: message.into() }
    }

    /// The file concerned.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where in the file, when the warning concerns part of it.
    pub fn position(&self) -> Option<&Position> {
        self.position.as_ref()
    }

    /// What kind of problem this is, with its counts.
    pub fn kind(&self) -> ReadWarningKind {
        self.kind
    }

    /// What happened, without the path and position.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ReadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path.display())?;
        if let Some(position) = &self.position {
            write!(f, "{position}: ")?;
        }
        f.write_str(&self.message)
    }
}
