#!/usr/bin/env bash
# torch's whole _DistTestBase on one GPU, in SHARDS parallel processes (each
# test spawns its own 2 ranks and its own temporary files, so shards do not
# share anything): one shard of the 281 tests took 30-40 minutes alone.
#   SHARDS=8 bash docs/results/2026-12-06-h100x1-torch-disttest-full/run.sh   (.device and .whl carried)
set -u
. .device/record-command.sh; record_start disttest-full "$@"
rm -rf /tmp/rr-site; python3 -m pip install -q --no-index --no-deps --target /tmp/rr-site .whl/*.whl
export PYTHONPATH=/tmp/rr-site
python3 -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count())" >> "$O/command.txt" 2>&1
export BACKEND=ringreduce WORLD_SIZE=2
SHARDS=${SHARDS:-8}; LIMIT=${LIMIT:-540}
(cd python/tests && python3 -c "
import sys, unittest; sys.argv = ['x']
import torch_dist_suite as s
print('\n'.join(t.id().split('.', 1)[1] for t in unittest.TestLoader().loadTestsFromTestCase(s.TestDistBackendWithSpawn)))
") > "$O/tests.txt" 2>> "$O/command.txt"
echo "tests: $(wc -l < "$O/tests.txt"), shards: $SHARDS, limit $LIMIT s" | tee -a "$O/command.txt"
a=$(date +%s)
for k in $(seq 0 $((SHARDS - 1))); do
  awk -v k=$k -v n=$SHARDS 'NR % n == k' "$O/tests.txt" > "$O/shard$k.txt"
  timeout "$LIMIT" python3 python/tests/torch_dist_suite.py -v $(cat "$O/shard$k.txt") > "$O/shard$k.log" 2>&1 &
done
wait
echo "all shards ended in $(( $(date +%s) - a )) s" | tee -a "$O/command.txt"
cd "$O"
cat shard*.log > suite.log
grep -hE "^Ran |^OK|^FAILED" shard*.log | tee summary.txt
grep -E " \.\.\. ok$" suite.log | sed -E 's/ \(.*//' | sort > passed.txt
grep -E " \.\.\. (FAIL|ERROR)$" suite.log | sed -E 's/ \(.*//' | sort > failed.txt
grep -E "skipped '" suite.log | sed -E "s/.*skipped '([^']*)'.*/\1/" | sort | uniq -c | sort -rn > skips.txt
echo "passed $(wc -l < passed.txt), failed $(wc -l < failed.txt), skipped $(awk '{s+=$1} END {print s+0}' skips.txt)" | tee -a summary.txt command.txt
# tests that never reported (a shard cut by its limit)
grep -hoE "^test_[A-Za-z0-9_]+" suite.log | sort -u > reported.txt
sed 's/.*\.//' tests.txt | sort | comm -23 - reported.txt > unreported.txt; echo "unreported: $(wc -l < unreported.txt)" | tee -a summary.txt
cat failed.txt; head -40 skips.txt
grep -E "Traceback|Error" suite.log | sort | uniq -c | sort -rn | head -20
grep -vE "^\[|INFO|Warning|warn\(" suite.log | xz -9 > suite.log.xz; rm -f suite.log shard*.log reported.txt; true
