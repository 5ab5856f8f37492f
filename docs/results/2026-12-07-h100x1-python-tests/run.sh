#!/usr/bin/env bash
# One device call: the Python package's pytest suite on the GPU machine
# (numpy, processes, torch on CPU and CUDA tensors, the boundary's fuzz
# test with 200 examples), the wheel carried in .whl/ (its commit in
# .whl/COMMIT). Everything is packed into one archive in $OUT.
#   bash docs/results/2026-12-07-h100x1-python-tests/run.sh
set -u
a=$(date +%s)
RR_HYPOTHESIS_EXAMPLES=200 GPU_CHECK_LIMIT_S=330 PARTS=tests bash scripts/gpu-check.sh python > "$OUT/tests.log" 2>&1
rc=$?
echo "python tests: exit $rc in $(( $(date +%s) - a )) s (wheel $(cat .whl/COMMIT))" | tee -a "$OUT/command.txt"
grep -E "passed|failed|error" "$OUT/py/pytest.log" | tail -3
T=$(mktemp -d); (cd "$OUT" && tar cJf "$T/logs.tar.xz" .) && rm -rf "${OUT:?}"/* && mv "$T/logs.tar.xz" "$OUT/"
true
