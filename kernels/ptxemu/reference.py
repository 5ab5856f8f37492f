"""Independent reference of the reduce semantics (NCCL 2.28 reduce_kernel.h),
written with numpy / ml_dtypes array arithmetic -- it shares no code with the
emulator's instruction semantics (ptxemu.fp / ops round with integers).

    dst[i] = post(pre_a(a[i]) OP pre_b(b[i]))
    flags bit 0: pre on a, bit 1: pre on b, bit 2: post.
    pre exists only in premulsum (x * s, s = the element-type value whose
    bits are `scalar`), post only in sumpostdiv (x / N truncated toward
    zero, N = `scalar`); every other op ignores flags and scalar.

Integers: wrapping add / multiply, max / min by value (signed per type).
float / double: IEEE round-to-nearest-even add / mul, max / min ignore one
NaN (fmaxf / fminf).  half / bfloat16: correctly rounded single operations
(numpy's float16 and ml_dtypes' bfloat16 compute in float32 and round once,
which is exact for +, * at these precisions).  fp8 (e4m3 = OCP E4M3FN, e5m2):
widen to half (exact), operate in half with RN, narrow back with RN and
satfinite (finite overflow and inf -> max finite, NaN -> NaN).
"""

import numpy as np
import ml_dtypes

__all__ = ["TYPES", "OPS", "TypeInfo", "reduce_ref", "compare", "decode_vals"]


class TypeInfo:
    def __init__(self, sfx, size, dtype, kind, signed=False):
        self.sfx = sfx
        self.size = size
        self.dtype = np.dtype(dtype)
        self.kind = kind                 # "int" | "float" | "fp8"
        self.signed = signed
        self.udtype = np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size])
        self.bits = 8 * size

    @property
    def is_float(self):
        return self.kind != "int"

    def __repr__(self):
        return self.sfx


TYPES = {
    "s8": TypeInfo("s8", 1, np.int8, "int", True),
    "u8": TypeInfo("u8", 1, np.uint8, "int"),
    "s32": TypeInfo("s32", 4, np.int32, "int", True),
    "u32": TypeInfo("u32", 4, np.uint32, "int"),
    "s64": TypeInfo("s64", 8, np.int64, "int", True),
    "u64": TypeInfo("u64", 8, np.uint64, "int"),
    "f16": TypeInfo("f16", 2, np.float16, "float"),
    "bf16": TypeInfo("bf16", 2, ml_dtypes.bfloat16, "float"),
    "f32": TypeInfo("f32", 4, np.float32, "float"),
    "f64": TypeInfo("f64", 8, np.float64, "float"),
    "e4m3": TypeInfo("e4m3", 1, ml_dtypes.float8_e4m3fn, "fp8"),
    "e5m2": TypeInfo("e5m2", 1, ml_dtypes.float8_e5m2, "fp8"),
}

INT_OPS = ("sum", "prod", "max", "min", "sumpostdiv")
FLOAT_OPS = ("sum", "prod", "max", "min", "premulsum")
OPS = {sfx: (FLOAT_OPS if t.is_float else INT_OPS) for sfx, t in TYPES.items()}


def _fp8_satfinite(h, ti):
    """half array -> fp8 with RN and satfinite (clip first: inf and finite
    overflow become +-max finite; NaN passes through np.clip)."""
    mx = float(ml_dtypes.finfo(ti.dtype).max)
    f = np.clip(h.astype(np.float32), -mx, mx)
    return f.astype(ti.dtype)


def _fmaxmin(a, b, op):
    """fmaxf / fminf as the GPU does them (PTX max/min): a single NaN input,
    quiet or signaling, is ignored; both NaN -> NaN.  (numpy's fmax follows
    IEEE 754-2008 maxNum on x86 and returns NaN for a signaling NaN input.)"""
    both = np.maximum(a, b) if op == "max" else np.minimum(a, b)
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, both))


def _int_div_trunc(x, n, ti):
    """x / n truncated toward zero, per element, in Python integers."""
    out = []
    for v in x.tolist():
        q = abs(v) // n
        out.append(-q if v < 0 else q)
    return np.array(out, dtype=object).astype(ti.dtype) if out else np.zeros(0, ti.dtype)


