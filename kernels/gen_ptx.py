#!/usr/bin/env python3
"""gen_ptx.py -- generate the reduce and exchange PTX kernels of ringreduce.

    python3 kernels/gen_ptx.py            write ptx/reduce_<sfx>.ptx for every type
    python3 kernels/gen_ptx.py --check    regenerate into a temporary directory and
                                          fail (with a diff) if a committed file differs
    python3 kernels/gen_ptx.py --out DIR  write into DIR instead of ptx/

Standard library only, deterministic output.  After regenerating, rebuild the
ahead-of-time images with `UPDATE_CUBINS=1 bash .ci/check-ptx.sh` and commit
the .ptx files together with ptx/sm_90/*.cubin.

Layout of this file:
  1. TYPES: the per-type table (one line per data type).
  2. The "combine" snippets: per type family, the PTX that computes
     x = x OP y on one 32/64-bit word of a 16-byte vector and on one scalar
     element, and the pre/post operations of premulsum / sumpostdiv.
  3. The two kernel templates, rr_reduce and rr_exchange, shared by every
     type and op.
  4. The file header template and main().

Adding a data type: one TYPES line (reusing a family when its arithmetic
fits, else a new family class with its combine snippets), then the host
element table (src/).  See CONTRIBUTING.md.
"""

import argparse
import difflib
import os
import sys
import tempfile

# ===========================================================================
# 1. The per-type table
# ===========================================================================

INT_OPS = ("sum", "prod", "max", "min", "sumpostdiv")
FLOAT_OPS = ("sum", "prod", "max", "min", "premulsum")


class Type:
    def __init__(self, sfx, ctype, size, family, arith, word, elem, ops, target, version):
        self.sfx = sfx          # kernel-name suffix and file name: ptx/reduce_<sfx>.ptx
        self.ctype = ctype      # the element type in C / NCCL terms (documentation)
        self.size = size        # element size in bytes
        self.family = family    # which combine snippets (section 2) compute its ops
        self.arith = arith      # PTX type the arithmetic is done in
        self.word = word        # PTX register type of one word of a 16-byte vector
        self.elem = elem        # PTX type of a scalar (head/tail) element load/store
        self.ops = ops          # the reduce ops ("devops") it has kernels for
        self.target = target    # .target: the lowest one that has every instruction used
        self.version = version  # .version: a PTX ISA version with that target and those instructions
                                #   (7.0 like the hand-written kernels where that is enough)


TYPES = [
    #    sfx     ctype             size family   arith     word    elem   ops        target   version
    Type("s8",   "int8_t",         1,   "int8",  "s32",    ".b32", ".s8",  INT_OPS,   "sm_70", "7.0"),
    Type("u8",   "uint8_t",        1,   "int8",  "u32",    ".b32", ".u8",  INT_OPS,   "sm_70", "7.0"),
    Type("s32",  "int32_t",        4,   "int",   "s32",    ".s32", ".s32", INT_OPS,   "sm_70", "7.0"),
    Type("u32",  "uint32_t",       4,   "int",   "u32",    ".u32", ".u32", INT_OPS,   "sm_70", "7.0"),
    Type("s64",  "int64_t",        8,   "int",   "s64",    ".s64", ".s64", INT_OPS,   "sm_70", "7.0"),
    Type("u64",  "uint64_t",       8,   "int",   "u64",    ".u64", ".u64", INT_OPS,   "sm_70", "7.0"),
    Type("f16",  "half",           2,   "half2", "f16",    ".b32", ".b16", FLOAT_OPS, "sm_80", "7.0"),
    Type("f32",  "float",          4,   "float", "f32",    ".f32", ".f32", FLOAT_OPS, "sm_70", "7.0"),
    Type("f64",  "double",         8,   "float", "f64",    ".f64", ".f64", FLOAT_OPS, "sm_70", "7.0"),
    Type("bf16", "__nv_bfloat16",  2,   "half2", "bf16",   ".b32", ".b16", FLOAT_OPS, "sm_90", "7.8"),
    Type("e4m3", "__nv_fp8_e4m3",  1,   "fp8",   "e4m3x2", ".b32", ".u8",  FLOAT_OPS, "sm_89", "8.1"),
    Type("e5m2", "__nv_fp8_e5m2",  1,   "fp8",   "e5m2x2", ".b32", ".u8",  FLOAT_OPS, "sm_89", "8.1"),
]

# Why each target (printed in the file header).
TARGET_WHY = {
    "sm_70": "sm_70 (PTX 6.0) is the first target with ld.acquire / st.release /\n"
             "ld.relaxed at .sys scope, which the exchange handshake uses; nothing\n"
             "else in this file needs more.",
    "sm_80": "sm_80: max.f16x2 / min.f16x2 (and max.f16 / min.f16) need sm_80\n"
             "(PTX 7.0); add/mul .f16x2 would run on sm_53 and the exchange needs sm_70.",
    "sm_89": "sm_89: cvt.rn.f16x2.e4m3x2 / .e5m2x2 and cvt.rn.satfinite.{e4m3x2,e5m2x2}.f16x2\n"
             "need sm_89 with PTX 8.1 (PTX 7.8 had them on sm_90 only; ptxas 13.0\n"
             "says so); the f16x2 arithmetic needs sm_80.",
    "sm_90": "sm_90: add.rn.bf16x2 / mul.rn.bf16x2 (and the scalar .bf16 forms)\n"
             "need sm_90 (PTX 7.8); max/min .bf16x2 need sm_80.",
}

# ===========================================================================
# Small emitters.  Every instruction line is "    <op padded to 19> <args>;",
# with an optional comment from column 56, as in the hand-written kernels.
# ===========================================================================


def ins(op, args="", comment=None):
    line = "    %-19s %s;" % (op, args) if args else "    %s;" % op
    if comment:
        line = line.ljust(55) + " // " + comment if len(line) < 55 else line + "  // " + comment
    return line


def cmt(text):
    return ["    // " + t if t else "    //" for t in text.split("\n")]


def label(name):
    return name + ":"


def log2(x):
    r = 0
    while (1 << r) < x:
        r += 1
    assert (1 << r) == x
    return r


def hex64(x):
    return "0x%016X" % (x & 0xFFFFFFFFFFFFFFFF)


# ===========================================================================
# 2. The combine snippets, per type family
#
# Interface (x, y are register names; all ops are in place on x):
#   decls(op)             extra .reg declarations: [(type, "names", comment)]
#   setup(op)             lines run once per thread (decode `scalar`);
#                         may use %rd_scalar (u64), %rd_tmp (u64), %r_tmp (u32)
#   word(op, x, y)        x = x OP y on one word of a vector (T.word registers)
#   elem(op, x, y)        x = x OP y on one scalar element (elem_reg registers)
#   elem_fixup(x)         after a scalar element load (fp8: copy the byte up)
#   pre_word(x) / pre_elem(x)     premulsum: x = x * s
#   post_word(x) / post_elem(x)   sumpostdiv: x = x / N
#   describe()            header text: how each op is computed on this type
# ===========================================================================


class Family:
    elem_reg = None

    def __init__(self, T):
        self.T = T

    def decls(self, op):
        return []

    def setup(self, op):
        return []

    def elem_fixup(self, x):
        return []


class FloatFam(Family):
    """f32, f64: one native instruction per element."""

    def __init__(self, T):
        super().__init__(T)
        self.t = T.arith
        self.elem_reg = "." + T.arith

    def _op(self, op):
        return {"sum": "add.rn", "prod": "mul.rn", "max": "max", "min": "min",
                "premulsum": "add.rn"}[op] + "." + self.t

    def decls(self, op):
        if op == "premulsum":
            return [("." + self.t, "%s_mul", "the premultiplier s")]
        return []

    def setup(self, op):
        if op != "premulsum":
            return []
        if self.t == "f32":
            return [ins("cvt.u32.u64", "%r_tmp, %rd_scalar", "s: the low 32 bits of `scalar`"),
                    ins("mov.b32", "%s_mul, %r_tmp")]
        return [ins("mov.b64", "%s_mul, %rd_scalar", "s: the 64 bits of `scalar`")]

    def word(self, op, x, y):
        return [ins(self._op(op), "%s, %s, %s" % (x, x, y))]

    elem = word

    def pre_word(self, x):
        return [ins("mul.rn." + self.t, "%s, %s, %%s_mul" % (x, x))]

    pre_elem = pre_word

    def describe(self):
        t = self.t
        return (
            "Arithmetic: one instruction per element, on .%s registers:\n"
            "    sum        add.rn.%s      (round to nearest even, like a CPU)\n"
            "    prod       mul.rn.%s\n"
            "    max / min  max.%s / min.%s (NaN-ignoring, like fmax / fmin)\n"
            "    premulsum  pre(x) = mul.rn.%s(x, s), then add.rn.%s; s is the %s\n"
            "               whose bits are in `scalar`.  .rn on both keeps ptxas from\n"
            "               fusing them into an fma (NCCL's semantics: round the product).\n"
            % (t, t, t, t, t, t, t, t))


class IntFam(Family):
    """s32, u32, s64, u64: one native instruction per element; the
    sumpostdiv division by a reciprocal multiply."""

    def __init__(self, T):
        super().__init__(T)
        self.t = T.arith                       # s32 / u32 / s64 / u64
        self.bits = 8 * T.size
        self.u = "u%d" % self.bits
        self.b = "b%d" % self.bits
        self.signed = self.t.startswith("s")
        self.elem_reg = "." + self.t

    def _op(self, op):
        return {"sum": "add", "prod": "mul.lo", "max": "max", "min": "min",
                "sumpostdiv": "add"}[op] + "." + self.t

    def decls(self, op):
        if op != "sumpostdiv":
            return []
        d = [("." + self.u, "%d_n, %d_m, %d_nm1", "divisor N, reciprocal m, N - 1"),
             ("." + self.b, "%t0, %t1, %t2", "scratch of the division"),
             (".pred", "%q0", "scratch: remainder >= N")]
        if self.bits == 32:
            d.append((".pred", "%q_big", "N does not fit in 32 bits"))
        return d

    def setup(self, op):
        if op != "sumpostdiv":
            return []
        if self.bits == 64:
            return [
                ins("mov.u64", "%d_n, %rd_scalar", "N"),
                ins("mov.u64", "%d_m, 0xFFFFFFFFFFFFFFFF"),
                ins("div.u64", "%d_m, %d_m, %d_n", "m = floor((2^64 - 1) / N)"),
                ins("sub.u64", "%d_nm1, %d_n, 1"),
            ]
        return [
            ins("setp.gt.u64", "%q_big, %rd_scalar, 0xFFFFFFFF", "N >= 2^32: every quotient is 0"),
            ins("min.u64", "%rd_tmp, %rd_scalar, 0xFFFFFFFF"),
            ins("cvt.u32.u64", "%d_n, %rd_tmp"),
            ins("mov.u32", "%d_m, 0xFFFFFFFF"),
            ins("div.u32", "%d_m, %d_m, %d_n", "m = floor((2^32 - 1) / N)"),
            ins("sub.u32", "%d_nm1, %d_n, 1"),
            ins("selp.u32", "%d_m, 0, %d_m, %q_big", "big N: m = 0, N = 0, N - 1 = 2^32 - 1,"),
            ins("selp.u32", "%d_n, 0, %d_n, %q_big", "  so q = 0 and the fixup never fires"),
            ins("selp.u32", "%d_nm1, 0xFFFFFFFF, %d_nm1, %q_big"),
        ]

    def word(self, op, x, y):
        return [ins(self._op(op), "%s, %s, %s" % (x, x, y))]

    elem = word

    def post_word(self, x):
        u, b, W = self.u, self.b, self.bits
        if self.signed:
            lines = [ins("abs.s%d" % W, "%%t0, %s" % x, "|x| (|MIN| = 2^%d as unsigned: right)" % (W - 1))]
            xa = "%t0"
        else:
            lines = []
            xa = x
        lines += [
            ins("mul.hi." + u, "%%t1, %s, %%d_m" % xa, "q = hi(|x| * m): |x|/N or one less"),
            ins("mul.lo." + u, "%t2, %t1, %d_n"),
            ins("sub." + u, "%%t2, %s, %%t2" % xa, "r = |x| - q*N"),
            ins("setp.gt." + u, "%q0, %t2, %d_nm1", "r >= N: q was one short"),
            ins("selp." + u, "%t2, 1, 0, %q0"),
        ]
        if self.signed:
            lines += [
                ins("add." + u, "%t1, %t1, %t2"),
                ins("shr.s%d" % W, "%%t2, %s, %d" % (x, W - 1), "0 or -1: the sign of x"),
                ins("xor." + b, "%t1, %t1, %t2"),
                ins("sub.s%d" % W, "%s, %%t1, %%t2" % x, "x = x < 0 ? -q : q"),
            ]
        else:
            lines += [ins("add." + u, "%s, %%t1, %%t2" % x)]
        return lines

    post_elem = post_word

    def describe(self):
        t, W = self.t, self.bits
        s = (
            "Arithmetic: one instruction per element, on .%s registers:\n"
            "    sum        add.%s         (wraps modulo 2^%d)\n"
            "    prod       mul.lo.%s      (the low %d bits of the product)\n"
            "    max / min  max.%s / min.%s\n"
            "    sumpostdiv add.%s, then post(x) = x / N truncated toward zero,\n"
            "               N = `scalar` (>= 1).  As NCCL: by a reciprocal,\n"
            "               m = floor((2^%d - 1) / N) once per thread, then per element\n"
            "               q = hi%d(|x| * m), which is |x|/N or one less (the error of m\n"
            "               is below 1/N and |x| < 2^%d), and q += 1 if |x| - q*N >= N.\n"
            % (t, t, W, t, W, t, t, t, W, W, W))
        if W == 32:
            s += ("               N >= 2^32 (every quotient 0) is handled by m = 0, N = 0 and\n"
                  "               comparing r > N - 1 with N - 1 = 2^32 - 1 (never true).\n")
        if self.signed:
            s += "               Signed: divide |x| (abs of MIN is 2^%d, right as unsigned),\n" % (W - 1)
            s += "               negate the quotient if x < 0.\n"
        return s


class Int8Fam(Family):
    """s8, u8: a 32-bit word holds 4 lanes; SWAR for sum and prod, one lane
    at a time (bfe/bfi) for max, min and the division.  Scalar elements are
    loaded sign/zero-extended into 32-bit registers and use 32-bit ops."""

    elem_reg = ".b32"

    def __init__(self, T):
        super().__init__(T)
        self.signed = T.arith == "s32"
        self.ext = "s32" if self.signed else "u32"

    def decls(self, op):
        d = [(".b32", "%t0, %t1, %t2, %t3", "scratch of the lane arithmetic")]
        if op == "sumpostdiv":
            d.append((".u32", "%d_m", "65536 / min(N, 65536) + 1"))
        return d

    def setup(self, op):
        if op != "sumpostdiv":
            return []
        return [
            ins("min.u64", "%rd_tmp, %rd_scalar, 65536", "N >= 65536 divides like 65536 here"),
            ins("cvt.u32.u64", "%r_tmp, %rd_tmp"),
            ins("mov.u32", "%d_m, 65536"),
            ins("div.u32", "%d_m, %d_m, %r_tmp"),
            ins("add.u32", "%d_m, %d_m, 1", "m = floor(2^16 / N) + 1"),
        ]

    def word(self, op, x, y):
        if op in ("sum", "sumpostdiv"):
            return [
                ins("and.b32", "%%t0, %s, 0x00FF00FF" % x, "lanes 0, 2 of x and y, each in"),
                ins("and.b32", "%%t1, %s, 0x00FF00FF" % y, "  a 16-bit field: the carry of"),
                ins("add.u32", "%t0, %t0, %t1", "  a lane lands in the byte above it"),
                ins("and.b32", "%%t1, %s, 0xFF00FF00" % x, "lanes 1, 3 likewise"),
                ins("and.b32", "%%t2, %s, 0xFF00FF00" % y),
                ins("add.u32", "%t1, %t1, %t2"),
                ins("prmt.b32", "%s, %%t0, %%t1, 0x7250" % x, "bytes 0, 2 of t0 and 1, 3 of t1"),
            ]
        if op == "prod":
            return [
                ins("mul.lo.u32", "%%t0, %s, %s" % (x, y), "byte 0: lane-0 product mod 256"),
                ins("and.b32", "%t0, %t0, 0xFF"),
                ins("and.b32", "%%t1, %s, 0xFF00" % x),
                ins("and.b32", "%%t2, %s, 0xFF00" % y),
                ins("mad.lo.u32", "%t0, %t1, %t2, %t0", "+ x1*y1 << 16: byte 2 = lane 1"),
                ins("and.b32", "%%t1, %s, 0xFF0000" % x),
                ins("and.b32", "%%t2, %s, 0xFF0000" % y),
                ins("mul.hi.u32", "%t3, %t1, %t2", "x2*y2 << 32 >> 32: byte 0 = lane 2"),
                ins("and.b32", "%%t1, %s, 0xFF000000" % x),
                ins("and.b32", "%%t2, %s, 0xFF000000" % y),
                ins("mad.hi.u32", "%t3, %t1, %t2, %t3", "+ x3*y3 << 16: byte 2 = lane 3"),
                ins("prmt.b32", "%s, %%t0, %%t3, 0x6420" % x, "bytes 0, 2 of t0 and 0, 2 of t3"),
            ]
        assert op in ("max", "min")
        lines = []
        for k in range(4):
            lines += [
                ins("bfe." + self.ext, "%%t0, %s, %d, 8" % (x, 8 * k), "lane %d of x and y, extended" % k if k == 0 else None),
                ins("bfe." + self.ext, "%%t1, %s, %d, 8" % (y, 8 * k)),
                ins("%s.%s" % (op, self.ext), "%t0, %t0, %t1"),
                ins("bfi.b32", "%s, %%t0, %s, %d, 8" % (x, x, 8 * k), "back into lane %d" % k if k == 0 else None),
            ]
        return lines

    def elem(self, op, x, y):
        o = {"sum": "add.u32", "sumpostdiv": "add.u32", "prod": "mul.lo.u32",
             "max": "max." + self.ext, "min": "min." + self.ext}[op]
        return [ins(o, "%s, %s, %s" % (x, x, y))]

    def _div_lane(self, dst, src):
        """dst = src / N for one lane value src (extended to 32 bits)."""
        if self.signed:
            return [
                ins("abs.s32", "%%t1, %s" % src),
                ins("mul.lo.u32", "%t1, %t1, %d_m"),
                ins("shr.u32", "%t1, %t1, 16", "|lane| / N"),
                ins("shr.s32", "%%t2, %s, 31" % src, "0 or -1: the sign of the lane"),
                ins("xor.b32", "%t1, %t1, %t2"),
                ins("sub.s32", "%s, %%t1, %%t2" % dst, "negate if the lane is < 0"),
            ]
        return [
            ins("mul.lo.u32", "%%t1, %s, %%d_m" % src),
            ins("shr.u32", "%s, %%t1, 16" % dst, "lane / N"),
        ]

    def post_word(self, x):
        lines = []
        for k in range(4):
            lines.append(ins("bfe." + self.ext, "%%t0, %s, %d, 8" % (x, 8 * k), "lane %d" % k))
            lines += self._div_lane("%t0", "%t0")
            lines.append(ins("bfi.b32", "%s, %%t0, %s, %d, 8" % (x, x, 8 * k)))
        return lines

    def post_elem(self, x):
        return ([ins("bfe." + self.ext, "%%t0, %s, 0, 8" % x, "the wrapped 8-bit sum, extended")]
                + self._div_lane(x, "%t0"))

    def describe(self):
        e = self.ext
        sgn = "signed" if self.signed else "unsigned"
        return (
            "Arithmetic: a 32-bit word of a vector holds 4 lanes (lane k = bits 8k..8k+7,\n"
            "the element at the lowest address in lane 0).  Scalar head/tail elements\n"
            "are loaded %s-extended into a 32-bit register and use 32-bit ops (the\n"
            "8-bit store keeps the low byte).  Each trick below was checked for all\n"
            "256 x 256 lane pairs, in every lane position:\n"
            "    sum        wrapping: lanes 0 and 2 (mask 0x00FF00FF) are added as two\n"
            "               16-bit fields, lanes 1 and 3 (mask 0xFF00FF00) likewise; a\n"
            "               lane's carry lands in the byte above it, which belongs to the\n"
            "               other half, and prmt 0x7250 keeps bytes 0, 2 of the first sum\n"
            "               and 1, 3 of the second (NCCL's byte_perm trick).\n"
            "    prod       the low 8 bits of each product (NCCL's trick): t0 = x*y & 0xFF\n"
            "               (lane 0), + (x & 0xFF00)*(y & 0xFF00) = x1*y1 << 16 (lane 1 in\n"
            "               byte 2); t3 = hi32((x & 0xFF0000)*(y & 0xFF0000)) = x2*y2\n"
            "               (byte 0), + hi32 of the lane-3 product = x3*y3 << 16 (byte 2,\n"
            "               no carry since x2*y2 < 2^16); prmt 0x6420 gathers bytes 0, 2\n"
            "               of t0 and 0, 2 of t3.\n"
            "    max / min  %s: per lane, bfe.%s both lanes, max/min.%s, bfi back.\n"
            "    sumpostdiv the wrapping sum, then post(lane) = lane / N truncated toward\n"
            "               zero, N = `scalar`: q = (|lane| * m) >> 16 with\n"
            "               m = floor(2^16 / min(N, 2^16)) + 1, exact for every |lane| <= 255\n"
            "               and N >= 1 (the error |lane| * (m - 2^16/N) / 2^16 stays below\n"
            "               1/N, checked for all N <= 2^16; larger N give 0 like 2^16)%s.\n"
            % ("sign" if self.signed else "zero", sgn, e, e,
               "; the\n               sign is put back with (q ^ s) - s, s = lane >> 31" if self.signed else ""))


