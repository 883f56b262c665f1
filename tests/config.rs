//! Configuration from the environment: malformed values are errors naming the variable and value.
//!
//! The variables are the whole process's, and every test of this binary builds from them (as do
//! the child processes some of them start), so the test sets them only in a child process of its
//! own: this test binary, run again for this one test. No other test reads them while they are set.

use std::process::Command;

use crate::common::test_name;
use ringtrace::Builder;

/// Set in the child process that runs the test.
const CHILD_ENV: &str = "RINGTRACE_CONFIG_TEST_CHILD";

fn build_error() -> String {
    Builder::new().no_recording().build().map(|_| ()).unwrap_err().to_string()
}

/// Runs this module's test `test` alone, in a child process of this test binary whose environment
/// `env` sets, and checks that it ran and passed; `case` names the run in a failure's message.
fn run_in_child(test: &str, case: &str, env: impl FnOnce(&mut Command) -> &mut Command) {
    let name = test_name(module_path!(), test);
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args(["--exact", &name, "--test-threads=1"]);
    let out = env(&mut command).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{case}: the child process failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{case}: the child ran no test:\n{stdout}\n{stderr}"
    );
}

#[test]
fn malformed_environment_values_are_errors_naming_them() {
    if std::env::var_os(CHILD_ENV).is_none() {
        run_in_child("malformed_environment_values_are_errors_naming_them", "malformed values", |c| {
            c.env(CHILD_ENV, "1")
        });
        return;
    }
    for (var, value) in [
        ("RINGTRACE_RING_CAPACITY", "lots"),
        ("RINGTRACE_RING_CAPACITY", "0"),
        ("RINGTRACE_NODE", " "),
        ("OTEL_SERVICE_NAME", ""),
        ("RINGTRACE_INCLUDE", ",,"),
        ("OTEL_SPAN_EVENT_COUNT_LIMIT", "many"),
        ("OTEL_SPAN_EVENT_COUNT_LIMIT", "-1"),
    ] {
        std::env::set_var(var, value);
        let err = build_error();
        std::env::remove_var(var);
        assert!(err.contains(var) && err.contains(&format!("{value:?}")), "{var}={value:?}: {err}");
    }
    std::env::set_var("RINGTRACE_NODE", "node-7");
    std::env::set_var("OTEL_SERVICE_NAME", "worker");
    let (_layer, guard) = Builder::new().no_recording().build().unwrap();
    drop(guard);
    let id = ringtrace::Identity::resolve(None, None).unwrap();
    assert_eq!((id.node.as_str(), id.daemon.as_str()), ("node-7", "worker"));
    let id = ringtrace::Identity::resolve(Some("code"), None).unwrap();
    assert_eq!(id.node, "code", "code overrides the environment");
    std::env::remove_var("RINGTRACE_NODE");
    std::env::remove_var("OTEL_SERVICE_NAME");
}

/// Set in the child process that runs the `init` test: the level directives it gives `init`.
const INIT_DIRECTIVES_ENV: &str = "RINGTRACE_INIT_TEST_DIRECTIVES";

/// `init` installs a global subscriber, which a process can do once: each case runs in a child
/// process of its own (this test binary, run again for this one test).
#[test]
fn init_installs_the_standalone_subscriber_unless_the_directives_need_env_filter() {
    let Some(directives) = std::env::var_os(INIT_DIRECTIVES_ENV) else {
        for directives in ["app=debug,warn", "app[request]=debug,app=debug,warn"] {
            // Nothing from the environment but the directives: no target prefixes, no exporter.
            run_in_child(
                "init_installs_the_standalone_subscriber_unless_the_directives_need_env_filter",
                &format!("{directives:?}"),
                |c| {
                    c.env(INIT_DIRECTIVES_ENV, directives)
                        .env_remove("RINGTRACE_INCLUDE")
                        .env_remove("RINGTRACE_EXCLUDE")
                        .env_remove("OTEL_TRACES_SAMPLER")
                },
            );
        }
        return;
    };
    let directives = directives.into_string().unwrap();
    let (store, sink) = crate::common::collecting();
    let guard = Builder::new()
        .no_recording()
        .no_otlp()
        .quiet(true)
        .env_filter(&directives)
        .sink(sink)
        .init()
        .unwrap();
    let standalone = tracing::dispatcher::get_default(|d| d.is::<ringtrace::RingSubscriber>());
    // Only a span-scoped directive needs `EnvFilter`, and with it the registry and the layer.
    assert_eq!(standalone, !directives.contains('['), "{directives:?}");
    tracing::debug_span!(target: "app::db", "query").in_scope(|| {
        tracing::trace_span!(target: "app::db", "too_verbose").in_scope(|| {});
    });
    tracing::info_span!(target: "other", "not_loud_enough").in_scope(|| {});
    tracing::warn_span!(target: "other", "warned").in_scope(|| {});
    guard.shutdown().unwrap();
    let mut names: Vec<_> = store.lock().unwrap().iter().map(|s| s.name).collect();
    names.sort_unstable();
    assert_eq!(names, ["query", "warned"], "{directives:?}");
}
