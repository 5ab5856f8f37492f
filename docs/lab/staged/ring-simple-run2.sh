#!/usr/bin/env bash
# The second call: ring:simple on 3 and 4 rank threads (with the queues
# its spinning kernels ask for), auto's new choice, the kernel's step
# times in a timeline, and 3 ranks measured.
#   bash docs/lab/staged/ring-simple-run2.sh   (.device carried; staged, not yet run)
set -u
. .device/record-command.sh
export CUDA_DEVICE_MAX_CONNECTIONS=16
S="-n 40 -w 10 --blocks 3 --no-ceiling --timeout 30"

record_start check3 "$@"
for r in 3 4; do
  for ip in "" --in-place; do
    step run 30 $RR run --backend cuda --ranks $r --algo ring:simple --count 1003 --iters 3 $ip
    step run 30 $RR run --backend cuda --ranks $r --algo ring:simple --size 16MiB --iters 3 $ip
  done
done
for d in "-d float16" "-d bfloat16 -o avg" "-d int8 -o max" "-d float64 -o prod" "-d int32 -o min"; do
  step run 30 $RR run --backend cuda --ranks 3 --algo ring:simple --count 100003 --iters 2 $d
done
step run 30 $RR run --backend cuda --ranks 4 --size 8MiB --iters 3
grep -c "check     : PASS" "$O/run.log"; grep -E "algorithm" "$O/run.log" | tail -1
step soak 150 $RR soak --backend cuda --calls 3000 --seed 2 --max-size 16MiB --rank-counts 2,3,4 --algo ring:simple,ring:ll
tail -3 "$O/soak.log"
step every 150 $RR soak --backend cuda --ranks 3 --every --algo ring:simple --max-size 64KiB
tail -3 "$O/every.log"

record_start bench3 "$@"
step bench-3 150 $RR bench --backend cuda --ranks 3 --algo ring,ring:ll,ring:simple,auto \
  -b 1MiB -e 32MiB -f 2 $S --json "$O/bench-3.json"
step bench-4 100 $RR bench --backend cuda --ranks 4 --algo ring,ring:simple,auto \
  -b 4MiB -e 32MiB -f 2 $S --json "$O/bench-4.json"
grep -hE "^# Model" "$O"/bench-*.log | cut -c1-200
step trace 60 $RR trace --backend cuda --ranks 4 --size 16MiB --algo ring:simple --calls 1 \
  --svg "$O/timeline-1gpu-ring-simple-4r-16MiB.svg"
grep -iE "timing cost|overhead|step" "$O/trace.log" | head -12
cat "$OUT"/*/command.txt > "$OUT/commands.txt" 2>/dev/null
T=$(mktemp -d); (cd "$OUT" && tar cJf "$T/logs.tar.xz" .) && rm -rf "${OUT:?}"/* && mv "$T/logs.tar.xz" "$OUT/"
true
