//! Property tests for `ringtrace_core::propagation`: untrusted input never panics, valid contexts
//! survive both forms exactly, truncated frames are errors, and malformed input is counted.

use std::collections::HashMap;

use proptest::collection::vec;
use proptest::prelude::*;
use ringtrace_core::propagation::{
    self, extract, inject, malformed_count, request_id_from_baggage, try_extract, PropagationError,
    TraceContext, BAGGAGE, TRACEPARENT,
};
use ringtrace_core::{SpanId, TraceId};

const W3C: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn trace_context() -> impl Strategy<Value = TraceContext> {
    let request_id = prop_oneof![
        any::<String>(),
        // Heavy on the characters that baggage and percent-encoding treat specially.
        "[,;=% \t%\"\\\\+a-zA-Z0-9é€😀]{1,40}",
    ]
    .prop_filter("an empty request id is carried as none", |s| !s.is_empty());
    (
        (1..=u128::MAX).prop_filter_map("non-zero", TraceId::new),
        (1..=u64::MAX).prop_filter_map("non-zero", SpanId::new),
        any::<bool>(),
        proptest::option::of(request_id),
    )
        .prop_map(|(trace_id, span_id, sampled, request_id)| TraceContext {
            trace_id,
            span_id,
            sampled,
            request_id,
        })
}

fn pairs(traceparent: &str, baggage: &str) -> Vec<(String, String)> {
    vec![(TRACEPARENT.to_owned(), traceparent.to_owned()), (BAGGAGE.to_owned(), baggage.to_owned())]
}

/// Runs every header reader on the pair and checks they agree; none may panic.
fn check_headers(traceparent: &str, baggage: &str) -> Result<(), TestCaseError> {
    let carrier = pairs(traceparent, baggage);
    let tried = try_extract(&carrier);
    let extracted = extract(&carrier);
    if let Err(e) = &tried {
        prop_assert!(!e.to_string().is_empty());
    }
    if let Err(e) = request_id_from_baggage(baggage) {
        prop_assert!(e.to_string().starts_with("baggage: "));
    }
    match TraceContext::parse_traceparent(traceparent) {
        Ok(ctx) => {
            // A valid header re-parses to the same context from its canonical form.
            prop_assert_eq!(TraceContext::parse_traceparent(&ctx.traceparent()), Ok(ctx));
        }
        Err(e) => prop_assert!(e.to_string().starts_with("traceparent: ")),
    }
    prop_assert_eq!(extracted, tried.ok().flatten());
    Ok(())
}

/// Strategy: a valid traceparent or baggage header with one byte replaced, cut or duplicated.
fn near(valid: &'static str) -> impl Strategy<Value = String> {
    (0..valid.len(), any::<u8>(), 0..3u8).prop_map(move |(at, byte, how)| {
        let mut b = valid.as_bytes().to_vec();
        match how {
            0 => b[at] = byte,
            1 => b.truncate(at),
            _ => b.insert(at, byte),
        }
        String::from_utf8_lossy(&b).into_owned()
    })
}