class Half2Fam(Family):
    """f16, bf16: packed .f16x2 / .bf16x2 on 32-bit words (2 lanes), .f16 /
    .bf16 on the scalar elements."""

    elem_reg = ".b16"

    def __init__(self, T):
        super().__init__(T)
        self.t = T.arith        # f16 / bf16

    def _op(self, op, x2):
        t = self.t + ("x2" if x2 else "")
        return {"sum": "add.rn.", "prod": "mul.rn.", "max": "max.", "min": "min.",
                "premulsum": "add.rn."}[op] + t

    def decls(self, op):
        if op == "premulsum":
            return [(".b16", "%s_mul", "the premultiplier s (.%s)" % self.t),
                    (".b32", "%s_mul2", "{s, s}: s in both lanes")]
        return []

    def setup(self, op):
        if op != "premulsum":
            return []
        return [ins("cvt.u16.u64", "%s_mul, %rd_scalar", "s: the low 16 bits of `scalar`"),
                ins("mov.b32", "%s_mul2, {%s_mul, %s_mul}")]

    def word(self, op, x, y):
        return [ins(self._op(op, True), "%s, %s, %s" % (x, x, y))]

    def elem(self, op, x, y):
        return [ins(self._op(op, False), "%s, %s, %s" % (x, x, y))]

    def pre_word(self, x):
        return [ins("mul.rn.%sx2" % self.t, "%s, %s, %%s_mul2" % (x, x))]

    def pre_elem(self, x):
        return [ins("mul.rn.%s" % self.t, "%s, %s, %%s_mul" % (x, x))]

    def describe(self):
        t = self.t
        return (
            "Arithmetic: a 32-bit word of a vector holds 2 lanes (the element at the\n"
            "lower address in bits 0..15) and is computed with the packed .%sx2\n"
            "instructions; scalar head/tail elements use the .%s forms on .b16\n"
            "registers (the same rounding):\n"
            "    sum        add.rn.%sx2 / add.rn.%s\n"
            "    prod       mul.rn.%sx2 / mul.rn.%s\n"
            "    max / min  max.%sx2 / min.%sx2, max.%s / min.%s (NaN-ignoring)\n"
            "    premulsum  pre(x) = mul.rn.%sx2(x, {s, s}) (mul.rn.%s on a scalar), then\n"
            "               the sum; s = the low 16 bits of `scalar`.\n"
            % (t, t, t, t, t, t, t, t, t, t, t, t))


class Fp8Fam(Family):
    """e4m3, e5m2: NCCL computes them in half.  A 32-bit word holds 4 lanes =
    2 pairs; each pair is converted to .f16x2, computed there, and converted
    back with satfinite rounding."""

    elem_reg = ".b16"

    def __init__(self, T):
        super().__init__(T)
        self.f = T.arith                        # e4m3x2 / e5m2x2
        self.to_h = "cvt.rn.f16x2." + self.f
        self.to_8 = "cvt.rn.satfinite.%s.f16x2" % self.f

    def _op(self, op):
        return {"sum": "add.rn.f16x2", "prod": "mul.rn.f16x2", "max": "max.f16x2",
                "min": "min.f16x2", "premulsum": "add.rn.f16x2"}[op]

    def decls(self, op):
        d = [(".b16", "%h0, %h1, %h2, %h3", "fp8 pairs"),
             (".b32", "%t0, %t1", "f16x2 values")]
        if op == "premulsum":
            d.append((".b16", "%s_mul", "the premultiplier s, in both bytes"))
            d.append((".b32", "%s_mul2", "{half(s), half(s)}"))
        return d

    def setup(self, op):
        if op != "premulsum":
            return []
        return [
            ins("cvt.u16.u64", "%s_mul, %rd_scalar"),
            ins("and.b16", "%s_mul, %s_mul, 0xFF", "s: the low byte of `scalar`"),
            ins("shl.b16", "%h0, %s_mul, 8"),
            ins("or.b16", "%s_mul, %s_mul, %h0", "s in both bytes"),
            ins(self.to_h, "%s_mul2, %s_mul", "{half(s), half(s)}: exact"),
        ]

    def _pairs(self, x, body):
        """Unpack word x into 2 pairs, run body(pair) on each, repack."""
        lines = [ins("mov.b32", "{%%h0, %%h1}, %s" % x, "pairs: lanes 0,1 in h0, 2,3 in h1")]
        for h in ("%h0", "%h1"):
            lines += body(h)
        lines.append(ins("mov.b32", "%s, {%%h0, %%h1}" % x))
        return lines

    def word(self, op, x, y):
        lines = [ins("mov.b32", "{%%h0, %%h1}, %s" % x, "pairs: lanes 0,1 in h0, 2,3 in h1"),
                 ins("mov.b32", "{%%h2, %%h3}, %s" % y)]
        for hx, hy in (("%h0", "%h2"), ("%h1", "%h3")):
            lines += [ins(self.to_h, "%%t0, %s" % hx),
                      ins(self.to_h, "%%t1, %s" % hy),
                      ins(self._op(op), "%t0, %t0, %t1"),
                      ins(self.to_8, "%s, %%t0" % hx)]
        lines.append(ins("mov.b32", "%s, {%%h0, %%h1}" % x))
        return lines

    def elem(self, op, x, y):
        return [ins(self.to_h, "%%t0, %s" % x),
                ins(self.to_h, "%%t1, %s" % y),
                ins(self._op(op), "%t0, %t0, %t1"),
                ins(self.to_8, "%s, %%t0" % x)]

    def elem_fixup(self, x):
        return [ins("shl.b16", "%%h0, %s, 8" % x),
                ins("or.b16", "%s, %s, %%h0" % (x, x), "the byte in both halves")]

    def _pre_pair(self, h):
        return [ins(self.to_h, "%%t0, %s" % h),
                ins("mul.rn.f16x2", "%t0, %t0, %s_mul2"),
                ins(self.to_8, "%s, %%t0" % h, "rounded to fp8, as NCCL")]

    def pre_word(self, x):
        return self._pairs(x, self._pre_pair)

    def pre_elem(self, x):
        return self._pre_pair(x)

    def describe(self):
        f = self.f
        return (
            "Arithmetic: as NCCL on sm_90, in half precision.  A 32-bit word of a vector\n"
            "holds 4 lanes (the element at the lowest address in bits 0..7); mov.b32\n"
            "{h0, h1} splits it into two .b16 pairs (h0 = lanes 0, 1 = bits 0..15).\n"
            "Each pair goes through\n"
            "    cvt.rn.f16x2.%s      d, a   (exact widening)\n"
            "    <the f16x2 op>\n"
            "    cvt.rn.satfinite.%s.f16x2 a, d   (round to nearest even;\n"
            "         NaN -> NaN, beyond the finite range and +-Inf -> +-MAX_NORM)\n"
            "Byte/half order (PTX ISA, cvt): widening puts the fp8 value of bits 0..7\n"
            "of a into bits 0..15 of d and bits 8..15 into bits 16..31; narrowing maps\n"
            "bits 0..15 to bits 0..7 and 16..31 to 8..15.  Both keep lane order, so the\n"
            "vector path is right as long as the two conversions are each other's\n"
            "inverse in lane order.  The scalar head/tail loads one byte and copies it\n"
            "into both bytes of the pair (x | x << 8), so both lanes compute the same\n"
            "value and the byte stored (the low one) is right whatever the order.\n"
            "    sum        add.rn.f16x2     prod  mul.rn.f16x2\n"
            "    max / min  max.f16x2 / min.f16x2 (NaN-ignoring)\n"
            "    premulsum  pre(x) = fp8(half(x) * half(s)): the product is rounded to\n"
            "               fp8 (satfinite) before the sum, as NCCL's preOp does; s is\n"
            "               the low byte of `scalar`, widened exactly to half once.\n"
            % (f, f))


FAMILIES = {"float": FloatFam, "int": IntFam, "int8": Int8Fam, "half2": Half2Fam, "fp8": Fp8Fam}

# ===========================================================================
# 3. Kernel templates
# ===========================================================================

OP_FORMULA = {
    "sum": "a + b",
    "prod": "a * b",
    "max": "max(a, b)",
    "min": "min(a, b)",
    "premulsum": "pre_a(a) + pre_b(b),   pre(x) = x * s",
    "sumpostdiv": "post(a + b),           post(x) = x / N",
}


COMBINE_TEXT = {
    "sum": "a = a + b",
    "prod": "a = a * b",
    "max": "a = max(a, b)",
    "min": "a = min(a, b)",
    "premulsum": "a = a + b",
    "sumpostdiv": "a = a + b",
}


class Shape:
    """Per-type geometry of the 16-byte vectors."""

    def __init__(self, T):
        self.size = T.size
        self.lg = log2(T.size)             # log2(bytes per element)
        self.ve = 16 // T.size             # elements per 16-byte vector
        self.lgve = log2(self.ve)
        self.nw = 4 if T.size <= 4 else 2  # words per vector
        self.lanes = "xyzw"[: self.nw]
        self.vsfx = ".v%d%s" % (self.nw, T.word)   # e.g. .v4.f32

    def vec(self, prefix, v):
        return "{" + ", ".join("%%%s%d%s" % (prefix, v, l) for l in self.lanes) + "}"

    def words(self, prefix, v):
        return ["%%%s%d%s" % (prefix, v, l) for l in self.lanes]


def elem_offset(S, idx, out):
    """Byte offset of element idx: returns the register holding it, and
    appends the shift (if any) to out."""
    if S.lg == 0:
        return idx
    out.append(ins("shl.b64", "%%rd_off, %s, %d" % (idx, S.lg),
                   "%d bytes per element" % S.size))
    return "%rd_off"


def bare(lines):
    """The same instructions without their trailing comments: a snippet
    repeated for the next words of a block is commented only once."""
    out = []
    for l in lines:
        if not l.lstrip().startswith("//") and "//" in l:
            l = l[: l.index("//")].rstrip()
        out.append(l)
    return out


def per_words(S, vs, prefix, fn):
    """fn(word) for every word of vectors vs; comments on the first only."""
    out = []
    for v in vs:
        for w in S.words(prefix, v):
            lines = fn(w)
            out += lines if not out else bare(lines)
    return out


def guarded(pred, lbl, body, what):
    """`if (pred) { body }`.  A uniform branch (bra.uni) where pred comes
    from a kernel parameter, the same in every thread; a plain branch where
    it also depends on the thread's progress (set STEP_PREDICATES)."""
    br = "bra" if pred in STEP_PREDICATES else "bra.uni"
    return cmt(what) + [ins("@!%s %s" % (pred, br), lbl)] + body + [label(lbl)]


# Predicates that the kernel being generated recomputes per step
# (ringll_kernel sets and clears it): threads of a warp may be at different
# steps there, so a branch on them is not uniform.
STEP_PREDICATES = set()


def pre_post_words(F, op, S, vs, a, b, tag):
    """pre on the a and b vectors (premulsum), for vectors vs."""
    out = []
    if op == "premulsum":
        out += guarded("%p_pre_a", tag + "_PRE_A", per_words(S, vs, a, F.pre_word),
                       "pre: a = a * s, if flags bit 0")
        out += guarded("%p_pre_b", tag + "_PRE_B", per_words(S, vs, b, F.pre_word),
                       "pre: b = b * s, if flags bit 1")
    return out


def post_words(F, op, S, vs, a, tag):
    if op != "sumpostdiv":
        return []
    return guarded("%p_post", tag + "_POST", per_words(S, vs, a, F.post_word),
                   "post: x = x / N, if flags bit 2")


def combine_words(F, op, S, vs, a, b):
    out = []
    for v in vs:
        for wa, wb in zip(S.words(a, v), S.words(b, v)):
            lines = F.word(op, wa, wb)
            out += lines if not out else bare(lines)
    if len(F.word(op, "%a0x", "%b0x")) > 1:
        out = cmt("%s, word by word (see the header)" % COMBINE_TEXT[op]) + out
    return out


def elem_compute(F, op, tag):
    """%e_a = post(pre_a(%e_a) OP pre_b(%e_b)) on one scalar element."""
    out = F.elem_fixup("%e_a") + F.elem_fixup("%e_b")
    if op == "premulsum":
        out += guarded("%p_pre_a", tag + "_PRE_A", F.pre_elem("%e_a"), "pre: a = a * s, if flags bit 0")
        out += guarded("%p_pre_b", tag + "_PRE_B", F.pre_elem("%e_b"), "pre: b = b * s, if flags bit 1")
    out += F.elem(op, "%e_a", "%e_b")
    if op == "sumpostdiv":
        out += guarded("%p_post", tag + "_POST", F.post_elem("%e_a"), "post: x = x / N, if flags bit 2")
    return out


class Sections:
    """A kernel's numbered section headers: `section(title, text)` gives the
    next "---- N. title ----" comment (and `text` below it); `next()` takes
    a number for a header written elsewhere (op_setup's)."""

    def __init__(self):
        self.n = 0

    def next(self):
        self.n += 1
        return self.n

    def __call__(self, title, text=None):
        head = "---- %d. %s " % (self.next(), title)
        lines = cmt(head + "-" * max(4, 66 - len(head)))
        if text:
            lines += cmt(text)
        return lines


def decl(typ, names, comment=None):
    line = "    .reg %-6s %s;" % (typ, names)
    if comment:
        line = line.ljust(32) + "// " + comment if len(line) < 31 else line + "  // " + comment
    return line


def op_decls(F, op):
    out = []
    if op == "premulsum":
        out.append(decl(".pred", "%p_pre_a, %p_pre_b", "flags bits 0, 1: apply pre to a, b"))
    if op == "sumpostdiv":
        out.append(decl(".pred", "%p_post", "flags bit 2: apply post"))
    if op in ("premulsum", "sumpostdiv"):
        out.append(decl(".u64", "%rd_flags, %rd_scalar", "the flags and scalar parameters"))
    for typ, names, c in F.decls(op):
        out.append(decl(typ, names, c))
    return out


def op_setup(F, op, T, num):
    """The section that turns flags/scalar into predicates and constants."""
    if op == "premulsum":
        lines = cmt(("---- %d. flags and the premultiplier " % num).ljust(66, "-"))
        lines += cmt(
            "flags bit 0: apply pre to a, bit 1: to b.  A cleared flag leaves its\n"
            "operand bit for bit unchanged: the loops skip the multiply with a\n"
            "uniform branch (flags is a kernel parameter, the same in every\n"
            "thread) rather than multiply by 1, which is not the identity for\n"
            "every input (NaN payloads%s)." % (
                "; e5m2 +-Inf becomes MAX_NORM through satfinite" if T.family == "fp8" else ""))
        lines += [ins("and.b64", "%rd_tmp, %rd_flags, 1"),
                  ins("setp.ne.u64", "%p_pre_a, %rd_tmp, 0"),
                  ins("and.b64", "%rd_tmp, %rd_flags, 2"),
                  ins("setp.ne.u64", "%p_pre_b, %rd_tmp, 0")]
        return lines + F.setup(op)
    if op == "sumpostdiv":
        lines = cmt(("---- %d. flags and the divisor " % num).ljust(66, "-"))
        lines += cmt(
            "flags bit 2: apply post (x / N) to the result; when clear the kernel\n"
            "is a plain sum (a uniform branch skips the division).  N = scalar.")
        lines += [ins("and.b64", "%rd_tmp, %rd_flags, 4"),
                  ins("setp.ne.u64", "%p_post, %rd_tmp, 0")]
        return lines + F.setup(op)
    return []


