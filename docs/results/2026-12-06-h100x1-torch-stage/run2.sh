#!/usr/bin/env bash
# Call 2: A/B of the staging itself, interleaved, 3 rounds, 2 processes on
# the GPU, RINGREDUCE_TORCH_CUDA=stage for both: "old" is the same wheel
# with the torch module of ce46ec0 (torch-ce46ec0.py.xz: pageable host copy,
# a wait for the copy back before the future completes), "new" this
# commit's (pinned copies on a staging stream, the copy back queued and the
# future completed on the stream). gloo each round for reference.
#   bash docs/results/2026-12-06-h100x1-torch-stage/run2.sh   (from the checkout, .device and .whl carried)
set -u
. .device/record-command.sh; record_start torch-stage-2 "$@"
for v in old new; do
  rm -rf /tmp/rr-$v; python3 -m pip install -q --no-index --no-deps --target /tmp/rr-$v .whl/*.whl
done
xz -dc docs/results/2026-12-06-h100x1-torch-stage/torch-ce46ec0.py.xz > /tmp/rr-old/ringreduce/torch.py
for round in 1 2 3; do
  for v in old new; do
    step percall 60 env PYTHONPATH=/tmp/rr-$v RINGREDUCE_TORCH_CUDA=stage python3 scripts/torch-percall.py --backends ringreduce --worlds 2 --device cuda --iters 50 --json "$O/stage-$v-$round.json"
  done
  step percall 60 env PYTHONPATH=/tmp/rr-new python3 scripts/torch-percall.py --backends gloo --worlds 2 --device cuda --iters 50 --json "$O/gloo-$round.json"
done
cd "$O" && grep -E "^\| [0-9]" percall.log | head -80; cat command.txt | tail -12
xz -9 percall.log; true
