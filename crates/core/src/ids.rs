//! Trace and span identifiers (W3C trace context sizes) and their generation.

use std::fmt;
use std::num::{NonZeroU128, NonZeroU64};
use std::str::FromStr;

use crate::hash::{mix64, GOLDEN};

/// A 16-byte trace id; never all zeros (W3C forbids the zero id).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId(NonZeroU128);

/// An 8-byte span id; never all zeros.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpanId(NonZeroU64);

/// Why a hex id failed to parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The text does not have the id's exact length in hex digits.
    #[error("expected {expected} lowercase hex digits, found {found} characters")]
    Length {
        /// Hex digits required.
        expected: usize,
        /// Characters found.
        found: usize,
    },
    /// A character is not a lowercase hex digit.
    #[error("character {index} is not a lowercase hex digit")]
    NotHex {
        /// Byte offset of the bad character.
        index: usize,
    },
    /// The id is all zeros, which W3C trace context forbids.
    #[error("the all-zero id is invalid")]
    Zero,
}

fn parse_hex(s: &str, digits: usize) -> Result<u128, IdError> {
    if s.len() != digits {
        return Err(IdError::Length { expected: digits, found: s.len() });
    }
    crate::hex::parse_lower(s.as_bytes()).map_err(|index| IdError::NotHex { index })
}

impl TraceId {
    /// The id from its integer form; `None` for zero.
    pub const fn new(v: u128) -> Option<Self> {
        match NonZeroU128::new(v) {
            Some(n) => Some(Self(n)),
            None => None,
        }
    }
    /// The integer form.
    pub const fn get(self) -> u128 {
        self.0.get()
    }
    /// Big-endian bytes, as OTLP and W3C carry them.
    pub const fn to_bytes(self) -> [u8; 16] {
        self.0.get().to_be_bytes()
    }
    /// From big-endian bytes; `None` for the zero id.
    pub fn from_bytes(b: [u8; 16]) -> Option<Self> {
        Self::new(u128::from_be_bytes(b))
    }
    /// From 32 lowercase hex digits.
    pub fn from_hex(s: &str) -> Result<Self, IdError> {
        Self::new(parse_hex(s, 32)?).ok_or(IdError::Zero)
    }
}

impl SpanId {
    /// The id from its integer form; `None` for zero.
    pub const fn new(v: u64) -> Option<Self> {
        match NonZeroU64::new(v) {
            Some(n) => Some(Self(n)),
            None => None,
        }
    }
    /// The integer form.
    pub const fn get(self) -> u64 {
        self.0.get()
    }
    /// Big-endian bytes, as OTLP and W3C carry them.
    pub const fn to_bytes(self) -> [u8; 8] {
        self.0.get().to_be_bytes()
    }
    /// From big-endian bytes; `None` for the zero id.
    pub fn from_bytes(b: [u8; 8]) -> Option<Self> {
        Self::new(u64::from_be_bytes(b))
    }
    /// From 16 lowercase hex digits.
    pub fn from_hex(s: &str) -> Result<Self, IdError> {
        Self::new(parse_hex(s, 16)? as u64).ok_or(IdError::Zero)
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.get())
    }
}
impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceId({self})")
    }
}
impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.get())
    }
}
impl fmt::Debug for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SpanId({self})")
    }
}
impl FromStr for TraceId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        Self::from_hex(s)
    }
}
impl FromStr for SpanId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        Self::from_hex(s)
    }
}

/// A fast, non-cryptographic id generator, one per thread.
///
/// Span ids come from a per-generator counter passed through the SplitMix64 finaliser, a bijection
/// on `u64`: ids from one generator never repeat until the counter wraps. Generators are seeded
/// from a process-wide random seed plus a distinct stream number, so two threads never share a
/// counter sequence, and two processes differ by their seed.
#[derive(Debug, Clone)]
pub struct IdGenerator {
    counter: u64,
    step: u64,
    state: u64,
}

