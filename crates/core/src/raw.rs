//! The raw recording: ring records exactly as application threads captured them, with the
//! callsite metadata they name written once, for a reader to assemble into spans.
//!
//! The drain of a recording process does no assembly and no encoding of spans: it copies each
//! ring's published records into a [`FrameKind::CompactRingRecords`] frame (the layout below,
//! each record cut after its last non-zero 8 bytes) and writes a callsite's name, target,
//! location and field names once, before any frame whose records name it. Readers replay the
//! frames through the same assembly the drain would have run. The format is documented, with
//! every byte, in `docs/raw-format.md`; this module is its one implementation (the writer's
//! encoding and the reader's decoding and checks).
//!
//! A file is a [`Header`] followed by frames, each `kind: u8`, `len: u32` (little-endian) and
//! `len` bytes. Every integer is little-endian. A reader refuses a file whose version it does not
//! know, and tells a frame cut short at the end of the file (a crash mid-write) from damage.

use std::io::{self, Read};

use tracing_core::{Level, Metadata};

use crate::record::{
    FieldValue, InlineField, InlineText, Meta, Record, CHUNK, INLINE_STR, INLINE_TEXT, MAX_STR, NUMBERS,
    TEXTS,
};
use crate::{SpanId, TraceId};

/// The first eight bytes of every raw recording.
pub const MAGIC: [u8; 8] = *b"RINGTRAC";

/// The format version this module writes. Version 2 added [`FrameKind::RingRecords`] (records
/// with their ring and position, which recovery needs), version 3
/// [`FrameKind::CompactRingRecords`] (the same, each record cut after its last non-zero 8 bytes);
/// files of versions 1 and 2 still read.
pub const VERSION: u32 = 3;

/// The oldest format version this module reads.
pub const OLDEST_VERSION: u32 = 1;

/// Bytes of one encoded record.
pub const RECORD_SIZE: usize = 64;

/// The file name extension of raw recordings.
pub const EXTENSION: &str = "rtrace";

/// Bytes of the file header: magic, version, record size.
pub const HEADER_SIZE: usize = 16;

/// Bytes of a frame's head: kind and payload length.
pub const FRAME_HEAD: usize = 5;

/// Longest frame payload a reader accepts (64 MiB): a longer length is damage, not data.
pub const MAX_FRAME: usize = 64 << 20;

/// Longest string a frame may hold (a name, a target, an attribute): 64 KiB.
pub const MAX_STRING: usize = 64 << 10;

/// Most resource attributes a process frame may hold.
pub const MAX_ATTRIBUTES: u32 = 4096;

/// The kinds of frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// The process: identity, resource attributes, settings the assembly needs. First frame.
    Process = 1,
    /// A callsite: its address (how records name it), kind, level, name, target, location and
    /// field names with their addresses.
    Callsite = 2,
    /// A field name that belongs to no callsite (`request.id` set through the API), by address.
    Name = 3,
    /// A thread: its id and name, before the first records of its ring.
    Thread = 4,
    /// The start of a drain pass, with the clock's anchor for converting the ticks that follow.
    Pass = 5,
    /// Records of one thread's ring, read in one pass: whole groups, in order.
    Records = 6,
    /// Loss and volume counters, cumulative; the last frame of this kind holds the totals.
    Counters = 7,
    /// The collector shut down at these ticks: spans still open were open at shutdown.
    End = 8,
    /// Frames that could not be written (a full disk): when, how many spans they opened, why.
    /// Written with the first frame that could be written again.
    Loss = 9,
    /// Records of one thread's ring, as [`Records`](Self::Records), with the ring's number and
    /// the position of the first record in it (records the ring ever held before it): what
    /// recovery needs to add a dead process's leftover records without repeating any.
    RingRecords = 10,
    /// Records as in [`RingRecords`](Self::RingRecords), each without its trailing zero words
    /// (see [`FrameWriter::compact_records`]): what version 3 writers write.
    CompactRingRecords = 11,
}

impl FrameKind {
    fn from_u8(b: u8) -> Option<FrameKind> {
        Some(match b {
            1 => FrameKind::Process,
            2 => FrameKind::Callsite,
            3 => FrameKind::Name,
            4 => FrameKind::Thread,
            5 => FrameKind::Pass,
            6 => FrameKind::Records,
            7 => FrameKind::Counters,
            8 => FrameKind::End,
            9 => FrameKind::Loss,
            10 => FrameKind::RingRecords,
            11 => FrameKind::CompactRingRecords,
            _ => return None,
        })
    }
}

/// The file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Format version.
    pub version: u32,
    /// Bytes per record.
    pub record_size: u32,
}

impl Header {
    /// The header this module writes.
    pub const CURRENT: Header = Header { version: VERSION, record_size: RECORD_SIZE as u32 };

    /// The header's bytes.
    pub fn to_bytes(self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.record_size.to_le_bytes());
        b
    }

    /// Parses and checks a header: the magic, a version this reader knows, its record size.
    pub fn parse(b: &[u8]) -> Result<Header, String> {
        if b.len() < HEADER_SIZE {
            return Err(format!(
                "a raw recording starts with a {HEADER_SIZE}-byte header; the file has {} bytes",
                b.len()
            ));
        }
        if b[..8] != MAGIC {
            return Err("not a raw recording (no RINGTRAC magic)".into());
        }
        let version = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        let record_size = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(format!(
                "raw recording format version {version}; this reader knows versions {OLDEST_VERSION} to {VERSION}"
            ));
        }
        if record_size as usize != RECORD_SIZE {
            return Err(format!("records of {record_size} bytes; version {version} has {RECORD_SIZE}"));
        }
        Ok(Header { version, record_size })
    }
}

/// Whether `prefix` (a file's first bytes) starts like a raw recording.
pub fn is_raw(prefix: &[u8]) -> bool {
    prefix.len() >= MAGIC.len() && prefix[..MAGIC.len()] == MAGIC
}

// ---------------------------------------------------------------------------------------------
// Records

/// Byte 0 of an open record.
pub const KIND_OPEN: u8 = tag::OPEN;
/// Byte 0 of an event record.
pub const KIND_EVENT: u8 = tag::EVENT;

/// Record kinds: byte 0 of an encoded record.
mod tag {
    pub(super) const OPEN: u8 = 1;
    pub(super) const UPDATE: u8 = 2;
    pub(super) const CLOSE: u8 = 3;
    pub(super) const EVENT: u8 = 4;
    pub(super) const REMOTE_PARENT: u8 = 5;
    pub(super) const FOLLOWS: u8 = 6;
    pub(super) const FIELD: u8 = 7;
    pub(super) const BYTES: u8 = 8;
    pub(super) const NUMBERS: u8 = 9;
    pub(super) const TEXTS: u8 = 10;
}

/// Value kinds of a field record (byte 1).
mod value_kind {
    pub(super) const I64: u8 = 1;
    pub(super) const U64: u8 = 2;
    pub(super) const F64: u8 = 3;
    pub(super) const BOOL: u8 = 4;
    pub(super) const INLINE: u8 = 5;
    pub(super) const STR: u8 = 6;
}

/// The address by which records name a callsite.
#[inline]
pub fn meta_address(meta: Meta) -> u64 {
    meta as *const Metadata<'static> as usize as u64
}

/// The address by which records name a field.
#[inline]
pub fn name_address(name: &'static str) -> u64 {
    name.as_ptr() as usize as u64
}