# ---------------------------------------------------------------------------
# rr_reduce
# ---------------------------------------------------------------------------


def reduce_kernel(T, op):
    F = FAMILIES[T.family](T)
    S = Shape(T)
    name = "rr_reduce_%s_%s" % (op, T.sfx)
    has_arg = op in ("premulsum", "sumpostdiv")
    o = []
    o += ["//", "// %s: dst[i] = %s" % (name, OP_FORMULA[op]), "//"]
    o.append(".visible .entry %s(" % name)
    o += [
        "    .param .u64 dst,            // %s* output (may equal a)" % T.ctype,
        "    .param .u64 a,              // const %s* first input" % T.ctype,
        "    .param .u64 b,              // const %s* second input (read-only)" % T.ctype,
        "    .param .u64 n,              // number of elements",
        "    .param .u64 flags,          // %s" % ("bit 0: pre on a, bit 1: pre on b" if op == "premulsum"
                                                    else "bit 2: post on the result" if op == "sumpostdiv"
                                                    else "ignored by this op"),
        "    .param .u64 scalar          // %s" % ("bits of s (%s)" % T.ctype if op == "premulsum"
                                                    else "the divisor N >= 1" if op == "sumpostdiv"
                                                    else "ignored by this op"),
        ")",
        "{",
    ]
    wl = S.lanes
    o += cmt("---- Register declarations ".ljust(66, "-"))
    o += [
        decl(".pred", "%p_fast", "true: same misalignment -> vector path"),
        decl(".pred", "%p_same", "scratch for the alignment tests"),
        decl(".pred", "%p_done", "loop-exit test"),
        "",
        decl(".u32", "%r_tid", "threadIdx.x"),
        decl(".u32", "%r_ntid", "blockDim.x"),
        decl(".u32", "%r_ctaid", "blockIdx.x"),
        decl(".u32", "%r_nctaid", "gridDim.x"),
    ]
    if has_arg:
        o.append(decl(".u32", "%r_tmp", "scratch"))
    o += [
        "",
        decl(".u64", "%rd_dst", "global address of dst[0]"),
        decl(".u64", "%rd_a", "global address of a[0]"),
        decl(".u64", "%rd_b", "global address of b[0]"),
        decl(".u64", "%rd_n", "element count"),
        decl(".u64", "%rd_gtid", "global thread index (64-bit)"),
        decl(".u64", "%rd_stride", "total threads in the grid (64-bit)"),
        decl(".u64", "%rd_tmp", "scratch"),
        decl(".u64", "%rd_mis", "dst address mod 16 (bytes)"),
        "",
        decl(".u64", "%rd_h", "head length in elements (0..%d)" % (S.ve - 1)),
        decl(".u64", "%rd_nvec", "number of 16-byte vectors in the body"),
        decl(".u64", "%rd_tail", "first element index of the tail"),
        decl(".u64", "%rd_i", "scalar loop index (elements)"),
        decl(".u64", "%rd_off", "byte offset of element i"),
        decl(".u64", "%rd_pd", "&dst[i]"),
        decl(".u64", "%rd_pa", "&a[i]"),
        decl(".u64", "%rd_pb", "&b[i]"),
        decl(F.elem_reg, "%e_a", "a[i]"),
        decl(F.elem_reg, "%e_b", "b[i]"),
        "",
        decl(".u64", "%rd_vd", "global address of the first body vector, dst"),
        decl(".u64", "%rd_va", "  ... of a"),
        decl(".u64", "%rd_vb", "  ... of b"),
        decl(".u64", "%rd_v", "vector loop index (16-byte units)"),
        decl(".u64", "%rd_stride3", "3 * stride   (last vector of an x4 step)"),
        decl(".u64", "%rd_stride4", "4 * stride   (x4 loop increment)"),
        decl(".u64", "%rd_sbytes", "16 * stride  (bytes between a thread's vectors)"),
        "    .reg .u64   %rd_pd0, %rd_pd1, %rd_pd2, %rd_pd3;  // dst vector addresses",
        "    .reg .u64   %rd_pa0, %rd_pa1, %rd_pa2, %rd_pa3;  // a   vector addresses",
        "    .reg .u64   %rd_pb0, %rd_pb1, %rd_pb2, %rd_pb3;  // b   vector addresses",
        "",
    ]
    o += cmt("Four 16-byte vectors of a and four of b (%s words of %s each)."
             % (", ".join(wl), T.word[1:]))
    for p in "ab":
        regs = ["%%%s%d%s" % (p, v, l) for v in range(4) for l in wl]
        half = len(regs) // 2
        o.append("    .reg %-6s %s;" % (T.word, ", ".join(regs[:half])))
        o.append("    .reg %-6s %s;" % (T.word, ", ".join(regs[half:])))
    extra = op_decls(F, op)
    if extra:
        o += [""] + cmt("The op's own registers.") + extra
    o.append("")

    section = Sections()

    # 1. Parameters
    o += section("Parameters",
                 "The host passes generic addresses; ld/st.global want global-window\n"
                 "addresses, so convert once here (a no-op on current GPUs, but it is\n"
                 "what the PTX spec requires).")
    o += [ins("ld.param.u64", "%rd_dst, [dst]"),
          ins("ld.param.u64", "%rd_a,   [a]"),
          ins("ld.param.u64", "%rd_b,   [b]"),
          ins("ld.param.u64", "%rd_n,   [n]")]
    if has_arg:
        o += [ins("ld.param.u64", "%rd_flags,  [flags]"),
              ins("ld.param.u64", "%rd_scalar, [scalar]")]
    o += [ins("cvta.to.global.u64", "%rd_dst, %rd_dst"),
          ins("cvta.to.global.u64", "%rd_a,   %rd_a"),
          ins("cvta.to.global.u64", "%rd_b,   %rd_b"),
          ""]

    # 2. Thread index
    o += section("Global thread index and grid stride, in 64 bits",
                 "gtid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x *\n"
                 "blockDim.x.  mul.wide gives the full 64-bit product, so this is exact\n"
                 "for any launch shape (the product can exceed 2^32).")
    o += [ins("mov.u32", "%r_tid,    %tid.x"),
          ins("mov.u32", "%r_ntid,   %ntid.x"),
          ins("mov.u32", "%r_ctaid,  %ctaid.x"),
          ins("mov.u32", "%r_nctaid, %nctaid.x"),
          ins("mul.wide.u32", "%rd_gtid,   %r_ctaid,  %r_ntid"),
          ins("cvt.u64.u32", "%rd_tmp,    %r_tid"),
          ins("add.u64", "%rd_gtid,   %rd_gtid,  %rd_tmp"),
          ins("mul.wide.u32", "%rd_stride, %r_nctaid, %r_ntid"),
          ""]

    # 3. Op setup
    if has_arg:
        o += op_setup(F, op, T, section.next()) + [""]

    # Pick the path
    if S.size > 1:
        txt = ("Fast path iff a and b have the same address mod 16 as dst, and all\n"
               "three are %d-byte aligned (true for any %s array; checked anyway so\n"
               "that a bad pointer cannot turn into a misaligned vector access).\n"
               "Once a and b match dst mod 16, testing dst mod %d covers all three."
               % (S.size, T.ctype, S.size))
    else:
        txt = ("Fast path iff a and b have the same address mod 16 as dst (1-byte\n"
               "elements: any address is aligned for them).")
    o += section("Pick the path", txt)
    o += [ins("and.b64", "%rd_mis, %rd_dst, 15"),
          ins("and.b64", "%rd_tmp, %rd_a,   15"),
          ins("setp.eq.u64", "%p_fast, %rd_tmp, %rd_mis"),
          ins("and.b64", "%rd_tmp, %rd_b,   15"),
          ins("setp.eq.u64", "%p_same, %rd_tmp, %rd_mis"),
          ins("and.pred", "%p_fast, %p_fast, %p_same")]
    if S.size > 1:
        o += [ins("and.b64", "%%rd_tmp, %%rd_mis, %d" % (S.size - 1)),
              ins("setp.eq.u64", "%p_same, %rd_tmp, 0"),
              ins("and.pred", "%p_fast, %p_fast, %p_same")]
    o += [""]
    o += cmt("Slow path: no common 16-byte boundary, so do every element in the\n"
             "scalar loop (the tail loop below, started at element 0).")
    o += [ins("mov.u64", "%rd_tail, 0"),
          ins("@!%p_fast bra", "SCALAR_TAIL"),
          ""]

    def scalar_body(tag):
        out = []
        off = elem_offset(S, "%rd_i", out)
        out += [ins("add.u64", "%%rd_pa, %%rd_a,   %s" % off),
                ins("add.u64", "%%rd_pb, %%rd_b,   %s" % off),
                ins("add.u64", "%%rd_pd, %%rd_dst, %s" % off),
                ins("ld.global" + T.elem, "%e_a, [%rd_pa]"),
                ins("ld.global.nc" + T.elem, "%e_b, [%rd_pb]")]
        out += elem_compute(F, op, tag)
        out += [ins("st.global" + T.elem, "[%rd_pd], %e_a")]
        return out

    # Head
    hb = "Bytes to the boundary = (-dst) mod 16"
    if S.size > 1:
        hb += ", a multiple of %d, so\nh = ((-dst) & 15) / %d elements (0..%d)" % (S.size, S.size, S.ve - 1)
    else:
        hb += ", so h = (-dst) & 15\nelements (0..15)"
    o += section("Head: scalar elements up to the first 16-byte boundary",
                 hb + ", clamped to n for tiny arrays.\n"
                 "Usually the first h threads do one element each; it is still a\n"
                 "grid-stride loop so a grid of fewer than %d threads is also correct." % (S.ve - 1))
    o += [ins("neg.s64", "%rd_h, %rd_dst"),
          ins("and.b64", "%rd_h, %rd_h, 15")]
    if S.lg:
        o += [ins("shr.u64", "%%rd_h, %%rd_h, %d" % S.lg)]
    o += [ins("min.u64", "%rd_h, %rd_h, %rd_n"),
          "",
          ins("mov.u64", "%rd_i, %rd_gtid"),
          label("HEAD_LOOP"),
          ins("setp.ge.u64", "%p_done, %rd_i, %rd_h"),
          ins("@%p_done bra", "HEAD_DONE")]
    o += scalar_body("HEAD")
    o += [ins("add.u64", "%rd_i, %rd_i, %rd_stride"),
          ins("bra.uni", "HEAD_LOOP"),
          label("HEAD_DONE"),
          ""]

    # Body setup
    o += section("Body setup",
                 "The body starts at element h (16-byte aligned in all three arrays)\n"
                 "and holds nvec = (n - h) / %d whole 16-byte vectors; whatever is left,\n"
                 "(n - h) mod %d elements, is the tail starting at h + %d * nvec."
                 % (S.ve, S.ve, S.ve))
    o += [ins("sub.u64", "%rd_nvec, %rd_n, %rd_h"),
          ins("shr.u64", "%%rd_nvec, %%rd_nvec, %d" % S.lgve),
          ins("shl.b64", "%%rd_tail, %%rd_nvec, %d" % S.lgve),
          ins("add.u64", "%rd_tail, %rd_tail, %rd_h"),
          ""]
    if S.lg:
        o += [ins("shl.b64", "%%rd_tmp, %%rd_h, %d" % S.lg, "head size in bytes")]
        hbytes = "%rd_tmp"
    else:
        hbytes = "%rd_h"
    o += [ins("add.u64", "%%rd_vd, %%rd_dst, %s" % hbytes, None if S.lg else "head size in bytes = h"),
          ins("add.u64", "%%rd_va, %%rd_a,   %s" % hbytes),
          ins("add.u64", "%%rd_vb, %%rd_b,   %s" % hbytes),
          ""]
    o += cmt("Vector v of this thread lives at byte v * 16; the thread's next\n"
             "vectors are stride, 2*stride, 3*stride further on (16*stride bytes\n"
             "apart).  Consecutive threads touch consecutive 16-byte vectors, so\n"
             "each warp-wide load is one fully coalesced 512-byte access.")
    o += [ins("mov.u64", "%rd_v, %rd_gtid"),
          ins("mul.lo.u64", "%rd_stride3, %rd_stride, 3"),
          ins("shl.b64", "%rd_stride4, %rd_stride, 2"),
          ins("shl.b64", "%rd_sbytes,  %rd_stride, 4"),
          ""]

    # Body x4
    o += section("Body, unrolled x4: 4 vectors per thread per iteration",
                 "Runs while this thread's 4th vector (v + 3*stride) still exists.\n"
                 "All 8 loads (4 of a, 4 of b) are written before any arithmetic, so\n"
                 "each thread can keep up to 128 bytes of loads in flight; that hides\n"
                 "DRAM latency even with only a few blocks per SM.  (ptxas is free to\n"
                 "reschedule; for the f32 sum it issues 5 loads, then the rest after\n"
                 "the first add, and that loop measured ~4.1-4.3 TB/s on an H200, the\n"
                 "speed of a device-to-device copy.)\n"
                 "\n"
                 "Cache hints: b goes through ld.global.nc (read-only data path),\n"
                 "which the contract allows because b is never written during the\n"
                 "kernel.  a may alias dst, so it must use a plain coherent load.\n"
                 "No .cs (evict-first) hints: in a ring the freshly reduced dst chunk\n"
                 "is sent to the next rank right afterwards, so we want it to stay in\n"
                 "L2, and evict-first on b has not been measured to help.")
    o += [label("VEC4_LOOP"),
          ins("add.u64", "%rd_tmp, %rd_v, %rd_stride3"),
          ins("setp.ge.u64", "%p_done, %rd_tmp, %rd_nvec"),
          ins("@%p_done bra", "VEC4_DONE"),
          "",
          ins("shl.b64", "%rd_off, %rd_v, 4", "16 bytes per vector"),
          ins("add.u64", "%rd_pa0, %rd_va, %rd_off"),
          ins("add.u64", "%rd_pa1, %rd_pa0, %rd_sbytes"),
          ins("add.u64", "%rd_pa2, %rd_pa1, %rd_sbytes"),
          ins("add.u64", "%rd_pa3, %rd_pa2, %rd_sbytes"),
          ins("add.u64", "%rd_pb0, %rd_vb, %rd_off"),
          ins("add.u64", "%rd_pb1, %rd_pb0, %rd_sbytes"),
          ins("add.u64", "%rd_pb2, %rd_pb1, %rd_sbytes"),
          ins("add.u64", "%rd_pb3, %rd_pb2, %rd_sbytes"),
          ""]
    for v in range(4):
        o.append(ins("ld.global" + S.vsfx, "%s, [%%rd_pa%d]" % (S.vec("a", v), v)))
    for v in range(4):
        o.append(ins("ld.global.nc" + S.vsfx, "%s, [%%rd_pb%d]" % (S.vec("b", v), v)))
    o.append("")
    pp = pre_post_words(F, op, S, range(4), "a", "b", "VEC4")
    if pp:
        o += pp + [""]
    o += combine_words(F, op, S, range(4), "a", "b")
    o.append("")
    pw = post_words(F, op, S, range(4), "a", "VEC4")
    if pw:
        o += pw + [""]
    o += cmt("The stores come after all loads of this iteration, so when dst == a\n"
             "each thread only ever overwrites vectors it has already read.")
    o += [ins("add.u64", "%rd_pd0, %rd_vd, %rd_off"),
          ins("add.u64", "%rd_pd1, %rd_pd0, %rd_sbytes"),
          ins("add.u64", "%rd_pd2, %rd_pd1, %rd_sbytes"),
          ins("add.u64", "%rd_pd3, %rd_pd2, %rd_sbytes")]
    for v in range(4):
        o.append(ins("st.global" + S.vsfx, "[%%rd_pd%d], %s" % (v, S.vec("a", v))))
    o += ["",
          ins("add.u64", "%rd_v, %rd_v, %rd_stride4"),
          ins("bra.uni", "VEC4_LOOP"),
          label("VEC4_DONE"),
          ""]

    # Body remainder
    o += section("Body remainder: the last 0..3 vectors of this thread",
                 "Fewer than 4 of this thread's vectors are left (v, v + stride, ...\n"
                 "below nvec); do them one vector at a time.  This also covers\n"
                 "nvec not being a multiple of 4 * stride, and an odd nvec.")
    o += [label("VEC1_LOOP"),
          ins("setp.ge.u64", "%p_done, %rd_v, %rd_nvec"),
          ins("@%p_done bra", "VEC1_DONE"),
          ins("shl.b64", "%rd_off, %rd_v, 4"),
          ins("add.u64", "%rd_pa0, %rd_va, %rd_off"),
          ins("add.u64", "%rd_pb0, %rd_vb, %rd_off"),
          ins("add.u64", "%rd_pd0, %rd_vd, %rd_off"),
          ins("ld.global" + S.vsfx, "%s, [%%rd_pa0]" % S.vec("a", 0)),
          ins("ld.global.nc" + S.vsfx, "%s, [%%rd_pb0]" % S.vec("b", 0))]
    o += pre_post_words(F, op, S, [0], "a", "b", "VEC1")
    o += combine_words(F, op, S, [0], "a", "b")
    o += post_words(F, op, S, [0], "a", "VEC1")
    o += [ins("st.global" + S.vsfx, "[%%rd_pd0], %s" % S.vec("a", 0)),
          ins("add.u64", "%rd_v, %rd_v, %rd_stride"),
          ins("bra.uni", "VEC1_LOOP"),
          label("VEC1_DONE"),
          ""]

    # Tail
    o += section("Tail (and the whole slow path)",
                 "Scalar grid-stride loop over elements tail .. n-1.  On the fast path\n"
                 "that is the (n - h) mod %d elements after the body; on the slow path\n"
                 "tail = 0 and this loop does all n elements.  n == 0 (or an empty\n"
                 "tail) simply makes every loop exit at once." % S.ve)
    o += [label("SCALAR_TAIL"),
          ins("add.u64", "%rd_i, %rd_tail, %rd_gtid"),
          label("TAIL_LOOP"),
          ins("setp.ge.u64", "%p_done, %rd_i, %rd_n"),
          ins("@%p_done bra", "TAIL_DONE")]
    o += scalar_body("TAIL")
    o += [ins("add.u64", "%rd_i, %rd_i, %rd_stride"),
          ins("bra.uni", "TAIL_LOOP"),
          label("TAIL_DONE"),
          ins("ret"),
          "}"]
    return o


# ---------------------------------------------------------------------------
# rr_exchange
# ---------------------------------------------------------------------------

