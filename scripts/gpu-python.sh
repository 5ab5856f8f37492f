#!/usr/bin/env bash
# The Python package on the GPU machine: the tests (numpy, processes, torch
# on the CPU and on CUDA) and examples/ddp.py under torchrun, recorded.
#
# Built here first (the GPU machine has no Rust and no internet):
#   (cd python && maturin build --release --out dist)      # python/dist/ringreduce-*-cp39-abi3-*.whl
#   mkdir -p .whl && cp python/dist/ringreduce-*.whl .whl/ # plus pytest's wheels (pip download pytest -d .whl)
# Run there from the checkout (with .whl carried):
#   bash scripts/gpu-python.sh "$OUT"
# Writes into $1 (default ./gpu-python-out): pytest.log, ddp-*.log, ddp-*.json,
# percall.log/.json (scripts/torch-percall.py), overhead.log.
# STAGED_DDP=1 also runs DDP through host memory (RINGREDUCE_TORCH_CUDA=stage).
# PARTS="tests measure" (the default) runs both halves; PARTS=tests only
# pytest (RR_HYPOTHESIS_EXAMPLES fuzz examples, default 500), PARTS=measure
# only DDP, the per-call table and the overhead (each half fits one device
# call).
set -uo pipefail
OUTDIR="${1:-gpu-python-out}"
PARTS="${PARTS:-tests measure}"
mkdir -p "$OUTDIR"
# The run's command file (docs/results/README.md, "A new run").
. "$(dirname "$0")/record-command.sh"
record_command "$OUTDIR" "$@"
PY=python3
SITE=/tmp/rr-site
rm -rf "$SITE"
# Into a folder of our own on PYTHONPATH: torch and numpy stay the machine's.
"$PY" -m pip install -q --no-index --no-deps --target "$SITE" .whl/*.whl || exit 1
export PYTHONPATH="$SITE"
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  "$PY" -c 'import sys, torch, numpy, ringreduce; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.device_count(), "numpy", numpy.__version__, "ringreduce", ringreduce.__version__, ringreduce.__file__)'
} 2>&1 | tee "$OUTDIR/env.txt"

rc_tests=0
if [[ " $PARTS " == *" tests "* ]]; then
echo "== pytest" | tee "$OUTDIR/pytest.log"
RR_HYPOTHESIS_EXAMPLES="${RR_HYPOTHESIS_EXAMPLES:-500}" \
  "$PY" -m pytest -rs -q python/tests -p no:cacheprovider 2>&1 | tee -a "$OUTDIR/pytest.log"
rc_tests=${PIPESTATUS[0]}
fi
if [[ " $PARTS " != *" measure "* ]]; then
  echo "pytest exit $rc_tests"
  exit "$rc_tests"
fi

GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
ddp() {  # name, nproc, args...
  local name=$1 n=$2; shift 2
  echo "== ddp $name: torchrun --nproc-per-node $n examples/ddp.py $*" | tee "$OUTDIR/ddp-$name.log"
  timeout 300 torchrun --nproc-per-node "$n" examples/ddp.py --json "$OUTDIR/ddp-$name.json" "$@" 2>&1 | tee -a "$OUTDIR/ddp-$name.log"
}
# Bitwise: ringreduce against gloo, both on the CPU, 2 ranks.
ddp ringreduce-cpu 2 --backend ringreduce --device cpu --width 256 --depth 4 --steps 5
ddp gloo-cpu 2 --backend gloo --device cpu --width 256 --depth 4 --steps 5
# On the GPU(s): 2 ranks (sharing one GPU when there is one), ringreduce's
# CUDA job against gloo on the same CUDA tensors.
ddp ringreduce-cuda 2 --backend ringreduce --device cuda
ddp gloo-cuda 2 --backend gloo --device cuda
if [ -n "${STAGED_DDP:-}" ]; then
  # The same through host memory (the previous path), for comparison.
  RINGREDUCE_TORCH_CUDA=stage ddp ringreduce-cuda-stage 2 --backend ringreduce --device cuda
fi
if [ "$GPUS" -ge 2 ]; then
  ddp nccl-cuda 2 --backend nccl --device cuda
else
  echo "SKIPPED: NCCL with 2 ranks needs 2 GPUs ($GPUS here); nccl with 1 rank for its compute baseline" | tee "$OUTDIR/ddp-nccl-cuda.log"
  ddp nccl-cuda-1rank 1 --backend nccl --device cuda
fi
"$PY" - "$OUTDIR" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
def load(n):
    p = os.path.join(d, f"ddp-{n}.json")
    return json.load(open(p)) if os.path.exists(p) else None
a, b = load("ringreduce-cpu"), load("gloo-cpu")
if a and b:
    for m in ("off", "on"):
        same = a["modes"][m]["losses_hex"] == b["modes"][m]["losses_hex"]
        print(f"losses ringreduce vs gloo (cpu, 2 ranks), overlap {m}: {'IDENTICAL' if same else 'DIFFERENT'}")
for n in ("ringreduce-cpu", "gloo-cpu", "ringreduce-cuda", "gloo-cuda", "ringreduce-cuda-stage", "nccl-cuda", "nccl-cuda-1rank"):
    r = load(n)
    if r:
        ms = {m: round(v["median_step_s"] * 1e3, 3) for m, v in r["modes"].items()}
        print(f"{n:18} {r['world']} ranks on {r['device']}: median step ms {ms}")
PYEOF
echo "== torch.distributed all_reduce per call: ringreduce against gloo, CUDA tensors, 2 and 3 ranks" | tee "$OUTDIR/percall.log"
timeout 400 "$PY" scripts/torch-percall.py --backends ringreduce,gloo --worlds 2,3 --device cuda \
  --json "$OUTDIR/percall.json" 2>&1 | tee -a "$OUTDIR/percall.log"
echo "== the Python layer's cost per call (CPU backend, 2 ranks, 8 B)" | tee "$OUTDIR/overhead.log"
timeout 120 "$PY" scripts/python-overhead.py 2>&1 | tee -a "$OUTDIR/overhead.log"
echo "pytest exit $rc_tests"
exit "$rc_tests"
