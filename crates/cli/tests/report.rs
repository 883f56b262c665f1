//! `ringtrace report` rendered in a real browser: Debian's headless chromium loads the page,
//! the page's script marks what it drew, and the test fails on script errors, `console.error`
//! or empty charts. Chromium must be installed (`scripts/install-chromium.sh`); without it the
//! test fails and says so.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{ringtrace, temp_dir, text, SLOW_IO_MS};

/// A fresh, empty scratch directory for one test.
fn scratch_dir(name: &str) -> PathBuf {
    let dir = temp_dir(&format!("report-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The chromium binary — `$CHROMIUM`, else `chromium` or `chromium-browser` on `PATH` — or a
/// failure that says how to install it.
fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "CHROMIUM={} is not a file", p.display());
        return p;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "chromium is not installed, so the HTML report cannot be tested in a browser: \
         run scripts/install-chromium.sh (Debian's chromium package, needs root) before the tests, \
         or set CHROMIUM to a chromium you have"
    );
}

/// Runs headless chromium on `page` with `args`, in a fresh profile, and waits at most a minute.
/// Its output goes through files, so a large DOM cannot fill a pipe nobody reads yet.
fn headless(page: &Path, args: &[&str], scratch: &Path) -> Output {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let profile = scratch.join(format!("profile-{run}"));
    let _ = std::fs::remove_dir_all(&profile);
    let (out_path, err_path) =
        (scratch.join(format!("chromium-{run}.out")), scratch.join(format!("chromium-{run}.err")));
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("start chromium");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("poll chromium").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within a minute on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().expect("chromium status");
    Output { status, stdout: std::fs::read(&out_path).unwrap(), stderr: std::fs::read(&err_path).unwrap() }
}

/// The `<body …>` start tag's attribute `name`.
fn body_attribute(dom: &str, name: &str) -> Option<String> {
    let start = dom.find("<body")?;
    let tag = &dom[start..start + dom[start..].find('>')?];
    let key = format!("{name}=\"");
    let at = tag.find(&key)? + key.len();
    Some(tag[at..at + tag[at..].find('"')?].to_owned())
}