# Read the on-chip clock every 2^SPIN_LOG2 spins; read the host-mapped
# control block (abort word, deadline) only once HOST_POLL_NS have passed
# since the wait began, and then at most once per HOST_POLL_NS.  1 ms, not
# the 20 us of session 4: with one process per GPU the two ranks' launches
# are often more than 20 us apart, and the host reads then put the in-place
# one-shot into a slow mode of 150-190 us per call (2 x H200, docs/lab/perf-notes.md).
# An abort or a deadline is noticed within 1 ms, far inside any timeout.
SPIN_LOG2 = 5
HOST_POLL_NS = 1000000


def kernel_params(pointers, values, has_arg):
    """The parameter loads of a kernel that waits on other ranks: its
    pointers, its values, flags and scalar (for the ops that use them) and
    the control block, then every pointer converted to a global-window
    address (ctrl is host-mapped memory, also in that window)."""
    def load(reg, name):
        return ins("ld.param.u64", "%s [%s]" % ((reg + ",").ljust(8), name))

    def cvta(reg, comment=None):
        return ins("cvta.to.global.u64", "%s %s" % ((reg + ",").ljust(8), reg), comment)

    out = [load(r, n) for r, n in pointers + values]
    if has_arg:
        out += [ins("ld.param.u64", "%rd_flags,  [flags]"),
                ins("ld.param.u64", "%rd_scalar, [scalar]")]
    out.append(load("%rd_ctrl", "ctrl"))
    out += [cvta(r) for r, _ in pointers]
    out.append(cvta("%rd_ctrl", "host-mapped: also in the global window"))
    return out


def thread_indices():
    """The exchange kernels' thread and block indices, and p_t0."""
    return [ins("mov.u32", "%r_tid,    %tid.x"),
            ins("mov.u32", "%r_ntid,   %ntid.x"),
            ins("mov.u32", "%r_ctaid,  %ctaid.x"),
            ins("mov.u32", "%r_nctaid, %nctaid.x"),
            ins("cvt.u64.u32", "%rd_tid,   %r_tid"),
            ins("cvt.u64.u32", "%rd_ntid,  %r_ntid"),
            ins("setp.eq.u32", "%p_t0,     %r_tid, 0"),
            ""]


def spin_count(p, loop, spin):
    """Count a spin; back to `loop` unless the count is a multiple of `spin`
    (a power of two): the rarer checks of a wait run once per `spin` polls."""
    return [ins("add.u32", "%r_spin, %r_spin, 1"),
            ins("and.b32", "%%r_tmp, %%r_spin, %d" % (spin - 1)),
            ins("setp.ne.u32", "%s, %%r_tmp, 0" % p),
            ins("@%s bra" % p, loop, "spins not a multiple of %d: spin again" % spin)]


def host_verdict(p, loop, fail, t0=None):
    """A wait's read of the host-mapped control block (%rd_ctrl: u32 abort at
    0, u64 timeout_ns at 8): to `fail` with %r_status = 2 on abort; back to
    `loop` without a deadline or within it (%rd_t is now, the wait began at
    %rd_t0, loaded from shared `t0` first when given); else falls through
    with %r_status = 1 (timed out)."""
    o = [ins("ld.relaxed.sys.global.u32", "%r_tmp, [%rd_ctrl]", "abort?"),
         ins("mov.u32", "%r_status, 2"),
         ins("setp.ne.u32", "%s, %%r_tmp, 0" % p),
         ins("@%s bra" % p, fail),
         ins("ld.relaxed.sys.global.u64", "%rd_timeout, [%rd_ctrl+8]", "the deadline, read only now"),
         ins("setp.eq.u64", "%s, %%rd_timeout, 0" % p),
         ins("@%s bra" % p, loop, "no deadline: spin again")]
    if t0:
        o.append(ins("ld.shared.u64", "%%rd_t0, %s" % t0, "the start of the call"))
    return o + [ins("sub.u64", "%rd_t, %rd_t, %rd_t0"),
                ins("setp.lt.u64", "%s, %%rd_t, %%rd_timeout" % p),
                ins("@%s bra" % p, loop, "within the deadline: spin again"),
                ins("mov.u32", "%r_status, 1", "timed out")]


def exchange_kernel(T, op):
    """rr_exchange: the 2-rank exchange, one call per launch."""
    F = FAMILIES[T.family](T)
    S = Shape(T)
    name = "rr_exchange_%s_%s" % (op, T.sfx)
    has_arg = op in ("premulsum", "sumpostdiv")
    o = ["//",
         "// %s: 2-rank one-kernel exchange, then" % name,
         "//     dst[i] = %s,  with b = my_slot" % OP_FORMULA[op],
         "//"]
    o.append(".visible .entry %s(" % name)
    o += [
        "    .param .u64 dst,            // %s* output on this GPU (may equal a)" % T.ctype,
        "    .param .u64 a,              // const %s* this rank's input" % T.ctype,
        "    .param .u64 peer_slot,      // %s* receive slot on the peer GPU (written)" % T.ctype,
        "    .param .u64 my_slot,        // const %s* this rank's receive slot" % T.ctype,
        "    .param .u64 peer_flags,     // u64* the peer's flags, one per block (written)",
        "    .param .u64 my_flags,       // const u64* this rank's flags (written by the peer)",
        "    .param .u64 calls,          // u64* this rank's call count, one per block",
        "    .param .u64 n,              // number of elements",
        "    .param .u64 flags,          // %s" % ("bit 0: pre on a, bit 1: pre on my_slot" if op == "premulsum"
                                                    else "bit 2: post on the result" if op == "sumpostdiv"
                                                    else "ignored by this op"),
        "    .param .u64 scalar,         // %s" % ("bits of s (%s)" % T.ctype if op == "premulsum"
                                                    else "the divisor N >= 1" if op == "sumpostdiv"
                                                    else "ignored by this op"),
        "    .param .u64 ctrl            // host-mapped {u32 abort, u32 status, u64 timeout_ns}",
        ")",
        "{",
    ]
    o += cmt("---- Register declarations ".ljust(66, "-"))
    o += [
        decl(".pred", "%p_vec", "all four arrays 16-byte aligned"),
        decl(".pred", "%p_t0", "this thread is thread 0 of its block"),
        decl(".pred", "%p_done", "loop-exit test"),
        "",
        "    .reg .u32   %r_tid, %r_ntid, %r_ctaid, %r_nctaid;",
        decl(".u32", "%r_spin", "spins of the wait loop"),
        decl(".u32", "%r_tmp", "scratch"),
        decl(".u32", "%r_status", "1 = timed out, 2 = aborted"),
        "",
        "    .reg .u64   %rd_dst, %rd_a, %rd_ps, %rd_ms;   // the four arrays",
        "    .reg .u64   %rd_pf, %rd_mf;                   // this block's two flags",
        "    .reg .u64   %rd_calls;                        // this block's call count",
        "    .reg .u64   %rd_ctrl;                         // the control block",
        "    .reg .u64   %rd_n, %rd_seq;",
        "    .reg .u64   %rd_tmp, %rd_g;",
        decl(".u64", "%rd_chunk", "elements per block (multiple of %d)" % S.ve),
        decl(".u64", "%rd_start", "first element of this block"),
        decl(".u64", "%rd_end", "one past the last element of this block"),
        decl(".u64", "%rd_endv", "end of the vector part (= start if scalar)"),
        "    .reg .u64   %rd_tid, %rd_ntid;",
        decl(".u64", "%rd_vstep", "%d * blockDim.x: elements per vector step" % S.ve),
        decl(".u64", "%rd_i", "element index"),
        decl(".u64", "%rd_off", "byte offset of element i"),
        "    .reg .u64   %rd_p0, %rd_p1, %rd_p2;",
        "    .reg .u64   %rd_flag, %rd_t0, %rd_t, %rd_tnext, %rd_timeout;",
        "    .reg %-6s %s;" % (T.word, ", ".join(S.words("a", 0) + S.words("b", 0))),
        decl(F.elem_reg, "%e_a, %e_b", "one scalar element of a, my_slot"),
    ]
    extra = op_decls(F, op)
    if extra:
        o += [""] + cmt("The op's own registers.") + extra
    o += ["",
          "    // Thread 0's verdict of the wait, for the whole block: 0 = go on and",
          "    // reduce, 1 = timed out or aborted (return without reducing).",
          "    .shared .align 4 .u32 bail;",
          ""]

    section = Sections()

    o += section("Parameters")
    o += kernel_params([("%rd_dst", "dst"), ("%rd_a", "a"), ("%rd_ps", "peer_slot"),
                        ("%rd_ms", "my_slot"), ("%rd_pf", "peer_flags"), ("%rd_mf", "my_flags"),
                        ("%rd_calls", "calls")], [("%rd_n", "n")], has_arg)
    o += [""] + thread_indices()
    o += cmt("This block's flag in each flag array, and its call count: 8 bytes\n"
             "per block.")
    o += [ins("mul.wide.u32", "%rd_tmp, %r_ctaid, 8"),
          ins("add.u64", "%rd_pf,  %rd_pf, %rd_tmp"),
          ins("add.u64", "%rd_mf,  %rd_mf, %rd_tmp"),
          ins("add.u64", "%rd_calls, %rd_calls, %rd_tmp"),
          ""]
    o += cmt("seq = ++calls[block], by thread 0, the only thread that uses it (the\n"
             "previous launch's write is visible: it finished before this started).")
    o += [ins("mov.u64", "%rd_seq, 0"),
          ins("@%p_t0 ld.global.u64", "%rd_seq, [%rd_calls]"),
          ins("add.u64", "%rd_seq, %rd_seq, 1"),
          ins("@%p_t0 st.global.u64", "[%rd_calls], %rd_seq"),
          ""]

    if has_arg:
        o += op_setup(F, op, T, section.next()) + [""]

    mask = hex64(~(S.ve - 1))
    o += section("This block's element range",
                 "chunk = ceil(n / grid), rounded up to a multiple of %d elements (16\n"
                 "bytes) so that every range starts on a 16-byte boundary of the\n"
                 "arrays; the same on both ranks because n and grid are.  Blocks past\n"
                 "the end get an empty range but still take part in the flag handshake\n"
                 "(their partner does too)." % S.ve)
    o += [ins("cvt.u64.u32", "%rd_g,     %r_nctaid"),
          ins("add.u64", "%rd_chunk, %rd_n, %rd_g"),
          ins("sub.u64", "%rd_chunk, %rd_chunk, 1"),
          ins("div.u64", "%rd_chunk, %rd_chunk, %rd_g"),
          ins("add.u64", "%%rd_chunk, %%rd_chunk, %d" % (S.ve - 1)),
          ins("and.b64", "%%rd_chunk, %%rd_chunk, %s" % mask),
          ins("cvt.u64.u32", "%rd_tmp,   %r_ctaid"),
          ins("mul.lo.u64", "%rd_start, %rd_tmp, %rd_chunk"),
          ins("min.u64", "%rd_start, %rd_start, %rd_n"),
          ins("add.u64", "%rd_end,   %rd_start, %rd_chunk"),
          ins("min.u64", "%rd_end,   %rd_end, %rd_n"),
          ""]

    o += section("Vector or scalar",
                 "Vector iff the OR of the four addresses has its low 4 bits clear.\n"
                 "The vector part is the largest multiple of %d elements of the range;\n"
                 "the scalar part [endv, end) is the rest (the whole range if scalar).\n"
                 "The choice is per rank and only changes how threads share a block's\n"
                 "range, never which range a block owns, so the ranks need not agree."
                 % S.ve)
    o += [ins("or.b64", "%rd_tmp, %rd_dst, %rd_a"),
          ins("or.b64", "%rd_tmp, %rd_tmp, %rd_ps"),
          ins("or.b64", "%rd_tmp, %rd_tmp, %rd_ms"),
          ins("and.b64", "%rd_tmp, %rd_tmp, 15"),
          ins("setp.eq.u64", "%p_vec,  %rd_tmp, 0"),
          ins("sub.u64", "%rd_tmp, %rd_end, %rd_start"),
          ins("and.b64", "%%rd_tmp, %%rd_tmp, %s" % mask),
          ins("selp.u64", "%rd_tmp, %rd_tmp, 0, %p_vec"),
          ins("add.u64", "%rd_endv, %rd_start, %rd_tmp"),
          ins("shl.b64", "%%rd_vstep, %%rd_ntid, %d" % S.lgve),
          ""]

    # Push
    o += section("Push: peer_slot[i] = a[i], vector part",
                 "Raw input bits (the receiver applies pre).  Thread t moves the\n"
                 "vectors at elements start + %d*t, start + %d*t + %d*ntid, ...: a warp\n"
                 "covers 512 contiguous bytes per step, so the remote stores leave as\n"
                 "full NVLink packets.  Stores to peer memory are posted: the thread\n"
                 "does not wait for them, only the release of the signal does."
                 % (S.ve, S.ve, S.ve))
    o += [ins("shl.b64", "%%rd_i, %%rd_tid, %d" % S.lgve),
          ins("add.u64", "%rd_i, %rd_i, %rd_start"),
          label("PUSH_VEC"),
          ins("setp.ge.u64", "%p_done, %rd_i, %rd_endv"),
          ins("@%p_done bra", "PUSH_VEC_DONE")]
    tmp = []
    off = elem_offset(S, "%rd_i", tmp)
    o += tmp
    o += [ins("add.u64", "%%rd_p0, %%rd_a,  %s" % off),
          ins("add.u64", "%%rd_p1, %%rd_ps, %s" % off),
          ins("ld.global" + S.vsfx, "%s, [%%rd_p0]" % S.vec("a", 0)),
          ins("st.global" + S.vsfx, "[%%rd_p1], %s" % S.vec("a", 0)),
          ins("add.u64", "%rd_i, %rd_i, %rd_vstep"),
          ins("bra.uni", "PUSH_VEC"),
          label("PUSH_VEC_DONE"),
          ""]
    o += section("Push, scalar part: elements endv .. end-1")
    o += [ins("add.u64", "%rd_i, %rd_endv, %rd_tid"),
          label("PUSH_TAIL"),
          ins("setp.ge.u64", "%p_done, %rd_i, %rd_end"),
          ins("@%p_done bra", "PUSH_TAIL_DONE")]
    tmp = []
    off = elem_offset(S, "%rd_i", tmp)
    o += tmp
    o += [ins("add.u64", "%%rd_p0, %%rd_a,  %s" % off),
          ins("add.u64", "%%rd_p1, %%rd_ps, %s" % off),
          ins("ld.global" + T.elem, "%e_a, [%rd_p0]"),
          ins("st.global" + T.elem, "[%rd_p1], %e_a"),
          ins("add.u64", "%rd_i, %rd_i, %rd_ntid"),
          ins("bra.uni", "PUSH_TAIL"),
          label("PUSH_TAIL_DONE"),
          ""]

    # Signal
    o += section("Signal the partner block",
                 "The barrier makes every thread's pushes happen-before thread 0's\n"
                 "next instruction; the release store at system scope is cumulative\n"
                 "(it orders everything thread 0 has observed, including what the\n"
                 "barrier made visible to it), so the partner's acquire of this flag\n"
                 "also sees all of those pushes (the pattern of a cooperative-groups\n"
                 "grid barrier, across two GPUs).")
    o += [ins("bar.sync", "0"),
          ins("@%p_t0 st.release.sys.global.u64", "[%rd_pf], %rd_seq"),
          ""]

    # Wait
    spin = 1 << SPIN_LOG2
    o += section("Wait for the partner block, with abort and deadline",
                 "Thread 0 spins on its own GPU's memory (the partner writes it over\n"
                 "NVLink) until (int64)(flag - seq) >= 0; a stale flag of an earlier\n"
                 "call is smaller than seq and never passes.  The other threads go\n"
                 "straight to the barrier below and wait there.\n"
                 "\n"
                 "It never traps.  ctrl (host-mapped) holds u32 abort at offset 0 (set\n"
                 "by the host), u32 status at 4 (written here) and u64 timeout_ns at 8\n"
                 "(0 = no deadline).  Once every %d spins, thread 0 reads %%globaltimer\n"
                 "(on chip).  Only when %d ns have passed since the wait began, and then\n"
                 "at most once per %d ns, does it read abort and timeout_ns\n"
                 "(ld.relaxed.sys: reads over PCIe to host memory, about a microsecond\n"
                 "each, and serialized when every block of both grids reads at once:\n"
                 "measured on 2 x H200, one such read per block per wait cost ~150 us\n"
                 "per call at 128 blocks, and a rank whose partner launched late fell\n"
                 "into that mode call after call).  A host read happens only when the\n"
                 "partner is tens of microseconds late.  On abort it stores 2 to\n"
                 "status, on timeout 1, and sets `bail`, so the whole block returns\n"
                 "without reducing.  Success never writes status." % (spin, HOST_POLL_NS, HOST_POLL_NS))
    o += [ins("@!%p_t0 bra", "WAIT_DONE"),
          ins("st.shared.u32", "[bail], 0", "the verdict so far: go on"),
          ins("mov.u64", "%rd_t0, %globaltimer", "start of the wait (on-chip)"),
          ins("add.u64", "%%rd_tnext, %%rd_t0, %d" % HOST_POLL_NS, "no host read before this"),
          ins("mov.u32", "%r_spin, 0"),
          label("WAIT_LOOP"),
          ins("ld.acquire.sys.global.u64", "%rd_flag, [%rd_mf]"),
          ins("sub.u64", "%rd_tmp, %rd_flag, %rd_seq"),
          ins("setp.ge.s64", "%p_done, %rd_tmp, 0"),
          ins("@%p_done bra", "WAIT_DONE"),
          ] + spin_count("%p_done", "WAIT_LOOP", spin) + [
          ins("mov.u64", "%rd_t, %globaltimer"),
          ins("setp.lt.u64", "%p_done, %rd_t, %rd_tnext"),
          ins("@%p_done bra", "WAIT_LOOP", "too soon to read the host: spin again"),
          ins("add.u64", "%%rd_tnext, %%rd_t, %d" % HOST_POLL_NS, "the next host read"),
          ] + host_verdict("%p_done", "WAIT_LOOP", "WAIT_FAIL") + [
          label("WAIT_FAIL"),
          ins("st.relaxed.sys.global.u32", "[%rd_ctrl+4], %r_status"),
          ins("st.shared.u32", "[bail], 1"),
          label("WAIT_DONE"),
          ins("bar.sync", "0", "thread 0's verdict (and acquire) to all"),
          ins("ld.shared.u32", "%r_tmp, [bail]"),
          ins("setp.ne.u32", "%p_done, %r_tmp, 0"),
          ins("@%p_done bra.uni", "EXIT", "the same in every thread of the block"),
          ""]

    # Reduce
    o += section("Reduce, vector part",
                 "dst[i] = op(a[i], my_slot[i]) with pre/post as the flags say.  Same\n"
                 "element-to-thread mapping as the push, so when dst == a each thread\n"
                 "overwrites only elements it has itself read (twice: once to push,\n"
                 "once here).  my_slot was written during this kernel by the other\n"
                 "GPU, so it is read with ld.global.cg (cached in L2 only, the point\n"
                 "where the peer's writes land; never a stale L1 line), never through\n"
                 "the non-coherent .nc path, which is only for data that is read-only\n"
                 "for the whole kernel.")
    o += [ins("shl.b64", "%%rd_i, %%rd_tid, %d" % S.lgve),
          ins("add.u64", "%rd_i, %rd_i, %rd_start"),
          label("RED_VEC"),
          ins("setp.ge.u64", "%p_done, %rd_i, %rd_endv"),
          ins("@%p_done bra", "RED_VEC_DONE")]
    tmp = []
    off = elem_offset(S, "%rd_i", tmp)
    o += tmp
    o += [ins("add.u64", "%%rd_p0, %%rd_a,   %s" % off),
          ins("add.u64", "%%rd_p1, %%rd_ms,  %s" % off),
          ins("add.u64", "%%rd_p2, %%rd_dst, %s" % off),
          ins("ld.global" + S.vsfx, "%s, [%%rd_p0]" % S.vec("a", 0)),
          ins("ld.global.cg" + S.vsfx, "%s, [%%rd_p1]" % S.vec("b", 0))]
    o += pre_post_words(F, op, S, [0], "a", "b", "RED_VEC")
    o += combine_words(F, op, S, [0], "a", "b")
    o += post_words(F, op, S, [0], "a", "RED_VEC")
    o += [ins("st.global" + S.vsfx, "[%%rd_p2], %s" % S.vec("a", 0)),
          ins("add.u64", "%rd_i, %rd_i, %rd_vstep"),
          ins("bra.uni", "RED_VEC"),
          label("RED_VEC_DONE"),
          ""]
    o += section("Reduce, scalar part: elements endv .. end-1")
    o += [ins("add.u64", "%rd_i, %rd_endv, %rd_tid"),
          label("RED_TAIL"),
          ins("setp.ge.u64", "%p_done, %rd_i, %rd_end"),
          ins("@%p_done bra", "RED_TAIL_DONE")]
    tmp = []
    off = elem_offset(S, "%rd_i", tmp)
    o += tmp
    o += [ins("add.u64", "%%rd_p0, %%rd_a,   %s" % off),
          ins("add.u64", "%%rd_p1, %%rd_ms,  %s" % off),
          ins("add.u64", "%%rd_p2, %%rd_dst, %s" % off),
          ins("ld.global" + T.elem, "%e_a, [%rd_p0]"),
          ins("ld.global.cg" + T.elem, "%e_b, [%rd_p1]")]
    o += elem_compute(F, op, "RED_TAIL")
    o += [ins("st.global" + T.elem, "[%rd_p2], %e_a"),
          ins("add.u64", "%rd_i, %rd_i, %rd_ntid"),
          ins("bra.uni", "RED_TAIL"),
          label("RED_TAIL_DONE")]
    o += [label("EXIT"),
          ins("ret"),
          "}"]
    return o



