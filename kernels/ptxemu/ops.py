"""Bit-exact arithmetic helpers used by the generated instruction code.

Float helpers take and return bit patterns.  Packed types (.f16x2, .bf16x2):
the low 16 bits are element 0 (the first element in memory), the high 16 bits
element 1 (PTX ISA, half-precision instructions: "input vectors are formed
with half-word values from source operands").
"""

import math

from . import fp
from .fp import F16, BF16, F32, F64, E4M3, E5M2

FMT_OF = {"f16": F16, "bf16": BF16, "f32": F32, "f64": F64,
          "f16x2": F16, "bf16x2": BF16}

_DEC = {
    "f16": fp.dec_f16, "bf16": fp.dec_bf16, "f32": fp.dec_f32, "f64": fp.dec_f64,
}


def _flush(bits, fmt):
    """ftz: a subnormal input becomes a zero of the same sign."""
    mag = bits & ~fmt.sign & fmt.mask
    if mag and mag < (1 << fmt.mbits):
        return bits & fmt.sign
    return bits


def _make_unary_post(fmt, ftz, sat):
    """Output adjustments: .ftz flushes subnormal results, .sat clamps to
    [0, 1] with NaN -> +0 (PTX ISA: '.sat ... NaN results are flushed to +0')."""
    one = fp.from_float(1.0, fmt)
    dec = _DEC[fmt.name]

    def post(bits):
        if ftz:
            bits = _flush(bits, fmt)
        if sat:
            if fp.is_nan(bits, fmt):
                return 0
            v = dec(bits)
            if v <= 0.0:
                return 0
            if v >= 1.0:
                return one
        return bits
    if not ftz and not sat:
        return None
    return post


def make_float_binop(op, tname, mode="rn", ftz=False, sat=False, nan=False):
    """Returns f(a_bits, b_bits) -> bits for add/sub/mul/min/max/div."""
    fmt = FMT_OF[tname]
    dec = _DEC[fmt.name]
    post = _make_unary_post(fmt, ftz, sat)
    exact_needed = mode != "rn"
    from_float = fp.from_float

    if op in ("add", "sub"):
        neg = op == "sub"
        if fmt is F64 and not exact_needed:
            def core(a, b):
                x = dec(a)
                y = dec(b)
                return from_float(x - y if neg else x + y, fmt)
        elif not exact_needed:
            # binary64 sum, then one rounding: innocuous double rounding (fp.py)
            def core(a, b):
                x = dec(a)
                y = dec(b)
                return from_float(x - y if neg else x + y, fmt)
        else:
            def core(a, b):
                x = dec(a)
                y = dec(b)
                return fp.fma_exact(x, 1.0, -y if neg else y, fmt, mode)
    elif op == "mul":
        if fmt is F64 and exact_needed:
            def core(a, b):
                return fp.fma_exact(dec(a), dec(b), 0.0, fmt, mode)
        else:
            # p <= 24: the binary64 product is exact; f64 rn: IEEE binary64 multiply
            def core(a, b):
                return from_float(dec(a) * dec(b), fmt, mode)
    elif op == "div":
        if fmt not in (F32, F64):
            raise ValueError("div on %s" % tname)

        def core(a, b):
            x = dec(a)
            y = dec(b)
            if y == 0.0:
                if x == 0.0 or x != x:
                    return fmt.canon_nan
                s = (math.copysign(1.0, x) * math.copysign(1.0, y)) < 0
                return (fmt.sign if s else 0) | fmt.inf
            if fmt is F64 or mode != "rn":
                # exact quotient via integers, rounded once
                if x != x or y != y:
                    return fmt.canon_nan
                if math.isinf(x) or math.isinf(y):
                    return from_float(x / y, fmt)
                from fractions import Fraction
                q = Fraction(x) / Fraction(y)
                s = 1 if q < 0 else 0
                q = abs(q)
                if q == 0:
                    return fmt.sign if s else 0
                # scale to an integer with enough bits, keep a sticky bit
                num, den = q.numerator, q.denominator
                shift = max(0, fmt.mbits + 3 + den.bit_length() - num.bit_length())
                M, r = divmod(num << shift, den)
                M = (M << 1) | (1 if r else 0)
                return fp.round_exact(s, M, -shift - 1, fmt, mode)
            return from_float(x / y, fmt)     # binary64 quotient: innocuous for f32
    elif op in ("max", "min"):
        f = fp.fmax_bits if op == "max" else fp.fmin_bits

        def core(a, b):
            return f(a, b, fmt, nan, dec)
    else:
        raise ValueError(op)

    if ftz:
        inner = core

        def core(a, b):
            return inner(_flush(a, fmt), _flush(b, fmt))
    if post is not None:
        inner2 = core

        def core(a, b):
            return post(inner2(a, b))
    if tname.endswith("x2"):
        scalar = core

        def core(a, b):
            return scalar(a & 0xFFFF, b & 0xFFFF) | (scalar(a >> 16, b >> 16) << 16)
    return core


