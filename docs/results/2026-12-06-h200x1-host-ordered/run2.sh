#!/usr/bin/env bash
# Second call, same GPU kind. (1) The correctness steps of run.sh again with
# their logs kept (run.sh's `check` needs NCCL, which cannot put 2 ranks on
# one GPU: `run` against the CPU reference instead). (2) torch.distributed
# all_reduce of CUDA tensors staged through host memory
# (RINGREDUCE_TORCH_CUDA=stage) beside the device path and Gloo. (2b)
# oneshot:fused in place (new: reads after the peers' Begin, the sum
# through scratch), auto's path there now, beside `oneshot` under launch -n 2
# and -n 3: soak of every collective, then bench in and out of place. (3) The LL
# ring's grid, A/B: .device/ringreduce (at most 128 blocks per GPU, 64 per
# rank) against .device/rr-ll512 (at most 512 per GPU, 256 per rank), ranks as
# threads on one GPU, interleaved A B A B, with a soak of the wide grid.
#   bash docs/results/2026-12-06-h200x1-host-ordered/run2.sh   (.device carried: pack.tar.xz)
set -u
tar xJf .device/pack.tar.xz -C .device
. .device/record-command.sh; record_start host-ordered-2 "$@"
L="$RR launch -n 2 --timeout 30 --"
L3="$RR launch -n 3 --timeout 30 --"
for p in auto oneshot ring ring:pipe2 ps; do
  step tests 20 $L run --backend cuda --size 4MiB --algo $p
  step tests 20 $L run --backend cuda --size 4MiB --algo $p --in-place
  step tests 20 $L3 run --backend cuda --size 1MiB -d bfloat16 --algo $p --in-place
done
step tests 20 $L run --backend cuda --size 4MiB --algo oneshot:fused
step tests 15 $L run --backend cuda --size 64KiB --algo oneshot:flag --in-place
step tests 70 .device/integration processes_sharing_a_gpu --nocapture
rm -rf /tmp/rr-site; python3 -m pip install -q --no-index --no-deps --target /tmp/rr-site .device/*.whl
export PYTHONPATH=/tmp/rr-site
step percall 60 env RINGREDUCE_TORCH_CUDA=stage python3 scripts/torch-percall.py --backends ringreduce --worlds 2,3 --device cuda --iters 50 --json "$O/percall-stage.json"
step percall 60 python3 scripts/torch-percall.py --backends ringreduce,gloo --worlds 2 --device cuda --iters 50 --json "$O/percall-device.json"
step tests 60 $L soak --backend cuda --algo oneshot:fused --every --max-size 64KiB -d float,bfloat16,int8
step tests 60 $L3 soak --backend cuda --algo oneshot:fused --every --max-size 64KiB -d float,bfloat16
step fused 60 $L $RR bench --backend cuda -b 8 -e 16MiB -f 8 -n 20 -w 5 --blocks 3 --no-ceiling --algo auto,oneshot:fused,oneshot --json "$O/fused-2.json"
step fused 60 $L3 $RR bench --backend cuda -b 8 -e 16MiB -f 8 -n 20 -w 5 --blocks 3 --no-ceiling --algo auto,oneshot:fused,ps --json "$O/fused-3.json"
LLB="-b 16 -e 16MiB -f 4 -n 20 -w 5 --blocks 3 --no-ceiling --algo ring:ll,ring,ring:pipe2,auto"
for round in 1 2; do
  for v in ringreduce rr-ll512; do
    for n in 2 4; do
      step ll 60 .device/$v bench --backend cuda --devices 0 --ranks $n $LLB --json "$O/ll-$v-$n-$round.json"
    done
  done
done
for n in 2 3 4; do step ll 40 .device/rr-ll512 soak --backend cuda --devices 0 --ranks $n --algo ring:ll --calls 1500 --max-size 4MiB; done
cd "$O" && grep -E "PASS|FAIL|WRONG|wrong|error|cannot run|take turns|test result|panicked" tests.log | head -60
grep -E "# row" fused.log | grep -v "rank 1\]" | cut -c1-190; grep -E "^ +[0-9]|^# .*ranks|Model of" ll.log | head -200; tail -26 percall.log; grep -E "PASS|FAIL|wrong" ll.log | tail -5; cat command.txt
tar cJf logs.tar.xz *.log *.json; rm -f *.log *.json; true
