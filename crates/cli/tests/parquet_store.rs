//! `ringtrace export --format parquet`: the store DuckDB reads holds every span as ringtrace's
//! own reader sees it — ids, parents, node and daemon, names, kinds, statuses, times to the
//! nanosecond, request ids, attributes, events and links — in day and node partitions; DuckDB's
//! aggregate over it equals `ringtrace stats`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{json, ok, record, ringtrace, temp_dir, text};
use ringtrace_analysis::{read_inputs, Status};

/// A Python that imports `duckdb`: `$DUCKDB_PYTHON` (what `scripts/test.sh` exports), else the
/// test virtualenv's.
fn duckdb_python() -> PathBuf {
    let hint = "DuckDB's Python package is not installed: run scripts/install-duckdb.sh (it installs \
                it into .venv-test/), or set DUCKDB_PYTHON to a Python that imports duckdb";
    let python = std::env::var_os("DUCKDB_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv-test/bin/python"))
    });
    let works = Command::new(&python).args(["-c", "import duckdb"]).status().is_ok_and(|s| s.success());
    assert!(works, "{} cannot import duckdb. {hint}", python.display());
    python
}

/// Runs `sql` in DuckDB over the store `dir` (as the view `spans`, with its partitions) and
/// returns the rows as JSON arrays.
fn duckdb(dir: &Path, sql: &str) -> Vec<serde_json::Value> {
    let script = r#"
import duckdb, json, sys
con = duckdb.connect()
files = (sys.argv[1] + "/**/*.parquet").replace("'", "''")
con.execute(f"CREATE VIEW spans AS SELECT * FROM read_parquet('{files}', hive_partitioning = true)")
for row in con.execute(sys.argv[2]).fetchall():
    print(json.dumps(row, default=str))
"#;
    let out =
        Command::new(duckdb_python()).args(["-c", script, dir.to_str().unwrap(), sql]).output().unwrap();
    assert!(out.status.success(), "duckdb failed on {sql}:\n{}", text(&out.stderr));
    text(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Two recordings, in directories named after `tag`.
fn recordings(tag: &str) -> (PathBuf, PathBuf) {
    let a = record(&format!("{tag}-a"), "node-a", "frontend", |_| {
        let root = tracing::info_span!("handle", request.id = "req-1", otel.kind = "server", n = 7i64);
        let _r = root.enter();
        let other = tracing::info_span!("other");
        let child = tracing::warn_span!(target: "app::io", "read", flag = true, text = "some text");
        child.follows_from(&other);
        let _c = child.enter();
        tracing::info!(bytes = 512u64, "read block");
        tracing::error!(code = 7i64, "failed");
    });
    let b = record(&format!("{tag}-b"), "node b/2", "backend", |_| {
        for i in 0..3i64 {
            let _s = tracing::info_span!("serve", i).entered();
        }
    });
    (a, b)
}

#[test]
fn duckdb_reads_the_parquet_store_as_ringtrace_reads_the_recordings() {
    let (a, b) = recordings("parquet");
    let store = temp_dir("parquet-store");
    let inputs = [a.to_str().unwrap(), b.to_str().unwrap()];
    let export = |store: &Path| {
        let mut args = vec!["export", "--format", "parquet", "-o", store.to_str().unwrap()];
        args.extend(inputs);
        ringtrace(&args)
    };
    let o = export(&store);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("wrote 6 spans of 2 processes"), "{}", text(&o.stderr));
    let data = read_inputs(&[&a, &b]).unwrap();
    assert_eq!(data.spans.len(), 6);

    // Partitions: by day, then node (escaped as Hive escapes it).
    let mut files: Vec<String> =
        walk(&store).iter().map(|p| p.strip_prefix(&store).unwrap().display().to_string()).collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files.iter().all(|f| f.starts_with("day=20") && f.ends_with("-00000.parquet")), "{files:?}");
    assert!(files.iter().any(|f| f.contains("/node=node%20b%2F2/backend-")), "{files:?}");
    assert!(files.iter().any(|f| f.contains("/node=node-a/frontend-")), "{files:?}");

    // Every span, column by column, as ringtrace's reader has it.
    let rows = duckdb(
        &store,
        "SELECT span_id, trace_id, parent_span_id, node, daemon, name, kind, status, status_message, \
                start_unix_ns, end_unix_ns, duration_ns, request_id, target, \
                list_sort([x.key || '=' || x.value for x in map_entries(attributes)]), \
                [e.name || '@' || e.time_unix_ns || '=' || array_to_string(list_sort([x.key || '=' || x.value for x in map_entries(e.attributes)]), ',') for e in events], \
                [l.trace_id || '/' || l.span_id for l in links], day::VARCHAR, epoch_us(start_time) * 1000, \
                boot_id, host_id \
         FROM spans ORDER BY span_id",
    );
    let by_id: BTreeMap<String, &serde_json::Value> =
        rows.iter().map(|r| (r[0].as_str().unwrap().to_owned(), r)).collect();
    assert_eq!(by_id.len(), 6);
    for s in &data.spans {
        let r = by_id[&s.span_id.to_string()];
        let process = &data.processes[s.process];
        assert_eq!(r[1], s.trace_id.to_string());
        assert_eq!(r[2].as_str().map(str::to_owned), s.parent_span_id.map(|p| p.to_string()));
        assert_eq!(
            (r[3].as_str().unwrap(), r[4].as_str().unwrap()),
            (process.node.as_str(), process.daemon.as_str())
        );
        assert_eq!(r[5], s.name.as_str());
        assert_eq!(r[6], s.kind.as_str());
        let (status, message) = match &s.status {
            Status::Unset => ("unset", None),
            Status::Ok => ("ok", None),
            Status::Error { message } => ("error", Some(message.as_str()).filter(|m| !m.is_empty())),
        };
        assert_eq!((r[7].as_str().unwrap(), r[8].as_str()), (status, message), "{}", s.name);
        assert_eq!((r[9].as_u64().unwrap(), r[10].as_u64().unwrap()), (s.start_unix_ns, s.end_unix_ns));
        assert_eq!(r[11].as_u64().unwrap(), s.end_unix_ns - s.start_unix_ns);
        assert_eq!(r[18].as_u64().unwrap() / 1000, s.start_unix_ns / 1000, "start_time, to the microsecond");
        // Which clock its times come from: its process's boot and host ids.
        let resource =
            |key: &str| process.attributes.iter().find(|(k, _)| k == key).and_then(|(_, v)| v.as_str());
        assert_eq!((r[19].as_str(), r[20].as_str()), (resource("ringtrace.boot_id"), resource("host.id")));
        // Not two nulls for want of ids: a kernel that has a boot id gave it to the recording.
        if std::path::Path::new("/proc/sys/kernel/random/boot_id").exists() {
            assert!(r[19].as_str().is_some_and(|b| !b.is_empty()), "{r:?}");
        }
        assert_eq!(r[12].as_str(), s.request_id.as_deref());
        assert_eq!(r[13].as_str(), s.target.as_deref());
        let mut attributes: Vec<String> = s.attributes.iter().map(|(k, v)| format!("{k}={v}")).collect();
        attributes.sort();
        let got: Vec<&str> = r[14].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(got, attributes, "{}", s.name);
        assert_eq!(r[15].as_array().unwrap().len(), s.events.len());
        for (got, e) in r[15].as_array().unwrap().iter().zip(&s.events) {
            let got = got.as_str().unwrap();
            assert!(got.starts_with(&format!("{}@{}=", e.name, e.time_unix_ns)), "{got}");
            for (k, v) in &e.attributes {
                assert!(got.contains(&format!("{k}={v}")), "{got} lacks {k}={v}");
            }
        }
        let links: Vec<String> = s.links.iter().map(|l| format!("{}/{}", l.trace_id, l.span_id)).collect();
        assert_eq!(r[16], serde_json::json!(links));
        assert!(files.iter().any(|f| f.starts_with(&format!("day={}/", r[17].as_str().unwrap()))));
    }
    assert!(
        data.spans.iter().any(|s| !s.links.is_empty() && s.events.len() == 2),
        "the recording has a link and events"
    );

    // DuckDB's aggregate is `ringtrace stats`'.
    let stats = json(&["stats", "--json", inputs[0], inputs[1]]);
    let mut ours: Vec<(String, String, u64, u64)> = stats["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap().to_owned();
            (s("service"), s("operation"), r["count"].as_u64().unwrap(), r["total_ns"].as_u64().unwrap())
        })
        .collect();
    ours.sort();
    let theirs: Vec<(String, String, u64, u64)> = duckdb(
        &store,
        "SELECT daemon, name, count(*), sum(duration_ns)::BIGINT FROM spans GROUP BY ALL ORDER BY ALL",
    )
    .iter()
    .map(|r| {
        (
            r[0].as_str().unwrap().into(),
            r[1].as_str().unwrap().into(),
            r[2].as_u64().unwrap(),
            r[3].as_u64().unwrap(),
        )
    })
    .collect();
    assert_eq!(theirs, ours);

    // By partition.
    assert_eq!(duckdb(&store, "SELECT count(*) FROM spans WHERE node = 'node-a'")[0][0], 3);

    // Exported again: the partitions' files are replaced, not added to.
    assert!(export(&store).status.success());
    assert_eq!(walk(&store).len(), 2);
    // One daemon exported alone replaces its own files only.
    let o = ringtrace(&["export", "--format", "parquet", "-o", store.to_str().unwrap(), inputs[1]]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(walk(&store).len(), 2);
    assert_eq!(duckdb(&store, "SELECT count(*) FROM spans")[0][0], 6);

    // A directory, not standard output.
    let o = ringtrace(&["export", "--format", "parquet", "-o", "-", inputs[0]]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("-o DIR"), "{}", text(&o.stderr));
    let _ = ok;
    for d in [&a, &b, &store] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// `stats`, `deps`, `profile`, `flame`, `bottlenecks`, `critical-path` and `breakdown` given the
/// store (read through the query engine) print what they
/// print for the recordings it was exported from; a store mixed with other inputs is refused.
#[test]
fn the_views_read_the_store_as_they_read_the_recordings() {
    let (a, b) = recordings("parquet-views");
    let store = temp_dir("parquet-views");
    let (a_, b_, store_) = (a.to_str().unwrap(), b.to_str().unwrap(), store.to_str().unwrap());
    let o = ringtrace(&["export", "--format", "parquet", "-o", store_, a_, b_]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let views: [&[&str]; 20] = [
        &["stats", "--json"],
        &["stats", "--json", "--by", "operation"],
        &["deps", "--json"],
        &["profile", "--json", "--by", "method", "--bucket", "1ms"],
        &["profile", "--json", "--by", "daemon"],
        &["profile", "--csv"],
        &["flame", "--format", "json"],
        &["bottlenecks", "--json"],
        &["critical-path", "--json"],
        &["critical-path"],
        &["breakdown", "--json"],
        &["breakdown", "--slowest", "3"],
        &["bottlenecks", "--slowest", "50"],
        &["flame", "--format", "folded", "--slowest", "50", "--stacks", "process"],
        &["requests", "--json"],
        &["requests"],
        &["anomalies", "--json", "--window", "all"],
        &["anomalies", "--window", "1ms"],
        &["diff", "--json", "--slowest", "50"],
        &["diff", "--slowest", "20"],
    ];
    for view in views {
        let from_store = ringtrace(&[view, &[store_]].concat());
        let from_recordings = ringtrace(&[view, &[a_, b_]].concat());
        assert!(from_store.status.success(), "{view:?}: {}", text(&from_store.stderr));
        assert!(from_recordings.status.success(), "{view:?}: {}", text(&from_recordings.stderr));
        assert_eq!(text(&from_store.stdout), text(&from_recordings.stdout), "{view:?}");
        // And the same note of what the request trees repaired, if any.
        let repairs = |o: &std::process::Output| {
            text(&o.stderr)
                .lines()
                .filter(|l| l.contains("repaired or unusual"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(repairs(&from_store), repairs(&from_recordings), "{view:?}");
    }
    // Two traces drawn, and compared; one side of `diff A B` a store.
    let listed = ringtrace(&["requests", "--json", a_, b_]);
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let ids: Vec<&str> =
        listed["requests"].as_array().unwrap().iter().map(|r| r["trace_id"].as_str().unwrap()).collect();
    assert!(ids.len() >= 2, "{listed}");
    let (first, last) = (ids[0], ids[ids.len() - 1]);
    let store_a = temp_dir("parquet-store-of-a");
    let store_a_ = store_a.to_str().unwrap();
    assert!(ringtrace(&["export", "--format", "parquet", "-o", store_a_, a_]).status.success());
    for (view, inputs, same_as) in [
        (&["requests", "--tree", last, "--tree", first][..], &[store_][..], &[a_, b_][..]),
        (&["diff", "--json", "--trace", first, "--trace", last], &[store_], &[a_, b_]),
        (&["diff", "--json"], &[store_a_, b_], &[a_, b_]),
    ] {
        let (got, expected) = (ringtrace(&[view, inputs].concat()), ringtrace(&[view, same_as].concat()));
        assert!(got.status.success(), "{view:?}: {}", text(&got.stderr));
        assert!(!got.stdout.is_empty());
        assert_eq!(text(&got.stdout).replace(store_a_, a_), text(&expected.stdout), "{view:?}");
    }
    let absent = "0123456789abcdef0123456789abcdef";
    for view in [&["requests", "--tree", absent][..], &["diff", "--trace", first, "--trace", absent]] {
        let missing = ringtrace(&[view, &[store_]].concat());
        assert!(!missing.status.success(), "{view:?}");
        assert!(
            text(&missing.stderr).contains(&format!("trace {absent} is not in the inputs")),
            "{}",
            text(&missing.stderr)
        );
        assert!(missing.stdout.is_empty());
    }
    let missing = ringtrace(&["critical-path", "--json", "--trace", absent, store_]);
    assert!(!missing.status.success());
    assert!(text(&missing.stderr).contains("is not in the inputs"), "{}", text(&missing.stderr));
    assert!(missing.stdout.is_empty(), "no document cut short");
    let mixed = ringtrace(&["stats", store_, a_]);
    assert!(!mixed.status.success());
    assert!(text(&mixed.stderr).contains("is a Parquet store: it is read alone"), "{}", text(&mixed.stderr));
    let _ = json;
    for d in [&a, &b, &store, &store_a] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
