#!/usr/bin/env python3
"""Summarize a `ringreduce bench -J` file as markdown: per size, each
algorithm's busbw (out-of-place / in-place), the best ringreduce path and its
ratio to NCCL. Usage: scripts/summarize.py bench.json [more.json ...]"""
import json
import sys


def fmt_size(b):
    for unit, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= unit and b % unit == 0:
            return f"{b // unit}{name}"
    return f"{b}B"


def main(paths):
    for path in paths:
        rep = json.load(open(path))
        h = rep["header"]
        print(f"### {path}: {h['ranks']} ranks, {h['date']}, ceiling {h.get('link_ceiling_gbps')}")
        rows = rep["rows"]
        algos = []
        for r in rows:
            if r["algo"] not in algos:
                algos.append(r["algo"])
        sizes = sorted({r["size"] for r in rows})
        by = {(r["algo"], r["size"]): r for r in rows}
        print("| size | " + " | ".join(algos) + " | best (oop) | best/nccl oop | best/nccl ip |")
        print("|" + "---|" * (len(algos) + 4))
        for s in sizes:
            cells = []
            for a in algos:
                r = by.get((a, s))
                if not r:
                    cells.append("-")
                    continue
                o, i = r.get("out_of_place"), r.get("in_place")
                cells.append(f"{o['busbw']:.1f} / {i['busbw']:.1f}" if o and i else "-")
            ours = [a for a in algos if a != "nccl" and (a, s) in by]
            n = by.get(("nccl", s))
            if ours:
                best_o = max(ours, key=lambda a: by[(a, s)]["out_of_place"]["algbw"])
                best_i = max(ours, key=lambda a: by[(a, s)]["in_place"]["algbw"])
                ro = by[(best_o, s)]["out_of_place"]["algbw"] / n["out_of_place"]["algbw"] if n else float("nan")
                ri = by[(best_i, s)]["in_place"]["algbw"] / n["in_place"]["algbw"] if n else float("nan")
                cells += [best_o, f"{ro:.2f}x", f"{ri:.2f}x ({best_i})"]
            print(f"| {fmt_size(s)} | " + " | ".join(cells) + " |")
        for c in rep.get("cold_start", []):
            print(f"- cold start {c['algo']}: setup {c['setup_ms']:.1f} ms + first {c['first_call_ms']:.2f} ms; steady {c['steady_us']:.1f} us")
        for note in h.get("notes", []):
            print(f"- {note}")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
