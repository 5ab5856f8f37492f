#!/usr/bin/env bash
# The features step (nccl and profiling as features of their own; the
# narrower public API) on one GPU, call 1: the GPU tests (gpu-check.sh
# tests: the API and integration tests, their CUDA variants, every feature
# on), timelines of 2 rank threads sharing the GPU timed by CUPTI (the
# default) and by events (RINGREDUCE_CUPTI=0), ring and ring:ll at 4 MiB,
# and the library built alone with its default features (CUDA without
# NCCL or profiling) running examples/device_buffers.
#   bash .device/features-run.sh   (.device carried)
set -u
(cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
. .device/record-command.sh; record_start features-tests "$@"
OUT="$O" GPU_CHECK_LIMIT_S=300 bash .device/gpu-check.sh tests > "$O/gpu-check-tests.log" 2>&1
echo "gpu-check tests: exit $?" | tee -a "$O/command.txt"
grep -E "FAILED|passed|failed" "$O/tests.log" | tail -8
grep -A6 "^---- " "$O/tests.log" | head -40
for algo in ring ring:ll; do
  a=${algo/:/-}
  step timeline 60 $RR trace --backend cuda --ranks 2 --devices 0,0 --algo $algo --size 4MiB --timeline "$O/$a-cupti.json" --calls 3
  step timeline-events 60 env RINGREDUCE_CUPTI=0 $RR trace --backend cuda --ranks 2 --devices 0,0 --algo $algo --size 4MiB --timeline "$O/$a-events.json" --calls 3
done
grep -iE "source|timed by" "$O/timeline.log" "$O/timeline-events.log" | head -12
step libdefault 60 .device/device_buffers-libdefault
tail -n 14 "$O/libdefault.log"
cd "$O" && tar cJf timelines.tar.xz *.json && rm -f *.json; for f in tests.log gpu-check-tests.log timeline.log timeline-events.log; do [ -f "$f" ] && xz -9 "$f"; done; ls