def reduce_ref(sfx, op, a_bits, b_bits, flags=0, scalar=0):
    """Expected result bits (array of the unsigned type of the same width)
    and a boolean mask of elements whose zero sign is unspecified (max/min of
    +0 and -0)."""
    ti = TYPES[sfx]
    a_bits = np.asarray(a_bits, dtype=ti.udtype)
    b_bits = np.asarray(b_bits, dtype=ti.udtype)
    lenient = np.zeros(a_bits.shape, dtype=bool)
    if op not in OPS[sfx]:
        raise ValueError("op %s is not defined for %s" % (op, sfx))
    with np.errstate(all="ignore"):
        if ti.kind == "int":
            a = a_bits.view(ti.dtype)
            b = b_bits.view(ti.dtype)
            if op in ("sum", "sumpostdiv"):
                r = a + b
            elif op == "prod":
                r = a * b
            elif op == "max":
                r = np.maximum(a, b)
            elif op == "min":
                r = np.minimum(a, b)
            if op == "sumpostdiv" and flags & 4:
                if scalar < 1:
                    raise ValueError("sumpostdiv needs N >= 1")
                r = _int_div_trunc(r, scalar, ti)
            return np.asarray(r, dtype=ti.dtype).view(ti.udtype), lenient
        if ti.kind == "float":
            a = a_bits.view(ti.dtype)
            b = b_bits.view(ti.dtype)
            s = np.array([scalar & ((1 << ti.bits) - 1)], dtype=ti.udtype).view(ti.dtype)[0]
            if op == "premulsum":
                if flags & 1:
                    a = a * s
                if flags & 2:
                    b = b * s
                r = a + b
            elif op == "sum":
                r = a + b
            elif op == "prod":
                r = a * b
            elif op in ("max", "min"):
                r = _fmaxmin(a, b, op)
                lenient = (a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b))
            r = np.asarray(r, dtype=ti.dtype)
            return r.view(ti.udtype), lenient
        # fp8: operate in half
        a8 = a_bits.view(ti.dtype)
        b8 = b_bits.view(ti.dtype)
        ha = a8.astype(np.float32).astype(np.float16)     # exact widening
        hb = b8.astype(np.float32).astype(np.float16)
        s8 = np.array([scalar & 0xFF], dtype=np.uint8).view(ti.dtype)
        hs = s8.astype(np.float32).astype(np.float16)[0]
        if op == "premulsum":
            if flags & 1:
                ha = _fp8_satfinite(ha * hs, ti).astype(np.float32).astype(np.float16)
            if flags & 2:
                hb = _fp8_satfinite(hb * hs, ti).astype(np.float32).astype(np.float16)
            h = ha + hb
        elif op == "sum":
            h = ha + hb
        elif op == "prod":
            h = ha * hb
        elif op in ("max", "min"):
            h = _fmaxmin(ha, hb, op)
            lenient = (ha == 0) & (hb == 0) & (np.signbit(ha) != np.signbit(hb))
        r = _fp8_satfinite(np.asarray(h, dtype=np.float16), ti)
        return r.view(ti.udtype), lenient


def decode_vals(sfx, bits):
    ti = TYPES[sfx]
    return np.asarray(bits, dtype=ti.udtype).view(ti.dtype)


def _isnan_bits(sfx, bits):
    ti = TYPES[sfx]
    if ti.kind == "int":
        return np.zeros(np.shape(bits), dtype=bool)
    with np.errstate(all="ignore"):
        return np.isnan(decode_vals(sfx, bits).astype(np.float64))


def compare(sfx, got_bits, exp_bits, lenient):
    """Indices where got differs from expected: bitwise, except that any NaN
    equals any NaN and, where `lenient`, +0 equals -0.
    Returns (bad_index_array, zero_sign_report) where zero_sign_report counts
    how the kernel resolved the lenient elements: {'+0': k, '-0': m}."""
    ti = TYPES[sfx]
    got = np.asarray(got_bits, dtype=ti.udtype)
    exp = np.asarray(exp_bits, dtype=ti.udtype)
    diff = got != exp
    if ti.kind != "int":
        both_nan = _isnan_bits(sfx, got) & _isnan_bits(sfx, exp)
        diff &= ~both_nan
        signbit = np.array(1 << (ti.bits - 1), dtype=ti.udtype)
        mag_got = got & ~signbit
        zs = {}
        if lenient.any():
            gz = lenient & (mag_got == 0)
            diff &= ~gz
            neg = (got & signbit) != 0
            zs = {"+0": int((gz & ~neg).sum()), "-0": int((gz & neg).sum())}
        return np.nonzero(diff)[0], zs
    return np.nonzero(diff)[0], {}
