//! What the tests share: running the `ringtrace` binary as a user runs it, reading what it
//! printed, and scratch directories.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

/// The delay, in milliseconds, the tests' slow worker (`demo --slow-node N --slow-io-ms`) adds to
/// each disk read and write: large enough that no verdict about the slow node depends on how
/// loaded the machine is.
///
/// Why 500: unloaded, a whole demo request costs about 2 ms of work besides the injected sleeps
/// (debug build: 30 requests, ~60 ms of critical path outside the slow disk). A sleep never
/// returns early, so each of the slow node's disk spans lasts at least 500 ms whatever the load.
/// What load adds lands between processes: each hop of a request waits to be scheduled. With the
/// demo's processes starved (the test suite at a lower priority than other busy work), those
/// waits were seen to add ~100 ms to a request, as much as a 100 ms disk, and the slowest
/// requests were then slow for the scheduler, not the disk. At 500 ms the 10-20 disk operations
/// of a run that land on the slow node outweigh five times that stretch of every request; the
/// default 15 ms is only 7 times a request's work.
pub const SLOW_IO_MS: &str = "500";

/// Held while a demo cluster runs: the tests of this binary run in parallel, and five demo
/// processes per test on two cores would be the very load that skews the timings the demo tests
/// look at. One demo at a time keeps the cluster's own noise out of its measurements.
pub fn demo_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs the `ringtrace` binary these tests were built with (`demo` one at a time: [`demo_lock`]).
pub fn ringtrace(args: &[&str]) -> Output {
    let _one_demo = (args.first() == Some(&"demo")).then(demo_lock);
    Command::new(env!("CARGO_BIN_EXE_ringtrace")).args(args).output().expect("run ringtrace")
}

/// Printed bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `ringtrace` with `args`, which must succeed, and returns what it printed.
pub fn ok(args: &[&str]) -> String {
    let o = ringtrace(args);
    assert!(o.status.success(), "ringtrace {args:?} failed:\n{}\n{}", text(&o.stdout), text(&o.stderr));
    text(&o.stdout)
}

/// Runs `ringtrace` with `args`, which must succeed and print JSON, and returns the JSON.
pub fn json(args: &[&str]) -> Value {
    let stdout = ok(args);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("ringtrace {args:?}: bad JSON ({e}):\n{stdout}"))
}

/// `ringtrace-cli-<name>-<pid>` in the system's temporary directory, removed if it is there (and
/// not created). Every test runs in this one process: `name` starts with the test's module, so
/// that no two tests share a directory.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ringtrace-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A recording made in this process: what `work` does under ringtrace's standalone subscriber,
/// as `node`/`daemon`, in the new directory `temp_dir(name)`, which is returned once every span
/// is written. `work` gets the guard, to flush between frames.
pub fn record(
    name: &str,
    node: &str,
    daemon: &str,
    work: impl FnOnce(&ringtrace_subscriber::Guard),
) -> PathBuf {
    let dir = temp_dir(name);
    let (subscriber, guard) = ringtrace_subscriber::Builder::new()
        .node(node)
        .daemon(daemon)
        .recording_dir(&dir)
        .no_otlp()
        .build_subscriber()
        .expect("start ringtrace");
    tracing::subscriber::with_default(subscriber, || work(&guard));
    guard.shutdown().expect("write the recording");
    dir
}

/// Whether the recordings at `rec`, made on this machine, name it by its `host.id`: asserts that
/// they do exactly when the machine has an id (`ringtrace_subscriber::encode::host_id`), so
/// that losing it fails the caller, and returns whether it has one.
pub fn recordings_name_the_machine(rec: &str) -> bool {
    let has_id = ringtrace_subscriber::encode::host_id().is_some();
    let exported = ok(&["export", "--format", "otlp-json", "-o", "-", rec]);
    assert_eq!(exported.contains(r#""key":"host.id""#), has_id, "a host.id exactly when the machine has one");
    has_id
}
