#!/usr/bin/env bash
# call_styles on the CPU backend, old and new library alternating.
set -u
OLD=$1 NEW=$2 OUT=$3 RUNS=${RUNS:-4}
mkdir -p "$OUT"
for i in $(seq "$RUNS"); do
    order="old new"; [ $((i % 2)) = 0 ] && order="new old"
    for b in $order; do
        BIN=$NEW; [ $b = old ] && BIN=$OLD
        "$BIN" 9 > "$OUT/cs-$b-$i.log" 2>&1
        echo "$b $i exit $?"
    done
done
