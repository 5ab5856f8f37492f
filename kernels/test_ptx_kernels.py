#!/usr/bin/env python3
"""Run every reduce / exchange / ringll kernel of ptx/ on the PTX emulator (CPU) and
compare bitwise with an independent Python reference of the semantics.

    python kernels/test_ptx_kernels.py --quick            # CI (default)
    python kernels/test_ptx_kernels.py --full             # more cases
    python kernels/test_ptx_kernels.py --ptx-dir /other/ptx --only 'sum_f32'

Kernels found: every entry of every ptx/reduce_*.ptx and ptx/exchange_*.ptx,
classified by name (rr_reduce_<op>_<type>, rr_exchange_<op>_<type>,
rr_ringll_<op>_<type>) and by parameter list (the old f32 ABIs and the new one
with flags/scalar/ctrl).
Before the kernels, the emulator's self-test runs (fp core against numpy /
ml_dtypes, and deliberately broken kernels that must be caught); --no-selftest
skips it.  Exit status 1 on any failure, with kernel, case and first differing
element.  Needs numpy and ml_dtypes.
"""

import argparse
import glob
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    import numpy  # noqa: F401
    import ml_dtypes  # noqa: F401
except ImportError as e:  # pragma: no cover
    sys.exit("test_ptx_kernels.py needs numpy and ml_dtypes (%s); e.g. "
             ".venv-ci/bin/python -m pip install numpy==2.2.6 ml_dtypes==0.5.1" % e)

from ptxemu import load_module, PtxError  # noqa: E402
from ptxemu import kerneltests as kt  # noqa: E402


def find_kernels(ptx_dir):
    files = sorted(glob.glob(os.path.join(ptx_dir, "reduce_*.ptx")) +
                   glob.glob(os.path.join(ptx_dir, "exchange_*.ptx")))
    kernels, problems = [], []
    for f in files:
        try:
            mod = load_module(f)
        except PtxError as e:
            problems.append("%s: %s" % (os.path.basename(f), e))
            continue
        for name in mod.entry_names:
            info = kt.classify(mod, name)
            if isinstance(info, str):
                problems.append("%s: %s" % (os.path.basename(f), info))
            else:
                info.file = os.path.basename(f)
                info.path = f
                kernels.append(info)
    return files, kernels, problems


_MODS = {}


def _worker(job):
    """Process-pool entry: (path, kernel name, mode, seed) -> run_kernel()."""
    path, name, mode, seed = job
    mod = _MODS.get(path)
    if mod is None:
        mod = _MODS[path] = load_module(path)
    info = kt.classify(mod, name)
    info.file = os.path.basename(path)
    results, dt, lint = run_kernel(info, mode, seed, False)
    return results, dt, lint


