//! `ringtrace demo --otlp`: every process of the demo cluster exports to a real collector
//! (`rotel-agent`) over gRPC and over HTTP, and the collector receives exactly what the
//! recordings hold.
//!
//! Needs `rotel-agent`: `scripts/install-test-deps.sh`. Without it this test fails and says so.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::Command;
use std::time::Duration;

use crate::support::temp_dir;
use ringtrace_test_support::otlp_collector::{ReceivedSpan, Rotel};

/// What both sides must agree on for one span.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    trace: String,
    span: String,
    parent: String,
    node: String,
    daemon: String,
    request: String,
}

fn received_key(s: &ReceivedSpan) -> Key {
    Key {
        trace: s.trace_id.clone(),
        span: s.span_id.clone(),
        parent: s.parent_id.clone(),
        node: s.res("host.name").unwrap_or_default().to_owned(),
        daemon: s.res("service.name").unwrap_or_default().to_owned(),
        request: s.attr("request.id").unwrap_or_default().to_owned(),
    }
}

fn demo_over(protocol: &str) {
    let rotel = Rotel::start();
    let endpoint = if protocol == "grpc" { rotel.grpc_endpoint() } else { rotel.http_endpoint() };
    let out = temp_dir(&format!("otlp_demo-{}", protocol.replace('/', "-")));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringtrace"));
    cmd.args(["demo", "--workers", "3", "--requests", "12", "--otlp", &endpoint, "--out"]).arg(&out);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("OTEL_") {
            cmd.env_remove(k);
        }
    }
    let o = {
        let _one_demo = crate::support::demo_lock();
        cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol).output().unwrap()
    };
    assert!(
        o.status.success(),
        "{protocol}: demo failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );

    let data = ringtrace_analysis::read_inputs(&[&out.join("recordings")]).unwrap();
    assert_eq!(data.processes.len(), 5, "{protocol}: client, master and three workers");
    let recorded: BTreeSet<Key> = data
        .spans
        .iter()
        .map(|s| Key {
            trace: s.trace_id.to_string(),
            span: s.span_id.to_string(),
            parent: s.parent_span_id.map(|p| p.to_string()).unwrap_or_default(),
            node: data.processes[s.process].node.clone(),
            daemon: data.processes[s.process].daemon.clone(),
            request: s.request_id.clone().unwrap_or_default(),
        })
        .collect();
    assert!(recorded.len() > 12 * 4, "{protocol}: the demo recorded {} spans", recorded.len());

    let all = rotel.wait_for(Duration::from_secs(30), |spans| {
        spans.iter().filter(|s| s.name != "ringtrace.loss").count() >= recorded.len()
    });
    let spans: Vec<&ReceivedSpan> = all.iter().filter(|s| s.name != "ringtrace.loss").collect();
    let received: BTreeSet<Key> = spans.iter().map(|s| received_key(s)).collect();
    assert_eq!(spans.len(), received.len(), "{protocol}: no span twice");
    let missing: Vec<_> = recorded.difference(&received).take(5).collect();
    let extra: Vec<_> = received.difference(&recorded).take(5).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{protocol}: the collector received what the recordings hold (with resource and request.id); \
         missing {missing:?}, unexpected {extra:?}"
    );

    // The traces themselves: one per request, a single root, parents inside the trace (across
    // processes), one request id on every span.
    let mut traces: BTreeMap<&str, Vec<&ReceivedSpan>> = BTreeMap::new();
    for s in &spans {
        traces.entry(s.trace_id.as_str()).or_default().push(s);
    }
    assert_eq!(traces.len(), 12, "{protocol}: one trace per request");
    let mut max_processes = 0;
    for (trace, spans) in &traces {
        let ids: HashMap<&str, &ReceivedSpan> = spans.iter().map(|s| (s.span_id.as_str(), *s)).collect();
        let roots: Vec<_> = spans.iter().filter(|s| s.parent_id.is_empty()).collect();
        assert_eq!(roots.len(), 1, "{protocol}: trace {trace} has one root");
        assert_eq!(roots[0].res("service.name"), Some("client"));
        let mut cross_process_parents = 0;
        for s in spans {
            if let Some(parent) = ids.get(s.parent_id.as_str()) {
                if parent.res("service.instance.id") != s.res("service.instance.id") {
                    cross_process_parents += 1;
                    assert_eq!(parent.kind, "SPAN_KIND_CLIENT", "{protocol}: a remote parent is an rpc.call");
                    assert_eq!(s.kind, "SPAN_KIND_SERVER", "{protocol}: a remote child is a handler");
                }
            } else {
                assert!(s.parent_id.is_empty(), "{protocol}: {} has a parent outside trace {trace}", s.name);
            }
        }
        assert!(cross_process_parents >= 1, "{protocol}: trace {trace} crosses processes");
        let requests: BTreeSet<_> = spans.iter().map(|s| s.attr("request.id")).collect();
        assert_eq!(requests.len(), 1, "{protocol}: one request id per trace: {requests:?}");
        assert!(requests.iter().all(Option::is_some), "{protocol}: request.id on every span");
        let processes: BTreeSet<_> =
            spans.iter().map(|s| (s.res("host.name"), s.res("service.name"))).collect();
        max_processes = max_processes.max(processes.len());
    }
    assert!(max_processes >= 4, "{protocol}: some request reaches client, master and several workers");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn demo_exports_every_span_over_grpc() {
    demo_over("grpc");
}

#[test]
fn demo_exports_every_span_over_http() {
    demo_over("http/protobuf");
}
