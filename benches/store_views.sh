#!/usr/bin/env bash
# ringtrace's views over the Parquet store (DataFusion) against the same views over the
# recordings and against DuckDB's nearest queries on the same files (issue #18). Generates the
# synthetic word-count workload, exports it to a store, then times each view both ways (wall
# time and peak resident memory, `/usr/bin/time`), checks that both print the same, and runs
# DuckDB's queries (median of 3, timed inside one DuckDB connection).
#
#   bash benches/store_views.sh [SPANS] [DIR]   # default 1000000 spans under $TMPDIR; release build
#
# DuckDB comes from the test virtualenv (`scripts/install-duckdb.sh`) or $DUCKDB_PYTHON.
# DuckDB's queries are the nearest SQL has: `stats` without self time (a span's duration minus
# its children's), `deps` as a join of each span with its parent, without the request trees'
# repairs (cycles, shared client/server ids, uninstrumented peers).
set -euo pipefail
cd "$(dirname "$0")/.."
SPANS="${1:-1000000}"
DIR="${2:-${TMPDIR:-/tmp}/ringtrace-store-views}"
PYTHON="${DUCKDB_PYTHON:-.venv-test/bin/python}"
cargo build -q --release -p ringtrace-cli -p ringtrace-analysis --example synthetic_recording
cargo build -q --release -p ringtrace-cli
bin="${CARGO_TARGET_DIR:-target}/release"
rm -rf "$DIR" && mkdir -p "$DIR"
"$bin/examples/synthetic_recording" "$DIR/rec" "$SPANS" >/dev/null
/usr/bin/time -f "export --format parquet: %e s, %M KB peak" \
    "$bin/ringtrace" export --format parquet "$DIR/rec" -o "$DIR/store" 2>&1 | grep -v '^ringtrace: wrote'
echo "| view | store: s | store: peak MB | recordings: s | recordings: peak MB | same output |"
echo "|---|---:|---:|---:|---:|---|"
for view in "stats --json" "deps --json" "critical-path --json" "bottlenecks --json" "breakdown --json" \
    "flame --format folded" "profile --json --by method" "profile --json --by node" "requests --json" \
    "anomalies --json" "diff --json --slowest 10" "report --quiet -o /dev/stdout"; do
    row="| \`$view\` |"
    for input in store rec; do
        # shellcheck disable=SC2086 # the view's words are separate arguments
        /usr/bin/time -o "$DIR/time" -f "%e %M" "$bin/ringtrace" $view "$DIR/$input" >"$DIR/out-$input" 2>/dev/null
        read -r secs kb <"$DIR/time"
        row="$row $secs | $((kb / 1024)) |"
    done
    if cmp -s "$DIR/out-store" "$DIR/out-rec"; then row="$row yes |"; else row="$row **no** |"; fi
    echo "$row"
done
"$PYTHON" benches/store_duckdb.py "$DIR/store"
