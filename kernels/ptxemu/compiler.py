"""Compile a parsed PTX entry into Python functions, one per instruction.

Each instruction becomes a small generated function `f(t)` over the thread
state `t` (registers in the list `t.r`, values as unsigned ints of the
register's width; predicates as bools; None = never written).  It returns
None to fall through, an instruction index to jump to, BARRIER or EXIT.
Generating source (then one `exec` per kernel) keeps the interpreter loop a
plain list lookup plus one call per instruction.

Every opcode and modifier is checked against what is implemented; anything
else is a PtxUnsupported error naming the source line, so a kernel never runs
with an instruction the emulator only pretends to understand.
"""

from . import fp, ops
from .errors import PtxUnsupported, UninitializedRegister, Trap, ArithmeticFault, MemoryFault
from .parser import TYPE_BITS

BARRIER = -1
EXIT = -2

# Generic-address window of shared memory (cvta.shared adds it).
SHARED_WINDOW = 0x7E00_0000_0000
SHARED_WINDOW_SIZE = 1 << 32

SPECIALS = {
    "%tid.x": ("t.tid", 32), "%tid.y": ("0", 32), "%tid.z": ("0", 32),
    "%ntid.x": ("t.ntid", 32), "%ntid.y": ("1", 32), "%ntid.z": ("1", 32),
    "%ctaid.x": ("t.ctaid", 32), "%ctaid.y": ("0", 32), "%ctaid.z": ("0", 32),
    "%nctaid.x": ("t.nctaid", 32), "%nctaid.y": ("1", 32), "%nctaid.z": ("1", 32),
    "%laneid": ("(t.tid & 31)", 32), "%warpid": ("(t.tid >> 5)", 32),
    "%nwarpid": ("32", 32),
    "%globaltimer": ("t.m.clock", 64),
    "%globaltimer_lo": ("(t.m.clock & 0xFFFFFFFF)", 32),
    "%globaltimer_hi": ("(t.m.clock >> 32)", 32),
    "%clock": ("(t.m.steps & 0xFFFFFFFF)", 32),
    "%clock64": ("t.m.steps", 64),
    "%smid": ("(t.ctaid % 132)", 32), "%nsmid": ("132", 32),
    "%gridid": ("t.grid.gid", 64),
}

FLOAT_TYPES = ("f16", "f16x2", "bf16", "bf16x2", "f32", "f64")
INT_T = ("u16", "u32", "u64", "s16", "s32", "s64")
BIT_T = ("b16", "b32", "b64")
SCOPES = {"cta", "gpu", "sys", "cluster"}
LD_QUALS = {"weak", "volatile", "relaxed", "acquire", "nc", "ca", "cg", "cs", "lu", "cv",
            "L1::evict_normal", "L1::evict_unchanged", "L1::evict_first", "L1::evict_last",
            "L1::no_allocate", "L2::evict_normal", "L2::evict_first", "L2::evict_last",
            "L2::64B", "L2::128B", "L2::256B"} | SCOPES
ST_QUALS = {"weak", "volatile", "relaxed", "release", "wb", "cg", "cs", "wt",
            "L1::evict_normal", "L1::evict_unchanged", "L1::evict_first", "L1::evict_last",
            "L1::no_allocate", "L2::evict_normal", "L2::evict_first", "L2::evict_last"} | SCOPES
SPACES = {"global", "shared", "shared::cta", "param", "param::entry"}


def _strength(flags, strong_quals):
    """None for a weak access, else its scope: .volatile counts as .sys (PTX
    memory model: volatile operations behave as relaxed at system scope)."""
    if "volatile" in flags:
        return "sys"
    if flags & set(strong_quals):
        return next((f for f in ("sys", "gpu", "cta", "cluster") if f in flags), "gpu")
    return None


def _signed_expr(v, bits):
    s = 1 << (bits - 1)
    return "((%s ^ %d) - %d)" % (v, s, s)


class Uninit:
    pass


class CompiledKernel:
    """A compiled entry: code list, register table, parameter and shared layout."""

    def __init__(self, module, entry):
        self.module = module
        self.entry = entry
        self.name = entry.name
        self.regnames = list(entry.regs.keys())
        self.regidx = {n: i for i, n in enumerate(self.regnames)}
        self.regtype = [entry.regs[n] for n in self.regnames]
        self.params = {p[0]: p for p in entry.params}
        self.param_list = entry.params
        self.param_size = (entry.params[-1][4] + entry.params[-1][2]) if entry.params else 0
        # shared layout: module-level variables, then the entry's
        self.shared_vars = {}
        off = 0
        for v in list(module.shared) + list(entry.shared):
            off = (off + v.align - 1) // v.align * v.align
            self.shared_vars[v.name] = (off, v)
            off += v.size
        self.shared_size = off
        self.lint = []
        self.code = []
        self.texts = []
        self.lines = []
        self._compile()

    # -----------------------------------------------------------------
    def _compile(self):
        ns = {
            "U": self._uninit, "fp": fp, "ops": ops, "Trap": Trap,
            "ArithmeticFault": ArithmeticFault, "MemoryFault": MemoryFault,
            "BARRIER": BARRIER, "EXIT": EXIT, "SW": SHARED_WINDOW,
            "SWS": SHARED_WINDOW_SIZE, "ifb": int.from_bytes,
        }
        self._ns = ns
        self._nh = 0
        srcs = []
        body = self.entry.body
        for idx, ins in enumerate(body):
            g = Gen(self, ins, idx)
            try:
                g.build()
            except PtxUnsupported as e:
                raise PtxUnsupported("%s:%d: %s: %s" % (self.module.source_name, ins.line,
                                                         ins.text, e)) from None
            srcs.append(g.source("_f%d" % idx))
            self.texts.append(ins.text)
            self.lines.append(ins.line)
        # implicit ret at the end of the body
        srcs.append("def _f%d(t):\n    return EXIT\n" % len(body))
        self.texts.append("<end of %s>" % self.name)
        self.lines.append(self.entry.line)
        code = compile("\n".join(srcs), "<ptx:%s>" % self.name, "exec")
        exec(code, ns)
        self.code = [ns["_f%d" % i] for i in range(len(body) + 1)]
        self._lint()

    def helper(self, obj):
        self._nh += 1
        name = "_h%d" % self._nh
        self._ns[name] = obj
        return name

    def _uninit(self, t, i):
        raise UninitializedRegister("read of register %s, which was never written" % self.regnames[i])

    def _lint(self):
        """Portability notes that are not errors: float add/mul without an
        explicit rounding modifier may be contracted into an fma by ptxas
        (PTX ISA: 'add/mul ... with no rounding modifier ... may be optimized
        aggressively by the code generator'), which changes results."""
        for ins in self.entry.body:
            if ins.base in ("add", "sub", "mul") and any(m in FLOAT_TYPES for m in ins.mods) \
                    and not any(m in ("rn", "rz", "rm", "rp") for m in ins.mods):
                self.lint.append("%s:%d: `%s` has no rounding modifier: ptxas may fuse it into an fma"
                                 % (self.module.source_name, ins.line, ins.text))


