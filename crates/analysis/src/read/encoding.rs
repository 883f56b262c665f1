//! Text encodings of bytes found in JSON trace files: hex ids and base64 byte values.

use ringtrace_core::hex::digit as hex_digit;

/// Decodes hex digits (either case) into bytes. An odd number of digits is an error.
pub(crate) fn hex_decode(s: &str) -> Result<Vec<u8>, String> {
    if s.len() % 2 != 0 {
        return Err(format!("{s:?} has an odd number of hex digits ({})", s.len()));
    }
    s.as_bytes()
        .chunks_exact(2)
        .enumerate()
        .map(|(i, pair)| match (hex_digit(pair[0]), hex_digit(pair[1])) {
            (Some(hi), Some(lo)) => Ok(hi << 4 | lo),
            (None, _) => Err(format!("{s:?}: character {} is not a hex digit", 2 * i)),
            (_, None) => Err(format!("{s:?}: character {} is not a hex digit", 2 * i + 1)),
        })
        .collect()
}

/// Decodes hex digits into exactly `N` bytes, left-padding shorter ids with zeros (Jaeger
/// writes 64-bit trace ids as 16 digits and drops leading zeros).
pub(crate) fn hex_id<const N: usize>(s: &str) -> Result<[u8; N], String> {
    if s.is_empty() {
        return Err("empty id".into());
    }
    if s.len() > 2 * N {
        return Err(format!("{s:?} has {} hex digits, at most {} allowed", s.len(), 2 * N));
    }
    let mut out = [0u8; N];
    let mut value_end = N;
    let digits = s.as_bytes();
    // Walk from the last digit backwards, filling bytes from the right.
    let mut i = digits.len();
    while i > 0 {
        let lo = hex_digit(digits[i - 1])
            .ok_or_else(|| format!("{s:?}: character {} is not a hex digit", i - 1))?;
        let hi = if i >= 2 {
            hex_digit(digits[i - 2])
                .ok_or_else(|| format!("{s:?}: character {} is not a hex digit", i - 2))?
        } else {
            0
        };
        value_end -= 1;
        out[value_end] = hi << 4 | lo;
        i = i.saturating_sub(2);
    }
    Ok(out)
}

/// Decodes standard or URL-safe base64, with or without `=` padding (the proto3 JSON mapping
/// accepts both alphabets). Whitespace is not allowed.
pub(crate) fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    let trimmed = s.trim_end_matches('=');
    if s.len() - trimmed.len() > 2 {
        return Err(format!("base64 {s:?} has too much padding"));
    }
    let mut out = Vec::with_capacity(trimmed.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for (i, c) in trimmed.bytes().enumerate() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return Err(format!("base64 {s:?}: character {i} is not base64")),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    if bits >= 6 {
        // One leftover character carries fewer than 8 bits: not a whole byte.
        return Err(format!("base64 {s:?} has a dangling character"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_errors() {
        assert_eq!(hex_decode("00fFa1").unwrap(), vec![0, 255, 0xa1]);
        assert_eq!(hex_decode("").unwrap(), Vec::<u8>::new());
        assert!(hex_decode("abc").unwrap_err().contains("odd"));
        assert!(hex_decode("zz").unwrap_err().contains("character 0"));
    }

    #[test]
    fn ids_are_left_padded() {
        assert_eq!(hex_id::<4>("1").unwrap(), [0, 0, 0, 1]);
        assert_eq!(hex_id::<4>("abc").unwrap(), [0, 0, 0x0a, 0xbc]);
        assert_eq!(hex_id::<4>("01020304").unwrap(), [1, 2, 3, 4]);
        assert!(hex_id::<4>("0102030405").unwrap_err().contains("at most 8"));
        assert!(hex_id::<4>("").is_err());
        assert!(hex_id::<4>("1g").unwrap_err().contains("character 1"));
    }

    #[test]
    fn base64_vectors() {
        for (text, bytes) in [
            ("", &b""[..]),
            ("Zg==", b"f"),
            ("Zm8=", b"fo"),
            ("Zm9v", b"foo"),
            ("Zm9vYg", b"foob"),
            ("Zm9vYmE=", b"fooba"),
            ("Zm9vYmFy", b"foobar"),
            ("-_8=", &[0xfb, 0xff]),
            ("+/8=", &[0xfb, 0xff]),
        ] {
            assert_eq!(base64_decode(text).unwrap(), bytes, "{text}");
        }
        assert!(base64_decode("Z").is_err());
        assert!(base64_decode("Zm9v!").is_err());
        assert!(base64_decode("Zg===").is_err());
    }
}
