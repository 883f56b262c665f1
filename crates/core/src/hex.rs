//! Hexadecimal digits and the `%XX` escapes made of them.
//!
//! One reading of hex for every ringtrace crate: W3C trace context ids (lowercase only), W3C
//! baggage and `OTEL_*` variables (percent escapes of either case), and the ids of JSON trace
//! files (either case).

/// Uppercase hex digits by value, as percent-encoding writes them (RFC 3986 § 2.1).
pub const UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Lowercase hex digits by value, as W3C trace context writes ids.
pub const LOWER: &[u8; 16] = b"0123456789abcdef";

/// The value of one hex digit of either case.
#[inline]
pub fn digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The value of one lowercase hex digit: W3C trace context allows no uppercase.
#[inline]
pub fn lower_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

/// The number written by `digits`, lowercase hex, most significant first (at most 32 digits;
/// more shift the first ones out). The error is the index of the first byte that is not a
/// lowercase hex digit.
pub fn parse_lower(digits: &[u8]) -> Result<u128, usize> {
    // Sixteen digits at a time, eight in a word's lanes at once: the readers of the Parquet
    // store parse three ids a span, and this was a tenth of `deps`' time.
    let mut value = 0u128;
    for (n, chunk) in digits.chunks(16).enumerate() {
        let word =
            sixteen_digits(chunk).map_or_else(|| digits_one_by_one(chunk), Ok).map_err(|at| n * 16 + at)?;
        value = value.checked_shl(4 * chunk.len() as u32).unwrap_or(0) | u128::from(word);
    }
    Ok(value)
}

/// The value of sixteen lowercase hex digits, if `chunk` is that.
fn sixteen_digits(chunk: &[u8]) -> Option<u64> {
    let (high, low) = (chunk.get(..8)?, chunk.get(8..)?);
    let eight = |b: &[u8]| eight_digits(b.try_into().ok()?);
    Some((u64::from(eight(high)?) << 32) | u64::from(eight(low)?))
}

/// The value of eight lowercase hex digits, if `b` is that: each byte a lane of a `u64`,
/// checked against the digits' ranges and packed four bits a lane.
fn eight_digits(b: [u8; 8]) -> Option<u32> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let x = u64::from_be_bytes(b);
    if x & HIGH != 0 {
        return None;
    }
    // Each lane below 0x80, plus at most 0x50: no carry between lanes. The high bit of a lane
    // says whether its byte is `lo` or more.
    let at_least = |lo: u8| x.wrapping_add(ONES * u64::from(0x80 - lo)) & HIGH;
    let digit = at_least(b'0') & !at_least(b'9' + 1);
    let letter = at_least(b'a') & !at_least(b'f' + 1);
    if digit | letter != HIGH {
        return None;
    }
    // A digit's low four bits are its value; a letter's are 1 to 6, its value less 9.
    let v = (x & (ONES * 0x0f)) + (letter >> 7) * 9;
    let v = (v | (v >> 4)) & 0x00ff_00ff_00ff_00ff;
    let v = (v | (v >> 8)) & 0x0000_ffff_0000_ffff;
    let v = (v | (v >> 16)) & 0x0000_0000_ffff_ffff;
    Some(v as u32)
}

/// The value of up to sixteen lowercase hex digits, a digit at a time; the error is the index
/// of the first byte that is not one.
fn digits_one_by_one(chunk: &[u8]) -> Result<u64, usize> {
    let (mut word, mut bad) = (0u64, 0u8);
    for &b in chunk {
        let d = LOWER_VALUES[usize::from(b)];
        bad |= d;
        word = (word << 4) | u64::from(d & 0xf);
    }
    if bad & NOT_LOWER != 0 {
        let at = chunk.iter().position(|&b| LOWER_VALUES[usize::from(b)] & NOT_LOWER != 0);
        return Err(at.unwrap_or(0));
    }
    Ok(word)
}

/// Marks a byte that is not a lowercase hex digit in [`LOWER_VALUES`].
const NOT_LOWER: u8 = 0x80;

/// Each byte's value as a lowercase hex digit, or [`NOT_LOWER`].
const LOWER_VALUES: [u8; 256] = {
    let mut table = [NOT_LOWER; 256];
    let mut d = 0;
    while d < 16 {
        table[LOWER[d] as usize] = d as u8;
        d += 1;
    }
    table
};

/// Writes the low `out.len()` hex digits of `v` into `out`, most significant first, lowercase.
pub fn write_lower(mut v: u128, out: &mut [u8]) {
    for d in out.iter_mut().rev() {
        *d = LOWER[(v & 0xf) as usize];
        v >>= 4;
    }
}

