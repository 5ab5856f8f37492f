#!/usr/bin/env python3
"""Medians over the rounds of run.sh's outputs: us per call, in place and out of place, per path and size, with the ratio to MPI_Allreduce."""
import glob, re, statistics, sys
d = sys.argv[1]
mpi = {}
for f in sorted(glob.glob(f"{d}/mpi-allreduce-*.txt")):
    for m in re.finditer(r"MPI_Allreduce 4 ranks\s+(\d+) B: median\s+([\d.]+) us", open(f).read()):
        mpi.setdefault(int(m[1]), []).append(float(m[2]))
rows = {}
for f in sorted(glob.glob(f"{d}/bench-*.txt")):
    for line in open(f):
        p = line.split()
        if len(p) == 14 and p[0].isdigit():
            rows.setdefault((p[13], int(p[0])), []).append((float(p[5]), float(p[9])))
print("size | MPI_Allreduce | " + " | ".join(f"{a} out, in place" for a in ["hier:2", "hier:2:mpi"]))
for size in sorted(mpi):
    m = statistics.median(mpi[size])
    cells = []
    for a in ["hier:2", "hier:2:mpi"]:
        v = rows.get((a, size), [])
        o = statistics.median(x for x, _ in v)
        i = statistics.median(y for _, y in v)
        cells.append(f"{o:.1f} ({o/m:.2f}x), {i:.1f} ({i/m:.2f}x) [n={len(v)}]")
    print(f"{size} | {m:.1f} [n={len(mpi[size])}] | " + " | ".join(cells))
