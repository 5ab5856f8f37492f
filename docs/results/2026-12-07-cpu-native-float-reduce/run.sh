#!/bin/bash
# Rank processes on a machine with fewer than two cores each: the library
# before and after a change, interleaved (the order alternates by round).
# 2 nodes x 2 ranks (RINGREDUCE_RANKS_PER_NODE=2) with `hier:2:mpi` (what
# `auto` takes there), and one node of 4 processes with `auto`, `ring` and
# `ps`, 4 KiB-16 MiB; MPI_Allreduce in C once per round. CPU backend,
# float sum.
# usage: [MINB=4KiB MAXB=16MiB] run.sh OLD_RINGREDUCE NEW_RINGREDUCE MPI_ALLREDUCE OUTDIR ROUNDS
set -u
OLD=$1; NEW=$2; MA=$3; OUT=$4; ROUNDS=${5:-4}; mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for round in $(seq 1 "$ROUNDS"); do
  timeout 300 mpirun --oversubscribe -np 4 "$MA" > "$OUT/mpi-$round.txt" 2>&1
  order="old new"; [ $((round % 2)) = 0 ] && order="new old"
  for b in $order; do
    bin=$OLD; [ "$b" = new ] && bin=$NEW
    RINGREDUCE_RANKS_PER_NODE=2 timeout 600 mpirun --oversubscribe -np 4 "$bin" bench --backend cpu \
      -b ${MINB:-4KiB} -e ${MAXB:-16MiB} -f 16 -n 20 -w 5 --blocks 3 --no-ceiling --algo hier:2:mpi > "$OUT/$b-nodes-$round.txt" 2>&1
    timeout 600 mpirun --oversubscribe -np 4 "$bin" bench --backend cpu \
      -b ${MINB:-4KiB} -e ${MAXB:-16MiB} -f 16 -n 20 -w 5 --blocks 3 --no-ceiling --algo auto,ring,ps > "$OUT/$b-onenode-$round.txt" 2>&1
  done
done
