#!/usr/bin/env python3
"""The Python layer's cost per call (the package's target: at most 2 us over
the Rust call at 8 B, same run).

One engine (CPU backend by default, 2 ranks, `ring`), in-place all-reduces
of COUNT float32 per rank (2 = 8 B). Alternating blocks of ITERS calls:
the Rust side alone (`_Engine._time_rust_calls`: the same communicator call
on host vectors, looped in Rust), the same call through
`Engine.all_reduce([a, b])` (numpy arrays read each call), and through a
prepared call (`Engine.prepare`: the arrays read once). Prints each
block's us per call and the medians' differences.

    python3 scripts/python-overhead.py [--backend cpu] [--ranks 2] [--count 2] [--iters 2000] [--blocks 7]
"""
import argparse
import statistics
import time

import numpy as np

import ringreduce as rr

ap = argparse.ArgumentParser()
ap.add_argument("--backend", default="cpu")
ap.add_argument("--ranks", type=int, default=2)
ap.add_argument("--count", type=int, default=2)
ap.add_argument("--iters", type=int, default=2000)
ap.add_argument("--blocks", type=int, default=7)
ap.add_argument("--algo", default="ring")
a = ap.parse_args()

e = rr.Engine(backend=a.backend, ranks=a.ranks, algo=a.algo, timeout=60)
xs = [np.ones(a.count, np.float32) for _ in range(a.ranks)]
for _ in range(200):  # warm both paths
    e.all_reduce(xs)
e._e._time_rust_calls(200, a.count)
call = e.prepare("all_reduce", xs)
for _ in range(200):
    call()
rust, py, prep = [], [], []
for b in range(a.blocks):
    rust.append(e._e._time_rust_calls(a.iters, a.count) / a.iters * 1e6)
    t = time.perf_counter()
    for _ in range(a.iters):
        e.all_reduce(xs)
    py.append((time.perf_counter() - t) / a.iters * 1e6)
    t = time.perf_counter()
    for _ in range(a.iters):
        call()
    prep.append((time.perf_counter() - t) / a.iters * 1e6)
    print(f"block {b}: rust {rust[-1]:.2f} us/call, python {py[-1]:.2f} us/call, prepared {prep[-1]:.2f} us/call")
mr, mp, mq = statistics.median(rust), statistics.median(py), statistics.median(prep)
print(f"{a.backend}, {a.ranks} ranks, {a.count * 4} B in place, {a.algo}: median rust {mr:.2f} us, "
      f"python {mp:.2f} us ({mp - mr:+.2f} us), prepared {mq:.2f} us ({mq - mr:+.2f} us) per call "
      f"(target: at most +2 us)")
e.close()
