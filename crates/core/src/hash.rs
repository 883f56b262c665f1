//! The multiplier of ringtrace's fast hashes.

/// 2⁶⁴/φ, the golden ratio's fraction of 2⁶⁴, rounded to odd: Fibonacci hashing's multiplier
/// and SplitMix64's increment. Multiplying by it spreads consecutive keys across the whole word.
pub const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
