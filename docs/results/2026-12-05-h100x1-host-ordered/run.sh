#!/usr/bin/env bash
# One GPU, every rank a process on it (`launch -n N`): the waits between
# ranks made on the host once the awaited work completed, instead of on
# the GPU (an interprocess event). Correctness first (check with exact
# inputs, soak, the refusal of the paths that spin on flags, a killed
# rank), then bench of every path under launch beside the same paths with
# ranks as threads of one process on the same GPU.
#   bash docs/results/2026-12-05-h100x1-host-ordered/run.sh   (from the checkout, .device carried)
set -u
. .device/record-command.sh; record_start host-ordered "$@"
B="-b 8 -e 16MiB -f 8 -n 20 -w 5 --blocks 3 --no-ceiling"
P="auto,oneshot,oneshot:fused,ring,ring:pipe2,ps"
for n in 2 3; do
  L="$RR launch -n $n --timeout 30 --"
  step tests 90 $L check --backend cuda -d float --collective all --sizes 4KiB,4MiB --inputs exact --algo $P
  step tests 90 $L soak --backend cuda --calls 300 --max-size 1MiB --seed 3$n
done
step tests 200 .device/integration processes_sharing_a_gpu
L="$RR launch -n 2 --timeout 30 --"
step tests 30 $L soak --backend cuda --every --max-size 64KiB -d float,bfloat16,int8
step tests 30 $L run --backend cuda --size 64KiB --algo oneshot:flag --in-place
step tests 60 env RINGREDUCE_FAULT=kill:rank=1:call=5 $L run --backend cuda --size 4MiB --in-place --iters 50
for n in 2 3; do
  step bench 150 $RR launch -n $n --timeout 30 -- $RR bench --backend cuda $B --algo $P --json "$O/procs-$n.json"
  step bench 90 $RR bench --backend cuda --devices 0 --ranks $n $B --algo $P,oneshot:flag --json "$O/threads-$n.json"
done
cd "$O" && grep -E "PASS|FAIL|WRONG|ERROR|error|cannot run|killed|died" tests.log | head -40; grep -E "^ +[0-9]|^#  *size|Model" bench.log | head -120; cat command.txt
xz -9 tests.log bench.log procs-*.json threads-*.json; true
