"""The machine: global memory, grids of threads, barriers and the scheduler.

Threads of every launched grid (several grids = several GPUs sharing one
memory) sit in one pool.  The scheduler repeatedly picks a runnable thread
and lets it execute a few instructions:

  * schedule="random": a seeded random thread, 1..quantum instructions;
  * schedule="rr":     round robin, `quantum` instructions each.

So a spin loop makes progress only as fast as the thread it waits for is
scheduled, a barrier really blocks, and an ordering bug shows up as wrong
data under some interleaving (use several seeds).  Memory ordering
qualifiers (.acquire/.release/.relaxed, scopes, fences) are trivially
satisfied: every access is sequentially consistent in this model.

`%globaltimer` is a fake nanosecond clock: it starts at `clock` and advances
by `ns_per_step` per executed instruction (and by nanosleep's argument).
"""

import random

from .compiler import CompiledKernel, BARRIER, EXIT, SHARED_WINDOW
from .errors import (PtxRuntimeError, Deadlock, BarrierError, StepLimit, PtxUnsupported,
                     DivergenceError)
from .memory import Memory
from .parser import parse_module, TYPE_BITS

__all__ = ["Machine", "load_module", "Module"]


class Module:
    """A parsed PTX module whose entries compile on first use."""

    def __init__(self, src, name="<ptx>"):
        self.parsed = parse_module(src, name)
        self.text = src
        self.name = name
        self._kernels = {}

    @classmethod
    def from_file(cls, path):
        with open(path) as f:
            return cls(f.read(), str(path))

    @property
    def entry_names(self):
        return list(self.parsed.entries)

    def entry(self, name):
        return self.parsed.entries[name]

    def kernel(self, name):
        k = self._kernels.get(name)
        if k is None:
            if name not in self.parsed.entries:
                raise KeyError("no entry %r in %s" % (name, self.name))
            k = CompiledKernel(self.parsed, self.parsed.entries[name])
            self._kernels[name] = k
        return k


def load_module(path_or_src, name=None):
    if "\n" not in path_or_src and path_or_src.endswith(".ptx"):
        return Module.from_file(path_or_src)
    return Module(path_or_src, name or "<ptx>")


class _GenericShared:
    """Shared memory seen through generic addresses (the shared window)."""

    def __init__(self, smem):
        self.smem = smem

    def load(self, addr, size, t, strong=None):
        return self.smem.load(addr - SHARED_WINDOW, size, t, strong)

    def store(self, addr, data, t, strong=None):
        self.smem.store(addr - SHARED_WINDOW, data, t, strong)

    def atomic(self, addr, size, t, fn, scope="gpu"):
        return self.smem.atomic(addr - SHARED_WINDOW, size, t, fn, scope)


class Thread:
    __slots__ = ("r", "pc", "tid", "ntid", "ctaid", "nctaid", "block", "grid", "m",
                 "uid", "code", "bar", "state", "visits", "spin")

    def __repr__(self):
        return "<%s block %d thread %d>" % (self.grid.name, self.ctaid, self.tid)


class Block:
    def __init__(self, grid, index, nthreads, shared_size):
        self.grid = grid
        self.index = index
        self.nthreads = nthreads
        self.threads = []
        self.epoch = 0                  # number of completed barriers
        self.waiting = {}               # barrier id -> [threads]
        self.live = nthreads
        self.exited = 0
        self.smem = Memory()
        if shared_size:
            self.smem.alloc(0, shared_size, "shared memory of %s block %d" % (grid.name, index),
                            poison=True, track=True)
        self.gsmem = _GenericShared(self.smem)
        self.uni = {}                   # (warp, pc, visit) -> branch taken (bra.uni check)


class Grid:
    def __init__(self, m, kernel, nblocks, nthreads, params, name, gid):
        self.m = m
        self.kernel = kernel
        self.name = name
        self.gid = gid
        self.nblocks = nblocks
        self.nthreads = nthreads
        self.param_bytes = pack_params(kernel, params)
        self.blocks = []
        self.live = nblocks * nthreads
        self.steps = 0

    @property
    def done(self):
        return self.live == 0