/// The page's DOM after its scripts ran, and chromium's log.
fn rendered(page: &Path, scratch: &Path) -> (String, String) {
    let o = headless(page, &["--dump-dom"], scratch);
    assert!(o.status.success(), "chromium failed: {}", text(&o.stderr));
    (text(&o.stdout), text(&o.stderr))
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.len() > 24 && bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

fn demo_report(scratch: &Path) -> PathBuf {
    let out = scratch.join("demo");
    let o = ringtrace(&[
        "demo",
        "--out",
        out.to_str().unwrap(),
        "--requests",
        "30",
        "--slow-node",
        "node-2",
        "--slow-io-ms",
        SLOW_IO_MS,
    ]);
    assert!(o.status.success(), "demo failed: {}", text(&o.stderr));
    let page = scratch.join("report.html");
    let o = ringtrace(&[
        "report",
        "--quiet",
        "-o",
        page.to_str().unwrap(),
        out.join("recordings").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "report failed: {}", text(&o.stderr));
    assert!(
        o.stdout.is_empty() && o.stderr.is_empty(),
        "--quiet prints nothing: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    page
}

#[test]
fn the_report_renders_in_chromium_with_every_chart_drawn() {
    let scratch = scratch_dir("render");
    let page = demo_report(&scratch);
    let (dom, log) = rendered(&page, &scratch);
    assert_eq!(body_attribute(&dom, "data-errors").as_deref(), Some("0"), "script errors: {dom}");
    assert_eq!(body_attribute(&dom, "data-empty-charts").as_deref(), Some(""), "empty charts");
    assert_eq!(body_attribute(&dom, "data-rendered").as_deref(), Some("ok"));
    // Line charts per node and per daemon, critical paths, dependency graph, flame graph and
    // the two volume charts.
    assert_eq!(body_attribute(&dom, "data-charts").as_deref(), Some("7"));
    assert!(!log.contains("Uncaught"), "chromium logged an uncaught error:\n{log}");
    // Five node lines and three daemon lines, with labelled axes and legends.
    assert_eq!(dom.matches("<polyline").count(), 5 + 3, "one line per node and per daemon");
    assert_eq!(dom.matches("spans started per second</text>").count(), 2, "y axes labelled");
    assert_eq!(dom.matches("time since first span").count(), 2, "x axes labelled");
    assert!(dom.contains("node-2 (") && dom.contains("worker ("), "legends name the series");
    // The anomaly ranking shows the slow worker first.
    let anomalies = &dom[dom.find("id=\"anomalies\"").unwrap()..];
    let first_row = &anomalies[anomalies.find("<td class=\"num\">1</td>").unwrap()..];
    assert!(first_row[..200].contains("node-2"), "{}", &first_row[..200]);

    // A screenshot a person can look at: the whole width, the first 3000 pixels.
    let shot = scratch.join("report.png");
    let o =
        headless(&page, &[&format!("--screenshot={}", shot.display()), "--window-size=1400,3000"], &scratch);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let png = std::fs::read(&shot).expect("a screenshot");
    assert_eq!(png_size(&png), (1400, 3000));
    assert!(png.len() > 50_000, "a page with charts, not a blank one ({} bytes)", png.len());
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn the_browser_check_catches_errors_and_empty_charts() {
    let scratch = scratch_dir("broken");
    let page = demo_report(&scratch);
    let html = std::fs::read_to_string(&page).unwrap();
    // Empty the flame graph of its marks, and add a failing script and a console.error after the
    // report's own script.
    let start = html.find("data-chart=\"flame-graph\"").expect("a flame graph");
    let end = start + html[start..].find("</svg>").unwrap();
    let broken = format!(
        "{}{}{}",
        &html[..start],
        html[start..end].replace("class=\"mark\"", "class=\"unmarked\""),
        &html[end..]
    )
    .replace(
        "</body>",
        "<script>console.error('injected failure');</script><script>undefinedFunction();</script></body>",
    );
    let broken_page = scratch.join("broken.html");
    std::fs::write(&broken_page, broken).unwrap();
    let (dom, _) = rendered(&broken_page, &scratch);
    assert_eq!(body_attribute(&dom, "data-rendered").as_deref(), Some("empty"));
    assert_eq!(body_attribute(&dom, "data-empty-charts").as_deref(), Some("flame-graph"));
    assert_eq!(body_attribute(&dom, "data-errors").as_deref(), Some("2"), "{dom}");
    assert!(
        dom.contains("injected failure") && dom.contains("undefinedFunction"),
        "errors listed in the page"
    );
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn without_a_terminal_there_is_no_progress_bar() {
    let scratch = scratch_dir("plain");
    let input = scratch.join("empty.jsonl");
    std::fs::write(&input, "").unwrap();
    let page = scratch.join("r.html");
    let o = ringtrace(&["report", "-o", page.to_str().unwrap(), input.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // An empty input is warned about on stderr; nothing else goes there.
    let stderr = text(&o.stderr);
    assert!(
        !stderr.contains('\r') && stderr.lines().all(|l| l.starts_with("ringtrace: warning: no spans")),
        "stderr is not a terminal here: {stderr:?}"
    );
    assert!(text(&o.stdout).starts_with("report: "), "{}", text(&o.stdout));
    assert!(std::fs::read_to_string(&page).unwrap().contains("<section id=\"summary\">"));
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The report of a Parquet store (`ringtrace report STORE`) draws in chromium as the
/// recordings' does, and every section but the summary and the volume is the same HTML: the
/// store keeps no pid and no loss counters, and says so.
#[test]
fn a_report_from_the_store_shows_what_the_recordings_show() {
    let scratch = scratch_dir("store");
    let page = demo_report(&scratch);
    let store = scratch.join("store");
    let recordings = scratch.join("demo").join("recordings");
    let o = ringtrace(&[
        "export",
        "--format",
        "parquet",
        "-o",
        store.to_str().unwrap(),
        recordings.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let store_page = scratch.join("store.html");
    let o = ringtrace(&["report", "--quiet", "-o", store_page.to_str().unwrap(), store.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        o.stdout.is_empty() && o.stderr.is_empty(),
        "--quiet prints nothing: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );

    let (dom, _) = rendered(&store_page, &scratch);
    assert_eq!(body_attribute(&dom, "data-errors").as_deref(), Some("0"), "script errors: {dom}");
    assert_eq!(body_attribute(&dom, "data-rendered").as_deref(), Some("ok"));
    assert_eq!(body_attribute(&dom, "data-charts").as_deref(), Some("7"));

    let (from_store, from_recordings) =
        (std::fs::read_to_string(&store_page).unwrap(), std::fs::read_to_string(&page).unwrap());
    let section = |html: &str, id: &str| -> String {
        let start = html.find(&format!("<section id=\"{id}\"")).unwrap_or_else(|| panic!("no section {id}"));
        let end = start + html[start..].find("</section>").unwrap();
        html[start..end].to_owned()
    };
    for id in ["frequency", "methods", "anomalies", "critical-path", "dependencies", "flame", "io"] {
        assert_eq!(section(&from_store, id), section(&from_recordings, id), "section {id}");
    }
    assert!(section(&from_store, "summary").contains("not in the store"));
    assert!(section(&from_store, "volume").contains("keeps no loss counters"));
    assert!(!section(&from_recordings, "volume").contains("keeps no loss counters"));
    let _ = std::fs::remove_dir_all(&scratch);
}