/// Decodes `%XX` escapes (hex digits of either case); other bytes are kept as they are. The
/// error is the byte offset of a `%` not followed by two hex digits.
pub fn percent_decode(s: &[u8]) -> Result<Vec<u8>, usize> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let escaped = match s.get(i + 1..i + 3) {
                Some(&[a, b]) => digit(a).zip(digit(b)).map(|(a, b)| (a << 4) | b),
                _ => None,
            };
            out.push(escaped.ok_or(i)?);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The same value, or the same error index, as a fold over the digits one at a time,
        /// whatever the bytes (mostly hex digits, so that long valid runs are common).
        #[test]
        fn parse_lower_is_the_fold_of_its_digits(
            digits in prop::collection::vec(
                prop_oneof![8 => prop::sample::select(b"0123456789abcdef".to_vec()), 1 => any::<u8>()],
                0..40,
            )
        ) {
            let fold = digits.iter().enumerate().try_fold(0u128, |v, (index, &b)| match lower_digit(b) {
                Some(d) => Ok((v << 4) | u128::from(d)),
                None => Err(index),
            });
            prop_assert_eq!(parse_lower(&digits), fold);
        }
    }

    #[test]
    fn digits_of_either_case_and_lowercase_only() {
        for (i, &b) in UPPER.iter().enumerate() {
            assert_eq!(digit(b), Some(i as u8));
            assert_eq!(digit(LOWER[i]), Some(i as u8));
            assert_eq!(lower_digit(LOWER[i]), Some(i as u8));
        }
        assert_eq!(lower_digit(b'A'), None);
        for b in [b'g', b'G', b'/', b':', b'@', b'`', b'+', b'-', b' '] {
            assert_eq!(digit(b), None, "{}", char::from(b));
        }
    }

    #[test]
    fn parse_and_write_lowercase() {
        assert_eq!(parse_lower(b"00f067aa0ba902b7"), Ok(0x00f0_67aa_0ba9_02b7));
        assert_eq!(parse_lower(b""), Ok(0));
        assert_eq!(parse_lower(b"00F0"), Err(2));
        let id = b"4bf92f3577b34da6a3ce929d0e0e4736";
        assert_eq!(parse_lower(id), Ok(0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736));
        assert_eq!(parse_lower(&id[..20]), Ok(0x4bf9_2f35_77b3_4da6_a3ce));
        // Past 32 digits the first ones are shifted out.
        assert_eq!(
            parse_lower(b"f4bf92f3577b34da6a3ce929d0e0e47361"),
            Ok(0xbf92_f357_7b34_da6a_3ce9_29d0_e0e4_7361)
        );
        // Every byte at every place of a 16-digit run: a digit's value, or that place.
        for b in 0..=255u8 {
            for at in 0..16 {
                let mut digits = *b"0123456789abcdef";
                digits[at] = b;
                let expected = match lower_digit(b) {
                    Some(d) => Ok(0x0123_4567_89ab_cdef_u128 & !(0xf << (4 * (15 - at)))
                        | u128::from(d) << (4 * (15 - at))),
                    None => Err(at),
                };
                assert_eq!(parse_lower(&digits), expected, "{b:#x} at {at}");
            }
        }
        for bad in [b'g', b'G', b'/', b':', b'`', b' ', 0xff] {
            let mut digits = *id;
            digits[21] = bad;
            assert_eq!(parse_lower(&digits), Err(21), "{bad}");
            digits[3] = bad;
            assert_eq!(parse_lower(&digits), Err(3), "{bad}");
        }
        let mut out = [0u8; 16];
        write_lower(0x00f0_67aa_0ba9_02b7, &mut out);
        assert_eq!(&out, b"00f067aa0ba902b7");
        let mut short = [0u8; 2];
        write_lower(0x1ff, &mut short);
        assert_eq!(&short, b"ff");
    }

    #[test]
    fn percent_escapes() {
        assert_eq!(percent_decode(b"a%2Cb%2cc"), Ok(b"a,b,c".to_vec()));
        assert_eq!(percent_decode(b"%E2%82%AC"), Ok("€".as_bytes().to_vec()));
        assert_eq!(percent_decode(b"plain"), Ok(b"plain".to_vec()));
        assert_eq!(percent_decode(b"ab%zz"), Err(2));
        assert_eq!(percent_decode(b"ab%4"), Err(2));
        assert_eq!(percent_decode(b"%+f"), Err(0));
    }
}