#[inline]
fn put64(b: &mut [u8; RECORD_SIZE], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[inline]
fn get64(b: &[u8; RECORD_SIZE], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[inline]
fn put128(b: &mut [u8; RECORD_SIZE], at: usize, v: u128) {
    b[at..at + 16].copy_from_slice(&v.to_le_bytes());
}

#[inline]
fn get128(b: &[u8; RECORD_SIZE], at: usize) -> u128 {
    let mut w = [0u8; 16];
    w.copy_from_slice(&b[at..at + 16]);
    u128::from_le_bytes(w)
}

/// Encodes `record` into the 64 bytes of the documented layout (unused bytes zero).
#[inline(always)]
pub fn encode(record: &Record, b: &mut [u8; RECORD_SIZE]) {
    *b = [0; RECORD_SIZE];
    match *record {
        Record::Open { span, parent, trace, meta, ticks, sampled, first } => {
            b[0] = tag::OPEN;
            b[1] = u8::from(sampled);
            b[2..12].copy_from_slice(&first.to_bytes());
            put64(b, 16, span.get());
            put64(b, 24, parent.map_or(0, SpanId::get));
            put128(b, 32, trace.get());
            put64(b, 48, meta_address(meta));
            put64(b, 56, ticks);
        }
        Record::Update { span } => {
            b[0] = tag::UPDATE;
            put64(b, 8, span.get());
        }
        Record::Close { span, ticks } => {
            b[0] = tag::CLOSE;
            put64(b, 8, span.get());
            put64(b, 16, ticks);
        }
        Record::Event { span, meta, ticks, first } => {
            b[0] = tag::EVENT;
            b[2..32].copy_from_slice(&first.to_bytes());
            put64(b, 32, span.get());
            put64(b, 40, meta_address(meta));
            put64(b, 48, ticks);
        }
        Record::RemoteParent { span, trace, parent, sampled } => {
            b[0] = tag::REMOTE_PARENT;
            b[1] = u8::from(sampled);
            put64(b, 8, span.get());
            put64(b, 16, parent.get());
            put128(b, 24, trace.get());
        }
        Record::Follows { span, follows, trace } => {
            b[0] = tag::FOLLOWS;
            put64(b, 8, span.get());
            put64(b, 16, follows.get());
            put128(b, 24, trace.get());
        }
        Record::Field { name, value } => {
            b[0] = tag::FIELD;
            b[4..8].copy_from_slice(&(name.len() as u32).to_le_bytes());
            put64(b, 8, name_address(name));
            match value {
                FieldValue::I64(v) => put64(b, 16, v as u64),
                FieldValue::U64(v) => put64(b, 16, v),
                FieldValue::F64(v) => put64(b, 16, v.to_bits()),
                FieldValue::Bool(v) => b[16] = u8::from(v),
                FieldValue::Inline { len, bytes } => {
                    b[2] = len;
                    b[16..16 + INLINE_STR].copy_from_slice(&bytes);
                }
                FieldValue::Str { len } => b[16..20].copy_from_slice(&len.to_le_bytes()),
            }
            b[1] = match value {
                FieldValue::I64(_) => value_kind::I64,
                FieldValue::U64(_) => value_kind::U64,
                FieldValue::F64(_) => value_kind::F64,
                FieldValue::Bool(_) => value_kind::BOOL,
                FieldValue::Inline { .. } => value_kind::INLINE,
                FieldValue::Str { .. } => value_kind::STR,
            };
        }
        Record::Bytes(chunk) => {
            b[0] = tag::BYTES;
            b[16..16 + CHUNK].copy_from_slice(&chunk);
        }
        Record::Numbers(numbers) => {
            b[0] = tag::NUMBERS;
            for (k, n) in numbers.iter().enumerate() {
                b[4 + 10 * k..14 + 10 * k].copy_from_slice(&n.to_bytes());
            }
        }
        Record::Texts(texts) => {
            b[0] = tag::TEXTS;
            for (k, t) in texts.iter().enumerate() {
                b[4 + 30 * k..34 + 30 * k].copy_from_slice(&t.to_bytes());
            }
        }
    }
}

/// One record in the documented layout: what rings hold, 64 bytes on a cache line of their own.
/// Application threads write records in this form, so that the drain copies them to a
/// recording with no encoding (only their trailing zeros cut) and a ring file left by a dead
/// process reads like a recording.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct RawRecord(pub [u8; RECORD_SIZE]);

const _: () = assert!(std::mem::size_of::<RawRecord>() == RECORD_SIZE);

impl std::fmt::Debug for RawRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RawRecord(kind {}, ", self.0[0])?;
        for b in &self.0[1..] {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

impl RawRecord {
    /// `record`, encoded.
    #[inline(always)]
    pub fn new(record: &Record) -> RawRecord {
        let mut r = RawRecord([0; RECORD_SIZE]);
        encode(record, &mut r.0);
        r
    }

    /// Its kind (byte 0).
    #[inline]
    pub fn kind(&self) -> u8 {
        self.0[0]
    }

    /// Whether it starts a group (open, update, close, event, remote parent, follows).
    #[inline]
    pub fn is_header(&self) -> bool {
        (tag::OPEN..=tag::FOLLOWS).contains(&self.0[0])
    }

    /// An open record's sampled flag; `None` for other kinds.
    #[inline]
    pub fn open_sampled(&self) -> Option<bool> {
        (self.0[0] == tag::OPEN).then_some(self.0[1] != 0)
    }

    /// Whether it is an event record.
    #[inline]
    pub fn is_event(&self) -> bool {
        self.0[0] == tag::EVENT
    }

    /// The callsite address an open or event record names.
    #[inline]
    pub fn callsite_address(&self) -> Option<u64> {
        match self.0[0] {
            tag::OPEN => Some(get64(&self.0, 48)),
            tag::EVENT => Some(get64(&self.0, 40)),
            _ => None,
        }
    }

    /// The field name (address and length) a field record names.
    #[inline]
    pub fn field_name(&self) -> Option<(u64, u32)> {
        (self.0[0] == tag::FIELD)
            .then(|| (get64(&self.0, 8), u32::from_le_bytes([self.0[4], self.0[5], self.0[6], self.0[7]])))
    }

    /// The ticks of an open, close or event record.
    #[inline]
    pub fn ticks(&self) -> Option<u64> {
        match self.0[0] {
            tag::OPEN => Some(get64(&self.0, 56)),
            tag::CLOSE => Some(get64(&self.0, 16)),
            tag::EVENT => Some(get64(&self.0, 48)),
            _ => None,
        }
    }

    /// Sets an open record's first field (nothing for other kinds).
    #[inline]
    pub fn set_open_first(&mut self, first: InlineField) {
        if self.0[0] == tag::OPEN {
            self.0[2..12].copy_from_slice(&first.to_bytes());
        }
    }

    /// Sets an event record's first field (nothing for other kinds).
    #[inline]
    pub fn set_event_first(&mut self, first: InlineText) {
        if self.0[0] == tag::EVENT {
            self.0[2..32].copy_from_slice(&first.to_bytes());
        }
    }

    /// Sets a long-string field record's length (nothing for other records).
    #[inline]
    pub fn set_str_len(&mut self, len: u32) {
        if self.0[0] == tag::FIELD && self.0[1] == value_kind::STR {
            self.0[16..20].copy_from_slice(&len.to_le_bytes());
        }
    }

    /// Sets place `k` of a numbers record (nothing for other kinds or places).
    #[inline]
    pub fn set_number(&mut self, k: usize, value: InlineField) {
        if self.0[0] == tag::NUMBERS && k < NUMBERS {
            self.0[4 + 10 * k..14 + 10 * k].copy_from_slice(&value.to_bytes());
        }
    }

    /// Sets place `k` of a texts record (nothing for other kinds or places).
    #[inline]
    pub fn set_text(&mut self, k: usize, value: InlineText) {
        if self.0[0] == tag::TEXTS && k < TEXTS {
            self.0[4 + 30 * k..34 + 30 * k].copy_from_slice(&value.to_bytes());
        }
    }

    /// A record of zeros (of no kind).
    pub const ZERO: RawRecord = RawRecord([0; RECORD_SIZE]);

    /// Makes a record of zeros an empty texts record, for [`put_text`](Self::put_text): with
    /// both places put, it is [`Record::Texts`] with those [`InlineText`]s, encoded.
    ///
    /// The capture path's way of writing a short string: the text is copied once, into the
    /// record in its ring slot, with no call to `memcpy` (`benches/README.md`, "Callsites written
    /// as they register; strings copied once, into their records").
    #[inline(always)]
    pub fn begin_texts(&mut self) {
        self.0[0] = tag::TEXTS;
    }

    /// A [`Record::Bytes`] chunk holding `bytes` (at most [`CHUNK`]; the rest is zero), as
    /// [`Record::chunk`] encodes, the bytes copied once.
    #[inline(always)]
    pub fn chunk(bytes: &[u8]) -> RawRecord {
        let mut r = RawRecord::ZERO;
        r.0[0] = tag::BYTES;
        let n = bytes.len().min(CHUNK);
        copy_short(&mut r.0[16..16 + CHUNK], &bytes[..n]);
        r
    }

    /// Puts `text` as field number `index` in place `k` of a texts record whose place `k` is
    /// still empty (all zero, as [`begin_texts`](Self::begin_texts) leaves both): the bytes
    /// after the text stay zero. Returns `false`, changing nothing, for other kinds, places, or
    /// a text longer than [`INLINE_TEXT`] bytes.
    #[inline(always)]
    pub fn put_text(&mut self, k: usize, index: u8, text: &[u8]) -> bool {
        if self.0[0] != tag::TEXTS || k >= TEXTS || text.len() > INLINE_TEXT {
            return false;
        }
        let place = &mut self.0[4 + 30 * k..34 + 30 * k];
        place[0] = text.len() as u8 + 1;
        place[1] = index;
        copy_short(&mut place[2..], text);
        true
    }

    /// Decodes it; see [`decode`].
    #[inline]
    pub fn decode(&self, names: &dyn Names) -> Result<Record, RecordError> {
        decode(&self.0, names)
    }
}

/// Copies `src` to the start of `dst` (at least as long), for `src` of at most 64 bytes: two
/// overlapping moves of its size class, no call to `memcpy`.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    debug_assert!(n <= 64 && n <= dst.len());
    if n >= 32 {
        dst[..32].copy_from_slice(&src[..32]);
        dst[n - 32..n].copy_from_slice(&src[n - 32..]);
    } else if n >= 16 {
        dst[..16].copy_from_slice(&src[..16]);
        dst[n - 16..n].copy_from_slice(&src[n - 16..]);
    } else if n >= 8 {
        dst[..8].copy_from_slice(&src[..8]);
        dst[n - 8..n].copy_from_slice(&src[n - 8..]);
    } else if n >= 4 {
        dst[..4].copy_from_slice(&src[..4]);
        dst[n - 4..n].copy_from_slice(&src[n - 4..]);
    } else if n > 0 {
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
}

/// Passes to `push`, in order, the records encoding string field `name` = `s` (truncated to
/// [`MAX_STR`]), in the recording's layout: the records of [`push_str_field`], encoded, with
/// the text copied once, straight into them.
///
/// [`push_str_field`]: crate::record::push_str_field
#[inline(always)]
pub fn push_str_field_raw(name: &'static str, s: &str, mut push: impl FnMut(RawRecord)) {
    let s = crate::record::truncate_str(s, MAX_STR).as_bytes();
    let mut header = RawRecord::ZERO;
    let b = &mut header.0;
    b[0] = tag::FIELD;
    b[4..8].copy_from_slice(&(name.len() as u32).to_le_bytes());
    put64(b, 8, name_address(name));
    if s.len() <= INLINE_STR {
        b[1] = value_kind::INLINE;
        b[2] = s.len() as u8;
        copy_short(&mut b[16..16 + INLINE_STR], s);
        push(header);
        return;
    }
    b[1] = value_kind::STR;
    b[16..20].copy_from_slice(&(s.len() as u32).to_le_bytes());
    push(header);
    for chunk in s.chunks(CHUNK) {
        push(RawRecord::chunk(chunk));
    }
}

/// Copies the record `b` to `dst` and returns its 8-byte words up to the last one that is not
/// zero (at least one).
///
/// With SSE2 (every x86-64 processor has it), 16 bytes are compared at a time, in the registers
/// the copy loads them into. The drain compacts every record it copies: a record cost it 72
/// instructions with the words counted one by one, 60 with SSE2 (`benches/README.md`, "The
/// drain's compaction with SSE2"), and the drain 129 instructions a span of one integer field
/// before the copy and the count shared their loads, 92 after ("The drain's compaction without
/// the vector's checks; formatted values packed in place").
///
/// # Safety
///
/// `dst` must be valid for writes of `RECORD_SIZE` bytes, and not overlap `b`.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
unsafe fn copy_record(b: &[u8; RECORD_SIZE], dst: *mut u8) -> usize {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi32, _mm_loadu_si128, _mm_movemask_epi8, _mm_packs_epi16, _mm_packs_epi32,
        _mm_setzero_si128, _mm_storeu_si128,
    };
    const _: () = assert!(RECORD_SIZE == 64, "a bit for each 4 bytes of a record, in 16 bits");
    let (src, dst) = (b.as_ptr().cast::<__m128i>(), dst.cast::<__m128i>());
    // SAFETY: compiled only where SSE2 is enabled (`target_feature`), so the instructions exist;
    // the loads read `b`'s 64 bytes (no alignment needed).
    let v = unsafe { [0, 1, 2, 3].map(|i| _mm_loadu_si128(src.add(i))) };
    // Bit `i` set where bytes `4i..4i + 4` are zero: each 4 bytes compared as one lane (all ones
    // where zero), the lanes narrowed to bytes (saturating, so all ones stay all ones and zero
    // stays zero), then one bit taken from each byte.
    // SAFETY: as for the loads.
    let zeros = unsafe {
        let z = _mm_setzero_si128();
        let [z0, z1, z2, z3] = v.map(|v| _mm_cmpeq_epi32(v, z));
        _mm_movemask_epi8(_mm_packs_epi16(_mm_packs_epi32(z0, z1), _mm_packs_epi32(z2, z3))) as u32
    };
    // All stored once every load is done: a store first might write `b` as far as the compiler
    // knows, and make it load `b` again.
    for (i, &v) in v.iter().enumerate() {
        // SAFETY: as for the loads; the store writes 16 of the 64 bytes the caller vouches for
        // at `dst`.
        unsafe { _mm_storeu_si128(dst.add(i), v) };
    }
    // The first 4 bytes count as used: an all-zero record keeps one word. The words are the
    // 4-byte lanes up to the last used one, halved, rounded up.
    let used = !zeros & 0xffff | 1;
    ((u32::BITS + 1 - used.leading_zeros()) / 2) as usize
}

/// [`copy_record`] without SSE2: a copy, then the words counted one by one.
///
/// # Safety
///
/// As [`copy_record`]'s.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline]
unsafe fn copy_record(b: &[u8; RECORD_SIZE], dst: *mut u8) -> usize {
    // SAFETY: the caller vouches for `RECORD_SIZE` bytes at `dst`, apart from `b`.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), dst, RECORD_SIZE) };
    used_words_by_word(b)
}

/// The 8-byte words of `b` up to its last one that is not zero (at least one), as
/// [`copy_record`] counts them.
#[cfg(test)]
fn used_words(b: &[u8; RECORD_SIZE]) -> usize {
    let mut copy = [0u8; RECORD_SIZE];
    // SAFETY: `copy` is `RECORD_SIZE` bytes of its own.
    let used = unsafe { copy_record(b, copy.as_mut_ptr()) };
    assert_eq!(&copy, b, "the record copied whole");
    used
}

/// [`copy_record`]'s count, a word at a time (without SSE2, and the tests' reference).
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
#[inline]
fn used_words_by_word(b: &[u8; RECORD_SIZE]) -> usize {
    let mut nonzero = 1u32;
    for (i, w) in b.chunks_exact(8).enumerate() {
        let w = u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        nonzero |= u32::from(w != 0) << i;
    }
    (u32::BITS - nonzero.leading_zeros()) as usize
}

/// A compact record's first byte, and the 8-byte words it keeps, for a record of kind byte
/// `kind` with `used` words up to its last that is not zero: the kind in bits 0–3, the words
/// less one in bits 4–6; a kind that does not fit is kept as kind 0 with all eight words (see
/// [`FrameWriter::compact_records`]).
#[inline]
fn compact_head(kind: u8, used: usize) -> (u8, usize) {
    match kind {
        kind @ 0..16 => (kind | ((used as u8 - 1) << 4), used),
        _ => (7 << 4, 8),
    }
}

/// Expands the compact records of `b` (a [`FrameKind::CompactRingRecords`] payload past its
/// head) into `out`, 64 bytes each, zero past what each kept. On damage — a record longer than
/// what is left, a head with bit 7 set, or more records than a frame holds
/// ([`FRAME_RECORDS_MAX`]: a frame of 8-byte records would otherwise expand eightfold) — `out`
/// holds the records before it, and the damage is returned. A kind no writer writes is
/// expanded as it is, for decoding to refuse, as in a ring records frame.
fn expand_compact(b: &[u8], out: &mut Vec<u8>) -> Option<String> {
    out.clear();
    let mut at = 0;
    while at < b.len() {
        let head = b[at];
        let (kind, len) = (head & 15, 8 * (usize::from(head >> 4 & 7) + 1));
        let n = out.len() / RECORD_SIZE;
        if head & 0x80 != 0 {
            return Some(format!("compact record {n} at byte {at} of its records has bit 7 of its head set"));
        }
        if n == FRAME_RECORDS_MAX {
            return Some(format!(
                "more than {FRAME_RECORDS_MAX} compact records, from byte {at} of its records"
            ));
        }
        let Some(kept) = b.get(at..at + len) else {
            return Some(format!(
                "compact record {n} at byte {at} of its records keeps {len} bytes; {} are left",
                b.len() - at
            ));
        };
        out.push(kind);
        out.extend_from_slice(&kept[1..]);
        out.resize(out.len() + RECORD_SIZE - len, 0);
        at += len;
    }
    None
}

/// Records per records frame, about: a frame ends at the first group header past this many
/// (1 MiB of records).
pub const FRAME_RECORDS: usize = 1 << 14;

/// Records per records frame at most, group boundary or not (a damaged ring with no header for
/// a long stretch): 8 MiB, far below [`MAX_FRAME`].
pub const FRAME_RECORDS_MAX: usize = 1 << 17;

/// Where the records frame that starts at record `start` of `total` ends: at the first group
/// header (`is_header(i)`) at or past [`FRAME_RECORDS`] records, or after [`FRAME_RECORDS_MAX`]
/// records, or at `total`. Whole groups go to a frame whenever a header comes in time.
pub fn frame_end(start: usize, total: usize, is_header: impl Fn(usize) -> bool) -> usize {
    let most = (start + FRAME_RECORDS_MAX).min(total);
    let mut end = (start + FRAME_RECORDS).min(most);
    while end < most && !is_header(end) {
        end += 1;
    }
    end
}

/// Decodes `records` (whole groups) into `out` through `names`. A group whose header does not
/// decode is skipped whole, so that its field records are never taken for another group's; so
/// is what follows a record whose kind byte is damaged (it may have been a header), up to the
/// next header; a field record that does not decode otherwise is skipped alone. `bad` is called
/// with the index (in `records`) and error of every record skipped.
pub fn decode_groups<'a>(
    records: impl IntoIterator<Item = &'a RawRecord>,
    names: &dyn Names,
    out: &mut Vec<Record>,
    bad: &mut dyn FnMut(usize, RecordError),
) {
    let mut skipping = false;
    for (i, r) in records.into_iter().enumerate() {
        let header = r.is_header();
        if skipping && !header {
            bad(i, RecordError::Orphan);
            continue;
        }
        match r.decode(names) {
            Ok(record) => {
                skipping = false;
                out.push(record);
            }
            Err(e) => {
                skipping = header || matches!(e, RecordError::Kind(_));
                bad(i, e);
            }
        }
    }
}

/// Why an encoded record could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Byte 0 is no record kind.
    #[error("unknown record kind {0}")]
    Kind(u8),
    /// A span, parent or trace id is zero.
    #[error("a zero {0} id")]
    ZeroId(&'static str),
    /// A callsite address that no callsite frame defined.
    #[error("callsite {0:#x} is not defined by any callsite frame")]
    UnknownCallsite(u64),
    /// A field name address that no callsite or name frame defined.
    #[error("field name {0:#x} is not defined by any callsite or name frame")]
    UnknownName(u64),
    /// A byte outside its range (a flag, a value kind, a length).
    #[error("{0} out of range")]
    Range(&'static str),
    /// A field record of a group whose header could not be decoded.
    #[error("a field record of a group whose header could not be decoded")]
    Orphan,
}

/// What a reader knows of the callsites and names a recording defines.
pub trait Names {
    /// The callsite at `address`.
    fn callsite(&self, address: u64) -> Option<Meta>;
    /// The field name at `address`, of `len` bytes.
    fn name(&self, address: u64, len: u32) -> Option<&'static str>;
}

fn span_at(b: &[u8; RECORD_SIZE], at: usize, what: &'static str) -> Result<SpanId, RecordError> {
    SpanId::new(get64(b, at)).ok_or(RecordError::ZeroId(what))
}

fn trace_at(b: &[u8; RECORD_SIZE], at: usize) -> Result<TraceId, RecordError> {
    TraceId::new(get128(b, at)).ok_or(RecordError::ZeroId("trace"))
}

fn flag(b: u8, what: &'static str) -> Result<bool, RecordError> {
    match b {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(RecordError::Range(what)),
    }
}

fn callsite_at(b: &[u8; RECORD_SIZE], at: usize, names: &dyn Names) -> Result<Meta, RecordError> {
    let address = get64(b, at);
    names.callsite(address).ok_or(RecordError::UnknownCallsite(address))
}

/// Decodes one record of the documented layout, naming callsites and fields through `names`.
/// Checks every id, flag, kind and length: bad bytes give an error, never a bad record.
pub fn decode(b: &[u8; RECORD_SIZE], names: &dyn Names) -> Result<Record, RecordError> {
    Ok(match b[0] {
        tag::OPEN => Record::Open {
            sampled: flag(b[1], "sampled flag")?,
            first: InlineField::from_bytes(b[2..12].try_into().unwrap_or([0; 10]))
                .ok_or(RecordError::Range("inline field"))?,
            span: span_at(b, 16, "span")?,
            parent: SpanId::new(get64(b, 24)),
            trace: trace_at(b, 32)?,
            meta: callsite_at(b, 48, names)?,
            ticks: get64(b, 56),
        },
        tag::UPDATE => Record::Update { span: span_at(b, 8, "span")? },
        tag::CLOSE => Record::Close { span: span_at(b, 8, "span")?, ticks: get64(b, 16) },
        tag::EVENT => Record::Event {
            first: InlineText::from_bytes(b[2..32].try_into().unwrap_or([0; 30]))
                .ok_or(RecordError::Range("inline text"))?,
            span: span_at(b, 32, "span")?,
            meta: callsite_at(b, 40, names)?,
            ticks: get64(b, 48),
        },
        tag::REMOTE_PARENT => Record::RemoteParent {
            sampled: flag(b[1], "sampled flag")?,
            span: span_at(b, 8, "span")?,
            parent: span_at(b, 16, "parent")?,
            trace: trace_at(b, 24)?,
        },
        tag::FOLLOWS => Record::Follows {
            span: span_at(b, 8, "span")?,
            follows: span_at(b, 16, "followed span")?,
            trace: trace_at(b, 24)?,
        },
        tag::FIELD => {
            let len = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            let address = get64(b, 8);
            let name = names.name(address, len).ok_or(RecordError::UnknownName(address))?;
            let value = match b[1] {
                value_kind::I64 => FieldValue::I64(get64(b, 16) as i64),
                value_kind::U64 => FieldValue::U64(get64(b, 16)),
                value_kind::F64 => FieldValue::F64(f64::from_bits(get64(b, 16))),
                value_kind::BOOL => FieldValue::Bool(flag(b[16], "boolean")?),
                value_kind::INLINE => {
                    if usize::from(b[2]) > INLINE_STR {
                        return Err(RecordError::Range("inline string length"));
                    }
                    let mut bytes = [0u8; INLINE_STR];
                    bytes.copy_from_slice(&b[16..16 + INLINE_STR]);
                    FieldValue::Inline { len: b[2], bytes }
                }
                value_kind::STR => {
                    let len = u32::from_le_bytes([b[16], b[17], b[18], b[19]]);
                    if len as usize > MAX_STR {
                        return Err(RecordError::Range("string length"));
                    }
                    FieldValue::Str { len }
                }
                _ => return Err(RecordError::Range("field value kind")),
            };
            Record::Field { name, value }
        }
        tag::BYTES => {
            let mut chunk = [0u8; CHUNK];
            chunk.copy_from_slice(&b[16..16 + CHUNK]);
            Record::Bytes(chunk)
        }
        tag::NUMBERS => {
            let mut numbers = [InlineField::NONE; NUMBERS];
            for (k, n) in numbers.iter_mut().enumerate() {
                *n = InlineField::from_bytes(b[4 + 10 * k..14 + 10 * k].try_into().unwrap_or([0; 10]))
                    .ok_or(RecordError::Range("inline field"))?;
            }
            Record::Numbers(numbers)
        }
        tag::TEXTS => {
            let mut texts = [InlineText::NONE; TEXTS];
            for (k, t) in texts.iter_mut().enumerate() {
                *t = InlineText::from_bytes(b[4 + 30 * k..34 + 30 * k].try_into().unwrap_or([0; 30]))
                    .ok_or(RecordError::Range("inline text"))?;
            }
            Record::Texts(texts)
        }
        other => return Err(RecordError::Kind(other)),
    })
}

// ---------------------------------------------------------------------------------------------
// Ring files

/// The first eight bytes of a ring file.
pub const RING_MAGIC: [u8; 8] = *b"RTRCRING";

/// The ring file format version this module writes. It reads this one and version 1 (the same
/// layout, from before the header kept its thread's name: the metadata file's thread frames name
/// the threads of version 1 files).
pub const RING_VERSION: u32 = 2;

/// The oldest ring file format version this module reads.
pub const RING_VERSION_OLDEST: u32 = 1;

/// Whether a ring file of format `version` can be read here.
fn ring_version_known(version: u32) -> bool {
    (RING_VERSION_OLDEST..=RING_VERSION).contains(&version)
}

/// The file name extension of ring files.
pub const RING_EXTENSION: &str = "ring";

/// Byte offset of a ring file's write index (`u64`, below twice the capacity).
pub const RING_WRITE_AT: usize = 128;

/// Byte offset of a ring file's read position (`u64`: records freed since the ring was made).
pub const RING_READ_AT: usize = 192;

/// Byte offset of a ring file's loss counters: four `u64`, named as [`RING_LOSS_COUNTERS`] says,
/// counting what the threads writing the ring dropped over the ring's whole life. The process
/// bumps them as it drops, so that they outlive it: a recording's counters frame is at most
/// a tenth of a second old when the process is killed.
pub const RING_LOSSES_AT: usize = 256;

/// The names of a ring file's loss counters, in order, as counters frames name them.
pub const RING_LOSS_COUNTERS: [&str; 4] =
    ["dropped_spans", "dropped_closes", "dropped_events", "dropped_updates"];

/// The counters frame key that names the ring a metadata file's counters frame is about (see
/// `docs/raw-format.md`, "Ring files").
pub const RING_COUNTER_KEY: &str = "ring";

/// Byte offset of a ring file's first slot (a page, so that the slots are page-aligned).
pub const RING_SLOTS_AT: usize = 4096;

/// A ring file's header: what the process wrote when it made the ring and when a thread took it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingFileHeader {
    /// Slots (records) the ring holds.
    pub capacity: u64,
    /// The ring's number in its process.
    pub ring: u32,
    /// The thread writing it (0: none yet).
    pub thread_id: u64,
}

impl RingFileHeader {
    /// The header's first 40 bytes (the rest of the first page is zero, the indices included).
    pub fn to_bytes(self) -> [u8; 40] {
        let mut b = [0u8; 40];
        b[..8].copy_from_slice(&RING_MAGIC);
        b[8..12].copy_from_slice(&RING_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(RECORD_SIZE as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.capacity.to_le_bytes());
        b[24..28].copy_from_slice(&self.ring.to_le_bytes());
        b[32..40].copy_from_slice(&self.thread_id.to_le_bytes());
        b
    }
}

/// Byte offset of a ring file's owner thread id (`u64`).
pub const RING_THREAD_AT: usize = 32;

/// Byte offset of the owner thread's name in a ring file: a `u16`, 0 when no name was written
/// (files from before names were kept there), else 1 + the name's length in bytes; the name's
/// UTF-8 bytes follow.
pub const RING_THREAD_NAME_AT: usize = 40;

/// The most bytes of a thread's name a ring file's header keeps (up to the write index at 128);
/// a longer name is cut at a character boundary.
pub const RING_THREAD_NAME_MAX: usize = 128 - RING_THREAD_NAME_AT - 2;

/// `name` cut to at most [`RING_THREAD_NAME_MAX`] bytes at a character boundary.
pub fn ring_thread_name(name: &str) -> &str {
    let mut end = name.len().min(RING_THREAD_NAME_MAX);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// Bytes 40–127 of a ring file's header naming `name` as its thread: the length word, then the
/// name cut as [`ring_thread_name`] cuts it, then zeros.
pub fn ring_thread_name_bytes(name: &str) -> [u8; RING_THREAD_NAME_MAX + 2] {
    let name = ring_thread_name(name);
    let mut bytes = [0u8; RING_THREAD_NAME_MAX + 2];
    bytes[..2].copy_from_slice(&(name.len() as u16 + 1).to_le_bytes());
    bytes[2..2 + name.len()].copy_from_slice(name.as_bytes());
    bytes
}

/// What a ring file left by a process holds: its header and the records published and not
/// freed, oldest first, with the position of the first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingLeftover {
    /// The header.
    pub header: RingFileHeader,
    /// The owner thread's name as its header keeps it, if it keeps one (see
    /// [`RING_THREAD_NAME_AT`]); otherwise the metadata file's thread frame names the thread.
    pub thread_name: Option<String>,
    /// Records freed before the first of `records`.
    pub position: u64,
    /// The records the ring still held, whole groups as published.
    pub records: Vec<RawRecord>,
}

/// The ring number and loss counters of a ring file whose header is whole (magic, version),
/// whatever its indices and records: a ring whose records cannot be read still counted its
/// drops. `None` for a file too short or not a ring file.
pub fn ring_file_losses(b: &[u8]) -> Option<(u32, [u64; 4])> {
    if b.len() < RING_SLOTS_AT
        || b[..8] != RING_MAGIC
        || !ring_version_known(u32::from_le_bytes([b[8], b[9], b[10], b[11]]))
    {
        return None;
    }
    let u64_at = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let ring = u32::from_le_bytes([b[24], b[25], b[26], b[27]]);
    Some((ring, std::array::from_fn(|k| u64_at(RING_LOSSES_AT + 8 * k))))
}

/// Reads a ring file's bytes: checks the header, the indices and the size, and copies the
/// records the ring held. An error names what is wrong.
pub fn read_ring_file(b: &[u8]) -> Result<RingLeftover, String> {
    if b.len() < RING_SLOTS_AT {
        return Err(format!(
            "a ring file starts with a {RING_SLOTS_AT}-byte header; this one has {} bytes",
            b.len()
        ));
    }
    if b[..8] != RING_MAGIC {
        return Err("not a ring file (no RTRCRING magic)".into());
    }
    let u32_at = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let u64_at = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let version = u32_at(8);
    if !ring_version_known(version) {
        return Err(format!(
            "ring file format version {version}; this reader knows versions {RING_VERSION_OLDEST} to {RING_VERSION}"
        ));
    }
    if u32_at(12) as usize != RECORD_SIZE {
        return Err(format!("records of {} bytes; ring files have {RECORD_SIZE}", u32_at(12)));
    }
    let header = RingFileHeader { capacity: u64_at(16), ring: u32_at(24), thread_id: u64_at(RING_THREAD_AT) };
    let capacity = header.capacity;
    let slots_len = (b.len() - RING_SLOTS_AT) as u64 / RECORD_SIZE as u64;
    if capacity == 0 || capacity > slots_len {
        return Err(format!("a capacity of {capacity} records in a file with room for {slots_len}"));
    }
    let write = u64_at(RING_WRITE_AT);
    let position = u64_at(RING_READ_AT);
    if write >= 2 * capacity {
        return Err(format!("a write index of {write}, past twice the capacity ({capacity})"));
    }
    let read = position % (2 * capacity);
    let used = if write >= read { write - read } else { write + 2 * capacity - read };
    if used > capacity {
        return Err(format!(
            "{used} records between the read and the write index, more than the capacity ({capacity})"
        ));
    }
    let records = (0..used)
        .map(|k| {
            let index = (read + k) % (2 * capacity);
            let slot = if index >= capacity { index - capacity } else { index };
            let at = RING_SLOTS_AT + slot as usize * RECORD_SIZE;
            let mut r = RawRecord([0; RECORD_SIZE]);
            r.0.copy_from_slice(&b[at..at + RECORD_SIZE]);
            r
        })
        .collect();
    // A damaged name is no name: the records still read, their thread unnamed.
    let named = usize::from(u16::from_le_bytes([b[RING_THREAD_NAME_AT], b[RING_THREAD_NAME_AT + 1]]));
    let thread_name = match named.checked_sub(1) {
        Some(len) if version >= 2 && len <= RING_THREAD_NAME_MAX => {
            let at = RING_THREAD_NAME_AT + 2;
            Some(String::from_utf8_lossy(&b[at..at + len]).into_owned())
        }
        _ => None,
    };
    Ok(RingLeftover { header, thread_name, position, records })
}

// ---------------------------------------------------------------------------------------------
// Frames: writing

/// Appends frames to a buffer.
#[derive(Debug, Default)]
pub struct FrameWriter {
    /// The bytes written so far.
    pub buf: Vec<u8>,
}

impl FrameWriter {
    /// Starts a frame of `kind`; returns where its length goes, for [`end`](Self::end).
    pub fn begin(&mut self, kind: FrameKind) -> usize {
        self.buf.push(kind as u8);
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        at
    }

    /// Ends the frame begun at `at`, writing its length.
    ///
    /// # Panics
    /// If the frame is longer than [`MAX_FRAME`], which readers refuse.
    pub fn end(&mut self, at: usize) {
        let len = self.buf.len() - at - 4;
        assert!(len <= MAX_FRAME, "a frame of {len} bytes, over the limit of {MAX_FRAME}");
        self.buf[at..at + 4].copy_from_slice(&(len as u32).to_le_bytes());
    }

    /// Appends a `u8`.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// Appends a `u16`.
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a `u32`.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a `u64`.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a string: its length as a `u32`, then its bytes; cut (at a character boundary)
    /// to [`MAX_STRING`] bytes, as readers accept no longer.
    pub fn str(&mut self, s: &str) {
        let s = crate::record::truncate_str(s, MAX_STRING);
        self.u32(s.len() as u32);
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// Appends an optional string: `u32::MAX` for none.
    pub fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.str(s),
            None => self.u32(u32::MAX),
        }
    }

    /// Appends a callsite frame for `meta`.
    pub fn callsite(&mut self, meta: Meta) {
        let at = self.begin(FrameKind::Callsite);
        self.u64(meta_address(meta));
        self.u8(u8::from(meta.is_span()));
        self.u8(level_number(meta.level()));
        self.u32(meta.line().unwrap_or(u32::MAX));
        self.str(meta.name());
        self.str(meta.target());
        self.opt_str(meta.module_path());
        self.opt_str(meta.file());
        let fields = meta.fields();
        self.u16(fields.len().min(usize::from(u16::MAX)) as u16);
        for field in fields.iter().take(usize::from(u16::MAX)) {
            self.u64(name_address(field.name()));
            self.str(field.name());
        }
        self.end(at);
    }

    /// Appends a callsite frame with what another file's callsite frame held.
    pub fn callsite_info(&mut self, c: &CallsiteInfo) {
        let at = self.begin(FrameKind::Callsite);
        self.u64(c.address);
        self.u8(u8::from(c.is_span));
        self.u8(c.level);
        self.u32(c.line.unwrap_or(u32::MAX));
        self.str(&c.name);
        self.str(&c.target);
        self.opt_str(c.module_path.as_deref());
        self.opt_str(c.file.as_deref());
        self.u16(c.fields.len().min(usize::from(u16::MAX)) as u16);
        for (address, name) in c.fields.iter().take(usize::from(u16::MAX)) {
            self.u64(*address);
            self.str(name);
        }
        self.end(at);
    }

    /// Appends a name frame for `name`.
    pub fn name(&mut self, name: &'static str) {
        self.name_at(name_address(name), name);
    }

    /// Appends a name frame for the name at `address`.
    pub fn name_at(&mut self, address: u64, name: &str) {
        let at = self.begin(FrameKind::Name);
        self.u64(address);
        self.str(name);
        self.end(at);
    }

    /// Appends a thread frame.
    pub fn thread(&mut self, thread_id: u64, name: &str) {
        let at = self.begin(FrameKind::Thread);
        self.u64(thread_id);
        self.str(name);
        self.end(at);
    }

    /// Appends a pass frame with the clock's anchor.
    pub fn pass(&mut self, anchor: ClockAnchor) {
        let at = self.begin(FrameKind::Pass);
        self.u64(anchor.raw);
        self.u64(anchor.unix_ns);
        self.u64(anchor.nanos_per_2_32_ticks);
        self.end(at);
    }

    /// Appends a records frame for thread `thread_id` holding `records`, encoded.
    pub fn records<'a>(&mut self, thread_id: u64, records: impl IntoIterator<Item = &'a Record>) {
        let at = self.begin_records(thread_id);
        for r in records {
            self.record(r);
        }
        self.end(at);
    }

    /// Starts a records frame for thread `thread_id`: [`record`](Self::record) adds to it,
    /// [`end`](Self::end) ends it.
    pub fn begin_records(&mut self, thread_id: u64) -> usize {
        let at = self.begin(FrameKind::Records);
        self.u64(thread_id);
        at
    }

    /// Starts a ring records frame for thread `thread_id`: records of ring number `ring` from
    /// its `position`th record on. [`raw_records`](Self::raw_records) adds to it,
    /// [`end`](Self::end) ends it.
    pub fn begin_ring_records(&mut self, thread_id: u64, at: RingPosition) -> usize {
        self.begin_positioned(FrameKind::RingRecords, thread_id, at)
    }

    /// Starts a compact ring records frame ([`FrameKind::CompactRingRecords`]): as
    /// [`begin_ring_records`](Self::begin_ring_records), but [`compact_records`](Self::compact_records)
    /// adds to it.
    pub fn begin_compact_ring_records(&mut self, thread_id: u64, at: RingPosition) -> usize {
        self.begin_positioned(FrameKind::CompactRingRecords, thread_id, at)
    }

    /// Starts a frame of `kind` with the head both ring records frames share.
    fn begin_positioned(&mut self, kind: FrameKind, thread_id: u64, at: RingPosition) -> usize {
        let start = self.begin(kind);
        self.u64(thread_id);
        self.u32(at.ring);
        self.u64(at.position);
        start
    }

    /// Appends records already encoded to the compact ring records frame begun last, each cut
    /// after its last 8 bytes that are not all zero, and its kind byte carrying how many 8-byte
    /// words it kept: bits 0–3 the kind, bits 4–6 the words kept less one. A close record takes
    /// 24 bytes, an update 16, an open with its first field 64. A record whose kind does not
    /// fit in four bits (never written by [`encode`]) is kept whole with kind 0, which readers
    /// count as damaged, as they would the record itself.
    #[inline]
    pub fn compact_records(&mut self, records: &[RawRecord]) {
        self.compact_records_seeing(records, |_| {});
    }

    /// [`compact_records`](Self::compact_records), handing each record to `see` on the way: a
    /// writer that must look at every record (to count it) reads each once.
    #[inline]
    pub fn compact_records_seeing(&mut self, records: &[RawRecord], mut see: impl FnMut(&RawRecord)) {
        self.buf.reserve(records.len() * RECORD_SIZE);
        let mut len = self.buf.len();
        let base = self.buf.as_mut_ptr();
        for r in records {
            see(r);
            // The whole record (a copy of fixed size), then cut: cheaper than a copy of the
            // length kept (`benches/README.md`, "Peers that keep their spans too; compact
            // records"); written past the vector's length, which is set once at the end
            // ("The drain's compaction without the vector's checks; …").
            // SAFETY: the reserve above leaves room for `RECORD_SIZE` bytes a record past the
            // length the loop started at, and each record moves `len` on by at most that, so the
            // 64 bytes at `len` are within the allocation, apart from `records` (borrowed, not
            // the vector's); `base` stays valid: `self` is borrowed mutably for the whole call,
            // so neither `see` nor `records` can reach the vector to grow it.
            let words = unsafe {
                let at = base.add(len);
                let (head, words) = compact_head(r.0[0], copy_record(&r.0, at));
                *at = head;
                words
            };
            len += 8 * words;
        }
        // SAFETY: every byte below `len` was written, by the vector before the loop or by a
        // record's copy in it, and `len` is within the capacity reserved.
        unsafe { self.buf.set_len(len) };
    }

    /// Appends records already encoded to the records frame begun last.
    #[inline]
    pub fn raw_records(&mut self, records: &[RawRecord]) {
        // SAFETY: `RawRecord` is `repr(C)` around a byte array, with no padding (its size is
        // `RECORD_SIZE`, checked above): the slice's memory is `records.len() * RECORD_SIZE`
        // initialised bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(records.as_ptr().cast::<u8>(), std::mem::size_of_val(records))
        };
        self.buf.extend_from_slice(bytes);
    }

    /// Appends one encoded record to the records frame begun last.
    #[inline]
    pub fn record(&mut self, r: &Record) {
        let mut b = [0u8; RECORD_SIZE];
        encode(r, &mut b);
        self.buf.extend_from_slice(&b);
    }

    /// Appends a counters frame.
    pub fn counters<'a>(&mut self, counters: impl IntoIterator<Item = (&'a str, u64)>) {
        let at = self.begin(FrameKind::Counters);
        let count_at = self.buf.len();
        self.u16(0);
        let mut n = 0u16;
        for (name, value) in counters {
            self.str(name);
            self.u64(value);
            n += 1;
        }
        self.buf[count_at..count_at + 2].copy_from_slice(&n.to_le_bytes());
        self.end(at);
    }

    /// Appends a loss frame.
    pub fn loss(&mut self, loss: &Loss) {
        let at = self.begin(FrameKind::Loss);
        self.u64(loss.start_unix_ns);
        self.u64(loss.end_unix_ns);
        self.u64(loss.lost_spans);
        self.str(&loss.error);
        self.end(at);
    }

    /// Appends an end frame: shutdown at `ticks`.
    pub fn end_frame(&mut self, ticks: u64) {
        let at = self.begin(FrameKind::End);
        self.u64(ticks);
        self.end(at);
    }
}

