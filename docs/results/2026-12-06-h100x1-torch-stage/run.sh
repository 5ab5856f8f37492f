#!/usr/bin/env bash
# torch.distributed on CUDA tensors, 2 processes sharing one GPU: calls up to
# 256 KiB staged through pinned host memory by default, with one wait (the
# copy to host) and the copy back queued on a stream (the future completes
# there), against the device path, the old staging (one more wait) is not
# kept, and gloo. pytest of the CUDA and torch tests first.
#   bash docs/results/2026-12-06-h100x1-torch-stage/run.sh   (from the checkout, .device and .whl carried)
set -u
tar xJf .device/pack.tar.xz -C .device
. .device/record-command.sh; record_start torch-stage "$@"
rm -rf /tmp/rr-site; python3 -m pip install -q --no-index --no-deps --target /tmp/rr-site .whl/*.whl
export PYTHONPATH=/tmp/rr-site
python3 -c "import torch; print('torch', torch.__version__)" >> "$O/command.txt" 2>&1
step pytest 150 env RR_HYPOTHESIS_EXAMPLES=100 python3 -m pytest -rs -q -p no:cacheprovider python/tests/test_cuda.py python/tests/test_torch.py
step percall 100 python3 scripts/torch-percall.py --backends ringreduce,gloo --worlds 2 --device cuda --iters 50 --json "$O/percall-auto.json"
step percall 80 env RINGREDUCE_TORCH_CUDA=stage python3 scripts/torch-percall.py --backends ringreduce --worlds 2 --device cuda --iters 50 --json "$O/percall-stage.json"
step percall 80 env RINGREDUCE_TORCH_CUDA=device python3 scripts/torch-percall.py --backends ringreduce --worlds 2 --device cuda --iters 50 --json "$O/percall-device.json"
step percall 100 python3 scripts/torch-percall.py --backends ringreduce,gloo --worlds 3 --device cuda --iters 50 --json "$O/percall-auto-3.json"
cd "$O" && grep -E "passed|failed|SKIPPED|Error" pytest.log | tail -8
grep -vE "^==" percall.log | tail -60; cat command.txt
xz -9 pytest.log percall.log; true
