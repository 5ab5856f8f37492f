#!/usr/bin/env bash
# A/B: the CUPTI primer with a launch of each loaded reduce kernel (new) against the memset-only
# primer (old, cc041e7); trace's overhead, 50-call blocks, alternating, 4 rounds; kernel-only new.
set -u
O=${OUT:-$PWD/s18b-out}; mkdir -p "$O/runs"
. .device/record-command.sh; record_command "$O" "$@" 2>/dev/null || true
export NCCL_NVLS_ENABLE=0
{ date -u; cat .device/COMMIT; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; sha1sum .device/ringreduce .device/ringreduce-old; } > "$O/env.txt"
for r in 1 2 3 4; do
  for pt in 4:1MiB 4:4MiB 2:1MiB 2:4MiB 4:16MiB; do
    n=${pt%%:*} s=${pt#*:}
    if [ $((r % 2)) = 1 ]; then cfgs="old new newk new200"; else cfgs="new200 newk new old"; fi
    for c in $cfgs; do
      bl=11 it=50
      case $c in old) b=.device/ringreduce-old; e=;; new) b=.device/ringreduce; e=;; newk) b=.device/ringreduce; e=RINGREDUCE_CUPTI_KINDS=kernel;; new200) b=.device/ringreduce; e=; bl=5 it=200;; esac
      f="$O/runs/$c-${n}r-$s-r$r.txt"
      timeout 60 env $e $b trace --backend cuda --ranks $n --size $s --algo ring --overhead-blocks $bl --overhead-iters $it > "$f" 2>&1
      echo "$c ${n}r $s r$r: $(grep -h 'measurement overhead' "$f" | sed -E 's/.*: ([0-9.]+) us per call with timing off, ([0-9.]+) us with timing on \(([^;]*);.*/off \1 on \2 \3/') | $(grep -h '#   call 1 ' "$f" | sed 's/^# *//')" >> "$O/lines.txt"
    done
  done
done
python3 - "$O/lines.txt" > "$O/summary.txt" <<'PY'
import re, statistics, sys
rows = {}
for l in open(sys.argv[1]):
    m = re.match(r"(\S+) (\d+r) (\S+) r\d+: off ([0-9.]+) on ([0-9.]+) .*launched at (-?[0-9.]+) us", l)
    if m:
        c, n, s, off, on, la = m.groups()
        rows.setdefault((n, s), {}).setdefault(c, []).append((float(off), float(on), -float(la)))
print("# % per call with timing on over off (median over rounds; each round's on/off from one process)")
print("# and the first shown call's start after its launch (median us). old: memset primer (cc041e7);")
print("# new: + one launch of each loaded reduce kernel; newk: new with RINGREDUCE_CUPTI_KINDS=kernel;")
print("# new200: new with 200-call blocks (5 of each) instead of 50-call blocks (11 of each).")
for (n, s), d in rows.items():
    cells = []
    for c in ("old", "new", "newk", "new200"):
        v = d.get(c, [])
        if not v:
            cells.append(f"{c}: -"); continue
        pct = [100 * (on - off) / off for off, on, _ in v]
        cells.append(f"{c}: {statistics.median(pct):+5.1f}% [{' '.join(f'{x:+.1f}' for x in pct)}] first {statistics.median([x for *_, x in v]):.0f} us")
    print(f"{n} {s:>6}: " + " | ".join(cells))
PY
cat "$O/summary.txt"
cd "$O" && tar cJf logs.tar.xz lines.txt runs && rm -rf runs lines.txt
cd - > /dev/null
export RINGREDUCE_BIN=$PWD/.device/ringreduce RINGREDUCE_HOST_MEMORY=200GiB
timeout 200 .device/integration timeline:: comm:: api:: > "$O/tests.log" 2>&1; echo "[exit $?]" >> "$O/tests.log"
grep -vE ' \.\.\. ok' "$O/tests.log" | tail -8 | tee -a "$O/summary.txt"
gzip -9 "$O/tests.log"
