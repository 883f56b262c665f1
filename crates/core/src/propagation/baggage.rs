//! The W3C `baggage` header: `key=value` list members with optional `;properties`.
//!
//! Only `request.id` is read, but the whole header is validated: a header that breaks the W3C
//! grammar or limits is rejected as a whole.

use super::error::PropagationError;
use super::REQUEST_ID_KEY;
use crate::hex;

/// W3C Baggage's limit on the header's length.
pub(super) const MAX_BYTES: usize = 8192;
/// W3C Baggage's limit on the number of list members.
pub(super) const MAX_ENTRIES: usize = 180;

/// `request.id=<percent-encoded id>`, cut at a character boundary so that the header stays
/// within [`MAX_BYTES`]; `None` for an empty id.
pub(super) fn encode_request_id(id: &str) -> Option<String> {
    if id.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(REQUEST_ID_KEY.len() + 1 + id.len());
    out.push_str(REQUEST_ID_KEY);
    out.push('=');
    let mut utf8 = [0u8; 4];
    for c in id.chars() {
        let bytes = c.encode_utf8(&mut utf8).as_bytes();
        let plain = bytes.len() == 1 && is_unescaped(bytes[0]);
        let need = if plain { 1 } else { 3 * bytes.len() };
        if out.len() + need > MAX_BYTES {
            break;
        }
        if plain {
            out.push(c);
        } else {
            for b in bytes {
                out.push('%');
                out.push(char::from(hex::UPPER[usize::from(b >> 4)]));
                out.push(char::from(hex::UPPER[usize::from(b & 0xf)]));
            }
        }
    }
    Some(out)
}

/// Characters written as themselves: RFC 3986 unreserved plus a few that are safe in baggage.
fn is_unescaped(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/' | b':' | b'@')
}

/// The decoded value of the first `request.id` entry; `None` when there is none or it is empty.
pub(super) fn request_id(header: &str) -> Result<Option<String>, PropagationError> {
    if header.len() > MAX_BYTES {
        return Err(PropagationError::BaggageTooLong { bytes: header.len() });
    }
    let bytes = header.as_bytes();
    if bytes.iter().all(|&b| is_ows(b)) {
        return Ok(None);
    }
    let entries = bytes.iter().filter(|&&b| b == b',').count() + 1;
    if entries > MAX_ENTRIES {
        return Err(PropagationError::BaggageTooManyEntries { entries });
    }
    let mut found = None;
    let mut offset = 0;
    for (entry, member) in bytes.split(|&b| b == b',').enumerate() {
        let (key, value) = member_key_value(member, offset, entry)?;
        if found.is_none() && key == REQUEST_ID_KEY.as_bytes() {
            found = Some(decode(value));
        }
        offset += member.len() + 1;
    }
    Ok(found.filter(|id| !id.is_empty()))
}

/// Validates one list member starting at `offset` and returns its key and raw value.
fn member_key_value(member: &[u8], offset: usize, entry: usize) -> Result<(&[u8], &[u8]), PropagationError> {
    let mut parts = member.split(|&b| b == b';');
    let first = parts.next().unwrap_or_default();
    let (lo, hi) = trim(first);
    if lo == hi && parts.clone().next().is_none() {
        return Err(PropagationError::BaggageEmptyEntry { entry, offset });
    }
    let Some(eq) = first[lo..hi].iter().position(|&b| b == b'=').map(|i| lo + i) else {
        if lo == hi {
            return Err(PropagationError::BaggageKey { entry, offset: offset + lo });
        }
        return Err(PropagationError::BaggageNoEquals { entry, offset: offset + lo });
    };
    let key = check_key(first, lo, eq, offset, entry)?;
    let value = check_value(first, eq + 1, hi, offset, entry)?;

    let mut part_offset = offset + first.len() + 1;
    for property in parts {
        let (lo, hi) = trim(property);
        match property[lo..hi].iter().position(|&b| b == b'=').map(|i| lo + i) {
            Some(eq) => {
                check_key(property, lo, eq, part_offset, entry)?;
                check_value(property, eq + 1, hi, part_offset, entry)?;
            }
            None => {
                check_key(property, lo, hi, part_offset, entry)?;
            }
        }
        part_offset += property.len() + 1;
    }
    Ok((key, value))
}

