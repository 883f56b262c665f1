#!/usr/bin/env bash
# The I/O performance model against measurement (issue #17): measures the envelope of a
# directory's file system with `ringtrace envelope` and runs a grid of many-task stages with
# `ringtrace stage` (N tasks on C worker processes, each task writing, then reading, its own
# D-byte file, recorded with ringtrace's own I/O capture), the two in alternating rounds, and
# compares each stage's measured I/O time with `ringtrace predict`'s. Prints a Markdown table
# (each stage's median time over $REPEAT rounds and half its range) and the median and worst
# errors.
#
#   bash benches/io_model.sh [DIR]             # DIR defaults to $TMPDIR; release build
#   TASKS="16 64 256" NODES="1 2 4" SIZES="4K 1M 8M" bash benches/io_model.sh
#   FSYNC= bash benches/io_model.sh            # writes into the page cache only (not synced)
#   REPEAT=5 bash benches/io_model.sh          # each stage and envelope point 5 times
#                                              # (default 3); the median
#   DIRECT=1 bash benches/io_model.sh          # reads with O_DIRECT instead of dropping the cache
#   KEEP_CACHES=1 bash benches/io_model.sh /dev/shm   # never drop the page cache (tmpfs: it
#                                              # holds the files; dropping only evicts programs)
#
# Writes are synced (`--fsync`, on both sides) unless FSYNC is empty: into the page cache alone
# a write's speed depends on how much is dirty already, which no envelope point captures.
# As root the page cache is dropped before every read (the envelope's and the stages'); without
# root reads may come from memory on both sides, which the table says.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-${TMPDIR:-/tmp}}"
TASKS="${TASKS:-16 64 256}"
NODES="${NODES:-1 2 4}"
SIZES="${SIZES:-4K 1M 8M}"
FSYNC="${FSYNC---fsync}"
REPEAT="${REPEAT:-3}"
if ! [ "$REPEAT" -ge 1 ] 2>/dev/null; then
    echo "REPEAT=$REPEAT: expected a whole number of rounds, at least 1" >&2
    exit 2
fi
cargo build -q --release -p ringtrace-cli
bin="${CARGO_TARGET_DIR:-target}/release/ringtrace"
work="$(mktemp -d "$DIR/ringtrace-io-model.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# How reads get past the page cache: `--direct` (O_DIRECT) with DIRECT=1; else, as root, the
# cache is dropped before each read (KEEP_CACHES=1: never).
drop=""
keep=""
if [ -n "${DIRECT:-}" ]; then
    drop="--direct"
    keep="--direct"
elif [ "$(id -u)" = 0 ] && [ -z "${KEEP_CACHES:-}" ]; then
    drop="--drop-caches"
else
    keep="--keep-caches"
fi
# Rounds interleave the envelope and the stages: for each process count C and file size D,
# round after round measures the envelope point (C, D) once and then every stage at (C, D)
# once, so that a change of the host's load between the envelope and the stages (a shared
# machine's drift over minutes) weighs on both alike. The envelope point is the median of its
# rounds, parameter by parameter, as `ringtrace envelope --repeat` takes it; a stage's time is
# the median of its rounds.
echo "| stage | N | C | D | measured s (median) | half-range | predicted s | error | bound |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
errors="$work/errors"
: >"$errors"
rounds="$work/rounds"
for d in $SIZES; do
    for c in $NODES; do
        rm -rf "$rounds"
        mkdir -p "$rounds"
        for r in $(seq "$REPEAT"); do
            "$bin" envelope "$work" --procs "$c" --sizes "$d" --repeat 1 $FSYNC $keep --json -o "$rounds/envelope-$r.json" >/dev/null
            for n in $TASKS; do
                stage="$work/stage"
                rm -rf "$stage"
                for kind in write read; do
                    extra=($FSYNC)
                    if [ "$kind" = read ]; then extra=($drop); fi
                    # The stage's output is parsed after it ended: a parser started beside
                    # it (a pipe) would take a core from its workers while they run.
                    result="$("$bin" stage --dir "$stage" --stage "$kind" --tasks "$n" --nodes "$c" --bytes "$d" --json ${extra[@]+"${extra[@]}"})"
                    python3 -c 'import json,sys; print(json.loads(sys.argv[1])["seconds"])' "$result" >>"$rounds/$kind-$n"
                done
                rm -rf "$stage"
            done
        done
        # The envelope point: each parameter's median over the rounds.
        python3 - "$rounds" "$REPEAT" "$work/envelope.json" <<'PY'
import json, os, statistics, sys
rounds, repeat, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
docs = [json.load(open(f"{rounds}/envelope-{r}.json")) for r in range(1, repeat + 1)]
points = [d["points"][0] for d in docs]
# A parameter is the median of the rounds that measured it (absent from all: absent).
keys = {k for p in points for k in p} - {"procs", "bytes"}
point = {k: statistics.median(p[k] for p in points if k in p) for k in sorted(keys)}
point["procs"], point["bytes"] = points[0]["procs"], points[0]["bytes"]
envelope = json.load(open(out)) if os.path.exists(out) else {"points": [], "reads": docs[0].get("reads")}
envelope["points"].append(point)
json.dump(envelope, open(out, "w"))
PY
        for n in $TASKS; do
            for kind in write read; do
                runs="$(cat "$rounds/$kind-$n")"
                predicted="$("$bin" predict --envelope "$work/envelope.json" --stage "$kind" --tasks "$n" --nodes "$c" --bytes "$d" --json)"
                python3 - "$kind" "$n" "$c" "$d" "$runs" "$predicted" "$errors" <<'PY'
import json, statistics, sys
kind, n, c, d, runs, predicted, errors = sys.argv[1:]
p = json.loads(predicted)
times = sorted(float(x) for x in runs.split())
m = statistics.median(times)
spread = (times[-1] - times[0]) / m
err = (p["seconds"] - m) / m
bounds = ", ".join(f'{t["name"]}: {t["bound"]}' for t in p["terms"])
print(f"| {kind} | {n} | {c} | {d} | {m:.4f} | ±{50 * spread:.0f}% | {p['seconds']:.4f} | {100 * err:+.1f}% | {bounds} |")
open(errors, "a").write(f"{abs(err)}\n")
PY
            done
        done
    done
done
python3 - "$errors" "${drop:-kept}" <<'PY'
import statistics, sys
errs = sorted(float(x) for x in open(sys.argv[1]))
cache = {"--direct": "bypassed (O_DIRECT reads)", "--drop-caches": "dropped before reads"}.get(sys.argv[2], "kept")
print(f"\n{len(errs)} stages; median error {100 * statistics.median(errs):.1f}%, worst {100 * errs[-1]:.1f}%; page cache {cache}")
PY
