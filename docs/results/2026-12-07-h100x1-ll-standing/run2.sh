#!/usr/bin/env bash
# The second call: 4 rank threads with CUDA_DEVICE_MAX_CONNECTIONS=16 (ring:ll
# refuses 4 rank threads on one GPU's default 8 hardware queues, as the
# first call's note says), ring, ring:pipe2, ring:ll and auto, 8 B-8 MiB.
#   bash docs/results/2026-12-07-h100x1-ll-standing/run2.sh   (.device carried)
set -u
[ -f .device/pack.tar.xz ] && (cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
export CUDA_DEVICE_MAX_CONNECTIONS=16
. .device/record-command.sh; record_start ll4 "$@"
echo "CUDA_DEVICE_MAX_CONNECTIONS=$CUDA_DEVICE_MAX_CONNECTIONS" >> "$O/command.txt"
step bench-4 240 "$RR" bench --backend cuda --ranks 4 --algo ring,ring:pipe2,ring:ll,auto -b 8 -e 8MiB -f 4 -n 50 -w 10 --blocks 5 --no-ceiling --json "$O/bench-4.json"
grep -E "^# Model|^note" "$O/bench-4.log" | head -20
grep -E "^ +[0-9]+ " "$O/bench-4.log" | awk '{print $1, $6, $10, $14}'
T=$(mktemp -d); (cd "$OUT" && tar cJf "$T/ll4-logs.tar.xz" .) && rm -rf "${OUT:?}"/* && mv "$T/ll4-logs.tar.xz" "$OUT/"
