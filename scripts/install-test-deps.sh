#!/usr/bin/env bash
# Installs what the tests need besides the Rust toolchain and chromium: `rotel-agent`, the
# OpenTelemetry collector the OTLP tests export to (Python package `rotel`; only pre-releases
# exist, hence the pinned version), into a virtualenv of its own, `.venv-test/` at the repository
# root (git-ignored): no root and no system Python packages needed. Idempotent: does nothing when
# that version is already there. Prints the path of `rotel-agent` as its last line.
#
# `ROTEL_AGENT=/path/to/rotel-agent` skips the install and uses that collector instead.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${ROTEL_AGENT:-}" ]; then
    if [ ! -x "$ROTEL_AGENT" ]; then
        echo "ROTEL_AGENT=$ROTEL_AGENT is not an executable file" >&2
        exit 1
    fi
    "$ROTEL_AGENT" --version >/dev/null
    echo "$ROTEL_AGENT"
    exit 0
fi
ROTEL_VERSION="0.0.1a15"
VENV="$PWD/.venv-test"
. scripts/test-venv.sh
test_venv_install rotel "$ROTEL_VERSION" "or point ROTEL_AGENT=/path/to/rotel-agent at a collector you already have"
# The package keeps `rotel-agent` in its own directory, not in the virtualenv's bin/.
agent="$("$py" -c 'import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), "rotel-agent"))')"
"$agent" --version >/dev/null
echo "rotel-agent $ROTEL_VERSION in $VENV" >&2
echo "$agent"
