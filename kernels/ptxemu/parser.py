"""Parser for the PTX subset our kernels are written in.

A module: `.version`, `.target`, `.address_size`, module-level `.shared`
variables, and `.entry` functions (`.visible` or not) with `.param`
parameters.  Inside an entry: `.reg` declarations (`%name<N>` ranges too),
`.shared` variables, labels, `{ }` scopes, `.pragma`, and instructions with an
optional guard predicate (`@%p` / `@!%p`).  Comments (`//`, `/* */`) are
dropped.  Anything else is a PtxSyntaxError naming the line.
"""

import re

from .errors import PtxSyntaxError

__all__ = ["Operand", "Instr", "Entry", "Module", "parse_module", "TYPE_BITS"]

# Widths of the PTX fundamental types, in bits.
TYPE_BITS = {
    "pred": 1,
    "b8": 8, "b16": 16, "b32": 32, "b64": 64, "b128": 128,
    "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "s8": 8, "s16": 16, "s32": 32, "s64": 64,
    "f16": 16, "f16x2": 32, "bf16": 16, "bf16x2": 32, "f32": 32, "f64": 64,
    "e4m3": 8, "e5m2": 8, "e4m3x2": 16, "e5m2x2": 16,
}

_TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>0[fF][0-9a-fA-F]{8}(?![0-9a-zA-Z_])
          | 0[dD][0-9a-fA-F]{16}(?![0-9a-zA-Z_])
          | 0[xX][0-9a-fA-F]+U?
          | 0[bB][01]+U?
          | [0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?
          | [0-9]+[eE][+-]?[0-9]+
          | [0-9]+U?)
  | (?P<id>[A-Za-z_$%.][A-Za-z0-9_$]*(?:(?:\.|::)[A-Za-z0-9_$]+)*)
  | (?P<str>"[^"]*")
  | (?P<punct>[{}()\[\],;:@!+\-<>=|~*])
