#!/usr/bin/env bash
# One GPU, 2 ranks each a process on it (`launch -n 2`): the waits between
# ranks made on the host once the awaited work completed, instead of on
# the GPU (an interprocess event). Correctness first (check with exact
# inputs, soak --every, the GPU test, the refusal of a path that spins on
# flags), then bench of every path under launch beside the same paths
# with the ranks as threads of one process on the same GPU. Sized for a
# session with about 6 device minutes left (3 ranks not run).
#   bash docs/results/2026-12-05-h100x1-host-ordered/run.sh   (from the checkout, .device carried)
set -u
. .device/record-command.sh; record_start host-ordered "$@"
B="-b 8 -e 16MiB -f 8 -n 20 -w 5 --blocks 2 --no-ceiling"
P="auto,oneshot,oneshot:fused,ring,ring:pipe2,ps"
L="$RR launch -n 2 --timeout 30 --"
step tests 40 $L check --backend cuda -d float --collective all --sizes 4KiB,4MiB --inputs exact --algo $P
step tests 30 $L soak --backend cuda --every --max-size 64KiB -d float,bfloat16
step tests 15 $L run --backend cuda --size 64KiB --algo oneshot:flag --in-place
step tests 80 .device/integration processes_sharing_a_gpu
step bench 80 $L $RR bench --backend cuda $B --algo $P --json "$O/procs-2.json"
step bench 50 $RR bench --backend cuda --devices 0 --ranks 2 $B --algo $P,oneshot:flag --json "$O/threads-2.json"
cd "$O" && grep -E "PASS|FAIL|WRONG|ERROR|error|cannot run|killed|died|SKIPPED|test result" tests.log | head -40; grep -E "^ +[0-9]|^#  *size|Model" bench.log | head -120; cat command.txt
xz -9 tests.log bench.log procs-*.json threads-*.json; true
