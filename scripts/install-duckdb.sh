#!/usr/bin/env bash
# Installs DuckDB's Python package (pinned) into the test virtualenv `.venv-test/` at the
# repository root (made here if missing; git-ignored), for the test that reads the Parquet store
# with DuckDB. Idempotent. Prints the virtualenv's python as its last line.
#
# `DUCKDB_PYTHON=/path/to/python` (a Python that can `import duckdb`) skips the install.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${DUCKDB_PYTHON:-}" ]; then
    "$DUCKDB_PYTHON" -c 'import duckdb' || {
        echo "DUCKDB_PYTHON=$DUCKDB_PYTHON cannot import duckdb" >&2
        exit 1
    }
    echo "$DUCKDB_PYTHON"
    exit 0
fi
DUCKDB_VERSION="1.5.6"
VENV="$PWD/.venv-test"
if [ ! -x "$VENV/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$VENV" >/dev/null || {
        rm -rf "$VENV"
        echo "could not create the virtualenv $VENV (Debian/Ubuntu: apt-get install python3-venv)" >&2
        exit 1
    }
fi
py="$VENV/bin/python"
installed="$("$py" -m pip show duckdb 2>/dev/null | sed -n 's/^Version: //p' || true)"
if [ "$installed" != "$DUCKDB_VERSION" ]; then
    "$py" -m pip install --quiet --disable-pip-version-check --no-cache-dir "duckdb==$DUCKDB_VERSION" >&2
fi
"$py" -c 'import duckdb' >&2
echo "duckdb $DUCKDB_VERSION in $VENV" >&2
echo "$py"
