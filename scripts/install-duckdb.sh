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
. scripts/test-venv.sh
test_venv_install duckdb "$DUCKDB_VERSION" "or point DUCKDB_PYTHON at a Python that imports duckdb"
"$py" -c 'import duckdb' >&2
echo "duckdb $DUCKDB_VERSION in $VENV" >&2
echo "$py"
