#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (`.ci/run`), on a fresh machine: it installs what
# the tests need, then runs every crate's unit, integration and doc tests — every test binary,
# even after one fails — and ends with one line, `N passed, N failed`, over all of them. Exits
# non-zero if anything failed.
#
# What it installs (once; later runs reuse it):
#   - `rotel-agent`, a small OpenTelemetry collector (Python package `rotel`), into the
#     virtualenv `.venv-test/` at the repository root — no root needed;
#     `ROTEL_AGENT=/path/to/rotel-agent` uses one you already have instead;
#   - chromium, for the HTML report's browser test: Debian's package, which needs root;
#     `CHROMIUM=/path/to/chromium` uses one you already have instead;
#   - strace, curl and python3, for the I/O tests that trace real programs: Debian's packages
#     when missing (root);
#   - DuckDB's Python package, into `.venv-test/` too, for the test that reads the Parquet store;
#     `DUCKDB_PYTHON=/path/to/python` uses a Python that already has it.
# A cold run (nothing built or installed yet) takes about 15-25 minutes on 2 cores, most of it
# compiling; a warm one a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
# A fresh clone gains nothing from incremental state; it would only double the target directory.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi
echo "disk free before the build: $(df -h --output=avail . | tail -1 | tr -d ' ')"
ROTEL_AGENT="$(bash scripts/install-test-deps.sh | tail -1)"   # the OTLP tests' collector
CHROMIUM="$(bash scripts/install-chromium.sh | tail -1)"        # renders the HTML report in its test
bash scripts/install-io-tools.sh >/dev/null                      # strace, curl, python3 for the I/O tests
DUCKDB_PYTHON="$(bash scripts/install-duckdb.sh | tail -1)"      # reads the Parquet store in its test
export ROTEL_AGENT CHROMIUM DUCKDB_PYTHON
echo "rotel-agent: $ROTEL_AGENT"
echo "chromium:    $CHROMIUM"
echo "duckdb:      $DUCKDB_PYTHON"

# Every test binary runs under a watchdog that stops it, with its threads' stacks, if it hangs.
if [[ "$PWD" != *[[:space:]]* ]]; then
    host="$(rustc -vV | sed -n 's/^host: //p')"
    export "CARGO_TARGET_$(echo "$host" | tr 'a-z-' 'A-Z_')_RUNNER=$PWD/scripts/test-watchdog.sh"
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
# Runs a command, keeping its output on the terminal and in the log; a failure is remembered,
# not fatal, so every later step still runs.
step() {
    "$@" 2>&1 | tee -a "$log" || status=1
}
step cargo fmt --all --check             # one style (rustfmt.toml); `cargo fmt --all` fixes it
# The API docs build without a warning (broken intra-doc links are errors in every crate).
RUSTDOCFLAGS="-D warnings" step cargo doc --no-deps --all-features --locked -q
# The default members: everything but crates/bench-peers (peer tracing stacks, built only by its bench).
step cargo test --all-features --locked --no-fail-fast
# Model checking of the lock-free open-span table and of the per-thread ring's hand-off and
# thread exit (loom's atomics and cells under our own cfg). A CI clone's disk can be small: the
# debug build above is no longer needed, so it makes room for this release build first.
if [ -n "${CI:-}" ]; then rm -rf "${CARGO_TARGET_DIR:-target}/debug"; fi
RUSTFLAGS="--cfg ringtrace_loom" CARGO_PROFILE_RELEASE_DEBUG=false \
    step cargo test --locked --release --no-fail-fast -p ringtrace-subscriber --test loom_table --test loom_ring
echo "disk free after the tests: $(df -h --output=avail . | tail -1 | tr -d ' ')"
bash scripts/test-summary.sh <"$log" || status=1
exit "$status"
