#!/usr/bin/env bash
# Call 5: the Python package's CUDA and torch tests from the wheel of this
# tree, after the device calls' dispatch and engine/foreign.rs were merged
# (the torch CUDA job goes through both).
#   bash docs/results/2026-12-06-h100x1-redesign-step/run5.sh   (.device and .whl carried)
set -u
. .device/record-command.sh; record_start redesign-python "$@"
rm -rf /tmp/rr-site; python3 -m pip install -q --no-index --no-deps --target /tmp/rr-site .whl/*.whl
export PYTHONPATH=/tmp/rr-site
python3 -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count())" >> "$O/command.txt" 2>&1
step pytest 420 python3 -m pytest -rs -q -p no:cacheprovider python/tests/test_cuda.py python/tests/test_torch.py
tail -12 "$O/pytest.log"
cd "$O" && xz -9 pytest.log; ls
