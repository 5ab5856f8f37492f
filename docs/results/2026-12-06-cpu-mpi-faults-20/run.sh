#!/usr/bin/env bash
# The MPI suite's three fault cases (a rank killed mid-collective, a whole
# node killed, a rank that never joins), 20 times each, 2 nodes x 2 ranks
# under mpirun on this machine (TCP on loopback, each node in its own
# /dev/shm where unshare works), CPU backend: every run must end with the
# survivors naming a failed rank, none a survivor, no hang, no process left.
#   bash docs/results/2026-12-06-cpu-mpi-faults-20/run.sh OUT_DIR
set -u
O=${1:-/tmp/mpi-faults}; mkdir -p "$O"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo test --release -p ringreduce-tools --no-default-features --features mpi --test mpi --no-run 2>/dev/null
T=$(ls -t target/release/deps/mpi-*[0-9a-f] | grep -v '\.d$' | head -1)
{ echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"; echo "# machine: $(nproc) cores, $(uname -r), $(mpirun --version | head -1)"
  echo "# commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo +uncommitted)"; echo "# command: bash $0 $*"; echo "# test binary: $T"; } > "$O/command.txt"
pass=0; fail=0
for i in $(seq 1 20); do
  a=$(date +%s.%N)
  timeout 300 "$T" killed whole_node never_joins > "$O/run-$i.log" 2>&1; rc=$?
  b=$(date +%s.%N)
  if [ $rc -eq 0 ] && grep -q '^test result: ok. 3 passed' "$O/run-$i.log"; then pass=$((pass+1)); r=ok; else fail=$((fail+1)); r="FAILED (exit $rc)"; fi
  printf 'run %2d: %s in %.1f s\n' "$i" "$r" "$(echo "$b - $a" | bc)" | tee -a "$O/command.txt"
done
echo "passed $pass of 20, failed $fail" | tee -a "$O/command.txt"
grep -h -- "--enable-recovery: rank\|ended in\|timed out in" "$O"/run-*.log | sed 's/(pid [0-9]*)/(pid P)/' | sort | uniq -c | sort -rn > "$O/messages.txt"