def make_float_fma(tname, mode="rn", ftz=False, sat=False):
    fmt = FMT_OF[tname]
    dec = _DEC[fmt.name]
    post = _make_unary_post(fmt, ftz, sat)

    def core(a, b, c):
        if ftz:
            a, b, c = _flush(a, fmt), _flush(b, fmt), _flush(c, fmt)
        r = fp.fma_exact(dec(a), dec(b), dec(c), fmt, mode)
        return post(r) if post else r
    if tname.endswith("x2"):
        scalar = core

        def core(a, b, c):
            return scalar(a & 0xFFFF, b & 0xFFFF, c & 0xFFFF) | \
                (scalar(a >> 16, b >> 16, c >> 16) << 16)
    return core


def make_float_unop(op, tname, ftz=False):
    """neg / abs: sign-bit operations (NaN keeps its payload, PTX: 'neg ...
    NaN inputs yield an unspecified NaN' -- the flipped NaN is one)."""
    fmt = FMT_OF[tname]

    def core(a):
        if ftz:
            a = _flush(a, fmt)
        if op == "neg":
            return a ^ fmt.sign
        return a & ~fmt.sign & fmt.mask
    if tname.endswith("x2"):
        scalar = core

        def core(a):
            return scalar(a & 0xFFFF) | (scalar(a >> 16) << 16)
    return core


def make_setp_float(cmp, tname, ftz=False):
    fmt = FMT_OF[tname]
    dec = _DEC[fmt.name]

    def core(a, b):
        if ftz:
            a, b = _flush(a, fmt), _flush(b, fmt)
        x = dec(a)
        y = dec(b)
        un = x != x or y != y
        if cmp == "eq":
            return not un and x == y
        if cmp == "ne":
            return not un and x != y
        if cmp == "lt":
            return not un and x < y
        if cmp == "le":
            return not un and x <= y
        if cmp == "gt":
            return not un and x > y
        if cmp == "ge":
            return not un and x >= y
        if cmp == "equ":
            return un or x == y
        if cmp == "neu":
            return un or x != y
        if cmp == "ltu":
            return un or x < y
        if cmp == "leu":
            return un or x <= y
        if cmp == "gtu":
            return un or x > y
        if cmp == "geu":
            return un or x >= y
        if cmp == "num":
            return not un
        if cmp == "nan":
            return un
        raise ValueError(cmp)
    return core


def testp(op, tname):
    fmt = FMT_OF[tname]
    dec = _DEC[fmt.name]

    def core(a):
        x = dec(a)
        if op == "finite":
            return math.isfinite(x)
        if op == "infinite":
            return math.isinf(x)
        if op == "number":
            return x == x
        if op == "notanumber":
            return x != x
        mag = a & ~fmt.sign & fmt.mask
        if op == "normal":
            return math.isfinite(x) and mag >= (1 << fmt.mbits)
        if op == "subnormal":
            return 0 < mag < (1 << fmt.mbits)
        raise ValueError(op)
    return core


# ---------------------------------------------------------------------------
# cvt

INT_TYPES = {"u8": (8, False), "u16": (16, False), "u32": (32, False), "u64": (64, False),
             "s8": (8, True), "s16": (16, True), "s32": (32, True), "s64": (64, True),
             "b8": (8, False), "b16": (16, False), "b32": (32, False), "b64": (64, False)}


def _relu(bits, fmt):
    if fp.is_nan(bits, fmt):
        return fmt.canon_nan
    if bits & fmt.sign:
        return 0
    return bits


