"""Test cases for ringreduce's reduce and exchange kernels, run on the emulator
and checked bitwise against ptxemu.reference.

Kernel ABIs, told apart by the parameter list:
  reduce   (dst, a, b, n)                                   old f32 sum
  reduce   (dst, a, b, n, flags, scalar)                    rr_reduce_<op>_<sfx>
  exchange (dst, a, peer_slot, my_slot, peer_flags, my_flags, calls, n)
                                                            old f32 sum, traps on timeout
  exchange (... , n, flags, scalar, ctrl)                   rr_exchange_<op>_<sfx>
  ringll   (dst, a, my_ll, peer_ll, calls, n, ranks, rank, flags, scalar, ctrl)
                                                            the first LL kernels
  ringll   (..., ctrl, stamps)                              rr_ringll_<op>_<sfx>

Memory layout: every buffer is its own allocation, placed so that its address
has the wanted offset modulo 16, with a 32-byte no-access guard zone right
before and right after it (any access there, or anywhere outside the
allocations, is a fault).  An out-of-place dst starts *poisoned*: reading it
is a fault, and the test checks that every element got written.  dst (and a
when in place) track writers, so two threads of a launch writing the same
element, or reading an element another thread wrote, is a reported race.
"""

import re
import zlib

import numpy as np
import ml_dtypes

from .machine import Machine
from .errors import PtxError, StepLimit, Trap
from .reference import TYPES, OPS, reduce_ref, compare, decode_vals

REDUCE_OLD = ["dst", "a", "b", "n"]
REDUCE_NEW = ["dst", "a", "b", "n", "flags", "scalar"]
EXCH_OLD = ["dst", "a", "peer_slot", "my_slot", "peer_flags", "my_flags", "calls", "n"]
EXCH_NEW = EXCH_OLD + ["flags", "scalar", "ctrl"]
RINGLL = ["dst", "a", "my_ll", "peer_ll", "calls", "n", "ranks", "rank", "flags", "scalar",
          "ctrl"]
RINGSIMPLE = ["dst", "a", "my_slots", "peer_slots", "my_flags", "peer_flags", "calls", "n",
              "ranks", "rank", "flags", "scalar", "ctrl", "stamps"]
# The tile flags a rank keeps (gen_ptx.py SIMPLE_MAX_TILES).
SIMPLE_MAX_TILES = 1024

NAME_RE = re.compile(r"^rr_(reduce|exchange|ringll|ringsimple)_([a-z0-9]+)_([a-z0-9]+)$")

GUARD = 32


class KernelInfo:
    def __init__(self, module, name, family, op, sfx, abi):
        self.module = module
        self.name = name
        self.family = family     # "reduce" | "exchange" | "ringll" | "ringsimple"
        self.op = op
        self.sfx = sfx
        self.abi = abi           # "old" | "new"

    @property
    def kernel(self):
        return self.module.kernel(self.name)


def classify(module, name):
    """KernelInfo for an entry, or a string saying why it is not testable."""
    m = NAME_RE.match(name)
    if not m:
        return ("entry %s: name is not rr_reduce_<op>_<type> / rr_exchange_<op>_<type> / "
                "rr_ringll_<op>_<type> / rr_ringsimple_<op>_<type>" % name)
    family, op, sfx = m.groups()
    if sfx not in TYPES:
        return "entry %s: unknown element type %r" % (name, sfx)
    if op not in OPS[sfx]:
        return "entry %s: op %r is not defined for %s" % (name, op, sfx)
    params = module.entry(name).param_names()
    ptypes = [p[1] for p in module.entry(name).params]
    if any(t not in ("u64", "b64", "s64") for t in ptypes):
        return "entry %s: expected only 64-bit parameters, got %s" % (name, ptypes)
    if family == "reduce":
        if params == REDUCE_NEW:
            return KernelInfo(module, name, family, op, sfx, "new")
        if params == REDUCE_OLD and op == "sum":
            return KernelInfo(module, name, family, op, sfx, "old")
    elif family == "ringll":
        if params in (RINGLL, RINGLL + ["stamps"]):
            return KernelInfo(module, name, family, op, sfx, "new")
    elif family == "ringsimple":
        if params == RINGSIMPLE:
            return KernelInfo(module, name, family, op, sfx, "new")
    else:
        if params == EXCH_NEW:
            return KernelInfo(module, name, family, op, sfx, "new")
        if params == EXCH_OLD and op == "sum":
            return KernelInfo(module, name, family, op, sfx, "old")
    return "entry %s: unknown parameter list (%s)" % (name, ", ".join(params))


# ---------------------------------------------------------------------------
# input values

def _float_specials(ti):
    if ti.kind == "int":
        return []
    fi = ml_dtypes.finfo(ti.dtype) if ti.dtype not in (np.float16, np.float32, np.float64) \
        else np.finfo(ti.dtype)
    vals = [0.0, -0.0, float(fi.max), -float(fi.max), float(fi.smallest_subnormal),
            -float(fi.smallest_subnormal), float(fi.smallest_normal), 1.0, -1.0, 0.5,
            float("nan")]
    if ti.sfx != "e4m3":
        vals += [float("inf"), float("-inf")]
    return vals


def gen_values(ti, n, rng, special=0.15, small=False):
    """n random elements of type ti as unsigned bit patterns."""
    with np.errstate(all="ignore"):
        return _gen_values(ti, n, rng, special, small)


def _gen_values(ti, n, rng, special, small):
    if n == 0:
        return np.zeros(0, dtype=ti.udtype)
    if ti.kind == "int":
        full = rng.integers(0, 1 << ti.bits, size=n, dtype=np.uint64).astype(ti.udtype) \
            if ti.bits < 64 else rng.integers(0, 2**63, size=n, dtype=np.uint64) * 2 + \
            rng.integers(0, 2, size=n, dtype=np.uint64)
        smallv = rng.integers(-20, 21, size=n).astype(np.int64).astype(ti.dtype).view(ti.udtype)
        lo = np.iinfo(ti.dtype).min
        hi = np.iinfo(ti.dtype).max
        specs = np.array([0, 1, hi, lo, hi - 1, lo + 1] + ([-1, -2] if ti.signed else [2, 3]),
                         dtype=object)
        specs = np.array([int(v) for v in specs], dtype=np.int64 if ti.signed else np.uint64) \
            .astype(ti.dtype).view(ti.udtype)
        pick = rng.random(n)
        out = np.where(pick < 0.45, full, smallv)
        sp = rng.random(n) < special
        out = np.where(sp, specs[rng.integers(0, len(specs), size=n)], out)
        return out.astype(ti.udtype)
    # floats: mostly moderate values, some specials
    mag = rng.uniform(-4, 4, size=n) * np.exp2(rng.integers(-6, 6, size=n))
    if small:
        mag = rng.uniform(-2, 2, size=n)
    vals = mag.astype(np.float32).astype(ti.dtype)
    specs = np.array(_float_specials(ti), dtype=np.float64).astype(np.float32).astype(ti.dtype)
    sp = rng.random(n) < special
    vals = np.where(sp, specs[rng.integers(0, len(specs), size=n)], vals).astype(ti.dtype)
    bits = vals.view(ti.udtype).copy()
    # signaling NaNs (quiet bit clear) and NaNs with payloads and sign
    snan = {"f16": [0x7C01, 0xFD55], "bf16": [0x7F81, 0xFFA0], "f32": [0x7F800001, 0xFFA12345],
            "f64": [0x7FF0000000000001, 0xFFF4000000000000], "e5m2": [0x7D, 0xFE],
            "e4m3": [0xFF, 0x7F]}[ti.sfx]
    sn = rng.random(n) < special / 6
    bits = np.where(sn, np.array(snan, dtype=ti.udtype)[rng.integers(0, 2, size=n)], bits)
    # some fully random bit patterns (all encodings, NaN payloads included)
    rb = rng.random(n) < 0.08
    rnd = rng.integers(0, 1 << min(ti.bits, 63), size=n, dtype=np.uint64).astype(ti.udtype)
    return np.where(rb, rnd, bits).astype(ti.udtype)


def gen_scalar(ti, op, rng, k=0):
    """The `scalar` parameter: premulsum -> bits of a multiplier in the element
    type; sumpostdiv -> the divisor N >= 1."""
    if op == "sumpostdiv":
        choices = [1, 2, 3, 4, 5, 7, 8, 10, 127, 128, 255, 256, 1000, 65535, 65536, 65537,
                   (1 << 31) - 1, 1 << 31, (1 << 32) + 1, (1 << 63) + 5]
        return choices[k % len(choices)] if k >= 0 else int(rng.choice(choices))
    if op == "premulsum":
        return _premul_scalar(ti, rng, k)
    return 0


