//! The compact byte form for raw TCP framing (layout in the module docs of `propagation`).

use super::error::{Field, PropagationError};
use super::TraceContext;
use crate::ids::{SpanId, TraceId};

const VERSION: u8 = 0;
// Byte offsets of the fixed fields.
const TRACE_ID_AT: usize = 1;
const SPAN_ID_AT: usize = 17;
const FLAGS_AT: usize = 25;
const LEN_AT: usize = 26;
/// Length of the fixed part; the request id follows.
pub(super) const HEADER_BYTES: usize = 28;
/// The longest request id the two-byte length can describe.
pub(super) const MAX_REQUEST_ID_BYTES: usize = u16::MAX as usize;

pub(super) fn write(ctx: &TraceContext, out: &mut Vec<u8>) {
    let id = truncate(ctx.request_id.as_deref().unwrap_or(""), MAX_REQUEST_ID_BYTES);
    // `truncate` leaves at most u16::MAX bytes.
    let len = id.len() as u16;
    out.reserve(HEADER_BYTES + id.len());
    out.push(VERSION);
    out.extend_from_slice(&ctx.trace_id.to_bytes());
    out.extend_from_slice(&ctx.span_id.to_bytes());
    out.push(u8::from(ctx.sampled));
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(id.as_bytes());
}

pub(super) fn read(buf: &[u8]) -> Result<(TraceContext, usize), PropagationError> {
    let [version] = take::<1>(buf, 0)?;
    if version != VERSION {
        return Err(PropagationError::BytesVersion { version });
    }
    let trace_id = TraceId::from_bytes(take(buf, TRACE_ID_AT)?)
        .ok_or(PropagationError::BytesZero { field: Field::TraceId, offset: TRACE_ID_AT })?;
    let span_id = SpanId::from_bytes(take(buf, SPAN_ID_AT)?)
        .ok_or(PropagationError::BytesZero { field: Field::SpanId, offset: SPAN_ID_AT })?;
    let [flags] = take::<1>(buf, FLAGS_AT)?;
    let len = usize::from(u16::from_le_bytes(take(buf, LEN_AT)?));
    let end = HEADER_BYTES + len;
    let raw = buf
        .get(HEADER_BYTES..end)
        .ok_or(PropagationError::BytesTruncated { offset: buf.len(), need: end })?;
    let request_id = match std::str::from_utf8(raw) {
        Ok("") => None,
        Ok(id) => Some(id.to_owned()),
        Err(e) => return Err(PropagationError::BytesUtf8 { offset: HEADER_BYTES + e.valid_up_to() }),
    };
    Ok((TraceContext { trace_id, span_id, sampled: flags & 1 == 1, request_id }, end))
}

/// The `N` bytes at `at`.
fn take<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N], PropagationError> {
    buf.get(at..at + N)
        .and_then(|b| b.try_into().ok())
        .ok_or(PropagationError::BytesTruncated { offset: buf.len(), need: at + N })
}

/// The longest prefix of `s` of at most `max` bytes that ends at a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(request_id: Option<&str>) -> TraceContext {
        TraceContext {
            trace_id: TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            span_id: SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            sampled: true,
            request_id: request_id.map(str::to_owned),
        }
    }

    fn bytes(c: &TraceContext) -> Vec<u8> {
        let mut out = Vec::new();
        write(c, &mut out);
        out
    }

    #[test]
    fn layout() {
        let b = bytes(&ctx(Some("r-1")));
        let mut expected = vec![0];
        expected.extend_from_slice(&0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736_u128.to_be_bytes());
        expected.extend_from_slice(&0x00f0_67aa_0ba9_02b7_u64.to_be_bytes());
        expected.extend_from_slice(&[1, 3, 0]);
        expected.extend_from_slice(b"r-1");
        assert_eq!(b, expected);
    }

    #[test]
    fn round_trip_and_bytes_consumed() {
        for c in [ctx(None), ctx(Some("é,; =%")), TraceContext { sampled: false, ..ctx(None) }] {
            let mut b = bytes(&c);
            let n = b.len();
            b.extend_from_slice(b"next frame");
            assert_eq!(read(&b), Ok((c, n)));
        }
    }

    #[test]
    fn empty_request_id_is_none() {
        let b = bytes(&ctx(Some("")));
        assert_eq!(b.len(), HEADER_BYTES);
        assert_eq!(read(&b).unwrap().0.request_id, None);
    }

    #[test]
    fn long_request_ids_are_cut_at_a_char_boundary() {
        // 65534 bytes of 'a' then a two-byte character that would end at 65536.
        let id = format!("{}é", "a".repeat(MAX_REQUEST_ID_BYTES - 1));
        let b = bytes(&ctx(Some(&id)));
        assert_eq!(b.len(), HEADER_BYTES + MAX_REQUEST_ID_BYTES - 1);
        let back = read(&b).unwrap().0.request_id.unwrap();
        assert_eq!(back, id[..MAX_REQUEST_ID_BYTES - 1]);

        let id = "a".repeat(MAX_REQUEST_ID_BYTES + 10);
        let back = read(&bytes(&ctx(Some(&id)))).unwrap().0.request_id.unwrap();
        assert_eq!(back.len(), MAX_REQUEST_ID_BYTES);
    }

    #[test]
    fn truncation_names_offset_and_need() {
        let b = bytes(&ctx(Some("abc")));
        let e = read(&b[..17]).unwrap_err();
        assert_eq!(e, PropagationError::BytesTruncated { offset: 17, need: 25 });
        assert_eq!(e.to_string(), "bytes: truncated at offset 17, need 25 bytes");
        assert_eq!(read(&[]), Err(PropagationError::BytesTruncated { offset: 0, need: 1 }));
        assert_eq!(read(&b[..27]), Err(PropagationError::BytesTruncated { offset: 27, need: 28 }));
        assert_eq!(read(&b[..30]), Err(PropagationError::BytesTruncated { offset: 30, need: 31 }));
    }

    #[test]
    fn unknown_version() {
        let mut b = bytes(&ctx(None));
        b[0] = 7;
        let e = read(&b).unwrap_err();
        assert_eq!(e, PropagationError::BytesVersion { version: 7 });
        assert_eq!(e.to_string(), "bytes: unknown version 7");
    }

    #[test]
    fn zero_ids() {
        let mut b = bytes(&ctx(None));
        b[1..17].fill(0);
        let e = read(&b).unwrap_err();
        assert_eq!(e, PropagationError::BytesZero { field: Field::TraceId, offset: 1 });
        assert_eq!(e.to_string(), "bytes: all-zero trace id at offset 1");
        let mut b = bytes(&ctx(None));
        b[17..25].fill(0);
        assert_eq!(read(&b), Err(PropagationError::BytesZero { field: Field::SpanId, offset: 17 }));
    }

    #[test]
    fn invalid_utf8() {
        let mut b = bytes(&ctx(Some("abcd")));
        b[HEADER_BYTES + 2] = 0xff;
        let e = read(&b).unwrap_err();
        assert_eq!(e, PropagationError::BytesUtf8 { offset: 30 });
        assert_eq!(e.to_string(), "bytes: request id is not UTF-8 at offset 30");
    }
}
