# Medians over the rounds (us per call) of MPI_Allreduce and of `auto` (over
# 2 x 2, and on one node of 4 processes), out of place and in place, with
# each against MPI's median; the range of the per-round ratios (each round's
# auto over the same round's MPI_Allreduce) beside it.
import glob, os, re, statistics, sys
o = sys.argv[1]
mpi, cells = {}, {}
for p in glob.glob(os.path.join(o, "mpi-*.txt")):
    r = int(p.rsplit("-", 1)[1][:-4])
    for l in open(p):
        m = re.match(r"MPI_Allreduce 4 ranks\s+(\d+) B: median\s+([\d.]+)", l)
        if m:
            mpi.setdefault(int(m.group(1)), {})[r] = float(m.group(2))
for kind in ("nodes", "onenode"):
    for p in glob.glob(os.path.join(o, kind + "-*.txt")):
        r = int(p.rsplit("-", 1)[1][:-4])
        for l in open(p):
            f = l.split()
            if len(f) >= 14 and f[0].isdigit() and f[2] == "float":
                b = int(f[0])
                cells.setdefault((kind, "out", b, f[13]), {})[r] = float(f[5])
                cells.setdefault((kind, "in", b, f[13]), {})[r] = float(f[9])
print("# %-8s %-4s %9s %-12s %10s %10s %7s  %s" % ("where", "", "bytes", "path", "MPI us", "auto us", "ratio", "per-round ratios (rounds)"))
for (kind, io, b, path) in sorted(cells, key=lambda k: (k[0], k[2], k[1])):
    v = cells[(kind, io, b, path)]
    m = mpi.get(b, {})
    rs = sorted(v[r] / m[r] for r in v if r in m)
    mm, av = statistics.median(m.values()), statistics.median(v.values())
    print("  %-8s %-4s %9d %-12s %10.1f %10.1f %6.2fx  %.2f-%.2f (%d)" % (kind, io, b, path, mm, av, av / mm, rs[0], rs[-1], len(rs)))
