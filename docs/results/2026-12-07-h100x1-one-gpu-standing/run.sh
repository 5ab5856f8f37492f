#!/usr/bin/env bash
# One device call on one GPU, ranks sharing it: where the one-GPU targets
# of the SM-driven paths and of the Python package stand on an H200 (the
# GPU the targets name; every earlier run of these was on an H100), and
# the course's one-GPU pictures redrawn.
#   1. ll: bench of every kernel path, rank threads, 2 and 4 ranks, with
#      the fitted model per path (4 ranks with CUDA_DEVICE_MAX_CONNECTIONS=16,
#      which ring:ll asks for there);
#   2. procs: the same GPU shared by 2 rank processes (launch -n 2);
#   3. pictures: compare --plot (PS vs ring against N) and the 4-rank ring's
#      timeline of one call;
#   4. python: DDP with overlap off and on, torch.distributed all_reduce of
#      CUDA tensors against Gloo (2 and 3 processes), the layer's own cost.
#   bash docs/results/2026-12-07-h100x1-one-gpu-standing/run.sh
#   (.device: ringreduce, record-command.sh, COMMIT; .whl: the wheel)
set -u
. .device/record-command.sh
S="-b 8 -e 16MiB -f 4 -n 50 -w 10 --blocks 5 --no-ceiling --timeout 30"

record_start ll "$@"
step bench-2 200 $RR bench --backend cuda --ranks 2 \
  --algo ring,ring:pipe2,ring:ll,oneshot:ll,oneshot:ll:graph,oneshot:flag,oneshot:flag:graph,auto,auto:graph \
  $S --json "$O/bench-2.json"
CUDA_DEVICE_MAX_CONNECTIONS=16 step bench-4 200 $RR bench --backend cuda --ranks 4 \
  --algo ring,ring:pipe2,ring:ll,ring:ll:graph,auto $S --json "$O/bench-4.json"
grep -hE "^# Model|per (step|round|call)" "$O"/bench-*.log | cut -c1-160

record_start procs "$@"
step launch-2 200 $RR launch -n 2 --timeout 30 -- bench --backend cuda \
  --algo auto,oneshot:fused,oneshot,ring -b 8 -e 16MiB -f 8 -n 20 -w 5 --blocks 2 --no-ceiling \
  --json "$O/procs-2.json"
grep -E "^ +[0-9]+ " "$O/launch-2.log" | head -40

record_start pictures "$@"
step compare 120 $RR compare --backend cuda --ranks 2,4,8 --size 64MiB --plot "$O/compare-1gpu.svg"
step trace 120 $RR trace --backend cuda --ranks 4 --size 64MiB --algo ring --calls 1 \
  --svg "$O/timeline-1gpu-ring-4r-64MiB.svg"

a=$(date +%s)
GPU_CHECK_LIMIT_S=330 PARTS=measure bash scripts/gpu-check.sh python > "$OUT/python.log" 2>&1
echo "python measure: exit $? in $(( $(date +%s) - a )) s" | tee -a "$OUT/pictures/command.txt"
tail -25 "$OUT/python.log"
# Only a few files come back from a call: everything goes into one archive.
cat "$OUT"/*/command.txt > "$OUT/commands.txt" 2>/dev/null
T=$(mktemp -d); (cd "$OUT" && tar cJf "$T/logs.tar.xz" .) && rm -rf "${OUT:?}"/* && mv "$T/logs.tar.xz" "$OUT/"
true
