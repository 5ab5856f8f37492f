#!/usr/bin/env bash
# The engine-buffer bench A/B of the old library (.device/ringreduce-old,
# .device/COMMIT-old) against this one (gpu-check.sh ab: bench --algo
# auto,ring,ring:pipe2 -b 8 -e 256MiB, 2 rank threads sharing the GPU and
# launch -n 2 processes, interleaved, AB_RUNS runs).
#   AB_RUNS=3 bash docs/results/2026-12-06-gpu-host-rounds/run-ab.sh   (.device carried)
set -u
[ -f .device/pack.tar.xz ] && (cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
. .device/record-command.sh; record_start ab "$@"
OUT="$O" GPU_CHECK_LIMIT_S=$(( ${LIMIT:-570} - SECONDS )) bash .device/gpu-check.sh ab > "$O/gpu-check-ab.log" 2>&1
echo "gpu-check ab: exit $? ($(( ${LIMIT:-570} - SECONDS )) s left)" | tee -a "$O/command.txt"
grep "^#" "$O/gpu-check-ab.log" | tail -10
(cd "$O" && [ -f gpu-check-ab.log ] && xz -9 gpu-check-ab.log); ls "$OUT"/*
