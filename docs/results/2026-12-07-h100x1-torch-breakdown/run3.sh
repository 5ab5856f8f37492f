#!/usr/bin/env bash
# The third device call: at 256 KiB-4 MiB, staged through host memory
# against the device path (RINGREDUCE_TORCH_CUDA=stage|device), and gloo,
# 2 and 3 processes sharing the GPU, the wheel in .whl/. Into $OUT.
set -u
{ echo "date: $(date -u +%FT%TZ)"; echo "wheel commit: $(cat .whl/COMMIT)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "command: bash $0"; } > "$OUT/command.txt"
SITE=/tmp/rr-site; rm -rf "$SITE"
python3 -m pip install -q --no-index --no-deps --target "$SITE" .whl/*.whl || exit 1
export PYTHONPATH="$SITE" NCCL_NVLS_ENABLE=0
for m in stage device; do
  s=$(date +%s)
  RINGREDUCE_TORCH_CUDA=$m timeout 120 python3 scripts/torch-percall.py --backends ringreduce,gloo --worlds 2,3 \
    --device cuda --sizes 262144,1048576,4194304 --iters 60 --json "$OUT/percall-$m.json" > "$OUT/percall-$m.log" 2>&1
  echo "percall $m: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/command.txt"
done
cat "$OUT/command.txt"; grep -h -A6 "ranks, cuda" "$OUT"/percall-*.log