def run_kernel(info, mode, seed, verbose):
    t0 = time.time()
    try:
        k = info.kernel                      # compile (unknown instructions fail here)
    except PtxError as e:
        return [kt.CaseResult(False, "compile", "%s: %s" % (type(e).__name__, e))], time.time() - t0, []
    results = []
    if info.family == "reduce":
        for c in kt.reduce_cases(info, mode, seed):
            r = kt.run_reduce(info, c)
            results.append(r)
            if verbose:
                print("    %s %s %s" % ("ok  " if r.ok else "FAIL", r.label, r.msg), flush=True)
    elif info.family in ("ringll", "ringsimple"):
        for c in kt.ringll_cases(info, mode, seed):
            r = kt.run_ringll(info, c)
            results.append(r)
            if verbose:
                print("    %s %s %s" % ("ok  " if r.ok else "FAIL", r.label, r.msg), flush=True)
        # quick: one fault path per kernel, which one depends on the op (so
        # each type's five kernels cover all three); full: all three
        kinds = ["timeout", "abort", "forever"]
        if mode != "full":
            kinds = [{"sum": "timeout", "prod": "abort", "max": "forever"}.get(info.op, "timeout")]
        for kind in kinds:
            r = kt.run_ringll_fault(info, kind, seed=seed + 7)
            results.append(r)
            if verbose:
                print("    %s %s %s" % ("ok  " if r.ok else "FAIL", r.label, r.msg), flush=True)
        # the step a rank waited in, as the host's error names it
        if mode == "full" or info.op == "min":
            r = kt.run_ringll_stuck(info, seed=seed + 11)
            results.append(r)
            if verbose:
                print("    %s %s %s" % ("ok  " if r.ok else "FAIL", r.label, r.msg), flush=True)
    else:
        for c in kt.exchange_cases(info, mode, seed):
            r = kt.run_exchange(info, c)
            results.append(r)
            if verbose:
                print("    %s %s %s" % ("ok  " if r.ok else "FAIL", r.label, r.msg), flush=True)
        kinds = ["trap"] if info.abi == "old" else ["timeout", "abort", "forever"]
        for kind in kinds:
            r = kt.run_exchange_fault(info, kind, seed=seed + 7)
            results.append(r)
            if verbose:
                print("    %s %s %s" % ("ok  " if r.ok else "FAIL", r.label, r.msg), flush=True)
    return results, time.time() - t0, k.lint


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptx-dir", default=os.path.join(os.path.dirname(HERE), "ptx"))
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="the CI set (default)")
    g.add_argument("--full", action="store_true", help="more and bigger cases")
    ap.add_argument("--only", help="regex: run only kernels whose name matches")
    ap.add_argument("--seed", type=int, default=0, help="shifts every case's seed")
    ap.add_argument("--no-selftest", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    ap.add_argument("-j", "--jobs", type=int, default=1,
                    help="kernels tested in parallel processes (default 1)")
    args = ap.parse_args(argv)
    mode = "full" if args.full else "quick"
    t_start = time.time()
    failed = 0
    passed = 0

    if not args.no_selftest:
        from ptxemu import selftest
        print("== emulator self-test (%s)" % mode, flush=True)
        ok = selftest.run(quick=(mode == "quick"), verbose=args.verbose)
        if ok:
            passed += 1
        else:
            failed += 1

    files, kernels, problems = find_kernels(args.ptx_dir)
    if args.only:
        rx = re.compile(args.only)
        kernels = [k for k in kernels if rx.search(k.name)]
    print("== %d kernels in %d files of %s (%s mode)" % (len(kernels), len(files), args.ptx_dir, mode),
          flush=True)
    for p in problems:
        print("FAIL %s" % p)
        failed += 1
    if not files:
        print("FAIL no ptx/reduce_*.ptx or ptx/exchange_*.ptx found in %s" % args.ptx_dir)
        failed += 1
    lints = []
    if args.jobs > 1 and not args.verbose and kernels:
        import multiprocessing
        pool = multiprocessing.Pool(args.jobs)
        outs = pool.imap(_worker, [(k.path, k.name, mode, args.seed) for k in kernels])
    else:
        pool = None
        outs = (run_kernel(k, mode, args.seed, args.verbose) for k in kernels)
    for info, (results, dt, lint) in zip(kernels, outs):
        lints.extend(lint)
        bad = [r for r in results if not r.ok]
        steps = sum(r.steps for r in results)
        zs = {}
        for r in results:
            for key, v in r.zero_signs.items():
                zs[key] = zs.get(key, 0) + v
        zs_note = ""
        if zs and any(zs.values()):
            zs_note = "; max/min(+0,-0) gave " + ", ".join("%s x%d" % kv for kv in sorted(zs.items()))
        if bad:
            failed += 1
            print("FAIL %-34s %s: %d of %d cases failed (%.1f s)"
                  % (info.name, info.file, len(bad), len(results), dt), flush=True)
            for r in bad[:3]:
                print("     case %s\n       %s" % (r.label, r.msg.replace("\n", "\n       ")))
            if len(bad) > 3:
                print("     ... and %d more failing cases" % (len(bad) - 3))
        else:
            passed += 1
            print("ok   %-34s %s: %d cases, %.1f s, %d steps%s"
                  % (info.name, info.file, len(results), dt, steps, zs_note), flush=True)
    if pool is not None:
        pool.close()
        pool.join()
    for ln in sorted(set(lints)):
        print("note %s" % ln)
    print("== %.0f s" % (time.time() - t_start))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
