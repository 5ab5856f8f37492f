"""ptxemu -- a small PTX emulator for ringreduce's hand-written kernels.

    from ptxemu import Machine, load_module
    mod = load_module("ptx/reduce_f32.ptx")
    k = mod.kernel("rr_reduce_sum_f32")
    m = Machine(seed=1)                        # randomized interleaving
    m.mem.alloc(0x10000, 4 * n, "a", data=...)
    m.launch(k, grid=2, block=32, params=[dst, a, b, n])
    m.run()                                    # raises on any fault

See README.md beside this file for the model and what is checked.
"""

from .errors import (PtxError, PtxSyntaxError, PtxUnsupported, PtxRuntimeError, MemoryFault,
                     UninitializedRegister, Trap, Deadlock, BarrierError, StepLimit, RaceError,
                     ArithmeticFault, DivergenceError, SyncError)
from .machine import Machine, Module, load_module
from .memory import Memory
from . import fp

__all__ = ["Machine", "Module", "load_module", "Memory", "fp",
           "PtxError", "PtxSyntaxError", "PtxUnsupported", "PtxRuntimeError", "MemoryFault",
           "UninitializedRegister", "Trap", "Deadlock", "BarrierError", "StepLimit",
           "RaceError", "ArithmeticFault", "DivergenceError", "SyncError"]
