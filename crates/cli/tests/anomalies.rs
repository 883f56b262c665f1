//! `ringtrace anomalies` on the demo cluster: a worker with a slow disk is ranked first, and a
//! cluster without an injected fault has no score that stands out.

use std::path::{Path, PathBuf};

use crate::support::{json, ringtrace, temp_dir, text, SLOW_IO_MS};

/// Runs the demo (30 requests) and returns its recordings directory.
fn demo(out: &Path, extra: &[&str]) -> PathBuf {
    let mut args = vec!["demo", "--out", out.to_str().unwrap(), "--requests", "30"];
    args.extend_from_slice(extra);
    let o = ringtrace(&args);
    assert!(o.status.success(), "demo failed: {}\n{}", text(&o.stdout), text(&o.stderr));
    out.join("recordings")
}

/// `ringtrace anomalies --json`, checked against the documented shape exactly:
/// `{"anomalies":[{"node","daemon","score","reasons":[{"method","detail"}]}]}`, by score.
/// (node, daemon, score, [(method, detail)]) in output order.
type Ranked = (String, String, f64, Vec<(String, String)>);

fn anomalies_json(recordings: &Path) -> Vec<Ranked> {
    let json = json(&["anomalies", "--json", recordings.to_str().unwrap()]);
    let root = json.as_object().expect("an object");
    assert_eq!(root.keys().collect::<Vec<_>>(), ["anomalies"]);
    let mut out = Vec::new();
    for a in json["anomalies"].as_array().expect("a list") {
        let keys: Vec<&String> = a.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["node", "daemon", "score", "reasons"], "the documented order");
        let reasons = a["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
                assert_eq!(keys, ["method", "detail"], "the documented order");
                (r["method"].as_str().unwrap().to_owned(), r["detail"].as_str().unwrap().to_owned())
            })
            .collect();
        out.push((
            a["node"].as_str().unwrap().to_owned(),
            a["daemon"].as_str().unwrap().to_owned(),
            a["score"].as_f64().unwrap(),
            reasons,
        ));
    }
    assert!(out.windows(2).all(|w| w[0].2 >= w[1].2), "sorted by score, highest first: {out:?}");
    out
}

/// Whether the highest score stands out: it is at least [`STANDOUT_SCORE`] and at least
/// [`STANDOUT_RATIO`] times the median score of the (node, daemon) pairs.
///
/// Why these numbers: a score of 0.5 is half a bit of method-mix divergence, or every span of
/// every method about √2 times slower than on every peer — a difference no one would call noise.
/// Measured on the demo (40 requests, release build): fault-free runs score at most 0.08 (a few
/// tens of spans per method leave that much sampling noise), while a worker whose disk is 15 ms
/// slower scores about 6 and its peers at most 0.3 — a ratio above 20. The tests slow a disk by
/// [`SLOW_IO_MS`] (500 ms), which only widens that gap, whatever the machine's load. The ratio guards against
/// a run where everything is noisy; the absolute floor against reading meaning into the ratio of
/// two tiny numbers.
fn stands_out(scores: &[f64]) -> bool {
    let mut sorted = scores.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (Some(&top), Some(&median)) = (sorted.last(), sorted.get(sorted.len() / 2)) else { return false };
    top >= STANDOUT_SCORE && top >= STANDOUT_RATIO * median
}
const STANDOUT_SCORE: f64 = 0.5;
const STANDOUT_RATIO: f64 = 5.0;

#[test]
fn a_slow_worker_ranks_first_whichever_it_is() {
    for slow in ["node-1", "node-2", "node-3"] {
        let out = temp_dir(&format!("anomalies-{slow}"));
        let recordings = demo(&out, &["--slow-node", slow, "--slow-io-ms", SLOW_IO_MS]);
        let ranking = anomalies_json(&recordings);
        let workers: Vec<_> = ranking.iter().filter(|a| a.1 == "worker").collect();
        assert_eq!(workers.len(), 3, "three workers compared: {ranking:?}");
        assert!(
            ranking.iter().all(|a| a.1 == "worker"),
            "client and master run on one node each: {ranking:?}"
        );
        let top = &ranking[0];
        assert_eq!(top.0, slow, "the slow worker ranks first: {ranking:?}");
        let scores: Vec<f64> = ranking.iter().map(|a| a.2).collect();
        assert!(stands_out(&scores), "{slow}: its score stands out: {scores:?}");
        let (method, detail) = &top.3[0];
        assert!(
            method.ends_with("disk_read")
                || method.ends_with("disk_write")
                || method.ends_with("handle_store")
                || method == "ringtrace::io::read"
                || method == "ringtrace::io::write"
                || method == "ringtrace::demo::rpc::rpc.serve",
            "{method}: {detail}"
        );
        assert!(detail.contains("slower"), "{detail}");
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn without_a_fault_no_score_stands_out() {
    let out = temp_dir("anomalies-healthy");
    let recordings = demo(&out, &[]);
    let ranking = anomalies_json(&recordings);
    assert_eq!(ranking.len(), 3, "{ranking:?}");
    let scores: Vec<f64> = ranking.iter().map(|a| a.2).collect();
    assert!(!stands_out(&scores), "a healthy cluster has no outlier: {ranking:?}");
    assert!(scores.iter().all(|s| *s < STANDOUT_SCORE), "{ranking:?}");
    // The table names the same ranking and says what was not compared.
    let o = ringtrace(&["anomalies", "--window", "all", recordings.to_str().unwrap()]);
    let table = text(&o.stdout);
    assert!(
        o.status.success() && table.contains("not compared (on one node only): client, master"),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_window_is_an_error_naming_the_value() {
    let o = ringtrace(&["anomalies", "--window", "5 parsecs", "nowhere"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("5 parsecs"), "{}", text(&o.stderr));
}

#[test]
fn the_stand_out_rule_itself() {
    assert!(stands_out(&[6.0, 0.25, 0.17]));
    assert!(!stands_out(&[0.07, 0.02, 0.01]), "tiny scores never stand out");
    assert!(!stands_out(&[0.9, 0.8, 0.7]), "all high: nothing stands out");
    assert!(!stands_out(&[]));
}
