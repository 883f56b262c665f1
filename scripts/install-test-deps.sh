#!/usr/bin/env bash
# Installs what the tests need besides the Rust toolchain: `rotel-agent`, the OpenTelemetry
# collector the OTLP tests export to (PyPI package `rotel`; only pre-releases exist, hence the
# pinned version). Idempotent: does nothing when that version is already installed.
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore
ROTEL_VERSION="0.0.1a15"
PYTHON="${PYTHON:-python3}"
installed="$("$PYTHON" -m pip show rotel 2>/dev/null | sed -n 's/^Version: //p' || true)"
if [ "$installed" != "$ROTEL_VERSION" ]; then
    "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-cache-dir "rotel==$ROTEL_VERSION"
fi
agent="$("$PYTHON" -c 'import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), "rotel-agent"))')"
"$agent" --version >/dev/null
echo "rotel-agent $ROTEL_VERSION: $agent"
