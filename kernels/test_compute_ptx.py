#!/usr/bin/env python3
"""Run the overlap benchmark's compute kernels (ptx/compute.ptx) on the PTX
emulator (CPU) and compare bit for bit with a Python reference.

    .venv-ci/bin/python kernels/test_compute_ptx.py          # CI
    .venv-ci/bin/python kernels/test_compute_ptx.py -v       # every case

Kernels: rr_grad_fma, rr_grad_mem, rr_grad_check (see the header of
ptx/compute.ptx for their ABI and the bucket value formula).  Every buffer
sits between no-access guard zones, outputs start poisoned (a read of an
unwritten byte is a fault, an unwritten element fails the case), and grids
smaller than the data exercise the grid-stride loops.  Exit status 1 on any
failure.  Needs numpy and ml_dtypes (the emulator's imports).
"""

import argparse
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    import numpy as np
    import ml_dtypes  # noqa: F401
except ImportError as e:  # pragma: no cover
    sys.exit("test_compute_ptx.py needs numpy and ml_dtypes (%s); e.g. "
             ".venv-ci/bin/python -m pip install numpy==2.2.6 ml_dtypes==0.5.1" % e)

from ptxemu import load_module, PtxError  # noqa: E402
from ptxemu.machine import Machine  # noqa: E402
from ptxemu.kerneltests import Buffers  # noqa: E402

M32 = 0xFFFFFFFF


def grad_value(rank, bucket, i, step):
    """The bucket value of ptx/compute.ptx (an integer in -512..511)."""
    h = ((i & M32) * 0x9E3779B1 + bucket * 0x85EBCA77 + rank * 0xC2B2AE3D
         + step * 0x27D4EB2F) & M32
    h ^= h >> 15
    return ((h >> 7) & 1023) - 512


def values(rank, bucket, n, step):
    return np.array([grad_value(rank, bucket, i, step) for i in range(n)], dtype=np.float32)


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def run(kernel, grid, block, params, m, steps=50_000_000):
    m.launch(kernel, grid, block, params)
    m.run(max_steps=steps)


def case_fma(mod, n, iters, grid, block, seed, nan=False):
    m = Machine(seed=seed)
    bufs = Buffers(m)
    out = bufs.place("out", 4 * n, 0, poison=True, track=True) if n else bufs.place("out", 0)
    rank, bucket, step = seed % 5, seed % 7, seed % 11
    mval, cval = (0.999, 0.001) if not nan else (1.0, float("nan"))
    run(mod.kernel("rr_grad_fma"), grid, block,
        [out, n, iters, f32_bits(mval), f32_bits(cval), rank, bucket, step], m)
    if n == 0:
        return None
    if not m.mem.initialized(out, 4 * n):
        return "an element of out was never written"
    got = np.frombuffer(m.mem.read(out, 4 * n), dtype=np.float32)
    if nan:
        if iters and not np.all(np.isnan(got)):
            return "a NaN in the FMA chains did not reach the bucket"
        if not iters and np.any(np.isnan(got)):
            return "NaN without any FMA"
        return None
    want = values(rank, bucket, n, step)
    bad = np.nonzero(got.view(np.uint32) != want.view(np.uint32))[0]
    if len(bad):
        i = int(bad[0])
        return "%d of %d differ; first %d: got %r want %r" % (len(bad), n, i, got[i], want[i])
    return None


def case_mem(mod, n, passes, grid, block, seed):
    m = Machine(seed=seed)
    bufs = Buffers(m)
    rng = np.random.default_rng(seed)
    # Integers and a = 0.5: a * x + y is exact, so the fma's single rounding
    # equals this reference.
    x = rng.integers(-1000, 1000, size=passes * n).astype(np.float32)
    y = rng.integers(-1000, 1000, size=passes * n).astype(np.float32)
    out = bufs.place("out", 4 * n, 0, poison=True, track=True)
    px = bufs.place("x", 4 * passes * n, 0, x.tobytes()) if passes else bufs.place("x", 0)
    py = bufs.place("y", 4 * passes * n, 0, y.tobytes(), track=True) if passes else bufs.place("y", 0)
    rank, bucket, step = seed % 3, seed % 9, seed % 13
    run(mod.kernel("rr_grad_mem"), grid, block,
        [out, n, px, py, passes, f32_bits(0.5), rank, bucket, step], m)
    if not m.mem.initialized(out, 4 * n):
        return "an element of out was never written"
    got = np.frombuffer(m.mem.read(out, 4 * n), dtype=np.float32)
    want = values(rank, bucket, n, step)
    bad = np.nonzero(got.view(np.uint32) != want.view(np.uint32))[0]
    if len(bad):
        return "bucket: %d of %d differ (first %d)" % (len(bad), n, int(bad[0]))
    if passes:
        gy = np.frombuffer(m.mem.read(py, 4 * passes * n), dtype=np.float32)
        wy = (np.float32(0.5) * x + y).astype(np.float32)
        if not np.array_equal(gy.view(np.uint32), wy.view(np.uint32)):
            return "y differs from 0.5 * x + y"
        if m.mem.read(px, 4 * passes * n) != x.tobytes():
            return "x was modified"
    return None