def make_cvt(dtype, atype, rnd, irnd, ftz, sat, satfinite, relu, nops):
    """Returns (func, nargs): func(*source_bits) -> destination bits."""
    # ---- packed fp8 / f16x2 / bf16x2 forms ---------------------------------
    if dtype in ("e4m3x2", "e5m2x2"):
        f8 = E4M3 if dtype == "e4m3x2" else E5M2
        if rnd != "rn" or not satfinite:
            raise ValueError("cvt to %s requires .rn.satfinite" % dtype)
        if atype == "f32":
            # PTX ISA cvt: "d[15:8] = convert(a); d[7:0] = convert(b)"
            def cv(a, b):
                hi = fp.from_float(fp.dec_f32(a), f8, "rn", True)
                lo = fp.from_float(fp.dec_f32(b), f8, "rn", True)
                if relu:
                    hi, lo = _relu(hi, f8), _relu(lo, f8)
                return (hi << 8) | lo
            return cv, 2
        if atype == "f16x2":
            # PTX ISA cvt: "the value converted from the upper 16 bits of input
            # a is stored in the upper 8 bits of d and the value converted from
            # the lower 16 bits of input a is stored in the lower 8 bits of d"
            def cv(a):
                lo = fp.from_float(fp.dec_f16(a & 0xFFFF), f8, "rn", True)
                hi = fp.from_float(fp.dec_f16(a >> 16), f8, "rn", True)
                if relu:
                    hi, lo = _relu(hi, f8), _relu(lo, f8)
                return (hi << 8) | lo
            return cv, 1
        raise ValueError("cvt.%s.%s" % (dtype, atype))
    if atype in ("e4m3x2", "e5m2x2"):
        f8 = E4M3 if atype == "e4m3x2" else E5M2
        if dtype != "f16x2":
            raise ValueError("cvt.%s.%s" % (dtype, atype))
        # PTX ISA cvt: "the value converted from the upper 8 bits of a is
        # stored in the upper 16 bits of d and the value converted from the
        # lower 8 bits of a is stored in the lower 16 bits of d" (exact: every
        # e4m3/e5m2 value is an f16 value).
        table = [fp.from_float(fp.decode(b, f8), F16) for b in range(256)]
        if relu:
            table = [_relu(v, F16) for v in table]

        def cv(a):
            return table[a & 0xFF] | (table[(a >> 8) & 0xFF] << 16)
        return cv, 1
    if dtype in ("f16x2", "bf16x2"):
        if atype != "f32":
            raise ValueError("cvt.%s.%s" % (dtype, atype))
        ff = F16 if dtype == "f16x2" else BF16
        mode = rnd or "rn"

        # PTX ISA cvt: "d[31:16] = convert(a); d[15:0] = convert(b)"
        def cv(a, b):
            hi = fp.from_float(fp.dec_f32(a), ff, mode, satfinite)
            lo = fp.from_float(fp.dec_f32(b), ff, mode, satfinite)
            if relu:
                hi, lo = _relu(hi, ff), _relu(lo, ff)
            return (hi << 16) | lo
        return cv, 2

    # ---- scalar forms -------------------------------------------------------
    dfl = dtype in FMT_OF
    afl = atype in FMT_OF
    if not dfl and not afl:
        dbits, dsigned = INT_TYPES[dtype]
        abits, asigned = INT_TYPES[atype]
        dmask = (1 << dbits) - 1
        if dsigned:
            lo, hi = -(1 << (dbits - 1)), (1 << (dbits - 1)) - 1
        else:
            lo, hi = 0, dmask

        def cv(a):
            a &= (1 << abits) - 1
            if asigned and a >> (abits - 1):
                a -= 1 << abits
            if sat:
                a = lo if a < lo else hi if a > hi else a
            return a & dmask
        return cv, 1
    if dfl and afl:
        dfmt = FMT_OF[dtype]
        afmt = FMT_OF[atype]
        adec = _DEC[afmt.name]
        if irnd:
            # round to an integral value in the same format
            if dtype != atype:
                raise ValueError("cvt.%s.%s with an integer rounding" % (dtype, atype))

            def cv(a):
                if ftz:
                    a = _flush(a, afmt)
                x = adec(a)
                if not math.isfinite(x):
                    return dfmt.canon_nan if x != x else a
                y = _round_int(x, irnd)
                if y == 0:
                    return a & afmt.sign      # keep the sign of zero
                return fp.from_float(float(y), dfmt)
            return cv, 1
        widen = dfmt.nbits > afmt.nbits or (dfmt is afmt) or (afmt is BF16 and dfmt is F32)
        mode = rnd or ("rn" if widen else None)
        if mode is None:
            raise ValueError("cvt.%s.%s needs a rounding modifier" % (dtype, atype))

        def cv(a):
            if ftz:
                a = _flush(a, afmt)
            x = adec(a)
            r = fp.from_float(x, dfmt, mode, satfinite)
            if ftz:
                r = _flush(r, dfmt)
            if relu:
                r = _relu(r, dfmt)
            if sat:
                r = _make_unary_post(dfmt, False, True)(r)
            return r
        return cv, 1
    if dfl and not afl:
        dfmt = FMT_OF[dtype]
        abits, asigned = INT_TYPES[atype]
        mode = rnd or "rn"

        def cv(a):
            a &= (1 << abits) - 1
            if asigned and a >> (abits - 1):
                a -= 1 << abits
            if a == 0:
                return 0
            r = fp.round_exact(1 if a < 0 else 0, abs(a), 0, dfmt, mode)
            if sat:
                r = _make_unary_post(dfmt, False, True)(r)
            return r
        return cv, 1
    # float -> int: saturating; NaN -> 0 (PTX ISA cvt: "float-to-integer
    # conversions ... saturate ... NaN results in 0" for sm_20+)
    afmt = FMT_OF[atype]
    adec = _DEC[afmt.name]
    dbits, dsigned = INT_TYPES[dtype]
    if irnd is None:
        raise ValueError("cvt.%s.%s needs an integer rounding modifier" % (dtype, atype))
    if dsigned:
        lo, hi = -(1 << (dbits - 1)), (1 << (dbits - 1)) - 1
    else:
        lo, hi = 0, (1 << dbits) - 1

    def cv(a):
        if ftz:
            a = _flush(a, afmt)
        x = adec(a)
        if x != x:
            return 0
        if math.isinf(x):
            v = hi if x > 0 else lo
        else:
            v = _round_int(x, irnd)
            v = lo if v < lo else hi if v > hi else v
        return v & ((1 << dbits) - 1)
    return cv, 1