/// Where a [`FrameKind::RingRecords`] frame's records sit in their ring's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RingPosition {
    /// The ring's number in its process (its file's name in the ring directory).
    pub ring: u32,
    /// Records the ring held before the first of these, since the process started.
    pub position: u64,
}

/// The process frame's content.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessInfo {
    /// The node (`host.name`).
    pub node: String,
    /// The daemon (`service.name`).
    pub daemon: String,
    /// The process id.
    pub pid: u32,
    /// Events a span keeps.
    pub span_event_limit: u32,
    /// Other resource attributes, `service.instance.id` included.
    pub attributes: Vec<(String, String)>,
}

impl FrameWriter {
    /// Appends a process frame.
    pub fn process(&mut self, p: &ProcessInfo) {
        let at = self.begin(FrameKind::Process);
        self.u32(p.pid);
        self.u32(p.span_event_limit);
        self.str(&p.node);
        self.str(&p.daemon);
        self.u32(p.attributes.len() as u32);
        for (k, v) in &p.attributes {
            self.str(k);
            self.str(v);
        }
        self.end(at);
    }
}

/// How raw ticks map to Unix time from a pass on: the tick at the anchor, the Unix time then,
/// and the nanoseconds 2³² ticks take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockAnchor {
    /// Raw ticks at the anchor.
    pub raw: u64,
    /// Unix nanoseconds at the anchor.
    pub unix_ns: u64,
    /// Nanoseconds per 2³² ticks.
    pub nanos_per_2_32_ticks: u64,
}

