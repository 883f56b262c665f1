#!/usr/bin/env bash
# Demo cluster request throughput with ringtrace recording everything, against the same cluster
# with no subscriber at all and with the floor layer (the least any recorder does: timestamps
# spans and events into a per-thread buffer, exports nothing); runs interleaved (on, off, floor,
# on, off, floor, …) and reports medians, and each mode's rate against the run beside it in the
# same round (the median and quartiles of the rounds' ratios: steadier than a ratio of medians
# when other work comes and goes on the machine).
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
for round in $(seq "$RUNS"); do
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
        echo "$round $mode $rate"
    done
done >"$out/rates"
# Parsed once every run has ended: an interpreter started beside the runs (a pipe) would take a
# core from the first of them.
python3 -c '
import statistics, sys
rates, rounds = {}, {}
for line in sys.stdin:
    n, mode, rate = line.split()
    rates.setdefault(mode, []).append(float(rate))
    rounds.setdefault(n, {})[mode] = float(rate)
labels = {"on": "ringtrace recording", "base": "BASE_BIN recording", "off": "no subscriber", "floor": "floor layer",
          "fields": "floor, every field", "disk": "floor, every field, to a file",
          "sdisk": "floor subscriber, to a file"}
for mode, runs in rates.items():
    print(f"{labels[mode]:>30}: median {statistics.median(runs):.0f} requests/s over {len(runs)} runs {sorted(runs)}")
def paired(mode, ref):
    """The median and quartiles of each round ratio of mode to ref (runs side by side)."""
    ratios = [r[mode] / r[ref] for r in rounds.values() if mode in r and ref in r]
    if len(ratios) < 2:
        return f"{ratios[0]:.3f}" if ratios else "-"
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return f"{statistics.median(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f})"
if "off" in rates:
    off = statistics.median(rates["off"])
    for mode in ("on", "base", "floor", "fields", "disk", "sdisk"):
        if mode in rates:
            kept = 100 * statistics.median(rates[mode]) / off
            print(f"throughput kept, {labels[mode]}: {kept:.1f}%, round by round", paired(mode, "off"))
if "base" in rates and "on" in rates:
    print("this build against BASE_BIN, round by round:", paired("on", "base"))
' <"$out/rates"
