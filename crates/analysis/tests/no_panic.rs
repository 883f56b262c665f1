//! Readers of untrusted files never panic: arbitrary bytes, truncated and corrupted valid files
//! give `Ok` or an error naming the file.

use ringtrace_core::otlp::KeyValueExt as _;
use std::path::Path;

use crate::common::{fixture, frame, oracle, recording, resource, span, TempDir};
use proptest::prelude::*;
use ringtrace_analysis::read::{for_each_batch_with, ReadErrorKind, ReadWarningKind, Truncation};
use ringtrace_analysis::{for_each_batch, ReadError};
use ringtrace_core::otlp::KeyValue;

/// Reads `path` to the end, counting spans; checks that an error names the file.
fn read(path: &Path) -> Result<usize, ReadError> {
    let mut spans = 0;
    let result = for_each_batch(path, &mut |b| spans += b.spans.len());
    if let Err(e) = &result {
        assert_eq!(e.path(), path);
        assert!(e.to_string().starts_with(&path.display().to_string()));
    }
    result.map(|()| spans)
}

fn sample_recording() -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut boundaries = vec![0];
    for f in 0..3u8 {
        let mut spans: Vec<_> = (1..=4).map(|i| span(f + 1, i, (i > 1).then_some(1), "op", 10, 20)).collect();
        spans[0].attributes.push(KeyValue::string("request.id", "req-1"));
        spans[0].attributes.push(KeyValue::double("x", 1.5));
        let data = frame(resource("node", "daemon", 7, [f.into(), 0, 0, 0]), spans);
        bytes.extend(recording(&[data]));
        boundaries.push(bytes.len());
    }
    (bytes, boundaries)
}

#[test]
fn every_truncation_of_a_recording_is_ok_at_frame_boundaries_and_truncated_elsewhere() {
    let (bytes, boundaries) = sample_recording();
    let dir = TempDir::new("trunc-bin");
    for cut in 0..=bytes.len() {
        let path = dir.file("t.otlp", &bytes[..cut]);
        match read(&path) {
            Ok(spans) => {
                let frames = boundaries.iter().position(|&b| b == cut);
                assert!(frames.is_some(), "cut {cut} read Ok inside a frame");
                assert_eq!(spans, 4 * frames.unwrap());
            }
            Err(e) => {
                assert!(!boundaries.contains(&cut), "cut {cut}: {e}");
                assert_eq!(e.kind(), ReadErrorKind::Truncated, "cut {cut}: {e}");
            }
        }
        // Asked to, the reader takes every whole frame before the cut and warns of the rest.
        let mut spans = 0;
        let warnings = for_each_batch_with(&path, Truncation::Warn, &mut |b| spans += b.spans.len()).unwrap();
        let whole = boundaries.iter().rposition(|&b| b <= cut).unwrap();
        assert_eq!(spans, 4 * whole, "cut {cut}");
        match &warnings[..] {
            [] => assert!(boundaries.contains(&cut), "cut {cut}"),
            [w] => assert_eq!(
                w.kind(),
                ReadWarningKind::TruncatedTail {
                    read: whole,
                    spans,
                    from_byte: boundaries[whole] as u64,
                    ignored_bytes: (cut - boundaries[whole]) as u64
                },
                "cut {cut}"
            ),
            more => panic!("cut {cut}: {more:?}"),
        }
    }
}

#[test]
fn every_truncation_of_json_inputs_is_handled() {
    let dir = TempDir::new("trunc-json");
    for source in [fixture("collector.jsonl"), oracle("jaeger-trace-stats/testTraceNormal.json")] {
        let bytes = std::fs::read(&source).unwrap();
        for cut in 0..=bytes.len() {
            let path = dir.file("t.json", &bytes[..cut]);
            let _ = read(&path);
            if let Err(e) = for_each_batch_with(&path, Truncation::Warn, &mut |_| {}) {
                assert_eq!(e.path(), path);
            }
        }
        assert!(read(&dir.file("t.json", &bytes)).unwrap() > 0);
    }
}

fn arbitrary_file(dir: &TempDir, bytes: &[u8]) -> Result<usize, ReadError> {
    read(&dir.file("p.bin", bytes))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let dir = TempDir::new("prop-bytes");
        let _ = arbitrary_file(&dir, &bytes);
    }

    #[test]
    fn arbitrary_json_like_text_never_panics(
        body in "[ \\n{}\\[\\]\":,0-9a-zA-Z.-]{0,300}",
        key in prop_oneof![Just("data"), Just("resourceSpans"), Just("trace"), Just("x")],
    ) {
        let dir = TempDir::new("prop-json");
        let _ = arbitrary_file(&dir, format!("{{\"{key}\":{body}").as_bytes());
        let _ = arbitrary_file(&dir, format!("{{{body}").as_bytes());
    }

    #[test]
    fn corrupted_recordings_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let (mut bytes, _) = sample_recording();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let dir = TempDir::new("prop-flip");
        let _ = arbitrary_file(&dir, &bytes);
    }

    #[test]
    fn corrupted_json_never_panics(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        jaeger in any::<bool>(),
    ) {
        let source = if jaeger {
            oracle("jaeger-critical-path/case5.json")
        } else {
            fixture("collector.jsonl")
        };
        let mut bytes = std::fs::read(source).unwrap();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let dir = TempDir::new("prop-json-flip");
        let _ = arbitrary_file(&dir, &bytes);
    }
}
