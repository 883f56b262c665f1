#!/usr/bin/env bash
# Cargo's target runner during the test command (`scripts/test.sh`): runs one test binary and,
# if it is still running after RINGTRACE_TEST_WATCHDOG seconds (default 1500), prints every
# thread's stack (with gdb, when the machine has it and may attach) and stops it with every
# process it started. A hung test then fails its own binary, with the stacks that show where it
# waits, instead of holding CI until its time limit while every later binary never runs. A
# verdict never depends on this limit: a binary that passes does so in a few minutes even on a
# loaded machine.
set -u
limit="${RINGTRACE_TEST_WATCHDOG:-1500}"
# A session (and process group) of its own, so that stopping it stops what it started: an
# orphaned child would keep the test command's output pipe open, and hang it anyway.
setsid "$@" &
pid=$!
# Ctrl-C or a stop of the test command reaches the binary's group too.
trap 'kill -TERM -- "-$pid" 2>/dev/null' INT TERM
waited=0
while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$((limit * 5))" ]; do
    sleep 0.2 &
    wait $!
    waited=$((waited + 1))
done
if kill -0 "$pid" 2>/dev/null; then
    # On a line of its own: libtest may have left one unfinished.
    printf '\nwatchdog: %s still running after %s s; stopped as hung. Its threads:\n' "${1##*/}" "$limit"
    stacks=""
    if command -v gdb >/dev/null; then
        stacks="$(timeout 60 gdb -p "$pid" -batch -ex "thread apply all bt" 2>&1 | grep -E '^(Thread|#)')"
    fi
    echo "${stacks:-(no stacks: gdb is missing or may not attach to the process)}"
    kill -KILL -- "-$pid" 2>/dev/null
fi
wait "$pid"
status=$?
trap - INT TERM
# Died of a signal: die of it too, so that cargo reports the signal rather than 128 + its number.
if [ "$status" -gt 128 ] && [ "$status" -lt 160 ]; then
    kill -s "$((status - 128))" $$
fi
exit "$status"
