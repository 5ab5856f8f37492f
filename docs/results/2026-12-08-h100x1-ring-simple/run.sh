#!/usr/bin/env bash
# One device call on one GPU, ranks as threads sharing it: the Simple ring
# kernel (ring:simple) checked and measured beside the copy-engine ring and
# the LL ring, and the floors under the SM-driven ring's targets.
#   1. check: run of ring:simple over ranks, types, ops, sizes, in and out
#      of place; soak mixing it with ring:ll and auto; every collective x
#      type x op (--every); compute-sanitizer memcheck, racecheck, synccheck;
#   2. floor: one rank (no peer): NCCL's plain and replayed call and ours;
#   3. bench: 2 and 4 ranks, 8 B-64 MiB, ring, ring:pipe2, ring:ll,
#      ring:simple (plain and from a graph), auto, with fitted models.
#   bash docs/results/2026-12-08-h100x1-ring-simple/run.sh   (.device carried)
set -u
. .device/record-command.sh
S="-n 40 -w 10 --blocks 3 --no-ceiling --timeout 30"

record_start check "$@"
for r in 2 3 4; do
  for ip in "" --in-place; do
    step run 30 $RR run --backend cuda --ranks $r --algo ring:simple --count 1003 --iters 3 $ip
    step run 30 $RR run --backend cuda --ranks $r --algo ring:simple --size 16MiB --iters 3 $ip
  done
done
for d in "-d float16" "-d bfloat16 -o avg" "-d int8 -o max" "-d float64 -o prod" "-d int32 -o min"; do
  step run 30 $RR run --backend cuda --ranks 3 --algo ring:simple --count 100003 --iters 2 $d
  step run 30 $RR run --backend cuda --ranks 2 --algo ring:simple --count 1 --iters 2 $d
done
grep -c PASS "$O/run.log"; grep -E "FAIL|error" "$O/run.log" | head -5
step soak 150 $RR soak --backend cuda --calls 10000 --seed 1 --max-size 4MiB --algo ring:simple,ring:ll
tail -4 "$O/soak.log"
step every 150 $RR soak --backend cuda --ranks 3 --every --algo ring:simple --max-size 64KiB
tail -4 "$O/every.log"
if command -v compute-sanitizer > /dev/null 2>&1; then
  for tool in memcheck racecheck synccheck; do
    step sanitizer 120 compute-sanitizer --tool $tool $RR run --backend cuda --ranks 2 --algo ring:simple --count 70003 --iters 2
  done
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL" "$O/sanitizer.log" | head -12
else
  echo "compute-sanitizer not found" | tee -a "$O/command.txt"
fi

record_start floor "$@"
step bench-1 120 $RR bench --backend cuda --ranks 1 --algo nccl,nccl:graph,auto,auto:graph \
  -b 8 -e 16MiB -f 4 $S --json "$O/bench-1.json"

record_start bench "$@"
step bench-2 220 $RR bench --backend cuda --ranks 2 \
  --algo ring,ring:pipe2,ring:ll,ring:simple,ring:simple:graph,auto \
  -b 8 -e 64MiB -f 2 $S --json "$O/bench-2.json"
CUDA_DEVICE_MAX_CONNECTIONS=16 step bench-4 200 $RR bench --backend cuda --ranks 4 \
  --algo ring,ring:pipe2,ring:ll,ring:simple,auto \
  -b 8 -e 64MiB -f 2 $S --json "$O/bench-4.json"
grep -hE "^# (Model|Note: host issue)" "$OUT"/*/bench-*.log | cut -c1-200
cat "$OUT"/*/command.txt > "$OUT/commands.txt" 2>/dev/null
T=$(mktemp -d); (cd "$OUT" && tar cJf "$T/logs.tar.xz" .) && rm -rf "${OUT:?}"/* && mv "$T/logs.tar.xz" "$OUT/"
true
