//! What can be wrong with a propagated context, and where.

use std::fmt;

/// A fixed-position field of a `traceparent` header or of the compact byte form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Field {
    /// The format version.
    Version,
    /// The 16-byte trace id.
    TraceId,
    /// The 8-byte parent span id.
    SpanId,
    /// The trace flags.
    Flags,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Version => "version",
            Field::TraceId => "trace id",
            Field::SpanId => "span id",
            Field::Flags => "flags",
        })
    }
}

/// Why a `traceparent` header, a `baggage` header or a compact byte form was rejected.
///
/// Offsets are byte offsets into the value as received (before any whitespace is trimmed);
/// `index` is the position inside a field; baggage entries count from 0.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PropagationError {
    /// The `traceparent` header, without surrounding whitespace, has the wrong length: version
    /// `00` needs exactly 55 characters, later versions at least 55.
    #[error("traceparent: expected 55 characters, found {found}")]
    TraceparentLength {
        /// The length found, in bytes.
        found: usize,
    },
    /// The `traceparent` version is `ff`, which W3C reserves as invalid.
    #[error("traceparent: version {version:02x} is invalid")]
    TraceparentVersion {
        /// The version found.
        version: u8,
    },
    /// A `traceparent` field holds something other than lowercase hex digits.
    #[error("traceparent: {field} at offset {offset}: character {index} is not a lowercase hex digit")]
    TraceparentHex {
        /// The field.
        field: Field,
        /// Byte offset of the field in the header.
        offset: usize,
        /// Position of the bad character inside the field.
        index: usize,
    },
    /// A `traceparent` field is not followed by `-`.
    #[error("traceparent: expected '-' at offset {offset}")]
    TraceparentDelimiter {
        /// Byte offset where the `-` should be.
        offset: usize,
    },
    /// The `traceparent` trace id or span id is all zeros.
    #[error("traceparent: all-zero {field}")]
    TraceparentZero {
        /// [`Field::TraceId`] or [`Field::SpanId`].
        field: Field,
    },
    /// The `baggage` header is longer than the 8192 bytes W3C allows.
    #[error("baggage: {bytes} bytes exceeds the limit of 8192")]
    BaggageTooLong {
        /// The header's length in bytes.
        bytes: usize,
    },
    /// The `baggage` header has more than the 180 entries W3C allows.
    #[error("baggage: {entries} entries exceeds the limit of 180")]
    BaggageTooManyEntries {
        /// The number of entries.
        entries: usize,
    },
    /// A `baggage` entry is empty (for example `a=1,,b=2`).
    #[error("baggage: entry {entry} at offset {offset} is empty")]
    BaggageEmptyEntry {
        /// The entry, counting from 0.
        entry: usize,
        /// Byte offset of the entry.
        offset: usize,
    },
    /// A `baggage` entry is not a `key=value` pair.
    #[error("baggage: entry {entry} at offset {offset} has no '='")]
    BaggageNoEquals {
        /// The entry, counting from 0.
        entry: usize,
        /// Byte offset of the entry's key.
        offset: usize,
    },
    /// A `baggage` key (of an entry or of a property) is empty or holds a character outside the
    /// HTTP token set.
    #[error("baggage: entry {entry}: expected a key character at offset {offset}")]
    BaggageKey {
        /// The entry, counting from 0.
        entry: usize,
        /// Byte offset of the bad or missing character.
        offset: usize,
    },
    /// A `baggage` value holds a character W3C does not allow unencoded (space, `"`, `,`, `;`,
    /// `\`, control or non-ASCII).
    #[error("baggage: entry {entry}: character at offset {offset} is not allowed in a value")]
    BaggageValue {
        /// The entry, counting from 0.
        entry: usize,
        /// Byte offset of the bad character.
        offset: usize,
    },
    /// A `%` in a `baggage` value is not followed by two hex digits.
    #[error("baggage: entry {entry}: invalid percent escape at offset {offset}")]
    BaggageEscape {
        /// The entry, counting from 0.
        entry: usize,
        /// Byte offset of the `%`.
        offset: usize,
    },
    /// The byte form ends before a field it needs.
    #[error("bytes: truncated at offset {offset}, need {need} bytes")]
    BytesTruncated {
        /// Where the input ends (its length).
        offset: usize,
        /// The length needed to read the next field.
        need: usize,
    },
    /// The byte form has a version this code does not know.
    #[error("bytes: unknown version {version}")]
    BytesVersion {
        /// The version byte found.
        version: u8,
    },
    /// The byte form's trace id or span id is all zeros.
    #[error("bytes: all-zero {field} at offset {offset}")]
    BytesZero {
        /// [`Field::TraceId`] or [`Field::SpanId`].
        field: Field,
        /// Byte offset of the field.
        offset: usize,
    },
    /// The byte form's request id is not UTF-8.
    #[error("bytes: request id is not UTF-8 at offset {offset}")]
    BytesUtf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
}
