#!/usr/bin/env bash
# One device call on one GPU: NCCL on registered buffers and symmetric
# windows (bench's nccl:reg and nccl:sym, plain and from graphs) on one rank
# (NCCL needs a GPU per rank: one GPU, one rank; the plumbing, not a
# comparison), NCCL's own log of what it registered and chose, nccl-tests
# built here and run with -R 0/1/2, then the GPU tests (the API tests and
# the integration tests, their CUDA variants) at the same commit, within
# about 7 minutes in all. Everything is packed into one archive in $OUT.
#   bash docs/results/2026-12-07-h100x1-nccl-registered/run.sh
#   (.device: pack.tar.xz of ringreduce, integration and api,
#    record-command.sh, nccl-tests.sh, nccl-tests.tar.gz, COMMIT)
set -u
T0=$(date +%s)
[ -f .device/pack.tar.xz ] && (cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
. .device/record-command.sh; record_start nccl-reg "$@"
step bench-1 120 $RR bench --backend cuda --ranks 1 \
  --algo auto,nccl,nccl:reg,nccl:sym,nccl:graph,nccl:reg:graph,nccl:sym:graph \
  -b 8 -e 64MiB -f 8 -n 20 -w 5 --blocks 3 --no-ceiling --timeout 30 --json "$O/bench-1.json"
grep -E "^# (Note|note)|rror|buffers:" "$O/bench-1.log" | cut -c1-220 | head -12
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,REG,TUNING step nccl-log 90 $RR bench --backend cuda --ranks 1 \
  --algo nccl,nccl:reg,nccl:sym -b 1MiB -e 1MiB -n 2 -w 1 --blocks 1 --no-ceiling --timeout 30
grep -iE "regist|window|symm|algo|proto" "$O/nccl-log.log" | cut -c1-200 | sort | uniq -c | sort -rn | head -20
# NCCL's own tool (nccl-tests, staged as .device/nccl-tests.tar.gz), built
# here and run on the one GPU with -R 0/1/2: the staging of the two-GPU
# yardstick, checked.
if [ -f .device/nccl-tests.tar.gz ]; then
  a=$(date +%s)
  timeout 150 bash .device/nccl-tests.sh .device/nccl-tests.tar.gz "$O" 1 -b 8 -e 64M -f 8 -n 20 -w 5 2>&1 | tee -a "$O/nccl-tests.txt"
  echo "nccl-tests: exit ${PIPESTATUS[0]} in $(( $(date +%s) - a )) s" | tee -a "$O/command.txt"
fi
step api 60 .device/api
left=$(( 420 - ($(date +%s) - T0) ))
step integration $(( left > 30 ? left : 30 )) .device/integration
grep -hE "^test result|passed|failed|FAILED|panicked" "$O/api.log" "$O/integration.log" | tail -8
grep -hE "nccl::" "$O/integration.log" | cut -c1-200
T=$(mktemp -d); (cd "$OUT" && tar cJf "$T/logs.tar.xz" .) && rm -rf "${OUT:?}"/* && mv "$T/logs.tar.xz" "$OUT/"
true