impl ClockAnchor {
    /// Converts raw ticks to Unix nanoseconds.
    pub fn unix_nanos(&self, raw: u64) -> u64 {
        let scale = |d: u64| {
            ((u128::from(d) * u128::from(self.nanos_per_2_32_ticks)) >> 32).min(u128::from(u64::MAX)) as u64
        };
        if raw >= self.raw {
            self.unix_ns.saturating_add(scale(raw - self.raw))
        } else {
            self.unix_ns.saturating_sub(scale(self.raw - raw))
        }
    }
}

/// The number a callsite frame gives a level: 0 `TRACE` to 4 `ERROR`.
pub fn level_number(level: &Level) -> u8 {
    match *level {
        Level::TRACE => 0,
        Level::DEBUG => 1,
        Level::INFO => 2,
        Level::WARN => 3,
        _ => 4,
    }
}

/// The level of a callsite frame's number.
pub fn level_of(n: u8) -> Option<Level> {
    Some(match n {
        0 => Level::TRACE,
        1 => Level::DEBUG,
        2 => Level::INFO,
        3 => Level::WARN,
        4 => Level::ERROR,
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------------
// Frames: reading

/// A callsite frame's content.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallsiteInfo {
    /// The address records name it by.
    pub address: u64,
    /// A span's callsite (else an event's).
    pub is_span: bool,
    /// Its level.
    pub level: u8,
    /// Its line.
    pub line: Option<u32>,
    /// Its name.
    pub name: String,
    /// Its target.
    pub target: String,
    /// Its module path.
    pub module_path: Option<String>,
    /// Its file.
    pub file: Option<String>,
    /// Its fields: address and name.
    pub fields: Vec<(u64, String)>,
}

/// A loss frame's content: frames that could not be written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loss {
    /// When the first write failed, Unix nanoseconds.
    pub start_unix_ns: u64,
    /// When writing worked again.
    pub end_unix_ns: u64,
    /// Spans opened in the lost frames.
    pub lost_spans: u64,
    /// The last write error.
    pub error: String,
}

/// One frame as read.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame<'a> {
    /// See [`FrameKind::Process`].
    Process(ProcessInfo),
    /// See [`FrameKind::Callsite`].
    Callsite(CallsiteInfo),
    /// See [`FrameKind::Name`].
    Name {
        /// Its address.
        address: u64,
        /// The name.
        name: String,
    },
    /// See [`FrameKind::Thread`].
    Thread {
        /// The thread's id.
        thread_id: u64,
        /// Its name.
        name: String,
    },
    /// See [`FrameKind::Pass`].
    Pass(ClockAnchor),
    /// See [`FrameKind::Records`], [`FrameKind::RingRecords`] and
    /// [`FrameKind::CompactRingRecords`]: the records, still encoded ([`RECORD_SIZE`] bytes each;
    /// a compact frame's expanded to that).
    Records {
        /// The thread whose ring they come from.
        thread_id: u64,
        /// The ring and position of the first record (ring records frames only).
        at: Option<RingPosition>,
        /// The encoded records.
        records: &'a [u8],
        /// Damage in a compact frame past `records`, which are the whole records before it: the
        /// rest of the frame could not be read (record boundaries are not known past it).
        damage: Option<String>,
    },
    /// See [`FrameKind::Counters`].
    Counters(Vec<(String, u64)>),
    /// See [`FrameKind::End`].
    End {
        /// Raw ticks at shutdown.
        ticks: u64,
    },
    /// See [`FrameKind::Loss`].
    Loss(Loss),
}

