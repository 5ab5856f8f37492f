#!/usr/bin/env bash
# Session 2026-12-05 on one H200: processes sharing the GPU.
#   a: the engine alone (launch -n 2/3 -- bench, in and out of place), then pytest (incl. CUDA fuzz, job test)
#   b: DDP, the torch per-call table against gloo, the Python layer's overhead
set -u
MODE=${1:-a}
O=${OUT:-$PWD/s20-out}/$MODE; mkdir -p "$O"
. .device/record-command.sh; record_command "$O" "$@"
export NCCL_NVLS_ENABLE=0
{ date -u; cat .device/COMMIT; nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader; nproc; } > "$O/env.txt" 2>&1
rm -rf /tmp/rr-site-b; python3 -m pip install -q --no-index --no-deps --target /tmp/rr-site-b .whl/*.whl
if [ "$MODE" = a ]; then
  for n in 2 3; do
    echo "== launch -n $n -- bench --backend cuda (processes sharing GPU 0)" >> "$O/bench.log"
    timeout 150 .device/ringreduce launch -n $n --timeout 60 -- .device/ringreduce bench --backend cuda \
      -b 8 -e 16MiB -f 8 -n 20 -w 5 --blocks 3 --no-ceiling --algo auto,oneshot:fused,oneshot:flag,ring,ps \
      --json "$O/bench-$n.json" >> "$O/bench.log" 2>&1
    echo "exit $?" >> "$O/bench.log"
  done
  tail -60 "$O/bench.log"
  PARTS=tests timeout 420 bash scripts/gpu-python.sh "$O/py" > "$O/py.log" 2>&1
  echo "gpu-python tests exit $?"
  tail -25 "$O/py/pytest.log"
else
  # the all_to_all fix of this commit, staged and not
  PYTHONPATH=/tmp/rr-site-b timeout 120 python3 -m pytest -rs -q -p no:cacheprovider python/tests/test_torch.py -k two_processes > "$O/torch-two-processes.log" 2>&1
  echo "two_processes exit $?" >> "$O/torch-two-processes.log"
  tail -3 "$O/torch-two-processes.log"
  PARTS=measure timeout 560 bash scripts/gpu-python.sh "$O/py" > "$O/py.log" 2>&1
  echo "gpu-python measure exit $?"
  tail -40 "$O/py.log"
fi