# ---------------------------------------------------------------------------
# rr_ringll
# ---------------------------------------------------------------------------

# Most threads of a block: each thread has 16 bytes of shared staging (8 for
# the line it received, 8 for the line it forwards).  The host launches
# blocks of 256 threads (src/cuda/kernels.rs BLOCK).
LL_MAX_THREADS = 256
# Most blocks of a launch, and the number of call counts the kernel keeps
# equal (src/cuda/kernels.rs LL_MAX_BLOCKS, checked there against this file).
LL_MAX_BLOCKS = 256


def ringll_kernel(T, op):
    """rr_ringll: the whole ring all-reduce of one rank in one launch, its
    steps handed over in LL lines (data and flag in each 8-byte word)."""
    STEP_PREDICATES.clear()
    STEP_PREDICATES.update(("%p_pre_b", "%p_post"))
    try:
        return _ringll_kernel(T, op)
    finally:
        STEP_PREDICATES.clear()


def _ringll_kernel(T, op):
    F = FAMILIES[T.family](T)
    has_arg = op in ("premulsum", "sumpostdiv")
    size = T.size
    epl = 8 // size                      # elements per line (8 payload bytes)
    unit = 16 // size                    # ChunkLayout's 16-byte unit, in elements
    name = "rr_ringll_%s_%s" % (op, T.sfx)
    o = ["//",
         "// %s: the ring all-reduce of N ranks, one launch per rank per call:" % name,
         "//     dst = the ring's reduction of every rank's a, step by step",
         "//     (reduce-scatter then all-gather, %s at each reduce step)" % OP_FORMULA[op],
         "// or, with flags bit 3, the one-shot of 2 ranks: the ring of one chunk",
         "// (the whole buffer) and one step, each rank putting all of a into",
         "// the other's slot 0 and reducing what it receives there.",
         "//"]
    o.append(".visible .entry %s(" % name)
    o += [
        "    .param .u64 dst,            // %s* this rank's output (may equal a)" % T.ctype,
        "    .param .u64 a,              // const %s* this rank's input" % T.ctype,
        "    .param .u64 my_ll,          // const u64* this rank's LL half (written by the left rank)",
        "    .param .u64 peer_ll,        // u64* the right rank's LL half (written here)",
        "    .param .u64 calls,          // u64* this rank's LL call counts, LL_MAX_BLOCKS %d" % LL_MAX_BLOCKS,
        "    .param .u64 n,              // number of elements of the whole buffer",
        "    .param .u64 ranks,          // N, the ranks of the ring (>= 2)",
        "    .param .u64 rank,           // this rank, 0 .. N-1",
        "    .param .u64 flags,          // %s; bit 3: one-shot (N = 2)" % (
            "bit 0: pre on a, bit 1: pre on what step 0 receives" if op == "premulsum"
            else "bit 2: post at the last reduce-scatter step" if op == "sumpostdiv"
            else "bits 0-2 ignored by this op"),
        "    .param .u64 scalar,         // %s" % ("bits of s (%s)" % T.ctype if op == "premulsum"
                                                    else "the divisor N >= 1" if op == "sumpostdiv"
                                                    else "ignored by this op"),
        "    .param .u64 ctrl,           // host-mapped {u32 abort, u32 status, u64 timeout_ns, u32 steps[LL_MAX_BLOCKS]}",
        "    .param .u64 stamps          // u64* the step times (K + 2 words, %globaltimer), or 0",
        ")",
        ".maxntid %d, 1, 1                // the staging below: 16 bytes per thread" % LL_MAX_THREADS,
        "{",
    ]
    o += cmt("---- Register declarations ".ljust(66, "-"))
    o += [
        decl(".pred", "%p_t0", "this thread is thread 0 of its block"),
        decl(".pred", "%p_done, %p_tmp", "loop exits and tests"),
        decl(".pred", "%p_rs", "this step reduces (reduce-scatter)"),
        decl(".pred", "%p_put", "this step forwards what it received"),
        decl(".pred", "%p_fast", "this line: whole and 8-byte aligned"),
        decl(".pred", "%p_one", "flags bit 3: the one-shot (one chunk, one step)"),
        decl(".pred", "%p_st", "this thread writes the step times"),
        "",
        "    .reg .u32   %r_tid, %r_ntid, %r_ctaid, %r_nctaid;",
        decl(".u32", "%r_seq", "this call's number: the flag of its lines"),
        decl(".u32", "%r_spin, %r_tmp, %r_status", "the wait"),
        decl(".u32", "%r_b0, %r_b1, %r_f0, %r_f1", "a received line: data, flags"),
        decl(".u32", "%r_x0, %r_x1", "the line this step produced"),
        decl(".u32", "%r_stb, %r_str", "this thread's staging (shared)"),
        "",
        "    .reg .u64   %rd_dst, %rd_a, %rd_ml, %rd_pl, %rd_calls, %rd_ctrl;",
        "    .reg .u64   %rd_n, %rd_N, %rd_r, %rd_tid, %rd_ntid;",
        decl(".u64", "%rd_C", "the chunks: N, or 1 for the one-shot"),
        decl(".u64", "%rd_B, %rd_E, %rd_M", "chunk c starts at (c*B + min(c, E))*M"),
        decl(".u64", "%rd_LS", "lines per slot"),
        decl(".u64", "%rd_j0, %rd_j1", "this block's lines of a slot"),
        decl(".u64", "%rd_k, %rd_K", "step, and the number of steps 2(N-1)"),
        decl(".u64", "%rd_c, %rd_cs, %rd_cl", "a chunk, its first element, its length"),
        decl(".u64", "%rd_jend", "one past this block's last line of the chunk"),
        decl(".u64", "%rd_j", "line index within the slot"),
        decl(".u64", "%rd_pa, %rd_pd", "the chunk in a and in dst"),
        decl(".u64", "%rd_ps, %rd_pp", "my slot k, the right rank's slot k+1"),
        "    .reg .u64   %rd_p0, %rd_p1, %rd_p2, %rd_w0, %rd_w1, %rd_tmp, %rd_t2;",
        "    .reg .u64   %rd_t, %rd_hn, %rd_old, %rd_timeout, %rd_t0;",
        decl(".u64", "%rd_stamps", "where the step times go (stamps)"),
    ]
    if size <= 4:
        o.append("    .reg %-6s %%a0x, %%a0y, %%b0x, %%b0y;  // a line as two words" % T.word)
        words = ("x", "y")
    else:
        o.append("    .reg %-6s %%a0x, %%b0x;              // a line as one word" % T.word)
        words = ("x",)
    o.append(decl(F.elem_reg, "%e_a, %e_b", "one element of a, of the received line"))
    extra = op_decls(F, op)
    if op == "premulsum":
        extra.append(decl(".pred", "%p_fb", "flags bit 1, before the step-0 test"))
    if op == "sumpostdiv":
        extra.append(decl(".pred", "%p_fp", "flags bit 2, before the last-step test"))
    if extra:
        o += [""] + cmt("The op's own registers.") + extra
    o += ["",
          "    // Shared by the block: the call number, the start of the call, the",
          "    // next time a thread may read the host, and whether the block gave up.",
          "    .shared .align 8 .u64 s_seq;",
          "    .shared .align 8 .u64 s_t0;",
          "    .shared .align 8 .u64 s_host_next;",
          "    .shared .align 4 .u32 bail;",
          "    // Per thread: 8 bytes of the received line, 8 of the line forwarded.",
          "    .shared .align 16 .b8 stage[%d];" % (16 * LL_MAX_THREADS),
          ""]

    section = Sections()

    o += section("Parameters")
    o += kernel_params([("%rd_dst", "dst"), ("%rd_a", "a"), ("%rd_ml", "my_ll"),
                        ("%rd_pl", "peer_ll"), ("%rd_calls", "calls")],
                       [("%rd_n", "n"), ("%rd_N", "ranks"), ("%rd_r", "rank")], has_arg)
    o += [ins("setp.lt.u64", "%p_tmp, %rd_N, 2"),
          ins("@%p_tmp bra.uni", "EXIT", "no ring below 2 ranks (the host never asks)"),
          ins("ld.param.u64", "%rd_C, [flags]"),
          ins("and.b64", "%rd_C, %rd_C, 8"),
          ins("setp.ne.u64", "%p_one, %rd_C, 0", "the one-shot (the host asks it of 2 ranks only)"),
          ins("selp.u64", "%rd_C, 1, %rd_N, %p_one", "C chunks"),
          ins("ld.param.u64", "%rd_stamps, [stamps]"),
          ins("setp.ne.u64", "%p_st, %rd_stamps, 0", "step times asked for"),
          ins("cvta.to.global.u64", "%rd_stamps, %rd_stamps"),
          ""] + thread_indices()
    o += [ins("mov.u32", "%r_stb, stage"),
          ins("shl.b32", "%r_tmp, %r_tid, 4"),
          ins("add.u32", "%r_stb, %r_stb, %r_tmp", "16 staging bytes per thread"),
          ins("add.u32", "%r_str, %r_stb, 8"),
          ""]
    o += section("The call number",
                 "seq = ++calls[block] by thread 0, shared with the block; block 0\n"
                 "also counts this call in calls[grid .. %d), the counts of blocks\n"
                 "this launch does not have.  So every count is the number of LL\n"
                 "launches of this rank, the same in every block, whatever the grids\n"
                 "were: a line's address belongs to another block in a call of\n"
                 "another size, and a per-block number could match there.  The left\n"
                 "rank counts the same launches, so its lines of this call carry\n"
                 "this number, and lines of every earlier call a smaller one (32\n"
                 "bits: equal again after 2^32 calls); the buffer was zeroed before\n"
                 "the first call." % LL_MAX_BLOCKS)
    o += ll_call_number([
          ins("mov.u64", "%rd_t, %globaltimer"),
          ins("st.shared.u64", "[s_t0], %rd_t", "the call's start, for the deadline"),
          ins("add.u64", "%%rd_t, %%rd_t, %d" % HOST_POLL_NS),
          ins("st.shared.u64", "[s_host_next], %rd_t", "no host read before this")],
          "the only barrier: threads exit on their own")
    o += [ins("ld.shared.u64", "%rd_tmp, [s_seq]"),
          ins("cvt.u32.u64", "%r_seq, %rd_tmp"),
          ""]
    o += section("The step times",
                 "With stamps (the host asks for them on timed calls), block 0's\n"
                 "thread 0 writes %globaltimer there as it starts (word 0), when it\n"
                 "has put its lines of step 0 (word 1) and when it has its lines of\n"
                 "step k (word 2 + k): the kernel's own clock of its steps, one\n"
                 "thread's view (the other threads' lines run beside it).")
    o += ring_start(F, op, T, section)

    o += section("The chunks and this block's lines",
                 "The chunks of ChunkLayout::new(n, C, %d) (src/schedule.rs): when the\n"
                 "buffer holds at least C units of %d elements (16 bytes), chunk c\n"
                 "starts at (c*B + min(c, E))*%d with B, E = units / C, units %% C, and\n"
                 "the last chunk also takes the tail; else single elements are dealt,\n"
                 "B, E = n / C, n %% C.  Chunk c ends where c+1 starts (the last at n).\n"
                 "\n"
                 "A slot holds a chunk as LS lines of 16 bytes, each two u64 words\n"
                 "{4 data bytes, seq}: LS = ceil(max_len * %d / 8).  Block b owns lines\n"
                 "[b*per, (b+1)*per) of every slot, per = ceil(LS / grid), and thread t\n"
                 "lines t, t + ntid, ...: the same lines at every step, so the line a\n"
                 "thread forwards at step k+1 is the one it received at step k and no\n"
                 "barrier is needed between steps." % (size, unit, unit, size))
    o += max_chunk_len("%rd_C", unit)
    o += [
          ins("mul.lo.u64", "%%rd_LS, %%rd_tmp, %d" % size),
          ins("add.u64", "%rd_LS, %rd_LS, 7"),
          ins("shr.u64", "%rd_LS, %rd_LS, 3", "LS"),
          ins("cvt.u64.u32", "%rd_tmp, %r_nctaid"),
          ins("add.u64", "%rd_j1, %rd_LS, %rd_tmp"),
          ins("sub.u64", "%rd_j1, %rd_j1, 1"),
          ins("div.u64", "%rd_j1, %rd_j1, %rd_tmp", "per"),
          ins("cvt.u64.u32", "%rd_tmp, %r_ctaid"),
          ins("mul.lo.u64", "%rd_j0, %rd_tmp, %rd_j1"),
          ins("add.u64", "%rd_j1, %rd_j0, %rd_j1"),
          ins("min.u64", "%rd_j1, %rd_j1, %rd_LS"),
          ins("shl.b64", "%rd_LS, %rd_LS, 4", "from here on: bytes per slot"),
          ins("shl.b64", "%rd_K, %rd_N, 1"),
          ins("sub.u64", "%rd_K, %rd_K, 2", "K = 2(N-1) steps"),
          ins("@%p_one mov.u64", "%rd_K, 1", "the one-shot: one step"),
          ""]

    # Step 0's put
    o += section("Step 0's put: the right rank's slot 0 = a[chunk r mod C]",
                 "Each line is stored as two u64 words {4 data bytes, seq} with one\n"
                 "16-byte store at system scope: each word is single-copy atomic, so\n"
                 "the reader that sees seq in a word sees its data too.")
    o += [ins("rem.u64", "%rd_c, %rd_r, %rd_C")]
    o += chunk_bounds("P0", size)
    o += [ins("mov.u64", "%rd_ps, %rd_pl", "the right rank's slot 0"),
          ins("add.u64", "%rd_j, %rd_j0, %rd_tid"),
          label("P0_LINE"),
          ins("setp.ge.u64", "%p_done, %rd_j, %rd_jend"),
          ins("@%p_done bra", "P0_DONE")]
    o += line_test("P0", size)
    o += [ins("@!%p_fast bra", "P0_SLOW"),
          ins("ld.global.v2.b32", "{%r_x0, %r_x1}, [%rd_p1]", "the whole line: one 8-byte load"),
          ins("bra.uni", "P0_STORE"),
          label("P0_SLOW")]
    o += cmt("A partial or unaligned line: its elements one by one, through the\n"
             "staging bytes (bytes past the chunk's end are sent as zeros).")
    o += [ins("st.shared.u64", "[%r_str], 0")]
    o += per_elem(epl, size, "P0", lambda e: [
        ins("ld.global" + T.elem, "%%e_a, [%%rd_p1+%d]" % (e * size)),
        ins("st.shared" + T.elem, "[%%r_str+%d], %%e_a" % (e * size))])
    o += [ins("ld.shared.v2.b32", "{%r_x0, %r_x1}, [%r_str]"),
          label("P0_STORE")]
    o += ll_store("%rd_ps")
    o += [ins("add.u64", "%rd_j, %rd_j, %rd_ntid"),
          ins("bra.uni", "P0_LINE"),
          label("P0_DONE")] + stamp(1) + [
          ""]

    # The steps
    o += section("The steps k = 0 .. K-1 (K = 2(N-1), or 1 for the one-shot)",
                 "Step k receives chunk ((r - k - 1) mod N) mod C into slot k: a reduce at\n"
                 "reduce-scatter steps (k < N-1), a copy at all-gather steps; it\n"
                 "stores the result in dst and forwards it, unless k is the last\n"
                 "step, as the right rank's slot k+1 (the chunk the ring sends at\n"
                 "step k+1 is the one received at step k).")
    o += [ins("mov.u64", "%rd_k, 0"),
          label("STEP"),
          ins("setp.ge.u64", "%p_done, %rd_k, %rd_K"),
          ins("@%p_done bra.uni", "EXIT"),
          ins("sub.u64", "%rd_tmp, %rd_N, 1"),
          ins("setp.lt.u64", "%p_rs, %rd_k, %rd_tmp"),
          ins("add.u64", "%rd_tmp, %rd_k, 1"),
          ins("setp.lt.u64", "%p_put, %rd_tmp, %rd_K")]
    o += step_op_predicates(op)
    o += cmt("c = ((r + 2N - 1 - k) mod N) mod C; my slot k; the right rank's slot k+1.")
    o += [ins("shl.b64", "%rd_c, %rd_N, 1"),
          ins("add.u64", "%rd_c, %rd_c, %rd_r"),
          ins("sub.u64", "%rd_c, %rd_c, 1"),
          ins("sub.u64", "%rd_c, %rd_c, %rd_k"),
          ins("rem.u64", "%rd_c, %rd_c, %rd_N"),
          ins("rem.u64", "%rd_c, %rd_c, %rd_C")]
    o += chunk_bounds("ST", size)
    o += [ins("mul.lo.u64", "%rd_tmp, %rd_k, %rd_LS"),
          ins("add.u64", "%rd_ps, %rd_ml, %rd_tmp"),
          ins("add.u64", "%rd_pp, %rd_pl, %rd_tmp"),
          ins("add.u64", "%rd_pp, %rd_pp, %rd_LS"),
          ins("add.u64", "%rd_j, %rd_j0, %rd_tid"),
          label("LINE"),
          ins("setp.ge.u64", "%p_done, %rd_j, %rd_jend"),
          ins("@%p_done bra", "LINE_DONE"),
          ""]

    spin = 1 << SPIN_LOG2
    o += section("Wait for line j of slot k",
                 "Poll both words (ld.relaxed.sys: each word is read whole) until\n"
                 "both carry seq.  Every %d spins: leave if the block gave up;\n"
                 "from %d ns after the call began, one thread of the block at a time\n"
                 "(a compare-and-swap on s_host_next) reads the host-mapped abort word\n"
                 "and deadline, at most once per %d ns per block: those reads cross\n"
                 "PCIe.  On abort it stores 2 to status, past the deadline 1 (first\n"
                 "step + 1 of the step it waited in, at ctrl+16+4*block, for the\n"
                 "host's error, which names the first of them), and sets\n"
                 "`bail`; every thread of the block then returns."
                 % (spin, HOST_POLL_NS, HOST_POLL_NS))
    o += [ins("shl.b64", "%rd_tmp, %rd_j, 4"),
          ins("add.u64", "%rd_p0, %rd_ps, %rd_tmp"),
          ins("mov.u32", "%r_spin, 0"),
          label("POLL"),
          ins("ld.relaxed.sys.global.v2.u64", "{%rd_w0, %rd_w1}, [%rd_p0]"),
          ins("mov.b64", "{%r_b0, %r_f0}, %rd_w0"),
          ins("mov.b64", "{%r_b1, %r_f1}, %rd_w1"),
          ins("setp.eq.u32", "%p_tmp, %r_f0, %r_seq"),
          ins("setp.eq.and.u32", "%p_done, %r_f1, %r_seq, %p_tmp"),
          ins("@%p_done bra", "GOT"),
          ] + spin_count("%p_tmp", "POLL", spin) + [
          ins("ld.volatile.shared.u32", "%r_tmp, [bail]"),
          ins("setp.ne.u32", "%p_tmp, %r_tmp, 0"),
          ins("@%p_tmp bra", "EXIT", "the block gave up"),
          ins("mov.u64", "%rd_t, %globaltimer"),
          ins("ld.volatile.shared.u64", "%rd_hn, [s_host_next]"),
          ins("setp.lt.u64", "%p_tmp, %rd_t, %rd_hn"),
          ins("@%p_tmp bra", "POLL", "too soon to read the host"),
          ins("add.u64", "%%rd_tmp, %%rd_t, %d" % HOST_POLL_NS),
          ins("atom.shared.cas.b64", "%rd_old, [s_host_next], %rd_hn, %rd_tmp"),
          ins("setp.ne.u64", "%p_tmp, %rd_old, %rd_hn"),
          ins("@%p_tmp bra", "POLL", "another thread reads the host this time"),
          ] + host_verdict("%p_tmp", "POLL", "FAIL", t0="[s_t0]") + [
          label("FAIL"),
          ins("cvt.u32.u64", "%r_tmp, %rd_k"),
          ins("add.u32", "%r_tmp, %r_tmp, 1", "step + 1: 0 is no step"),
          ins("mul.wide.u32", "%rd_t, %r_ctaid, 4"),
          ins("add.u64", "%rd_t, %rd_ctrl, %rd_t"),
          ins("st.relaxed.sys.global.u32", "[%rd_t+16], %r_tmp", "this block's step"),
          ins("st.relaxed.sys.global.u32", "[%rd_ctrl+4], %r_status"),
          ins("st.volatile.shared.u32", "[bail], 1"),
          ins("bra", "EXIT"),
          label("GOT")]
    o += line_test("LN", size)
    o += [ins("@!%p_fast bra", "SLOW"),
          ""]

    # Fast path
    o += section("A whole aligned line: two words (one for 8-byte types)")
    o += [ins("@!%p_rs bra", "FAST_COPY"),
          ins("ld.global.v2.b32", "{%r_x0, %r_x1}, [%rd_p1]", "a")]
    if size <= 4:
        o += [ins("mov.b32", "%a0x, %r_x0"), ins("mov.b32", "%a0y, %r_x1"),
              ins("mov.b32", "%b0x, %r_b0"), ins("mov.b32", "%b0y, %r_b1")]
    else:
        o += [ins("mov.b64", "%a0x, {%r_x0, %r_x1}"), ins("mov.b64", "%b0x, {%r_b0, %r_b1}")]
    LS_ = LineShape(words)
    o += pre_post_words(F, op, LS_, [0], "a", "b", "FAST")
    o += combine_words(F, op, LS_, [0], "a", "b")
    o += post_words(F, op, LS_, [0], "a", "FAST")
    if size <= 4:
        o += [ins("mov.b32", "%r_x0, %a0x"), ins("mov.b32", "%r_x1, %a0y")]
    else:
        o += [ins("mov.b64", "{%r_x0, %r_x1}, %a0x")]
    o += [ins("bra.uni", "FAST_STORE"),
          label("FAST_COPY"),
          ins("mov.b32", "%r_x0, %r_b0"),
          ins("mov.b32", "%r_x1, %r_b1"),
          label("FAST_STORE"),
          ins("st.global.v2.b32", "[%rd_p2], {%r_x0, %r_x1}", "dst"),
          ins("bra.uni", "FORWARD"),
          ""]

    # Slow path
    o += section("A partial or unaligned line: element by element",
                 "Through this thread's staging bytes: the received line is stored\n"
                 "there and read back an element at a time; each result goes to dst\n"
                 "and to the line to forward (zeros past the chunk's end).")
    o += [label("SLOW"),
          ins("st.shared.v2.b32", "[%r_stb], {%r_b0, %r_b1}"),
          ins("st.shared.u64", "[%r_str], 0"),
          ins("@!%p_rs bra", "SLOW_COPY")]
    o += per_elem(epl, size, "SR", lambda e: (
        [ins("ld.global" + T.elem, "%%e_a, [%%rd_p1+%d]" % (e * size)),
         ins("ld.shared" + T.elem, "%%e_b, [%%r_stb+%d]" % (e * size))]
        + elem_compute(F, op, "SR%d" % e)
        + [ins("st.global" + T.elem, "[%%rd_p2+%d], %%e_a" % (e * size)),
           ins("st.shared" + T.elem, "[%%r_str+%d], %%e_a" % (e * size))]))
    o += [ins("bra.uni", "SLOW_DONE"),
          label("SLOW_COPY")]
    o += per_elem(epl, size, "SC", lambda e: [
        ins("ld.shared" + T.elem, "%%e_a, [%%r_stb+%d]" % (e * size)),
        ins("st.global" + T.elem, "[%%rd_p2+%d], %%e_a" % (e * size)),
        ins("st.shared" + T.elem, "[%%r_str+%d], %%e_a" % (e * size))])
    o += [label("SLOW_DONE"),
          ins("ld.shared.v2.b32", "{%r_x0, %r_x1}, [%r_str]"),
          ""]

    o += section("Forward: the right rank's slot k+1, line j")
    o += [label("FORWARD"),
          ins("@!%p_put bra", "NEXT_LINE")]
    o += ll_store("%rd_pp")
    o += [label("NEXT_LINE"),
          ins("add.u64", "%rd_j, %rd_j, %rd_ntid"),
          ins("bra.uni", "LINE"),
          label("LINE_DONE")] + stamp("%rd_k") + [
          ins("add.u64", "%rd_k, %rd_k, 1"),
          ins("bra.uni", "STEP"),
          label("EXIT"),
          ins("ret"),
          "}"]
    return o


