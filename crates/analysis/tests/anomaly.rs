//! Anomalies across peer nodes on synthetic datasets whose answer is known.

use ringtrace_analysis::{
    anomalies, anomaly_output, AnomalyOptions, Dataset, ReasonKind, Span, SpanId, TraceId,
};

const S: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * S;

fn span(id: u64, node: &str, daemon: &str, name: &str, start: u64, dur: u64) -> Span {
    let (trace, span) = (TraceId::new(u128::from(id)).unwrap(), SpanId::new(id).unwrap());
    Span {
        target: Some(format!("demo::{daemon}")),
        node: node.into(),
        daemon: daemon.into(),
        ..Span::new(trace, span, None, name, start, start + dur)
    }
}

/// `per_node` spans on each of `nodes` worker nodes over 10 s, two methods alternating, every
/// duration from the same small cycle; `tweak` may change a span before it is kept.
fn cluster(nodes: usize, per_node: u64, tweak: impl Fn(usize, u64, &mut Span)) -> Dataset {
    let mut spans = Vec::new();
    let mut id = 1;
    for n in 0..nodes {
        for i in 0..per_node {
            let name = if i % 2 == 0 { "read" } else { "write" };
            let mut s = span(
                id,
                &format!("node-{}", n + 1),
                "worker",
                name,
                T0 + i * (10 * S / per_node),
                1_000 + (i % 7) * 100,
            );
            tweak(n, i, &mut s);
            spans.push(s);
            id += 1;
        }
    }
    // A master on its own node: no peers, so never scored.
    spans.push(span(id, "node-0", "master", "plan", T0, 5_000));
    Dataset { processes: vec![], spans }
}

#[test]
fn identical_peers_score_zero() {
    let data = cluster(3, 100, |_, _, _| {});
    let result = anomalies(&data, &AnomalyOptions::default()).unwrap();
    assert_eq!(result.anomalies.len(), 3);
    assert_eq!(result.unpaired_daemons, vec!["master".to_owned()]);
    for a in &result.anomalies {
        assert_eq!(a.daemon, "worker");
        assert_eq!(a.score, 0.0, "{a:?}");
        assert!(a.reasons.is_empty());
        assert_eq!(a.spans, 100);
        assert_eq!(a.windows.len(), 2, "10 s of spans in 5 s windows");
    }
}

#[test]
fn a_slow_method_ranks_its_node_first_with_the_method_as_reason() {
    // node-2's reads take 8× longer: 3 doublings on half of its spans, all slower than the peers'.
    let data = cluster(3, 100, |n, _, s| {
        if n == 1 && s.name == "read" {
            s.end_unix_ns = s.start_unix_ns + 8 * (s.end_unix_ns - s.start_unix_ns);
        }
    });
    let result = anomalies(&data, &AnomalyOptions::default()).unwrap();
    let top = &result.anomalies[0];
    assert_eq!((top.node.as_str(), top.daemon.as_str()), ("node-2", "worker"));
    assert!((top.latency - 1.5).abs() < 1e-9, "share 0.5 × |δ| 1 × log2(8) = 1.5, got {}", top.latency);
    assert_eq!(top.mix_bits, 0.0);
    assert_eq!(top.reasons.len(), 1);
    let reason = &top.reasons[0];
    assert_eq!(reason.method, "demo::worker::read");
    match reason.kind {
        ReasonKind::Latency { node_median_ns, peer_median_ns, slower_percent } => {
            assert_eq!(node_median_ns, 8.0 * peer_median_ns);
            assert_eq!(slower_percent, 100.0);
        }
        other => panic!("expected a latency reason, got {other:?}"),
    }
    assert!(reason.detail().contains("8.0× slower"), "{}", reason.detail());
    // The peers are compared with a typical node that ignores node-2: their scores stay small.
    for other in &result.anomalies[1..] {
        assert!(other.score < 0.05 * top.score, "{other:?}");
    }
}

#[test]
fn a_different_mix_in_one_window_is_found_and_explained() {
    // In the second 5 s window node-3 runs only reads (its writes become reads).
    let data = cluster(3, 100, |n, i, s| {
        if n == 2 && i >= 50 {
            s.name = "read".into();
        }
    });
    let result = anomalies(&data, &AnomalyOptions::default()).unwrap();
    let top = &result.anomalies[0];
    assert_eq!(top.node, "node-3");
    assert!(top.mix_bits > 0.05, "{top:?}");
    let second = top.windows[1].score;
    assert!(top.windows[0].score == 0.0 && second > 0.0, "{:?}", top.windows);
    let methods: Vec<&str> = top.reasons.iter().map(|r| r.method.as_str()).collect();
    assert!(methods.contains(&"demo::worker::write"), "{methods:?}");
    assert!(top.reasons.iter().any(
        |r| matches!(r.kind, ReasonKind::Share { node_percent, peer_percent } if node_percent < peer_percent)
    ));
    // Over one window the same shift is diluted by the first, unchanged half.
    let whole = anomalies(&data, &AnomalyOptions { window_ns: None, ..Default::default() }).unwrap();
    assert_eq!(whole.anomalies[0].node, "node-3");
    assert!(whole.anomalies[0].mix_bits < top.mix_bits);
}

#[test]
fn json_has_exactly_the_documented_shape() {
    let data = cluster(2, 40, |n, _, s| {
        if n == 0 {
            s.end_unix_ns += 100_000;
        }
    });
    let json = anomaly_output::to_json(&anomalies(&data, &AnomalyOptions::default()).unwrap());
    let top: Vec<&String> = json.as_object().unwrap().keys().collect();
    assert_eq!(top, ["anomalies"]);
    let list = json["anomalies"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    let mut last = f64::INFINITY;
    for entry in list {
        let keys: Vec<&String> = entry.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["node", "daemon", "score", "reasons"], "the documented order");
        let score = entry["score"].as_f64().unwrap();
        assert!(score <= last, "sorted by score, highest first");
        last = score;
        for reason in entry["reasons"].as_array().unwrap() {
            let keys: Vec<&String> = reason.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["method", "detail"], "the documented order");
            assert!(reason["detail"].as_str().unwrap().len() > 10);
        }
    }
    assert!(!list[0]["reasons"].as_array().unwrap().is_empty());
}

#[test]
fn degenerate_inputs_do_not_panic() {
    assert!(anomalies(&Dataset::default(), &AnomalyOptions::default()).unwrap().anomalies.is_empty());
    assert!(
        anomalies(&Dataset::default(), &AnomalyOptions { window_ns: Some(0), ..Default::default() }).is_err()
    );
    let mut spans = vec![
        span(1, "a", "w", "x", 0, 0),
        span(2, "b", "w", "x", u64::MAX - 1, 0),
        span(3, "b", "w", "y", 5, 0),
    ];
    spans[2].end_unix_ns = 0; // ends before it starts
    let data = Dataset { processes: vec![], spans };
    for window_ns in [Some(1), Some(u64::MAX), None] {
        let r = anomalies(&data, &AnomalyOptions { window_ns, max_reasons: 5 }).unwrap();
        assert!(r.anomalies.iter().all(|a| a.score.is_finite() && a.score >= 0.0));
    }
}
