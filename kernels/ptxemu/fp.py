"""Floating-point formats for the PTX emulator, bit-exact.

Every value lives as its bit pattern (a Python int).  An operation decodes its
inputs to Python floats (IEEE binary64; every f16, bf16, f32, e4m3 and e5m2
value is exactly representable), computes, and rounds the result ONCE into the
destination format with `from_float` / `round_exact`.

Why a single rounding from binary64 is exact here:
  * products of two values of precision p <= 24 have at most 48 significant
    bits and stay far inside binary64's exponent range, so `a * b` in binary64
    is exact; rounding it once to the target format is the correctly rounded
    product;
  * sums: binary64 rounding first and then rounding to a format of precision p
    is innocuous when 53 >= 2p + 2 (p <= 24: f32, f16, bf16, fp8) -- the
    classic double-rounding result for +, -, *, /, sqrt;
  * fma and everything in f64 that is not a plain IEEE binary64 operation are
    computed exactly with integers (`round_exact`).

NVIDIA's own host fallback for the fp8 conversions (cuda_fp8.hpp,
__nv_cvt_double_to_fp8) does the same: RN-even on the exact value, and with
__NV_SATFINITE a NaN input gives NaN (e4m3: 0x7F) while an input beyond
MAXNORM + 1/2 ulp -- infinities included -- gives the sign-preserved MAXNORM.
PTX ISA, cvt: ".satfinite: ... NaN results in NaN; +-Inf and values beyond
the finite range clamp to +-MAX_NORM of the destination format".
"""

import math
import struct

__all__ = [
    "Fmt", "F16", "BF16", "F32", "F64", "E4M3", "E5M2", "FORMATS",
    "decode", "from_float", "round_exact", "is_nan", "is_zero", "sign_of",
    "fmax_bits", "fmin_bits", "canonical_nan",
]


class Fmt:
    """A binary floating-point format: nbits total, mbits explicit mantissa
    bits, ebits exponent bits.  ieee=True: the all-ones exponent is inf/NaN;
    ieee=False (OCP E4M3FN): no infinity, only S.1111.111 is NaN."""

    def __init__(self, name, nbits, mbits, ebits, ieee, canon_nan):
        self.name = name
        self.nbits = nbits
        self.mbits = mbits
        self.ebits = ebits
        self.ieee = ieee
        self.bias = (1 << (ebits - 1)) - 1
        self.sign = 1 << (nbits - 1)
        self.mask = (1 << nbits) - 1
        self.emin = 1 - self.bias              # exponent of the smallest normal
        if ieee:
            self.inf = ((1 << ebits) - 1) << mbits
            self.max_enc = self.inf - 1         # largest finite encoding
        else:
            self.inf = None
            self.max_enc = (((1 << ebits) - 1) << mbits) | ((1 << mbits) - 2)
        self.canon_nan = canon_nan

    def __repr__(self):
        return "Fmt(%s)" % self.name


F16 = Fmt("f16", 16, 10, 5, True, 0x7FFF)
BF16 = Fmt("bf16", 16, 7, 8, True, 0x7FFF)
F32 = Fmt("f32", 32, 23, 8, True, 0x7FFFFFFF)
F64 = Fmt("f64", 64, 52, 11, True, 0x7FFFFFFFFFFFFFFF)
E4M3 = Fmt("e4m3", 8, 3, 4, False, 0x7F)   # OCP E4M3FN: max 448, no inf
E5M2 = Fmt("e5m2", 8, 2, 5, True, 0x7F)
FORMATS = {f.name: f for f in (F16, BF16, F32, F64, E4M3, E5M2)}


def canonical_nan(fmt):
    return fmt.canon_nan


def is_nan(bits, fmt):
    mag = bits & ~fmt.sign & fmt.mask
    if fmt.ieee:
        return mag > fmt.inf
    return mag == fmt.mask >> 1            # e4m3: S.1111.111


def is_zero(bits, fmt):
    return (bits & ~fmt.sign & fmt.mask) == 0


def sign_of(bits, fmt):
    return 1 if bits & fmt.sign else 0


# ---------------------------------------------------------------------------
# decode: bits -> Python float (exact)

