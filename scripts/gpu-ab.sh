#!/usr/bin/env bash
# The old and the new binary, interleaved on the same GPU (2 ranks; with
# one GPU they share it and NCCL cannot run): the architecture issue's
# `bench --algo auto,ring,ring:pipe2 -b 8 -e 256MiB`, AB_RUNS times each.
# Needs .device/ringreduce (new) and .device/ringreduce-old (+ COMMIT-old).
set -u
D=.device
A="${OUT:-./gpu-out}/ab"
mkdir -p "$A"
# The run's command file (docs/results/README.md, "A new run").
. "$(dirname "$0")/record-command.sh"
record_command "$A" "$@"
echo "old: $(cat $D/COMMIT-old 2>/dev/null)  new: $(cat $D/COMMIT 2>/dev/null | tr '\n' ' ')"
for i in $(seq "${AB_RUNS:-3}"); do
    for b in old new; do
        BIN="$D/ringreduce"; [ $b = old ] && BIN="$D/ringreduce-old"
        timeout 120 "$BIN" bench --backend cuda --ranks 2 --algo auto,ring,ring:pipe2 -b 8 -e 256MiB -f 4 \
            -n 20 -w 5 --blocks "${AB_BLOCKS:-1}" --timeout 30 -J "$A/$b-$i.json" > "$A/$b-$i.log" 2>&1
        echo "[exit $?] $b run $i"
    done
done
python3 - "$A" <<'PY'
import glob, json, os, statistics, sys
a = sys.argv[1]
cells = {}
for p in sorted(glob.glob(os.path.join(a, "*.json"))):
    b, i = os.path.basename(p)[:-5].split("-")
    for r in json.load(open(p))["rows"]:
        for pl in ("out_of_place", "in_place"):
            m = r.get(pl)
            if m:
                cells.setdefault((r["algo"], r["size"], pl), {}).setdefault(b, []).append(m["time_us"])
print("# median us per call over the runs, old | new | new/old")
ratios = {}
for k in sorted(cells, key=lambda k: (k[0], k[2], k[1])):
    o, n = cells[k].get("old", []), cells[k].get("new", [])
    if not o or not n:
        continue
    mo, mn = statistics.median(o), statistics.median(n)
    ratios.setdefault(k[0], []).append(mn / mo)
    print("%-10s %10d %-12s %9.2f %9.2f %6.3f" % (k[0], k[1], k[2], mo, mn, mn / mo))
for algo, r in sorted(ratios.items()):
    print("# %s: new/old median %.3f, range %.3f-%.3f over %d cells" % (algo, statistics.median(r), min(r), max(r), len(r)))
PY
