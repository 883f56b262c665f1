#!/usr/bin/env bash
# Demo cluster request throughput with ringtrace recording everything, against the same cluster
# with no subscriber at all; runs interleaved (on, off, on, off, …) and reports medians.
#
#   bash benches/demo_overhead.sh            # RUNS=7 pairs of REQUESTS=2000 requests, release build
#   TMPDIR=/dev/shm bash benches/demo_overhead.sh   # the demo's files in memory: steadier figures
#                                                  # (on ext4 both modes drift within a run)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-7}"
REQUESTS="${REQUESTS:-2000}"
cargo build -q --release -p ringtrace-cli
bin=target/release/ringtrace
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for _ in $(seq "$RUNS"); do
    for mode in on off; do
        flag=""
        [ "$mode" = off ] && flag="--no-tracing"
        # The demo prints "request phase: T s, R requests/s".
        rate="$("$bin" demo --requests "$REQUESTS" --out "$out/demo" $flag | sed -n 's/^request phase: .*, \([0-9]*\) requests\/s$/\1/p')"
        echo "$mode $rate"
    done
done | python3 -c '
import statistics, sys
rates = {"on": [], "off": []}
for line in sys.stdin:
    mode, rate = line.split()
    rates[mode].append(float(rate))
on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
for mode, median in (("on ", on), ("off", off)):
    runs = sorted(rates[mode.strip()])
    print(f"recording {mode}: median {median:.0f} requests/s over {len(runs)} runs {runs}")
print(f"throughput kept with recording: {100 * on / off:.1f}%")
'
