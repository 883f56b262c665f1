#!/usr/bin/env bash
# Runs the whole test command (`scripts/test.sh`) RUNS times in a row (default 20) while two busy
# loops keep both cores busy, to show that no test's verdict depends on machine load. Stops at the
# first failed run. Prints one line per run (its `N passed, N failed` line, exit status and wall
# time) and keeps each run's full output in `soak-logs/run-K.log` (git-ignored).
#
#   bash scripts/soak.sh [RUNS]
#
# The loops run at the priority the script was started with, so `nice -n 10 bash scripts/soak.sh`
# lets other work on the machine go first without changing the load the tests see.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20}"
case "$runs" in
    '' | *[!0-9]*) echo "RUNS must be a positive integer, got '$runs'" >&2; exit 2 ;;
esac
mkdir -p soak-logs
loops=()
stop_loops() { for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap stop_loops EXIT
for _ in 1 2; do
    (while :; do :; done) &
    loops+=("$!")
done
echo "soak: $runs runs of scripts/test.sh under 2 busy loops (pids ${loops[*]}), commit $(git rev-parse --short HEAD)"
for k in $(seq 1 "$runs"); do
    start=$(date +%s)
    status=0
    bash scripts/test.sh >"soak-logs/run-$k.log" 2>&1 || status=$?
    summary="$(grep -E '^[0-9]+ passed, [0-9]+ failed' "soak-logs/run-$k.log" | tail -1 || true)"
    echo "run $k/$runs: ${summary:-no summary line}, exit $status, $(($(date +%s) - start)) s, load $(cut -d' ' -f1 /proc/loadavg)"
    if [ "$status" != 0 ]; then
        echo "soak: run $k failed; its output is in soak-logs/run-$k.log" >&2
        exit 1
    fi
done
echo "soak: $runs consecutive passes"