/// The key `part[lo..end]` (trailing whitespace allowed): a non-empty HTTP token.
fn check_key(
    part: &[u8],
    lo: usize,
    end: usize,
    offset: usize,
    entry: usize,
) -> Result<&[u8], PropagationError> {
    let key = &part[lo..lo + trim(&part[lo..end]).1];
    if key.is_empty() {
        return Err(PropagationError::BaggageKey { entry, offset: offset + lo });
    }
    if let Some(i) = key.iter().position(|&b| !is_token(b)) {
        return Err(PropagationError::BaggageKey { entry, offset: offset + lo + i });
    }
    Ok(key)
}

/// The value `part[start..hi]` (leading whitespace allowed): baggage octets and `%XX` escapes.
fn check_value(
    part: &[u8],
    start: usize,
    hi: usize,
    offset: usize,
    entry: usize,
) -> Result<&[u8], PropagationError> {
    let start = start + trim(&part[start..hi]).0;
    let value = &part[start..hi];
    let mut i = 0;
    while i < value.len() {
        let at = offset + start + i;
        if value[i] == b'%' {
            match (value.get(i + 1), value.get(i + 2)) {
                (Some(&a), Some(&b)) if hex::digit(a).is_some() && hex::digit(b).is_some() => i += 3,
                _ => return Err(PropagationError::BaggageEscape { entry, offset: at }),
            }
        } else if is_baggage_octet(value[i]) {
            i += 1;
        } else {
            return Err(PropagationError::BaggageValue { entry, offset: at });
        }
    }
    Ok(value)
}

