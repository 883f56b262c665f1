#!/usr/bin/env bash
# Makes sure a chromium is there for the HTML report's browser test (crates/cli/tests/report.rs).
# `CHROMIUM=/path/to/chromium` names one you already have; otherwise `chromium` (or
# `chromium-browser`) on PATH is used; otherwise, as root, Debian's package is installed. Without
# root and without chromium, it says what to run and fails. Prints the browser's path last.
set -euo pipefail
if [ -n "${CHROMIUM:-}" ]; then
    if [ ! -x "$CHROMIUM" ]; then
        echo "CHROMIUM=$CHROMIUM is not an executable file" >&2
        exit 1
    fi
    echo "$CHROMIUM"
    exit 0
fi
for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then
        command -v "$name"
        exit 0
    fi
done
if [ "$(id -u)" != 0 ]; then
    cat >&2 <<'MSG'
chromium is not installed, and installing it needs root. Either run
    sudo apt-get update && sudo apt-get install -y --no-install-recommends chromium
or point the tests at a browser you already have:
    CHROMIUM=/path/to/chromium bash scripts/test.sh
MSG
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends chromium >/dev/null
# The downloaded packages are not needed once installed; a CI machine's disk can be small.
apt-get clean
command -v chromium
