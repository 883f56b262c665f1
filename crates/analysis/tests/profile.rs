//! Frequency profiles on a hand-built dataset, and their table, CSV and JSON renderings.

use crate::common::model_span;
use ringtrace_analysis::profile_output::{to_json, write_csv, write_table};
use ringtrace_analysis::{frequency_profile, top_methods, Dataset, GroupBy, GroupSeries, ProfileError};
use serde_json::json;

const T: u64 = 1_700_000_000_000_000_000; // 2023-11-14T22:13:20Z
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

fn dataset() -> Dataset {
    let m = |id, node, daemon, target, name, start, dur| {
        model_span(id, None, node, daemon, target, name, T + start, dur, 0)
    };
    let master = Some("demo::master");
    let worker = Some("demo::worker");
    Dataset {
        processes: vec![],
        spans: vec![
            m(1, "node-1", "master", master, "handle", 300 * MS, 10 * MS),
            m(2, "node-1", "master", master, "handle", 900 * MS, 10 * MS),
            m(3, "node-1", "master", master, "handle", 2100 * MS, 10 * MS),
            m(4, "node-2", "worker", worker, "store", S, 20 * MS),
            m(5, "node-2", "worker", worker, "store", 1500 * MS, 20 * MS),
            m(6, "node-2", "worker", worker, "store", 2999 * MS, 20 * MS),
            m(7, "node-2", "worker", worker, "flush", 500 * MS, 5 * MS),
            m(8, "node-3", "worker", None, "tick", 4 * S, MS),
        ],
    }
}

fn series(key: &str, counts: &[u64]) -> GroupSeries {
    GroupSeries { key: key.into(), counts: counts.to_vec(), total: counts.iter().sum() }
}

#[test]
fn counts_per_bucket_by_node_daemon_and_method() {
    let data = dataset();
    let by_node = frequency_profile(&data, GroupBy::Node, S).unwrap();
    assert_eq!(by_node.start_unix_ns, T);
    assert_eq!(by_node.bucket_ns, S);
    assert_eq!(by_node.bucket_count(), 5);
    assert_eq!(
        by_node.groups,
        [
            series("node-2", &[1, 2, 1, 0, 0]),
            series("node-1", &[2, 0, 1, 0, 0]),
            series("node-3", &[0, 0, 0, 0, 1]),
        ]
    );
    assert_eq!(by_node.total(), 8);

    let by_daemon = frequency_profile(&data, GroupBy::Daemon, S).unwrap();
    assert_eq!(by_daemon.groups, [series("worker", &[1, 2, 1, 0, 1]), series("master", &[2, 0, 1, 0, 0])]);

    // Ties on total are ordered by key; a span without a target is keyed by its daemon.
    let by_method = frequency_profile(&data, GroupBy::Method, S).unwrap();
    assert_eq!(
        by_method.groups,
        [
            series("demo::master::handle", &[2, 0, 1, 0, 0]),
            series("demo::worker::store", &[0, 2, 1, 0, 0]),
            series("demo::worker::flush", &[1, 0, 0, 0, 0]),
            series("worker: tick", &[0, 0, 0, 0, 1]),
        ]
    );
}

#[test]
fn buckets_align_to_the_floored_earliest_start() {
    let data = dataset();
    let p = frequency_profile(&data, GroupBy::Daemon, 700 * MS).unwrap();
    // Earliest start T+300ms floors to a multiple of 700ms; every span lands in the bucket of
    // its start.
    assert_eq!(p.start_unix_ns % (700 * MS), 0);
    assert!(p.start_unix_ns <= T + 300 * MS && T + 300 * MS - p.start_unix_ns < 700 * MS);
    for span in &data.spans {
        let i = ((span.start_unix_ns - p.start_unix_ns) / (700 * MS)) as usize;
        let g = p.groups.iter().find(|g| g.key == span.daemon).unwrap();
        assert!(g.counts[i] > 0);
        assert!(p.bucket_start_unix_ns(i) <= span.start_unix_ns);
        assert!(span.start_unix_ns < p.bucket_start_unix_ns(i + 1));
    }
    assert!(p.groups.iter().all(|g| g.counts.len() == p.bucket_count()));
}

#[test]
fn bad_buckets_are_errors() {
    let data = dataset();
    let zero = frequency_profile(&data, GroupBy::Node, 0).unwrap_err();
    assert_eq!(zero, ProfileError::ZeroBucket);
    assert_eq!(zero.to_string(), "the bucket width must be greater than zero");
    let huge = frequency_profile(&data, GroupBy::Node, 1).unwrap_err();
    assert!(matches!(huge, ProfileError::TooLarge { buckets, groups: 3, .. } if buckets == 3_700_000_001));
    assert!(huge.to_string().contains("choose a larger bucket"), "{huge}");
}

