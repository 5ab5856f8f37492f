#!/bin/bash
# Over nodes on one machine, the library before and after a change, interleaved
# (the order alternates by round): 2 nodes x 2 ranks (RINGREDUCE_RANKS_PER_NODE=2,
# `auto`, which is hier:2 there) at 4 KiB-16 MiB, and 4 nodes of 1 rank
# (hier:1:mpi: the rail alone, one MPI_Iallreduce per call) at 4 KiB; with
# MPI_Allreduce itself (mpi-allreduce.c) once per round. CPU backend, float sum.
# usage: run.sh OLD_RINGREDUCE NEW_RINGREDUCE MPI_ALLREDUCE OUTDIR ROUNDS
set -u
OLD=$1; NEW=$2; MA=$3; OUT=$4; ROUNDS=${5:-8}; mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for round in $(seq 1 "$ROUNDS"); do
  timeout 300 mpirun --oversubscribe -np 4 "$MA" > "$OUT/mpi-$round.txt" 2>&1
  order="old new"; [ $((round % 2)) = 0 ] && order="new old"
  for b in $order; do
    bin=$OLD; [ "$b" = new ] && bin=$NEW
    RINGREDUCE_RANKS_PER_NODE=2 timeout 600 mpirun --oversubscribe -np 4 "$bin" bench --backend cpu \
      -b 4KiB -e 16MiB -f 16 -n 20 -w 5 --blocks 3 --no-ceiling --algo auto > "$OUT/$b-hier2-$round.txt" 2>&1
    RINGREDUCE_RANKS_PER_NODE=1 timeout 300 mpirun --oversubscribe -np 4 "$bin" bench --backend cpu \
      -b 4KiB -e 4KiB -n 200 -w 20 --blocks 3 --no-ceiling --algo hier:1:mpi > "$OUT/$b-rail-$round.txt" 2>&1
  done
done
