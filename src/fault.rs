//! Fault injection, for tests of the error paths: a rank thread that panics
//! in the middle of a collective, a rank that never issues a step, a failed
//! driver call on one rank, a failed allocation on one rank. Set
//! [`crate::engine::EngineConfig::faults`]; both backends honour it.
//! Every injected fault must end every rank's call with an error naming the
//! rank and the step, within the engine's timeout: never a hang, a process
//! abort, or a changed send buffer.

/// What goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The rank thread panics before issuing the op.
    Panic,
    /// The rank never issues the op: it waits until aborted or timed out.
    Stall,
    /// Issuing the op fails as a driver call would.
    Fail,
    /// The rank's next buffer allocation fails.
    AllocFail,
    /// The rank's process kills itself with `SIGKILL` before issuing the op
    /// (one rank per process only: `RINGREDUCE_FAULT=kill:rank=R:call=C:op=K`
    /// in [`crate::process`]; in one process it would end every rank).
    Kill,
}

/// One injected fault: on `rank`, before its op number `op` (index in the
/// rank's op list), in the engine's call number `call` (1-based; `None`:
/// every call). `op` is ignored for [`Fault::AllocFail`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FaultSpec {
    pub rank: usize,
    pub op: usize,
    pub call: Option<u64>,
    pub fault: Fault,
}

/// The faults of an engine (empty: none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultPlan(pub Vec<FaultSpec>);

impl FaultPlan {
    pub fn none() -> FaultPlan {
        FaultPlan(Vec::new())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The fault to inject before `rank`'s op `op` in call `call`, if any.
    pub fn at(&self, rank: usize, op: usize, call: u64) -> Option<Fault> {
        self.0
            .iter()
            .find(|f| {
                f.rank == rank
                    && f.op == op
                    && f.fault != Fault::AllocFail
                    && f.call.is_none_or(|c| c == call)
            })
            .map(|f| f.fault)
    }

    /// Whether `rank`'s allocations fail.
    pub fn alloc_fails(&self, rank: usize) -> bool {
        self.0
            .iter()
            .any(|f| f.rank == rank && f.fault == Fault::AllocFail)
    }
}
