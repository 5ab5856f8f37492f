#!/usr/bin/env bash
# One device call: (1) the Python layer's cost, old wheel (A) against new (B), alternating;
# (2) cupticost: CUPTI's record buffers per thread vs shared vs CUPTI's default;
# (3) pytest with the new wheel.
set -u
O=${OUT:-$PWD/s17-out}; mkdir -p "$O"
. .device/record-command.sh; record_command "$O" "$@" 2>/dev/null || true
{ date -u; cat .device/COMMIT .whl/COMMIT; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import sys,numpy;print(sys.version.split()[0], numpy.__version__)'; } > "$O/env.txt" 2>&1
rm -rf /tmp/pa /tmp/pb /tmp/rr-site
python3 -m pip install -q --no-index --no-deps --target /tmp/pa .whl/old/*.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/pb .whl/ringreduce-*.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/rr-site .whl/*.whl
t0=$SECONDS
for r in 1 2 3 4 5 6 7 8; do
  for s in a b; do for n in 2 4; do
    PYTHONPATH=/tmp/p$s timeout 60 python3 scripts/python-overhead.py --ranks $n > "$O/ov-$r-$s-$n.txt" 2>&1
    echo "round $r $s ${n}r: $(tail -1 "$O/ov-$r-$s-$n.txt")" | tee -a "$O/ab.log"
  done; done
done
echo "ab took $((SECONDS - t0)) s" >> "$O/ab.log"
t0=$SECONDS
OUT="$O" COST_CONFIGS="callback perthread shared" COST_BUDGET_S=170 COST_ROUNDS=2 GPU_CHECK_LIMIT_S=240 \
  timeout 250 bash .device/gpu-check.sh cupticost > "$O/cupticost.log" 2>&1
echo "cupticost took $((SECONDS - t0)) s rc $?" >> "$O/cupticost.log"
PYTHONPATH=/tmp/rr-site timeout 200 python3 -m pytest -rs -q python/tests -p no:cacheprovider > "$O/pytest.log" 2>&1
echo "pytest rc $?" >> "$O/pytest.log"
cd "$O" && tar cJf logs.tar.xz ov-*.txt cupticost && rm -rf ov-*.txt
