#!/usr/bin/env bash
# The CUDA rank's executor with its layers (rank/hooks/: faults, capture
# checks, timing, NVTX, traffic; rank/network.rs), on one GPU (call 1):
# the GPU tests (gpu-check.sh tests: the API and integration tests, their
# CUDA variants), then a timeline of 2 rank threads sharing the GPU timed
# by CUPTI (the default) and by events (RINGREDUCE_CUPTI=0), ring and
# ring:ll, and the traffic count of `run`. Call 2 is the A/B:
# `bash .device/gpu-check.sh ab` with the session's start staged as
# .device/ringreduce-old.
#   bash docs/results/2026-12-06-h100x1-executor-layers/run.sh   (.device carried)
set -u
(cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
. .device/record-command.sh; record_start layers-tests "$@"
OUT="$O" GPU_CHECK_LIMIT_S=420 bash .device/gpu-check.sh tests > "$O/gpu-check-tests.log" 2>&1
echo "gpu-check tests: exit $?" | tee -a "$O/command.txt"
grep -E "FAILED|passed|failed" "$O/tests.log" | tail -8
grep -A6 "^---- " "$O/tests.log" | head -40
for algo in ring ring:ll; do
  step timeline 60 $RR trace --backend cuda --ranks 2 --devices 0,0 --algo $algo --size 4MiB --timeline --calls 3
  step timeline-events 60 env RINGREDUCE_CUPTI=0 $RR trace --backend cuda --ranks 2 --devices 0,0 --algo $algo --size 4MiB --timeline --calls 3
done
step run 60 $RR run --backend cuda --ranks 2 --devices 0,0 --algo ring --size 4MiB --iters 5
tail -n 12 "$O/run.log"
cd "$O" && for f in tests.log gpu-check-tests.log timeline.log timeline-events.log; do [ -f "$f" ] && xz -9 "$f"; done; ls
