#!/usr/bin/env bash
# Cargo's target runner during the test command (`scripts/test.sh`): runs one test binary and,
# if it is still running after RINGTRACE_TEST_WATCHDOG seconds (default 1500), prints every
# thread's stack (with gdb, when the machine has it) and stops it. A hung test then fails its
# own binary, with the stacks that show where it waits, instead of holding CI until its time
# limit while every later binary never runs. A verdict never depends on this limit: a binary
# that passes does so in a few minutes even on a loaded machine.
set -u
limit="${RINGTRACE_TEST_WATCHDOG:-1500}"
"$@" &
pid=$!
if ! timeout "$limit" tail --pid="$pid" -s 0.2 -f /dev/null; then
    echo "watchdog: ${1##*/} still running after ${limit} s; stopped as hung. Its threads:"
    if command -v gdb >/dev/null; then
        gdb -p "$pid" -batch -ex "thread apply all bt" 2>/dev/null | grep -E '^(Thread|#)'
    fi
    kill -KILL "$pid" 2>/dev/null
fi
wait "$pid"