/// Percent-decodes a checked value; invalid UTF-8 becomes U+FFFD, as W3C Baggage requires.
fn decode(value: &[u8]) -> String {
    // `check_value` has rejected bad escapes: decoding cannot fail.
    let out = hex::percent_decode(value).unwrap_or_else(|_| value.to_vec());
    match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// The start and end of `b` without surrounding optional whitespace.
fn trim(b: &[u8]) -> (usize, usize) {
    let lo = b.iter().position(|&c| !is_ows(c)).unwrap_or(b.len());
    let hi = b.iter().rposition(|&c| !is_ows(c)).map_or(lo, |i| i + 1);
    (lo, hi)
}

fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// RFC 7230 `tchar`.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// W3C Baggage `baggage-octet`: printable ASCII except space, `"`, `,`, `;` and `\`.
fn is_baggage_octet(b: u8) -> bool {
    matches!(b, 0x21 | 0x23..=0x2B | 0x2D..=0x3A | 0x3C..=0x5B | 0x5D..=0x7E)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(header: &str) -> PropagationError {
        request_id(header).unwrap_err()
    }

    #[test]
    fn finds_the_request_id_among_other_members() {
        assert_eq!(request_id("request.id=abc").unwrap().as_deref(), Some("abc"));
        let header = "userId=alice , request.id = r%2C1%3B2 ;ttl=5;flag ,\tserverNode=DF%2028";
        assert_eq!(request_id(header).unwrap().as_deref(), Some("r,1;2"));
    }

    #[test]
    fn absent_empty_and_duplicate_request_ids() {
        assert_eq!(request_id("userId=alice").unwrap(), None);
        assert_eq!(request_id("").unwrap(), None);
        assert_eq!(request_id(" \t ").unwrap(), None);
        assert_eq!(request_id("request.id=").unwrap(), None);
        assert_eq!(request_id("request.id=a,request.id=b").unwrap().as_deref(), Some("a"));
        // Keys are case-sensitive.
        assert_eq!(request_id("Request.Id=a").unwrap(), None);
    }

    #[test]
    fn decodes_escapes_in_either_case_and_replaces_bad_utf8() {
        assert_eq!(request_id("request.id=%c3%A9t%C3%a9").unwrap().as_deref(), Some("été"));
        assert_eq!(request_id("request.id=a%FFb").unwrap().as_deref(), Some("a\u{fffd}b"));
    }

    #[test]
    fn encodes_everything_but_unreserved_and_safe_characters() {
        let id = "a-Z.0_~/:@ %,;=\"\\+é";
        let header = encode_request_id(id).unwrap();
        assert_eq!(header, "request.id=a-Z.0_~/:@%20%25%2C%3B%3D%22%5C%2B%C3%A9");
        assert_eq!(request_id(&header).unwrap().as_deref(), Some(id));
        assert_eq!(encode_request_id(""), None);
    }

    #[test]
    fn long_request_ids_are_cut_to_fit_the_limit() {
        let id = "é".repeat(MAX_BYTES);
        let header = encode_request_id(&id).unwrap();
        assert!(header.len() <= MAX_BYTES);
        assert!(header.len() > MAX_BYTES - 6);
        let back = request_id(&header).unwrap().unwrap();
        assert!(id.starts_with(&back));
        assert_eq!(back.chars().count(), (MAX_BYTES - "request.id=".len()) / 6);
    }

    #[test]
    fn limits() {
        let e = err(&format!("request.id={}", "a".repeat(MAX_BYTES)));
        assert_eq!(e, PropagationError::BaggageTooLong { bytes: MAX_BYTES + 11 });
        assert_eq!(e.to_string(), "baggage: 8203 bytes exceeds the limit of 8192");
        let members = vec!["k=v"; MAX_ENTRIES];
        assert_eq!(request_id(&members.join(",")).unwrap(), None);
        let members = vec!["k=v"; MAX_ENTRIES + 1];
        let e = err(&members.join(","));
        assert_eq!(e, PropagationError::BaggageTooManyEntries { entries: 181 });
        assert_eq!(e.to_string(), "baggage: 181 entries exceeds the limit of 180");
    }

    #[test]
    fn entry_errors_name_entry_and_offset() {
        let e = err("a=1,b=2,request.id");
        assert_eq!(e, PropagationError::BaggageNoEquals { entry: 2, offset: 8 });
        assert_eq!(e.to_string(), "baggage: entry 2 at offset 8 has no '='");

        let e = err("a=1,,b=2");
        assert_eq!(e, PropagationError::BaggageEmptyEntry { entry: 1, offset: 4 });
        assert_eq!(e.to_string(), "baggage: entry 1 at offset 4 is empty");
        assert_eq!(err("a=1, "), PropagationError::BaggageEmptyEntry { entry: 1, offset: 4 });

        let e = err("a=1, =2");
        assert_eq!(e, PropagationError::BaggageKey { entry: 1, offset: 5 });
        assert_eq!(e.to_string(), "baggage: entry 1: expected a key character at offset 5");
        assert_eq!(err("a b=1"), PropagationError::BaggageKey { entry: 0, offset: 1 });
        assert_eq!(err("é=1"), PropagationError::BaggageKey { entry: 0, offset: 0 });
        assert_eq!(err(";p=1"), PropagationError::BaggageKey { entry: 0, offset: 0 });

        let e = err("request.id=a b");
        assert_eq!(e, PropagationError::BaggageValue { entry: 0, offset: 12 });
        assert_eq!(e.to_string(), "baggage: entry 0: character at offset 12 is not allowed in a value");
        assert_eq!(err("k=\"v\""), PropagationError::BaggageValue { entry: 0, offset: 2 });
        assert_eq!(err("k=é"), PropagationError::BaggageValue { entry: 0, offset: 2 });

        let e = err("x=1,request.id=ab%2");
        assert_eq!(e, PropagationError::BaggageEscape { entry: 1, offset: 17 });
        assert_eq!(e.to_string(), "baggage: entry 1: invalid percent escape at offset 17");
        assert_eq!(err("k=%zz"), PropagationError::BaggageEscape { entry: 0, offset: 2 });
    }

    #[test]
    fn property_errors() {
        assert!(request_id("k=v;p;q=1; r = 2 ").is_ok());
        assert_eq!(err("k=v;"), PropagationError::BaggageKey { entry: 0, offset: 4 });
        assert_eq!(err("k=v; ;p"), PropagationError::BaggageKey { entry: 0, offset: 5 });
        assert_eq!(err("k=v;p q"), PropagationError::BaggageKey { entry: 0, offset: 5 });
        assert_eq!(err("k=v;p=a b"), PropagationError::BaggageValue { entry: 0, offset: 7 });
        assert_eq!(err("k=v;p=%"), PropagationError::BaggageEscape { entry: 0, offset: 6 });
    }
}
