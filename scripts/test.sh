#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (`.ci/run`), on a fresh machine: it installs what
# the tests need, then runs every crate's unit, integration and doc tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# A fresh clone gains nothing from incremental state; it would only double the target directory.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi
echo "disk free before the build: $(df -h --output=avail . | tail -1 | tr -d ' ')"
bash scripts/install-test-deps.sh   # rotel-agent, the OTLP collector the exporter tests talk to
bash scripts/install-chromium.sh    # Debian's chromium, which renders the HTML report in its test
cargo fmt --all --check             # one style (rustfmt.toml); `cargo fmt --all` fixes it
# The default members: everything but crates/bench-peers (peer tracing stacks, built only by its bench).
cargo test --all-features --locked
# Model checking of the lock-free open-span table and of the per-thread ring's hand-off and
# thread exit (loom's atomics and cells under our own cfg). A CI clone's disk can be small: the
# debug build above is no longer needed, so it makes room for this release build first.
if [ -n "${CI:-}" ]; then rm -rf "${CARGO_TARGET_DIR:-target}/debug"; fi
RUSTFLAGS="--cfg ringtrace_loom" CARGO_PROFILE_RELEASE_DEBUG=false \
    cargo test --locked --release -p ringtrace-subscriber --test loom_table --test loom_ring
echo "disk free after the tests: $(df -h --output=avail . | tail -1 | tr -d ' ')"