""", re.VERBOSE)


class Tok:
    __slots__ = ("kind", "text", "line")

    def __init__(self, kind, text, line):
        self.kind = kind
        self.text = text
        self.line = line

    def __repr__(self):
        return "%s:%r@%d" % (self.kind, self.text, self.line)


def _strip_comments(src):
    """Blank out comments, keeping newlines so line numbers stay right."""
    out = []
    i = 0
    n = len(src)
    while i < n:
        c = src[i]
        if c == '"':
            j = src.find('"', i + 1)
            j = n if j < 0 else j + 1
            out.append(src[i:j])
            i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in src[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def tokenize(src):
    src = _strip_comments(src)
    toks = []
    pos = 0
    line = 1
    n = len(src)
    while pos < n:
        m = _TOKEN_RE.match(src, pos)
        if not m:
            raise PtxSyntaxError("line %d: unexpected character %r" % (line, src[pos]))
        kind = m.lastgroup
        text = m.group(kind)
        if kind != "ws":
            toks.append(Tok(kind, text, line))
        line += text.count("\n")
        pos = m.end()
    return toks


def parse_int_literal(text):
    t = text.rstrip("U")
    if t[:2] in ("0x", "0X"):
        return int(t[2:], 16)
    if t[:2] in ("0b", "0B"):
        return int(t[2:], 2)
    if len(t) > 1 and t[0] == "0" and t.isdigit():
        return int(t, 8)                      # PTX (like C): leading 0 = octal
    return int(t, 10)


class Operand:
    """kind: reg | imm | fimm | mem | vec | sym | sink | pair
       reg:  name (str), neg (bool, for !%p predicate operands)
       imm:  value (int)            fimm: bits (int), width (32/64) or value (float)
       mem:  base (Operand reg/sym/imm or None), offset (int)
       vec:  items (list of Operand)
       sym:  name (label or variable)
       pair: items (two reg operands: setp's p|q)"""

    __slots__ = ("kind", "name", "neg", "value", "bits", "width", "base",
                 "offset", "items")

    def __init__(self, kind, **kw):
        self.kind = kind
        self.name = kw.get("name")
        self.neg = kw.get("neg", False)
        self.value = kw.get("value")
        self.bits = kw.get("bits")
        self.width = kw.get("width")
        self.base = kw.get("base")
        self.offset = kw.get("offset", 0)
        self.items = kw.get("items")

    def __repr__(self):
        if self.kind == "reg":
            return ("!" if self.neg else "") + self.name
        if self.kind == "imm":
            return str(self.value)
        if self.kind == "fimm":
            return "0f%x" % self.bits if self.width == 32 else (
                "0d%x" % self.bits if self.width == 64 else repr(self.value))
        if self.kind == "mem":
            return "[%r%+d]" % (self.base, self.offset)
        if self.kind in ("vec", "pair"):
            return "{" + ",".join(map(repr, self.items)) + "}"
        if self.kind == "sink":
            return "_"
        return self.name


class Instr:
    __slots__ = ("pred", "pred_neg", "op", "base", "mods", "ops", "line", "text")

    def __init__(self, pred, pred_neg, op, ops, line, text):
        self.pred = pred
        self.pred_neg = pred_neg
        self.op = op
        parts = op.split(".")
        self.base = parts[0]
        self.mods = parts[1:]
        self.ops = ops
        self.line = line
        self.text = text

    def __repr__(self):
        return self.text


class Var:
    """A .shared (or other state space) variable."""

    def __init__(self, space, name, type_, align, count, line):
        self.space = space
        self.name = name
        self.type = type_
        self.align = align
        self.count = count               # number of elements (1 for a scalar)
        self.line = line

    @property
    def size(self):
        return (TYPE_BITS[self.type] // 8) * self.count


class Entry:
    def __init__(self, name, line):
        self.name = name
        self.line = line
        self.params = []                 # [(name, type, size, align, offset)]
        self.regs = {}                   # name -> type
        self.shared = []                 # [Var]
        self.body = []                   # [Instr]
        self.labels = {}                 # label -> index into body
        self.directives = {}             # .maxntid etc. -> values

    def param_names(self):
        return [p[0] for p in self.params]


class Module:
    def __init__(self):
        self.version = None
        self.target = None
        self.address_size = None
        self.entries = {}
        self.shared = []                 # module-level .shared variables
        self.source_name = None


class _P:
    def __init__(self, toks, name):
        self.toks = toks
        self.i = 0
        self.name = name

    def err(self, msg, tok=None):
        tok = tok or self.peek()
        line = tok.line if tok else (self.toks[-1].line if self.toks else 0)
        raise PtxSyntaxError("%s:%d: %s" % (self.name, line, msg))

    def peek(self, k=0):
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self):
        t = self.peek()
        if t is None:
            self.err("unexpected end of file")
        self.i += 1
        return t

    def expect(self, text):
        t = self.next()
        if t.text != text:
            self.err("expected %r, got %r" % (text, t.text), t)
        return t

    def at(self, text):
        t = self.peek()
        return t is not None and t.text == text


def _parse_number(p, neg=False):
    t = p.next()
    if t.kind != "num":
        p.err("expected a number, got %r" % t.text, t)
    s = t.text
    if s[:2] in ("0f", "0F"):
        bits = int(s[2:], 16)
        if neg:
            bits ^= 0x80000000
        return Operand("fimm", bits=bits, width=32)
    if s[:2] in ("0d", "0D"):
        bits = int(s[2:], 16)
        if neg:
            bits ^= 0x8000000000000000
        return Operand("fimm", bits=bits, width=64)
    if ("." in s or "e" in s or "E" in s) and s[:2] not in ("0x", "0X"):
        v = float(s)
        return Operand("fimm", value=-v if neg else v, width=None)
    v = parse_int_literal(s)
    return Operand("imm", value=-v if neg else v)


def _parse_const_int(p):
    neg = False
    while p.at("-") or p.at("+"):
        if p.next().text == "-":
            neg = not neg
    o = _parse_number(p, neg)
    if o.kind != "imm":
        p.err("expected an integer constant")
    return o.value


def _parse_operand(p):
    t = p.peek()
    if t is None:
        p.err("unexpected end of file in operand")
    if t.text == "{":
        p.next()
        items = []
        while not p.at("}"):
            items.append(_parse_operand(p))
            if p.at(","):
                p.next()
        p.expect("}")
        return Operand("vec", items=items)
    if t.text == "[":
        p.next()
        base = None
        off = 0
        # base: register, symbol, or an immediate address
        t2 = p.peek()
        if t2.kind == "id":
            p.next()
            base = Operand("reg", name=t2.text) if t2.text.startswith("%") else Operand("sym", name=t2.text)
        elif t2.kind == "num" or t2.text in ("-", "+"):
            off = _parse_const_int(p)
        while p.at("+") or p.at("-"):
            sgn = p.next().text
            v = _parse_const_int(p)
            off += v if sgn == "+" else -v
        p.expect("]")
        return Operand("mem", base=base, offset=off)
    if t.text == "!":
        p.next()
        o = _parse_operand(p)
        if o.kind != "reg":
            p.err("'!' applies to a predicate register only")
        o.neg = True
        return o
    if t.text in ("-", "+", "~"):
        p.next()
        o = _parse_operand(p)
        if t.text == "+":
            return o
        if o.kind == "imm":
            o.value = -o.value if t.text == "-" else ~o.value
            return o
        if o.kind == "fimm" and t.text == "-":
            if o.width == 32:
                o.bits ^= 0x80000000
            elif o.width == 64:
                o.bits ^= 0x8000000000000000
            else:
                o.value = -o.value
            return o
        p.err("unary %r on a non-constant operand" % t.text)
    if t.kind == "num":
        return _parse_number(p)
    if t.kind == "id":
        p.next()
        if t.text == "_":
            return Operand("sink")
        if t.text.startswith("%"):
            o = Operand("reg", name=t.text)
            if p.at("|"):
                p.next()
                t3 = p.next()
                return Operand("pair", items=[o, Operand("reg", name=t3.text)])
            return o
        return Operand("sym", name=t.text)
    p.err("unexpected %r in operand" % t.text)


def _parse_var_decl(p, space, line):
    """After `.shared` etc.: {.align N} .type name{[N]} {, name...} ;"""
    align = None
    type_ = None
    while p.peek().text.startswith("."):
        d = p.next().text
        if d == ".align":
            align = _parse_const_int(p)
        elif d[1:] in TYPE_BITS:
            type_ = d[1:]
        elif d in (".v2", ".v4"):
            p.err("vector variables are not supported")
        else:
            p.err("unsupported variable attribute %r" % d)
    if type_ is None:
        p.err("variable declaration without a type")
    out = []
    while True:
        name = p.next()
        if name.kind != "id":
            p.err("expected a variable name", name)
        count = 1
        if p.at("["):
            p.next()
            if p.at("]"):
                p.err("unsized arrays are not supported")
            count = _parse_const_int(p)
            p.expect("]")
        if p.at("="):
            p.err("initialized %s variables are not supported" % space)
        a = align or TYPE_BITS[type_] // 8
        out.append(Var(space, name.text, type_, a, count, line))
        if p.at(","):
            p.next()
            continue
        break
    p.expect(";")
    return out


def _parse_entry(p, mod):
    name_tok = p.next()
    if name_tok.kind != "id":
        p.err("expected the entry name", name_tok)
    e = Entry(name_tok.text, name_tok.line)
    p.expect("(")
    offset = 0
    while not p.at(")"):
        p.expect(".param")
        align = None
        type_ = None
        while p.peek().text.startswith(".") :
            d = p.next().text
            if d == ".align":
                align = _parse_const_int(p)
            elif d[1:] in TYPE_BITS:
                type_ = d[1:]
            elif d.startswith(".ptr"):
                if d.endswith(".align"):    # .ptr.global.align N attribute
                    _parse_const_int(p)
                continue
            else:
                p.err("unsupported parameter attribute %r" % d)
        pname = p.next()
        if type_ is None:
            p.err("parameter without a type", pname)
        count = 1
        if p.at("["):
            p.next()
            count = _parse_const_int(p)
            p.expect("]")
        size = TYPE_BITS[type_] // 8 * count
        a = align or TYPE_BITS[type_] // 8
        offset = (offset + a - 1) // a * a
        e.params.append((pname.text, type_, size, a, offset))
        offset += size
        if p.at(","):
            p.next()
    p.expect(")")
    # performance directives before the body
    while not p.at("{"):
        d = p.next()
        if d.text in (".maxntid", ".reqntid", ".minnctapersm", ".maxnreg", ".maxnctapersm",
                      ".noreturn", ".pragma"):
            vals = []
            while p.peek().kind in ("num", "str") or p.at(","):
                t = p.next()
                if t.text != ",":
                    vals.append(t.text)
            if d.text == ".pragma":
                p.expect(";")
            e.directives[d.text] = vals
        else:
            p.err("unexpected %r before the entry body" % d.text, d)
    p.expect("{")
    depth = 1
    while True:
        t = p.peek()
        if t is None:
            p.err("unterminated entry body")
        if t.text == "{":
            p.next()
            depth += 1
            continue
        if t.text == "}":
            p.next()
            depth -= 1
            if depth == 0:
                break
            continue
        if t.text == ".reg":
            p.next()
            type_ = None
            while p.peek().text.startswith("."):
                d = p.next().text
                if d[1:] in TYPE_BITS:
                    type_ = d[1:]
                elif d in (".v2", ".v4"):
                    p.err("vector registers are not supported")
                else:
                    p.err("unsupported register attribute %r" % d)
            if type_ is None:
                p.err(".reg without a type")
            while True:
                rn = p.next()
                if rn.kind != "id" or not rn.text.startswith("%"):
                    p.err("expected a register name", rn)
                if p.at("<"):
                    p.next()
                    cnt = _parse_const_int(p)
                    p.expect(">")
                    for k in range(cnt):
                        _declare_reg(p, e, "%s%d" % (rn.text, k), type_, rn)
                else:
                    _declare_reg(p, e, rn.text, type_, rn)
                if p.at(","):
                    p.next()
                    continue
                break
            p.expect(";")
            continue
        if t.text in (".shared",):
            p.next()
            e.shared.extend(_parse_var_decl(p, "shared", t.line))
            continue
        if t.text in (".local", ".global", ".const", ".param"):
            p.err("%s variables inside an entry are not supported" % t.text)
        if t.text == ".pragma":
            p.next()
            while not p.at(";"):
                p.next()
            p.expect(";")
            continue
        if t.kind == "id" and p.peek(1) is not None and p.peek(1).text == ":" \
                and not t.text.startswith("%") and not t.text.startswith("."):
            p.next()
            p.next()
            if t.text in e.labels:
                p.err("duplicate label %r" % t.text, t)
            e.labels[t.text] = len(e.body)
            continue
        e.body.append(_parse_instr(p))
    mod.entries[e.name] = e
    return e


def _declare_reg(p, e, name, type_, tok):
    if name in e.regs:
        p.err("register %s declared twice" % name, tok)
    e.regs[name] = type_


def _parse_instr(p):
    start = p.i
    t = p.peek()
    pred = None
    pred_neg = False
    if t.text == "@":
        p.next()
        if p.at("!"):
            p.next()
            pred_neg = True
        pt = p.next()
        if pt.kind != "id" or not pt.text.startswith("%"):
            p.err("expected a predicate register after '@'", pt)
        pred = pt.text
    opt = p.next()
    if opt.kind != "id" or opt.text.startswith("%") or opt.text.startswith("."):
        p.err("expected an instruction, got %r" % opt.text, opt)
    ops = []
    while not p.at(";"):
        ops.append(_parse_operand(p))
        if p.at(","):
            p.next()
        elif not p.at(";"):
            p.err("expected ',' or ';' after operand, got %r" % p.peek().text)
    p.expect(";")
    text = " ".join(tk.text for tk in p.toks[start:p.i - 1])
    text = text.replace(" ,", ",").replace("[ ", "[").replace(" ]", "]").replace("{ ", "{").replace(" }", "}")
    return Instr(pred, pred_neg, opt.text, ops, opt.line, text)


def parse_module(src, name="<ptx>"):
    toks = tokenize(src)
    p = _P(toks, name)
    mod = Module()
    mod.source_name = name
    while p.peek() is not None:
        t = p.next()
        if t.text == ".version":
            mod.version = p.next().text
        elif t.text == ".target":
            tg = [p.next().text]
            while p.at(","):
                p.next()
                tg.append(p.next().text)
            mod.target = tg
        elif t.text == ".address_size":
            mod.address_size = _parse_const_int(p)
            if mod.address_size != 64:
                p.err("only .address_size 64 is supported")
        elif t.text in (".visible", ".weak", ".extern"):
            continue
        elif t.text == ".entry":
            _parse_entry(p, mod)
        elif t.text == ".func":
            p.err(".func (device functions) are not supported", t)
        elif t.text == ".shared":
            mod.shared.extend(_parse_var_decl(p, "shared", t.line))
        elif t.text in (".global", ".const"):
            p.err("module-level %s variables are not supported" % t.text, t)
        elif t.text == ".file" or t.text == ".loc":
            while p.peek() is not None and p.peek().line == t.line:
                p.next()
        else:
            p.err("unexpected %r at module level" % t.text, t)
    if mod.version is None or mod.target is None:
        raise PtxSyntaxError("%s: missing .version or .target" % name)
    return mod
