#!/usr/bin/env bash
# The second device call: the wheel with synchronous calls run on the
# caller's thread (carried in .whl/, its commit in .whl/COMMIT). The torch
# tests (CPU and CUDA tensors), then the per-call table against gloo, the
# breakdown and DDP, as in run.sh. Everything lands in $OUT.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "wheel commit: $(cat .whl/COMMIT)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "command: bash $0"
} > "$OUT/command.txt"
export NCCL_NVLS_ENABLE=0
SITE=/tmp/rr-site; rm -rf "$SITE"
python3 -m pip install -q --no-index --no-deps --target "$SITE" .whl/*.whl || exit 1
export PYTHONPATH="$SITE"
step() {  # name seconds command...
  local n=$1 t=$2; shift 2; local s=$(date +%s)
  timeout "$t" "$@" > "$OUT/$n.log" 2>&1
  echo "$n: exit $? in $(( $(date +%s) - s )) s: $*" >> "$OUT/command.txt"
}
step pytest 200 env RR_HYPOTHESIS_EXAMPLES=100 python3 -m pytest -rs -q -p no:cacheprovider python/tests/test_torch.py python/tests/test_cuda.py
step percall 150 python3 scripts/torch-percall.py --backends ringreduce,gloo --worlds 2,3 --device cuda --json "$OUT/percall.json"
step breakdown-2 60 python3 "$HERE/breakdown.py" --world 2 --iters 200 --sizes 8,4096,262144
for b in ringreduce gloo; do
  step ddp-$b 90 torchrun --nproc-per-node 2 examples/ddp.py --backend $b --device cuda --json "$OUT/ddp-$b.json"
done
cat "$OUT/command.txt"; tail -5 "$OUT/pytest.log"; grep -A12 "^2 ranks" "$OUT/percall.log"; grep -A12 "^3 ranks" "$OUT/percall.log"
cat "$OUT/breakdown-2.log"; grep -h "median step" "$OUT"/ddp-*.log
