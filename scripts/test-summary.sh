#!/usr/bin/env bash
# Reads cargo test's output on stdin and prints one line, `N passed, N failed`, summed over every
# `test result:` line (one per test binary and per doc-test run). Exits 1 when a test failed or
# no `test result:` line was seen at all.
set -euo pipefail
awk '
    /^test result: / {
        seen = 1
        for (i = 1; i < NF; i++) {
            if ($(i + 1) ~ /^passed;?$/) passed += $i
            if ($(i + 1) ~ /^failed;?$/) failed += $i
        }
    }
    END {
        printf "%d passed, %d failed\n", passed, failed
        exit (failed > 0 || !seen) ? 1 : 0
    }
'
