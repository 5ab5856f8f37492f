#!/usr/bin/env bash
# The second call of this record: random and exhaustive soaks through the
# engine's host copies (load, run, read back, verify: every call's copies
# batched by the size rule, sizes drawn across 64 KiB), on one GPU: 4 rank
# threads drawing every type, op and collective; every path exhaustively
# on 3 rank threads; 2 rank processes (IPC exchange) drawing as the first.
#   bash docs/results/2026-12-07-h100x1-host-batch/soak.sh   (.device carried)
set -u
[ -f .device/pack.tar.xz ] && (cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
. .device/record-command.sh; record_start soak "$@"
step soak-threads 200 "$RR" soak --backend cuda --ranks 4 --calls 4000 --seconds 170 --max-size 256KiB -d all -o all --collective all
tail -3 "$O/soak-threads.log"
step soak-every 150 "$RR" soak --backend cuda --ranks 3 --every -d float,bfloat16,int8 -o all --collective all --max-size 100KiB
tail -3 "$O/soak-every.log"
step soak-procs 150 "$RR" launch -n 2 -- "$RR" soak --backend cuda --calls 2000 --seconds 120 --max-size 256KiB -d all -o all --collective all
tail -4 "$O/soak-procs.log"
T=$(mktemp -d); (cd "$OUT" && tar cJf "$T/soak-logs.tar.xz" .) && rm -rf "${OUT:?}"/* && mv "$T/soak-logs.tar.xz" "$OUT/"