impl IdGenerator {
    /// A generator for stream `stream` of a process seeded with `seed`.
    ///
    /// Distinct streams of one seed produce disjoint span-id sequences: stream `k` counts through
    /// `seed + k + n·2^20`, so streams below 2^20 differ modulo 2^20 and never meet, and each
    /// stream repeats only after 2^44 ids.
    pub fn new(seed: u64, stream: u64) -> Self {
        Self {
            counter: seed.wrapping_add(stream & 0xf_ffff),
            step: 1 << 20,
            state: mix64(seed ^ stream.wrapping_mul(GOLDEN)) | 1,
        }
    }

    /// A generator seeded from the OS's randomness (hashing the process id, the time and an
    /// address), for stream `stream`.
    pub fn from_entropy(stream: u64) -> Self {
        Self::new(process_seed(), stream)
    }

    /// The next span id; unique within the generator's stream.
    #[inline]
    pub fn span_id(&mut self) -> SpanId {
        self.counter = self.counter.wrapping_add(self.step);
        let v = mix64(self.counter);
        // mix64 is a bijection with mix64(0) == 0, so v is zero only for counter 0.
        SpanId::new(v).unwrap_or(SpanId(NonZeroU64::MIN))
    }

    /// A new random trace id: two steps of SplitMix64 over the generator's state. The two
    /// halves do not depend on each other, so the processor computes them side by side.
    #[inline]
    pub fn trace_id(&mut self) -> TraceId {
        let s = self.state;
        self.state = s.wrapping_add(GOLDEN.wrapping_mul(2));
        let hi = mix64(s.wrapping_add(GOLDEN));
        let lo = mix64(s.wrapping_add(GOLDEN.wrapping_mul(2)));
        let v = (u128::from(hi) << 64) | u128::from(lo);
        TraceId::new(v).unwrap_or(TraceId(NonZeroU128::MIN))
    }
}

/// A seed that differs between processes and runs: the process id, the wall clock and the
/// address of a stack variable (ASLR), hashed together. Not cryptographic.
pub fn process_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::OnceLock;
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        h.write_u128(now);
        let local = 0u8;
        h.write_usize(&local as *const u8 as usize);
        h.finish()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn hex_round_trip() {
        let t = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
        assert_eq!(t.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let s = SpanId::from_hex("00f067aa0ba902b7").unwrap();
        assert_eq!(s.to_string(), "00f067aa0ba902b7");
        assert_eq!(SpanId::from_bytes(s.to_bytes()), Some(s));
        assert_eq!(TraceId::from_bytes(t.to_bytes()), Some(t));
    }

    #[test]
    fn hex_errors_name_the_problem() {
        assert_eq!(SpanId::from_hex("0000000000000000"), Err(IdError::Zero));
        assert_eq!(SpanId::from_hex("00f0"), Err(IdError::Length { expected: 16, found: 4 }));
        assert_eq!(SpanId::from_hex("00F067aa0ba902b7"), Err(IdError::NotHex { index: 2 }));
        assert!(TraceId::from_hex("zz").is_err());
    }

    #[test]
    fn streams_do_not_collide() {
        let mut seen = HashSet::new();
        for stream in 0..8 {
            let mut g = IdGenerator::new(12345, stream);
            for _ in 0..10_000 {
                assert!(seen.insert(g.span_id()), "duplicate span id");
            }
        }
    }

    #[test]
    fn trace_ids_of_many_streams_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for stream in 0..8 {
            let mut g = IdGenerator::new(42, stream);
            for _ in 0..20_000 {
                let t = g.trace_id().get();
                assert_ne!(t >> 64, t as u64 as u128, "halves are independent");
                assert!(seen.insert(t));
            }
        }
    }

    #[test]
    fn trace_ids_differ() {
        let mut g = IdGenerator::new(1, 0);
        let a = g.trace_id();
        let b = g.trace_id();
        assert_ne!(a, b);
    }
}
