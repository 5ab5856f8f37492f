#!/usr/bin/env bash
# Third call: the committed binaries (LL grids up to 512 blocks a GPU, auto
# where processes share a GPU). (1) The 4-rank bench that stopped for 60 s
# in run2 (the binary before the grid change, round 2: the `auto` row at
# 1 KiB, which takes ring:ll there), six times with the engine's timeout
# at 15 s so that a stop names its wait; the same on 2 ranks. (2) Soak of
# ring:ll and auto on 4 ranks. (3) The GPU tests that cross the changes:
# every path, the LL kernels' stall and fail tests, processes sharing the
# GPU; memcheck and racecheck of ring:ll with the wide grid.
#   bash docs/results/2026-12-06-h200x1-host-ordered/run3.sh   (.device carried: pack.tar.xz)
set -u
tar xJf .device/pack.tar.xz -C .device
. .device/record-command.sh; record_start host-ordered-3 "$@"
LLB="-b 16 -e 16MiB -f 4 -n 20 -w 5 --blocks 3 --no-ceiling --timeout 15 --algo ring:ll,ring,ring:pipe2,auto"
for i in 1 2 3 4 5 6; do
  step hang 40 $RR bench --backend cuda --devices 0 --ranks 4 $LLB --json "$O/ll4-$i.json"
done
for i in 1 2; do
  step hang 40 $RR bench --backend cuda --devices 0 --ranks 2 $LLB --json "$O/ll2-$i.json"
done
step soak 60 $RR soak --backend cuda --devices 0 --ranks 4 --algo auto --calls 3000 --max-size 4MiB --timeout 15
step soak 60 $RR soak --backend cuda --devices 0 --ranks 4 --algo ring:ll --calls 3000 --max-size 16MiB --timeout 15
step tests 150 .device/integration every_path ll_ring_kernel ll_one_shot processes_sharing_a_gpu
step sanitizer 90 compute-sanitizer --tool memcheck --error-exitcode 9 $RR run --backend cuda --devices 0 --ranks 2 --algo ring:ll --size 4MiB --timeout 60
step sanitizer 120 compute-sanitizer --tool racecheck --error-exitcode 9 $RR run --backend cuda --devices 0 --ranks 3 --algo ring:ll --size 1MiB --timeout 100
cd "$O" && grep -E "error|Error|timed out|gave up|waited|FAIL|wrong" hang.log | head -30
grep -E "PASS|FAIL|wrong" soak.log | tail -4; grep -E "PASS|FAIL|passed|failed|SKIPPED|ok \(" tests.log | tail -30; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|check|error" sanitizer.log | head; cat command.txt
tar cJf logs.tar.xz *.log *.json; rm -f *.log *.json; true
