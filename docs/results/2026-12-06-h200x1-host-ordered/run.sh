#!/usr/bin/env bash
# One GPU, ranks each a process on it: the waits between ranks made on the
# host once the awaited work completed (no interprocess event on the GPU).
# Engine: check with exact inputs, soak --every, the refusal of a path that
# spins on flags, the GPU test, then bench of every path under `launch -n 2`
# and `-n 3` beside the same paths with the ranks as threads on the same
# GPU. Python: the CUDA and torch tests, the per-call table of
# torch.distributed all_reduce on CUDA tensors against Gloo (2 and 3
# ranks), and DDP with overlap off and on against Gloo.
#   bash docs/results/2026-12-06-h200x1-host-ordered/run.sh   (from the checkout, .device and .whl carried)
set -u
. .device/record-command.sh; record_start host-ordered "$@"
B="-b 8 -e 16MiB -f 8 -n 20 -w 5 --blocks 2 --no-ceiling"
P="auto,oneshot,oneshot:fused,ring,ring:pipe2,ps"
L="$RR launch -n 2 --timeout 30 --"
L3="$RR launch -n 3 --timeout 30 --"
step tests 40 $L check --backend cuda -d float --collective all --sizes 4KiB,4MiB --inputs exact --algo $P
step tests 40 $L3 check --backend cuda -d float,bfloat16 --sizes 4KiB,4MiB --inputs exact --algo $P
step tests 30 $L soak --backend cuda --every --max-size 64KiB -d float,bfloat16
step tests 15 $L run --backend cuda --size 64KiB --algo oneshot:flag --in-place
step tests 70 .device/integration processes_sharing_a_gpu
step bench 70 $L $RR bench --backend cuda $B --algo $P --json "$O/procs-2.json"
step bench 40 $RR bench --backend cuda --devices 0 --ranks 2 $B --algo $P,oneshot:flag --json "$O/threads-2.json"
step bench 60 $L3 $RR bench --backend cuda -b 8 -e 1MiB -f 8 -n 20 -w 5 --blocks 2 --no-ceiling --algo auto,oneshot,ring --json "$O/procs-3.json"
rm -rf /tmp/rr-site; python3 -m pip install -q --no-index --no-deps --target /tmp/rr-site .whl/*.whl
export PYTHONPATH=/tmp/rr-site
step pytest 90 env RR_HYPOTHESIS_EXAMPLES=100 python3 -m pytest -rs -q -p no:cacheprovider python/tests/test_cuda.py python/tests/test_torch.py
step percall 90 python3 scripts/torch-percall.py --backends ringreduce,gloo --worlds 2,3 --device cuda --iters 50 --json "$O/percall.json"
step ddp 45 torchrun --nproc-per-node 2 examples/ddp.py --backend ringreduce --device cuda --json "$O/ddp-ringreduce-cuda.json"
step ddp 45 torchrun --nproc-per-node 2 examples/ddp.py --backend gloo --device cuda --json "$O/ddp-gloo-cuda.json"
cd "$O" && grep -E "PASS|FAIL|WRONG|ERROR|error|cannot run|refus|SKIPPED|test result|passed|failed" tests.log pytest.log | head -50
grep -E "^ +[0-9]|^#  *size|Model|backend" bench.log | head -150; tail -28 percall.log; grep -E "ms per step|exposed|identical|DIFFERENT|step" ddp.log | head -20; cat command.txt
xz -9 tests.log bench.log pytest.log ddp.log procs-*.json threads-*.json; true