def pack_params(kernel, params):
    plist = kernel.param_list
    if len(params) != len(plist):
        raise ValueError("%s takes %d parameters (%s), got %d"
                         % (kernel.name, len(plist), ", ".join(p[0] for p in plist), len(params)))
    buf = bytearray(kernel.param_size)
    for (name, type_, size, align, off), v in zip(plist, params):
        if isinstance(v, (bytes, bytearray)):
            if len(v) != size:
                raise ValueError("parameter %s: %d bytes for %d" % (name, len(v), size))
            buf[off:off + size] = v
            continue
        if not isinstance(v, int):
            raise TypeError("parameter %s: pass an int (bit pattern) or bytes" % name)
        buf[off:off + size] = (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    return bytes(buf)


class Machine:
    def __init__(self, seed=0, schedule="random", quantum=8, ns_per_step=1,
                 clock=1_000_000_000_000, allow_exit_at_barrier=False):
        if schedule not in ("random", "rr"):
            raise ValueError("schedule must be 'random' or 'rr'")
        self.mem = Memory()
        self.rng = random.Random(seed)
        self.schedule = schedule
        self.quantum = quantum
        self.ns_per_step = ns_per_step
        self.clock = clock
        self.steps = 0
        self.allow_exit_at_barrier = allow_exit_at_barrier
        self.grids = []
        self.runnable = []
        self._rr = 0
        self._ngrids = 0
        # Called with a Grid as soon as its last thread exits; it may launch
        # more grids (a stream: the next kernel of that GPU starts while the
        # other GPU may still be running).
        self.on_grid_done = None

    def sleep(self, ns):
        self.clock += ns

    # ---- launching --------------------------------------------------------------------
    def launch(self, kernel, grid, block, params, name=None):
        """Create the threads of one grid (grid x block, 1-D); they run on the
        next run() together with every other grid launched and not finished."""
        if grid < 1 or block < 1:
            raise ValueError("grid and block must be >= 1")
        if block > 1024:
            raise ValueError("at most 1024 threads per block")
        d = kernel.entry.directives
        for key in (".maxntid", ".reqntid"):
            if key in d:
                dims = [int(x) for x in d[key]] + [1, 1]
                total = dims[0] * dims[1] * dims[2]
                if (key == ".maxntid" and block > total) or (key == ".reqntid" and block != total):
                    raise ValueError("%s declares %s %s; launched with %d threads per block"
                                     % (kernel.name, key, ",".join(d[key]), block))
        self._ngrids += 1
        g = Grid(self, kernel, grid, block, params, name or "grid%d" % self._ngrids, self._ngrids)
        nregs = len(kernel.regnames)
        for b in range(grid):
            blk = Block(g, b, block, kernel.shared_size)
            g.blocks.append(blk)
            for tid in range(block):
                t = Thread()
                t.r = [None] * nregs
                t.pc = 0
                t.tid = tid
                t.ntid = block
                t.ctaid = b
                t.nctaid = grid
                t.block = blk
                t.grid = g
                t.m = self
                t.uid = b * block + tid
                t.code = kernel.code
                t.bar = None
                t.state = "run"
                t.visits = None
                t.spin = None
                blk.threads.append(t)
                self.runnable.append(t)
        self.grids.append(g)
        return g

    # ---- running ----------------------------------------------------------------------
    def where(self, t, pc):
        k = t.grid.kernel
        pc = min(pc, len(k.code) - 1)
        return "%s block %d thread %d (%s), %s:%d: `%s`" % (
            t.grid.name, t.ctaid, t.tid, k.name, k.module.source_name, k.lines[pc], k.texts[pc])

    def run(self, max_steps=10_000_000, raise_on_limit=True):
        """Run every launched grid until all threads exit.  Returns True when
        they all finished; on running out of steps raises StepLimit (or, with
        raise_on_limit=False, returns False and can be called again)."""
        limit = self.steps + max_steps
        runnable = self.runnable
        rng = self.rng
        q = self.quantum
        rand = self.schedule == "random"
        nsps = self.ns_per_step
        while runnable:
            if self.steps >= limit:
                if raise_on_limit:
                    raise StepLimit("no completion after %d steps; %s" % (max_steps, self.describe()))
                return False
            if rand:
                i = rng.randrange(len(runnable))
                n = rng.randint(1, q)
            else:
                i = self._rr % len(runnable)
                self._rr += 1
                n = q
            t = runnable[i]
            executed, status = self._exec(t, n)
            self.steps += executed
            t.grid.steps += executed
            self.clock += executed * nsps
            if status is not None:
                last = runnable.pop()
                if last is not t:
                    runnable[i] = last
                if status == BARRIER:
                    self._arrive(t)
                else:
                    self._exit(t)
        stuck = [g for g in self.grids if not g.done]
        if stuck:
            raise Deadlock("no runnable thread left: %s" % self.describe())
        self.grids = []
        return True

    def _exec(self, t, n):
        code = t.code
        pc = t.pc
        i = 0
        try:
            while i < n:
                res = code[pc](t)
                i += 1
                if res is None:
                    pc += 1
                elif res >= 0:
                    pc = res
                else:
                    t.pc = pc + 1 if res == BARRIER else pc
                    return i, res
        except PtxRuntimeError as e:
            raise e.located(self.where(t, pc)) from None
        except (PtxUnsupported,) as e:
            raise
        except Exception as e:                   # a bug in the emulator itself
            raise PtxRuntimeError("internal emulator error %s: %s" % (type(e).__name__, e),
                                  self.where(t, pc)) from e
        t.pc = pc
        return i, None

    def uni_check(self, t, pc, taken):
        """All threads of a warp that execute the k-th instance of a
        predicated bra.uni must agree on the predicate."""
        if t.visits is None:
            t.visits = {}
        k = t.visits.get(pc, 0)
        t.visits[pc] = k + 1
        key = (t.tid >> 5, pc, k)
        first = t.block.uni.get(key)
        if first is None:
            t.block.uni[key] = (taken, t.tid)
        elif first[0] != taken:
            who = (t.tid, first[1]) if taken else (first[1], t.tid)
            raise DivergenceError("bra.uni taken by thread %d and not by thread %d of the same warp "
                                  "(visit %d)" % (who[0], who[1], k))

    def _arrive(self, t):
        b = t.block
        bid, cnt, aligned = t.bar
        if cnt is not None and cnt != b.nthreads:
            raise PtxUnsupported("bar.sync with a thread count (%d) other than the block size: %s"
                                 % (cnt, self.where(t, t.pc - 1)))
        if b.exited and not self.allow_exit_at_barrier:
            raise BarrierError("bar.sync reached while %d thread(s) of the block have already exited"
                               % b.exited, self.where(t, t.pc - 1))
        t.state = "bar"
        lst = b.waiting.setdefault(bid, [])
        lst.append(t)
        self._try_release(b, bid)

    def _try_release(self, b, bid):
        lst = b.waiting.get(bid)
        if not lst or len(lst) < b.live:
            return
        if any(w.bar[2] for w in lst):
            pcs = {w.pc for w in lst}
            if len(pcs) > 1:
                w0 = lst[0]
                raise BarrierError("aligned bar.sync %d completed by threads at different instructions "
                                   "(lines %s)" % (bid, sorted(w0.grid.kernel.lines[p - 1] for p in pcs)),
                                   self.where(w0, w0.pc - 1))
        b.epoch += 1
        del b.waiting[bid]
        for w in lst:
            w.state = "run"
            w.bar = None
            # A load repeated across a completed barrier is not a spin on a
            # weak load (no compiler moves a load across bar.sync).
            w.spin = None
            self.runnable.append(w)

    def _exit(self, t):
        t.state = "exit"
        b = t.block
        b.live -= 1
        b.exited += 1
        t.grid.live -= 1
        if t.grid.live == 0 and self.on_grid_done is not None:
            self.on_grid_done(t.grid)
        if any(b.waiting.values()):
            if not self.allow_exit_at_barrier:
                raise BarrierError("thread exited while %d thread(s) of its block wait at bar.sync"
                                   % sum(len(v) for v in b.waiting.values()), self.where(t, t.pc))
            for bid in list(b.waiting):
                self._try_release(b, bid)

    def describe(self):
        """Where the unfinished threads are: counts per (grid, state, line)."""
        parts = []
        for g in self.grids:
            if g.done:
                continue
            where = {}
            for blk in g.blocks:
                for t in blk.threads:
                    if t.state == "exit":
                        continue
                    pc = t.pc - 1 if t.state == "bar" else t.pc
                    pc = max(0, min(pc, len(g.kernel.code) - 1))
                    key = (t.state, g.kernel.lines[pc], g.kernel.texts[pc])
                    where[key] = where.get(key, 0) + 1
            desc = ", ".join("%d %s at line %d `%s`" % (n, "waiting" if s == "bar" else "running", ln, tx)
                             for (s, ln, tx), n in sorted(where.items(), key=lambda kv: -kv[1])[:4])
            parts.append("%s: %d live threads (%s)" % (g.name, g.live, desc))
        return "; ".join(parts) if parts else "all grids finished"
