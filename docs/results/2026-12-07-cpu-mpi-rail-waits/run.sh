#!/bin/bash
# Over nodes on one machine (2 nodes x 2 ranks, RINGREDUCE_RANKS_PER_NODE=2),
# the library before and after a change, interleaved (the order alternates by
# round): `hier:2` (the ring over the rails) and `hier:2:mpi` (each rail's
# phase as MPI's all-reduce) at 4 KiB-16 MiB, and MPI_Allreduce itself
# (../2026-12-06-cpu-mpi-inline/mpi-allreduce.c) once per round. CPU backend,
# float sum. usage: run.sh OLD_RINGREDUCE NEW_RINGREDUCE MPI_ALLREDUCE OUTDIR ROUNDS
set -u
OLD=$1; NEW=$2; MA=$3; OUT=$4; ROUNDS=${5:-6}; mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for round in $(seq 1 "$ROUNDS"); do
  timeout 300 mpirun --oversubscribe -np 4 "$MA" > "$OUT/mpi-$round.txt" 2>&1
  order="old new"; [ $((round % 2)) = 0 ] && order="new old"
  for b in $order; do
    bin=$OLD; [ "$b" = new ] && bin=$NEW
    RINGREDUCE_RANKS_PER_NODE=2 timeout 600 mpirun --oversubscribe -np 4 "$bin" bench --backend cpu \
      -b 4KiB -e 16MiB -f 16 -n 20 -w 5 --blocks 3 --no-ceiling --algo hier:2,hier:2:mpi > "$OUT/$b-$round.txt" 2>&1
  done
done
