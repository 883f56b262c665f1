#!/usr/bin/env bash
# ringtrace's views over a Parquet store larger than memory (issue #18: 50 million spans within
# 1 GiB): the synthetic word-count workload generated straight into a store, a thousand requests
# at a time (`examples/synthetic_store.rs`, no recordings in between), then every view timed over
# the store (wall time and peak resident memory, `/usr/bin/time`) and DuckDB's nearest queries
# on the same files (median of 3), as `store_views.sh` runs them.
#
#   bash benches/store_views_large.sh [SPANS] [DIR]   # default 50000000 spans under $TMPDIR
#
# Needs about 60 bytes of disk a span for the store, plus the views' outputs (critical-path,
# breakdown and requests print a line or more per request: about 50 bytes a span each).
set -euo pipefail
cd "$(dirname "$0")/.."
SPANS="${1:-50000000}"
DIR="${2:-${TMPDIR:-/tmp}/ringtrace-store-large}"
PYTHON="${DUCKDB_PYTHON:-.venv-test/bin/python}"
cargo build -q --release -p ringtrace-analysis --features store --example synthetic_store
cargo build -q --release -p ringtrace-cli
bin="${CARGO_TARGET_DIR:-target}/release"
rm -rf "$DIR" && mkdir -p "$DIR"
/usr/bin/time -f "generate and export $SPANS spans: %e s, %M KB peak" \
    "$bin/examples/synthetic_store" "$DIR/store" "$SPANS"
du -sh "$DIR/store"
echo "| view | s | peak MB | output bytes |"
echo "|---|---:|---:|---:|"
for view in "stats --json" "deps --json" "critical-path --json" "bottlenecks --json" "breakdown --json" \
    "flame --format folded" "profile --json --by method" "profile --json --by node" "requests --json" \
    "anomalies --json" "diff --json --slowest 10" "report --quiet -o /dev/stdout"; do
    # shellcheck disable=SC2086 # the view's words are separate arguments
    if /usr/bin/time -o "$DIR/time" -f "%e %M" "$bin/ringtrace" $view "$DIR/store" >"$DIR/out" 2>"$DIR/err"; then
        read -r secs kb <"$DIR/time"
        echo "| \`$view\` | $secs | $((kb / 1024)) | $(stat -c %s "$DIR/out") |"
    else
        echo "| \`$view\` | failed: $(tail -n 1 "$DIR/err") | | |"
    fi
    rm -f "$DIR/out"
done
"$PYTHON" benches/store_duckdb.py "$DIR/store"
