#!/usr/bin/env bash
# Makes sure the programs the I/O tests trace and run are there (crates/cli/tests/io_strace.rs):
# `strace`, `curl` and `python3` (whose `http.server` is the traced server). Missing ones are
# installed from Debian's packages, which needs root; without root it says what to run and
# fails. Prints the path of strace last.
set -euo pipefail
missing=()
for tool in strace curl python3; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "missing: ${missing[*]}; installing needs root. Run" >&2
        echo "    sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    apt-get clean
fi
# strace needs ptrace: a container without it fails here, with strace's own message.
strace -f -o /dev/null true
command -v strace
