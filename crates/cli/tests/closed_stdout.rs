//! `ringtrace VIEW … | head`: a reader that goes away ends the output, not in an error. The pipe's
//! read end is closed before the command starts, so every write fails: the verdict does not
//! depend on how far the command got before the reader left.

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

use crate::support::{record, text};

/// A pipe whose read end is already closed: its write end, for a child's stdout.
fn pipe_without_reader() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors `pipe` writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe: {}", std::io::Error::last_os_error());
    // SAFETY: `pipe` succeeded, so both descriptors are open and owned by nobody else.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(reader);
    writer
}

/// A small recording with a few nested spans on one node.
fn recording() -> String {
    let dir = record("closed-stdout", "node-a", "reader", |_| {
        for i in 0..50u64 {
            let _outer = tracing::info_span!("handle", i).entered();
            let _inner = tracing::info_span!("disk_read", i).entered();
        }
    });
    dir.to_str().unwrap().to_owned()
}

#[test]
fn every_view_ends_quietly_when_its_reader_has_gone() {
    let input = recording();
    let input = input.as_str();
    let commands: [&[&str]; 12] = [
        &["profile", input],
        &["profile", "--by", "method", input],
        &["stats", input],
        &["requests", input],
        &["critical-path", input],
        &["deps", input],
        &["bottlenecks", input],
        &["breakdown", input],
        &["anomalies", input],
        &["flame", input],
        &["flame", "--format", "json", input],
        &["flame", "--format", "svg", input],
    ];
    for args in commands {
        let out = Command::new(env!("CARGO_BIN_EXE_ringtrace"))
            .args(args)
            .stdout(Stdio::from(pipe_without_reader()))
            .stderr(Stdio::piped())
            .output()
            .expect("run ringtrace");
        assert!(out.status.success(), "{args:?} failed: {}", text(&out.stderr));
        assert!(!text(&out.stderr).contains("error"), "{args:?}: {}", text(&out.stderr));
    }
}
