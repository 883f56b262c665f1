//! Configuration from the environment: malformed values are errors naming the variable and value.
//! One test function, so no other test in this process reads the variables while they are set.

use ringtrace::Builder;

fn build_error() -> String {
    Builder::new().no_recording().build().map(|_| ()).unwrap_err().to_string()
}

#[test]
fn malformed_environment_values_are_errors_naming_them() {
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
