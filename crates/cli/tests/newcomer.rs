//! What a newcomer meets first: the demo's closing hints and loss report, `profile` and `report`
//! on small or empty inputs, `--help`, error messages from `main`, the README's snippets and the
//! test script's summary.

use std::path::Path;
use std::process::Command;

use crate::support::{json, ok, recordings_name_the_machine, ringtrace, temp_dir, text};

#[test]
fn the_demo_ends_with_the_next_commands_on_its_own_recordings() {
    let out = temp_dir("newcomer-next");
    let stdout = ok(&["demo", "--out", out.to_str().unwrap(), "--requests", "6"]);
    let rec = out.join("recordings");
    let rec = rec.to_str().unwrap();
    let next = &stdout[stdout.find("== Next").unwrap_or_else(|| panic!("no next commands:\n{stdout}"))..];
    for command in [
        format!("ringtrace profile --by method {rec}"),
        format!("ringtrace requests {rec}"),
        format!("ringtrace bottlenecks {rec}"),
        format!("ringtrace anomalies {rec}"),
        format!("ringtrace flame --format svg -o {} {rec}", out.join("flame.svg").display()),
        format!("ringtrace report -o {} {rec}", out.join("report.html").display()),
    ] {
        assert!(next.contains(&command), "missing {command:?} in:\n{next}");
    }
    // And they work as printed.
    for line in next.lines().filter_map(|l| l.trim().strip_prefix("ringtrace ")) {
        let args: Vec<&str> = line.split(' ').collect();
        ok(&args);
    }
    assert!(out.join("report.html").is_file() && out.join("flame.svg").is_file());
    // Its processes share this machine's `host.id`, so one clock: no clock skew is noted between
    // its nodes (a server span that ends after its client's call returned, as on loopback, is
    // no skew).
    if recordings_name_the_machine(rec) {
        let requests = ringtrace(&["requests", rec]);
        let notes = text(&requests.stderr);
        assert!(requests.status.success() && !notes.contains("clock of"), "{notes}");
    } else {
        eprintln!("this machine has no machine id: the demo's clock notes are not checked");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_demo_whose_collector_is_unreachable_reports_the_spans_lost() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let out = temp_dir("newcomer-lost");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringtrace"));
    cmd.args(["demo", "--requests", "6", "--otlp", &endpoint, "--out", out.to_str().unwrap()]);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("OTEL_") {
            cmd.env_remove(k);
        }
    }
    // Give up on the collector quickly: the loss is the same, the shutdown shorter.
    cmd.env("OTEL_BSP_EXPORT_TIMEOUT", "300").env("OTEL_EXPORTER_OTLP_TIMEOUT", "100");
    let o = {
        let _one_demo = crate::support::demo_lock();
        cmd.output().unwrap()
    };
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", text(&o.stderr));
    let data = ringtrace_analysis::read_inputs(&[&out.join("recordings")]).unwrap();
    let head = format!("== Export to {endpoint}: ");
    let line = stdout.lines().find(|l| l.starts_with(&head)).unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("spans LOST in 5 of 5 processes"), "{line}");
    let lost: u64 = line[head.len()..].split(' ').next().unwrap().parse().unwrap();
    assert!(lost >= data.spans.len() as u64, "every recorded span was lost to the collector: {line}");
    for p in &data.processes {
        assert!(
            stdout.lines().any(|l| l.contains(&p.node) && l.contains(&p.daemon) && l.contains("spans lost:")),
            "{} {} has its own line:\n{stdout}",
            p.node,
            p.daemon
        );
    }
    assert!(stdout.contains(&format!("why: the processes' logs in {}", out.join("logs").display())));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn profile_without_a_bucket_picks_a_round_one_from_the_time_span() {
    let out = temp_dir("newcomer-bucket");
    ok(&["demo", "--out", out.to_str().unwrap(), "--requests", "6"]);
    let rec = out.join("recordings");
    let rec = rec.to_str().unwrap();
    let round = |b: u64| {
        let mut m = b;
        while m % 10 == 0 {
            m /= 10;
        }
        matches!(m, 1 | 2 | 5)
    };
    for zoomed in [false, true] {
        let mut args = vec!["profile", "--by", "daemon", "--json", rec];
        if zoomed {
            args.extend(["--daemon", "worker"]);
        }
        let j = json(&args);
        let bucket = j["bucket_ns"].as_u64().unwrap();
        let columns = j["groups"][0]["counts"].as_array().unwrap().len();
        assert!(round(bucket), "{bucket} ns is 1, 2 or 5 times a power of ten");
        assert!((20..=61).contains(&columns), "zoomed {zoomed}: {columns} columns of {bucket} ns");
    }
    // A bucket given is kept.
    assert_eq!(json(&["profile", "--bucket", "1s", "--json", rec])["bucket_ns"], 1_000_000_000);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn help_marks_the_causality_views_input_required() {
    for view in ["requests", "critical-path", "stats", "deps", "bottlenecks", "breakdown", "diff"] {
        let help = ok(&[view, "--help"]);
        assert!(help.contains("<INPUT>...") && !help.contains("[INPUT]"), "{view}:\n{help}");
        let o = ringtrace(&[view]);
        assert!(!o.status.success() && text(&o.stderr).contains("<INPUT>"), "{view}: {}", text(&o.stderr));
    }
    // --jaeger still stands in for the inputs: the error is about the connection, not arguments.
    let o = ringtrace(&["requests", "--jaeger", "http://127.0.0.1:1", "--service", "s"]);
    let err = text(&o.stderr);
    assert!(!o.status.success() && !err.contains("required"), "{err}");
}

#[test]
fn an_empty_input_makes_a_warned_and_honest_empty_report() {
    let dir = temp_dir("newcomer-empty");
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("empty.jsonl");
    std::fs::write(&input, "").unwrap();
    let page = dir.join("r.html");
    let o = ringtrace(&["report", "-o", page.to_str().unwrap(), input.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stderr = text(&o.stderr);
    assert!(stderr.contains("warning: no spans") && stderr.contains("empty.jsonl"), "{stderr}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("No spans") && html.contains("empty.jsonl"), "{html}");
    // The page quotes the input's path, whose process id may hold any digits: look past it.
    let body = html.replace(dir.to_str().unwrap(), "");
    assert!(!body.contains("1970") && !body.contains("µs"), "no made-up dates or buckets: {html}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn setup_errors_debug_print_like_display() {
    let e = ringtrace_subscriber::Error::from(ringtrace_core::Error::Config {
        var: "RINGTRACE_RING_CAPACITY",
        value: "lots".into(),
        reason: "is not a number".into(),
    });
    // What `fn main() -> Result<(), ringtrace::Error>` prints after `Error: `.
    assert_eq!(format!("{e:?}"), r#"RINGTRACE_RING_CAPACITY="lots" is not a number"#);
    assert_eq!(format!("{e:?}"), e.to_string());
    let e = ringtrace_subscriber::Error::Stopped;
    assert_eq!(format!("{e:?}"), "the drain thread has stopped");
}

/// The filter of the README's "Already have a subscriber?" snippet, as the child below runs it.
const README_FILTER: &str = r#".with(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")))"#;
/// Set for the child process only: where it records.
const CHILD_DIR_ENV: &str = "RINGTRACE_TEST_README_CHILD_DIR";

/// The README's layer snippet, run in a process of its own (it installs a global subscriber)
/// with `RUST_LOG` unset, records an `info` span.
#[test]
fn the_readme_layer_snippet_records_info_spans_without_rust_log() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let snippet = &readme[readme.find("Already have a subscriber?").expect("the snippet")..];
    let snippet = &snippet[..snippet.find("\n```\n").unwrap()];
    assert!(snippet.contains(README_FILTER), "the README's snippet runs this test's filter:\n{snippet}");

    let dir = temp_dir("newcomer-readme");
    let o = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "newcomer::readme_layer_snippet_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR_ENV, &dir)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", text(&o.stdout), text(&o.stderr));
    let data = ringtrace_analysis::read_inputs(&[&dir]).unwrap();
    let names: Vec<&str> = data.spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["readme_info_span"], "the info span is recorded, the debug one is not");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "run by the_readme_layer_snippet_records_info_spans_without_rust_log, in a process of its own"]
fn readme_layer_snippet_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else { return };
    use tracing_subscriber::prelude::*;
    let (layer, guard) = ringtrace_subscriber::Builder::new()
        .node("node-r")
        .daemon("readme")
        .recording_dir(dir)
        .build()
        .unwrap();
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with(tracing_subscriber::fmt::layer())
        .with(layer)
        .init();
    tracing::info_span!("readme_info_span").in_scope(|| tracing::info!("inside"));
    tracing::debug_span!("readme_debug_span").in_scope(|| {});
    drop(guard);
}

#[test]
fn the_test_script_runs_everything_and_sums_every_result_line() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = std::fs::read_to_string(root.join("scripts/test.sh")).unwrap();
    let cargo_tests: Vec<&str> = script.lines().filter(|l| l.contains("cargo test")).collect();
    assert!(!cargo_tests.is_empty());
    for line in cargo_tests {
        assert!(line.contains("--no-fail-fast"), "every test run goes on after a failure: {line}");
    }
    let summary = |log: &str| {
        let mut child = Command::new("bash")
            .arg(root.join("scripts/test-summary.sh"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        child.stdin.take().unwrap().write_all(log.as_bytes()).unwrap();
        let o = child.wait_with_output().unwrap();
        (o.status.success(), text(&o.stdout))
    };
    let failing = "   Compiling x\ntest a ... ok\n\
                   test result: ok. 27 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 3.02s\n\
                   test result: FAILED. 5 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.1s\n\
                   test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
    assert_eq!(summary(failing), (false, "32 passed, 2 failed\n".to_owned()));
    let passing =
        "test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1s\n";
    assert_eq!(summary(passing), (true, "3 passed, 0 failed\n".to_owned()));
    assert_eq!(
        summary("error: could not compile\n"),
        (false, "0 passed, 0 failed\n".to_owned()),
        "no tests ran"
    );
}

#[test]
fn the_commit_message_hook_wants_a_short_subject_a_blank_line_and_a_body() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = temp_dir("newcomer-commit-msg");
    std::fs::create_dir_all(&dir).unwrap();
    let check = |message: &str| {
        let file = dir.join("COMMIT_EDITMSG");
        std::fs::write(&file, message).unwrap();
        let o = Command::new("bash").arg(root.join("scripts/hooks/commit-msg")).arg(&file).output().unwrap();
        (o.status.success(), text(&o.stderr))
    };
    assert_eq!(check("Read Tempo's envelope\n\nIts spans were read as none.\n"), (true, String::new()));
    assert!(check("Read Tempo's envelope\n\nWhy.\n# a comment git strips\n").0);
    assert!(check("Merge branch 'i13-cli'\n").0, "git's own merge subject needs no body");
    let (accepted, why) = check("Read Tempo's envelope\n");
    assert!(!accepted && why.contains("no body"), "{why}");
    let (accepted, why) = check("Read Tempo's envelope\nIts spans were read as none.\n");
    assert!(!accepted && why.contains("second line must be blank"), "{why}");
    let (accepted, why) = check(&format!("{}\n\nWhy.\n", "x".repeat(73)));
    assert!(!accepted && why.contains("73 characters"), "{why}");
    let (accepted, why) = check("\n\nOnly a body.\n");
    assert!(!accepted && why.contains("subject line is empty"), "{why}");
}
