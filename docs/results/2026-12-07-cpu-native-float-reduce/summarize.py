# Medians over the rounds of each run's time per call (us): old | new | new/old, and each against MPI_Allreduce; "nodes" = 2 x 2 over MPI, "onenode" = 4 processes.
import glob, os, re, statistics, sys
o = sys.argv[1]
cells = {}
for p in sorted(glob.glob(os.path.join(o, "*.txt"))):
    name = os.path.basename(p)[:-4]
    if name.startswith("mpi-"):
        for l in open(p):
            m = re.match(r"MPI_Allreduce 4 ranks\s+(\d+) B: median\s+([\d.]+)", l)
            if m:
                cells.setdefault(("MPI", "", int(m.group(1))), []).append(float(m.group(2)))
        continue
    parts = name.split("-")
    b = parts[0]; kind = "onenode" if "onenode" in name else "nodes"
    for l in open(p):
        f = l.split()
        if len(f) >= 14 and f[0].isdigit() and f[2] == "float":
            cells.setdefault((b, kind + " " + f[13], int(f[0])), []).append(float(f[5]))
            cells.setdefault((b, kind + " " + f[13] + " in place", int(f[0])), []).append(float(f[9]))
med = {k: statistics.median(v) for k, v in cells.items()}
print("# %-32s %9s %10s %10s %8s %8s %8s  (runs)" % ("path", "bytes", "old us", "new us", "ratio", "old/MPI", "new/MPI"))
for kind in sorted({k[1] for k in med if k[0] != "MPI"}):
    for size in sorted({k[2] for k in med if k[1] == kind}):
        o_, n_ = med.get(("old", kind, size)), med.get(("new", kind, size))
        m = med.get(("MPI", "", size))
        if o_ is None or n_ is None: continue
        print("  %-32s %9d %10.1f %10.1f %8.2f %8s %8s  (%d, %d)" % (kind, size, o_, n_, n_ / o_,
            "%.2fx" % (o_ / m) if m else "-", "%.2fx" % (n_ / m) if m else "-",
            len(cells[("old", kind, size)]), len(cells[("new", kind, size)])))
for size in sorted({k[2] for k in med if k[0] == "MPI"}):
    print("  %-32s %9d %10.1f" % ("MPI_Allreduce", size, med[("MPI", "", size)]))
