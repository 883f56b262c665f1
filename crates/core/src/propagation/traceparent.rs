//! The W3C `traceparent` header: `version-traceid-parentid-flags`.

use super::error::{Field, PropagationError};
use super::TraceContext;
use crate::hex;
use crate::ids::{SpanId, TraceId};

/// Length of a version-00 header, and of the part of a later version this code understands.
const LEN: usize = 55;

/// `00-<trace id>-<span id>-<flags>`, written digit by digit (`core::fmt`'s padded hex costs
/// several times more, and a service injects a context into every outgoing request).
pub(super) fn format(ctx: &TraceContext) -> String {
    let mut out = [0u8; LEN];
    out[..3].copy_from_slice(b"00-");
    hex::write_lower(ctx.trace_id.get(), &mut out[3..35]);
    out[35] = b'-';
    hex::write_lower(u128::from(ctx.span_id.get()), &mut out[36..52]);
    out[52..].copy_from_slice(if ctx.sampled { b"-01" } else { b"-00" });
    // ASCII only: the conversion cannot fail.
    String::from_utf8(out.to_vec()).unwrap_or_default()
}

pub(super) fn parse(value: &str) -> Result<TraceContext, PropagationError> {
    let is_ows = |c: char| c == ' ' || c == '\t';
    let rest = value.trim_start_matches(is_ows);
    let lead = value.len() - rest.len();
    let s = rest.trim_end_matches(is_ows).as_bytes();
    if s.len() < LEN {
        return Err(PropagationError::TraceparentLength { found: s.len() });
    }
    let hex = |start: usize, digits: usize, field: Field| hex_field(s, start, digits, field, lead);
    let dash = |offset: usize| match s.get(offset) {
        Some(b'-') => Ok(()),
        _ => Err(PropagationError::TraceparentDelimiter { offset: lead + offset }),
    };

    let version = hex(0, 2, Field::Version)? as u8;
    if version == 0xff {
        return Err(PropagationError::TraceparentVersion { version });
    }
    if version == 0 && s.len() != LEN {
        return Err(PropagationError::TraceparentLength { found: s.len() });
    }
    dash(2)?;
    let trace_id = TraceId::new(hex(3, 32, Field::TraceId)?)
        .ok_or(PropagationError::TraceparentZero { field: Field::TraceId })?;
    dash(35)?;
    let span_id = SpanId::new(hex(36, 16, Field::SpanId)? as u64)
        .ok_or(PropagationError::TraceparentZero { field: Field::SpanId })?;
    dash(52)?;
    let flags = hex(53, 2, Field::Flags)?;
    // A later version may append fields, separated by '-'.
    if s.len() > LEN {
        dash(LEN)?;
    }
    Ok(TraceContext { trace_id, span_id, sampled: flags & 1 == 1, request_id: None })
}

