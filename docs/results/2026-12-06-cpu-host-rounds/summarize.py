import glob, os, re, statistics, sys
o = sys.argv[1]
cells = {}
pairs = {}
for p in sorted(glob.glob(os.path.join(o, "cs-*.log"))):
    _, b, i = os.path.basename(p)[:-4].split("-")
    for line in open(p):
        m = re.match(r"\s+(\d+\s?[KMG]?i?B)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if m:
            size = m.group(1).replace(" ", "")
            for name, v in (("all_ranks", m.group(3)), ("per_rank", m.group(4))):
                cells.setdefault((size, name), {}).setdefault(b, []).append(float(v))
                pairs.setdefault((size, name, i), {})[b] = float(v)
print("# median over runs of each run's median us per call: old | new | new/old | paired new/old per run")
order = {"8B": 0, "1MiB": 1, "16MiB": 2}
for k in sorted(cells, key=lambda k: (order.get(k[0], 9), k[1])):
    o_, n_ = cells[k].get("old", []), cells[k].get("new", [])
    if o_ and n_:
        mo, mn = statistics.median(o_), statistics.median(n_)
        pr = [pairs[(k[0], k[1], i)] for i in sorted({kk[2] for kk in pairs if kk[:2] == k})]
        ps = " ".join("%.3f" % (p["new"] / p["old"]) for p in pr if "new" in p and "old" in p)
        print("%-6s %-10s %10.1f %10.1f %6.3f   %s" % (k[0], k[1], mo, mn, mn / mo, ps))
