"""Self-test of the emulator and of the kernel test harness.

1. Instruction semantics, end to end (parse, compile, run): small PTX kernels
   apply one instruction to arrays of inputs, checked against numpy /
   ml_dtypes / Python integers -- every fp8 <-> f16x2 conversion exhaustively,
   packed f16x2 / bf16x2 and f32 / f64 arithmetic on random and special
   values, fma against an exact rational result, the integer and bit
   instructions (div/rem toward zero, mul.hi/.wide, bfe, bfi, prmt, shifts).
2. Mutation tests: deliberately broken copies of the original hand-written
   kernels (fixtures/reduce_f32_v1.ptx, fixtures/exchange_f32_v1.ptx), of the
   first generated ones (fixtures/reduce_f32_v2.ptx) and of the first LL ring
   kernel (fixtures/ringll_f32_v2.ptx: rr_ringll_sum_f32) must FAIL the kernel
   tests -- an off-by-one tail, a wrong offset, a wrong vector stride, a head
   not clamped to n, a missing barrier, a stale flag or LL line accepted, a
   slot size off by a line, a put into the wrong slot or half, a trap -- and
   the unmodified copies must pass.

    python -m ptxemu.selftest [--full] [-v]      (from kernels/)
"""

import math
import os
import sys
import time
from fractions import Fraction

import numpy as np
import ml_dtypes

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    __package__ = "ptxemu"

from . import fp  # noqa: E402
from .machine import Machine, Module  # noqa: E402
from .errors import PtxError  # noqa: E402
from . import kerneltests as kt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")

# ---------------------------------------------------------------------------
# 1. instruction tests

_TEMPLATE = """
.version 7.8
.target sm_90
.address_size 64
.visible .entry t(.param .u64 out, .param .u64 x, .param .u64 y, .param .u64 z, .param .u64 n)
{
    .reg .u64 %%o, %%x, %%y, %%z, %%n, %%i, %%off, %%px;
    .reg .pred %%p, %%q;
    .reg .b64 %%A, %%B, %%C, %%D;
    .reg .b32 %%a, %%b, %%c, %%d;
    .reg .b16 %%h0, %%h1, %%hd;
    .reg .f32 %%f, %%g, %%k, %%fd;
    .reg .f64 %%F, %%G, %%K, %%FD;
    ld.param.u64 %%o, [out];
    ld.param.u64 %%x, [x];
    ld.param.u64 %%y, [y];
    ld.param.u64 %%z, [z];
    ld.param.u64 %%n, [n];
    mov.u64 %%i, 0;
LOOP:
    setp.ge.u64 %%p, %%i, %%n;
    @%%p bra DONE;
    shl.b64 %%off, %%i, 3;
    add.u64 %%px, %%x, %%off;
    ld.global.b64 %%A, [%%px];
    add.u64 %%px, %%y, %%off;
    ld.global.b64 %%B, [%%px];
    add.u64 %%px, %%z, %%off;
    ld.global.b64 %%C, [%%px];
    %s
    add.u64 %%px, %%o, %%off;
    st.global.b64 [%%px], %%D;
    add.u64 %%i, %%i, 1;
    bra.uni LOOP;
DONE:
    ret;
}
"""

_KCACHE = {}


def run_instr(body, A, B=None, C=None):
    """Apply `body` (PTX computing %D from %A, %B, %C) to u64 arrays."""
    A = np.asarray(A, dtype=np.uint64)
    n = len(A)
    B = np.zeros(n, np.uint64) if B is None else np.asarray(B, dtype=np.uint64)
    C = np.zeros(n, np.uint64) if C is None else np.asarray(C, dtype=np.uint64)
    k = _KCACHE.get(body)
    if k is None:
        k = Module(_TEMPLATE % body, "<selftest>").kernel("t")
        _KCACHE[body] = k
    m = Machine(seed=0, schedule="rr", quantum=1 << 20)
    base = 0x1000_0000
    for j, arr in enumerate((A, B, C)):
        m.mem.alloc(base + j * 0x100_0000, max(8, 8 * n), "in%d" % j,
                    data=arr.tobytes() if n else bytes(8))
    outp = base + 3 * 0x100_0000
    m.mem.alloc(outp, max(8, 8 * n), "out", poison=True)
    m.launch(k, 1, 1, [outp, base, base + 0x100_0000, base + 0x200_0000, n])
    m.run(max_steps=50 * n + 1000)
    return np.frombuffer(m.mem.read(outp, 8 * n), dtype=np.uint64).copy()


class Checker:
    def __init__(self, verbose):
        self.verbose = verbose
        self.failures = []
        self.count = 0

    def check(self, name, got, exp, nan_fmt=None, inputs=None, lanes=None):
        """Compare arrays; with nan_fmt, NaN == NaN in each `lanes`-bit lane."""
        got = np.asarray(got, dtype=np.uint64)
        exp = np.asarray(exp, dtype=np.uint64)
        bad = got != exp
        if nan_fmt is not None and bad.any():
            w = lanes or nan_fmt.nbits
            for i in np.nonzero(bad)[0]:
                g, e = int(got[i]), int(exp[i])
                ok = True
                for s in range(0, 64, w):
                    gl = (g >> s) & ((1 << w) - 1)
                    el = (e >> s) & ((1 << w) - 1)
                    if gl != el and not (fp.is_nan(gl, nan_fmt) and fp.is_nan(el, nan_fmt)):
                        ok = False
                bad[i] = not ok
        self.count += 1
        if bad.any():
            i = int(np.nonzero(bad)[0][0])
            ins = "" if inputs is None else " inputs " + ", ".join("0x%x" % int(x[i]) for x in inputs)
            self.failures.append("%s: %d of %d differ, first at %d:%s got 0x%x expected 0x%x"
                                 % (name, int(bad.sum()), len(bad), i, ins, int(got[i]), int(exp[i])))
            print("  FAIL %s" % self.failures[-1], flush=True)
        elif self.verbose:
            print("  ok   %s (%d values)" % (name, len(got)), flush=True)


def _specials16(dt):
    fi = np.finfo(np.float16) if dt == np.float16 else ml_dtypes.finfo(dt)
    v = [0.0, -0.0, 1.0, -1.0, float(fi.max), -float(fi.max), float(fi.smallest_subnormal),
         -float(fi.smallest_subnormal), float(fi.smallest_normal), float("inf"), float("-inf"),
         float("nan"), 0.5, 3.0]
    return np.array(v, np.float32).astype(dt).view(np.uint16)


