#!/usr/bin/env bash
# One device call: the Python package's measurements (DDP with overlap on
# and off, the per-call table against gloo, the layer's overhead), then
# where a small staged call spends its time (breakdown.py), 2 and 3
# processes sharing the GPU. The wheel is carried in .whl/ (built here with
# maturin at the commit in .whl/COMMIT). Everything lands in $OUT.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "wheel commit: $(cat .whl/COMMIT)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "command: bash $0"
} > "$OUT/command.txt"
s=$(date +%s)
PARTS=measure bash scripts/gpu-check.sh python > "$OUT/measure.log" 2>&1
echo "measure: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/command.txt"
export PYTHONPATH=/tmp/rr-site
for w in 2 3; do
  s=$(date +%s)
  timeout 200 python3 "$HERE/breakdown.py" --world $w --iters 200 --sizes 8,4096,262144 > "$OUT/breakdown-$w.txt" 2>&1
  echo "breakdown world $w: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/command.txt"
done
tar cJf "$OUT/py.tar.xz" -C "$OUT" py && rm -rf "$OUT/py"
cat "$OUT/command.txt"; cat "$OUT"/breakdown-*.txt; tail -30 "$OUT/measure.log"
