#!/usr/bin/env bash
# The CUDA backend holding its exchange (main with the branch host-rounds'
# first commit alone), on one GPU: the GPU tests and the communicator on
# CUDA (rank threads, and rank processes over the IPC exchange). Every
# output is packed into one file ($OUT/all.tar).
#   LIMIT=400 bash .device/run-ex.sh   (.device carried)
set -u
[ -f .device/pack.tar.xz ] && (cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
[ -f .device/comm-extras.tgz ] || { echo "not staged"; exit 2; }
. .device/record-command.sh; record_start tests "$@"
OUT="$O" GPU_CHECK_LIMIT_S=200 bash .device/gpu-check.sh tests > "$O/gpu-check-tests.log" 2>&1
echo "gpu-check tests: exit $?" | tee -a "$O/command.txt"
grep -E "FAILED|passed|failed" "$O/tests.log" | tail -8
grep -A6 "^---- " "$O/tests.log" | head -30
. .device/record-command.sh; record_start comm "$@"
OUT="$O" GPU_CHECK_LIMIT_S=150 bash .device/gpu-check.sh comm > "$O/gpu-check-comm.log" 2>&1
echo "gpu-check comm: exit $?" | tee -a "$O/command.txt"
grep -E "test result|rank [01]: ok|panicked|FAILED|\[exit" "$O/gpu-check-comm.log" | tail -12
cd "$OUT" && for f in $(find . -name '*.log'); do xz -9 "$f"; done; tar cf all.tar tests comm && rm -rf tests comm; ls -la "$OUT"