#[test]
fn group_by_parses_and_names_the_choices() {
    assert_eq!("node".parse::<GroupBy>().unwrap(), GroupBy::Node);
    assert_eq!("Daemon".parse::<GroupBy>().unwrap(), GroupBy::Daemon);
    assert_eq!("method".parse::<GroupBy>().unwrap(), GroupBy::Method);
    let err = "host".parse::<GroupBy>().unwrap_err();
    assert_eq!(err.to_string(), "unknown grouping \"host\": expected one of node, daemon, method");
    assert_eq!(GroupBy::Method.to_string(), "method");
}

#[test]
fn top_methods_by_count_then_time() {
    assert_eq!(
        top_methods(&dataset(), 3),
        [
            ("demo::worker::store".to_owned(), 3, 60 * MS),
            ("demo::master::handle".to_owned(), 3, 30 * MS),
            ("demo::worker::flush".to_owned(), 1, 5 * MS),
        ]
    );
    assert_eq!(top_methods(&dataset(), 100).len(), 4);
    assert!(top_methods(&Dataset::default(), 5).is_empty());
}

fn render(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    f(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn table_output() {
    let p = frequency_profile(&dataset(), GroupBy::Node, S).unwrap();
    let table = render(|out| write_table(&p, out));
    assert_eq!(
        table,
        "frequency profile by node: 3 groups, 5 buckets of 1s from 2023-11-14T22:13:20Z \
         (1700000000000000000 ns)\n\
         group   +0s  +1s  +2s  +3s  +4s  total\n\
         node-2    1    2    1    0    0      4\n\
         node-1    2    0    1    0    0      3\n\
         node-3    0    0    0    0    1      1\n"
    );
}

#[test]
fn wide_tables_are_summarised_and_say_so() {
    let p = frequency_profile(&dataset(), GroupBy::Daemon, 100 * MS).unwrap();
    assert_eq!(p.bucket_count(), 38);
    let table = render(|out| write_table(&p, out));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[1],
        "(38 buckets shown as 19 columns of 2 buckets each; CSV and JSON carry every bucket)"
    );
    let header: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(header.len(), 1 + 19 + 1);
    assert_eq!(&header[..4], ["group", "+0ms", "+200ms", "+400ms"]);
    // Each row's columns still add up to its total.
    for line in &lines[3..] {
        let cells: Vec<u64> = line.split_whitespace().skip(1).map(|c| c.parse().unwrap()).collect();
        let (total, columns) = cells.split_last().unwrap();
        assert_eq!(columns.iter().sum::<u64>(), *total, "{line}");
    }
    // CSV keeps every bucket.
    let csv = render(|out| write_csv(&p, out));
    assert_eq!(csv.lines().count(), 1 + 38 * 2);
}

#[test]
fn csv_output() {
    let p = frequency_profile(&dataset(), GroupBy::Daemon, S).unwrap();
    let csv = render(|out| write_csv(&p, out));
    let mut expected = String::from("group,bucket_start_unix_ns,count\n");
    for (key, counts) in [("worker", [1, 2, 1, 0, 1]), ("master", [2, 0, 1, 0, 0])] {
        for (i, c) in counts.iter().enumerate() {
            expected.push_str(&format!("{key},{},{c}\n", T + i as u64 * S));
        }
    }
    assert_eq!(csv, expected);
}

#[test]
fn json_output() {
    let p = frequency_profile(&dataset(), GroupBy::Daemon, S).unwrap();
    assert_eq!(
        to_json(&p),
        json!({
            "group_by": "daemon",
            "bucket_ns": S,
            "start_unix_ns": T,
            "groups": [
                {"key": "worker", "total": 5, "counts": [1, 2, 1, 0, 1]},
                {"key": "master", "total": 3, "counts": [2, 0, 1, 0, 0]},
            ],
        })
    );
}

#[test]
fn an_empty_dataset_gives_an_empty_profile() {
    let p = frequency_profile(&Dataset::default(), GroupBy::Method, S).unwrap();
    assert!(p.groups.is_empty());
    assert_eq!(p.bucket_count(), 0);
    assert_eq!(render(|out| write_table(&p, out)), "frequency profile by method: no spans\n");
    assert_eq!(render(|out| write_csv(&p, out)), "group,bucket_start_unix_ns,count\n");
    assert_eq!(to_json(&p)["groups"], json!([]));
}