def _decode_generic(bits, fmt):
    s = -1.0 if bits & fmt.sign else 1.0
    e = (bits >> fmt.mbits) & ((1 << fmt.ebits) - 1)
    m = bits & ((1 << fmt.mbits) - 1)
    if fmt.ieee and e == (1 << fmt.ebits) - 1:
        return s * math.inf if m == 0 else math.nan
    if not fmt.ieee and e == (1 << fmt.ebits) - 1 and m == (1 << fmt.mbits) - 1:
        return math.nan
    if e == 0:
        return s * math.ldexp(m, fmt.emin - fmt.mbits)
    return s * math.ldexp(m | (1 << fmt.mbits), e - fmt.bias - fmt.mbits)


_DEC8 = {f.name: [_decode_generic(b, f) for b in range(256)] for f in (E4M3, E5M2)}
_DEC_F16 = [struct.unpack("<e", struct.pack("<H", b))[0] for b in range(1 << 16)]
_DEC_BF16 = [struct.unpack("<f", struct.pack("<I", b << 16))[0] for b in range(1 << 16)]
_unpack_f = struct.Struct("<f").unpack
_unpack_d = struct.Struct("<d").unpack
_pack_I = struct.Struct("<I").pack
_pack_Q = struct.Struct("<Q").pack


def decode(bits, fmt):
    n = fmt.name
    if n == "f32":
        return _unpack_f(_pack_I(bits))[0]
    if n == "f64":
        return _unpack_d(_pack_Q(bits))[0]
    if n == "f16":
        return _DEC_F16[bits]
    if n == "bf16":
        return _DEC_BF16[bits]
    return _DEC8[n][bits]


def dec_f32(bits):
    return _unpack_f(_pack_I(bits))[0]


def dec_f64(bits):
    return _unpack_d(_pack_Q(bits))[0]


def dec_f16(bits):
    return _DEC_F16[bits]


def dec_bf16(bits):
    return _DEC_BF16[bits]


# ---------------------------------------------------------------------------
# rounding: exact value -> bits

def _overflow(sign, fmt, mode, satfinite):
    """Result of a finite value too large for fmt, per rounding mode."""
    maxv = (fmt.sign if sign else 0) | fmt.max_enc
    if satfinite:
        return maxv
    if fmt.inf is None:                     # e4m3 without .satfinite: NaN
        return fmt.canon_nan | (fmt.sign if sign else 0)
    inf = (fmt.sign if sign else 0) | fmt.inf
    if mode == "rn":
        return inf
    if mode == "rz":
        return maxv
    if mode == "rm":
        return inf if sign else maxv
    if mode == "rp":
        return maxv if sign else inf
    raise ValueError(mode)


def round_exact(sign, M, E, fmt, mode="rn", satfinite=False):
    """Round the exact value (-1)^sign * M * 2^E (M >= 0 an int) into fmt.

    Handles subnormals, RN-even/RZ/RM/RP, overflow to inf or (satfinite) to
    the largest finite value.  Returns the bit pattern."""
    sbit = fmt.sign if sign else 0
    if M == 0:
        return sbit
    mb = fmt.mbits
    lead = E + M.bit_length() - 1            # exponent of the leading bit
    q = max(lead, fmt.emin) - mb             # exponent of the result's ulp
    shift = q - E
    if shift <= 0:
        N = M << -shift
    else:
        N = M >> shift
        rem = M & ((1 << shift) - 1)
        if rem:
            if mode == "rn":
                half = 1 << (shift - 1)
                if rem > half or (rem == half and (N & 1)):
                    N += 1
            elif mode == "rz":
                pass
            elif mode == "rm":
                if sign:
                    N += 1
            elif mode == "rp":
                if not sign:
                    N += 1
            else:
                raise ValueError(mode)
    if N >> (mb + 1):                        # carry out of the mantissa
        N >>= 1
        q += 1
    if N >> mb:                              # normal
        efield = q + mb + fmt.bias
        enc = (efield << mb) | (N & ((1 << mb) - 1))
    else:                                    # subnormal (or zero after rounding)
        enc = N
    if enc > fmt.max_enc:
        return _overflow(sign, fmt, mode, satfinite)
    return sbit | enc


_pack_f = struct.Struct("<f").pack
_pack_e = struct.Struct("<e").pack
_unpack_I = struct.Struct("<I").unpack
_unpack_H = struct.Struct("<H").unpack
_pack_d = struct.Struct("<d").pack
_unpack_Q = struct.Struct("<Q").unpack