/// Why a raw recording could not be read further.
#[derive(Debug, thiserror::Error)]
pub enum RawError {
    /// Reading failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The header is not one this reader takes.
    #[error("{0}")]
    Header(String),
    /// The file ends inside a frame (a crash or a full disk mid-write).
    #[error("the file ends inside frame {frame} (byte {offset}), {missing} bytes short")]
    Truncated {
        /// The frame's number (0-based).
        frame: u64,
        /// Its first byte.
        offset: u64,
        /// Its bytes the file holds.
        present: u64,
        /// Bytes missing.
        missing: u64,
    },
    /// A frame is damaged.
    #[error("frame {frame} at byte {offset}: {what}")]
    Frame {
        /// The frame's number (0-based).
        frame: u64,
        /// Its first byte.
        offset: u64,
        /// What is wrong.
        what: String,
    },
}

/// Reads frames from a raw recording.
pub struct FrameReader<R> {
    input: R,
    buf: Vec<u8>,
    /// A compact frame's records, expanded to 64 bytes each.
    expanded: Vec<u8>,
    /// Bytes consumed so far.
    offset: u64,
    frame: u64,
}

impl<R: Read> FrameReader<R> {
    /// Reads and checks the header.
    pub fn new(mut input: R) -> Result<Self, RawError> {
        let mut header = [0u8; HEADER_SIZE];
        let n = read_full(&mut input, &mut header)?;
        Header::parse(&header[..n]).map_err(RawError::Header)?;
        Ok(Self { input, buf: Vec::new(), expanded: Vec::new(), offset: HEADER_SIZE as u64, frame: 0 })
    }

    /// Bytes read so far: the end of the last frame returned.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Frames returned so far.
    pub fn frames(&self) -> u64 {
        self.frame
    }

    /// The next frame; `None` at the end of the file. A frame of an unknown kind is an error
    /// (its length is still known, so a caller may go on with [`next_frame`](Self::next_frame)).
    ///
    /// A compact records frame damaged after some whole records gives those records, with the
    /// damage (`Frame::Records::damage`).
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, RawError> {
        let start = self.offset;
        let mut head = [0u8; FRAME_HEAD];
        let n = read_full(&mut self.input, &mut head)?;
        if n == 0 {
            return Ok(None);
        }
        let truncated = |present: usize, missing: usize, frame: u64| RawError::Truncated {
            frame,
            offset: start,
            present: present as u64,
            missing: missing as u64,
        };
        if n < FRAME_HEAD {
            return Err(truncated(n, FRAME_HEAD - n, self.frame));
        }
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let frame = self.frame;
        let damaged = |what: String| RawError::Frame { frame, offset: start, what };
        if len > MAX_FRAME {
            return Err(damaged(format!("a length of {len} bytes, over the limit of {MAX_FRAME}")));
        }
        self.buf.resize(len, 0);
        let got = read_full(&mut self.input, &mut self.buf)?;
        if got < len {
            return Err(truncated(FRAME_HEAD + got, len - got, frame));
        }
        self.offset = start + (FRAME_HEAD + len) as u64;
        self.frame += 1;
        let kind =
            FrameKind::from_u8(head[0]).ok_or_else(|| damaged(format!("unknown frame kind {}", head[0])))?;
        parse_frame(kind, &self.buf, &mut self.expanded).map(Some).map_err(damaged)
    }

    /// Hands each frame to `each`, with its number and first byte, passing over damaged frames
    /// as [`SkipDamage`] says (and counting them in `skip`, which `each` may also note frames
    /// in), until the file ends (`Ok(None)`) or a cut, damage or a failed read stops the reading
    /// (`Ok(Some(why))`; a cut is [`RawError::Truncated`]). An error of `each` stops it too, and
    /// is returned. [`offset`](Self::offset) is then the end of the last frame read whole.
    pub fn read_past_damage<E>(
        &mut self,
        skip: &mut SkipDamage,
        mut each: impl FnMut(Frame<'_>, u64, u64, &mut SkipDamage) -> Result<(), E>,
    ) -> Result<Option<RawError>, E> {
        loop {
            let (offset, frame_no) = (self.offset, self.frame);
            match self.next_frame() {
                Ok(frame) => {
                    if let Err(e) = skip.read(frame.as_ref()) {
                        return Ok(Some(e));
                    }
                    match frame {
                        Some(frame) => each(frame, frame_no, offset, skip)?,
                        None => return Ok(None),
                    }
                }
                Err(e) => {
                    if let Some(e) = skip.damaged(e, self.offset != offset) {
                        return Ok(Some(e));
                    }
                }
            }
        }
    }
}

/// Reading on past damaged frames. A frame of an unknown kind, or whose payload does not parse,
/// still has a length, which may be right or itself the damage: the frame is passed over only
/// once the frame after it reads whole and undamaged (or the file ends right after it), which a
/// wrong length would not give. Otherwise the first damage stops the reading: two damaged frames
/// in a row (a compact records frame with damage inside included), a damaged frame followed by a
/// cut, a length over the limit. A read that fails (an I/O error) stops it with that error.
///
/// [`FrameReader::read_past_damage`] reads by these rules; `skipped` and `first` say what it
/// passed over.
#[derive(Debug, Default)]
pub struct SkipDamage {
    /// The damaged frame just passed over, until the next frame confirms its length.
    pending: Option<RawError>,
    /// Damaged frames passed over.
    pub skipped: u64,
    /// The first of them.
    pub first: Option<RawError>,
}

impl SkipDamage {
    /// `error` came from `next_frame`; `passed` says whether the reader went past the frame (its
    /// offset moved). Returns `None` to read on, or the error that stops the reading: an I/O
    /// error as it is; else the pending damage, if a frame was being passed over (a wrong length
    /// explains what follows), else `error` itself (a cut included).
    fn damaged(&mut self, error: RawError, passed: bool) -> Option<RawError> {
        match (&error, self.pending.take()) {
            (RawError::Io(_), _) => Some(error),
            (RawError::Frame { .. }, None) if passed => {
                self.pending = Some(error);
                None
            }
            (_, pending) => Some(pending.unwrap_or(error)),
        }
    }

    /// `frame` came from `next_frame` (`None`: the end of the file). A frame passed over before
    /// it is skipped for good when it is undamaged; when it holds damage itself (a compact
    /// records frame's), the pending damage is returned: the reading stops there.
    fn read(&mut self, frame: Option<&Frame<'_>>) -> Result<(), RawError> {
        let Some(pending) = self.pending.take() else { return Ok(()) };
        if let Some(Frame::Records { damage: Some(_), .. }) = frame {
            return Err(pending);
        }
        self.note(pending);
        Ok(())
    }

