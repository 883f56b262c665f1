#!/usr/bin/env bash
# Demo cluster request throughput with ringtrace recording everything, against the same cluster
# with no subscriber at all and with the floor layer (the least any recorder does: timestamps
# spans and events into a per-thread buffer, exports nothing); runs interleaved (on, off, floor,
# on, off, floor, …) and reports medians.
#
#   bash benches/demo_overhead.sh            # RUNS=7 rounds of REQUESTS=2000 requests, release build
#   TMPDIR=/dev/shm bash benches/demo_overhead.sh   # the demo's files in memory: steadier figures
#                                                  # (on ext4 every mode drifts within a run)
#   MODES="on off" bash benches/demo_overhead.sh    # leave the floor out
#   MODES="on off floor fields" bash benches/demo_overhead.sh   # and the floor keeping every
#                                                  # field (each value formatted into a buffer)
#   MODES="on off fields disk" bash benches/demo_overhead.sh   # and that floor writing its
#                                                  # buffers to a file (the least that keeps data)
#   MODES="on off disk sdisk" bash benches/demo_overhead.sh    # and the same floor without the
#                                                  # registry (recording runs ringtrace's
#                                                  # standalone subscriber: `init()`'s default)
#   BASE_BIN=/tmp/ringtrace-old MODES="base on disk off" bash benches/demo_overhead.sh
#                                                  # and another build of the CLI recording
#                                                  # (`base`), to compare two commits in one run
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-7}"
REQUESTS="${REQUESTS:-2000}"
MODES="${MODES:-on off floor}"
cargo build -q --release -p ringtrace-cli
bin="${CARGO_TARGET_DIR:-target}/release/ringtrace"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for _ in $(seq "$RUNS"); do
    for mode in $MODES; do
        case "$mode" in
            on) run=(env -u RINGTRACE_DEMO_TRACING "$bin" demo) ;;
            base) run=(env -u RINGTRACE_DEMO_TRACING "${BASE_BIN:?MODES=base needs BASE_BIN: another build of the ringtrace CLI}" demo) ;;
            off | floor) run=(env RINGTRACE_DEMO_TRACING="$mode" "$bin" demo --no-tracing) ;;
            fields) run=(env RINGTRACE_DEMO_TRACING=floor-fields "$bin" demo --no-tracing) ;;
            disk) run=(env RINGTRACE_DEMO_TRACING=floor-disk "$bin" demo --no-tracing) ;;
            sdisk) run=(env RINGTRACE_DEMO_TRACING=floor-subscriber-disk "$bin" demo --no-tracing) ;;
            *) echo "MODES: unknown mode $mode (expected on, base, off, floor, fields, disk, sdisk)" >&2; exit 2 ;;
        esac
        # The demo prints "request phase: T s, R requests/s".
        rate="$("${run[@]}" --requests "$REQUESTS" --out "$out/demo" \
            | sed -n 's/^request phase: .*, \([0-9]*\) requests\/s$/\1/p')"
        echo "$mode $rate"
    done
done >"$out/rates"
# Parsed once every run has ended: an interpreter started beside the runs (a pipe) would take a
# core from the first of them.
python3 -c '
import statistics, sys
rates = {}
for line in sys.stdin:
    mode, rate = line.split()
    rates.setdefault(mode, []).append(float(rate))
labels = {"on": "ringtrace recording", "base": "BASE_BIN recording", "off": "no subscriber", "floor": "floor layer",
          "fields": "floor, every field", "disk": "floor, every field, to a file",
          "sdisk": "floor subscriber, to a file"}
for mode, runs in rates.items():
    print(f"{labels[mode]:>30}: median {statistics.median(runs):.0f} requests/s over {len(runs)} runs {sorted(runs)}")
if "off" in rates:
    off = statistics.median(rates["off"])
    for mode in ("on", "base", "floor", "fields", "disk", "sdisk"):
        if mode in rates:
            print(f"throughput kept, {labels[mode]}: {100 * statistics.median(rates[mode]) / off:.1f}%")
' <"$out/rates"