def _round_int(x, irnd):
    """Round a finite float to an integer (Python int) per rni/rzi/rmi/rpi."""
    if irnd == "rzi":
        return math.trunc(x)
    if irnd == "rmi":
        return math.floor(x)
    if irnd == "rpi":
        return math.ceil(x)
    if irnd == "rni":
        return round(x)                       # Python round: half to even
    raise ValueError(irnd)


# ---------------------------------------------------------------------------
# prmt (PTX ISA, prmt): bytes of {b, a} numbered 0..7 (a = bytes 0..3);
# default mode: each 4-bit selector picks a byte, its msb replicates the sign
# of the selected byte.

def prmt(a, b, c, mode):
    src = (b << 32) | a
    byts = [(src >> (8 * i)) & 0xFF for i in range(8)]
    if mode is None:
        out = 0
        for i in range(4):
            sel = (c >> (4 * i)) & 0xF
            v = byts[sel & 7]
            if sel & 8:
                v = 0xFF if v & 0x80 else 0
            out |= v << (8 * i)
        return out
    s = c & 3
    if mode == "f4e":
        idx = [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]][s]
    elif mode == "b4e":
        idx = [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]][s]
    elif mode == "rc8":
        idx = [s, s, s, s]
    elif mode == "ecl":
        idx = [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]][s]
    elif mode == "ecr":
        idx = [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]][s]
    elif mode == "rc16":
        idx = [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]][s]
    else:
        raise ValueError(mode)
    out = 0
    for i in range(4):
        out |= byts[idx[i]] << (8 * i)
    return out


def bfe(a, pos, ln, bits, signed):
    """PTX ISA, bfe: pos = b & 0xff, len = c & 0xff; sign bit of the field is
    a[min(pos+len-1, msb)] for signed types (0 for len == 0 / unsigned)."""
    msb = bits - 1
    pos &= 0xFF
    ln &= 0xFF
    if not signed or ln == 0:
        sbit = 0
    else:
        sbit = (a >> min(pos + ln - 1, msb)) & 1
    d = 0
    for i in range(bits):
        if i < ln and pos + i <= msb:
            bit = (a >> (pos + i)) & 1
        else:
            bit = sbit
        d |= bit << i
    return d


def bfi(a, b, pos, ln, bits):
    """PTX ISA, bfi: f = b; for (i < len && pos+i <= msb) f[pos+i] = a[i]."""
    msb = bits - 1
    pos &= 0xFF
    ln &= 0xFF
    f = b
    i = 0
    while i < ln and pos + i <= msb:
        bit = (a >> i) & 1
        f = (f & ~(1 << (pos + i))) | (bit << (pos + i))
        i += 1
    return f & ((1 << bits) - 1)


def lop3(a, b, c, lut):
    out = 0
    for i in range(32):
        idx = (((a >> i) & 1) << 2) | (((b >> i) & 1) << 1) | ((c >> i) & 1)
        # PTX lop3: ta = 0xF0, tb = 0xCC, tc = 0xAA; bit index = a*4 + b*2 + c
        out |= ((lut >> idx) & 1) << i
    return out
