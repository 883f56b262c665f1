//! Flame graphs of real recordings: self time when spans are left by an early return or a panic,
//! and `ringtrace flame` on the demo in its three formats.

use std::path::{Path, PathBuf};

use crate::support::{record, ringtrace, temp_dir, text, SLOW_IO_MS};
use ringtrace_analysis::{
    build_causality, flame_graph, read_inputs, CausalityOptions, FlameScope, FrameLabel, StackMode,
};
use tracing::info_span;

/// Some work that takes measurable time without sleeping.
fn work(rounds: u64) -> u64 {
    (0..rounds * 20_000).fold(0u64, |acc, i| std::hint::black_box(acc.wrapping_mul(31).wrapping_add(i)))
}

fn early(fail: bool) -> Result<u64, String> {
    let _span = info_span!("early_return").entered();
    let a = work(2);
    if fail {
        return Err(format!("gave up after {a}"));
    }
    Ok(work(2))
}

#[test]
fn self_time_is_right_when_spans_end_by_early_return_or_panic() {
    let dir = record("flame-unwind", "node-u", "unwinder", |_| {
        let outer = info_span!("outer").entered();
        work(3);
        assert!(early(true).is_err());
        work(1);
        let caught = std::panic::catch_unwind(|| {
            let _p = info_span!("panicking").entered();
            work(1);
            let _d = info_span!("deeper").entered();
            work(2);
            panic!("unwinding through two spans");
        });
        assert!(caught.is_err());
        work(1);
        drop(outer);
    });

    let data = read_inputs(&[&dir]).unwrap();
    assert_eq!(data.unclosed_spans_total(), 0, "the unwinding closed every span");
    let by_name = |n: &str| data.spans.iter().find(|s| s.name == n).unwrap_or_else(|| panic!("no span {n}"));
    let (outer, early, panicking, deeper) =
        (by_name("outer"), by_name("early_return"), by_name("panicking"), by_name("deeper"));
    // Each span closed where its scope was left, inside its parent.
    assert!(early.end_unix_ns <= panicking.start_unix_ns);
    assert!(deeper.end_unix_ns <= panicking.end_unix_ns && panicking.end_unix_ns <= outer.end_unix_ns);
    let causality = build_causality(&data, &CausalityOptions::default());
    let graph = flame_graph(
        &data,
        &causality,
        &FlameScope { label: FrameLabel::Method, stacks: StackMode::Process, ..Default::default() },
    );
    let folded = graph.folded();
    let self_of = |suffix: &str| folded.iter().find(|(s, _)| s.ends_with(suffix)).map(|x| x.1).unwrap();
    assert_eq!(self_of("outer"), outer.duration_ns() - early.duration_ns() - panicking.duration_ns());
    assert_eq!(self_of("panicking"), panicking.duration_ns() - deeper.duration_ns());
    assert_eq!(self_of("deeper"), deeper.duration_ns());
    assert_eq!(self_of("early_return"), early.duration_ns());
    assert_eq!(graph.total_ns(), outer.duration_ns(), "nested time adds up to the root's duration");
    let _ = std::fs::remove_dir_all(&dir);
}

fn demo(out: &Path) -> PathBuf {
    let o = ringtrace(&[
        "demo",
        "--out",
        out.to_str().unwrap(),
        "--requests",
        "20",
        "--slow-node",
        "node-3",
        "--slow-io-ms",
        SLOW_IO_MS,
    ]);
    assert!(o.status.success(), "demo failed: {}\n{}", text(&o.stdout), text(&o.stderr));
    out.join("recordings")
}

#[test]
fn flame_command_formats_and_scopes() {
    let out = temp_dir("flame-demo");
    let rec = demo(&out);
    let rec = rec.to_str().unwrap();

    let o = ringtrace(&["flame", "--min-percent", "0", rec]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let folded = text(&o.stdout);
    let mut total = 0u64;
    for line in folded.lines() {
        let (stack, n) = line.rsplit_once(' ').expect("stack and count");
        assert!(stack.starts_with("client/ringtrace::demo::client::request"), "{line}");
        total += n.parse::<u64>().expect("a count");
    }
    assert!(total > 0);
    // The slow worker's disk dominates: each of its disk spans sleeps SLOW_IO_MS (500 ms, and a
    // sleep never ends early) against about 2 ms of work per request besides, far more than the
    // machine's load can stretch the rest (see SLOW_IO_MS).
    let disk: u64 = folded
        .lines()
        .filter(|l| l.contains("worker/ringtrace::demo::worker::disk_"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert!(disk * 2 > total, "disk time {disk} of {total}");

    // d3 JSON: the root's value is the same total.
    let o = ringtrace(&["flame", "--format", "json", "--min-percent", "0", rec]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["name"], "all");
    assert_eq!(json["value"].as_u64(), Some(total));

    // Scoped to the slow node, per process, labelled by node: only node-3's worker frames.
    let o = ringtrace(&["flame", "--stacks", "process", "--frame", "node", "--node", "node-3", rec]);
    let scoped = text(&o.stdout);
    assert!(!scoped.is_empty() && scoped.lines().all(|l| l.starts_with("node-3/worker/")), "{scoped}");

    // The slowest 10 % of requests against the rest add up to everything.
    let sum = |args: &[&str]| -> u64 {
        let o = ringtrace(args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout).lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum()
    };
    let slow = sum(&["flame", "--min-percent", "0", "--slowest", "10", rec]);
    let rest = sum(&["flame", "--min-percent", "0", "--except-slowest", "10", rec]);
    assert_eq!(slow + rest, total);

    // SVG to a file.
    let svg = out.join("flame.svg");
    let o = ringtrace(&["flame", "--format", "svg", "-o", svg.to_str().unwrap(), rec]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.contains("<svg") && svg.contains("disk_"), "an SVG flame graph");

    // Bad values are errors naming them.
    let o = ringtrace(&["flame", "--min-percent", "150", rec]);
    assert!(!o.status.success() && text(&o.stderr).contains("150"));
    let o = ringtrace(&["flame", "--stacks", "thread", rec]);
    assert!(!o.status.success() && text(&o.stderr).contains("thread"));
    let _ = std::fs::remove_dir_all(&out);
}
