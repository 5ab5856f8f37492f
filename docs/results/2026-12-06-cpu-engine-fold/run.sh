#!/usr/bin/env bash
# CPU A/B of an old and a new binary:
# 4 rank threads, then 4 rank processes (launch -n 4), auto and ring, 8 B-16 MiB,
# 4 rounds alternating which binary goes first. Usage: run.sh OLD NEW OUTDIR
set -u
OLD=$1 NEW=$2 O=$3; mkdir -p "$O"
B="bench --backend cpu --algo auto,ring -b 8 -e 16MiB -f 8 -n 20 -w 5 --no-ceiling"
for round in ${ROUNDS:-1 2 3 4}; do
  if [ $((round % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for which in $order; do
    bin=$OLD; [ $which = new ] && bin=$NEW
    $bin $B --ranks 4 -J "$O/threads-$which-$round.json" > "$O/threads-$which-$round.txt" 2>&1
    $NEW launch -n 4 -- $bin $B -J "$O/procs-$which-$round.json" > "$O/procs-$which-$round.txt" 2>&1
  done
done