# ---------------------------------------------------------------------------
# rr_ringsimple
# ---------------------------------------------------------------------------

# Bytes of a tile: the unit a flag covers.  A slot is cut into tiles of
# SIMPLE_TILE bytes (a multiple of it when the slot would have more than
# SIMPLE_MAX_TILES tiles), and each tile has one u64 flag per rank
# (src/cuda/kernels.rs SIMPLE_TILE, SIMPLE_MAX_TILES, checked there).
SIMPLE_TILE = 16384
SIMPLE_MAX_TILES = 1024


def ringsimple_kernel(T, op):
    """rr_ringsimple: the whole ring all-reduce of one rank in one launch,
    its steps handed over as plain data and a flag per tile (NCCL's Simple
    protocol: the data, a fence, then the flag)."""
    STEP_PREDICATES.clear()
    STEP_PREDICATES.update(("%p_pre_b", "%p_post"))
    try:
        return _ringsimple_kernel(T, op)
    finally:
        STEP_PREDICATES.clear()


def _ringsimple_kernel(T, op):
    F = FAMILIES[T.family](T)
    S = Shape(T)
    has_arg = op in ("premulsum", "sumpostdiv")
    size = T.size
    unit = 16 // size                    # ChunkLayout's 16-byte unit, in elements
    name = "rr_ringsimple_%s_%s" % (op, T.sfx)
    o = ["//",
         "// %s: the ring all-reduce of N ranks, one launch per rank per call:" % name,
         "//     dst = the ring's reduction of every rank's a, step by step",
         "//     (reduce-scatter then all-gather, %s at each reduce step)," % OP_FORMULA[op],
         "// each step's chunk stored plainly into the right rank's slot, then",
         "// one flag per tile of it released.",
         "//"]
    o.append(".visible .entry %s(" % name)
    o += [
        "    .param .u64 dst,            // %s* this rank's output (may equal a)" % T.ctype,
        "    .param .u64 a,              // const %s* this rank's input" % T.ctype,
        "    .param .u64 my_slots,       // const u8* this rank's slots (written by the left rank)",
        "    .param .u64 peer_slots,     // u8* the right rank's slots (written here)",
        "    .param .u64 my_flags,       // const u64* this rank's tile flags (written by the left rank)",
        "    .param .u64 peer_flags,     // u64* the right rank's tile flags (written here)",
        "    .param .u64 calls,          // u64* this rank's LL call counts, LL_MAX_BLOCKS %d" % LL_MAX_BLOCKS,
        "    .param .u64 n,              // number of elements of the whole buffer",
        "    .param .u64 ranks,          // N, the ranks of the ring (>= 2)",
        "    .param .u64 rank,           // this rank, 0 .. N-1",
        "    .param .u64 flags,          // %s" % (
            "bit 0: pre on a, bit 1: pre on what step 0 receives" if op == "premulsum"
            else "bit 2: post at the last reduce-scatter step" if op == "sumpostdiv"
            else "ignored by this op"),
        "    .param .u64 scalar,         // %s" % ("bits of s (%s)" % T.ctype if op == "premulsum"
                                                    else "the divisor N >= 1" if op == "sumpostdiv"
                                                    else "ignored by this op"),
        "    .param .u64 ctrl,           // host-mapped {u32 abort, u32 status, u64 timeout_ns, u32 steps[LL_MAX_BLOCKS]}",
        "    .param .u64 stamps          // u64* the step times (K + 2 words, %globaltimer), or 0",
        ")",
        "{",
    ]
    o += cmt("---- Register declarations ".ljust(66, "-"))
    o += [
        decl(".pred", "%p_t0", "this thread is thread 0 of its block"),
        decl(".pred", "%p_done, %p_tmp", "loop exits and tests"),
        decl(".pred", "%p_rs", "this step reduces (reduce-scatter)"),
        decl(".pred", "%p_put", "this step forwards what it received"),
        decl(".pred", "%p_vec", "this chunk: 16-byte vectors in a, dst and the slots"),
        decl(".pred", "%p_st", "this thread writes the step times"),
        "",
        "    .reg .u32   %r_tid, %r_ntid, %r_ctaid, %r_nctaid;",
        decl(".u32", "%r_spin, %r_tmp, %r_status", "the wait"),
        "",
        "    .reg .u64   %rd_dst, %rd_a, %rd_ms, %rd_ps, %rd_mf, %rd_pf, %rd_calls, %rd_ctrl;",
        "    .reg .u64   %rd_n, %rd_N, %rd_r, %rd_tid, %rd_ntid, %rd_seq;",
        decl(".u64", "%rd_B, %rd_E, %rd_M", "chunk c starts at (c*B + min(c, E))*M"),
        decl(".u64", "%rd_SD", "bytes per slot (the largest chunk, 16-byte rounded)"),
        decl(".u64", "%rd_TE", "elements per tile"),
        decl(".u64", "%rd_k, %rd_K", "step, and the number of steps 2(N-1)"),
        decl(".u64", "%rd_c, %rd_cs, %rd_cl", "a chunk, its first element, its length"),
        decl(".u64", "%rd_nt, %rd_t", "the chunk's tiles; a tile"),
        decl(".u64", "%rd_e0, %rd_e1, %rd_ev", "the tile's elements; end of its vectors"),
        decl(".u64", "%rd_i", "element index within the chunk"),
        decl(".u64", "%rd_pa, %rd_pd", "the chunk in a and in dst"),
        decl(".u64", "%rd_sm, %rd_sp", "my slot k, the right rank's slot k+1 (or 0)"),
        decl(".u64", "%rd_want, %rd_flag", "a tile's flag: wanted, read"),
        decl(".u64", "%rd_w0", "the call counts' stride"),
        "    .reg .u64   %rd_p0, %rd_p1, %rd_p2, %rd_p3, %rd_off, %rd_tmp, %rd_t2;",
        "    .reg .u64   %rd_now, %rd_hn, %rd_timeout, %rd_t0;",
        decl(".u64", "%rd_stamps", "where the step times go (stamps)"),
        "    .reg %-6s %s;" % (T.word, ", ".join(S.words("a", 0) + S.words("b", 0))),
        decl(F.elem_reg, "%e_a, %e_b", "one scalar element of a, of the slot"),
    ]
    extra = op_decls(F, op)
    if op == "premulsum":
        extra.append(decl(".pred", "%p_fb", "flags bit 1, before the step-0 test"))
    if op == "sumpostdiv":
        extra.append(decl(".pred", "%p_fp", "flags bit 2, before the last-step test"))
    if extra:
        o += [""] + cmt("The op's own registers.") + extra
    o += ["",
          "    // Shared by the block: the call number, and whether the block gave up.",
          "    .shared .align 8 .u64 s_seq;",
          "    .shared .align 4 .u32 bail;",
          ""]

    section = Sections()

    o += section("Parameters")
    o += kernel_params([("%rd_dst", "dst"), ("%rd_a", "a"), ("%rd_ms", "my_slots"),
                        ("%rd_ps", "peer_slots"), ("%rd_mf", "my_flags"),
                        ("%rd_pf", "peer_flags"), ("%rd_calls", "calls")],
                       [("%rd_n", "n"), ("%rd_N", "ranks"), ("%rd_r", "rank")], has_arg)
    o += [ins("setp.lt.u64", "%p_tmp, %rd_N, 2"),
          ins("@%p_tmp bra", "EXIT", "no ring below 2 ranks (the host never asks)"),
          ins("ld.param.u64", "%rd_stamps, [stamps]"),
          ins("setp.ne.u64", "%p_st, %rd_stamps, 0", "step times asked for"),
          ins("cvta.to.global.u64", "%rd_stamps, %rd_stamps"),
          ""] + thread_indices()

    o += section("The call number",
                 "As rr_ringll's, on the same counts (the two kernels number their\n"
                 "launches together): seq = ++calls[block] by thread 0, shared with\n"
                 "the block; block 0 also counts this call in calls[grid .. %d).\n"
                 "A tile's flag holds seq * 65536 + (the step that filled it) + 1:\n"
                 "its left rank writes it in that order only, so a flag that reads\n"
                 "at least what a step wants says that step's data is in the slot\n"
                 "(later calls cannot have begun: each needs this rank's part of\n"
                 "the call before)." % LL_MAX_BLOCKS)
    o += ll_call_number([], "the call number to every thread")
    o += [ins("ld.shared.u64", "%rd_seq, [s_seq]"),
          ins("shl.b64", "%rd_seq, %rd_seq, 16", "seq * 65536: a flag's call part"),
          ins("mov.u64", "%rd_t0, %globaltimer", "the call's start, for the deadline"),
          ins("add.u64", "%%rd_hn, %%rd_t0, %d" % HOST_POLL_NS, "no host read before this"),
          ""]
    o += section("The step times",
                 "As rr_ringll's: block 0's thread 0 writes %globaltimer into word 0\n"
                 "as it starts, word 1 when its tiles of step 0 are put, and word\n"
                 "2 + k when its tiles of step k are done.")
    o += ring_start(F, op, T, section)

    o += section("The chunks, the slots and the tiles",
                 "The chunks of ChunkLayout::new(n, N, %d) (src/schedule.rs), as in\n"
                 "rr_ringll.  A slot holds the largest chunk's bytes rounded up to 16:\n"
                 "SD; slot k of a half starts at k*SD.  A tile is %d bytes (a multiple\n"
                 "of it when a slot would have more than %d tiles): TE elements; tile t\n"
                 "of a chunk is its elements [t*TE, min((t+1)*TE, cl)), and its flag is\n"
                 "flags[t].  Block b takes tiles b, b + grid, ...: the ranks' grids\n"
                 "need not agree, the tiles do."
                 % (size, SIMPLE_TILE, SIMPLE_MAX_TILES))
    o += max_chunk_len("%rd_N", unit)
    o += [ins("mul.lo.u64", "%%rd_SD, %%rd_tmp, %d" % size),
          ins("add.u64", "%rd_SD, %rd_SD, 15"),
          ins("and.b64", "%rd_SD, %rd_SD, 0xfffffffffffffff0", "SD"),
          ]
    o += cmt("TE = tile / %d with tile = %d * ceil(SD / (%d * %d)), at least %d."
             % (size, SIMPLE_TILE, SIMPLE_TILE, SIMPLE_MAX_TILES, SIMPLE_TILE))
    o += [ins("add.u64", "%%rd_TE, %%rd_SD, %d" % (SIMPLE_TILE * SIMPLE_MAX_TILES - 1)),
          ins("div.u64", "%%rd_TE, %%rd_TE, %d" % (SIMPLE_TILE * SIMPLE_MAX_TILES)),
          ins("max.u64", "%rd_TE, %rd_TE, 1"),
          ins("mul.lo.u64", "%%rd_TE, %%rd_TE, %d" % (SIMPLE_TILE // size)),
          ins("shl.b64", "%rd_K, %rd_N, 1"),
          ins("sub.u64", "%rd_K, %rd_K, 2", "K = 2(N-1) steps"),
          ""]

    def chunk_of(tag):
        """From %rd_c: its start, length, tiles, addresses in a and dst and
        whether it is vector-aligned there."""
        out = chunk_start("%rd_cs", "%rd_c")
        out += [ins("add.u64", "%rd_tmp, %rd_c, 1"),
                ins("setp.eq.u64", "%p_tmp, %rd_tmp, %rd_N"),
                ins("@%p_tmp bra", "%s_LAST" % tag)]
        out += chunk_start("%rd_cl", "%rd_tmp")
        out += [ins("bra.uni", "%s_END" % tag),
                label("%s_LAST" % tag),
                ins("mov.u64", "%rd_cl, %rd_n", "the last chunk ends at n"),
                label("%s_END" % tag),
                ins("sub.u64", "%rd_cl, %rd_cl, %rd_cs"),
                ins("add.u64", "%rd_nt, %rd_cl, %rd_TE"),
                ins("sub.u64", "%rd_nt, %rd_nt, 1"),
                ins("div.u64", "%rd_nt, %rd_nt, %rd_TE", "the chunk's tiles"),
                ins("mul.lo.u64", "%%rd_tmp, %%rd_cs, %d" % size),
                ins("add.u64", "%rd_pa, %rd_a, %rd_tmp"),
                ins("add.u64", "%rd_pd, %rd_dst, %rd_tmp"),
                ins("or.b64", "%rd_tmp, %rd_pa, %rd_pd"),
                ins("or.b64", "%rd_tmp, %rd_tmp, %rd_sm"),
                ins("or.b64", "%rd_tmp, %rd_tmp, %rd_sp"),
                ins("and.b64", "%rd_tmp, %rd_tmp, 15"),
                ins("setp.eq.u64", "%p_vec, %rd_tmp, 0", "all 16-byte aligned")]
        return out

    def tile_range():
        """%rd_e0, %rd_e1 (tile %rd_t of the chunk) and %rd_ev, the end of its
        vector part (= e0 when not %p_vec)."""
        return [ins("mul.lo.u64", "%rd_e0, %rd_t, %rd_TE"),
                ins("add.u64", "%rd_e1, %rd_e0, %rd_TE"),
                ins("min.u64", "%rd_e1, %rd_e1, %rd_cl"),
                ins("sub.u64", "%rd_tmp, %rd_e1, %rd_e0"),
                ins("and.b64", "%%rd_tmp, %%rd_tmp, %s" % hex64(~(S.ve - 1))),
                ins("selp.u64", "%rd_tmp, %rd_tmp, 0, %p_vec"),
                ins("add.u64", "%rd_ev, %rd_e0, %rd_tmp")]

    def addrs(pairs):
        """Byte offset of element %rd_i, then each (reg, base) = base + it."""
        tmp = []
        off = elem_offset(S, "%rd_i", tmp)
        return tmp + [ins("add.u64", "%s, %s, %s" % (reg, base, off)) for reg, base in pairs]

    def release(tag, k, plus):
        """Every thread's stores of this tile before thread 0's release of
        the right rank's flag of tile %rd_t: seq + k + plus (the step that
        filled it, plus one)."""
        return [ins("bar.sync", "0", "every thread's stores of the tile ..."),
                ins("@!%p_t0 bra", "%s_REL" % tag),
                ins("shl.b64", "%rd_tmp, %rd_t, 3"),
                ins("add.u64", "%rd_p3, %rd_pf, %rd_tmp"),
                ins("add.u64", "%%rd_flag, %%rd_seq, %s" % k),
                ins("add.u64", "%%rd_flag, %%rd_flag, %d" % plus),
                ins("st.release.sys.global.u64", "[%rd_p3], %rd_flag",
                    "... before the flag (cumulative release)"),
                label("%s_REL" % tag)]

    # Step 0's put
    o += section("Step 0's put: the right rank's slot 0 = a[chunk r]",
                 "Raw input bits (the receiver applies pre).  Per tile: every thread\n"
                 "stores its vectors (thread t: elements e0 + %d*t, then every\n"
                 "%d*ntid), the scalar tail after them; the barrier and thread 0's\n"
                 "release store of the tile's flag in the right rank's flags." % (S.ve, S.ve))
    o += [ins("mov.u64", "%rd_sm, 0"),
          ins("mov.u64", "%rd_sp, %rd_ps", "the right rank's slot 0"),
          ins("mov.u64", "%rd_c, %rd_r")]
    o += chunk_of("P0")
    o += [ins("cvt.u64.u32", "%rd_t, %r_ctaid"),
          label("P0_TILE"),
          ins("setp.ge.u64", "%p_done, %rd_t, %rd_nt"),
          ins("@%p_done bra", "P0_DONE")] + tile_range() + [
          ins("shl.b64", "%%rd_i, %%rd_tid, %d" % S.lgve),
          ins("add.u64", "%rd_i, %rd_i, %rd_e0"),
          label("P0_VEC"),
          ins("setp.ge.u64", "%p_done, %rd_i, %rd_ev"),
          ins("@%p_done bra", "P0_VEC_DONE")]
    o += addrs([("%rd_p0", "%rd_pa"), ("%rd_p1", "%rd_sp")])
    o += [ins("ld.global" + S.vsfx, "%s, [%%rd_p0]" % S.vec("a", 0)),
          ins("st.global" + S.vsfx, "[%%rd_p1], %s" % S.vec("a", 0)),
          ins("shl.b64", "%%rd_tmp, %%rd_ntid, %d" % S.lgve),
          ins("add.u64", "%rd_i, %rd_i, %rd_tmp"),
          ins("bra.uni", "P0_VEC"),
          label("P0_VEC_DONE"),
          ins("add.u64", "%rd_i, %rd_ev, %rd_tid"),
          label("P0_TAIL"),
          ins("setp.ge.u64", "%p_done, %rd_i, %rd_e1"),
          ins("@%p_done bra", "P0_TAIL_DONE")]
    o += addrs([("%rd_p0", "%rd_pa"), ("%rd_p1", "%rd_sp")])
    o += [ins("ld.global" + T.elem, "%e_a, [%rd_p0]"),
          ins("st.global" + T.elem, "[%rd_p1], %e_a"),
          ins("add.u64", "%rd_i, %rd_i, %rd_ntid"),
          ins("bra.uni", "P0_TAIL"),
          label("P0_TAIL_DONE")]
    o += release("P0", "0", 1)
    o += [ins("cvt.u64.u32", "%rd_tmp, %r_nctaid"),
          ins("add.u64", "%rd_t, %rd_t, %rd_tmp"),
          ins("bra.uni", "P0_TILE"),
          label("P0_DONE")] + stamp(1) + [""]

    # The steps
    o += section("The steps k = 0 .. K-1 (K = 2(N-1))",
                 "Step k receives chunk (r - k - 1) mod N into slot k: a reduce at\n"
                 "reduce-scatter steps (k < N-1), a copy at all-gather steps; it\n"
                 "stores the result in dst and, unless k is the last step, in the\n"
                 "right rank's slot k+1, whose flag it then releases.")
    o += [ins("mov.u64", "%rd_k, 0"),
          label("STEP"),
          ins("setp.ge.u64", "%p_done, %rd_k, %rd_K"),
          ins("@%p_done bra.uni", "EXIT"),
          ins("sub.u64", "%rd_tmp, %rd_N, 1"),
          ins("setp.lt.u64", "%p_rs, %rd_k, %rd_tmp"),
          ins("add.u64", "%rd_tmp, %rd_k, 1"),
          ins("setp.lt.u64", "%p_put, %rd_tmp, %rd_K")]
    o += step_op_predicates(op)
    o += cmt("c = (r + 2N - 1 - k) mod N; my slot k; the right rank's slot k+1\n"
             "(0, not used, at the last step).")
    o += [ins("shl.b64", "%rd_c, %rd_N, 1"),
          ins("add.u64", "%rd_c, %rd_c, %rd_r"),
          ins("sub.u64", "%rd_c, %rd_c, 1"),
          ins("sub.u64", "%rd_c, %rd_c, %rd_k"),
          ins("rem.u64", "%rd_c, %rd_c, %rd_N"),
          ins("mul.lo.u64", "%rd_tmp, %rd_k, %rd_SD"),
          ins("add.u64", "%rd_sm, %rd_ms, %rd_tmp"),
          ins("add.u64", "%rd_sp, %rd_ps, %rd_tmp"),
          ins("add.u64", "%rd_sp, %rd_sp, %rd_SD"),
          ins("selp.u64", "%rd_sp, %rd_sp, 0, %p_put")]
    o += chunk_of("ST")
    o += [ins("add.u64", "%rd_want, %rd_seq, %rd_k"),
          ins("add.u64", "%rd_want, %rd_want, 1", "the flag step k's data raises"),
          ins("cvt.u64.u32", "%rd_t, %r_ctaid"),
          label("TILE"),
          ins("setp.ge.u64", "%p_done, %rd_t, %rd_nt"),
          ins("@%p_done bra", "TILE_DONE"),
          ""]

    spin = 1 << SPIN_LOG2
    o += section("Wait for tile t of slot k",
                 "Thread 0 polls the tile's flag (ld.acquire.sys) until it is at least\n"
                 "what step k raises; the other threads wait at the barrier.  Every\n"
                 "%d spins it reads %%globaltimer; from %d ns after the call began,\n"
                 "at most once per %d ns, it reads the host-mapped abort word and\n"
                 "deadline (those reads cross PCIe).  On abort it stores 2 to status,\n"
                 "past the deadline 1 (and step + 1 at ctrl+16+4*block, for the host's\n"
                 "error), and sets `bail`: every thread of the block then returns."
                 % (spin, HOST_POLL_NS, HOST_POLL_NS))
    o += [ins("@!%p_t0 bra", "WAIT_DONE"),
          ins("shl.b64", "%rd_tmp, %rd_t, 3"),
          ins("add.u64", "%rd_p3, %rd_mf, %rd_tmp"),
          ins("mov.u32", "%r_spin, 0"),
          label("POLL"),
          ins("ld.acquire.sys.global.u64", "%rd_flag, [%rd_p3]"),
          ins("sub.u64", "%rd_tmp, %rd_flag, %rd_want"),
          ins("setp.ge.s64", "%p_done, %rd_tmp, 0"),
          ins("@%p_done bra", "WAIT_DONE"),
          ] + spin_count("%p_tmp", "POLL", spin) + [
          ins("mov.u64", "%rd_now, %globaltimer"),
          ins("setp.lt.u64", "%p_tmp, %rd_now, %rd_hn"),
          ins("@%p_tmp bra", "POLL", "too soon to read the host"),
          ins("add.u64", "%%rd_hn, %%rd_now, %d" % HOST_POLL_NS),
          ins("mov.u64", "%rd_t2, %rd_t", "host_verdict uses %rd_t"),
          ins("mov.u64", "%rd_t, %rd_now"),
          ] + host_verdict("%p_tmp", "POLL_AGAIN", "FAIL") + [
          label("FAIL"),
          ins("cvt.u32.u64", "%r_tmp, %rd_k"),
          ins("add.u32", "%r_tmp, %r_tmp, 1", "step + 1: 0 is no step"),
          ins("mul.wide.u32", "%rd_tmp, %r_ctaid, 4"),
          ins("add.u64", "%rd_tmp, %rd_ctrl, %rd_tmp"),
          ins("st.relaxed.sys.global.u32", "[%rd_tmp+16], %r_tmp", "this block's step"),
          ins("st.relaxed.sys.global.u32", "[%rd_ctrl+4], %r_status"),
          ins("st.shared.u32", "[bail], 1"),
          ins("bra.uni", "WAIT_DONE"),
          label("POLL_AGAIN"),
          ins("mov.u64", "%rd_t, %rd_t2", "the tile again"),
          ins("bra.uni", "POLL"),
          label("WAIT_DONE"),
          ins("bar.sync", "0", "thread 0's verdict (and acquire) to all"),
          ins("ld.shared.u32", "%r_tmp, [bail]"),
          ins("setp.ne.u32", "%p_tmp, %r_tmp, 0"),
          ins("@%p_tmp bra.uni", "EXIT", "the same in every thread of the block"),
          ""]
    o += tile_range() + [""]

    # Vector part
    o += section("The tile's vectors",
                 "Reduce-scatter: dst = op(a, slot) with pre/post as the step says;\n"
                 "all-gather: dst = slot; then the same vector into the right rank's\n"
                 "slot k+1 where there is one.  The slot was written by the left rank\n"
                 "during this kernel: read with ld.global.cg (L2, where its stores\n"
                 "land), never the non-coherent path.")
    o += [ins("shl.b64", "%%rd_i, %%rd_tid, %d" % S.lgve),
          ins("add.u64", "%rd_i, %rd_i, %rd_e0"),
          label("VEC"),
          ins("setp.ge.u64", "%p_done, %rd_i, %rd_ev"),
          ins("@%p_done bra", "VEC_DONE")]
    o += addrs([("%rd_p0", "%rd_pa"), ("%rd_p1", "%rd_sm"), ("%rd_p2", "%rd_pd"),
                ("%rd_p3", "%rd_sp")])
    o += [ins("ld.global.cg" + S.vsfx, "%s, [%%rd_p1]" % S.vec("b", 0), "the slot"),
          ins("@!%p_rs bra", "VEC_COPY"),
          ins("ld.global" + S.vsfx, "%s, [%%rd_p0]" % S.vec("a", 0))]
    o += pre_post_words(F, op, S, [0], "a", "b", "VEC")
    o += combine_words(F, op, S, [0], "a", "b")
    o += post_words(F, op, S, [0], "a", "VEC")
    o += [ins("bra.uni", "VEC_STORE"),
          label("VEC_COPY")]
    o += [ins("mov" + T.word, "%s, %s" % (wa, wb))
          for wa, wb in zip(S.words("a", 0), S.words("b", 0))]
    o += [label("VEC_STORE"),
          ins("st.global" + S.vsfx, "[%%rd_p2], %s" % S.vec("a", 0), "dst"),
          ins("@%p_put st.global" + S.vsfx, "[%%rd_p3], %s" % S.vec("a", 0), "forward"),
          ins("shl.b64", "%%rd_tmp, %%rd_ntid, %d" % S.lgve),
          ins("add.u64", "%rd_i, %rd_i, %rd_tmp"),
          ins("bra.uni", "VEC"),
          label("VEC_DONE"),
          ""]
    o += section("The tile's scalar tail: elements ev .. e1-1 (the whole tile if not vector)")
    o += [ins("add.u64", "%rd_i, %rd_ev, %rd_tid"),
          label("TAIL"),
          ins("setp.ge.u64", "%p_done, %rd_i, %rd_e1"),
          ins("@%p_done bra", "TAIL_DONE")]
    o += addrs([("%rd_p0", "%rd_pa"), ("%rd_p1", "%rd_sm"), ("%rd_p2", "%rd_pd"),
                ("%rd_p3", "%rd_sp")])
    o += [ins("ld.global.cg" + T.elem, "%e_b, [%rd_p1]", "the slot"),
          ins("@!%p_rs bra", "TAIL_COPY"),
          ins("ld.global" + T.elem, "%e_a, [%rd_p0]")]
    o += elem_compute(F, op, "TAIL")
    o += [ins("bra.uni", "TAIL_STORE"),
          label("TAIL_COPY"),
          ins("mov" + F.elem_reg, "%e_a, %e_b"),
          label("TAIL_STORE"),
          ins("st.global" + T.elem, "[%rd_p2], %e_a", "dst"),
          ins("@%p_put st.global" + T.elem, "[%rd_p3], %e_a", "forward"),
          ins("add.u64", "%rd_i, %rd_i, %rd_ntid"),
          ins("bra.uni", "TAIL"),
          label("TAIL_DONE")]
    o += cmt("Forward: the right rank's flag of this tile, step k+1.")
    o += [ins("@!%p_put bra", "NEXT_TILE")]
    o += release("FW", "%rd_k", 2)
    o += [label("NEXT_TILE"),
          ins("cvt.u64.u32", "%rd_tmp, %r_nctaid"),
          ins("add.u64", "%rd_t, %rd_t, %rd_tmp"),
          ins("bra.uni", "TILE"),
          label("TILE_DONE")] + stamp("%rd_k") + [
          ins("add.u64", "%rd_k, %rd_k, 1"),
          ins("bra.uni", "STEP"),
          label("EXIT"),
          ins("ret"),
          "}"]
    return o


def ll_call_number(thread0, why):
    """The LL kernels' call number (rr_ringll, rr_ringsimple): thread 0
    counts this launch in calls[block] into shared s_seq (then `thread0`,
    and bail = 0); block 0's threads count it in the calls of the blocks the
    grid lacks; a barrier (`why`).  Uses %rd_p0, %rd_p1, %rd_w0, %rd_tmp."""
    return [ins("@!%p_t0 bra", "SEQ_DONE"),
            ins("mul.wide.u32", "%rd_tmp, %r_ctaid, 8"),
            ins("add.u64", "%rd_p0, %rd_calls, %rd_tmp"),
            ins("ld.global.u64", "%rd_tmp, [%rd_p0]"),
            ins("add.u64", "%rd_tmp, %rd_tmp, 1"),
            ins("st.global.u64", "[%rd_p0], %rd_tmp"),
            ins("st.shared.u64", "[s_seq], %rd_tmp")] + thread0 + [
            ins("st.shared.u32", "[bail], 0"),
            label("SEQ_DONE"),
            ins("setp.ne.u32", "%p_tmp, %r_ctaid, 0"),
            ins("@%p_tmp bra", "COUNT_DONE", "only block 0 counts for the absent blocks"),
            ins("add.u32", "%r_tmp, %r_nctaid, %r_tid", "its threads together, one count each"),
            ins("mul.wide.u32", "%rd_p0, %r_tmp, 8"),
            ins("add.u64", "%rd_p0, %rd_calls, %rd_p0"),
            ins("add.u64", "%%rd_p1, %%rd_calls, %d" % (8 * LL_MAX_BLOCKS)),
            ins("shl.b64", "%rd_w0, %rd_ntid, 3"),
            label("COUNT"),
            ins("setp.ge.u64", "%p_tmp, %rd_p0, %rd_p1"),
            ins("@%p_tmp bra", "COUNT_DONE"),
            ins("ld.global.u64", "%rd_tmp, [%rd_p0]"),
            ins("add.u64", "%rd_tmp, %rd_tmp, 1"),
            ins("st.global.u64", "[%rd_p0], %rd_tmp"),
            ins("add.u64", "%rd_p0, %rd_p0, %rd_w0"),
            ins("bra", "COUNT"),
            label("COUNT_DONE"),
            ins("bar.sync", "0", why)]


def max_chunk_len(C, unit):
    """%rd_B, %rd_E, %rd_M of ChunkLayout::new(n, C, unit elements) (see the
    callers' section text) and %rd_tmp = the largest chunk's length."""
    o = [ins("shr.u64", "%%rd_B, %%rd_n, %d" % log2(unit), "units"),
         ins("setp.ge.u64", "%%p_tmp, %%rd_B, %s" % C),
         ins("selp.u64", "%%rd_M, %d, 1, %%p_tmp" % unit),
         ins("selp.u64", "%rd_tmp, %rd_B, %rd_n, %p_tmp", "units or elements to deal"),
         ins("div.u64", "%%rd_B, %%rd_tmp, %s" % C),
         ins("rem.u64", "%%rd_E, %%rd_tmp, %s" % C),
         ]
    o += cmt("max_len = max((B + (E > 0)) * M, n - start(%s-1))." % C[4:])
    o += [ins("setp.ne.u64", "%p_tmp, %rd_E, 0"),
          ins("selp.u64", "%rd_tmp, 1, 0, %p_tmp"),
          ins("add.u64", "%rd_tmp, %rd_tmp, %rd_B"),
          ins("mul.lo.u64", "%rd_tmp, %rd_tmp, %rd_M"),
          ins("sub.u64", "%%rd_c, %s, 1" % C)]
    o += chunk_start("%rd_t2", "%rd_c")
    return o + [ins("sub.u64", "%rd_t2, %rd_n, %rd_t2"),
                ins("max.u64", "%rd_tmp, %rd_tmp, %rd_t2", "max_len")]


def ring_start(F, op, T, section):
    """The ring kernels' start: %p_st for block 0's thread 0 (with stamps),
    step time 0, and the op's setup, its step-0 pre and last-step post
    flags kept in %p_fb / %p_fp."""
    o = [ins("setp.eq.and.u32", "%p_st, %r_ctaid, 0, %p_st"),
         ins("and.pred", "%p_st, %p_t0, %p_st", "block 0, thread 0")]
    o += stamp(0) + [""]
    if op in ("premulsum", "sumpostdiv"):
        o += op_setup(F, op, T, section.next())
        if op == "premulsum":
            o.append(ins("mov.pred", "%p_fb, %p_pre_b"))
        if op == "sumpostdiv":
            o.append(ins("mov.pred", "%p_fp, %p_post"))
        o.append("")
    return o


def step_op_predicates(op):
    """Step %rd_k's pre on what it receives (step 0 only) and post (the last
    reduce-scatter step only), from the flags kept in %p_fb / %p_fp."""
    if op == "premulsum":
        return [ins("setp.eq.u64", "%p_tmp, %rd_k, 0"),
                ins("and.pred", "%p_pre_b, %p_fb, %p_tmp", "pre on the received value: step 0 only")]
    if op == "sumpostdiv":
        return [ins("sub.u64", "%rd_tmp, %rd_N, 2"),
                ins("setp.eq.u64", "%p_tmp, %rd_k, %rd_tmp"),
                ins("and.pred", "%p_post, %p_fp, %p_tmp", "post: the last reduce-scatter step only")]
    return []


def stamp(at):
    """Where %p_st holds: %globaltimer into word `at` of the stamps (a
    constant, or 2 + the register's value)."""
    if isinstance(at, int):
        return [ins("mov.u64", "%rd_t, %globaltimer"),
                ins("@%p_st st.global.u64", "[%%rd_stamps+%d], %%rd_t" % (8 * at),
                    "step time %d" % at)]
    return [ins("mov.u64", "%rd_t, %globaltimer"),
            ins("shl.b64", "%%rd_tmp, %s, 3" % at),
            ins("add.u64", "%rd_tmp, %rd_tmp, %rd_stamps"),
            ins("@%p_st st.global.u64", "[%rd_tmp+16], %rd_t", "step time 2 + k")]


class LineShape:
    """The `Shape` interface of the combine helpers for one LL line: two
    32-bit words %a0x, %a0y (one 64-bit word %a0x for 8-byte types)."""

    def __init__(self, lanes):
        self.lanes = lanes

    def words(self, prefix, v):
        return ["%%%s%d%s" % (prefix, v, l) for l in self.lanes]


def chunk_start(dst, c):
    """dst = (c*B + min(c, E)) * M: the first element of chunk c."""
    return [ins("min.u64", "%s, %s, %%rd_E" % (dst, c)),
            ins("mad.lo.u64", "%s, %s, %%rd_B, %s" % (dst, c, dst)),
            ins("mul.lo.u64", "%s, %s, %%rd_M" % (dst, dst))]


def chunk_bounds(tag, size):
    """From %rd_c: %rd_cs, %rd_cl (its first element and length) and %rd_jend,
    one past this block's last line of it."""
    out = chunk_start("%rd_cs", "%rd_c")
    out += [ins("add.u64", "%rd_tmp, %rd_c, 1"),
            ins("setp.eq.u64", "%p_tmp, %rd_tmp, %rd_C"),
            ins("@%p_tmp bra", "%s_LAST" % tag)]
    out += chunk_start("%rd_cl", "%rd_tmp")
    out += [ins("bra.uni", "%s_END" % tag),
            label("%s_LAST" % tag),
            ins("mov.u64", "%rd_cl, %rd_n", "the last chunk ends at n"),
            label("%s_END" % tag),
            ins("sub.u64", "%rd_cl, %rd_cl, %rd_cs"),
            ins("mul.lo.u64", "%%rd_jend, %%rd_cl, %d" % size),
            ins("add.u64", "%rd_jend, %rd_jend, 7"),
            ins("shr.u64", "%rd_jend, %rd_jend, 3", "the chunk's lines"),
            ins("min.u64", "%rd_jend, %rd_jend, %rd_j1"),
            ins("mul.lo.u64", "%%rd_tmp, %%rd_cs, %d" % size),
            ins("add.u64", "%rd_pa, %rd_a, %rd_tmp"),
            ins("add.u64", "%rd_pd, %rd_dst, %rd_tmp")]
    return out


def line_test(tag, size):
    """%rd_p1, %rd_p2 = line j of the chunk in a and dst; %p_fast = the line
    is whole and both addresses are 8-byte aligned."""
    return [ins("shl.b64", "%rd_tmp, %rd_j, 3"),
            ins("add.u64", "%rd_p1, %rd_pa, %rd_tmp"),
            ins("add.u64", "%rd_p2, %rd_pd, %rd_tmp"),
            ins("add.u64", "%rd_tmp, %rd_tmp, 8"),
            ins("mul.lo.u64", "%%rd_t2, %%rd_cl, %d" % size),
            ins("setp.le.u64", "%p_fast, %rd_tmp, %rd_t2", "whole"),
            ins("or.b64", "%rd_tmp, %rd_p1, %rd_p2"),
            ins("and.b64", "%rd_tmp, %rd_tmp, 7"),
            ins("setp.eq.and.u64", "%p_fast, %rd_tmp, 0, %p_fast", "and aligned")]


def per_elem(epl, size, tag, body):
    """body(e) for each element e of the line that lies inside the chunk
    (element j*epl + e < cl), from %rd_p1 / %rd_p2 at byte e*size."""
    out = []
    for e in range(epl):
        skip = "%s_E%d" % (tag, e)
        out += [ins("shl.b64", "%%rd_tmp, %%rd_j, %d" % log2(epl)) if epl > 1
                else ins("mov.u64", "%rd_tmp, %rd_j"),
                ins("add.u64", "%%rd_tmp, %%rd_tmp, %d" % e) if e else None,
                ins("setp.ge.u64", "%p_tmp, %rd_tmp, %rd_cl"),
                ins("@%p_tmp bra", skip, "past the chunk's end")]
        out = [x for x in out if x is not None]
        out += body(e) if e == 0 else bare(body(e))
        out.append(label(skip))
    return out


def ll_store(slot):
    """Store the line {%r_x0, %r_x1} as line %rd_j of `slot`, flagged seq."""
    return [ins("mov.b64", "%rd_w0, {%r_x0, %r_seq}"),
            ins("mov.b64", "%rd_w1, {%r_x1, %r_seq}"),
            ins("shl.b64", "%rd_tmp, %rd_j, 4"),
            ins("add.u64", "%%rd_tmp, %s, %%rd_tmp" % slot),
            ins("st.relaxed.sys.global.v2.u64", "[%rd_tmp], {%rd_w0, %rd_w1}")]



# ===========================================================================
# 4. The file
# ===========================================================================

HEADER = """\
//
// reduce_{sfx}.ptx -- {ctype} reduce and 2-rank exchange kernels for ringreduce.
//
// GENERATED by kernels/gen_ptx.py (its type table, the templates of the two
// kernel families and the {family} combine snippets): do not edit by hand.
// Regenerate and rebuild the ahead-of-time image with
//     python3 kernels/gen_ptx.py && UPDATE_CUBINS=1 bash .ci/check-ptx.sh
// and commit this file with ptx/sm_90/reduce_{sfx}.cubin.
//
// Type table row:
//     sfx {sfx}, {ctype}, {size_text} per element, arithmetic in .{arith},
//     vector words {word} ({nw} per 16-byte vector, {ve} elements per vector),
//     scalar loads/stores {elem}, ops: {ops}
// Target: .target {target}, .version {version}.
{target_why}
//
// Kernels, one pair per op (op in {ops}):
//
//   rr_reduce_<op>_{sfx}(dst, a, b, n, flags, scalar)
//       dst[i] = post(pre_a(a[i]) OP pre_b(b[i]))   for i < n
//   rr_exchange_<op>_{sfx}(dst, a, peer_slot, my_slot, peer_flags, my_flags,
//                     calls, n, flags, scalar, ctrl)
//       the 2-rank exchange: push a to the peer, handshake, then
//       dst[i] = post(pre_a(a[i]) OP pre_b(my_slot[i]))
//
// Every parameter is .u64.  Semantics are bit-identical to NCCL 2.28's
// src/device/reduce_kernel.h (the host CPU backend implements the same):
//   flags   bit 0: apply pre to a, bit 1: apply pre to b (my_slot), bit 2:
//           apply post to the result.  pre exists only in premulsum, post
//           only in sumpostdiv; every other op ignores flags and scalar.
//   scalar  premulsum: the bits of the multiplier s in the element type,
//           zero-extended; sumpostdiv: the divisor N (>= 1).
//
{arith_doc}
//
// rr_reduce contract (the host code relies on all of it):
//   * dst, a, b are generic addresses of global memory, each aligned to the
//     element size ({size_text}); b may be another GPU's memory read through
//     peer access.
//   * dst may be exactly equal to a (reduce-into).  No other overlap is
//     allowed; in particular b never overlaps dst, and nobody writes b while
//     the kernel runs (that is what makes ld.global.nc on b legal).
//   * n is an element count (not bytes), any u64 value, 0 included.
//   * 1-D launch (only the .x dimensions are used), any grid and block size:
//     every loop is a grid-stride loop, so each element is written exactly
//     once whatever the launch shape.  All index arithmetic is 64-bit.
//     The host uses 256 threads and min(ceil(bytes / (64 * 256)), 4 * SMs)
//     blocks.
//
// Layout of the work.  The fast path needs dst, a and b to sit at the same
// offset modulo 16 bytes, so one element index is 16-byte aligned in all
// three arrays at once:
//
{picture}
//
// If the three offsets differ, no index is aligned for all of them, and the
// kernel falls back to one scalar grid-stride loop over all n elements
// (it reuses the tail loop with tail = 0).
//
// rr_exchange: the one-shot all-reduce of 2 ranks in one kernel launch per
// rank.  Both ranks launch it for the same call with the same n and the same
// 1-D grid and block size (the host derives the grid from the byte count and
// caps it at 128 blocks, so all blocks of both grids are co-resident: a block
// spins until its partner block has pushed).  Rank 0's peer_slot is rank 1's
// my_slot and the other way round.  Per block b (thread 0 for the flags):
//     0. count:   seq = ++calls[b]              (this block's call number)
//     1. push:    peer_slot[i] = a[i]           over the block's range, raw
//     2. signal:  bar.sync, then st.release.sys peer_flags[b] = seq
//     3. wait:    ld.acquire.sys my_flags[b] until (int64)(flag - seq) >= 0,
//                 or abort / timeout (ctrl), then bar.sync
//     4. reduce:  dst[i] = post(pre_a(a[i]) OP pre_b(my_slot[i]))
//   * dst, a, my_slot, my_flags, calls are this GPU's memory; peer_slot and
//     peer_flags the peer's (or this GPU's when both ranks share it).  Arrays
//     are aligned to the element size, flag arrays to 8 bytes, one u64 per
//     block; ctrl is 16 bytes of host-mapped memory:
//         u32 abort       offset 0: the host sets it non-zero to abort
//         u32 status      offset 4: written here: 1 = timed out, 2 = aborted
//         u64 timeout_ns  offset 8: 0 = no deadline
//     On abort or timeout every thread of the block returns without
//     reducing; the kernel never traps, and success never writes status.
//   * dst may be exactly equal to a.  No other overlap.
//   * Block b of each rank owns the elements [b*chunk, min((b+1)*chunk, n)),
//     chunk = ceil(n / grid) rounded up to a multiple of {ve} elements (16
//     bytes), so every range starts 16-byte aligned and the flag of block b
//     covers exactly the data block b of the other rank reads.  Blocks past
//     the end have an empty range but still do the handshake.
//   * calls[b] counts this rank's launches that had a block b (zeroed once,
//     touched only by that block, ordered between launches by the stream),
//     so both ranks agree on seq and a stale flag never passes.  Keeping the
//     count on the GPU is what lets a CUDA graph replay the launch.
//   * Vector path (16-byte ld/st) when dst, a, peer_slot and my_slot are all
//     16-byte aligned, else scalar.
//
"""


def picture(S):
    """The work-layout picture of the header, in the f32 original's columns."""
    rows = [("element:", "0 .. h-1", "h .. h + %d*nvec - 1" % S.ve, "tail .. n-1"),
            ("", "head", "body: nvec 16-byte vectors", "tail"),
            ("", "(0..%d," % (S.ve - 1), "(ld/st .v%d, unrolled x4)" % S.nw, "(0..%d," % (S.ve - 1)),
            ("", " scalar)", "", " scalar)")]
    return "\n".join(("//   %-8s  %-10s|  %-30s|  %s" % r).rstrip() for r in rows)


def file_text(T):
    F = FAMILIES[T.family](T)
    S = Shape(T)
    arith_doc = "\n".join(("// " + l) if l else "//" for l in F.describe().rstrip("\n").split("\n"))
    tw = "\n".join("// " + l for l in TARGET_WHY[T.target].split("\n"))
    text = HEADER.format(
        sfx=T.sfx, ctype=T.ctype, size_text="1 byte" if T.size == 1 else "%d bytes" % T.size,
        family=T.family, arith=T.arith,
        word=T.word, nw=S.nw, ve=S.ve, elem=T.elem, ops=" ".join(T.ops),
        target=T.target, version=T.version, target_why=tw, arith_doc=arith_doc,
        picture=picture(S))
    out = [text.rstrip("\n"), "",
           ".version %s" % T.version,
           ".target %s" % T.target,
           ".address_size 64",
           ""]
    for op in T.ops:
        out += reduce_kernel(T, op) + [""]
        out += exchange_kernel(T, op) + [""]
        out += ringll_kernel(T, op) + [""]
        out += ringsimple_kernel(T, op) + [""]
    return "\n".join(out).rstrip("\n") + "\n"


def write_all(outdir):
    os.makedirs(outdir, exist_ok=True)
    names = []
    for T in TYPES:
        name = "reduce_%s.ptx" % T.sfx
        with open(os.path.join(outdir, name), "w", newline="\n") as f:
            f.write(file_text(T))
        names.append(name)
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary directory and fail if ptx/ differs")
    ap.add_argument("--out", default=None, help="output directory (default: <repo>/ptx)")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ptxdir = args.out or os.path.join(root, "ptx")
    if not args.check:
        names = write_all(ptxdir)
        print("gen_ptx: wrote %d files to %s" % (len(names), ptxdir))
        return 0
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        names = write_all(tmp)
        for name in names:
            new = open(os.path.join(tmp, name)).read().splitlines(keepends=True)
            path = os.path.join(ptxdir, name)
            if not os.path.exists(path):
                print("gen_ptx: MISSING %s (run python3 kernels/gen_ptx.py)" % path, file=sys.stderr)
                bad += 1
                continue
            old = open(path).read().splitlines(keepends=True)
            if old != new:
                bad += 1
                sys.stdout.writelines(difflib.unified_diff(
                    old, new, "ptx/" + name + " (committed)", "ptx/" + name + " (generated)"))
    # A reduce_*.ptx the table no longer makes is stale too.
    for name in sorted(os.listdir(ptxdir)):
        if name.startswith("reduce_") and name.endswith(".ptx") and name not in names:
            print("gen_ptx: %s is not made by the generator (remove it or add its type)" % name,
                  file=sys.stderr)
            bad += 1
    if bad:
        print("gen_ptx: FAILED: %d file(s) differ from the generator's output; run "
              "python3 kernels/gen_ptx.py && UPDATE_CUBINS=1 bash .ci/check-ptx.sh" % bad,
              file=sys.stderr)
        return 1
    print("gen_ptx: all %d files match the generator" % len(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
