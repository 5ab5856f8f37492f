#!/bin/bash
# The rail's all-reduce in place in the rank's shared segment (no copy in
# or out) against the copy through a buffer of the network's own:
# `hier:2:mpi` over 2 nodes x 2 ranks (RINGREDUCE_RANKS_PER_NODE=2), CPU
# backend, float sum, 1 MiB and 16 MiB, out of place and in place; the old
# and the new binary alternate (which goes first alternates by round), and
# MPI_Allreduce in C (../2026-12-06-cpu-mpi-inline/mpi-allreduce.c) runs
# once per round.
# usage: run.sh OLD NEW MPI_ALLREDUCE OUTDIR ROUNDS
set -u
OLD=$1; NEW=$2; MA=$3; OUT=$4; ROUNDS=${5:-10}; mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
b() { RINGREDUCE_RANKS_PER_NODE=2 timeout 300 mpirun --oversubscribe -np 4 "$1" bench --backend cpu \
  -b 1MiB -e 16MiB -f 16 -n 20 -w 5 --blocks 3 --no-ceiling --algo hier:2:mpi > "$OUT/$2-$3.txt" 2>&1; }
for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then b "$OLD" old "$round"; b "$NEW" new "$round"
  else b "$NEW" new "$round"; b "$OLD" old "$round"; fi
  timeout 120 mpirun --oversubscribe -np 4 "$MA" > "$OUT/mpi-$round.txt" 2>&1
done
