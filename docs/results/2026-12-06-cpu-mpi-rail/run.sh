#!/bin/bash
# Over nodes on one machine (2 nodes x 2 ranks, RINGREDUCE_RANKS_PER_NODE=2, CPU backend):
# hier:2 (the rail's ring over MPI point-to-point) against hier:2:mpi (the rail's
# all-reduce handed to MPI_Iallreduce) and MPI_Allreduce itself, 3 interleaved rounds.
# usage: run.sh RINGREDUCE MPI_ALLREDUCE OUTDIR
set -u
RR=$1; MA=$2; OUT=$3; mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for round in 1 2 3; do
  timeout 300 mpirun --oversubscribe -np 4 "$MA" > "$OUT/mpi-allreduce-$round.txt" 2>&1
  RINGREDUCE_RANKS_PER_NODE=2 timeout 600 mpirun --oversubscribe -np 4 "$RR" bench --backend cpu \
    -b 4KiB -e 16MiB -f 16 -n 20 -w 5 --blocks 3 --no-ceiling --algo hier:2,hier:2:mpi \
    > "$OUT/bench-$round.txt" 2>&1
  RINGREDUCE_RANKS_PER_NODE=2 timeout 600 mpirun --oversubscribe -np 4 "$RR" bench --backend cpu \
    -b 4KiB -e 16MiB -f 16 -n 20 -w 5 --blocks 3 --no-ceiling --algo hier:2:mpi,hier:2 \
    > "$OUT/bench-rev-$round.txt" 2>&1
done
