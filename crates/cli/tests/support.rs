//! What the tests share: running the `ringtrace` binary as a user runs it, reading what it
//! printed, and scratch directories.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

/// Runs the `ringtrace` binary these tests were built with.
pub fn ringtrace(args: &[&str]) -> Output {
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