    /// Counts a frame that read whole but cannot be used where it stands (a second process
    /// frame): skipped.
    pub fn note(&mut self, error: RawError) {
        self.skipped += 1;
        self.first.get_or_insert(error);
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A cursor over a frame's payload whose reads fail with what was expected.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if self.b.len() - self.at < n {
            return Err(format!("ends at byte {} of its payload, inside {what}", self.b.len()));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16, String> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &str) -> Result<u64, String> {
        let b = self.take(8, what)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Ok(u64::from_le_bytes(w))
    }
    fn str(&mut self, what: &str) -> Result<String, String> {
        let len = self.u32(what)? as usize;
        if len > MAX_STRING {
            return Err(format!("{what} of {len} bytes, over the limit of {MAX_STRING}"));
        }
        let b = self.take(len, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| format!("{what} is not UTF-8"))
    }
    fn opt_str(&mut self, what: &str) -> Result<Option<String>, String> {
        let at = self.at;
        if self.u32(what)? == u32::MAX {
            return Ok(None);
        }
        self.at = at;
        self.str(what).map(Some)
    }
    fn done(&self) -> Result<(), String> {
        if self.at != self.b.len() {
            return Err(format!("{} bytes left over after its content", self.b.len() - self.at));
        }
        Ok(())
    }
}

/// Parses a frame's payload `b`; a compact records frame's records are expanded into `expanded`,
/// which the frame then borrows.
fn parse_frame<'a>(kind: FrameKind, b: &'a [u8], expanded: &'a mut Vec<u8>) -> Result<Frame<'a>, String> {
    let mut c = Cursor { b, at: 0 };
    let frame = match kind {
        FrameKind::Process => {
            let pid = c.u32("the pid")?;
            let span_event_limit = c.u32("the span event limit")?;
            let node = c.str("the node")?;
            let daemon = c.str("the daemon")?;
            let n = c.u32("the attribute count")?;
            if n > MAX_ATTRIBUTES {
                return Err(format!("{n} resource attributes, over the limit of {MAX_ATTRIBUTES}"));
            }
            let mut attributes = Vec::new();
            for _ in 0..n {
                attributes.push((c.str("an attribute key")?, c.str("an attribute value")?));
            }
            Frame::Process(ProcessInfo { node, daemon, pid, span_event_limit, attributes })
        }
        FrameKind::Callsite => {
            let address = c.u64("the callsite address")?;
            let is_span = match c.u8("the callsite kind")? {
                0 => false,
                1 => true,
                k => return Err(format!("callsite kind {k} is neither 0 (event) nor 1 (span)")),
            };
            let level = c.u8("the level")?;
            if level_of(level).is_none() {
                return Err(format!("level {level} is not 0 (TRACE) to 4 (ERROR)"));
            }
            let line = Some(c.u32("the line")?).filter(|l| *l != u32::MAX);
            let name = c.str("the name")?;
            let target = c.str("the target")?;
            let module_path = c.opt_str("the module path")?;
            let file = c.opt_str("the file")?;
            let n = c.u16("the field count")?;
            let mut fields = Vec::with_capacity(usize::from(n));
            for _ in 0..n {
                fields.push((c.u64("a field address")?, c.str("a field name")?));
            }
            Frame::Callsite(CallsiteInfo {
                address,
                is_span,
                level,
                line,
                name,
                target,
                module_path,
                file,
                fields,
            })
        }
        FrameKind::Name => Frame::Name { address: c.u64("the name address")?, name: c.str("the name")? },
        FrameKind::Thread => {
            Frame::Thread { thread_id: c.u64("the thread id")?, name: c.str("the thread name")? }
        }
        FrameKind::Pass => Frame::Pass(ClockAnchor {
            raw: c.u64("the anchor ticks")?,
            unix_ns: c.u64("the anchor time")?,
            nanos_per_2_32_ticks: c.u64("the tick rate")?,
        }),
        FrameKind::Records | FrameKind::RingRecords => {
            let thread_id = c.u64("the thread id")?;
            let at = match kind {
                FrameKind::RingRecords => {
                    Some(RingPosition { ring: c.u32("the ring number")?, position: c.u64("the position")? })
                }
                _ => None,
            };
            let rest = b.len() - c.at;
            if rest % RECORD_SIZE != 0 {
                return Err(format!("{rest} bytes of records, not a multiple of {RECORD_SIZE}"));
            }
            let records = c.take(rest, "the records")?;
            Frame::Records { thread_id, at, records, damage: None }
        }
        FrameKind::CompactRingRecords => {
            let thread_id = c.u64("the thread id")?;
            let at = RingPosition { ring: c.u32("the ring number")?, position: c.u64("the position")? };
            let rest = b.len() - c.at;
            let damage = expand_compact(c.take(rest, "the records")?, expanded);
            Frame::Records { thread_id, at: Some(at), records: expanded.as_slice(), damage }
        }
        FrameKind::Counters => {
            let n = c.u16("the counter count")?;
            let mut counters = Vec::with_capacity(usize::from(n));
            for _ in 0..n {
                counters.push((c.str("a counter name")?, c.u64("a counter value")?));
            }
            Frame::Counters(counters)
        }
        FrameKind::End => Frame::End { ticks: c.u64("the shutdown ticks")? },
        FrameKind::Loss => Frame::Loss(Loss {
            start_unix_ns: c.u64("the loss's start")?,
            end_unix_ns: c.u64("the loss's end")?,
            lost_spans: c.u64("the lost spans")?,
            error: c.str("the error")?,
        }),
    };
    c.done()?;
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::push_str_field;
    use std::collections::HashMap;
    use tracing_core::callsite::Callsite;
    use tracing_core::field::FieldSet;
    use tracing_core::subscriber::Interest;
    use tracing_core::Kind;

    /// A short string written straight into a texts record, in either place, encodes as the
    /// [`InlineText`] of [`Record::Texts`] does, for every length a place holds; a longer one is
    /// refused and changes nothing.
    #[test]
    fn texts_written_in_place_encode_as_inline_texts_do() {
        let bytes: Vec<u8> = (1..=INLINE_TEXT as u8 + 1).map(|b| b.wrapping_mul(37) | 0x80).collect();
        for first in 0..=INLINE_TEXT {
            for second in [0, 1, 3, 4, 7, 8, 15, 16, 17, INLINE_TEXT - 1, INLINE_TEXT] {
                let (a, b) = (&bytes[..first], &bytes[bytes.len() - 1 - second..bytes.len() - 1]);
                let mut r = RawRecord::ZERO;
                r.begin_texts();
                assert!(r.put_text(0, 7, a));
                assert!(r.put_text(1, 200, b));
                let expected = RawRecord::new(&Record::Texts([
                    InlineText::new(7, a).unwrap(),
                    InlineText::new(200, b).unwrap(),
                ]));
                assert_eq!(r, expected, "lengths {first} and {second}");
            }
        }
        let long = &bytes[..INLINE_TEXT + 1];
        let mut r = RawRecord::ZERO;
        r.begin_texts();
        assert!(!r.put_text(0, 0, long), "too long");
        assert!(r.put_text(0, 0, b"x"));
        let before = r;
        assert!(!r.put_text(1, 0, long), "too long");
        assert!(!r.put_text(2, 0, b"y"), "no third place");
        assert_eq!(r, before);
        let mut numbers = RawRecord::new(&Record::Numbers([InlineField::NONE; NUMBERS]));
        assert!(!numbers.put_text(0, 0, b"y"), "not a texts record");
    }

    /// A string field's records made straight in the recording's layout are those of
    /// `push_str_field`, encoded, for every length up to a few chunks, and for a string cut at
    /// `MAX_STR` on a character boundary.
    #[test]
    fn string_fields_made_raw_encode_as_their_records_do() {
        let text: String = (0..5 * CHUNK).map(|i| char::from(b'!' + (i * 7 % 90) as u8)).collect();
        let euros = "€".repeat(MAX_STR / 3 + 1);
        let cases = (0..=text.len()).map(|n| &text[..n]).chain([euros.as_str()]);
        for s in cases {
            let (mut made, mut expected) = (Vec::new(), Vec::new());
            push_str_field_raw("field", s, |r| made.push(r));
            push_str_field("field", s, |r| expected.push(RawRecord::new(&r)));
            assert_eq!(made, expected, "a string of {} bytes", s.len());
        }
        let (name, mut header) = ("field", None);
        push_str_field_raw(name, "x", |r| header = Some(r));
        assert_eq!(header.unwrap().field_name(), Some((name_address(name), 5)));
        assert_eq!(RawRecord::chunk(b"x").field_name(), None, "not a field record");
    }

    /// Every pattern of zero and non-zero words, with the non-zero byte at each place in its
    /// word: the words kept are those up to the last non-zero one, whichever way the zero bytes
    /// are found.
    #[test]
    fn a_record_keeps_its_words_up_to_the_last_that_is_not_zero() {
        // Non-zero bytes with their top bit set and clear: a count that took a byte's top bit
        // for whether it is zero would fail on the second.
        for high in [0x80u8, 0] {
            for words in 0u32..256 {
                for at in 0..8 {
                    let mut b = [0u8; RECORD_SIZE];
                    for w in (0..8).filter(|w| words & (1 << w) != 0) {
                        b[8 * w + at] = high | (w as u8 + 1);
                    }
                    let expected = (0..8).rev().find(|w| words & (1 << w) != 0).map_or(1, |w| w + 1);
                    assert_eq!(used_words(&b), expected, "words {words:08b}, byte {at}, {high:#x}");
                    assert_eq!(used_words_by_word(&b), expected, "words {words:08b}, byte {at}, {high:#x}");
                }
            }
        }
        assert_eq!(used_words(&[0xff; RECORD_SIZE]), 8);
        assert_eq!(used_words(&[0; RECORD_SIZE]), 1);
    }

    #[test]
    fn a_ring_file_whose_records_cannot_be_read_still_gives_its_loss_counters() {
        let mut b = vec![0u8; RING_SLOTS_AT + 4 * RECORD_SIZE];
        b[..40].copy_from_slice(&RingFileHeader { capacity: 4, ring: 7, thread_id: 3 }.to_bytes());
        for (k, n) in [5u64, 0, 2, 1].into_iter().enumerate() {
            b[RING_LOSSES_AT + 8 * k..RING_LOSSES_AT + 8 * k + 8].copy_from_slice(&n.to_le_bytes());
        }
        // A write index past twice the capacity: the records cannot be read.
        b[RING_WRITE_AT..RING_WRITE_AT + 8].copy_from_slice(&9u64.to_le_bytes());
        assert!(read_ring_file(&b).unwrap_err().contains("write index"));
        assert_eq!(ring_file_losses(&b), Some((7, [5, 0, 2, 1])));
        assert_eq!(ring_file_losses(&b[..100]), None, "too short");
        b[0] = b'X';
        assert_eq!(ring_file_losses(&b), None, "not a ring file");
    }

    #[test]
    fn a_ring_file_header_names_its_thread_when_it_keeps_a_name() {
        let mut b = vec![0u8; RING_SLOTS_AT + 4 * RECORD_SIZE];
        b[..40].copy_from_slice(&RingFileHeader { capacity: 4, ring: 7, thread_id: 3 }.to_bytes());
        let set = |b: &mut [u8], stored: u16, name: &[u8]| {
            b[RING_THREAD_NAME_AT..RING_THREAD_NAME_AT + 2].copy_from_slice(&stored.to_le_bytes());
            b[RING_THREAD_NAME_AT + 2..RING_THREAD_NAME_AT + 2 + name.len()].copy_from_slice(name);
        };
        // A file from before names were kept in the header: the metadata names the thread.
        assert_eq!(read_ring_file(&b).unwrap().thread_name, None);
        set(&mut b, 1 + 20, b"conn-127.0.0.1:54321");
        let leftover = read_ring_file(&b).unwrap();
        assert_eq!(
            (leftover.header.thread_id, leftover.thread_name.as_deref()),
            (3, Some("conn-127.0.0.1:54321"))
        );
        // An unnamed thread.
        set(&mut b, 1, b"");
        assert_eq!(read_ring_file(&b).unwrap().thread_name.as_deref(), Some(""));
        // Damaged bytes are replaced, not refused: the records still read.
        set(&mut b, 1 + 3, b"a\xffb");
        assert_eq!(read_ring_file(&b).unwrap().thread_name.as_deref(), Some("a\u{fffd}b"));
        // A length past the room the header has: no name, the records still read.
        set(&mut b, 1 + RING_THREAD_NAME_MAX as u16 + 1, b"");
        assert_eq!(read_ring_file(&b).unwrap().thread_name, None);
        // Version 1 files (from before names) are read, their name bytes ignored; version 3 is
        // refused, by name.
        set(&mut b, 1 + 20, b"conn-127.0.0.1:54321");
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(read_ring_file(&b).unwrap().thread_name, None);
        assert_eq!(ring_file_losses(&b), Some((7, [0; 4])));
        b[8..12].copy_from_slice(&3u32.to_le_bytes());
        let refused = read_ring_file(&b).unwrap_err();
        assert!(refused.contains("version 3; this reader knows versions 1 to 2"), "{refused}");
        assert_eq!(ring_file_losses(&b), None);
        // What a writer keeps of a long name: whole characters, at most the room.
        let long = "é".repeat(50);
        assert_eq!(ring_thread_name(&long), "é".repeat(43));
        assert_eq!(ring_thread_name("fan-out"), "fan-out");
        // What a writer stores reads back.
        b[8..12].copy_from_slice(&RING_VERSION.to_le_bytes());
        b[RING_THREAD_NAME_AT..RING_WRITE_AT].copy_from_slice(&ring_thread_name_bytes(&long));
        assert_eq!(read_ring_file(&b).unwrap().thread_name, Some("é".repeat(43)));
    }

    struct Site;
    static SITE: Site = Site;
    static META: Metadata<'static> = Metadata::new(
        "work",
        "raw::tests",
        Level::WARN,
        Some("src/raw.rs"),
        Some(7),
        Some("raw::tests"),
        FieldSet::new(&["n", "s"], tracing_core::identify_callsite!(&SITE)),
        Kind::SPAN,
    );
    impl Callsite for Site {
        fn set_interest(&self, _: Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            &META
        }
    }

    /// Names resolved as a reader would, from the frames a writer wrote.
    #[derive(Default)]
    struct Table {
        callsites: HashMap<u64, Meta>,
        names: HashMap<u64, &'static str>,
    }

