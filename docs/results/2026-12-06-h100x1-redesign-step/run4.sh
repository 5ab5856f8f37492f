#!/usr/bin/env bash
# Call 4: the GPU tests again (gpu-check.sh tests: the API tests and the
# integration tests, CUDA variants) after the fixes of call 3's failures.
#   bash docs/results/2026-12-06-h100x1-redesign-step/run4.sh   (.device carried)
set -u
(cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
. .device/record-command.sh; record_start redesign-tests2 "$@"
OUT="$O" GPU_CHECK_LIMIT_S=500 bash .device/gpu-check.sh tests > "$O/gpu-check-tests.log" 2>&1
echo "gpu-check tests: exit $?" | tee -a "$O/command.txt"
grep -E "FAILED|passed|failed" "$O/tests.log" | tail -8
grep -A6 "^---- " "$O/tests.log" | head -40
cd "$O" && for f in tests.log gpu-check-tests.log; do [ -f "$f" ] && xz -9 "$f"; done; ls
