#!/bin/bash
# The targets against MPI_Allreduce, as they stand: `auto` over 2 nodes x 2
# ranks (RINGREDUCE_RANKS_PER_NODE=2, which is `hier:2:mpi`) and on one node
# of 4 rank processes, 4 KiB-16 MiB, CPU backend, float sum, out of place
# and in place; MPI_Allreduce in C (../2026-12-06-cpu-mpi-inline/mpi-allreduce.c)
# in the same round. The order of the three alternates by round.
# usage: run.sh RINGREDUCE MPI_ALLREDUCE OUTDIR ROUNDS
set -u
RR=$1; MA=$2; OUT=$3; ROUNDS=${4:-8}; mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() { timeout 300 mpirun --oversubscribe -np 4 "$MA" > "$OUT/mpi-$1.txt" 2>&1; }
nodes() { RINGREDUCE_RANKS_PER_NODE=2 timeout 600 mpirun --oversubscribe -np 4 "$RR" bench --backend cpu \
  -b 4KiB -e 16MiB -f 16 -n 20 -w 5 --blocks 3 --no-ceiling --algo auto > "$OUT/nodes-$1.txt" 2>&1; }
onenode() { timeout 600 mpirun --oversubscribe -np 4 "$RR" bench --backend cpu \
  -b 4KiB -e 16MiB -f 16 -n 20 -w 5 --blocks 3 --no-ceiling --algo auto > "$OUT/onenode-$1.txt" 2>&1; }
for round in $(seq 1 "$ROUNDS"); do
  case $((round % 3)) in
    1) mpi $round; nodes $round; onenode $round ;;
    2) nodes $round; onenode $round; mpi $round ;;
    0) onenode $round; mpi $round; nodes $round ;;
  esac
done