    impl Names for Table {
        fn callsite(&self, address: u64) -> Option<Meta> {
            self.callsites.get(&address).copied()
        }
        fn name(&self, address: u64, len: u32) -> Option<&'static str> {
            self.names.get(&address).copied().filter(|n| n.len() == len as usize)
        }
    }

    fn table() -> Table {
        let mut t = Table::default();
        t.callsites.insert(meta_address(&META), &META);
        for f in META.fields().iter() {
            t.names.insert(name_address(f.name()), f.name());
        }
        t
    }

    fn every_kind() -> Vec<Record> {
        let id = |n| SpanId::new(n).unwrap();
        let trace = TraceId::new(u128::MAX - 5).unwrap();
        let n = META.fields().iter().next().unwrap().name();
        let s = META.fields().iter().nth(1).unwrap().name();
        let mut numbers = [InlineField::NONE; NUMBERS];
        numbers[0] = InlineField::new(1, FieldValue::F64(-0.5)).unwrap();
        numbers[5] = InlineField::new(0, FieldValue::U64(u64::MAX)).unwrap();
        let mut texts = [InlineText::NONE; TEXTS];
        texts[1] = InlineText::new(1, b"twenty-eight bytes of text!!").unwrap();
        let mut records = vec![
            Record::Open {
                span: id(1),
                parent: Some(id(u64::MAX)),
                trace,
                meta: &META,
                ticks: 123,
                sampled: true,
                first: InlineField::new(0, FieldValue::I64(-3)).unwrap(),
            },
            Record::Open {
                span: id(2),
                parent: None,
                trace,
                meta: &META,
                ticks: 0,
                sampled: false,
                first: InlineField::NONE,
            },
            Record::Update { span: id(3) },
            Record::Close { span: id(4), ticks: u64::MAX },
            Record::Event {
                span: id(5),
                meta: &META,
                ticks: 9,
                first: InlineText::new(0, b"hello").unwrap(),
            },
            Record::RemoteParent { span: id(6), trace, parent: id(7), sampled: true },
            Record::Follows { span: id(8), follows: id(9), trace },
            Record::Field { name: n, value: FieldValue::I64(i64::MIN) },
            Record::Field { name: n, value: FieldValue::U64(7) },
            Record::Field { name: n, value: FieldValue::F64(1.5) },
            Record::Field { name: n, value: FieldValue::Bool(true) },
            Record::Numbers(numbers),
            Record::Texts(texts),
        ];
        push_str_field(s, "short", |r| records.push(r));
        push_str_field(s, &"long ".repeat(30), |r| records.push(r));
        records
    }

    #[test]
    fn every_record_kind_round_trips() {
        let t = table();
        for r in every_kind() {
            let mut b = [0u8; RECORD_SIZE];
            encode(&r, &mut b);
            let back = decode(&b, &t).unwrap_or_else(|e| panic!("{r:?}: {e}"));
            assert_eq!(format!("{back:?}"), format!("{r:?}"));
        }
    }

    #[test]
    fn patches_change_what_encoding_the_changed_record_gives() {
        let records = every_kind();
        let field = InlineField::new(1, FieldValue::Bool(true)).unwrap();
        let text = InlineText::new(1, b"patched").unwrap();
        for r in &records {
            let mut changed = *r;
            let mut raw = RawRecord::new(r);
            match &mut changed {
                Record::Open { first, .. } => *first = field,
                Record::Event { first, .. } => *first = text,
                Record::Field { value: value @ FieldValue::Str { .. }, .. } => {
                    *value = FieldValue::Str { len: 4000 }
                }
                Record::Numbers(n) => n[3] = field,
                Record::Texts(t) => t[0] = text,
                _ => {}
            }
            raw.set_open_first(field);
            raw.set_event_first(text);
            raw.set_str_len(4000);
            raw.set_number(3, field);
            raw.set_text(0, text);
            assert_eq!(raw, RawRecord::new(&changed), "{r:?}");
        }
    }

    #[test]
    fn frames_end_at_a_header_past_the_size_and_at_the_cap_whatever() {
        // Headers every 10 records: the first one at or past `FRAME_RECORDS`.
        let every_tenth = |i: usize| i % 10 == 0;
        let end = frame_end(0, 1 << 20, every_tenth);
        assert!((FRAME_RECORDS..FRAME_RECORDS + 10).contains(&end) && end % 10 == 0);
        assert_eq!(frame_end(5, 100, every_tenth), 100, "short: everything");
        // No header at all: the cap.
        assert_eq!(frame_end(3, 1 << 20, |_| false), 3 + FRAME_RECORDS_MAX);
        assert_eq!(frame_end(0, FRAME_RECORDS + 7, |_| false), FRAME_RECORDS + 7);
    }

    #[test]
    fn a_group_whose_header_does_not_decode_is_skipped_whole() {
        let t = table();
        let records = every_kind();
        let mut raw: Vec<RawRecord> = records.iter().map(RawRecord::new).collect();
        // The event (index 4) loses its callsite; the follows record (6) is followed by every
        // field record: those go with it when its trace id is zeroed.
        raw[4].0[40] ^= 0xff;
        raw[6].0[24..40].fill(0);
        let mut out = Vec::new();
        let mut skipped = Vec::new();
        decode_groups(&raw, &t, &mut out, &mut |i, e| skipped.push((i, e)));
        assert_eq!(skipped[0].0, 4);
        assert!(matches!(skipped[0].1, RecordError::UnknownCallsite(_)));
        assert_eq!(skipped[1], (6, RecordError::ZeroId("trace")));
        assert_eq!(skipped.len(), 2 + (records.len() - 7), "every field record after the follows record");
        assert!(skipped[2..].iter().all(|(_, e)| *e == RecordError::Orphan));
        assert_eq!(out.len(), 5);
    }

    #[test]
    fn damaged_records_are_errors() {
        let t = table();
        let mut b = [0u8; RECORD_SIZE];
        encode(&every_kind()[0], &mut b);
        let mut bad = b;
        bad[0] = 200;
        assert_eq!(decode(&bad, &t).unwrap_err(), RecordError::Kind(200));
        let mut bad = b;
        bad[1] = 2;
        assert_eq!(decode(&bad, &t).unwrap_err(), RecordError::Range("sampled flag"));
        let mut bad = b;
        bad[16..24].fill(0);
        assert_eq!(decode(&bad, &t).unwrap_err(), RecordError::ZeroId("span"));
        let mut bad = b;
        bad[48] ^= 0xff;
        assert!(matches!(decode(&bad, &t).unwrap_err(), RecordError::UnknownCallsite(_)));
        let mut bad = b;
        bad[2] = 9;
        assert_eq!(decode(&bad, &t).unwrap_err(), RecordError::Range("inline field"));
        // Any bytes at all: an error or a record, never a panic.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            let mut b = [0u8; RECORD_SIZE];
            for byte in &mut b {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *byte = x as u8;
            }
            b[0] = (x % 12) as u8;
            let _ = decode(&b, &t);
        }
    }

    #[test]
    fn frames_round_trip_and_cuts_are_told_from_damage() {
        let mut w = FrameWriter::default();
        w.buf.extend_from_slice(&Header::CURRENT.to_bytes());
        let process = ProcessInfo {
            node: "n1".into(),
            daemon: "d".into(),
            pid: 42,
            span_event_limit: 128,
            attributes: vec![("service.instance.id".into(), "x".into())],
        };
        w.process(&process);
        w.callsite(&META);
        w.name("request.id");
        w.thread(3, "main");
        let anchor = ClockAnchor { raw: 10, unix_ns: 1_000, nanos_per_2_32_ticks: 1 << 32 };
        w.pass(anchor);
        let records = every_kind();
        w.records(3, &records);
        let raw: Vec<RawRecord> = records.iter().map(RawRecord::new).collect();
        let at = RingPosition { ring: 2, position: 1 << 40 };
        let frame = w.begin_ring_records(3, at);
        w.raw_records(&raw);
        w.end(frame);
        let compact_at = RingPosition { ring: 2, position: (1 << 40) + raw.len() as u64 };
        let frame = w.begin_compact_ring_records(3, compact_at);
        w.compact_records(&raw);
        w.end(frame);
        w.counters([("dropped_spans", 5)]);
        let loss = Loss { start_unix_ns: 1, end_unix_ns: 2, lost_spans: 3, error: "full".into() };
        w.loss(&loss);
        w.end_frame(99);
        let bytes = w.buf.clone();
        let mut r = FrameReader::new(&bytes[..]).unwrap();
        assert_eq!(r.next_frame().unwrap(), Some(Frame::Process(process)));
        match r.next_frame().unwrap() {
            Some(Frame::Callsite(c)) => {
                assert_eq!(
                    (c.name.as_str(), c.target.as_str(), c.line, c.level, c.is_span),
                    ("work", "raw::tests", Some(7), 3, true)
                );
                assert_eq!(c.fields.iter().map(|f| f.1.as_str()).collect::<Vec<_>>(), ["n", "s"]);
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(r.next_frame().unwrap(), Some(Frame::Name { ref name, .. }) if name == "request.id")
        );
        assert!(
            matches!(r.next_frame().unwrap(), Some(Frame::Thread { thread_id: 3, ref name }) if name == "main")
        );
        assert_eq!(r.next_frame().unwrap(), Some(Frame::Pass(anchor)));
        match r.next_frame().unwrap() {
            Some(Frame::Records { thread_id: 3, records: b, at: None, damage: None }) => {
                assert_eq!(b.len(), records.len() * RECORD_SIZE)
            }
            other => panic!("{other:?}"),
        }
        match r.next_frame().unwrap() {
            Some(Frame::Records { thread_id: 3, records: b, at: Some(p), damage: None }) => {
                assert_eq!(p, at);
                let mut plain = FrameWriter::default();
                plain.records(3, &records);
                assert_eq!(b, &plain.buf[FRAME_HEAD + 8..], "the same bytes as encoding each record");
            }
            other => panic!("{other:?}"),
        }
        match r.next_frame().unwrap() {
            Some(Frame::Records { thread_id: 3, records: b, at: Some(p), damage: None }) => {
                assert_eq!(p, compact_at);
                let whole: Vec<u8> = raw.iter().flat_map(|r| r.0).collect();
                assert_eq!(b, &whole[..], "a compact frame reads back as the records whole");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r.next_frame().unwrap(), Some(Frame::Counters(vec![("dropped_spans".into(), 5)])));
        assert_eq!(r.next_frame().unwrap(), Some(Frame::Loss(loss)));
        assert_eq!(r.next_frame().unwrap(), Some(Frame::End { ticks: 99 }));
        assert_eq!(r.next_frame().unwrap(), None);
        assert_eq!(r.offset(), bytes.len() as u64);

        // Every cut inside a frame is told as a cut, with the frame that holds it.
        let mut frame_starts = vec![];
        let mut r = FrameReader::new(&bytes[..]).unwrap();
        loop {
            frame_starts.push(r.offset());
            if r.next_frame().unwrap().is_none() {
                break;
            }
        }
        for cut in HEADER_SIZE + 1..bytes.len() {
            let mut r = FrameReader::new(&bytes[..cut]).unwrap();
            let err = loop {
                match r.next_frame() {
                    Ok(Some(_)) => {}
                    Ok(None) => break None,
                    Err(e) => break Some(e),
                }
            };
            let boundary = frame_starts.contains(&(cut as u64));
            match err {
                None => assert!(boundary, "cut at {cut} read as complete"),
                Some(RawError::Truncated { offset, .. }) => {
                    assert!(!boundary);
                    assert!(offset < cut as u64);
                }
                Some(e) => panic!("cut at {cut}: {e}"),
            }
        }
    }

    /// A file of a header and one compact ring records frame (thread 1, ring 1, from position 0)
    /// holding `records`.
    fn compact_file(records: &[RawRecord]) -> FrameWriter {
        let mut w = FrameWriter::default();
        w.buf.extend_from_slice(&Header::CURRENT.to_bytes());
        let frame = w.begin_compact_ring_records(1, RingPosition { ring: 1, position: 0 });
        w.compact_records(records);
        w.end(frame);
        w
    }

    /// A compact frame keeps each record up to its last non-zero word: a close in 24 bytes, an
    /// update in 16, an open in 64; records of every kind come back whole.
    #[test]
    fn compact_records_keep_what_is_not_zero_and_read_back_whole() {
        let names = table();
        let close = RawRecord::new(&Record::Close { span: SpanId::new(5).unwrap(), ticks: 9 });
        let update = RawRecord::new(&Record::Update { span: SpanId::new(5).unwrap() });
        let open = RawRecord::new(&every_kind()[0]);
        assert_eq!(open.kind(), KIND_OPEN);
        let at = RingPosition { ring: 1, position: 0 };
        for (record, kept) in [(close, 24), (update, 16), (open, 64)] {
            let mut w = FrameWriter::default();
            let frame = w.begin_compact_ring_records(1, at);
            w.compact_records(&[record]);
            w.end(frame);
            assert_eq!(w.buf.len(), FRAME_HEAD + 20 + kept, "{record:?}");
        }
        let raw: Vec<RawRecord> = every_kind().iter().map(RawRecord::new).collect();
        let w = compact_file(&raw);
        assert!(w.buf.len() < HEADER_SIZE + FRAME_HEAD + 20 + raw.len() * RECORD_SIZE);
        let mut r = FrameReader::new(&w.buf[..]).unwrap();
        let Some(Frame::Records { records: b, .. }) = r.next_frame().unwrap() else { panic!() };
        let back: Vec<Record> =
            b.chunks_exact(RECORD_SIZE).map(|c| decode(c.try_into().unwrap(), &names).unwrap()).collect();
        assert_eq!(format!("{back:?}"), format!("{:?}", every_kind()));
    }

    proptest::proptest! {
        /// Any run of records of any kind, with any bytes and any trailing zero words, reads
        /// back from a compact frame exactly; a frame cut anywhere inside its records gives the
        /// whole records before the cut, then damage, never a panic.
        #[test]
        fn compact_frames_round_trip_any_records(
            records in proptest::collection::vec(
                (proptest::num::u8::ANY, proptest::collection::vec(proptest::num::u8::ANY, 63), 0usize..=8),
                0..40,
            ),
            cut in 0usize..4096,
        ) {
            let raw: Vec<RawRecord> = records
                .iter()
                .map(|(kind, bytes, words)| {
                    let mut b = [0u8; RECORD_SIZE];
                    b[0] = *kind;
                    b[1..].copy_from_slice(bytes);
                    b[(8 * words).max(1)..].fill(0);
                    RawRecord(b)
                })
                .collect();
            // What reads back: kinds that do not fit the head as kind 0, the rest as written.
            let expected: Vec<u8> = raw
                .iter()
                .flat_map(|r| {
                    let mut b = r.0;
                    if b[0] >= 16 {
                        b[0] = 0;
                    }
                    b
                })
                .collect();
            let at = RingPosition { ring: 1, position: 7 };
            let mut w = FrameWriter::default();
            let frame = w.begin_compact_ring_records(2, at);
            w.compact_records(&raw);
            w.end(frame);
            let payload = &w.buf[FRAME_HEAD + 20..];
            let mut out = Vec::new();
            proptest::prop_assert_eq!(expand_compact(payload, &mut out), None);
            let whole = expected;
            proptest::prop_assert_eq!(&out, &whole);
            let cut = cut.min(payload.len());
            let damage = expand_compact(&payload[..cut], &mut out);
            proptest::prop_assert!(whole.starts_with(&out));
            proptest::prop_assert_eq!(damage.is_none(), out.len() == whole.len() || cut == 0 || {
                // A cut that falls between two records is no damage: the records before it.
                let mut at = 0;
                let mut ends = vec![0];
                for r in &raw {
                    at += 8 * compact_head(r.0[0], used_words(&r.0)).1;
                    ends.push(at);
                }
                ends.contains(&cut)
            });
        }
    }

    /// Thread frames 1, 2, … as a file, each followed by the bytes `after(n)` gives (a damaged
    /// frame, or nothing).
    fn thread_frames(n: u64, after: impl Fn(u64) -> Vec<u8>) -> Vec<u8> {
        let mut w = FrameWriter::default();
        w.buf.extend_from_slice(&Header::CURRENT.to_bytes());
        for t in 1..=n {
            w.thread(t, "t");
            w.buf.extend(after(t));
        }
        w.buf
    }

    /// What a reader passing over damage reads of a file: the threads, the damaged frames
    /// skipped, and the error it stopped at.
    fn read_past_damage(bytes: impl Read) -> (Vec<u64>, u64, Option<RawError>) {
        let mut r = FrameReader::new(bytes).unwrap();
        let mut skip = SkipDamage::default();
        let mut threads = Vec::new();
        let stop = r.read_past_damage(&mut skip, |frame, _, _, _| {
            match frame {
                Frame::Thread { thread_id, .. } => threads.push(thread_id),
                Frame::Records { .. } => {}
                other => panic!("{other:?}"),
            }
            Ok::<(), ()>(())
        });
        (threads, skip.skipped, stop.unwrap())
    }

    /// Reads `bytes`, failing once `fails_at` bytes are read.
    struct FailsAt<'a> {
        bytes: &'a [u8],
        at: usize,
        fails_at: usize,
    }

    impl Read for FailsAt<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.at >= self.fails_at {
                return Err(io::Error::other("the disk went away"));
            }
            let n = buf.len().min(self.fails_at - self.at);
            buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// A frame of kind `kind` whose payload is `payload`.
    fn frame_of(kind: u8, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![kind];
        b.extend((payload.len() as u32).to_le_bytes());
        b.extend(payload);
        b
    }

    #[test]
    fn damaged_frames_are_passed_over_when_the_next_frame_confirms_their_length() {
        let unknown = frame_of(99, b"whatever it held");
        // A thread frame whose name is not UTF-8: the payload does not parse.
        let mut not_utf8 = FrameWriter::default();
        not_utf8.thread(7, "xx");
        let at = not_utf8.buf.len() - 1;
        not_utf8.buf[at] = 0xFF;
        for damaged in [&unknown, &not_utf8.buf] {
            let bytes = thread_frames(3, |t| if t == 1 { damaged.clone() } else { Vec::new() });
            let (threads, skipped, stop) = read_past_damage(&bytes[..]);
            assert_eq!((threads, skipped), (vec![1, 2, 3], 1));
            assert!(stop.is_none(), "{stop:?}");
        }
        // The last frame of the file: its length ends the file exactly.
        let (threads, skipped, stop) =
            read_past_damage(&thread_frames(2, |t| if t == 2 { unknown.clone() } else { Vec::new() })[..]);
        assert_eq!((threads, skipped), (vec![1, 2], 1));
        assert!(stop.is_none());
    }

    #[test]
    fn damage_that_leaves_the_next_frame_unknown_stops_at_the_first_damage() {
        let unknown = frame_of(99, b"whatever");
        let damage_at = |e: &Option<RawError>| match e {
            Some(RawError::Frame { frame, .. }) => *frame,
            other => panic!("{other:?}"),
        };
        // Two damaged frames in a row: the first one's length is not confirmed.
        let twice = [unknown.clone(), unknown.clone()].concat();
        let (threads, skipped, stop) =
            read_past_damage(&thread_frames(3, |t| if t == 1 { twice.clone() } else { Vec::new() })[..]);
        assert_eq!((threads, skipped, damage_at(&stop)), (vec![1], 0, 1));
        // A damaged frame, then a cut: the error is the damage, not the cut.
        let mut bytes = thread_frames(2, |t| if t == 1 { unknown.clone() } else { Vec::new() });
        bytes.pop();
        let (threads, skipped, stop) = read_past_damage(&bytes[..]);
        assert_eq!((threads, skipped, damage_at(&stop)), (vec![1], 0, 1));
        // A length over the limit: the reader cannot go past the frame.
        let mut huge = vec![4];
        huge.extend((MAX_FRAME as u32 + 1).to_le_bytes());
        let (threads, skipped, stop) =
            read_past_damage(&thread_frames(3, |t| if t == 1 { huge.clone() } else { Vec::new() })[..]);
        assert_eq!((threads, skipped, damage_at(&stop)), (vec![1], 0, 1));
        // A damaged frame, then a compact records frame with damage inside: not confirmed.
        let mut compact = FrameWriter::default();
        let frame = compact.begin_compact_ring_records(9, RingPosition { ring: 1, position: 0 });
        compact
            .compact_records(&[RawRecord::new(&Record::Close { span: SpanId::new(1).unwrap(), ticks: 5 })]);
        compact.end(frame);
        let last = compact.buf.len() - 24;
        compact.buf[last] = 3 | (7 << 4); // claims 64 bytes; 24 are left
        let then_compact = [unknown.clone(), compact.buf.clone()].concat();
        let (threads, skipped, stop) = read_past_damage(
            &thread_frames(2, |t| if t == 1 { then_compact.clone() } else { Vec::new() })[..],
        );
        assert_eq!((threads, skipped, damage_at(&stop)), (vec![1], 0, 1));
        // A read that fails while a damaged frame is pending: the failure, not the damage.
        let bytes = thread_frames(2, |t| if t == 1 { unknown.clone() } else { Vec::new() });
        let fails_at = bytes.len() - 2;
        let failing = FailsAt { bytes: &bytes, at: 0, fails_at };
        let (threads, skipped, stop) = read_past_damage(failing);
        assert_eq!((threads, skipped), (vec![1], 0));
        assert!(matches!(stop, Some(RawError::Io(_))), "{stop:?}");
        // A cut alone is a cut.
        let mut bytes = thread_frames(2, |_| Vec::new());
        bytes.pop();
        let (threads, skipped, stop) = read_past_damage(&bytes[..]);
        assert_eq!((threads, skipped), (vec![1], 0));
        assert!(matches!(stop, Some(RawError::Truncated { frame: 1, .. })), "{stop:?}");
    }

    /// A compact frame whose last record claims more bytes than are left gives the records
    /// before it and the damage, named with the record and its place, and the frames after it
    /// still read; a record whose kind byte does not fit the compact head is kept whole as kind
    /// 0, which decoding refuses.
    #[test]
    fn compact_frames_that_overrun_are_damage_and_odd_kinds_stay_damaged() {
        let close = RawRecord::new(&Record::Close { span: SpanId::new(5).unwrap(), ticks: 9 });
        let mut w = compact_file(&[close, close]);
        let last = w.buf.len() - 24;
        w.buf[last] |= 7 << 4;
        w.end_frame(5);
        let mut r = FrameReader::new(&w.buf[..]).unwrap();
        match r.next_frame().unwrap() {
            Some(Frame::Records { records: b, damage: Some(d), .. }) => {
                assert_eq!(b, &close.0[..], "the record before the damage");
                assert!(
                    d.contains("compact record 1 at byte 24") && d.contains("keeps 64 bytes; 24 are left"),
                    "{d}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r.next_frame().unwrap(), Some(Frame::End { ticks: 5 }));

        // A head with bit 7 set, which no writer sets: boundaries are not known past it; a frame
        // damaged at its first record gives nothing but the damage.
        let mut w = compact_file(&[close, close]);
        let first = w.buf.len() - 2 * 24;
        w.buf[first] |= 0x80;
        let mut r = FrameReader::new(&w.buf[..]).unwrap();
        match r.next_frame().unwrap() {
            Some(Frame::Records { records: b, damage: Some(d), .. }) => {
                assert!(b.is_empty());
                assert!(d.contains("compact record 0 at byte 0 of its records has bit 7"), "{d}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r.next_frame().unwrap(), None);

        // A frame of more 8-byte records than any frame holds: expanded up to that many, no
        // further (eight times its bytes otherwise).
        let mut b = vec![0u8; 8 * (FRAME_RECORDS_MAX + 5)];
        b.iter_mut().step_by(8).for_each(|h| *h = 3);
        let mut out = Vec::new();
        let d = expand_compact(&b, &mut out).expect("damage");
        assert_eq!(out.len(), FRAME_RECORDS_MAX * RECORD_SIZE);
        assert!(d.contains(&format!("more than {FRAME_RECORDS_MAX} compact records")), "{d}");

        let mut odd = close;
        odd.0[0] = 200;
        let mut unknown = close;
        unknown.0[0] = 12;
        let w = compact_file(&[odd, unknown]);
        let mut r = FrameReader::new(&w.buf[..]).unwrap();
        let Some(Frame::Records { records: b, damage: None, .. }) = r.next_frame().unwrap() else { panic!() };
        assert_eq!((b.len(), b[0], &b[1..RECORD_SIZE]), (2 * RECORD_SIZE, 0, &odd.0[1..]));
        assert_eq!(&b[RECORD_SIZE..], &unknown.0[..], "a kind that fits is kept as it is");
        for record in b.chunks_exact(RECORD_SIZE) {
            assert!(decode(record.try_into().unwrap(), &table()).is_err());
        }
    }

    #[test]
    fn headers_of_other_versions_and_files_are_refused() {
        let mut h = Header::CURRENT.to_bytes();
        assert_eq!(Header::parse(&h), Ok(Header::CURRENT));
        h[8] = 4;
        assert!(Header::parse(&h).unwrap_err().contains("version 4; this reader knows versions 1 to 3"));
        for old in [1, 2] {
            h[8] = old;
            assert_eq!(
                Header::parse(&h).map(|h| h.version),
                Ok(u32::from(old)),
                "version {old} files still read"
            );
        }
        assert!(Header::parse(b"RINGTRAC").unwrap_err().contains("16-byte header"));
        assert!(Header::parse(&[b'x'; 16]).unwrap_err().contains("magic"));
        assert!(matches!(FrameReader::new(&b"{\"resourceSpans\":[]}"[..]), Err(RawError::Header(_))));
        let mut w = FrameWriter::default();
        w.buf.extend_from_slice(&Header::CURRENT.to_bytes());
        w.buf.extend_from_slice(&[77, 0, 0, 0, 0]);
        let mut r = FrameReader::new(&w.buf[..]).unwrap();
        assert!(r.next_frame().unwrap_err().to_string().contains("unknown frame kind 77"));
        assert_eq!(r.next_frame().unwrap(), None, "the unknown frame's length is still used");
        let mut w = FrameWriter::default();
        w.buf.extend_from_slice(&Header::CURRENT.to_bytes());
        w.buf.extend_from_slice(&[6, 0xff, 0xff, 0xff, 0xff]);
        let err = FrameReader::new(&w.buf[..]).unwrap().next_frame().unwrap_err().to_string();
        assert!(err.contains("over the limit"), "{err}");
    }

    #[test]
    fn the_anchor_converts_both_ways() {
        let a = ClockAnchor { raw: 1_000, unix_ns: 5_000_000, nanos_per_2_32_ticks: 1 << 31 };
        assert_eq!(a.unix_nanos(3_000), 5_001_000);
        assert_eq!(a.unix_nanos(0), 4_999_500);
        assert_eq!(a.unix_nanos(u64::MAX), 5_000_000 + (u64::MAX - 1_000) / 2);
    }
}
