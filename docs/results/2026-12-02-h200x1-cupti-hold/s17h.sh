#!/usr/bin/env bash
# After the hold / release change: the GPU timeline and comm tests, and trace's overhead at the
# A/B's points (one round, 50 calls per block).
set -u
O=${OUT:-$PWD/s17h-out}; mkdir -p "$O"
. .device/record-command.sh; record_command "$O" "$@" 2>/dev/null || true
export NCCL_NVLS_ENABLE=0 RINGREDUCE_BIN=$PWD/.device/ringreduce RINGREDUCE_HOST_MEMORY=200GiB
{ date -u; cat .device/COMMIT; } > "$O/env.txt"
for pt in 2:1MiB 2:4MiB 4:1MiB 4:4MiB 4:16MiB 4:64MiB; do
  n=${pt%%:*} s=${pt#*:}
  f="$O/${n}r-$s.txt"
  timeout 60 .device/ringreduce trace --backend cuda --ranks $n --size $s --algo ring --overhead-blocks 7 --overhead-iters 50 > "$f" 2>&1
  echo "${n}r $s: $(grep -h 'measurement overhead' "$f" | sed -E 's/.*: ([0-9.]+) us per call with timing off, ([0-9.]+) us with timing on \(([^;]*);.*/off \1 on \2 \3/') | $(grep -h '#   call 1 ' "$f")" | tee -a "$O/summary.txt"
done
timeout 240 .device/integration timeline:: comm:: api:: > "$O/tests.log" 2>&1; echo "[exit $?]" >> "$O/tests.log"
grep -vE ' \.\.\. ok' "$O/tests.log" | tail -8 | tee -a "$O/summary.txt"
cd "$O" && tar cJf logs.tar.xz *.txt *.log && ls | grep -vE "summary.txt|logs.tar.xz|command.txt|env.txt" | xargs rm -f
