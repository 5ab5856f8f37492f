"""Errors raised by the PTX emulator.  Every runtime error carries where it
happened: the grid, block, thread, instruction and source line."""


class PtxError(Exception):
    """Base class of everything the emulator raises."""


class PtxSyntaxError(PtxError):
    """The module could not be parsed."""


class PtxUnsupported(PtxError):
    """An instruction, modifier or operand form the emulator does not know."""


class PtxRuntimeError(PtxError):
    """An error while a kernel runs; `where` names the thread and instruction."""

    kind = "runtime error"

    def __init__(self, msg, where=None):
        self.msg = msg
        self.where = where
        super().__init__(msg if where is None else "%s\n  at %s" % (msg, where))

    def located(self, where):
        if self.where is None:
            e = type(self)(self.msg, where)
            return e
        return self


class MemoryFault(PtxRuntimeError):
    """Out-of-bounds, guard-zone, misaligned or uninitialized memory access."""
    kind = "memory fault"


class UninitializedRegister(PtxRuntimeError):
    kind = "uninitialized register"


class Trap(PtxRuntimeError):
    kind = "trap"


class Deadlock(PtxRuntimeError):
    kind = "deadlock"


class BarrierError(PtxRuntimeError):
    kind = "barrier misuse"


class StepLimit(PtxRuntimeError):
    """The step budget ran out (a spin that never ends, or a budget too small)."""
    kind = "step limit"


class RaceError(PtxRuntimeError):
    """Two threads of one launch touched the same bytes without synchronization."""
    kind = "data race"


class ArithmeticFault(PtxRuntimeError):
    """Integer division by zero (unspecified on the GPU, an error here)."""
    kind = "arithmetic fault"


class DivergenceError(PtxRuntimeError):
    """A `bra.uni` whose predicate differs between threads of one warp
    (PTX ISA bra: .uni asserts the branch is non-divergent)."""
    kind = "non-uniform bra.uni"


class SyncError(PtxRuntimeError):
    """Cross-GPU synchronization through weak memory operations: a flag
    published with a plain st, or a spin on a plain ld."""
    kind = "weak synchronization"
