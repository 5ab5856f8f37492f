#!/usr/bin/env bash
# The redesign step of 2026-12-06 on one GPU (call 1): the GPU tests (the
# library's API tests and the integration tests, their CUDA variants:
# gpu-check.sh tests) and the Python package's CUDA tests (test_cuda.py:
# the device path's buffer rules changed), from the staged binaries and
# the wheel of this tree. Call 2 is `bash .device/gpu-check.sh ab`.
#   bash docs/results/2026-12-06-h100x1-redesign-step/run.sh   (.device and .whl carried)
set -u
(cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
. .device/record-command.sh; record_start redesign-tests "$@"
OUT="$O" GPU_CHECK_LIMIT_S=400 bash .device/gpu-check.sh tests > "$O/gpu-check-tests.log" 2>&1
echo "gpu-check tests: exit $?" | tee -a "$O/command.txt"
grep -E "passed|failed|FAILED" "$O/tests.log" | tail -6
rm -rf /tmp/rr-site; python3 -m pip install -q --no-index --no-deps --target /tmp/rr-site .whl/*.whl
export PYTHONPATH=/tmp/rr-site
step pytest-cuda 150 python3 -m pytest -rs -q -p no:cacheprovider python/tests/test_cuda.py
tail -5 "$O/pytest-cuda.log"
cd "$O" && for f in tests.log gpu-check-tests.log pytest-cuda.log; do [ -f "$f" ] && xz -9 "$f"; done; ls
