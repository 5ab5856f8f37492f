#!/usr/bin/env python3
"""Medians of run.sh's rounds: us per call of the old and the new binary
(out of place, in place), new/old per round, and MPI_Allreduce's."""
import glob, os, re, statistics, sys

d = sys.argv[1]
row = re.compile(r"^# row all-reduce\s+\S+\s+float\s+(\S+)\s+sum \| out\s+([\d.]+) us.*\| in\s+([\d.]+) us")
mpi = re.compile(r"MPI_Allreduce 4 ranks\s+(\d+) B: median\s+([\d.]+) us")
units = {"KiB": 1 << 10, "MiB": 1 << 20}
def size(s):
    m = re.match(r"(\d+)(KiB|MiB)", s)
    return int(m.group(1)) * units[m.group(2)]
t = {}  # (version, size, place) -> {round: us}
for f in glob.glob(os.path.join(d, "*-*.txt")):
    v, r = os.path.basename(f)[:-4].split("-")
    for line in open(f):
        m = row.match(line)
        if m and v in ("old", "new"):
            t.setdefault((v, size(m.group(1)), "out"), {})[r] = float(m.group(2))
            t.setdefault((v, size(m.group(1)), "in"), {})[r] = float(m.group(3))
        m = mpi.search(line)
        if m and v == "mpi":
            t.setdefault(("mpi", int(m.group(1)), "-"), {})[r] = float(m.group(2))
print("# size place   MPI us   old us   new us  new/old (per-round range)  new/MPI (per-round range)  rounds")
for s in sorted({k[1] for k in t if k[0] == "old"}):
    ma = t.get(("mpi", s, "-"), {})
    for p in ("out", "in"):
        o, n = t.get(("old", s, p), {}), t.get(("new", s, p), {})
        rs = sorted(set(o) & set(n))
        if not rs:
            continue
        no = [n[r] / o[r] for r in rs]
        nm = [n[r] / ma[r] for r in rs if r in ma]
        print(f"{s:>9} {p:>3} {statistics.median(ma.values()) if ma else float('nan'):8.1f} "
              f"{statistics.median(o.values()):8.1f} {statistics.median(n.values()):8.1f}  "
              f"{statistics.median(no):.2f}x ({min(no):.2f}-{max(no):.2f})  "
              f"{statistics.median(nm):.2f}x ({min(nm):.2f}-{max(nm):.2f})  {len(rs)}")
