"""Flat byte-addressed global memory made of explicit allocations.

Any byte outside an allocation is a fault, and so is any access to a
`noaccess` allocation (a guard zone).  An allocation may be *poisoned*:
its bytes count as uninitialized until written, and a kernel read of an
uninitialized byte is a fault (the host can poison a buffer between calls to
prove that a kernel never reads stale data, e.g. a receive slot before the
peer filled it).  An allocation may also *track writers*: each byte remembers
which thread of which launch last wrote it, and the emulator reports a race
when another thread of the same launch reads or writes it without an
intervening barrier of their block (see machine.py).
"""

import bisect

from .errors import MemoryFault, RaceError, SyncError

# Allocations up to this size remember, per access offset, which grid stored
# there last and whether the store was strong (flags, counters, control
# blocks); see Memory.load.
SYNC_TRACK_MAX = 4096

__all__ = ["Memory", "Alloc"]


class Alloc:
    __slots__ = ("start", "end", "name", "data", "init", "noaccess", "writer",
                 "stored_by", "nc_readers", "sync")

    def __init__(self, start, size, name, noaccess=False):
        self.start = start
        self.end = start + size
        self.name = name
        self.data = bytearray(size)
        self.init = None            # None: fully initialized; else bytearray of 0/1
        self.noaccess = noaccess
        self.writer = None          # None: not tracked; else list of (uid, grid, block, epoch)
        self.stored_by = []         # grids that stored here (ld.global.nc check)
        self.nc_readers = []        # grids that read here with ld.global.nc
        self.sync = None            # offset -> (grid, strong) of the last kernel store

    def __repr__(self):
        return "<%s 0x%x..0x%x>" % (self.name, self.start, self.end)


