//! `ringtrace cluster` and `--scheduler`: a Ballista scheduler and two executors, each a
//! `ringtrace` process on 127.0.0.1, run the plans of the views over a Parquet store, and the
//! views print what they print when the plans run in their own process.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{ok, ringtrace, temp_dir, text};

/// The cluster's processes, stopped when the test ends, however it ends.
struct Cluster {
    processes: Vec<(Child, PathBuf)>,
}

impl Cluster {
    /// Starts `ringtrace cluster ARGS`, its output in `log`, and waits until it listens on
    /// `port`.
    fn start(&mut self, args: &[&str], port: u16, log: PathBuf) {
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ringtrace"))
            .arg("cluster")
            .args(args)
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        self.processes.push((child, log));
        let (child, log) = self.processes.last_mut().unwrap();
        // Generous: only a process that never starts listening fails here.
        let deadline = Instant::now() + Duration::from_secs(300);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("`ringtrace cluster {args:?}` exited ({status}):\n{}", read(log));
            }
            assert!(Instant::now() < deadline, "`ringtrace cluster {args:?}` does not listen on {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (child, _) in &mut self.processes {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Files under `dir`, at any depth.
fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries.flatten().map(|e| if e.path().is_dir() { files_under(&e.path()) } else { 1 }).sum()
        })
        .unwrap_or(0)
}

#[test]
fn a_scheduler_and_two_executors_give_the_views_of_one_process() {
    let base = temp_dir("distributed");
    std::fs::create_dir_all(&base).unwrap();
    let (recordings, store) = (base.join("recordings"), base.join("store"));
    ok(&["demo", "--out", recordings.to_str().unwrap(), "--requests", "40"]);
    ok(&["export", "--format", "parquet", "-o", store.to_str().unwrap(), recordings.to_str().unwrap()]);
    let store = store.to_str().unwrap();

    let mut cluster = Cluster { processes: Vec::new() };
    let scheduler = free_port();
    cluster.start(&["scheduler", "--port", &scheduler.to_string()], scheduler, base.join("scheduler.log"));
    let mut work_dirs = Vec::new();
    for executor in ["a", "b"] {
        let (flight, grpc) = (free_port(), free_port());
        let work = base.join(format!("executor-{executor}"));
        std::fs::create_dir_all(&work).unwrap();
        cluster.start(
            &[
                "executor",
                "--scheduler-host",
                "127.0.0.1",
                "--scheduler-port",
                &scheduler.to_string(),
                "--port",
                &flight.to_string(),
                "--grpc-port",
                &grpc.to_string(),
                "--tasks",
                "1",
                "--work-dir",
                work.to_str().unwrap(),
            ],
            flight,
            base.join(format!("executor-{executor}.log")),
        );
        work_dirs.push(work);
    }

    let url = format!("df://127.0.0.1:{scheduler}");
    let views: [&[&str]; 7] = [
        &["profile", "--json", "--by", "method"],
        &["profile", "--json", "--by", "node"],
        &["stats", "--json"],
        &["deps", "--json"],
        &["critical-path", "--json"],
        &["requests", "--json"],
        &["anomalies", "--json", "--window", "10ms"],
    ];
    for view in views {
        let local = ringtrace(&[view, &[store]].concat());
        assert!(local.status.success(), "{view:?}: {}", text(&local.stderr));
        let remote = ringtrace(&[view, &["--scheduler", &url, store]].concat());
        let logs: String = cluster.processes.iter().map(|(_, log)| read(log)).collect();
        assert!(remote.status.success(), "{view:?} on the cluster: {}\n{logs}", text(&remote.stderr));
        assert!(!local.stdout.is_empty());
        assert_eq!(text(&remote.stdout), text(&local.stdout), "{view:?}");
    }
    // The executors ran the plans: their shuffle files are there.
    let written: Vec<usize> = work_dirs.iter().map(|d| files_under(d)).collect();
    assert!(written.iter().sum::<usize>() > 0, "no executor wrote a shuffle file: {written:?}");

    // A scheduler that is not there is an error that names it, not an answer from this process.
    let gone = format!("df://127.0.0.1:{}", free_port());
    let o = ringtrace(&["stats", "--json", "--scheduler", &gone, store]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains(&gone), "{}", text(&o.stderr));
    let o = ringtrace(&["stats", "--scheduler", "http://nowhere", store]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("df://HOST:PORT"), "{}", text(&o.stderr));
    drop(cluster);
    let _ = std::fs::remove_dir_all(&base);
}