def _rand_pairs16(rng, dt, n):
    """Random 16-bit patterns: moderate values, specials and raw bits."""
    mod = (rng.uniform(-4, 4, n) * np.exp2(rng.integers(-8, 8, n))).astype(np.float32).astype(dt)
    bits = mod.view(np.uint16).copy()
    sp = _specials16(dt)
    pick = rng.random(n)
    bits = np.where(pick < 0.2, sp[rng.integers(0, len(sp), n)], bits)
    bits = np.where(pick > 0.9, rng.integers(0, 1 << 16, n).astype(np.uint16), bits)
    return bits.astype(np.uint16)


def _round_to_f32_exact(q):
    """Correctly rounded float32 of an exact Fraction (round-to-odd to
    binary64, then RN to binary32: exact since 53 >= 24 + 2)."""
    if q == 0:
        return np.float32(0.0)
    d = float(q)                       # RN to binary64
    if Fraction(d) != q:
        m, e = math.frexp(d)
        mi = int(m * (1 << 53))
        if mi % 2 == 0:                # make it odd toward the exact value
            d = math.nextafter(d, math.inf if Fraction(d) < q else -math.inf)
    with np.errstate(all="ignore"):
        return np.float32(d)


def instruction_tests(quick, verbose):
    with np.errstate(all="ignore"):
        return _instruction_tests(quick, verbose)