class Gen:
    """Source generator for one instruction."""

    def __init__(self, k, ins, idx):
        self.k = k
        self.ins = ins
        self.idx = idx
        self.lines = []
        self.ntmp = 0
        self.ret = None

    def source(self, fname):
        out = ["def %s(t):" % fname, "    r = t.r"]
        ins = self.ins
        if ins.pred is not None:
            pi = self.reg_index(ins.pred, want_pred=True)
            out.append("    p = r[%d]" % pi)
            out.append("    if p is None: U(t, %d)" % pi)
            if ins.pred_neg:
                out.append("    p = not p")
            if ins.base == "bra" and "uni" in ins.mods:
                # PTX ISA bra: ".uni ... the branch is non-divergent, i.e. all
                # active threads in a warp have identical values for the guard
                # predicate and branch target": checked per warp and visit
                out.append("    t.m.uni_check(t, %d, p)" % self.idx)
            out.append("    if not p: return None")
        out.extend("    " + ln for ln in self.lines)
        if self.ret is not None:
            out.append("    return %s" % self.ret)
        return "\n".join(out) + "\n"

    # ---- helpers -------------------------------------------------------------
    def unsup(self, msg):
        raise PtxUnsupported(msg)

    def tmp(self):
        self.ntmp += 1
        return "x%d" % self.ntmp

    def emit(self, s):
        self.lines.append(s)

    def reg_index(self, name, want_pred=False):
        if name not in self.k.regidx:
            if name in SPECIALS:
                self.unsup("special register %s used as a destination or predicate" % name)
            self.unsup("undeclared register %s" % name)
        i = self.k.regidx[name]
        is_pred = self.k.regtype[i] == "pred"
        if want_pred and not is_pred:
            self.unsup("%s is not a predicate register" % name)
        if not want_pred and is_pred:
            self.unsup("predicate %s used as a value" % name)
        return i

    def reg_bits(self, name):
        return TYPE_BITS[self.k.regtype[self.k.regidx[name]]]

    def read(self, op, bits, signed=False, ftype=None):
        """Emit code reading operand `op` as a `bits`-wide value; returns an
        expression.  ftype: the float type when the instruction is a float op
        (immediates are then float literals)."""
        mask = (1 << bits) - 1
        if op.kind == "reg":
            if op.neg:
                self.unsup("'!' on a non-predicate operand")
            if op.name in SPECIALS:
                expr, w = SPECIALS[op.name]
                v = self.tmp()
                self.emit("%s = %s" % (v, expr if w <= bits else "(%s & %d)" % (expr, mask)))
                return _signed_expr(v, bits) if signed else v
            i = self.reg_index(op.name)
            v = self.tmp()
            self.emit("%s = r[%d]" % (v, i))
            self.emit("if %s is None: U(t, %d)" % (v, i))
            if self.reg_bits(op.name) > bits:
                self.emit("%s &= %d" % (v, mask))
            return _signed_expr(v, bits) if signed else v
        if op.kind == "imm":
            if ftype is not None:
                return str(fp.from_float(float(op.value), ops.FMT_OF[ftype]))
            val = op.value & mask
            if signed and val >> (bits - 1):
                val -= 1 << bits
            return str(val)
        if op.kind == "fimm":
            if ftype is None:
                # a float literal used as bits (e.g. mov.b32 %r, 0f3F800000)
                if op.width is None:
                    self.unsup("decimal float literal %r where an integer is expected" % op.value)
                if op.width != bits:
                    self.unsup("%d-bit float literal in a %d-bit operand" % (op.width, bits))
                return str(op.bits)
            fmt = ops.FMT_OF[ftype]
            if op.width == fmt.nbits and op.width is not None:
                return str(op.bits)
            if op.width == 32:
                val = fp.dec_f32(op.bits)
            elif op.width == 64:
                val = fp.dec_f64(op.bits)
            else:
                val = op.value
            b = fp.from_float(val, fmt)
            if ftype.endswith("x2"):
                b = b | (b << 16)
            return str(b)
        if op.kind == "sym":
            if op.name == "WARP_SZ":
                return "32"
            if op.name in self.k.shared_vars:
                return str(self.k.shared_vars[op.name][0])
            self.unsup("symbol %s used as a value" % op.name)
        self.unsup("operand %r not allowed here" % op)

    def read_pred(self, op):
        if op.kind == "imm":
            return "True" if op.value else "False"
        if op.kind != "reg":
            self.unsup("expected a predicate operand, got %r" % op)
        i = self.reg_index(op.name, want_pred=True)
        v = self.tmp()
        self.emit("%s = r[%d]" % (v, i))
        self.emit("if %s is None: U(t, %d)" % (v, i))
        return "(not %s)" % v if op.neg else v

    def write(self, op, expr, bits):
        if op.kind == "sink":
            return
        if op.kind != "reg" or op.neg:
            self.unsup("destination must be a register, got %r" % op)
        i = self.reg_index(op.name)
        rb = self.reg_bits(op.name)
        if rb < bits:
            self.unsup("%d-bit result into %d-bit register %s" % (bits, rb, op.name))
        self.emit("r[%d] = %s" % (i, expr))

    def write_pred(self, op, expr):
        if op.kind == "sink":
            return
        if op.kind != "reg" or op.neg:
            self.unsup("destination must be a predicate register, got %r" % op)
        i = self.reg_index(op.name, want_pred=True)
        self.emit("r[%d] = %s" % (i, expr))

    def nops(self, n):
        if len(self.ins.ops) != n:
            self.unsup("expected %d operands, got %d" % (n, len(self.ins.ops)))

    def split(self, allowed, ntypes=1):
        """Split modifiers into (types, flags); check flags against `allowed`."""
        types = [m for m in self.ins.mods if m in TYPE_BITS]
        flags = [m for m in self.ins.mods if m not in TYPE_BITS]
        bad = [f for f in flags if f not in allowed]
        if bad:
            self.unsup("unsupported modifier(s) %s on %s" % (", ".join("." + b for b in bad), self.ins.base))
        if len(types) != ntypes:
            self.unsup("expected %d type modifier(s), got %s" % (ntypes, types))
        return types, set(flags)

    # ---- dispatch -------------------------------------------------------------
    def build(self):
        b = self.ins.base
        fn = getattr(self, "op_" + b, None)
        if fn is None:
            self.unsup("unknown instruction %r" % b)
        fn()

    # ---- moves -----------------------------------------------------------------
    def op_mov(self):
        self.nops(2)
        (ty,), _ = self.split(set())
        d, a = self.ins.ops
        if ty == "pred":
            self.write_pred(d, self.read_pred(a))
            return
        bits = TYPE_BITS[ty]
        if a.kind == "vec":                      # pack: element 0 in the low bits
            n = len(a.items)
            w = bits // n
            parts = []
            for j, it in enumerate(a.items):
                parts.append("(%s << %d)" % (self.read(it, w), w * j))
            self.write(d, "(" + " | ".join(parts) + ")", bits)
            return
        if d.kind == "vec":                      # unpack
            v = self.read(a, bits)
            n = len(d.items)
            w = bits // n
            for j, it in enumerate(d.items):
                self.write(it, "((%s >> %d) & %d)" % (v, w * j, (1 << w) - 1), w)
            return
        if a.kind == "sym" and a.name in self.k.params:
            self.unsup("mov of a kernel parameter address")
        ftype = ty if ty in FLOAT_TYPES else None
        self.write(d, self.read(a, bits, ftype=ftype), bits)

    def op_cvta(self):
        self.nops(2)
        (ty,), fl = self.split({"to", "global", "shared", "shared::cta", "param"})
        d, a = self.ins.ops
        bits = TYPE_BITS[ty]
        v = self.read(a, bits)
        if "global" in fl:
            self.write(d, v, bits)               # global addresses are generic addresses
        elif "shared" in fl or "shared::cta" in fl:
            if "to" in fl:
                t = self.tmp()
                self.emit("%s = %s - SW" % (t, v))
                self.emit("if not (0 <= %s < SWS): raise MemoryFault('cvta.to.shared of 0x%%x: not a shared-window address' %% %s)" % (t, v))
                self.write(d, t, bits)
            else:
                self.write(d, "(%s + SW)" % v, bits)
        else:
            self.unsup("cvta to/from this state space")

    # ---- integer arithmetic ------------------------------------------------------
    def _int_type(self, ty):
        if ty not in INT_T and ty not in BIT_T:
            self.unsup("type .%s" % ty)
        return TYPE_BITS[ty], ty[0] == "s"

    def _float_binop(self, op, allowed_extra=()):
        allowed = {"rn", "rz", "rm", "rp", "ftz", "sat"} | set(allowed_extra)
        (ty,), fl = self.split(allowed)
        if ty not in FLOAT_TYPES:
            self.unsup("type .%s" % ty)
        mode = next((m for m in ("rn", "rz", "rm", "rp") if m in fl), "rn")
        if ty in ("f16", "f16x2", "bf16", "bf16x2") and "sat" in fl and ty.startswith("bf"):
            self.unsup(".sat on bf16")
        f = ops.make_float_binop(op, ty, mode, "ftz" in fl, "sat" in fl, "NaN" in fl)
        h = self.k.helper(f)
        d, a, b = self.ins.ops
        bits = TYPE_BITS[ty]
        x = self.read(a, bits, ftype=ty)
        y = self.read(b, bits, ftype=ty)
        self.write(d, "%s(%s, %s)" % (h, x, y), bits)

    def op_add(self):
        self.nops(3)
        ty = [m for m in self.ins.mods if m in TYPE_BITS]
        if ty and ty[0] in FLOAT_TYPES:
            return self._float_binop("add")
        (ty,), fl = self.split({"sat"})
        bits, signed = self._int_type(ty)
        d, a, b = self.ins.ops
        if "sat" in fl:
            if ty != "s32":
                self.unsup("add.sat is only for .s32")
            x = self.read(a, 32, True)
            y = self.read(b, 32, True)
            self.write(d, "(max(-2147483648, min(2147483647, %s + %s)) & 0xFFFFFFFF)" % (x, y), 32)
            return
        x = self.read(a, bits)
        y = self.read(b, bits)
        self.write(d, "((%s + %s) & %d)" % (x, y, (1 << bits) - 1), bits)

    def op_sub(self):
        self.nops(3)
        ty = [m for m in self.ins.mods if m in TYPE_BITS]
        if ty and ty[0] in FLOAT_TYPES:
            return self._float_binop("sub")
        (ty,), fl = self.split({"sat"})
        bits, signed = self._int_type(ty)
        d, a, b = self.ins.ops
        if "sat" in fl:
            if ty != "s32":
                self.unsup("sub.sat is only for .s32")
            x = self.read(a, 32, True)
            y = self.read(b, 32, True)
            self.write(d, "(max(-2147483648, min(2147483647, %s - %s)) & 0xFFFFFFFF)" % (x, y), 32)
            return
        x = self.read(a, bits)
        y = self.read(b, bits)
        self.write(d, "((%s - %s) & %d)" % (x, y, (1 << bits) - 1), bits)

    def op_mul(self):
        self.nops(3)
        ty = [m for m in self.ins.mods if m in TYPE_BITS]
        if ty and ty[0] in FLOAT_TYPES:
            return self._float_binop("mul")
        (ty,), fl = self.split({"lo", "hi", "wide"})
        bits, signed = self._int_type(ty)
        d, a, b = self.ins.ops
        if len(fl) != 1:
            self.unsup("integer mul needs exactly one of .lo .hi .wide")
        x = self.read(a, bits, signed)
        y = self.read(b, bits, signed)
        if "lo" in fl:
            self.write(d, "((%s * %s) & %d)" % (x, y, (1 << bits) - 1), bits)
        elif "hi" in fl:
            self.write(d, "(((%s * %s) >> %d) & %d)" % (x, y, bits, (1 << bits) - 1), bits)
        else:
            if bits == 64:
                self.unsup("mul.wide on 64-bit types")
            self.write(d, "((%s * %s) & %d)" % (x, y, (1 << (2 * bits)) - 1), 2 * bits)

    def op_mad(self):
        self.nops(4)
        ty = [m for m in self.ins.mods if m in TYPE_BITS]
        if ty and ty[0] in FLOAT_TYPES:
            # mad.rn.f32 == fma.rn.f32 (PTX ISA: mad.f32 with a rounding modifier is fused)
            if not any(m in self.ins.mods for m in ("rn", "rz", "rm", "rp")):
                self.unsup("mad.f32 without a rounding modifier")
            return self.op_fma()
        (ty,), fl = self.split({"lo", "hi", "wide", "sat"})
        bits, signed = self._int_type(ty)
        d, a, b, c = self.ins.ops
        kinds = fl - {"sat"}
        if len(kinds) != 1:
            self.unsup("integer mad needs exactly one of .lo .hi .wide")
        x = self.read(a, bits, signed)
        y = self.read(b, bits, signed)
        if "lo" in kinds:
            z = self.read(c, bits)
            self.write(d, "((%s * %s + %s) & %d)" % (x, y, z, (1 << bits) - 1), bits)
        elif "hi" in kinds:
            if "sat" in fl:
                self.unsup("mad.hi.sat")
            z = self.read(c, bits, signed)
            self.write(d, "((((%s * %s) >> %d) + %s) & %d)" % (x, y, bits, z, (1 << bits) - 1), bits)
        else:
            if bits == 64:
                self.unsup("mad.wide on 64-bit types")
            z = self.read(c, 2 * bits)
            self.write(d, "((%s * %s + %s) & %d)" % (x, y, z, (1 << (2 * bits)) - 1), 2 * bits)

    def op_div(self):
        self.nops(3)
        ty = [m for m in self.ins.mods if m in TYPE_BITS]
        if ty and ty[0] in FLOAT_TYPES:
            if ty[0] not in ("f32", "f64"):
                self.unsup("div on .%s" % ty[0])
            if "approx" in self.ins.mods or "full" in self.ins.mods:
                self.unsup("div.approx/div.full (not correctly rounded) are not emulated")
            if not any(m in self.ins.mods for m in ("rn", "rz", "rm", "rp")):
                self.unsup("div.f32 needs a rounding modifier")
            return self._float_binop("div")
        (ty,), fl = self.split(set())
        bits, signed = self._int_type(ty)
        d, a, b = self.ins.ops
        x = self.read(a, bits, signed)
        y = self.read(b, bits, signed)
        yv = self.tmp()
        self.emit("%s = %s" % (yv, y))
        # PTX ISA div (integer): "d = a / b" with C semantics, i.e. the quotient
        # is truncated toward zero for signed types; "Division by zero yields an
        # unspecified, machine-specific value" -- an error here, never a silent value
        self.emit("if %s == 0: raise ArithmeticFault('integer division by zero (div.%s)')" % (yv, ty))
        q = self.tmp()
        self.emit("%s = abs(%s) // abs(%s)" % (q, x, yv))
        self.emit("if (%s < 0) != (%s < 0): %s = -%s" % (x, yv, q, q))
        self.write(d, "(%s & %d)" % (q, (1 << bits) - 1), bits)

    def op_rem(self):
        self.nops(3)
        (ty,), fl = self.split(set())
        bits, signed = self._int_type(ty)
        d, a, b = self.ins.ops
        x = self.read(a, bits, signed)
        y = self.read(b, bits, signed)
        yv = self.tmp()
        self.emit("%s = %s" % (yv, y))
        # PTX ISA rem: C's %, the remainder has the sign of the dividend
        self.emit("if %s == 0: raise ArithmeticFault('integer division by zero (rem.%s)')" % (yv, ty))
        q = self.tmp()
        xv = self.tmp()
        self.emit("%s = %s" % (xv, x))
        self.emit("%s = abs(%s) // abs(%s)" % (q, xv, yv))
        self.emit("if (%s < 0) != (%s < 0): %s = -%s" % (xv, yv, q, q))
        self.write(d, "((%s - %s * %s) & %d)" % (xv, q, yv, (1 << bits) - 1), bits)

    def _minmax(self, which):
        self.nops(3)
        ty = [m for m in self.ins.mods if m in TYPE_BITS]
        if ty and ty[0] in FLOAT_TYPES:
            if "xorsign" in self.ins.mods or "abs" in self.ins.mods:
                self.unsup("%s.xorsign.abs" % which)
            return self._float_binop(which, ("NaN",))
        (ty,), fl = self.split({"relu"})
        bits, signed = self._int_type(ty)
        d, a, b = self.ins.ops
        x = self.read(a, bits, signed)
        y = self.read(b, bits, signed)
        e = "%s(%s, %s)" % (which, x, y)
        if "relu" in fl:
            e = "max(0, %s)" % e
        self.write(d, "(%s & %d)" % (e, (1 << bits) - 1), bits)

    def op_min(self):
        self._minmax("min")

    def op_max(self):
        self._minmax("max")

    def op_neg(self):
        self.nops(2)
        ty = [m for m in self.ins.mods if m in TYPE_BITS]
        if ty and ty[0] in FLOAT_TYPES:
            (ty,), fl = self.split({"ftz"})
            h = self.k.helper(ops.make_float_unop("neg", ty, "ftz" in fl))
            d, a = self.ins.ops
            self.write(d, "%s(%s)" % (h, self.read(a, TYPE_BITS[ty], ftype=ty)), TYPE_BITS[ty])
            return
        (ty,), fl = self.split(set())
        bits, signed = self._int_type(ty)
        d, a = self.ins.ops
        self.write(d, "((-%s) & %d)" % (self.read(a, bits), (1 << bits) - 1), bits)

    def op_abs(self):
        self.nops(2)
        ty = [m for m in self.ins.mods if m in TYPE_BITS]
        if ty and ty[0] in FLOAT_TYPES:
            (ty,), fl = self.split({"ftz"})
            h = self.k.helper(ops.make_float_unop("abs", ty, "ftz" in fl))
            d, a = self.ins.ops
            self.write(d, "%s(%s)" % (h, self.read(a, TYPE_BITS[ty], ftype=ty)), TYPE_BITS[ty])
            return
        (ty,), fl = self.split(set())
        bits, signed = self._int_type(ty)
        d, a = self.ins.ops
        self.write(d, "(abs(%s) & %d)" % (self.read(a, bits, True), (1 << bits) - 1), bits)

    def op_fma(self):
        self.nops(4)
        (ty,), fl = self.split({"rn", "rz", "rm", "rp", "ftz", "sat"})
        if ty not in FLOAT_TYPES:
            self.unsup("fma on .%s" % ty)
        mode = next((m for m in ("rn", "rz", "rm", "rp") if m in fl), None)
        if mode is None:
            self.unsup("fma needs a rounding modifier")
        h = self.k.helper(ops.make_float_fma(ty, mode, "ftz" in fl, "sat" in fl))
        d, a, b, c = self.ins.ops
        bits = TYPE_BITS[ty]
        x = self.read(a, bits, ftype=ty)
        y = self.read(b, bits, ftype=ty)
        z = self.read(c, bits, ftype=ty)
        self.write(d, "%s(%s, %s, %s)" % (h, x, y, z), bits)

    def op_copysign(self):
        self.nops(3)
        (ty,), fl = self.split(set())
        if ty not in ("f32", "f64"):
            self.unsup("copysign on .%s" % ty)
        bits = TYPE_BITS[ty]
        sb = 1 << (bits - 1)
        d, a, b = self.ins.ops
        x = self.read(a, bits, ftype=ty)
        y = self.read(b, bits, ftype=ty)
        # PTX ISA copysign: d = b with the sign of a
        self.write(d, "((%s & %d) | (%s & %d))" % (x, sb, y, sb - 1), bits)

    def op_testp(self):
        self.nops(2)
        (ty,), fl = self.split({"finite", "infinite", "number", "notanumber", "normal", "subnormal"})
        if len(fl) != 1 or ty not in ("f32", "f64"):
            self.unsup("testp form")
        h = self.k.helper(ops.testp(fl.pop(), ty))
        d, a = self.ins.ops
        self.write_pred(d, "%s(%s)" % (h, self.read(a, TYPE_BITS[ty], ftype=ty)))

    # ---- bit operations ------------------------------------------------------------
    def _logic(self, pyop):
        (ty,), fl = self.split(set())
        if ty == "pred":
            d, a, b = self.ins.ops
            x = self.read_pred(a)
            y = self.read_pred(b)
            e = {"&": "(%s and %s)", "|": "(%s or %s)", "^": "(%s != %s)"}[pyop] % (x, y)
            self.write_pred(d, "bool(%s)" % e)
            return
        if ty not in BIT_T:
            self.unsup("type .%s" % ty)
        bits = TYPE_BITS[ty]
        d, a, b = self.ins.ops
        self.write(d, "(%s %s %s)" % (self.read(a, bits), pyop, self.read(b, bits)), bits)

    def op_and(self):
        self.nops(3)
        self._logic("&")

    def op_or(self):
        self.nops(3)
        self._logic("|")

    def op_xor(self):
        self.nops(3)
        self._logic("^")

    def op_not(self):
        self.nops(2)
        (ty,), fl = self.split(set())
        d, a = self.ins.ops
        if ty == "pred":
            self.write_pred(d, "(not %s)" % self.read_pred(a))
            return
        if ty not in BIT_T:
            self.unsup("type .%s" % ty)
        bits = TYPE_BITS[ty]
        self.write(d, "(%s ^ %d)" % (self.read(a, bits), (1 << bits) - 1), bits)

    def op_cnot(self):
        self.nops(2)
        (ty,), fl = self.split(set())
        if ty not in BIT_T:
            self.unsup("type .%s" % ty)
        bits = TYPE_BITS[ty]
        d, a = self.ins.ops
        self.write(d, "(1 if %s == 0 else 0)" % self.read(a, bits), bits)

    def op_shl(self):
        self.nops(3)
        (ty,), fl = self.split(set())
        if ty not in BIT_T:
            self.unsup("shl.%s" % ty)
        bits = TYPE_BITS[ty]
        d, a, b = self.ins.ops
        x = self.read(a, bits)
        s = self.read(b, 32)
        # PTX ISA: shift amounts greater than the register width are clamped to N
        self.write(d, "((%s << min(%s, %d)) & %d)" % (x, s, bits, (1 << bits) - 1), bits)

    def op_shr(self):
        self.nops(3)
        (ty,), fl = self.split(set())
        if ty not in BIT_T and ty not in INT_T:
            self.unsup("shr.%s" % ty)
        bits = TYPE_BITS[ty]
        d, a, b = self.ins.ops
        signed = ty[0] == "s"
        x = self.read(a, bits, signed)
        s = self.read(b, 32)
        self.write(d, "((%s >> min(%s, %d)) & %d)" % (x, s, bits, (1 << bits) - 1), bits)

    def op_shf(self):
        self.nops(4)
        (ty,), fl = self.split({"l", "r", "clamp", "wrap"})
        if ty != "b32" or len(fl & {"l", "r"}) != 1 or len(fl & {"clamp", "wrap"}) != 1:
            self.unsup("shf form")
        d, a, b, c = self.ins.ops
        x = self.read(a, 32)
        y = self.read(b, 32)
        n = self.read(c, 32)
        nn = self.tmp()
        self.emit("%s = min(%s, 32)" % (nn, n) if "clamp" in fl else "%s = %s & 31" % (nn, n))
        v = self.tmp()
        self.emit("%s = (%s << 32) | %s" % (v, y, x))
        if "l" in fl:
            self.write(d, "(((%s << %s) >> 32) & 0xFFFFFFFF)" % (v, nn), 32)
        else:
            self.write(d, "((%s >> %s) & 0xFFFFFFFF)" % (v, nn), 32)

    def op_popc(self):
        self.nops(2)
        (ty,), fl = self.split(set())
        if ty not in ("b32", "b64"):
            self.unsup("popc.%s" % ty)
        d, a = self.ins.ops
        self.write(d, "bin(%s).count('1')" % self.read(a, TYPE_BITS[ty]), 32)

    def op_clz(self):
        self.nops(2)
        (ty,), fl = self.split(set())
        if ty not in ("b32", "b64"):
            self.unsup("clz.%s" % ty)
        bits = TYPE_BITS[ty]
        d, a = self.ins.ops
        self.write(d, "(%d - (%s).bit_length())" % (bits, self.read(a, bits)), 32)

    def op_brev(self):
        self.nops(2)
        (ty,), fl = self.split(set())
        if ty not in ("b32", "b64"):
            self.unsup("brev.%s" % ty)
        bits = TYPE_BITS[ty]
        d, a = self.ins.ops
        self.write(d, "int(format(%s, '0%db')[::-1], 2)" % (self.read(a, bits), bits), bits)

    def op_bfe(self):
        self.nops(4)
        (ty,), fl = self.split(set())
        if ty not in ("u32", "u64", "s32", "s64"):
            self.unsup("bfe.%s" % ty)
        bits = TYPE_BITS[ty]
        d, a, b, c = self.ins.ops
        h = self.k.helper(ops.bfe)
        self.write(d, "%s(%s, %s, %s, %d, %s)" % (h, self.read(a, bits), self.read(b, 32),
                                                  self.read(c, 32), bits, ty[0] == "s"), bits)

    def op_bfi(self):
        self.nops(5)
        (ty,), fl = self.split(set())
        if ty not in ("b32", "b64"):
            self.unsup("bfi.%s" % ty)
        bits = TYPE_BITS[ty]
        d, a, b, c, e = self.ins.ops
        h = self.k.helper(ops.bfi)
        self.write(d, "%s(%s, %s, %s, %s, %d)" % (h, self.read(a, bits), self.read(b, bits),
                                                  self.read(c, 32), self.read(e, 32), bits), bits)

    def op_prmt(self):
        self.nops(4)
        (ty,), fl = self.split({"f4e", "b4e", "rc8", "ecl", "ecr", "rc16"})
        if ty != "b32":
            self.unsup("prmt.%s" % ty)
        mode = next(iter(fl)) if fl else None
        d, a, b, c = self.ins.ops
        h = self.k.helper(ops.prmt)
        self.write(d, "%s(%s, %s, %s, %r)" % (h, self.read(a, 32), self.read(b, 32),
                                              self.read(c, 32), mode), 32)

    def op_lop3(self):
        self.nops(5)
        (ty,), fl = self.split(set())
        if ty != "b32":
            self.unsup("lop3.%s" % ty)
        d, a, b, c, lut = self.ins.ops
        if lut.kind != "imm":
            self.unsup("lop3 needs an immediate LUT")
        h = self.k.helper(ops.lop3)
        self.write(d, "%s(%s, %s, %s, %d)" % (h, self.read(a, 32), self.read(b, 32),
                                              self.read(c, 32), lut.value & 0xFF), 32)

    # ---- comparison and selection ------------------------------------------------------
    INT_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
               "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
    F_CMP = {"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"}

    def op_setp(self):
        (ty,), fl = self.split(set(self.INT_CMP) | self.F_CMP | {"and", "or", "xor", "ftz"})
        cmps = [f for f in fl if f in self.INT_CMP or f in self.F_CMP]
        bools = [f for f in fl if f in ("and", "or", "xor")]
        if len(cmps) != 1 or len(bools) > 1:
            self.unsup("setp needs one comparison and at most one of .and .or .xor")
        cmp = cmps[0]
        ops_ = self.ins.ops
        if len(ops_) not in (3, 4) or (len(ops_) == 4) != bool(bools):
            self.unsup("setp operand count")
        dst = ops_[0]
        if ty in FLOAT_TYPES:
            if ty.endswith("x2"):
                self.unsup("setp on packed types")
            h = self.k.helper(ops.make_setp_float(cmp, ty, "ftz" in fl))
            bits = TYPE_BITS[ty]
            x = self.read(ops_[1], bits, ftype=ty)
            y = self.read(ops_[2], bits, ftype=ty)
            c = self.tmp()
            self.emit("%s = %s(%s, %s)" % (c, h, x, y))
        else:
            if cmp not in self.INT_CMP:
                self.unsup("setp.%s on integers" % cmp)
            if ty in BIT_T and cmp not in ("eq", "ne"):
                self.unsup("setp.%s.%s" % (cmp, ty))
            bits = TYPE_BITS[ty]
            signed = ty[0] == "s"
            if cmp in ("lo", "ls", "hi", "hs"):
                signed = False
            x = self.read(ops_[1], bits, signed)
            y = self.read(ops_[2], bits, signed)
            c = self.tmp()
            self.emit("%s = (%s %s %s)" % (c, x, self.INT_CMP[cmp], y))
        nc = "(not %s)" % c
        if bools:
            pc = self.read_pred(ops_[3])
            comb = {"and": "(%s and %s)", "or": "(%s or %s)", "xor": "(%s != %s)"}[bools[0]]
            e1 = "bool(" + comb % (c, pc) + ")"
            e2 = "bool(" + comb % (nc, pc) + ")"
        else:
            e1, e2 = c, nc
        if dst.kind == "pair":
            self.write_pred(dst.items[0], e1)
            self.write_pred(dst.items[1], e2)
        else:
            self.write_pred(dst, e1)

    def op_selp(self):
        self.nops(4)
        (ty,), fl = self.split(set())
        bits = TYPE_BITS[ty]
        d, a, b, c = self.ins.ops
        ftype = ty if ty in FLOAT_TYPES else None
        x = self.read(a, bits, ftype=ftype)
        y = self.read(b, bits, ftype=ftype)
        p = self.read_pred(c)
        self.write(d, "(%s if %s else %s)" % (x, p, y), bits)

    # ---- conversion ---------------------------------------------------------------------
    def op_cvt(self):
        mods = self.ins.mods
        types = [m for m in mods if m in TYPE_BITS]
        flags = [m for m in mods if m not in TYPE_BITS]
        allowed = {"rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "ftz", "sat",
                   "satfinite", "relu"}
        bad = [f for f in flags if f not in allowed]
        if bad:
            self.unsup("unsupported cvt modifier(s) %s" % bad)
        if len(types) != 2:
            self.unsup("cvt needs two types")
        dtype, atype = types
        rnd = next((m for m in ("rn", "rz", "rm", "rp") if m in flags), None)
        irnd = next((m for m in ("rni", "rzi", "rmi", "rpi") if m in flags), None)
        try:
            f, nargs = ops.make_cvt(dtype, atype, rnd, irnd, "ftz" in flags, "sat" in flags,
                                    "satfinite" in flags, "relu" in flags, len(self.ins.ops) - 1)
        except ValueError as e:
            self.unsup(str(e))
        self.nops(nargs + 1)
        h = self.k.helper(f)
        d = self.ins.ops[0]
        abits = TYPE_BITS[atype]
        dbits = TYPE_BITS[dtype]
        # sub-word integer types live in 16/32-bit registers
        args = [self.read(o, abits) for o in self.ins.ops[1:]]
        res = "%s(%s)" % (h, ", ".join(args))
        if dtype in ("u8", "s8", "u16", "s16") and d.kind == "reg":
            rb = self.reg_bits(d.name)
            if rb > dbits:
                # PTX ISA cvt: for destination types narrower than the register,
                # the result is sign-extended (signed) or zero-extended to the register width
                if dtype[0] == "s":
                    v = self.tmp()
                    self.emit("%s = %s" % (v, res))
                    res = "(%s & %d)" % (_signed_expr(v, dbits), (1 << rb) - 1)
                dbits = rb
        self.write(d, res, dbits)

    # ---- memory -----------------------------------------------------------------------------
    def _addr(self, m, space):
        """Expression for the address of memory operand m."""
        if m.kind != "mem":
            self.unsup("expected a memory operand, got %r" % m)
        base = m.base
        if base is None:
            return str(m.offset), None
        if base.kind == "sym":
            if base.name in self.k.params:
                if space != "param":
                    self.unsup("kernel parameter %s accessed in the %s space" % (base.name, space))
                return str(self.k.params[base.name][4] + m.offset), base.name
            if base.name in self.k.shared_vars:
                off = self.k.shared_vars[base.name][0] + m.offset
                if space == "shared":
                    return str(off), None
                if space == "generic":
                    return str(off + SHARED_WINDOW), None
                self.unsup("shared variable %s accessed in the %s space" % (base.name, space))
            self.unsup("unknown symbol %s" % base.name)
        if space == "param":
            self.unsup("ld.param through a register address")
        v = self.read(base, self.reg_bits(base.name) if base.name in self.k.regidx else 64)
        if m.offset:
            return "(%s + %d)" % (v, m.offset), None
        return v, None

    def _mem_parts(self, quals):
        mods = self.ins.mods
        types = [m for m in mods if m in TYPE_BITS]
        flags = [m for m in mods if m not in TYPE_BITS]
        vec = 1
        space = "generic"
        for f in flags:
            if f in ("v2", "v4"):
                vec = int(f[1])
            elif f in SPACES:
                space = f.split("::")[0]
            elif f not in quals:
                self.unsup("unsupported %s qualifier .%s" % (self.ins.base, f))
        if "nc" in flags and space != "global":
            self.unsup("ld.nc is only for the global space")
        if len(types) != 1:
            self.unsup("%s needs one type" % self.ins.base)
        ty = types[0]
        if ty in ("b128",) or ty.endswith("x2") or ty in ("e4m3", "e5m2"):
            self.unsup("%s.%s" % (self.ins.base, ty))
        return space, vec, ty, set(flags)

    def _accessor(self, space, addr, size, kind):
        """Expression returning bytes (load) / statement storing (store)."""
        if space == "global":
            return "t.m.mem", addr
        if space == "shared":
            return "t.block.smem", addr
        if space == "generic":
            return "(t.block.gsmem if SW <= %s < SW + SWS else t.m.mem)" % addr, addr
        self.unsup("state space %s" % space)

    def op_ld(self):
        self._ld(LD_QUALS)

    def op_ldu(self):
        self._ld(set())

    def _ld(self, quals):
        self.nops(2)
        space, vec, ty, fl = self._mem_parts(quals)
        d, m = self.ins.ops
        esize = TYPE_BITS[ty] // 8
        total = esize * vec
        dests = d.items if d.kind == "vec" else [d]
        if len(dests) != vec:
            self.unsup("vector width %d with %d destinations" % (vec, len(dests)))
        addr, pname = self._addr(m, space)
        data = self.tmp()
        if space == "param":
            self.emit("%s = t.grid.param_bytes[%s:%s + %d]" % (data, addr, addr, total))
            off = int(addr)
            pinfo = self.k.params[pname]
            if off + total > pinfo[4] + pinfo[2] or off < pinfo[4]:
                self.unsup("ld.param outside parameter %s" % pname)
        else:
            a = self.tmp()
            self.emit("%s = %s" % (a, addr))
            obj, _ = self._accessor(space, a, total, "load")
            strong = _strength(fl, ("volatile", "relaxed", "acquire"))
            if "nc" in fl:
                self.emit("%s = %s.load_nc(%s, %d, t)" % (data, obj, a, total))
            else:
                self.emit("%s = %s.load(%s, %d, t%s)" % (data, obj, a, total,
                                                         ", %r" % strong if strong else ""))
        signed = ty[0] == "s"
        for j, dd in enumerate(dests):
            if dd.kind == "sink":
                continue
            if dd.kind != "reg":
                self.unsup("ld destination %r" % dd)
            rb = self.reg_bits(dd.name)
            eb = esize * 8
            if rb < eb:
                self.unsup("%d-byte load into %d-bit register %s" % (esize, rb, dd.name))
            v = "ifb(%s[%d:%d], 'little')" % (data, j * esize, (j + 1) * esize)
            if signed and rb > eb:
                # PTX ISA ld: sign-extended for signed types, zero-extended otherwise
                tv = self.tmp()
                self.emit("%s = %s" % (tv, v))
                v = "(%s & %d)" % (_signed_expr(tv, eb), (1 << rb) - 1)
            self.write(dd, v, eb)

    def op_st(self):
        self.nops(2)
        space, vec, ty, fl = self._mem_parts(ST_QUALS)
        if space == "param":
            self.unsup("st.param")
        m, s = self.ins.ops
        esize = TYPE_BITS[ty] // 8
        total = esize * vec
        srcs = s.items if s.kind == "vec" else [s]
        if len(srcs) != vec:
            self.unsup("vector width %d with %d sources" % (vec, len(srcs)))
        vals = []
        for it in srcs:
            if it.kind == "reg" and it.name in self.k.regidx:
                rb = self.reg_bits(it.name)
                v = self.read(it, rb)
                if rb > esize * 8:
                    v = "(%s & %d)" % (v, (1 << (esize * 8)) - 1)
            else:
                v = self.read(it, esize * 8, ftype=ty if ty in FLOAT_TYPES else None)
            vals.append(v)
        addr, _ = self._addr(m, space)
        a = self.tmp()
        self.emit("%s = %s" % (a, addr))
        data = " + ".join("(%s).to_bytes(%d, 'little')" % (v, esize) for v in vals)
        obj, _ = self._accessor(space, a, total, "store")
        strong = _strength(fl, ("volatile", "relaxed", "release"))
        self.emit("%s.store(%s, %s, t%s)" % (obj, a, data, ", %r" % strong if strong else ""))

    def op_atom(self):
        self._atom(True)

    def op_red(self):
        self._atom(False)

    def _atom(self, returns):
        mods = self.ins.mods
        types = [m for m in mods if m in TYPE_BITS]
        flags = [m for m in mods if m not in TYPE_BITS]
        space = "generic"
        aop = None
        for f in flags:
            if f in ("global", "shared", "shared::cta"):
                space = f.split("::")[0]
            elif f in ("relaxed", "acquire", "release", "acq_rel") or f in SCOPES:
                pass
            elif f in ("add", "and", "or", "xor", "cas", "exch", "min", "max", "inc", "dec"):
                if aop:
                    self.unsup("two atomic operations")
                aop = f
            else:
                self.unsup("unsupported %s qualifier .%s" % (self.ins.base, f))
        if aop is None or len(types) != 1:
            self.unsup("%s needs an operation and a type" % self.ins.base)
        ty = types[0]
        bits = TYPE_BITS[ty]
        size = bits // 8
        ops_ = self.ins.ops
        if returns:
            d, m, rest = ops_[0], ops_[1], ops_[2:]
        else:
            d, m, rest = None, ops_[0], ops_[1:]
        if len(rest) != (2 if aop == "cas" else 1):
            self.unsup("%s operand count" % self.ins.base)
        ftype = ty if ty in FLOAT_TYPES else None
        if ftype and aop not in ("add", "exch", "cas", "min", "max"):
            self.unsup("atom.%s.%s" % (aop, ty))
        args = [self.read(o, bits, ftype=ftype) for o in rest]
        mask = (1 << bits) - 1
        if ftype:
            fadd = self.k.helper(ops.make_float_binop("add" if aop == "add" else aop, ty)) \
                if aop in ("add", "min", "max") else None
        signed = ty[0] == "s"
        fn = self.tmp()
        # the read-modify-write function on the old bytes
        b = args[0]
        if aop == "cas":
            body = "(%s if o == %s else o)" % (args[1], b)
        elif aop == "exch":
            body = b
        elif aop == "add":
            body = ("%s(o, %s)" % (fadd, b)) if ftype else "((o + %s) & %d)" % (b, mask)
        elif aop in ("and", "or", "xor"):
            body = "(o %s %s)" % ({"and": "&", "or": "|", "xor": "^"}[aop], b)
        elif aop in ("min", "max"):
            if ftype:
                body = "%s(o, %s)" % (fadd, b)
            elif signed:
                so = _signed_expr("o", bits)
                sb = _signed_expr(b, bits)
                body = "(%s(%s, %s) & %d)" % (aop, so, sb, mask)
            else:
                body = "%s(o, %s)" % (aop, b)
        elif aop == "inc":
            body = "(0 if o >= %s else o + 1)" % b
        elif aop == "dec":
            body = "(%s if (o == 0 or o > %s) else o - 1)" % (b, b)
        self.emit("def %s(ob):" % fn)
        self.emit("    o = ifb(ob, 'little')")
        self.emit("    return (%s).to_bytes(%d, 'little')" % (body, size))
        addr, _ = self._addr(m, space)
        a = self.tmp()
        self.emit("%s = %s" % (a, addr))
        obj, _ = self._accessor(space, a, size, "atomic")
        old = self.tmp()
        scope = next((f for f in flags if f in SCOPES), "gpu")     # atom's default scope: .gpu
        self.emit("%s = %s.atomic(%s, %d, t, %s, %r)" % (old, obj, a, size, fn, scope))
        if returns:
            self.write(d, "ifb(%s, 'little')" % old, bits)

    # ---- control ---------------------------------------------------------------------
    def op_bra(self):
        self.nops(1)
        _, fl = self.split({"uni"}, ntypes=0)
        tgt = self.ins.ops[0]
        if tgt.kind != "sym" or tgt.name not in self.k.entry.labels:
            self.unsup("branch target %r is not a label of this entry" % tgt)
        self.ret = str(self.k.entry.labels[tgt.name])

    def op_ret(self):
        self.nops(0)
        self.split({"uni"}, ntypes=0)
        self.ret = "EXIT"

    def op_exit(self):
        self.nops(0)
        self.split(set(), ntypes=0)
        self.ret = "EXIT"

    def op_trap(self):
        self.nops(0)
        self.split(set(), ntypes=0)
        self.emit("raise Trap('trap executed')")

    def op_brkpt(self):
        self.nops(0)
        self.emit("raise Trap('brkpt executed')")

    def op_membar(self):
        self.nops(0)
        self.split({"cta", "gl", "sys"}, ntypes=0)

    def op_fence(self):
        self.nops(0)
        self.split({"sc", "acq_rel", "cta", "gpu", "sys", "cluster", "proxy", "async",
                    "alias"}, ntypes=0)

    def op_nanosleep(self):
        self.nops(1)
        (ty,), _ = self.split(set())
        v = self.read(self.ins.ops[0], 32)
        self.emit("t.m.sleep(%s)" % v)

    def op_bar(self):
        self._barrier(aligned=True)

    def op_barrier(self):
        self._barrier(aligned="aligned" in self.ins.mods)

    def _barrier(self, aligned):
        mods = [m for m in self.ins.mods if m != "aligned"]
        if mods and mods[0] == "cta":
            mods = mods[1:]
        if mods == ["warp", "sync"]:
            self.nops(1)                       # bar.warp.sync: no warps in this model
            self.read(self.ins.ops[0], 32)
            return
        if mods != ["sync"]:
            self.unsup("barrier form %s (only bar.sync / barrier.sync)" % ".".join(self.ins.mods))
        ops_ = self.ins.ops
        if len(ops_) not in (1, 2):
            self.unsup("bar.sync operand count")
        bid = self.read(ops_[0], 32)
        cnt = self.read(ops_[1], 32) if len(ops_) == 2 else "None"
        self.emit("t.bar = (%s, %s, %s)" % (bid, cnt, aligned))
        self.ret = "BARRIER"
