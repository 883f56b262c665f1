//! ringtrace's own messages on stderr, and the switch that silences them.
//!
//! The crate overview lists every message and when it is printed.

/// Environment variable: `1` or `true` silences ringtrace's messages on stderr, `0` or `false`
/// keeps them (the default). [`Builder::quiet`](crate::Builder::quiet) wins over it.
pub const QUIET_ENV: &str = "RINGTRACE_QUIET";

/// Prints a message to stderr unless `$quiet`: every message ringtrace prints goes through here.
/// A stderr that cannot be written (a pipe nobody reads any more) loses the message, never the
/// thread printing it: `eprintln!` would panic, on an application thread or the drain's.
macro_rules! message {
    ($quiet:expr, $($arg:tt)*) => {
        if !$quiet {
            let line = format!("{}\n", format_args!($($arg)*));
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
        }
    };
}
pub(crate) use message;

/// Whether a value of [`QUIET_ENV`] asks for silence; `None` when it is none of `1`, `0`,
/// `true`, `false` (case-insensitive, spaces around allowed).
pub(crate) fn parse_quiet(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" => Some(true),
        "0" | "false" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::{parse_quiet, QUIET_ENV};
    use crate::{Builder, ResourceInfo, Sink, SinkError, SpanData};

    /// Set in the child process that runs [`messages_are_printed_unless_quiet`]: how the child
    /// builds its collector (`default`, `quiet`, `loud`).
    const CHILD_ENV: &str = "RINGTRACE_MESSAGES_TEST_CHILD";

    #[test]
    fn quiet_values() {
        for v in ["1", "true", " TRUE ", "True"] {
            assert_eq!(parse_quiet(v), Some(true), "{v:?}");
        }
        for v in ["0", "false", "FALSE"] {
            assert_eq!(parse_quiet(v), Some(false), "{v:?}");
        }
        for v in ["", "yes", "2", "quiet"] {
            assert_eq!(parse_quiet(v), None, "{v:?}");
        }
    }

    /// A sink whose every export fails: the drain says so on stderr.
    struct Failing;

    impl Sink for Failing {
        fn name(&self) -> &str {
            "failing"
        }
        fn export(&mut self, _: &[SpanData], _: &ResourceInfo) -> Result<(), SinkError> {
            Err("disk on fire".into())
        }
    }

    /// This test binary, run again for this one test, with `vars` set; its stderr, or the
    /// failure it reported.
    fn child(vars: &[(&str, &str)]) -> Result<String, String> {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "messages::tests::messages_are_printed_unless_quiet", "--nocapture"]);
        cmd.env_remove(QUIET_ENV).envs(vars.iter().copied());
        let out = cmd.output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if !out.status.success() {
            return Err(format!("{stdout}\n{stderr}"));
        }
        assert!(stdout.contains("1 passed"), "the child ran no test:\n{stdout}\n{stderr}");
        Ok(stderr.into_owned())
    }

    /// A stderr nobody reads (every write fails with `EPIPE`) costs ringtrace's messages, never
    /// the thread that prints them: the child's drain says its sink failed, and goes on.
    #[test]
    fn a_stderr_nobody_reads_loses_messages_not_threads() {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "messages::tests::messages_are_printed_unless_quiet", "--nocapture"]);
        cmd.env_remove(QUIET_ENV).env(CHILD_ENV, "default").stderr(writer);
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}:\n{stdout}", out.status);
        assert!(stdout.contains("1 passed"), "the child ran no test:\n{stdout}");
    }

    #[test]
    fn messages_are_printed_unless_quiet() {
        if let Ok(mode) = std::env::var(CHILD_ENV) {
            let builder = Builder::new().node("n").daemon("d").no_recording().no_otlp().sink(Failing);
            let builder = match mode.as_str() {
                "quiet" => builder.quiet(true),
                "loud" => builder.quiet(false),
                _ => builder,
            };
            let (subscriber, guard) = builder.build_subscriber().map_err(|e| e.to_string()).unwrap();
            tracing::subscriber::with_default(subscriber, || tracing::info_span!("work").in_scope(|| {}));
            let stats = guard.shutdown().unwrap();
            assert_eq!(stats.sink_failed_spans, 1);
            return;
        }
        let said = "ringtrace: sink failing failed: disk on fire (further failures are counted)";
        let default = child(&[(CHILD_ENV, "default")]).unwrap();
        assert!(default.contains(said), "{default}");
        assert!(default.lines().any(|l| l.starts_with("ringtrace: ") && l.ends_with("(n/d)")), "{default}");

        for vars in [&[(CHILD_ENV, "quiet")][..], &[(CHILD_ENV, "default"), (QUIET_ENV, "1")]] {
            let quiet = child(vars).unwrap();
            assert!(!quiet.contains("ringtrace"), "{vars:?}: {quiet}");
        }
        // The code wins over the variable.
        let loud = child(&[(CHILD_ENV, "loud"), (QUIET_ENV, "true")]).unwrap();
        assert!(loud.contains(said), "{loud}");

        let bad = child(&[(CHILD_ENV, "default"), (QUIET_ENV, "shh")]).unwrap_err();
        // The child panics with the error's `Debug`, which escapes its quotes.
        assert!(bad.contains(r#"RINGTRACE_QUIET=\"shh\" is not 1, 0, true or false"#), "{bad}");
    }
}