def _instruction_tests(quick, verbose):
    ck = Checker(verbose)
    rng = np.random.default_rng(12345)
    print("-- instruction semantics", flush=True)

    # fp8 -> f16x2, exhaustive over both bytes' positions: every value in the
    # low byte and in the high byte (PTX ISA cvt: upper 8 bits -> upper 16 bits)
    for name, dt in (("e4m3", ml_dtypes.float8_e4m3fn), ("e5m2", ml_dtypes.float8_e5m2)):
        x = np.arange(1 << 16, dtype=np.uint64) if not quick else \
            np.array([k | ((k * 37 + 11) % 256) << 8 for k in range(256)] +
                     [((k * 91 + 5) % 256) | k << 8 for k in range(256)], dtype=np.uint64)
        # (quick: every byte value in each position; full: every pair)
        got = run_instr("cvt.u16.u64 %%h0, %%A; cvt.rn.f16x2.%sx2 %%d, %%h0; cvt.u64.u32 %%D, %%d;"
                        % name, x)
        lo = (x & 0xFF).astype(np.uint8).view(dt).astype(np.float32).astype(np.float16).view(np.uint16)
        hi = ((x >> 8) & 0xFF).astype(np.uint8).view(dt).astype(np.float32).astype(np.float16).view(np.uint16)
        ck.check("cvt.rn.f16x2.%sx2" % name, got, lo.astype(np.uint64) | (hi.astype(np.uint64) << 16),
                 fp.F16, [x], lanes=16)

    # f16x2 -> fp8 with satfinite: every f16 pattern in the low half, another in the high
    for name, dt in (("e4m3", ml_dtypes.float8_e4m3fn), ("e5m2", ml_dtypes.float8_e5m2)):
        # every f16 pattern in the low half and (a bijection of it) in the high half
        lo = np.arange(1 << 16, dtype=np.uint64)
        hi = (lo * 40503 + 12345) & 0xFFFF
        x = lo | (hi << 16)
        got = run_instr("cvt.u32.u64 %%a, %%A; cvt.rn.satfinite.%sx2.f16x2 %%hd, %%a; cvt.u64.u16 %%D, %%hd;"
                        % name, x)
        mx = float(ml_dtypes.finfo(dt).max)
        with np.errstate(all="ignore"):
            def cv(h):
                f = h.astype(np.uint16).view(np.float16).astype(np.float32)
                return np.clip(f, -mx, mx).astype(dt).view(np.uint8).astype(np.uint64)
        exp = cv(lo) | (cv(hi) << 8)
        fmt8 = fp.E4M3 if name == "e4m3" else fp.E5M2
        ck.check("cvt.rn.satfinite.%sx2.f16x2" % name, got, exp, fmt8, [x], lanes=8)

    # cvt.rn.satfinite.e4m3x2.f32 d, a, b: a -> upper byte, b -> lower byte
    f = rng.standard_normal(512).astype(np.float32) * np.float32(300)
    g = rng.standard_normal(512).astype(np.float32) * np.float32(3)
    f[:4] = [np.inf, -np.inf, np.nan, 1e6]
    A = f.view(np.uint32).astype(np.uint64)
    B = g.view(np.uint32).astype(np.uint64)
    got = run_instr("cvt.u32.u64 %a, %A; cvt.u32.u64 %b, %B; mov.b32 %f, %a; mov.b32 %g, %b;"
                    "cvt.rn.satfinite.e4m3x2.f32 %hd, %f, %g; cvt.u64.u16 %D, %hd;", A, B)
    with np.errstate(all="ignore"):
        c8 = lambda v: np.clip(v, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8).astype(np.uint64)
    ck.check("cvt.rn.satfinite.e4m3x2.f32", got, (c8(f) << 8) | c8(g), fp.E4M3, [A, B], lanes=8)

    # packed half / bfloat16 arithmetic
    n = 2048 if quick else 20000
    for tname, dt in (("f16x2", np.float16), ("bf16x2", ml_dtypes.bfloat16)):
        x = _rand_pairs16(rng, dt, 2 * n).view(np.uint32).astype(np.uint64)
        y = _rand_pairs16(rng, dt, 2 * n).view(np.uint32).astype(np.uint64)
        xa = x.astype(np.uint32).view(np.uint16).view(dt)
        ya = y.astype(np.uint32).view(np.uint16).view(dt)
        ff = fp.F16 if dt == np.float16 else fp.BF16
        with np.errstate(all="ignore"):
            for op, fn in (("add.rn", np.add), ("mul.rn", np.multiply), ("sub.rn", np.subtract),
                           ("max", np.fmax), ("min", np.fmin)):
                got = run_instr("cvt.u32.u64 %%a, %%A; cvt.u32.u64 %%b, %%B; %s.%s %%d, %%a, %%b;"
                                "cvt.u64.u32 %%D, %%d;" % (op, tname), x, y)
                exp = fn(xa, ya).astype(dt).view(np.uint16).view(np.uint32).astype(np.uint64)
                if op in ("max", "min"):
                    # +0 > -0 (PTX ISA max/min): numpy's fmax leaves the order unspecified
                    xv = xa.astype(np.float32)
                    yv = ya.astype(np.float32)
                    z = (xv == 0) & (yv == 0) & (np.signbit(xv) != np.signbit(yv))
                    e16 = exp.astype(np.uint32).view(np.uint16).copy()
                    e16[z] = 0x0000 if op == "max" else 0x8000
                    exp = e16.view(np.uint32).astype(np.uint64)
                ck.check("%s.%s" % (op, tname), got, exp, ff, [x, y], lanes=16)
        # single-element .f16 / .bf16 forms
        t1 = tname[:-2]
        got = run_instr("cvt.u16.u64 %%h0, %%A; cvt.u16.u64 %%h1, %%B; add.rn.%s %%hd, %%h0, %%h1;"
                        "cvt.u64.u16 %%D, %%hd;" % t1, x & 0xFFFF, y & 0xFFFF)
        with np.errstate(all="ignore"):
            exp = (xa[::2] + ya[::2]).astype(dt).view(np.uint16).astype(np.uint64)
        ck.check("add.rn.%s" % t1, got, exp, ff, [x, y], lanes=16)

    # f32 / f64 arithmetic (IEEE RN), min/max NaN rules, fma exact
    n = 2048 if quick else 20000
    f = (rng.standard_normal(n) * np.exp2(rng.integers(-130, 130, n))).astype(np.float32)
    g = (rng.standard_normal(n) * np.exp2(rng.integers(-130, 130, n))).astype(np.float32)
    h = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    sp = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4028235e38, 1.0], np.float32)
    f[:len(sp)] = sp
    g[:len(sp)] = sp[::-1]
    A = f.view(np.uint32).astype(np.uint64)
    B = g.view(np.uint32).astype(np.uint64)
    Cc = h.view(np.uint32).astype(np.uint64)
    with np.errstate(all="ignore"):
        for op, fn in (("add.rn", np.add), ("sub.rn", np.subtract), ("mul.rn", np.multiply),
                       ("div.rn", np.divide), ("max", np.fmax), ("min", np.fmin)):
            got = run_instr("cvt.u32.u64 %%a, %%A; cvt.u32.u64 %%b, %%B; mov.b32 %%f, %%a; mov.b32 %%g, %%b;"
                            "%s.f32 %%fd, %%f, %%g; mov.b32 %%d, %%fd; cvt.u64.u32 %%D, %%d;" % op, A, B)
            exp = fn(f, g).astype(np.float32).view(np.uint32).astype(np.uint64)
            ck.check("%s.f32" % op, got, exp, fp.F32, [A, B])
    # fma.rn.f32 against the exact rational result
    got = run_instr("cvt.u32.u64 %a, %A; cvt.u32.u64 %b, %B; cvt.u32.u64 %c, %C; mov.b32 %f, %a;"
                    "mov.b32 %g, %b; mov.b32 %k, %c; fma.rn.f32 %fd, %f, %g, %k; mov.b32 %d, %fd;"
                    "cvt.u64.u32 %D, %d;", A, B, Cc)
    exp = []
    for a_, b_, c_ in zip(f.tolist(), g.tolist(), h.tolist()):
        if not (math.isfinite(a_) and math.isfinite(b_) and math.isfinite(c_)):
            with np.errstate(all="ignore"):
                exp.append(np.float32(np.float32(a_) * np.float32(b_) + np.float32(c_)))
            continue
        q = Fraction(a_) * Fraction(b_) + Fraction(c_)
        r = _round_to_f32_exact(q)
        if q == 0:
            # IEEE 754: an exact zero sum is +0 in RN unless both addends are -0
            pneg = math.copysign(1, a_) * math.copysign(1, b_) < 0
            both_zero = a_ * b_ == 0 and c_ == 0
            r = np.float32(-0.0) if both_zero and pneg and math.copysign(1, c_) < 0 else np.float32(0.0)
        exp.append(r)
    exp = np.array(exp, np.float32).view(np.uint32).astype(np.uint64)
    ck.check("fma.rn.f32", got, exp, fp.F32, [A, B, Cc])
    F = (rng.standard_normal(n) * np.exp2(rng.integers(-1000, 1000, n))).astype(np.float64)
    G = (rng.standard_normal(n) * np.exp2(rng.integers(-1000, 1000, n))).astype(np.float64)
    F[:5] = [0.0, -0.0, np.inf, np.nan, 5e-324]
    G[:5] = [-0.0, 0.0, -np.inf, 1.0, -5e-324]
    with np.errstate(all="ignore"):
        for op, fn in (("add.rn", np.add), ("mul.rn", np.multiply), ("max", np.fmax),
                       ("min", np.fmin), ("div.rn", np.divide)):
            got = run_instr("mov.b64 %%F, %%A; mov.b64 %%G, %%B; %s.f64 %%FD, %%F, %%G; mov.b64 %%D, %%FD;"
                            % op, F.view(np.uint64), G.view(np.uint64))
            exp = fn(F, G).view(np.uint64)
            if op in ("max", "min"):
                z = (F == 0) & (G == 0) & (np.signbit(F) != np.signbit(G))
                exp = exp.copy()
                exp[z] = 0 if op == "max" else 0x8000000000000000
            ck.check("%s.f64" % op, got, exp, fp.F64, [F.view(np.uint64), G.view(np.uint64)])

    # integer and bit instructions against Python integers
    n = 1024 if quick else 10000
    A = rng.integers(0, 2**63, n, dtype=np.uint64) * 2 + rng.integers(0, 2, n, dtype=np.uint64)
    B = rng.integers(0, 2**63, n, dtype=np.uint64) * 2 + rng.integers(0, 2, n, dtype=np.uint64)
    small = rng.integers(-300, 300, n).astype(np.int64).view(np.uint64)
    A[: n // 4] = small[: n // 4]
    B[n // 8: n // 2] = small[n // 8: n // 2]
    B[B == 0] = 3
    Bs = B.copy()
    Bs[(B & 0xFFFFFFFF) == 0] = 7
    s32 = lambda v: ((int(v) & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000
    s64 = lambda v: (int(v) ^ (1 << 63)) - (1 << 63)

    def tdiv(x, y):
        q = abs(x) // abs(y)
        return -q if (x < 0) != (y < 0) else q

    cases = [
        ("div.s32", "cvt.u32.u64 %a, %A; cvt.u32.u64 %b, %B; div.s32 %d, %a, %b; cvt.u64.u32 %D, %d;",
         lambda a, b: tdiv(s32(a), s32(b)) & 0xFFFFFFFF, Bs),
        ("rem.s32", "cvt.u32.u64 %a, %A; cvt.u32.u64 %b, %B; rem.s32 %d, %a, %b; cvt.u64.u32 %D, %d;",
         lambda a, b: (s32(a) - tdiv(s32(a), s32(b)) * s32(b)) & 0xFFFFFFFF, Bs),
        ("div.u64", "div.u64 %D, %A, %B;", lambda a, b: int(a) // int(b), B),
        ("div.s64", "div.s64 %D, %A, %B;", lambda a, b: tdiv(s64(a), s64(b)) & (2**64 - 1), B),
        ("rem.u64", "rem.u64 %D, %A, %B;", lambda a, b: int(a) % int(b), B),
        ("mul.hi.u64", "mul.hi.u64 %D, %A, %B;", lambda a, b: (int(a) * int(b)) >> 64, B),
        ("mul.hi.s64", "mul.hi.s64 %D, %A, %B;", lambda a, b: ((s64(a) * s64(b)) >> 64) & (2**64 - 1), B),
        ("mul.wide.s32", "cvt.u32.u64 %a, %A; cvt.u32.u64 %b, %B; mul.wide.s32 %D, %a, %b;",
         lambda a, b: (s32(a) * s32(b)) & (2**64 - 1), B),
        ("mul.hi.u32", "cvt.u32.u64 %a, %A; cvt.u32.u64 %b, %B; mul.hi.u32 %d, %a, %b; cvt.u64.u32 %D, %d;",
         lambda a, b: ((int(a) & 0xFFFFFFFF) * (int(b) & 0xFFFFFFFF)) >> 32, B),
        ("mad.hi.u32", "cvt.u32.u64 %a, %A; cvt.u32.u64 %b, %B; mad.hi.u32 %d, %a, %b, %a; cvt.u64.u32 %D, %d;",
         lambda a, b: ((((int(a) & 0xFFFFFFFF) * (int(b) & 0xFFFFFFFF)) >> 32) + (int(a) & 0xFFFFFFFF)) & 0xFFFFFFFF, B),
        ("shr.s64", "cvt.u32.u64 %b, %B; and.b32 %b, %b, 127; shr.s64 %D, %A, %b;",
         lambda a, b: (s64(a) >> min(int(b) & 127, 64)) & (2**64 - 1), B),
        ("shl.b64", "cvt.u32.u64 %b, %B; and.b32 %b, %b, 127; shl.b64 %D, %A, %b;",
         lambda a, b: (int(a) << min(int(b) & 127, 64)) & (2**64 - 1), B),
        ("max.s32", "cvt.u32.u64 %a, %A; cvt.u32.u64 %b, %B; max.s32 %d, %a, %b; cvt.u64.u32 %D, %d;",
         lambda a, b: max(s32(a), s32(b)) & 0xFFFFFFFF, B),
        ("min.u64", "min.u64 %D, %A, %B;", lambda a, b: min(int(a), int(b)), B),
        ("setp.lt.s64", "setp.lt.s64 %p, %A, %B; selp.u64 %D, 1, 0, %p;",
         lambda a, b: int(s64(a) < s64(b)), B),
        ("setp.hi.u32", "cvt.u32.u64 %a, %A; cvt.u32.u64 %b, %B; setp.hi.u32 %p, %a, %b; selp.u64 %D, 1, 0, %p;",
         lambda a, b: int((int(a) & 0xFFFFFFFF) > (int(b) & 0xFFFFFFFF)), B),
        ("bfe.s32", "cvt.u32.u64 %a, %A; cvt.u32.u64 %b, %B; shr.u32 %c, %b, 8; bfe.s32 %d, %a, %b, %c; cvt.u64.u32 %D, %d;",
         lambda a, b: _bfe_ref(int(a) & 0xFFFFFFFF, int(b) & 0xFF, (int(b) >> 8) & 0xFF, True), B),
        ("bfe.u32", "cvt.u32.u64 %a, %A; cvt.u32.u64 %b, %B; shr.u32 %c, %b, 8; bfe.u32 %d, %a, %b, %c; cvt.u64.u32 %D, %d;",
         lambda a, b: _bfe_ref(int(a) & 0xFFFFFFFF, int(b) & 0xFF, (int(b) >> 8) & 0xFF, False), B),
        ("bfi.b32", "cvt.u32.u64 %a, %A; shr.u64 %C, %A, 32; cvt.u32.u64 %c, %C; cvt.u32.u64 %b, %B;"
                    "shr.u32 %d, %b, 8; bfi.b32 %d, %a, %c, %b, %d; cvt.u64.u32 %D, %d;",
         lambda a, b: _bfi_ref(int(a) & 0xFFFFFFFF, int(a) >> 32, int(b) & 0xFF, (int(b) >> 8) & 0xFF), B),
        ("prmt.b32", "cvt.u32.u64 %a, %A; shr.u64 %C, %A, 32; cvt.u32.u64 %c, %C; cvt.u32.u64 %b, %B;"
                     "prmt.b32 %d, %a, %c, %b; cvt.u64.u32 %D, %d;",
         lambda a, b: _prmt_ref(int(a) & 0xFFFFFFFF, int(a) >> 32, int(b) & 0xFFFF), B),
    ]
    for name, body, fn, Bv in cases:
        got = run_instr(body, A, Bv)
        exp = np.array([fn(a, b) for a, b in zip(A.tolist(), Bv.tolist())], dtype=np.uint64)
        ck.check(name, got, exp, None, [A, Bv])
    # NCCL's byte_perm selectors, known answers
    got = run_instr("cvt.u32.u64 %a, %A; cvt.u32.u64 %b, %B; prmt.b32 %d, %a, %b, 0x7250; cvt.u64.u32 %D, %d;",
                    [0x44332211], [0x88776655])
    ck.check("prmt 0x7250", got, [0x88336611], None)
    got = run_instr("cvt.u32.u64 %a, %A; cvt.u32.u64 %b, %B; prmt.b32 %d, %a, %b, 0x6420; cvt.u64.u32 %D, %d;",
                    [0x44332211], [0x88776655])
    ck.check("prmt 0x6420", got, [0x77553311], None)
    got = run_instr("cvt.u32.u64 %a, %A; prmt.b32 %d, %a, 0, 0x8880; cvt.u64.u32 %D, %d;", [0x000000F0])
    ck.check("prmt sign replicate", got, [0xFFFFFFF0], None)
    return ck


def _bfe_ref(a, pos, ln, signed):
    if ln == 0:
        return 0
    end = min(pos + ln, 32)
    field = (a >> pos) & ((1 << max(0, end - pos)) - 1) if pos < 32 else 0
    width = max(0, end - pos)
    if signed:
        sbit = (a >> min(pos + ln - 1, 31)) & 1
        if sbit:
            field |= ((1 << 32) - 1) ^ ((1 << width) - 1)
    return field & 0xFFFFFFFF


def _bfi_ref(a, b, pos, ln):
    if ln == 0 or pos > 31:
        return b
    w = min(ln, 32 - pos)
    mask = ((1 << w) - 1) << pos
    return (b & ~mask | ((a << pos) & mask)) & 0xFFFFFFFF


def _prmt_ref(a, b, c):
    src = a.to_bytes(4, "little") + b.to_bytes(4, "little")
    out = bytearray(4)
    for i in range(4):
        sel = (c >> (4 * i)) & 0xF
        byte = src[sel & 7]
        out[i] = (0xFF if byte >= 0x80 else 0) if sel & 8 else byte
    return int.from_bytes(out, "little")


# ---------------------------------------------------------------------------
# 1b. machine tests: shared memory, barriers, atomics and the error checks

_BLOCK_SUM = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry blocksum(.param .u64 out, .param .u64 x)
{
    .reg .u64 %%o, %%x, %%p, %%s, %%q;
    .reg .u32 %%tid, %%ntid, %%v, %%w, %%half, %%addr, %%k;
    .reg .pred %%pp;
    .shared .align 4 .u32 buf[64];
    ld.param.u64 %%o, [out];
    ld.param.u64 %%x, [x];
    cvta.to.global.u64 %%x, %%x;
    mov.u32 %%tid, %%tid.x;
    mov.u32 %%ntid, %%ntid.x;
    mul.wide.u32 %%p, %%tid, 4;
    add.u64 %%p, %%x, %%p;
    ld.global.u32 %%v, [%%p];
    mov.u32 %%addr, buf;
    shl.b32 %%k, %%tid, 2;
    add.u32 %%addr, %%addr, %%k;
    st.shared.u32 [%%addr], %%v;
    %s
    shr.u32 %%half, %%ntid, 1;
LOOP:
    setp.eq.u32 %%pp, %%half, 0;
    @%%pp bra DONE;
    setp.lt.u32 %%pp, %%tid, %%half;
    @!%%pp bra SKIP;
    shl.b32 %%k, %%half, 2;
    add.u32 %%k, %%addr, %%k;
    ld.shared.u32 %%w, [%%k];
    ld.shared.u32 %%v, [%%addr];
    add.u32 %%v, %%v, %%w;
    st.shared.u32 [%%addr], %%v;
SKIP:
    bar.sync 0;
    shr.u32 %%half, %%half, 1;
    bra.uni LOOP;
DONE:
    setp.ne.u32 %%pp, %%tid, 0;
    @%%pp bra END;
    mov.u64 %%s, buf;
    cvta.shared.u64 %%s, %%s;
    ld.u32 %%v, [%%s];
    atom.global.add.u32 %%w, [%%o], %%v;
    atom.global.cas.b32 %%w, [%%o+4], 0, 7;
    atom.global.exch.b32 %%w, [%%o+8], 9;
    atom.global.max.s32 %%w, [%%o+12], -5;
END:
    ret;
}
"""


def _expect_error(ck, name, fn, etype, needle=""):
    try:
        fn()
    except PtxError as e:
        etypes = etype if isinstance(etype, tuple) else (etype,)
        if type(e).__name__ not in etypes or needle not in str(e):
            ck.failures.append("%s: expected %s (%r), got %s: %s" % (name, etype, needle,
                                                                   type(e).__name__, e))
            print("  FAIL %s" % ck.failures[-1], flush=True)
        elif ck.verbose:
            print("  ok   %s -> %s: %s" % (name, etype, str(e).split("\n")[0][:110]), flush=True)
        ck.count += 1
        return
    ck.count += 1
    ck.failures.append("%s: no error raised, expected %s" % (name, etype))
    print("  FAIL %s" % ck.failures[-1], flush=True)


def _expect_ok(ck, name, fn):
    ck.count += 1
    try:
        fn()
    except PtxError as e:
        ck.failures.append("%s: %s: %s" % (name, type(e).__name__, str(e).split("\n")[0]))
        print("  FAIL %s" % ck.failures[-1], flush=True)
        return
    if ck.verbose:
        print("  ok   %s" % name, flush=True)


def _shared_flag(st, ld):
    """Thread 0 raises a shared flag; the other threads spin on it."""
    body = ("mov.u32 %%r, %%tid.x; setp.eq.u32 %%p, %%r, 0; @%%p st.shared.u32 [f], 0; bar.sync 0;"
            "@%%p %s.shared.u32 [f], 1;"
            "L: %s.shared.u32 %%q, [f]; setp.ne.u32 %%p, %%q, 1; @%%p bra L;" % (st, ld))
    for seed in range(3):
        _tiny(body.replace("%%", "%"), regs=".reg .u64 %a, %b; .reg .u32 %r, %q; .reg .pred %p; "
              ".shared .align 4 .u32 f;", block=8, seed=seed)


def _tiny(body, regs=".reg .u64 %a, %b; .reg .u32 %r, %q; .reg .pred %p;", grid=1, block=4,
          params=(0x1000,), setup=None, max_steps=100000, **mk):
    src = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry k(.param .u64 x)
{
    %s
    ld.param.u64 %%a, [x];
    %s
    ret;
}
""" % (regs, body)
    m = Machine(**mk)
    m.mem.alloc(0x1000, 64, "buf", data=bytes(range(64)))
    m.mem.alloc(0x1000 + 64, 16, "guard", noaccess=True)
    k = Module(src, "<tiny>").kernel("k")
    m.launch(k, grid, block, list(params))
    m.run(max_steps=max_steps)
    return m


def machine_tests(quick, verbose):
    ck = Checker(verbose)
    print("-- machine: shared memory, barriers, atomics, error checks", flush=True)
    x = np.arange(1, 65, dtype=np.uint32) * 3
    for seed in range(3):
        m = Machine(seed=seed)
        m.mem.alloc(0x2000, 256, "x", data=x.tobytes())
        out = np.array([100, 0, 1, 3], dtype=np.uint32)
        m.mem.alloc(0x4000, 16, "out", data=out.tobytes())
        k = Module(_BLOCK_SUM % "bar.sync 0;", "<blocksum>").kernel("blocksum")
        m.launch(k, 2, 64, [0x4000, 0x2000])
        m.run()
        got = np.frombuffer(m.mem.read(0x4000, 16), dtype=np.uint32)
        # both blocks add their sum; cas 0 -> 7 succeeds once; exch -> 9; max(3, -5) = 3
        ck.check("shared-memory tree sum + atomics (seed %d)" % seed, got.astype(np.uint64),
                 np.array([100 + 2 * int(x.sum()), 7, 9, 3], dtype=np.uint64))
    _expect_error(ck, "tree sum without the first barrier",
                  lambda: _run_blocksum(""), ("RaceError", "MemoryFault"))
    # a flag between threads of a block without a barrier: a data race
    # unless both the store and the load are strong (morally strong, PTX
    # memory model), as in a kernel's shared `bail` word
    _expect_ok(ck, "shared flag: st.volatile / ld.volatile spin, no barrier",
               lambda: _shared_flag("st.volatile", "ld.volatile"))
    _expect_ok(ck, "shared flag: st.relaxed.cta / ld.acquire.cta",
               lambda: _shared_flag("st.relaxed.cta", "ld.acquire.cta"))
    _expect_error(ck, "shared flag: plain st, volatile spin", lambda: _shared_flag("st", "ld.volatile"),
                  "RaceError")
    _expect_error(ck, "shared flag: volatile st, plain ld spin",
                  lambda: _shared_flag("st.volatile", "ld"), "RaceError")
    _expect_error(ck, "load outside the allocations",
                  lambda: _tiny("ld.global.u32 %r, [%a+-4];"), "MemoryFault", "outside every allocation")
    _expect_error(ck, "load of a guard zone",
                  lambda: _tiny("ld.global.u32 %r, [%a+64];"), "MemoryFault", "guard")
    _expect_error(ck, "misaligned vector load",
                  lambda: _tiny("ld.global.v2.u32 {%r, %q}, [%a+4];"), "MemoryFault", "misaligned")
    _expect_error(ck, "uninitialized register",
                  lambda: _tiny("add.u64 %a, %a, %b;"), "UninitializedRegister", "%b")
    _expect_error(ck, "unknown instruction",
                  lambda: _tiny("frobnicate.u32 %r, %q;"), "PtxUnsupported", "frobnicate")
    _expect_error(ck, "unknown modifier",
                  lambda: _tiny("ld.global.zz.u32 %r, [%a];"), "PtxUnsupported", ".zz")
    _expect_error(ck, "syntax error",
                  lambda: _tiny("add.u32 %r, %q %q;"), "PtxSyntaxError", "<tiny>:9:")
    _expect_error(ck, "trap", lambda: _tiny("trap;"), "Trap")
    _expect_error(ck, "integer division by zero",
                  lambda: _tiny("mov.u32 %q, 0; div.u32 %r, %q, %q;"), "ArithmeticFault")
    _expect_error(ck, "thread exits while the others wait at bar.sync",
                  lambda: _tiny("mov.u32 %r, %tid.x; setp.eq.u32 %p, %r, 0; @%p ret; bar.sync 0;"),
                  "BarrierError")
    _expect_error(ck, "two barrier ids: deadlock",
                  lambda: _tiny("mov.u32 %r, %tid.x; and.b32 %r, %r, 1; bar.sync %r;"), "Deadlock")
    _expect_error(ck, "aligned bar.sync at two different instructions",
                  lambda: _tiny("mov.u32 %r, %tid.x; setp.eq.u32 %p, %r, 0; @%p bra L; bar.sync 0;"
                                "bra.uni E; L: bar.sync 0; E:"), "BarrierError", "different instructions")
    _expect_error(ck, "endless spin hits the step limit",
                  lambda: _tiny("L: ld.volatile.global.u32 %r, [%a]; setp.ne.u32 %p, %r, 77; @%p bra L;",
                                max_steps=5000), "StepLimit")
    return ck


def _run_blocksum(extra):
    for seed in range(6):
        m = Machine(seed=seed, quantum=3)
        m.mem.alloc(0x2000, 256, "x", data=(np.arange(64, dtype=np.uint32)).tobytes())
        m.mem.alloc(0x4000, 16, "out", data=bytes(16))
        k = Module(_BLOCK_SUM % extra, "<blocksum>").kernel("blocksum")
        m.launch(k, 1, 64, [0x4000, 0x2000])
        m.run()


# ---------------------------------------------------------------------------
# 2. mutation tests

def _mutate(src, old, new, occurrence=None, count=None):
    n = src.count(old)
    if n == 0 or (count is not None and n != count):
        raise AssertionError("mutation pattern found %d times: %r" % (n, old))
    if occurrence is None:
        return src.replace(old, new)
    parts = src.split(old)
    return old.join(parts[:occurrence + 1]) + new + old.join(parts[occurrence + 1:])


def _fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


RED = "reduce_f32_v1.ptx"
EXC = "exchange_f32_v1.ptx"
V2 = "reduce_f32_v2.ptx"
RLL = "ringll_f32_v2.ptx"
ORIGINALS = []

MUTATIONS = [
    # (label, fixture, old, new, occurrence, what must catch it)
    ("tail loop runs one element too far (setp.ge -> setp.gt)", RED,
     "TAIL_LOOP:\n    setp.ge.u64         %p_done, %rd_i, %rd_n;",
     "TAIL_LOOP:\n    setp.gt.u64         %p_done, %rd_i, %rd_n;", None, "fault"),
    ("wrong offset: the tail reads b at a's address", RED,
     "add.u64             %rd_pb, %rd_b,   %rd_off;",
     "add.u64             %rd_pb, %rd_a,   %rd_off;", 1, "data"),
    ("wrong vector stride between a thread's 4 vectors", RED,
     "shl.b64             %rd_sbytes,  %rd_stride, 4;",
     "shl.b64             %rd_sbytes,  %rd_stride, 3;", None, "any"),
    ("head not clamped to n", RED,
     "    min.u64             %rd_h, %rd_h, %rd_n;\n", "", None, "fault"),
    ("x4 loop bound ignores its 4th vector", RED,
     "add.u64             %rd_tmp, %rd_v, %rd_stride3;",
     "add.u64             %rd_tmp, %rd_v, %rd_stride;", None, "fault"),
    ("head length in 8-byte units (misaligned vectors)", RED,
     "shr.u64             %rd_h, %rd_h, 2;",
     "shr.u64             %rd_h, %rd_h, 3;", None, "any"),
    ("tail start not initialized on the scalar path", RED,
     "    mov.u64             %rd_tail, 0;\n", "", None, "fault"),
    ("ld.global.nc on a, which dst aliases in place", RED,
     "ld.global.f32       %f_a, [%rd_pa];", "ld.global.nc.f32    %f_a, [%rd_pa];", 1, "fault"),
    ("bra.uni on a predicate that diverges within a warp", EXC,
     "@%p_done bra        PUSH_TAIL_DONE;", "@%p_done bra.uni    PUSH_TAIL_DONE;", None, "fault"),
    ("trap before ret", RED, "TAIL_DONE:\n    ret;", "TAIL_DONE:\n    trap;\n    ret;", None, "trap"),
    # the generated new-ABI kernels (flags, scalar, ctrl)
    ("premulsum: flags bit 1 read as the pre-on-a bit", (V2, "rr_reduce_premulsum_f32"),
     "and.b64             %rd_tmp, %rd_flags, 1;", "and.b64             %rd_tmp, %rd_flags, 2;",
     None, "data"),
    ("premulsum: the exchange applies pre to b with the a flag", (V2, "rr_exchange_premulsum_f32"),
     "and.b64             %rd_tmp, %rd_flags, 2;", "and.b64             %rd_tmp, %rd_flags, 1;",
     None, "data"),
    ("exchange: a timeout reports status 2 (abort)", (V2, "rr_exchange_sum_f32"),
     "mov.u32             %r_status, 1;", "mov.u32             %r_status, 2;", None, "any"),
    ("exchange: abort never read", (V2, "rr_exchange_max_f32"),
     "ld.relaxed.sys.global.u32 %r_tmp, [%rd_ctrl];", "mov.u32             %r_tmp, 0;", None, "any"),
    ("exchange: reduces even after bailing out", (V2, "rr_exchange_min_f32"),
     "@%p_done bra.uni    EXIT;", "", None, "any"),
    ("exchange: the bail verdict is never initialized", (V2, "rr_exchange_prod_f32"),
     "st.shared.u32       [bail], 0;", "", None, "fault"),
    ("exchange: no barrier between the push and the signal", EXC,
     "    bar.sync            0;\n    @%p_t0 st.release", "    @%p_t0 st.release", None, "any"),
    ("exchange: no barrier after thread 0's wait", EXC,
     "WAIT_DONE:\n    bar.sync            0;", "WAIT_DONE:", None, "any"),
    ("exchange: a stale flag of the previous call passes the wait", EXC,
     "setp.ge.s64         %p_done, %rd_tmp, 0;", "setp.ge.s64         %p_done, %rd_tmp, -1;", None,
     "any"),
    ("exchange: reduce reads the peer's slot instead of its own", EXC,
     "add.u64             %rd_p1, %rd_ms,  %rd_off;",
     "add.u64             %rd_p1, %rd_ps,  %rd_off;", None, "any"),
    ("exchange: the flag is published with a plain st (no release)", EXC,
     "@%p_t0 st.release.sys.global.u64 [%rd_pf], %rd_seq;", "@%p_t0 st.global.u64 [%rd_pf], %rd_seq;",
     None, "fault"),
    ("exchange: the flag is polled with a plain ld (no acquire)", EXC,
     "ld.acquire.sys.global.u64 %rd_flag, [%rd_mf];", "ld.global.u64 %rd_flag, [%rd_mf];",
     None, "fault"),
    ("exchange: the flag is released at .gpu scope (the peer GPU needs .sys)", EXC,
     "@%p_t0 st.release.sys.global.u64 [%rd_pf], %rd_seq;",
     "@%p_t0 st.release.gpu.global.u64 [%rd_pf], %rd_seq;", None, "fault"),
    ("exchange: block ranges not rounded to 4 elements", EXC,
     "    and.b64             %rd_chunk, %rd_chunk, 0xFFFFFFFFFFFFFFFC;\n", "", None, "any"),
    # the ring all-reduce in one kernel per rank, LL protocol
    ("ringll: the poll takes any nonzero flag (a stale line)", RLL,
     "setp.eq.u32         %p_tmp, %r_f0, %r_seq;\n    setp.eq.and.u32     %p_done, %r_f1, %r_seq, %p_tmp;",
     "setp.ne.u32         %p_tmp, %r_f0, 0;\n    setp.ne.and.u32     %p_done, %r_f1, 0, %p_tmp;",
     None, "data"),
    ("ringll: block 0 does not count the launch for absent blocks", RLL,
     "    st.global.u64       [%rd_p0], %rd_tmp;\n    add.u64             %rd_p0, %rd_p0, 8;",
     "    add.u64             %rd_p0, %rd_p0, 8;", None, "any"),
    ("ringll: one line per slot too many (past the LL half)", RLL,
     "add.u64             %rd_LS, %rd_LS, 7;", "add.u64             %rd_LS, %rd_LS, 15;", None, "fault"),
    ("ringll: forwards into slot k instead of k+1", RLL,
     "    add.u64             %rd_pp, %rd_pp, %rd_LS;\n", "", None, "any"),
    ("ringll: the last chunk does not take the sub-unit tail", RLL,
     "    mov.u64             %rd_cl, %rd_n;                  // the last chunk ends at n\nST_END:",
     "    mul.lo.u64 %rd_cl, %rd_N, %rd_B;\n    add.u64 %rd_cl, %rd_cl, %rd_E;\n"
     "    mul.lo.u64 %rd_cl, %rd_cl, %rd_M;\nST_END:", None, "data"),
    ("ringll: calls[] never stored (every call has seq 1)", RLL,
     "    st.global.u64       [%rd_p0], %rd_tmp;\n    st.shared.u64", "    st.shared.u64", None,
     "any"),
    ("ringll: step 0 puts into its own LL half", RLL,
     "mov.u64             %rd_ps, %rd_pl;", "mov.u64             %rd_ps, %rd_ml;", None, "any"),
    ("ringll: no barrier after thread 0 takes the seq", RLL,
     "SEQ_DONE:\n    bar.sync            0;", "SEQ_DONE:", None, "fault"),
    ("ringll: the 8-byte fast path at 4-byte alignment", RLL,
     "and.b64             %rd_tmp, %rd_tmp, 7;\n    setp.eq.and.u64     %p_fast, %rd_tmp, 0, %p_fast;   "
     "// and aligned\n    @!%p_fast bra       SLOW;",
     "and.b64             %rd_tmp, %rd_tmp, 3;\n    setp.eq.and.u64     %p_fast, %rd_tmp, 0, %p_fast;   "
     "// and aligned\n    @!%p_fast bra       SLOW;", None, "fault"),
    ("ringll: a timeout reports status 2 (abort)", RLL,
     "mov.u32             %r_status, 1;", "mov.u32             %r_status, 2;", None, "any"),
    ("ringll: abort never read", RLL,
     "ld.relaxed.sys.global.u32 %r_tmp, [%rd_ctrl];", "mov.u32             %r_tmp, 0;", None, "any"),
    ("ringll: reduces at the first all-gather step too", RLL,
     "setp.lt.u64         %p_rs, %rd_k, %rd_tmp;", "setp.le.u64         %p_rs, %rd_k, %rd_tmp;",
     None, "data"),
    ("ringll: the all-gather skips its last step", RLL,
     "    sub.u64             %rd_K, %rd_K, 2;", "    sub.u64             %rd_K, %rd_K, 3;", None,
     "data"),
    ("ringll: lines published with a plain st", RLL,
     "st.relaxed.sys.global.v2.u64 [%rd_tmp], {%rd_w0, %rd_w1};",
     "st.global.v2.u64    [%rd_tmp], {%rd_w0, %rd_w1};", None, "fault"),
    ("ringll: lines polled with a plain ld", RLL,
     "ld.relaxed.sys.global.v2.u64 {%rd_w0, %rd_w1}, [%rd_p0];",
     "ld.global.v2.u64    {%rd_w0, %rd_w1}, [%rd_p0];", None, "fault"),
    ("ringll: the slow path forwards the received line, not the result", RLL,
     "SLOW_DONE:\n    ld.shared.v2.b32    {%r_x0, %r_x1}, [%r_str];",
     "SLOW_DONE:\n    ld.shared.v2.b32    {%r_x0, %r_x1}, [%r_stb];", None, "data"),
    ("ringll: the bail flag raised with a plain st.shared", RLL,
     "st.volatile.shared.u32 [bail], 1;", "st.shared.u32       [bail], 1;", None, "fault"),
]


def _run_fixture(src, fname, quick, stop_at_first=True, seeds=(0,), name=None):
    """Run the kernel tests of one kernel of a fixture source (default: its
    first entry); returns (results, kernel name)."""
    mod = Module(src, fname)
    name = name or mod.entry_names[0]
    info = kt.classify(mod, name)
    assert not isinstance(info, str), info
    results = []
    for s in seeds:
        if info.family == "reduce":
            cases = kt.reduce_cases(info, "quick", s)
            runner = kt.run_reduce
        elif info.family == "ringll":
            cases = kt.ringll_cases(info, "quick", s)

            def runner(info, c):
                # the originals need ~150k steps: a hang is found sooner
                return kt.run_ringll(info, c, max_steps=1_500_000)
        else:
            cases = kt.exchange_cases(info, "quick", s)
            # more threads per block so that some lag behind the others
            for c in cases:
                c.block = max(c.block, 6)
            runner = kt.run_exchange
        for c in cases:
            r = runner(info, c)
            results.append(r)
            if not r.ok and stop_at_first:
                return results, name
        if info.family in ("exchange", "ringll"):
            fault = kt.run_exchange_fault if info.family == "exchange" else kt.run_ringll_fault
            for kind in (["trap"] if info.abi == "old" else ["timeout", "abort", "forever"]):
                r = fault(info, kind, seed=s)
                results.append(r)
                if not r.ok and stop_at_first:
                    return results, name
    return results, name


def mutation_tests(quick, verbose):
    print("-- mutation tests (broken kernels must fail, originals must pass)", flush=True)
    failures = []
    seeds = (0, 1) if quick else (0, 1, 2, 3)
    originals = [(RED, None), (EXC, None), (RLL, None)] + sorted({m[1] for m in MUTATIONS if isinstance(m[1], tuple)})
    ORIGINALS[:] = originals
    for fname, kname in originals:
        src = _fixture(fname)
        res, name = _run_fixture(src, fname, quick, stop_at_first=False, seeds=seeds[:1], name=kname)
        bad = [r for r in res if not r.ok]
        if bad:
            failures.append("unmodified %s %s fails: %s: %s" % (fname, name, bad[0].label, bad[0].msg))
            print("  FAIL %s" % failures[-1], flush=True)
        elif verbose:
            print("  ok   unmodified %s %s passes %d cases" % (fname, name, len(res)), flush=True)
    for label, fname, old, new, occ, want in MUTATIONS:
        kname = None
        if isinstance(fname, tuple):
            fname, kname = fname
        src = _mutate(_fixture(fname), old, new, occ)
        try:
            res, name = _run_fixture(src, fname, quick, seeds=seeds, name=kname)
        except PtxError as e:
            res = [kt.CaseResult(False, "compile", str(e))]
        bad = [r for r in res if not r.ok]
        if not bad:
            failures.append("NOT CAUGHT: %s (%d cases passed)" % (label, len(res)))
            print("  FAIL %s" % failures[-1], flush=True)
            continue
        msg = bad[0].msg
        kind = ("trap" if msg.startswith("Trap") else
                "fault" if msg.split(":")[0] in ("MemoryFault", "UninitializedRegister", "RaceError",
                                                  "BarrierError", "Deadlock", "StepLimit",
                                                  "DivergenceError", "SyncError")
                else "data")
        if want != "any" and kind != want:
            failures.append("%s: caught, but as %s, expected %s: %s" % (label, kind, want, msg[:200]))
            print("  FAIL %s" % failures[-1], flush=True)
            continue
        if verbose:
            print("  ok   caught: %s\n         by %s -> %s" % (label, bad[0].label, msg.split("\n")[0][:160]),
                  flush=True)
        else:
            print("  ok   caught: %s (%s)" % (label, msg.split(":")[0] if kind != "data" else "wrong data"),
                  flush=True)
    return failures


# ---------------------------------------------------------------------------

def run(quick=True, verbose=False):
    t0 = time.time()
    ck = instruction_tests(quick, verbose)
    print("  %d instruction checks, %d failed (%.1f s)" % (ck.count, len(ck.failures), time.time() - t0),
          flush=True)
    mk = machine_tests(quick, verbose)
    print("  %d machine checks, %d failed" % (mk.count, len(mk.failures)), flush=True)
    t1 = time.time()
    mf = mutation_tests(quick, verbose)
    print("  %d mutation checks, %d failed (%.1f s)" % (len(MUTATIONS) + len(ORIGINALS), len(mf), time.time() - t1),
          flush=True)
    return not ck.failures and not mk.failures and not mf


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    ok = run(quick=not a.full, verbose=a.verbose)
    print("self-test %s" % ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