/// `digits` lowercase hex digits at `s[start..]` (the caller has checked the length).
fn hex_field(
    s: &[u8],
    start: usize,
    digits: usize,
    field: Field,
    lead: usize,
) -> Result<u128, PropagationError> {
    hex::parse_lower(&s[start..start + digits]).map_err(|index| PropagationError::TraceparentHex {
        field,
        offset: lead + start,
        index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const W3C: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn err(value: &str) -> PropagationError {
        parse(value).unwrap_err()
    }

    #[test]
    fn parses_the_w3c_example() {
        let ctx = parse(W3C).unwrap();
        assert_eq!(ctx.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(ctx.span_id.to_string(), "00f067aa0ba902b7");
        assert!(ctx.sampled);
        assert_eq!(ctx.request_id, None);
        assert_eq!(format(&ctx), W3C);
    }

    #[test]
    fn not_sampled() {
        let value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        let ctx = parse(value).unwrap();
        assert!(!ctx.sampled);
        assert_eq!(format(&ctx), value);
    }

    #[test]
    fn only_bit_zero_of_the_flags_is_read() {
        assert!(parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03").unwrap().sampled);
        assert!(!parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe").unwrap().sampled);
    }

    #[test]
    fn surrounding_whitespace_is_trimmed() {
        assert_eq!(parse(&format!(" \t{W3C}\t ")).unwrap(), parse(W3C).unwrap());
    }

    #[test]
    fn future_versions_parse_their_first_55_characters() {
        let ctx = parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future").unwrap();
        assert_eq!(ctx, parse(W3C).unwrap());
        assert!(parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").is_ok());
        assert_eq!(
            err("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.what"),
            PropagationError::TraceparentDelimiter { offset: 55 }
        );
    }

    #[test]
    fn length_errors() {
        let e = err("00-4bf92f357");
        assert_eq!(e, PropagationError::TraceparentLength { found: 12 });
        assert_eq!(e.to_string(), "traceparent: expected 55 characters, found 12");
        assert_eq!(err(""), PropagationError::TraceparentLength { found: 0 });
        // Version 00 must be exactly 55 characters, even with a '-' after the flags.
        assert_eq!(err(&format!("{W3C}-00")), PropagationError::TraceparentLength { found: 58 });
    }

    #[test]
    fn version_ff_is_invalid() {
        let e = err("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert_eq!(e, PropagationError::TraceparentVersion { version: 0xff });
        assert_eq!(e.to_string(), "traceparent: version ff is invalid");
    }

    #[test]
    fn hex_errors_name_field_offset_and_character() {
        let e = err("00-4bf92F3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert_eq!(e, PropagationError::TraceparentHex { field: Field::TraceId, offset: 3, index: 5 });
        assert_eq!(
            e.to_string(),
            "traceparent: trace id at offset 3: character 5 is not a lowercase hex digit"
        );
        assert_eq!(
            err("0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            PropagationError::TraceparentHex { field: Field::Version, offset: 0, index: 1 }
        );
        assert_eq!(
            err("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba9 2b7-01"),
            PropagationError::TraceparentHex { field: Field::SpanId, offset: 36, index: 12 }
        );
        assert_eq!(
            err("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x"),
            PropagationError::TraceparentHex { field: Field::Flags, offset: 53, index: 1 }
        );
        // Offsets count the whitespace that was trimmed.
        assert_eq!(
            err("  00-4bf92F3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            PropagationError::TraceparentHex { field: Field::TraceId, offset: 5, index: 5 }
        );
    }

    #[test]
    fn non_ascii_is_an_error_not_a_panic() {
        // 55 bytes, with a two-byte character straddling the trace id's end.
        let value = "00-4bf92f3577b34da6a3ce929d0e0e473é00f067aa0ba902b7-01";
        assert_eq!(value.len(), 55);
        assert_eq!(
            err(value),
            PropagationError::TraceparentHex { field: Field::TraceId, offset: 3, index: 31 }
        );
    }

    #[test]
    fn delimiter_errors() {
        let e = err("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert_eq!(e, PropagationError::TraceparentDelimiter { offset: 2 });
        assert_eq!(e.to_string(), "traceparent: expected '-' at offset 2");
        assert_eq!(
            err("00-4bf92f3577b34da6a3ce929d0e0e4736+00f067aa0ba902b7-01"),
            PropagationError::TraceparentDelimiter { offset: 35 }
        );
        assert_eq!(
            err("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7+01"),
            PropagationError::TraceparentDelimiter { offset: 52 }
        );
    }

    #[test]
    fn zero_ids_are_invalid() {
        let e = err("00-00000000000000000000000000000000-00f067aa0ba902b7-01");
        assert_eq!(e, PropagationError::TraceparentZero { field: Field::TraceId });
        assert_eq!(e.to_string(), "traceparent: all-zero trace id");
        let e = err("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01");
        assert_eq!(e, PropagationError::TraceparentZero { field: Field::SpanId });
        assert_eq!(e.to_string(), "traceparent: all-zero span id");
    }

    /// The digit-by-digit writer gives what `core::fmt`'s padded lowercase hex gives, for ids
    /// with leading zeros, all digits, and both sampling flags.
    #[test]
    fn formatted_headers_match_padded_hex() {
        let ids: [(u128, u64); 4] = [
            (1, 1),
            (0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736, 0x00f0_67aa_0ba9_02b7),
            (u128::MAX, u64::MAX),
            (0x0123_4567_89ab_cdef_fedc_ba98_7654_3210, 0x0fed_cba9_8765_4321),
        ];
        for (t, sp) in ids {
            for sampled in [true, false] {
                let mut ctx = TraceContext::new(TraceId::new(t).unwrap(), SpanId::new(sp).unwrap());
                ctx.sampled = sampled;
                let want = format!("00-{t:032x}-{sp:016x}-{}", if sampled { "01" } else { "00" });
                assert_eq!(format(&ctx), want);
                assert_eq!(parse(&want).unwrap(), ctx);
            }
        }
    }
}
