#!/usr/bin/env bash
# torch's own process-group tests (_DistTestBase) on one GPU: the 33 tests
# whose names say cuda (the CPU runs skip them: no GPU there), 2 ranks
# sharing the GPU, the ringreduce backend registered in torch's gpu, cuda,
# ddp, subgroup and plugin sets (python/tests/torch_dist_suite.py).
#   bash docs/results/2026-12-06-h100x1-torch-disttest-cuda/run.sh   (.device and .whl carried)
set -u
. .device/record-command.sh; record_start disttest-cuda "$@"
rm -rf /tmp/rr-site; python3 -m pip install -q --no-index --no-deps --target /tmp/rr-site .whl/*.whl
export PYTHONPATH=/tmp/rr-site
python3 -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count())" >> "$O/command.txt" 2>&1
export BACKEND=ringreduce WORLD_SIZE=2
step suite 480 python3 python/tests/torch_dist_suite.py -k cuda -v
cd "$O" && grep -E "^test_|^Ran |^OK|^FAILED" suite.log | sed -E 's/ \(__main__[^)]*\)//' | sort | uniq -c | sort -rn | head -60
grep -E "skipped '" suite.log | sed -E "s/.*skipped '([^']*)'.*/\1/" | sort | uniq -c | sort -rn > skips.txt; cat skips.txt
grep -E " \.\.\. ok$" suite.log | sed -E 's/ \(.*//' > passed.txt; wc -l passed.txt
grep -E "^Ran |^OK|^FAILED" suite.log; cat command.txt | tail -4
grep -vE "^\[|INFO|Warning|warn\(" suite.log | xz -9 > suite.log.xz; rm -f suite.log; true
