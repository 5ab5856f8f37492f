#!/usr/bin/env bash
# A/B over 2 nodes x 2 ranks (mpirun, RINGREDUCE_RANKS_PER_NODE=2), CPU
# backend: the binary whose waiting ranks leave every message between
# nodes to the receiver thread (old) against the one whose waiting ranks
# take them themselves (new), interleaved old/new/old/new.
#   bash docs/results/2026-12-06-cpu-mpi-poll-ab/run.sh OLD_BINARY NEW_BINARY OUT_DIR
set -u
OLD=$1 NEW=$2 O=${3:-/tmp/poll-ab}; mkdir -p "$O"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_tcp_if_include=lo
for r in 1 2; do for v in old new; do
  R=$OLD; [ $v = new ] && R=$NEW
  RINGREDUCE_RANKS_PER_NODE=2 timeout 600 mpirun --oversubscribe -np 4 $R bench --backend cpu -b 4KiB -e 16MiB -f 16 -n 20 -w 5 --blocks 3 --no-ceiling --algo hier:2,ring > "$O/$v-$r.log" 2>&1
done; done