proptest! {
    #[test]
    fn arbitrary_header_strings_never_panic(
        traceparent in any::<String>(),
        baggage in any::<String>(),
    ) {
        check_headers(&traceparent, &baggage)?;
    }

    #[test]
    fn arbitrary_header_bytes_never_panic(
        traceparent in vec(any::<u8>(), 0..80),
        baggage in vec(any::<u8>(), 0..300),
    ) {
        check_headers(&String::from_utf8_lossy(&traceparent), &String::from_utf8_lossy(&baggage))?;
    }

    #[test]
    fn nearly_valid_headers_never_panic(
        traceparent in near(W3C),
        baggage in near("a=1 ; p;q=%20 ,request.id=r%2C1\t,z=9"),
    ) {
        check_headers(&traceparent, &baggage)?;
        check_headers(W3C, &baggage)?;
    }

    #[test]
    fn header_shaped_strings_never_panic(
        traceparent in "[ \t]{0,2}[0-9a-fA-F]{2}[-_][0-9a-f-]{30,60}[ \t]{0,2}",
        baggage in "([ \t]*[a-z.=%,;0-9A-F \t]{0,12}[,;]?){0,6}",
    ) {
        check_headers(&traceparent, &baggage)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic_in_read_bytes(buf in vec(any::<u8>(), 0..120)) {
        if let Ok((_, consumed)) = TraceContext::read_bytes(&buf) {
            prop_assert!(consumed <= buf.len());
        }
    }

    #[test]
    fn corrupted_byte_forms_never_panic(
        ctx in trace_context(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        tail in vec(any::<u8>(), 0..8),
    ) {
        let mut buf = Vec::new();
        ctx.write_bytes(&mut buf);
        let i = at.index(buf.len());
        buf[i] = byte;
        buf.extend_from_slice(&tail);
        match TraceContext::read_bytes(&buf) {
            Ok((_, consumed)) => prop_assert!(consumed <= buf.len()),
            Err(e) => prop_assert!(e.to_string().starts_with("bytes: ")),
        }
    }

    #[test]
    fn headers_round_trip(ctx in trace_context()) {
        let mut map: HashMap<String, String> = HashMap::new();
        inject(&ctx, &mut map);
        prop_assert_eq!(try_extract(&map), Ok(Some(ctx.clone())));
        prop_assert_eq!(extract(&map), Some(ctx.clone()));

        let mut pairs = Vec::new();
        inject(&ctx, &mut pairs);
        prop_assert_eq!(extract(&pairs), Some(ctx));
    }

    #[test]
    fn bytes_round_trip(ctx in trace_context(), tail in vec(any::<u8>(), 0..16)) {
        let mut buf = vec![0xaa; 3];
        ctx.write_bytes(&mut buf);
        let len = buf.len() - 3;
        buf.extend_from_slice(&tail);
        prop_assert_eq!(TraceContext::read_bytes(&buf[3..]), Ok((ctx, len)));
    }

    #[test]
    fn every_truncation_is_an_error(ctx in trace_context()) {
        let mut buf = Vec::new();
        ctx.write_bytes(&mut buf);
        for len in 0..buf.len() {
            match TraceContext::read_bytes(&buf[..len]) {
                Err(PropagationError::BytesTruncated { offset, need }) => {
                    prop_assert_eq!(offset, len);
                    prop_assert!(need > len && need <= buf.len());
                }
                other => prop_assert!(false, "length {}: {:?}", len, other),
            }
        }
    }

    #[test]
    fn extract_counts_malformed_traceparents(traceparent in any::<String>()) {
        prop_assume!(TraceContext::parse_traceparent(&traceparent).is_err());
        let carrier = pairs(&traceparent, "");
        let before = malformed_count();
        prop_assert_eq!(extract(&carrier), None);
        // Other tests count concurrently: only an increase can be checked.
        prop_assert!(malformed_count() > before);
    }

    #[test]
    fn extract_counts_malformed_baggage(baggage in any::<String>()) {
        prop_assume!(request_id_from_baggage(&baggage).is_err());
        let carrier = pairs(W3C, &baggage);
        let before = malformed_count();
        prop_assert!(extract(&carrier).is_some());
        prop_assert!(malformed_count() > before);
    }
}

#[test]
fn malformed_count_increases_for_each_kind() {
    let before = malformed_count();
    assert_eq!(extract(&pairs("00-00000000000000000000000000000000-00f067aa0ba902b7-01", "")), None);
    let after_traceparent = malformed_count();
    assert!(after_traceparent > before);

    assert!(extract(&pairs(W3C, "request.id")).is_some());
    let after_baggage = malformed_count();
    assert!(after_baggage > after_traceparent);

    assert!(TraceContext::read_bytes(&[7]).is_err());
    assert!(malformed_count() > after_baggage);

    // try_extract leaves counting to the caller; nothing is asserted about the counter here
    // because other tests run in parallel.
    assert!(propagation::try_extract(&pairs("garbage", "")).is_err());
}
