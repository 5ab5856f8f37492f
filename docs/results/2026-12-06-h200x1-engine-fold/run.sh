#!/usr/bin/env bash
# The engine as one untyped type (Engine<T> and Core folded into Engine,
# no per-call retype): the GPU tests (gpu-check.sh tests), then the A/B of
# 2c3bdc1 (.device/ringreduce-old) against this tree (gpu-check.sh ab,
# AB_RUNS=2, one GPU: bench --algo auto,ring,ring:pipe2 -b 8 -e 256MiB with
# 2 rank threads sharing the GPU and with launch -n 2 processes,
# interleaved) while the call's time lasts.
#   bash .device/fold-ab.sh   (.device carried)
set -u
(cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
. .device/record-command.sh; record_start fold-tests "$@"
OUT="$O" GPU_CHECK_LIMIT_S=200 bash .device/gpu-check.sh tests > "$O/gpu-check-tests.log" 2>&1
echo "gpu-check tests: exit $?" | tee -a "$O/command.txt"
grep -E "FAILED|passed|failed" "$O/tests.log" | tail -8
grep -A6 "^---- " "$O/tests.log" | head -30
(cd "$O" && for f in tests.log gpu-check-tests.log; do [ -f "$f" ] && xz -9 "$f"; done)
. .device/record-command.sh; record_start fold-ab "$@"
OUT="$O" AB_RUNS=2 GPU_CHECK_LIMIT_S=$(( ${LIMIT:-560} - SECONDS )) bash .device/gpu-check.sh ab > "$O/gpu-check-ab.log" 2>&1
echo "gpu-check ab: exit $? (limit $(( ${LIMIT:-560} - SECONDS )) s left)" | tee -a "$O/command.txt"
grep "^#" "$O/gpu-check-ab.log" | tail -10
(cd "$O" && [ -f gpu-check-ab.log ] && xz -9 gpu-check-ab.log); ls "$OUT"/*