def from_float(x, fmt, mode="rn", satfinite=False):
    """Round the Python float x (taken as exact) into fmt; returns bits.

    NaN -> the format's canonical NaN; +-inf -> +-inf, or +-MAXNORM with
    satfinite (e4m3, which has no infinity, gives NaN without satfinite)."""
    if x != x:
        return fmt.canon_nan
    if mode == "rn" and not satfinite:
        n = fmt.name
        if n == "f32":
            try:
                return _unpack_I(_pack_f(x))[0]
            except OverflowError:
                return (0xFF800000 if x < 0 else 0x7F800000)
        if n == "f16":
            try:
                return _unpack_H(_pack_e(x))[0]
            except OverflowError:
                return (0xFC00 if x < 0 else 0x7C00)
        if n == "f64":
            return _unpack_Q(_pack_d(x))[0]
    sign = 1 if math.copysign(1.0, x) < 0 else 0
    if math.isinf(x):
        if satfinite:
            return (fmt.sign if sign else 0) | fmt.max_enc
        if fmt.inf is None:                  # e4m3 has no inf: NaN
            return (fmt.sign if sign else 0) | fmt.canon_nan
        return (fmt.sign if sign else 0) | fmt.inf
    if fmt.name == "f64":
        return _unpack_Q(_pack_d(x))[0]      # already exact
    num, den = abs(x).as_integer_ratio()
    E = -(den.bit_length() - 1)
    return round_exact(sign, num, E, fmt, mode, satfinite)


def to_exact(x):
    """A finite Python float as (sign, M, E) with x = (-1)^sign * M * 2^E."""
    sign = 1 if math.copysign(1.0, x) < 0 else 0
    num, den = abs(x).as_integer_ratio()
    return sign, num, -(den.bit_length() - 1)


def fma_exact(a, b, c, fmt, mode="rn", satfinite=False):
    """Correctly rounded a*b + c (floats) into fmt (single rounding)."""
    if a != a or b != b or c != c:
        return fmt.canon_nan
    if math.isinf(a) or math.isinf(b) or math.isinf(c):
        p = a * b                            # inf*0 -> nan, inf-inf -> nan
        return from_float(p + c, fmt, mode, satfinite)
    sa, ma, ea = to_exact(a)
    sb, mb, eb = to_exact(b)
    sc, mc, ec = to_exact(c)
    sp = sa ^ sb
    mp = ma * mb
    ep = ea + eb
    if mp == 0 and mc == 0:
        # exact zero: sign per IEEE (RN: +0 unless both negative zeros)
        if sp == sc:
            return fmt.sign if sp else 0
        return fmt.sign if mode == "rm" else 0
    # align to the smaller exponent
    e = min(ep, ec)
    vp = (mp << (ep - e)) * (-1 if sp else 1)
    vc = (mc << (ec - e)) * (-1 if sc else 1)
    v = vp + vc
    if v == 0:
        return fmt.sign if mode == "rm" else 0
    return round_exact(1 if v < 0 else 0, abs(v), e, fmt, mode, satfinite)


# ---------------------------------------------------------------------------
# min / max on bit patterns, PTX semantics (PTX ISA 9.7.3 / 9.7.4, max/min):
#   max_num(x, y): both NaN -> canonical NaN; one NaN -> the other input;
#                  else (x > y) ? x : y, where "+0.0 > -0.0 here".
#   .NaN modifier: any NaN input -> canonical NaN.

def fmax_bits(a, b, fmt, nan_mode=False, dec=None):
    dec = dec or (lambda v: decode(v, fmt))
    an = is_nan(a, fmt)
    bn = is_nan(b, fmt)
    if an or bn:
        if (an and bn) or nan_mode:
            return fmt.canon_nan
        return b if an else a
    fa = dec(a)
    fb = dec(b)
    if fa == fb:
        if fa == 0:                          # +0 > -0
            return a if not (a & fmt.sign) else b
        return b
    return a if fa > fb else b


def fmin_bits(a, b, fmt, nan_mode=False, dec=None):
    dec = dec or (lambda v: decode(v, fmt))
    an = is_nan(a, fmt)
    bn = is_nan(b, fmt)
    if an or bn:
        if (an and bn) or nan_mode:
            return fmt.canon_nan
        return b if an else a
    fa = dec(a)
    fb = dec(b)
    if fa == fb:
        if fa == 0:                          # -0 < +0
            return a if (a & fmt.sign) else b
        return b
    return a if fa < fb else b
