#!/usr/bin/env bash
# Installs Debian's chromium for the HTML report's browser test (crates/cli/tests/report.rs),
# if it is not there yet. Idempotent and quiet; needs root (as on the project's machines).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends chromium >/dev/null
# The downloaded packages are not needed once installed; a CI machine's disk can be small.
apt-get clean
command -v chromium >/dev/null