def _premul_scalar(ti, rng, k):
    with np.errstate(all="ignore"):
        fi = np.finfo(ti.dtype) if ti.dtype in (np.float16, np.float32, np.float64) \
            else ml_dtypes.finfo(ti.dtype)
        tiny = 3 * float(fi.smallest_subnormal)            # a subnormal multiplier
        vals = [0.5, 3.0, -1.25, 1.0 / 3.0, 0.1, -7.5, 1e-3, 2.0, 0.0, -0.0, tiny, float("nan")]
        if ti.kind != "fp8":
            vals += [float("inf"), 1e30]
        x = vals[k % len(vals)]
        if ti.dtype == np.float64:
            v = np.array([x], dtype=np.float64)
        elif ti.kind == "fp8":
            mx = float(fi.max)
            v = np.clip(np.array([x], np.float32), -mx, mx).astype(ti.dtype)
        else:
            v = np.array([x], dtype=np.float64).astype(np.float32).astype(ti.dtype)
        return int(v.view(ti.udtype)[0])


# ---------------------------------------------------------------------------
# buffers

class Buffers:
    """Allocates buffers at chosen offsets mod 16 with guard zones."""

    def __init__(self, m, base=0x10_0000_0000):
        self.m = m
        self.next = base

    def place(self, name, nbytes, off16=0, data=None, poison=False, track=False):
        region = self.next
        self.next += ((nbytes + 256 + 4095) // 4096) * 4096 + 4096
        start = region + 64 + off16
        mem = self.m.mem
        mem.alloc(start - GUARD, GUARD, "guard before " + name, noaccess=True)
        if nbytes:
            a = mem.alloc(start, nbytes, name, data=None if data is None else bytes(data),
                          poison=poison, track=track)
        mem.alloc(start + nbytes, GUARD, "guard after " + name, noaccess=True)
        return start


def _hex(ti, v):
    return "0x%0*x" % (ti.size * 2, int(v))


def _val(ti, v):
    if ti.kind == "int":
        return str(int(np.array([v], dtype=ti.udtype).view(ti.dtype)[0]))
    return repr(float(np.array([v], dtype=ti.udtype).view(ti.dtype)[0].astype(np.float64)))


def describe_diff(ti, idx, a, b, exp, got, label_b="b"):
    i = int(idx)
    return ("first differing element %d: a=%s (%s) %s=%s (%s) expected %s (%s) got %s (%s)"
            % (i, _hex(ti, a[i]), _val(ti, a[i]), label_b, _hex(ti, b[i]), _val(ti, b[i]),
               _hex(ti, exp[i]), _val(ti, exp[i]), _hex(ti, got[i]), _val(ti, got[i])))


class CaseResult:
    def __init__(self, ok, label, msg="", steps=0, zero_signs=None, lint=None):
        self.ok = ok
        self.label = label
        self.msg = msg
        self.steps = steps
        self.zero_signs = zero_signs or {}


# ---------------------------------------------------------------------------
# reduce

class ReduceCase:
    def __init__(self, n, grid, block, offs=(0, 0, 0), inplace=False, flags=0, scalar=0,
                 seed=0, schedule="random", quantum=8, special=0.15, note="", values=None):
        self.n = n
        self.grid = grid
        self.block = block
        self.offs = offs            # element offsets mod 16 bytes of dst, a, b
        self.inplace = inplace
        self.flags = flags
        self.scalar = scalar
        self.seed = seed
        self.schedule = schedule
        self.quantum = quantum
        self.special = special
        self.note = note
        self.values = values        # None: random; "pairs": every (a, b) byte pair

    def label(self):
        o = "dst=a" if self.inplace else "dst@%d" % self.offs[0]
        return ("%sn=%d grid=%dx%d %s a@%d b@%d flags=%d scalar=0x%x seed=%d %s"
                % (self.note + " " if self.note else "", self.n, self.grid, self.block, o,
                   self.offs[1], self.offs[2], self.flags, self.scalar, self.seed,
                   self.schedule)).strip()


def run_reduce(info, case, max_steps=20_000_000):
    ti = TYPES[info.sfx]
    n = case.n
    rng = np.random.default_rng(case.seed)
    if case.values == "pairs":
        # every (a, b) pair of 8-bit patterns; n = 4 * 65536 puts each pair in
        # each of the 4 byte lanes of a 32-bit word
        i = np.arange(n, dtype=np.uint64)
        p = (i >> 2) if n >= 4 * 65536 else i
        a = (p & 0xFF).astype(ti.udtype)
        b = ((p >> 8) & 0xFF).astype(ti.udtype)
    else:
        a = gen_values(ti, n, rng, case.special)
        b = gen_values(ti, n, rng, case.special)
    flags = case.flags if info.abi == "new" else 0
    scalar = case.scalar if info.abi == "new" else 0
    m = Machine(seed=case.seed, schedule=case.schedule, quantum=case.quantum)
    bufs = Buffers(m)
    nb = n * ti.size
    pa = bufs.place("a", nb, case.offs[1] * ti.size % 16, a.tobytes(), track=case.inplace)
    pb = bufs.place("b", nb, case.offs[2] * ti.size % 16, b.tobytes())
    if case.inplace:
        pd = pa
    else:
        pd = bufs.place("dst", nb, case.offs[0] * ti.size % 16, poison=True, track=True)
    params = [pd, pa, pb, n] + ([flags, scalar] if info.abi == "new" else [])
    label = case.label()
    try:
        k = info.kernel
        m.launch(k, case.grid, case.block, params, name=info.name)
        m.run(max_steps=max_steps)
    except PtxError as e:
        return CaseResult(False, label, "%s: %s" % (type(e).__name__, e), m.steps)
    exp, lenient = reduce_ref(info.sfx, info.op, a, b, flags, scalar)
    if n and not case.inplace and not m.mem.initialized(pd, nb):
        init = m.mem._find_host(pd, nb).init
        first = next(i for i in range(nb) if not init[i]) // ti.size
        return CaseResult(False, label, "dst element %d was never written" % first, m.steps)
    got = np.frombuffer(m.mem.read(pd, nb), dtype=ti.udtype) if n else np.zeros(0, ti.udtype)
    bad, zs = compare(info.sfx, got, exp, lenient)
    if len(bad):
        return CaseResult(False, label, "%d of %d elements differ; %s"
                          % (len(bad), n, describe_diff(ti, bad[0], a, b, exp, got)), m.steps)
    # inputs must be untouched
    if n:
        if not case.inplace and m.mem.read(pa, nb) != a.tobytes():
            return CaseResult(False, label, "input a was modified (out of place)", m.steps)
        if m.mem.read(pb, nb) != b.tobytes():
            return CaseResult(False, label, "input b was modified", m.steps)
    return CaseResult(True, label, "", m.steps, zs)


def reduce_cases(info, mode, seed0=0):
    """The case list for one reduce kernel.  mode: "quick" | "full"."""
    ti = TYPES[info.sfx]
    E = 16 // ti.size                     # elements per 16-byte vector
    cases = []
    seed = [seed0 * 100003 + zlib.crc32(info.name.encode()) % 99991]

    def add(**kw):
        seed[0] += 1
        kw.setdefault("seed", seed[0])
        cases.append(ReduceCase(**kw))

    op = info.op
    has_arg = info.abi == "new" and op in ("premulsum", "sumpostdiv")
    rng = np.random.default_rng(seed[0])

    def fs(k):
        """flags and scalar for the k-th case: every flag combination in turn
        for premulsum / sumpostdiv, else 0 (or garbage, which must be ignored)."""
        if info.abi != "new":
            return 0, 0
        if has_arg:
            return k % 8, gen_scalar(ti, op, rng, k)
        if k % 5 == 4:
            return 7, int(rng.integers(1, 1 << 62))
        return 0, 0

    k = 0
    # 1. tiny n, aligned, a couple of launch shapes
    for n in (0, 1, 2, 3, 5, 7, 13, 31):
        f, s = fs(k); k += 1
        add(n=n, grid=1 if n % 2 else 2, block=32 if n < 8 else 5, flags=f, scalar=s,
            note="tiny")
    # 1b. tiny n below the head length (the head must be clamped to n)
    if E > 1:
        for n in sorted({1, 2, E - 2} - {0}):
            f, s = fs(k); k += 1
            add(n=n, grid=1, block=4, offs=(1, 1, 1), flags=f, scalar=s, note="tiny-head")
    # 2. heads of every length: dst, a, b equal mod 16
    for h in range(1, E):
        f, s = fs(k); k += 1
        add(n=3 * E + 5 + h, grid=2, block=4, offs=(h, h, h), flags=f, scalar=s, note="head")
    # 3. scalar path: offsets differ mod 16
    if E > 1:
        for offs in ((0, 1, 0), (0, 0, 1), (1, 0, 0), (E - 1, 1, E // 2)):
            f, s = fs(k); k += 1
            add(n=2 * E + 7, grid=1, block=8, offs=offs, flags=f, scalar=s, note="scalar-path")
    # 4. in place (dst == a), with and without a head
    for h in (0, E - 1 if E > 1 else 0):
        f, s = fs(k); k += 1
        add(n=5 * E + 3, grid=2, block=8, offs=(h, h, h), inplace=True, flags=f, scalar=s,
            note="in-place")
        if E > 1:
            f, s = fs(k); k += 1
            add(n=5 * E + 3, grid=1, block=8, offs=(h, h, (h + 1) % E), inplace=True, flags=f,
                scalar=s, note="in-place scalar-path")
    # 5. every flag combination (premulsum / sumpostdiv) over a vector body
    if has_arg:
        for fl in range(8):
            s = gen_scalar(ti, op, rng, fl + 3)
            add(n=9 * E + 3, grid=1, block=4, offs=(1 % E, 1 % E, 1 % E), flags=fl, scalar=s,
                note="flags")
        if op == "sumpostdiv":
            for j in range(20):
                add(n=2 * E + 1, grid=1, block=8, flags=4, scalar=gen_scalar(ti, op, rng, j),
                    note="divisor")
            for N in range(1, 41 if mode == "quick" else 301):
                add(n=E + 1, grid=1, block=4, flags=4, scalar=N, special=0.4, note="divisor")
    # 6. the unrolled x4 vector loop with a small grid, plus remainders
    f, s = fs(k); k += 1
    add(n=E * (4 * 4 * 3 + 3) + 2 + 1 % E, grid=1, block=4, offs=(1 % E,) * 3, flags=f, scalar=s,
        note="x4-loop")
    f, s = fs(k); k += 1
    add(n=E * (4 * 64 + 64 + 37) + 3, grid=2, block=32, offs=(0, 0, 0), flags=f, scalar=s,
        note="x4-loop")
    f, s = fs(k); k += 1
    add(n=E * (4 * 12 * 2 + 5) + E - 1, grid=3, block=4, offs=(E - 1,) * 3, inplace=True,
        flags=f, scalar=s, note="x4-loop in-place")
    # 7. round-robin schedule and a real launch shape
    f, s = fs(k); k += 1
    add(n=7 * E + 1, grid=1, block=256, flags=f, scalar=s, schedule="rr", note="rr")
    # 8. mostly special values (NaN, inf, max, subnormals, integer extremes)
    for j in range(2):
        f, s = fs(k); k += 1
        add(n=4 * E + 3, grid=2, block=8, offs=(j % E,) * 3, special=0.6, flags=f, scalar=s,
            note="specials")
    # 8b. 8-bit types: every pair of byte patterns (quick: each pair in one
    # lane; full: each pair in each of the 4 lanes of a word)
    if ti.size == 1:
        f, s = fs(k); k += 1
        if op in ("premulsum", "sumpostdiv"):
            f = 7 if op == "premulsum" else 4
        add(n=65536 if mode == "quick" else 4 * 65536, grid=4, block=64, flags=f, scalar=s,
            values="pairs", note="all-pairs")
    # 9. random shapes, offsets and schedules
    for j in range(4 if mode == "quick" else 16):
        n = int(rng.integers(0, 40 * E))
        offs = tuple(int(x) for x in rng.integers(0, E, size=3)) if j % 2 else \
            (int(rng.integers(0, E)),) * 3
        f, s = fs(k); k += 1
        add(n=n, grid=int(rng.integers(1, 5)), block=int(rng.integers(1, 40)), offs=offs,
            inplace=bool(j % 3 == 0), flags=f, scalar=s, note="random",
            schedule="rr" if j % 4 == 3 else "random", quantum=int(rng.integers(1, 16)))
    if mode == "full":
        f, s = fs(k); k += 1
        add(n=E * (4 * 256 + 100) + 5, grid=2, block=256, offs=(1 % E,) * 3, flags=f, scalar=s,
            note="big")
        for j in range(8):
            f, s = fs(k); k += 1
            add(n=4 * E + 3, grid=2, block=8, special=0.6, flags=f, scalar=s, note="specials")
    return cases


# ---------------------------------------------------------------------------
# exchange

class ExchangeCase:
    def __init__(self, n, grid, block, calls=2, inplace=False, offs=(0, 0, 0), flags=0,
                 scalar=0, seed=0, schedule="random", quantum=8, overlap=True, note="",
                 special=0.15, offs1=None):
        self.n = n
        self.grid = grid
        self.block = block
        self.calls = calls
        self.inplace = inplace
        self.offs = offs            # element offsets mod 16 bytes of dst, a, slots (rank 0)
        self.offs1 = offs1 or offs  # the same for rank 1 (its slots: rank 0's pushes)
        self.flags = flags
        self.scalar = scalar
        self.seed = seed
        self.schedule = schedule
        self.quantum = quantum
        self.overlap = overlap
        self.note = note
        self.special = special

    def label(self):
        offs = str(self.offs) if self.offs1 == self.offs else "%s/%s" % (self.offs, self.offs1)
        return ("%sn=%d grid=%dx%d calls=%d %s offs=%s flags=%d scalar=0x%x seed=%d %s%s"
                % (self.note + " " if self.note else "", self.n, self.grid, self.block,
                   self.calls, "in-place" if self.inplace else "out-of-place", offs,
                   self.flags, self.scalar, self.seed, self.schedule,
                   "" if self.overlap else " serialized")).strip()


class _Rank:
    pass


def _setup_exchange(info, case, m, ti, timeout_ns=0):
    """Buffers of both ranks.  Slots have two halves (the host alternates
    them between consecutive calls, so a call's push never lands in the half
    the peer may still be reducing from)."""
    n = case.n
    nb = n * ti.size
    unit = 16 // ti.size
    stride = -(-n // unit) * unit if n else 0
    bufs = Buffers(m)
    ranks = []
    for r in range(2):
        R = _Rank()
        R.r = r
        offs = case.offs if r == 0 else case.offs1
        R.a = bufs.place("rank%d a" % r, nb, offs[1] * ti.size % 16, bytes(nb),
                         track=case.inplace)
        R.dst = R.a if case.inplace else bufs.place("rank%d dst" % r, nb,
                                                     offs[0] * ti.size % 16,
                                                     poison=True, track=True)
        soff = offs[2] * ti.size % 16
        R.slots = [bufs.place("rank%d slot%d" % (r, h), nb, soff, poison=True) for h in range(2)]
        R.flags = bufs.place("rank%d flags" % r, 8 * case.grid, 0, bytes(8 * case.grid))
        R.calls = bufs.place("rank%d calls" % r, 8 * case.grid, 0, bytes(8 * case.grid))
        R.ctrl = bufs.place("rank%d ctrl" % r, 16, 0,
                            bytes(8) + int(timeout_ns).to_bytes(8, "little"))
        R.stride = stride
        ranks.append(R)
    return ranks


def _exchange_params(info, R, P, k, n, flags, scalar):
    h = k % 2
    p = [R.dst, R.a, P.slots[h], R.slots[h], P.flags, R.flags, R.calls, n]
    if info.abi == "new":
        p += [flags, scalar, R.ctrl]
    return p


def run_exchange(info, case, max_steps=30_000_000):
    """Both ranks, `case.calls` consecutive calls.  With overlap, each rank
    launches its next call as soon as its previous one finished (its own
    stream), while the other rank may still be in the previous call."""
    ti = TYPES[info.sfx]
    n = case.n
    nb = n * ti.size
    rng = np.random.default_rng(case.seed)
    flags = case.flags if info.abi == "new" else 0
    scalar = case.scalar if info.abi == "new" else 0
    inputs = [[gen_values(ti, n, rng, case.special) for _ in range(2)] for _ in range(case.calls)]
    m = Machine(seed=case.seed, schedule=case.schedule, quantum=case.quantum)
    ranks = _setup_exchange(info, case, m, ti)
    label = case.label()
    k_ = info.kernel
    state = {"next": [0, 0], "err": None}
    results = {}

    def launch(r):
        k = state["next"][r]
        R, P = ranks[r], ranks[1 - r]
        if n:
            m.mem.write(R.a, inputs[k][r].tobytes())
            if not case.inplace:
                m.mem.poison(R.dst, nb)
            # the half this rank pushes into: nobody may read it before the push
            m.mem.poison(P.slots[k % 2], nb)
        g = m.launch(k_, case.grid, case.block,
                     _exchange_params(info, R, P, k, n, flags, scalar),
                     name="rank%d call%d" % (r, k))
        g.rank = r
        g.call = k
        state["next"][r] = k + 1

    def done(g):
        r, k = g.rank, g.call
        R = ranks[r]
        if n and not case.inplace and not m.mem.initialized(R.dst, nb):
            results[(r, k)] = "rank %d call %d: dst not fully written" % (r, k)
        else:
            results[(r, k)] = np.frombuffer(m.mem.read(R.dst, nb), dtype=ti.udtype).copy() \
                if n else np.zeros(0, ti.udtype)
        if case.overlap and state["next"][r] < case.calls:
            launch(r)

    m.on_grid_done = done
    try:
        if case.overlap:
            launch(0)
            launch(1)
            m.run(max_steps=max_steps)
        else:
            for _ in range(case.calls):
                launch(0)
                launch(1)
                m.run(max_steps=max_steps)
    except PtxError as e:
        return CaseResult(False, label, "%s: %s" % (type(e).__name__, e), m.steps)
    for k in range(case.calls):
        for r in range(2):
            got = results.get((r, k))
            if got is None:
                return CaseResult(False, label, "rank %d call %d did not finish" % (r, k), m.steps)
            if isinstance(got, str):
                return CaseResult(False, label, got, m.steps)
            a, b = inputs[k][r], inputs[k][1 - r]
            exp, lenient = reduce_ref(info.sfx, info.op, a, b, flags, scalar)
            bad, zs = compare(info.sfx, got, exp, lenient)
            if len(bad):
                return CaseResult(False, label, "rank %d call %d: %d of %d elements differ; %s"
                                  % (r, k, len(bad), n,
                                     describe_diff(ti, bad[0], a, b, exp, got, "peer a")),
                                  m.steps)
    for r in range(2):
        R = ranks[r]
        if not case.inplace and n and m.mem.read(R.a, nb) != inputs[-1][r].tobytes():
            return CaseResult(False, label, "rank %d: input a modified (out of place)" % r, m.steps)
        bad = _after_calls(m, R, r, case, label, status=info.abi == "new")
        if bad:
            return bad
    return CaseResult(True, label, "", m.steps, zs)


def _after_calls(m, R, r, case, label, status=True):
    """A failed CaseResult if rank r's status word was written (when the ABI
    has one) or its per-block call counts are not case.calls; else None."""
    if status and m.mem.read(R.ctrl + 4, 4) != bytes(4):
        return CaseResult(False, label, "rank %d: status written on success" % r, m.steps)
    calls = np.frombuffer(m.mem.read(R.calls, 8 * case.grid), dtype=np.uint64)
    if not np.all(calls == case.calls):
        return CaseResult(False, label, "rank %d: calls[] = %s after %d calls"
                          % (r, calls.tolist(), case.calls), m.steps)
    return None


def run_exchange_fault(info, kind, seed=1, n=37, grid=2, block=8):
    """Fault paths with only rank 0 launched (the peer never comes):
      timeout: timeout_ns set -> status 1, dst unchanged, no trap
      abort:   the host sets abort while rank 0 waits -> status 2
      forever: timeout 0, no abort -> still waiting when the step budget ends
      trap:    old ABI: traps after its built-in 10 s deadline (fake clock)"""
    ti = TYPES[info.sfx]
    case = ExchangeCase(n=n, grid=grid, block=block, calls=1, seed=seed)
    label = "fault:%s n=%d grid=%dx%d" % (kind, n, grid, block)
    nb = n * ti.size
    rng = np.random.default_rng(seed)
    a = gen_values(ti, n, rng)
    if kind == "trap":
        m = Machine(seed=seed, ns_per_step=200_000)     # 10 s = 50k steps
    else:
        m = Machine(seed=seed, ns_per_step=10)
    timeout = 200_000 if kind == "timeout" else 0
    ranks = _setup_exchange(info, case, m, ti, timeout_ns=timeout)
    R, P = ranks
    m.mem.write(R.a, a.tobytes())
    before = np.arange(n, dtype=np.uint64).astype(ti.udtype) ^ ti.udtype.type(0x5A)
    m.mem.write(R.dst, before.tobytes())
    # a valid scalar (sumpostdiv: N >= 1 even with the post flag clear)
    scalar = gen_scalar(ti, info.op, rng, 1)
    params = _exchange_params(info, R, P, 0, n, 0, scalar)
    m.launch(info.kernel, grid, block, params, name="rank0 alone")
    try:
        if kind == "trap":
            try:
                m.run(max_steps=5_000_000)
            except Trap:
                return CaseResult(True, label, "trapped as documented")
            return CaseResult(False, label, "finished without trapping although the peer never came")
        if kind == "timeout":
            # 200 us of fake time = 20k steps; give it 25 times that
            m.run(max_steps=500_000)
        elif kind == "abort":
            fin = m.run(max_steps=30_000, raise_on_limit=False)
            if fin:
                return CaseResult(False, label, "returned before the host set abort")
            m.mem.write(R.ctrl, (1).to_bytes(4, "little"))
            m.run(max_steps=300_000)
        elif kind == "forever":
            try:
                m.run(max_steps=300_000)
            except StepLimit:
                st = int.from_bytes(m.mem.read(R.ctrl + 4, 4), "little")
                if st != 0:
                    return CaseResult(False, label, "status %d written while still waiting" % st)
                return CaseResult(True, label, "still waiting after 300k steps (%.1f ms of fake time)"
                                  % (m.steps * m.ns_per_step / 1e6))
            return CaseResult(False, label, "gave up with timeout_ns = 0 and no abort")
    except PtxError as e:
        return CaseResult(False, label, "%s: %s" % (type(e).__name__, e), m.steps)
    st = int.from_bytes(m.mem.read(R.ctrl + 4, 4), "little")
    want = 1 if kind == "timeout" else 2
    if st != want:
        return CaseResult(False, label, "status %d, expected %d" % (st, want), m.steps)
    if m.mem.read(R.dst, nb) != before.tobytes():
        return CaseResult(False, label, "dst was modified although the call failed", m.steps)
    return CaseResult(True, label, "status %d, dst unchanged" % st, m.steps)


def exchange_cases(info, mode, seed0=0):
    ti = TYPES[info.sfx]
    E = 16 // ti.size
    cases = []
    seed = [seed0 * 100003 + zlib.crc32(info.name.encode()) % 99991 + 500]
    rng = np.random.default_rng(seed[0])
    has_arg = info.abi == "new" and info.op in ("premulsum", "sumpostdiv")

    def add(**kw):
        seed[0] += 1
        kw.setdefault("seed", seed[0])
        if has_arg and "flags" not in kw:
            j = len(cases)
            kw["flags"] = j % 8
            kw["scalar"] = gen_scalar(ti, info.op, rng, j)
        cases.append(ExchangeCase(**kw))

    add(n=0, grid=2, block=4, calls=2, note="empty")
    add(n=1, grid=1, block=8, calls=2)
    add(n=E + 3, grid=3, block=4, calls=3, note="empty-blocks")
    add(n=6 * E + 5, grid=2, block=4, calls=3, note="vector")
    add(n=6 * E + 5, grid=2, block=4, calls=3, inplace=True, note="vector")
    add(n=4 * E + 3, grid=2, block=3, calls=2, offs=(0, 1 % E, 0), note="scalar-path")
    add(n=4 * E + 3, grid=1, block=5, calls=2, offs=(0, 0, 1 % E), inplace=True,
        note="scalar-path")
    add(n=2 * E + 1, grid=2, block=4, calls=4, schedule="rr", quantum=3, note="rr")
    if E > 1:
        add(n=7 * E + 3, grid=2, block=4, calls=2, offs=(0, 0, 0), offs1=(1, 1, 0),
            note="vector-vs-scalar")
    if has_arg:
        for fl in range(8):
            add(n=3 * E + 1, grid=1, block=4, calls=1, flags=fl,
                scalar=gen_scalar(ti, info.op, rng, fl + 1), note="flags")
    add(n=40 * E + 7, grid=4, block=32, calls=3, inplace=True, note="big")
    add(n=20 * E + 3, grid=2, block=2, calls=2, note="multi-iteration")
    add(n=5 * E + 2, grid=2, block=6, calls=2, overlap=False, special=0.6, note="specials")
    if mode == "full":
        add(n=40 * E + 7, grid=4, block=32, calls=3, note="big")
        add(n=300 * E + 7, grid=8, block=64, calls=2, note="bigger")
        for j in range(12):
            add(n=int(rng.integers(0, 20 * E)), grid=int(rng.integers(1, 5)),
                block=int(rng.integers(1, 20)), calls=int(rng.integers(1, 5)),
                inplace=bool(j % 2), overlap=bool(j % 3), note="random",
                quantum=int(rng.integers(1, 16)))
    return cases


# ---------------------------------------------------------------------------
# ring all-reduce in one kernel per rank, LL protocol (rr_ringll_*)
#
# Every rank r of N launches the same kernel; my_ll is its own LL half,
# peer_ll the one of its right rank (r+1) mod N.  A half holds 2(N-1) slots
# of LS 16-byte lines, LS = ceil(max_len * size / 8); a line is two u64
# words (seq << 32) | 4 payload bytes.  The host alternates halves between
# consecutive calls (half = call % 2).  Result: the ring all-reduce in the
# ring's order (ringll_ref).  With flags bit 3 (the one-shot, N = 2) the
# kernel runs the ring of one chunk and one step: a half is one slot of the
# whole buffer, and rank r ends with OP(a_r, a_peer) (oneshot_ref).

def chunk_bounds(n, N, size):
    """The N+1 element bounds of ChunkLayout::new(n, N, size) (src/schedule.rs):
    whole 16-byte units dealt to the chunks (the remainder to the first ones,
    the sub-unit tail to the last), or single elements when there are fewer
    units than chunks."""
    unit = max(16 // size, 1)
    units = n // unit
    if units >= N:
        base, extra = divmod(units, N)
        return [(c * base + min(c, extra)) * unit for c in range(N)] + [n]
    base, extra = divmod(n, N)
    return [c * base + min(c, extra) for c in range(N + 1)]


def ll_lines(n, N, size):
    """LS: lines (16 bytes, 8 payload bytes) per slot."""
    b = chunk_bounds(n, N, size)
    max_len = max(b[c + 1] - b[c] for c in range(N))
    return -(-max_len * size // 8)


def simple_half_bytes(n, N, size):
    """A half of rr_ringsimple's slots: 2(N-1) slots of the largest chunk's
    bytes, each rounded up to 16."""
    b = chunk_bounds(n, N, size)
    max_len = max(b[c + 1] - b[c] for c in range(N))
    return 2 * (N - 1) * (-(-max_len * size // 16) * 16)


def ll_half_bytes(n, N, size, one_shot=False):
    if one_shot:
        return ll_lines(n, 1, size) * 16
    return 2 * (N - 1) * ll_lines(n, N, size) * 16


def oneshot_ref(sfx, op, ins, r, flags=0, scalar=0):
    """The one-shot of 2 ranks on rank r: OP(a_r, a_peer), pre on both
    (flags bits 0, 1), post (bit 2): its one step is the ring's first and
    last reduce-scatter step.  Returns (expected bits, lenient mask)."""
    ti = TYPES[sfx]
    acc, le = reduce_ref(sfx, op, ins[r], ins[1 - r], flags & 7, scalar)
    mag = np.array((1 << (ti.bits - 1)) - 1, dtype=ti.udtype)
    lenient = le & ((acc & mag) == 0) if ti.kind != "int" else np.zeros(len(acc), dtype=bool)
    return acc, lenient


def ringll_ref(sfx, op, ins, flags=0, scalar=0):
    """The ring all-reduce of ins[0..N-1] in the ring's order: chunk c starts
    as rank c's input, then rank q = (c + j) % N (j = 1 .. N-1) does
    acc = OP(a_q, acc) with step flags (flags & 1) | (flags & 2 at j == 1) |
    (flags & 4 at j == N-1).  Returns (expected bits, lenient mask): an
    element is lenient when it is a zero and some step of its chain was a
    max/min of +0 and -0 (the zero sign may differ from there on)."""
    ti = TYPES[sfx]
    N = len(ins)
    n = len(ins[0])
    b = chunk_bounds(n, N, ti.size)
    exp = np.zeros(n, dtype=ti.udtype)
    lenient = np.zeros(n, dtype=bool)
    mag = np.array((1 << (ti.bits - 1)) - 1, dtype=ti.udtype)
    for c in range(N):
        s, e = b[c], b[c + 1]
        if s == e:
            continue
        acc = np.asarray(ins[c][s:e], dtype=ti.udtype)
        cum = np.zeros(e - s, dtype=bool)
        for j in range(1, N):
            q = (c + j) % N
            sf = (flags & 1) | ((flags & 2) if j == 1 else 0) | ((flags & 4) if j == N - 1 else 0)
            acc, le = reduce_ref(sfx, op, ins[q][s:e], acc, sf, scalar)
            cum |= le
        exp[s:e] = acc
        if ti.kind != "int":
            lenient[s:e] = cum & ((acc & mag) == 0)
    return exp, lenient


# The call counts an LL ring kernel keeps, all equal (gen_ptx.py LL_MAX_BLOCKS).
LL_MAX_BLOCKS = 256


class RingllCase:
    def __init__(self, N, n, grid, block, calls=2, inplace=False, offs=(0, 0), flags=0,
                 scalar=0, seed=0, schedule="random", quantum=8, overlap=True, stale=True,
                 special=0.15, note="", grids=None, one_shot=False, stamps=False):
        self.N = N
        # pass a stamps buffer: the kernel writes its step times there
        self.stamps = stamps
        # flags bit 3: the one-shot of 2 ranks (one chunk, one step)
        self.one_shot = one_shot
        self.n = n
        self.grid = grid
        # per call: the grid of call k is grids[k] (else grid for every call)
        self.grids = grids
        self.block = block
        self.calls = calls
        self.inplace = inplace
        # element offsets mod 16 bytes of (dst, a): one pair for every rank,
        # or a list of N pairs
        self.offs = offs
        self.flags = flags
        self.scalar = scalar
        self.seed = seed
        self.schedule = schedule
        self.quantum = quantum
        self.overlap = overlap
        # fill the LL half a call puts into, just before that call, with
        # random words carrying earlier calls' seqs (else: what the previous
        # calls left, zeros at first)
        self.stale = stale
        self.special = special
        self.note = note

    def rank_offs(self, r):
        if isinstance(self.offs, list):
            return self.offs[r % len(self.offs)]
        return self.offs

    def label(self):
        offs = self.offs if not isinstance(self.offs, list) else \
            "/".join("%d,%d" % tuple(o) for o in self.offs)
        return ("%s%sN=%d n=%d grid=%sx%d calls=%d %s offs(dst,a)=%s flags=%d scalar=0x%x seed=%d %s%s%s"
                % (self.note + " " if self.note else "", "one-shot " if self.one_shot else "",
                   self.N, self.n,
                   "/".join(map(str, self.grids)) if self.grids else self.grid, self.block,
                   self.calls, "in-place" if self.inplace else "out-of-place", offs,
                   self.flags, self.scalar, self.seed, self.schedule,
                   "" if self.overlap else " serialized", "" if self.stale else " zeroed-ll"
                   + (" stamps" if self.stamps else ""))
                ).strip()


def _setup_ringll(info, case, m, ti, timeout_ns=0):
    """Buffers of the N ranks, each its own allocation with guard zones.
    Each LL half is an allocation of exactly 2(N-1)*LS*16 bytes (the host's
    two halves are one buffer; apart, a kernel that runs past its half hits
    a guard zone), zeroed."""
    N, n = case.N, case.n
    nb = n * ti.size
    simple = info.family == "ringsimple"
    half = simple_half_bytes(n, N, ti.size) if simple else ll_half_bytes(n, N, ti.size,
                                                                         case.one_shot)
    bufs = Buffers(m)
    ranks = []
    for r in range(N):
        R = _Rank()
        R.r = r
        od, oa = case.rank_offs(r)
        R.a = bufs.place("rank%d a" % r, nb, oa * ti.size % 16, bytes(nb), track=case.inplace)
        R.dst = R.a if case.inplace else bufs.place("rank%d dst" % r, nb, od * ti.size % 16,
                                                     poison=True, track=True)
        R.ll = [bufs.place("rank%d %s half%d" % (r, "slots" if simple else "ll", h),
                           max(half, 16), 0, bytes(max(half, 16))) for h in range(2)]
        R.simple = simple
        # rr_ringsimple's tile flags (written by the left rank)
        R.flags = (bufs.place("rank%d flags" % r, 8 * SIMPLE_MAX_TILES, 0,
                              bytes(8 * SIMPLE_MAX_TILES)) if simple else 0)
        R.calls = bufs.place("rank%d calls" % r, 8 * LL_MAX_BLOCKS, 0, bytes(8 * LL_MAX_BLOCKS))
        R.ctrl = bufs.place("rank%d ctrl" % r, 16 + 4 * LL_MAX_BLOCKS, 0,
                            bytes(8) + int(timeout_ns).to_bytes(8, "little")
                            + bytes(4 * LL_MAX_BLOCKS))
        R.half = half
        R.steps = 1 if case.one_shot else 2 * (N - 1)
        # (a frozen fixture has no stamps parameter: none there)
        stamps = case.stamps and (simple or len(info.kernel.param_list) > len(RINGLL))
        R.stamps = (bufs.place("rank%d stamps" % r, 8 * (R.steps + 2), 0, bytes(8 * (R.steps + 2)))
                    if stamps else 0)
        ranks.append(R)
    return ranks


def _ringll_params(kernel, R, right, k, n, N, flags, scalar):
    """The kernel's parameters; `stamps` (R.stamps, 0 for none) where the
    kernel has it (a frozen fixture may not)."""
    h = k % 2
    if R.simple:
        return [R.dst, R.a, R.ll[h], right.ll[h], R.flags, right.flags, R.calls, n, N, R.r,
                flags, scalar, R.ctrl, R.stamps]
    p = [R.dst, R.a, R.ll[h], right.ll[h], R.calls, n, N, R.r, flags, scalar, R.ctrl]
    if len(kernel.param_list) > len(p):
        p.append(getattr(R, "stamps", 0))
    return p


def _check_stamps(m, R, r, k):
    """The step times a call wrote: K + 2 nonzero words, never decreasing;
    an error text, or None."""
    w = np.frombuffer(m.mem.read(R.stamps, 8 * (R.steps + 2)), dtype=np.uint64)
    if np.any(w == 0) or np.any(np.diff(w.astype(np.int64)) < 0):
        return "rank %d call %d: step times %s (K + 2 = %d nonzero, never decreasing)" % (
            r, k, w.tolist(), R.steps + 2)
    return None


def _stray_stores(m, g, allowed):
    """Names of the allocations other than `allowed` (start addresses) that
    grid g stored into (st, or atom on small allocations).  Valid in
    on_grid_done (or after a run): a grid stays in Alloc.stored_by until a
    later grid's store there finds it finished."""
    out = []
    for a in m.mem.allocs:
        if a.start in allowed or a.noaccess:
            continue
        if g in a.stored_by or (a.sync and any(w[0] is g for w in a.sync.values())):
            out.append(a.name)
    return out


def _describe_ringll(ti, i, bounds, ins, exp, got):
    import bisect
    i = int(i)
    N = len(ins)
    c = bisect.bisect_right(bounds, i) - 1
    order = [(c + j) % N for j in range(N)]
    line = (i - bounds[c]) * ti.size // 8
    return ("element %d (chunk %d = [%d, %d), line %d of a slot; reduced over ranks %s): %s; "
            "expected %s (%s) got %s (%s)"
            % (i, c, bounds[c], bounds[c + 1], line, "->".join(map(str, order)),
               ", ".join("a%d=%s (%s)" % (q, _hex(ti, ins[q][i]), _val(ti, ins[q][i]))
                         for q in order),
               _hex(ti, exp[i]), _val(ti, exp[i]), _hex(ti, got[i]), _val(ti, got[i])))


def _block_limit(kernel):
    """The most threads per block the kernel declares (.maxntid / .reqntid), or None."""
    d = kernel.entry.directives
    for key in (".maxntid", ".reqntid"):
        if key in d:
            dims = [int(x) for x in d[key]] + [1, 1]
            return dims[0] * dims[1] * dims[2]
    return None


def run_ringll(info, case, max_steps=10_000_000):
    """N ranks (N grids over one memory), `case.calls` consecutive calls.
    With overlap, each rank launches its next call as soon as its previous
    one finished (its own stream), while the others may still be in the
    previous call."""
    lim = _block_limit(info.kernel)
    if lim is not None and case.block > lim:
        return CaseResult(True, case.label(), "skipped: the kernel declares %d threads per block "
                          "at most" % lim)
    ti = TYPES[info.sfx]
    N, n = case.N, case.n
    nb = n * ti.size
    rng = np.random.default_rng(case.seed)
    inputs = [[gen_values(ti, n, rng, case.special) for _ in range(N)]
              for _ in range(case.calls)]
    srng = np.random.default_rng(case.seed + 0x5EED)       # stale LL words
    m = Machine(seed=case.seed, schedule=case.schedule, quantum=case.quantum)
    ranks = _setup_ringll(info, case, m, ti)
    half = ranks[0].half
    bounds = chunk_bounds(n, 1 if case.one_shot else N, ti.size)
    flags = case.flags | (8 if case.one_shot else 0)
    label = case.label()
    kern = info.kernel
    nxt = [0] * N
    results = {}
    grids = []

    def launch(r):
        k = nxt[r]
        R, P = ranks[r], ranks[(r + 1) % N]
        m.mem.write(R.a, inputs[k][r].tobytes())
        if not case.inplace:
            m.mem.poison(R.dst, nb)
        if case.stale:
            # The right rank's half h = k % 2, which this call puts into.
            # Nobody else writes it, and nobody reads it for another call
            # now: the right rank finished call k-2 (this rank's call k-1
            # completed, and its result needs the right rank's call k-1
            # input).  The right rank may already poll it for call k: it
            # must not take words of earlier calls' seqs (0 .. k; call k's
            # seq is k+1).
            w = half // 8
            if R.simple:
                # plain data: anything may sit there before the flag says
                data = srng.integers(0, 1 << 63, size=w, dtype=np.uint64)
                m.mem.write(P.ll[k % 2], data.astype("<u8").tobytes())
                w = 0
            seqs = srng.integers(0, k + 1, size=w, dtype=np.uint64)
            data = srng.integers(0, 1 << 32, size=w, dtype=np.uint64)
            if w:
                m.mem.write(P.ll[k % 2], ((seqs << np.uint64(32)) | data).astype("<u8").tobytes())
        grid = case.grids[k] if case.grids else case.grid
        g = m.launch(kern, grid, case.block,
                     _ringll_params(kern, R, P, k, n, N, flags, case.scalar),
                     name="rank%d call%d" % (r, k))
        g.rank = r
        g.call = k
        g.allowed = {R.dst, P.ll[k % 2], R.calls, R.ctrl, R.stamps, P.flags}
        if R.stamps:
            m.mem.write(R.stamps, bytes(8 * (R.steps + 2)))
        grids.append(g)
        nxt[r] = k + 1

    def done(g):
        r, k = g.rank, g.call
        R = ranks[r]
        stray = _stray_stores(m, g, g.allowed)
        if stray:
            results[(r, k)] = ("rank %d call %d stored into %s (it may store only into its "
                               "dst, the right rank's LL half %d, its calls[] and ctrl)"
                               % (r, k, ", ".join(stray), k % 2))
        elif not case.inplace and not m.mem.initialized(R.dst, nb):
            init = m.mem._find_host(R.dst, nb).init
            off = R.dst - m.mem._find_host(R.dst, nb).start
            first = next(i for i in range(nb) if not init[off + i]) // ti.size
            results[(r, k)] = "rank %d call %d: dst element %d was never written" % (r, k, first)
        elif not case.inplace and m.mem.read(R.a, nb) != inputs[k][r].tobytes():
            results[(r, k)] = "rank %d call %d: input a was modified (out of place)" % (r, k)
        elif R.stamps and (bad := _check_stamps(m, R, r, k)):
            results[(r, k)] = bad
        else:
            results[(r, k)] = np.frombuffer(m.mem.read(R.dst, nb), dtype=ti.udtype).copy()
        if case.overlap and nxt[r] < case.calls:
            launch(r)

    m.on_grid_done = done
    try:
        if case.overlap:
            for r in range(N):
                launch(r)
            m.run(max_steps=max_steps)
        else:
            for _ in range(case.calls):
                for r in range(N):
                    launch(r)
                m.run(max_steps=max_steps)
    except PtxError as e:
        # a kernel that stored where it may not often hangs a neighbour: say so
        stray = ["%s stored into %s" % (g.name, ", ".join(_stray_stores(m, g, g.allowed)))
                 for g in grids if g.live and _stray_stores(m, g, g.allowed)]
        return CaseResult(False, label, "%s: %s%s" % (type(e).__name__, e,
                                                        "".join("\n(%s)" % x for x in stray)),
                          m.steps)
    zs = {}
    for k in range(case.calls):
        exp, lenient = ringll_ref(info.sfx, info.op, inputs[k], case.flags, case.scalar)
        for r in range(N):
            if case.one_shot:
                exp, lenient = oneshot_ref(info.sfx, info.op, inputs[k], r, case.flags,
                                           case.scalar)
            got = results.get((r, k))
            if got is None:
                return CaseResult(False, label, "rank %d call %d did not finish" % (r, k), m.steps)
            if isinstance(got, str):
                return CaseResult(False, label, got, m.steps)
            bad, z = compare(info.sfx, got, exp, lenient)
            if len(bad):
                return CaseResult(False, label, "rank %d call %d: %d of %d elements differ; %s"
                                  % (r, k, len(bad), n,
                                     _describe_ringll(ti, bad[0], bounds, inputs[k], exp, got)),
                                  m.steps)
            for key, v in z.items():
                zs[key] = zs.get(key, 0) + v
        if case.one_shot:
            # each rank reduces its own a with the other's, in that order
            # (as the plan says): equal up to a NaN's payload or a zero's
            # sign, which the reference checks per rank
            continue
        g0 = results[(0, k)]
        for r in range(1, N):
            d = np.nonzero(results[(r, k)] != g0)[0]
            if len(d):
                i = int(d[0])
                return CaseResult(False, label, "call %d: ranks 0 and %d differ bitwise at %d "
                                  "elements (all ranks must end with the same dst); first: "
                                  "element %d rank 0 %s rank %d %s"
                                  % (k, r, len(d), i, _hex(ti, g0[i]), r,
                                     _hex(ti, results[(r, k)][i])), m.steps)
    for r in range(N):
        R = ranks[r]
        if m.mem.read(R.ctrl + 4, 4) != bytes(4):
            return CaseResult(False, label, "rank %d: status written on success" % r, m.steps)
        kept = _ll_max_blocks(info)
        calls = np.frombuffer(m.mem.read(R.calls, 8 * kept), dtype=np.uint64)
        if not np.all(calls == case.calls):
            return CaseResult(False, label, "rank %d: calls[] = %s after %d calls (every count "
                              "must be the number of launches, whatever the grids)"
                              % (r, calls.tolist(), case.calls), m.steps)
    return CaseResult(True, label, "", m.steps, zs)


def run_ringll_fault(info, kind, seed=1, N=3, n=37, grid=2, block=8):
    """Fault paths with only rank 0 of N launched (its neighbours never come):
      timeout: timeout_ns set -> status 1 and the kernel returns, no trap
      abort:   the host sets abort while rank 0 waits -> status 2
      forever: timeout 0, no abort -> still waiting when the step budget ends
    dst may be partly written (not checked); calls[] must count the call and
    the kernel may store only into its dst, the right rank's LL half, its
    calls[] and its ctrl."""
    ti = TYPES[info.sfx]
    case = RingllCase(N=N, n=n, grid=grid, block=block, calls=1, seed=seed)
    label = "fault:%s N=%d n=%d grid=%dx%d (rank 0 alone)" % (kind, N, n, grid, block)
    rng = np.random.default_rng(seed)
    a = gen_values(ti, n, rng)
    m = Machine(seed=seed, ns_per_step=10)
    timeout = 200_000 if kind == "timeout" else 0
    ranks = _setup_ringll(info, case, m, ti, timeout_ns=timeout)
    R, P = ranks[0], ranks[1 % N]
    m.mem.write(R.a, a.tobytes())
    has_arg = info.op in ("premulsum", "sumpostdiv")
    scalar = gen_scalar(ti, info.op, rng, 1)     # a valid one (sumpostdiv: N >= 1)
    params = _ringll_params(info.kernel, R, P, 0, n, N, 7 if has_arg else 0, scalar)
    g = m.launch(info.kernel, grid, block, params, name="rank0 alone")

    def stray():
        s = _stray_stores(m, g, {R.dst, P.ll[0], R.calls, R.ctrl, P.flags})
        if s:
            return CaseResult(False, label, "stored into %s" % ", ".join(s), m.steps)
        return None

    try:
        if kind == "timeout":
            # 200 us of fake time = 20k steps (a kernel may look at the host
            # only every ms or so); give it 500k steps = 5 ms
            m.run(max_steps=500_000)
        elif kind == "abort":
            fin = m.run(max_steps=30_000, raise_on_limit=False)
            if fin:
                return CaseResult(False, label, "returned before the host set abort", m.steps)
            m.mem.write(R.ctrl, (1).to_bytes(4, "little"))
            m.run(max_steps=500_000)
        elif kind == "forever":
            try:
                m.run(max_steps=300_000)
            except StepLimit:
                st = int.from_bytes(m.mem.read(R.ctrl + 4, 4), "little")
                if st != 0:
                    return CaseResult(False, label, "status %d written while still waiting" % st,
                                      m.steps)
                bad = stray()
                if bad:
                    return bad
                return CaseResult(True, label, "still waiting after 300k steps (%.1f ms of fake "
                                  "time)" % (m.steps * m.ns_per_step / 1e6))
            return CaseResult(False, label, "gave up with timeout_ns = 0 and no abort", m.steps)
    except PtxError as e:
        return CaseResult(False, label, "%s: %s" % (type(e).__name__, e), m.steps)
    st = int.from_bytes(m.mem.read(R.ctrl + 4, 4), "little")
    want = 1 if kind == "timeout" else 2
    if st != want:
        return CaseResult(False, label, "status %d, expected %d" % (st, want), m.steps)
    # Alone, rank 0 waits in step 0 (its left rank never puts): the first
    # step any block gave up in.
    step = _first_step(m, R, grid)
    if "steps[LL_MAX_BLOCKS]" in (getattr(info.module, "text", "") or "") and step != 0:
        return CaseResult(False, label, "first step %s, expected 0" % step, m.steps)
    calls = np.frombuffer(m.mem.read(R.calls, 8 * grid), dtype=np.uint64)
    if not np.all(calls == 1):
        return CaseResult(False, label, "calls[] = %s after one (failed) call" % calls.tolist(),
                          m.steps)
    bad = stray()
    if bad:
        return bad
    return CaseResult(True, label, "status %d after %.2f ms of fake time"
                      % (st, m.steps * m.ns_per_step / 1e6), m.steps)


def _ll_max_blocks(info):
    """How many call counts the kernel keeps equal: the number its `calls`
    parameter's comment gives ("LL_MAX_BLOCKS N"; a frozen fixture may keep
    fewer than today's kernels), else LL_MAX_BLOCKS."""
    text = getattr(info.module, "text", None) or ""
    m = re.search(r"LL_MAX_BLOCKS (\d+)", text)
    return int(m.group(1)) if m else LL_MAX_BLOCKS


def _first_step(m, R, grid):
    """The first step a block of rank R gave up in (each block writes step
    + 1 at ctrl + 16 + 4*block; 0: it did not give up), or None."""
    words = np.frombuffer(m.mem.read(R.ctrl + 16, 4 * LL_MAX_BLOCKS), dtype=np.uint32)
    if np.any(words[grid:]):
        return "written by absent blocks: %s" % words.tolist()
    steps = [int(w) - 1 for w in words[:grid] if w]
    return min(steps) if steps else None


def run_ringll_stuck(info, seed=1, n=37, grid=2, block=8):
    """Ranks 0 and 2 of 3 launched, rank 1 never: rank 2 waits in step 0
    (its left rank is the absent one) and rank 0 in step 1 (rank 2 puts
    its own chunk at step 0, then never forwards).  Both time out with
    status 1, each with the step it waited in at ctrl+16: what the host's
    error names."""
    ti = TYPES[info.sfx]
    N = 3
    case = RingllCase(N=N, n=n, grid=grid, block=block, calls=1, seed=seed)
    label = "fault:stuck-neighbour N=3 n=%d grid=%dx%d (rank 1 absent)" % (n, grid, block)
    rng = np.random.default_rng(seed)
    m = Machine(seed=seed, ns_per_step=10)
    ranks = _setup_ringll(info, case, m, ti, timeout_ns=200_000)
    has_arg = info.op in ("premulsum", "sumpostdiv")
    scalar = gen_scalar(ti, info.op, rng, 1)
    for r in (0, 2):
        R, P = ranks[r], ranks[(r + 1) % N]
        m.mem.write(R.a, gen_values(ti, n, rng).tobytes())
        m.launch(info.kernel, grid, block,
                 _ringll_params(info.kernel, R, P, 0, n, N, 7 if has_arg else 0, scalar),
                 name="rank%d" % r)
    try:
        m.run(max_steps=1_000_000)
    except PtxError as e:
        return CaseResult(False, label, "%s: %s" % (type(e).__name__, e), m.steps)
    for r, want in ((0, 1), (2, 0)):
        R = ranks[r]
        st = int.from_bytes(m.mem.read(R.ctrl + 4, 4), "little")
        step = _first_step(m, R, grid)
        if (st, step) != (1, want):
            return CaseResult(False, label, "rank %d: status %d step %d, expected status 1 "
                              "step %d" % (r, st, step, want), m.steps)
    return CaseResult(True, label, "rank 0 timed out in step 1, rank 2 in step 0", m.steps)


def ringll_cases(info, mode, seed0=0):
    """The case list for one ringll kernel.  quick: one N=3 case (ranks at
    different alignments, out of place, 2 overlapping calls) and one small
    in-place case whose shape depends on the op, so that CI covers
    N = 2, 3, 4, in and out of place, n < N over the ops of every type.
    full: every N of 2..5 with tiny, odd and tail sizes, alignments, grids
    with idle blocks, odd blocks, the host's 256 threads, 3 calls, the round
    robin schedule, serialized calls, zeroed LL buffers, specials, every
    flag combination for premulsum / sumpostdiv, random shapes."""
    ti = TYPES[info.sfx]
    E = 16 // ti.size
    cases = []
    seed = [seed0 * 100003 + zlib.crc32(info.name.encode()) % 99991 + 900]
    rng = np.random.default_rng(seed[0])
    has_arg = info.op in ("premulsum", "sumpostdiv")
    simple = info.family == "ringsimple"

    def add(**kw):
        seed[0] += 1
        kw.setdefault("seed", seed[0])
        if simple and kw.get("one_shot"):
            return                               # rr_ringsimple has no one-shot
        if has_arg:
            j = len(cases)
            kw.setdefault("flags", 7)            # what the host passes
            kw.setdefault("scalar", gen_scalar(ti, info.op, rng, j))
        cases.append(RingllCase(**kw))

    h = E // 2
    # the fast path (dst and a 8-byte aligned) on some ranks, the unaligned
    # one on others, 16-byte alignment on none but rank 0
    mixed3 = [(0, 0), (1 % E, E - 1), (h, h if E > 2 else 0)]
    add(N=3, n=6 * E + 5, grid=2, block=8, calls=2, offs=mixed3, stamps=True, note="mixed-align")
    small = {"sum": dict(N=2, n=E + 1, grid=1, block=8),
             "prod": dict(N=4, n=3, grid=2, block=4),
             "max": dict(N=3, n=2, grid=1, block=8),
             "min": dict(N=4, n=4 * E + 3, grid=1, block=5),
             }.get(info.op, dict(N=2, n=2 * E + 1, grid=2, block=4))
    add(calls=2, inplace=True, offs=(1 % E, 1 % E), note="small", **small)
    # Grids that change between calls (the host's grid follows the size):
    # call 2 reuses call 0's half, and its blocks 1 and 2 did not run in
    # calls 0 and 1; their lines there still hold call 0's words, which a
    # per-block call count would accept (a wrong result found on a GPU).
    add(N=2, n=12 * E, grid=1, grids=[1, 1, 3], block=4, calls=3, stale=False,
        note="grids-change")
    # the one-shot (flags bit 3): one chunk, one step, mixed alignments
    add(N=2, n=5 * E + 3, grid=2, block=4, calls=3, offs=[(0, 0), (1 % E, E - 1)],
        one_shot=True, stamps=True, note="mixed-align")
    if simple:
        # several vectors per thread (the unrolled loop, then the single
        # one), in place, with a scalar tail
        add(N=2, n=40 * E + 3, grid=1, block=4, calls=2, inplace=True, note="unrolled")
    if simple and (ti.size == 8 or mode == "full"):
        # chunks of two tiles and a part (a tile is 16 KiB), on grids of
        # one block and of three (idle blocks), 3 calls
        tile = 16384 // ti.size
        add(N=2, n=2 * (2 * tile + 3 * E) + 1, grid=1, grids=[1, 3, 2], block=64, calls=3,
            offs=[(0, 0), (1 % E, 1 % E)], note="tiles")
    if mode != "full":
        return cases
    add(N=2, n=1, grid=1, block=8, calls=2, one_shot=True, note="one element")
    add(N=2, n=9 * E + 1, grid=3, block=5, calls=3, inplace=True, offs=(h, h),
        one_shot=True, note="in-place")
    add(N=2, n=4 * E, grid=1, grids=[1, 3, 2, 1], block=4, calls=4, one_shot=True,
        stale=False, note="grids-change")
    add(N=2, n=3 * E + 2, grid=2, block=4, calls=3, schedule="rr", quantum=3,
        one_shot=True, special=0.6, note="rr specials")
    # N = 2
    add(N=2, n=1, grid=1, block=8, calls=2, note="n<N")
    add(N=2, n=E + 1, grid=1, block=8, calls=3, inplace=True, note="elements")
    add(N=2, n=8 * E + 3, grid=2, block=5, calls=3, offs=[(0, 0), (1 % E, 0)], note="tail")
    add(N=2, n=2 * E, grid=3, block=4, calls=2, schedule="rr", quantum=3, note="rr")
    # N = 3
    add(N=3, n=2, grid=2, block=4, calls=2, note="n<N")
    add(N=3, n=3 * E - 1, grid=1, block=4, calls=2, offs=(1 % E, 0), note="elements")
    add(N=3, n=9 * E + 2, grid=3, block=4, calls=3, inplace=True, offs=mixed3,
        note="in-place")
    add(N=3, n=3 * E + 1, grid=3, block=3, calls=2, note="idle-blocks")
    add(N=3, n=5 * E + 3, grid=2, block=6, calls=3, schedule="rr", quantum=5, note="rr")
    add(N=3, n=4 * E + 1, grid=2, block=4, calls=3, overlap=False, special=0.6,
        note="specials serialized")
    add(N=3, n=6 * E + 7, grid=2, block=8, calls=3, stale=False, note="zeroed")
    # N = 4 and 5
    add(N=4, n=3, grid=2, block=4, calls=2, inplace=True, note="n<N")
    add(N=4, n=12 * E + E - 1, grid=2, block=8, calls=3,
        offs=[(0, 0), (1 % E, 1 % E), (h, 0), (E - 1, h)], note="tail")
    add(N=4, n=4 * E + 5, grid=1, block=32, calls=2, inplace=True, offs=(E - 1, E - 1),
        note="warp")
    add(N=4, n=5 * E + 2, grid=1, block=256, calls=2, note="host-block")
    add(N=5, n=7 * E + 3, grid=2, block=7, calls=2, offs=[(0, 0), (1 % E, 0)], note="N=5")
    add(N=3, n=60 * E + 7, grid=3, block=32, calls=2, offs=mixed3, note="big")
    # more than 256 threads (the host's block) with lines for all of them,
    # unaligned (element by element)
    add(N=2, n=2 * (2048 // ti.size + 32) + 1, grid=1, block=320, calls=1, offs=(1 % E, 1 % E),
        note="block>256")
    if has_arg:
        for fl in range(8):
            add(N=3, n=3 * E + 1, grid=1, block=4, calls=1, flags=fl,
                scalar=gen_scalar(ti, info.op, rng, fl + 1), note="flags")
    for j in range(8):
        N = int(rng.integers(2, 5))
        add(N=N, n=int(rng.integers(1, 20 * E)), grid=int(rng.integers(1, 4)),
            block=int(rng.integers(1, 20)), calls=int(rng.integers(1, 4)),
            inplace=bool(j % 2), overlap=bool(j % 3), stale=bool(j % 4 != 3),
            offs=[tuple(int(x) for x in rng.integers(0, E, size=2)) for _ in range(N)],
            quantum=int(rng.integers(1, 16)), note="random")
    return cases