class Memory:
    def __init__(self):
        self.allocs = []
        self.starts = []
        self._last = None

    # ---- host side -------------------------------------------------------
    def alloc(self, addr, size, name, data=None, poison=False, noaccess=False,
              track=False, fill=0):
        if size <= 0:
            raise ValueError("allocation %s: size must be positive" % name)
        i = bisect.bisect_right(self.starts, addr)
        if i > 0 and self.allocs[i - 1].end > addr:
            raise ValueError("allocation %s at 0x%x overlaps %r" % (name, addr, self.allocs[i - 1]))
        if i < len(self.allocs) and self.allocs[i].start < addr + size:
            raise ValueError("allocation %s at 0x%x overlaps %r" % (name, addr, self.allocs[i]))
        a = Alloc(addr, size, name, noaccess)
        if fill:
            a.data[:] = bytes([fill]) * size
        if data is not None:
            if len(data) != size:
                raise ValueError("allocation %s: %d bytes of data for %d" % (name, len(data), size))
            a.data[:] = data
        if poison:
            a.init = bytearray(size)
        if track:
            a.writer = [None] * size
        self.allocs.insert(i, a)
        self.starts.insert(i, addr)
        return a

    def free(self, alloc):
        i = self.allocs.index(alloc)
        del self.allocs[i]
        del self.starts[i]
        self._last = None

    def host_alloc(self, addr):
        a = self._find_host(addr, 1)
        return a

    def _find_host(self, addr, size):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0 or self.allocs[i].end < addr + size:
            raise ValueError("host access 0x%x+%d outside the allocations" % (addr, size))
        return self.allocs[i]

    def write(self, addr, data):
        """Host write: sets the bytes and marks them initialized."""
        a = self._find_host(addr, len(data))
        off = addr - a.start
        a.data[off:off + len(data)] = data
        if a.init is not None:
            a.init[off:off + len(data)] = b"\x01" * len(data)

    def read(self, addr, size):
        a = self._find_host(addr, size)
        off = addr - a.start
        return bytes(a.data[off:off + size])

    def poison(self, addr, size):
        """Mark bytes uninitialized (the data is also scrambled)."""
        a = self._find_host(addr, size)
        off = addr - a.start
        if a.init is None:
            a.init = bytearray(b"\x01") * (a.end - a.start)
        a.init[off:off + size] = bytes(size)
        a.data[off:off + size] = b"\xa5" * size

    def initialized(self, addr, size):
        a = self._find_host(addr, size)
        if a.init is None:
            return True
        off = addr - a.start
        return 0 not in a.init[off:off + size]

    def reset_writers(self):
        for a in self.allocs:
            if a.writer is not None:
                a.writer = [None] * (a.end - a.start)

    # ---- kernel side -----------------------------------------------------
    def find(self, addr, size, what):
        a = self._last
        if a is None or addr < a.start or addr + size > a.end:
            i = bisect.bisect_right(self.starts, addr) - 1
            if i < 0 or addr >= self.allocs[i].end:
                raise MemoryFault("%s of %d bytes at 0x%x: outside every allocation%s"
                                  % (what, size, addr, self._near(addr)))
            a = self.allocs[i]
            if addr + size > a.end:
                raise MemoryFault("%s of %d bytes at 0x%x runs past the end of %s (0x%x..0x%x) by %d bytes"
                                  % (what, size, addr, a.name, a.start, a.end, addr + size - a.end))
            self._last = a
        if a.noaccess:
            raise MemoryFault("%s of %d bytes at 0x%x touches %s (a guard zone, offset %d)"
                              % (what, size, addr, a.name, addr - a.start))
        return a

    def _near(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        parts = []
        if i >= 0:
            a = self.allocs[i]
            parts.append("%d bytes after the end of %s" % (addr - a.end, a.name))
        if i + 1 < len(self.allocs):
            a = self.allocs[i + 1]
            parts.append("%d bytes before %s" % (a.start - addr, a.name))
        return " (" + "; ".join(parts) + ")" if parts else ""

    def load(self, addr, size, t, strong=None):
        """strong: None for a weak load, else the scope ("sys", "gpu", "cta",
        "cluster") of ld.volatile (= .sys) / .relaxed / .acquire.  Two cross-GPU synchronization checks apply to
        values another running grid stored (small allocations only):
          * a strong load that observes a *weak* store of another running grid:
            the flag was published with a plain st, which gives no ordering
            (and is a data race in the PTX memory model);
          * a weak load that observes such a store at an address the same
            thread had already loaded weakly: a thread waiting for another GPU
            with a plain ld, which the compiler may hoist out of the loop."""
        if addr % size:
            raise MemoryFault("misaligned load of %d bytes at 0x%x" % (size, addr))
        a = self.find(addr, size, "load")
        off = addr - a.start
        if a.init is not None and 0 in a.init[off:off + size]:
            raise MemoryFault("load of %d bytes at 0x%x (%s+%d) reads uninitialized memory"
                              % (size, addr, a.name, off))
        if a.writer is not None:
            check_read(a.writer, off, size, t, a.name, strong)
        if a.end - a.start <= SYNC_TRACK_MAX:
            w = a.sync.get(off) if a.sync else None
            if not strong:
                sp = t.spin
                if sp is None:
                    sp = t.spin = {}
                c = sp.get(addr, 0)
                sp[addr] = c + 1
            if w is not None and w[0] is not t.grid and w[0].live:
                if strong:
                    if not w[1]:
                        raise SyncError("%s+%d: a strong load observes a plain (weak) st of %s: "
                                        "publish a flag with st.release (or .relaxed/.volatile "
                                        "after a fence)" % (a.name, off, w[0].name))
                    # grids are different GPUs: only .sys scope reaches the peer
                    if w[1] != "sys" or strong != "sys":
                        raise SyncError("%s+%d: synchronization between two GPUs below .sys "
                                        "scope (store by %s at .%s, load at .%s): the peer GPU is "
                                        "only within scope .sys" % (a.name, off, w[0].name, w[1],
                                                                     strong))
                elif c:
                    raise SyncError("%s+%d: a plain (weak) ld, repeated by this thread, observes "
                                    "a store of %s: waiting on a weak load (the compiler may hoist "
                                    "it out of the loop); use ld.acquire / .relaxed / .volatile"
                                    % (a.name, off, w[0].name))
        return a.data[off:off + size]

    def load_nc(self, addr, size, t):
        """ld.global.nc: the non-coherent (read-only data cache) path is only
        legal for data that is read-only for the whole lifetime of the kernel
        (CUDA C++ Programming Guide, __ldg / read-only data cache).  Any kernel
        still running that stores into the same allocation -- before or after
        this load -- is a fault."""
        data = self.load(addr, size, t)
        a = self._last
        g = t.grid
        if g not in a.nc_readers:
            a.nc_readers = [x for x in a.nc_readers if x.live] + [g]
        for w in a.stored_by:
            if w.live:
                raise MemoryFault("ld.global.nc of %s, which %s stores into while this kernel runs"
                                  % (a.name, "this kernel" if w is g else w.name))
        return data

    def store(self, addr, data, t, strong=None):
        size = len(data)
        if addr % size:
            raise MemoryFault("misaligned store of %d bytes at 0x%x" % (size, addr))
        a = self.find(addr, size, "store")
        off = addr - a.start
        g = t.grid
        if a.nc_readers:
            for r in a.nc_readers:
                if r.live:
                    raise MemoryFault("store into %s, which %s reads with ld.global.nc while it runs"
                                      % (a.name, "this kernel" if r is g else r.name))
        if not a.stored_by or a.stored_by[-1] is not g:
            if g not in a.stored_by:
                a.stored_by = [x for x in a.stored_by if x.live] + [g]
        a.data[off:off + size] = data
        if a.init is not None:
            a.init[off:off + size] = b"\x01" * size
        if a.writer is not None:
            check_write(a.writer, off, size, t, a.name, strong)
        if a.end - a.start <= SYNC_TRACK_MAX:
            if a.sync is None:
                a.sync = {}
            a.sync[off] = (g, strong)

    def atomic(self, addr, size, t, fn, scope="gpu"):
        """Read-modify-write: fn(old_bytes) -> new_bytes or None (no store)."""
        if addr % size:
            raise MemoryFault("misaligned atomic of %d bytes at 0x%x" % (size, addr))
        a = self.find(addr, size, "atomic")
        off = addr - a.start
        if a.init is not None and 0 in a.init[off:off + size]:
            raise MemoryFault("atomic on uninitialized memory at 0x%x (%s+%d)" % (addr, a.name, off))
        old = bytes(a.data[off:off + size])
        new = fn(old)
        if new is not None:
            for r in a.nc_readers:
                if r.live:
                    raise MemoryFault("atomic store into %s, which %s reads with ld.global.nc"
                                      % (a.name, r.name))
            a.data[off:off + size] = new
            if a.end - a.start <= SYNC_TRACK_MAX:
                if a.sync is None:
                    a.sync = {}
                a.sync[off] = (t.grid, scope)     # atomics are strong (default scope .gpu)
        return old


def _who(w):
    uid, grid, block, epoch, tag = w
    return "%s thread %d" % (grid.name, uid)


def _morally_strong(w, off, size, t, strong):
    """PTX memory model: two accesses are morally strong (so not a data race)
    when both are strong (.volatile = .relaxed.sys, .relaxed, .acquire,
    .release) with a scope that includes the other thread, and they overlap
    completely (same address and size).  w[4] is the store's (scope, off, size)."""
    tag = w[4]
    if not strong or tag is None or tag[1] != off or tag[2] != size:
        return False
    if w[2] is t.block:
        return True
    return strong not in ("cta", "cluster") and tag[0] not in ("cta", "cluster")


def check_read(writer, off, size, t, name, strong=None):
    """A read by t of bytes last written by another thread of the same launch
    is a race unless both are in one block and a barrier came in between, or
    the store and the load are morally strong (e.g. st.volatile / ld.volatile
    of a flag in shared memory)."""
    for k in range(off, off + size):
        w = writer[k]
        if w is not None and w[0] != t.uid and w[1] is t.grid:
            if w[2] is t.block and t.block.epoch > w[3]:
                continue
            if _morally_strong(w, off, size, t, strong):
                continue
            raise RaceError("%s+%d: read by %s thread %d (block %d) of a byte written by %s "
                            "(block %d) in the same launch without a barrier between them"
                            % (name, k, t.grid.name, t.uid, t.block.index, _who(w), w[2].index))


def check_write(writer, off, size, t, name, strong=None):
    rec = (t.uid, t.grid, t.block, t.block.epoch, (strong, off, size) if strong else None)
    for k in range(off, off + size):
        w = writer[k]
        if w is not None and w[0] != t.uid and w[1] is t.grid:
            if not (w[2] is t.block and t.block.epoch > w[3]) and \
                    not _morally_strong(w, off, size, t, strong):
                raise RaceError("%s+%d: written by %s thread %d (block %d) and by %s (block %d) "
                                "in the same launch without a barrier between them"
                                % (name, k, t.grid.name, t.uid, t.block.index, _who(w), w[2].index))
        writer[k] = rec
