#!/usr/bin/env bash
# The final wheel on the GPU machine: pytest (numpy, processes, torch on CPU and CUDA), then the
# Python layer's cost, 6923bc5's wheel (a) against this one (b), alternating, 4 rounds.
set -u
O=${OUT:-$PWD/s17g-out}; mkdir -p "$O"
. .device/record-command.sh; record_command "$O" "$@" 2>/dev/null || true
export NCCL_NVLS_ENABLE=0
{ date -u; cat .whl/COMMIT; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$O/env.txt" 2>&1
rm -rf /tmp/pa /tmp/pb /tmp/rr-site
python3 -m pip install -q --no-index --no-deps --target /tmp/pa .whl/old/*.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/pb .whl/ringreduce-*.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/rr-site .whl/*.whl
PYTHONPATH=/tmp/rr-site timeout 240 python3 -m pytest -rs -q python/tests -p no:cacheprovider > "$O/pytest.log" 2>&1
echo "pytest rc $?" >> "$O/pytest.log"; tail -3 "$O/pytest.log"
for r in 1 2 3 4; do
  for s in a b; do for n in 2 4; do
    PYTHONPATH=/tmp/p$s timeout 60 python3 scripts/python-overhead.py --ranks $n > "$O/ov-$r-$s-$n.txt" 2>&1
    echo "round $r $s ${n}r: $(tail -1 "$O/ov-$r-$s-$n.txt")" | tee -a "$O/ab.log"
  done; done
done
cd "$O" && tar cJf logs.tar.xz ov-*.txt && rm -f ov-*.txt && xz -9e pytest.log
