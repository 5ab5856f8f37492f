#!/usr/bin/env bash
# One GPU (it ran on an H100), processes sharing it: the CUDA path whose copy out waits for the
# collective on the GPU (no host wait inside a call). Correctness first (the
# engine's api and integration tests that cross the change, the Python CUDA
# and torch tests), then where a call's time goes (probe.py of the previous
# record), the per-call table against gloo, and DDP on CUDA tensors.
#   bash docs/results/2026-12-05-h100x1-queued-copy-out/run.sh   (from the checkout, .device and .whl carried)
set -u
O=${OUT:-$PWD/q-out}/q; mkdir -p "$O"
. .device/record-command.sh; record_command "$O" "$@"
export NCCL_NVLS_ENABLE=0
export RINGREDUCE_BIN="$PWD/.device/ringreduce" RINGREDUCE_HOST_MEMORY=200GiB
{ date -u; cat .device/COMMIT; nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader; nproc; } > "$O/env.txt" 2>&1
rm -rf /tmp/rr-site-b; python3 -m pip install -q --no-index --no-deps --target /tmp/rr-site-b .whl/*.whl
export PYTHONPATH=/tmp/rr-site-b
step() {  # name, seconds, command...
  local name=$1 t=$2; shift 2
  local a=$(date +%s)
  timeout "$t" "$@" > "$O/$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - a )) s" | tee -a "$O/steps.txt"
}
step api 50 .device/api
step integration 90 .device/integration every_path a_path_refuses
step pytest 110 env RR_HYPOTHESIS_EXAMPLES=100 python3 -m pytest -rs -q -p no:cacheprovider python/tests/test_cuda.py python/tests/test_torch.py
step probe 70 python3 docs/results/2026-12-05-h200x1-shared-gpu/probe.py
step percall 110 python3 scripts/torch-percall.py --backends ringreduce,gloo --worlds 2,3 --device cuda --json "$O/percall.json"
step ddp 60 torchrun --nproc-per-node 2 examples/ddp.py --backend ringreduce --device cuda --json "$O/ddp-ringreduce-cuda.json"
tail -3 "$O/api.log" "$O/integration.log" "$O/pytest.log"; cat "$O/probe.log"; tail -30 "$O/percall.log"; tail -8 "$O/ddp.log"
