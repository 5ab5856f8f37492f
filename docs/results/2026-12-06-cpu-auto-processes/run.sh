#!/usr/bin/env bash
# A/B of `auto` on 4 rank processes (launch -n 4) on the 2-core VM: the
# binary before (`ps` above 64 KiB) and after (the ring above 64 KiB where
# ranks are processes), interleaved old/new twice.
#   bash docs/results/2026-12-06-cpu-auto-processes/run.sh OLD_BINARY NEW_BINARY OUT_DIR
set -u
OLD=$1 NEW=$2 O=${3:-/tmp/ab}; mkdir -p "$O"
for r in 1 2; do for v in old new; do
  R=$OLD; [ $v = new ] && R=$NEW
  timeout 300 $R launch -n 4 -- $R bench --backend cpu -b 64KiB -e 16MiB -f 4 -n 20 -w 5 --blocks 3 --no-ceiling --algo auto > "$O/$v-$r.log" 2>&1
done; done
