#!/usr/bin/env bash
# A/B with rank threads of one process (the CPU backend's default): the
# binary that hands every rank to a thread of its own (old) against the
# one whose caller runs the first rank itself (new), 2 and 4 ranks,
# interleaved old/new/old/new.
#   bash docs/results/2026-12-06-cpu-threads-first-inline/run.sh OLD_BINARY NEW_BINARY OUT_DIR
set -u
OLD=$1 NEW=$2 O=${3:-/tmp/first-ab}; mkdir -p "$O"
for n in 2 4; do for r in 1 2; do for v in old new; do
  R=$OLD; [ $v = new ] && R=$NEW
  timeout 300 $R bench --backend cpu --ranks $n -b 4KiB -e 1MiB -f 16 -n 50 -w 5 --blocks 3 --no-ceiling --algo auto,ring,ps > "$O/$n-$v-$r.log" 2>&1
done; done; done
