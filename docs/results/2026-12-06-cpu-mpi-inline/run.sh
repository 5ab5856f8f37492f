#!/usr/bin/env bash
# (The run of 2026-12-05 repeated once a rank process runs its rank on its
# own thread, with ring:pipe2 added to the one-node paths.)
# 2 nodes x 2 ranks on one machine (RINGREDUCE_RANKS_PER_NODE=2, Open MPI
# over loopback), CPU backend: ringreduce's paths over nodes beside
# MPI_Allreduce in the same kind of mpirun, 3 rounds interleaved; and one
# node of 4 rank processes (launch -n 4) for the one-node target.
#   bash docs/results/2026-12-06-cpu-mpi-inline/run.sh OUT_DIR   (binary: cargo build --release -p ringreduce-tools --features mpi)
set -u
O=${1:-/tmp/mpi-inline}; mkdir -p "$O"
D=$(dirname "$0"); RR=$PWD/target/release/ringreduce
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_tcp_if_include=lo
{ echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"; echo "# machine: $(nproc) cores, $(uname -r), $(mpirun --version | head -1)"
  echo "# commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo +uncommitted)"; echo "# command: bash $0 $*"; } > "$O/command.txt"
mpicc -O2 -o "$O/mpi-allreduce" "$D/mpi-allreduce.c"
B="-b 4KiB -e 16MiB -f 16 -n 20 -w 5 --blocks 5 --no-ceiling"
for r in 1 2 3; do
  echo "== round $r" | tee -a "$O/command.txt"
  timeout 300 mpirun --oversubscribe -np 4 "$O/mpi-allreduce" > "$O/r$r-mpi.log" 2>&1; echo "mpi exit $?" >> "$O/command.txt"
  RINGREDUCE_RANKS_PER_NODE=2 timeout 600 mpirun --oversubscribe -np 4 "$RR" bench --backend cpu $B --algo auto,ring,hier:2 -J "$O/r$r-nodes.json" > "$O/r$r-nodes.log" 2>&1; echo "nodes exit $?" >> "$O/command.txt"
  timeout 600 "$RR" launch -n 4 -- "$RR" bench --backend cpu $B --algo auto,ring,ring:pipe2,ps -J "$O/r$r-node.json" > "$O/r$r-node.log" 2>&1; echo "one node exit $?" >> "$O/command.txt"
done