def case_check(mod, n, first, count, grid, block, seed, wrong=()):
    m = Machine(seed=seed)
    bufs = Buffers(m)
    bucket, step = seed % 6, seed % 17
    data = np.zeros(n, dtype=np.float32)
    for r in range(first, first + count):
        data += values(r, bucket, n, step)
    for i in wrong:
        data[i] = np.float32(data[i] + 1.0) if i % 2 else np.float32(-0.0 if data[i] == 0 else -data[i])
    pb = bufs.place("bucket", 4 * n, 0, data.tobytes()) if n else bufs.place("bucket", 0)
    ctr = bufs.place("counters", 16, 0, struct.pack("<QQ", 0, (1 << 64) - 1))
    run(mod.kernel("rr_grad_check"), grid, block, [pb, n, ctr, first, count, bucket, step], m)
    got_wrong, got_first = struct.unpack("<QQ", m.mem.read(ctr, 16))
    want_wrong = len(set(wrong))
    want_first = min(wrong) if wrong else (1 << 64) - 1
    if (got_wrong, got_first) != (want_wrong, want_first):
        return "counters (%d, %d), expected (%d, %d)" % (got_wrong, got_first, want_wrong, want_first)
    if n and m.mem.read(pb, 4 * n) != data.tobytes():
        return "the bucket was modified"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptx", default=os.path.join(HERE, "..", "ptx", "compute.ptx"))
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    try:
        mod = load_module(os.path.abspath(a.ptx))
    except PtxError as e:
        sys.exit("cannot load %s: %s" % (a.ptx, e))
    cases = []
    for seed, (n, iters, grid, block) in enumerate([
            (0, 1, 1, 32), (1, 0, 1, 32), (5, 1, 1, 32), (37, 2, 1, 16), (257, 1, 2, 64),
            (300, 1, 3, 32), (64, 0, 4, 16)]):
        cases.append(("fma n=%d iters=%d grid=%dx%d" % (n, iters, grid, block),
                      lambda n=n, i=iters, g=grid, b=block, s=seed: case_fma(mod, n, i, g, b, s)))
    cases.append(("fma NaN guard (iters=1)", lambda: case_fma(mod, 40, 1, 1, 32, 3, nan=True)))
    cases.append(("fma no FMA, no NaN (iters=0)", lambda: case_fma(mod, 40, 0, 1, 32, 4, nan=True)))
    for seed, (n, passes, grid, block) in enumerate([
            (4, 1, 1, 32), (0, 2, 1, 32), (64, 0, 1, 32), (64, 3, 1, 8), (200, 2, 2, 32),
            (124, 4, 3, 16)]):
        cases.append(("mem n=%d passes=%d grid=%dx%d" % (n, passes, grid, block),
                      lambda n=n, p=passes, g=grid, b=block, s=seed + 20: case_mem(mod, n, p, g, b, s)))
    for seed, (n, first, count, grid, block, wrong) in enumerate([
            (0, 0, 2, 1, 32, ()), (50, 0, 2, 1, 32, ()), (50, 1, 1, 2, 16, ()),
            (77, 0, 8, 1, 32, ()), (90, 0, 2, 2, 32, (3, 40, 89)), (90, 2, 3, 1, 8, (0,)),
            (33, 0, 1, 3, 8, (32, 5))]):
        cases.append(("check n=%d ranks %d..%d grid=%dx%d wrong=%s"
                      % (n, first, first + count, grid, block, list(wrong)),
                      lambda n=n, f=first, c=count, g=grid, b=block, w=wrong, s=seed + 40:
                      case_check(mod, n, f, c, g, b, s, w)))
    failed = 0
    for label, fn in cases:
        try:
            msg = fn()
        except PtxError as e:
            msg = "%s: %s" % (type(e).__name__, e)
        if msg:
            failed += 1
            print("FAIL %s: %s" % (label, msg))
        elif a.verbose:
            print("ok   %s" % label)
    print("compute.ptx: %d cases, %d failed" % (len(cases), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
