#!/usr/bin/env bash
# Reads cargo test's output on stdin and prints one line, `N passed, N failed`, summed over every
# `test result:` line (one per test binary and per doc-test run), and the binaries the watchdog
# stopped (`scripts/test-watchdog.sh`). Exits 1 when a test failed, a binary hung, or no
# `test result:` line was seen at all.
set -euo pipefail
awk '
    /^test result: / {
        seen = 1
        for (i = 1; i < NF; i++) {
            if ($(i + 1) ~ /^passed;?$/) passed += $i
            if ($(i + 1) ~ /^failed;?$/) failed += $i
        }
    }
    /watchdog: .* stopped as hung/ { hung++ }
    END {
        printf "%d passed, %d failed", passed, failed
        if (hung) printf " (and %d test binaries stopped as hung)", hung
        printf "\n"
        exit (failed > 0 || hung > 0 || !seen) ? 1 : 0
    }
'
