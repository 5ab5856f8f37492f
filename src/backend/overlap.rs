//! The overlap benchmark's hooks on the stream-ordered capability:
//! instruments for measuring how ringreduce's calls overlap the caller's
//! compute, not part of what a library user needs for stream-ordered
//! collectives (`StreamOrdered`).
//!
//! * `OverlapBench::launch_nccl_after`: NCCL's collective ordered the way
//!   ringreduce's is, so the benchmark can put the two side by side (a user
//!   who wants NCCL calls it directly).
//! * `OverlapBench::work_gate`: hold a whole step's work back until it is
//!   queued, to emulate a host that runs far ahead of the GPU.
//!
//! Reached through
//! `StreamOrdered::overlap_bench`
//! (the engine's `Engine::launch_nccl_after` and `Engine::work_gate`).

use super::cpu::CpuBackend;
use super::ordered::{After, Completion, SpanTag};
use super::NcclCall;
#[cfg(feature = "cuda")]
use crate::cuda::HostMapped;
use crate::error::{Error, Result};
use crate::transport::Storage;
use crate::transport::Transport;
#[cfg(feature = "cuda")]
use std::sync::Arc;

/// The overlap benchmark's hooks (see the module doc).
pub(crate) trait OverlapBench {
    /// NCCL's collective on every rank after `after` (each rank waits for
    /// its own caller stream only, as PyTorch DDP orders `ncclAllReduce`
    /// after a gradient bucket's kernel). Refused where the backend has no
    /// NCCL (the CUDA backend built without the `nccl` feature).
    fn launch_nccl_after(
        &mut self,
        _call: &NcclCall,
        _after: &After,
        _tag: Option<SpanTag>,
    ) -> Result<Vec<Completion>> {
        Err(Error::Unsupported(
            "NCCL (built without the nccl feature)".into(),
            "cuda",
        ))
    }

    /// Close a gate on every rank's work stream (see [`Gate`]); a drain of
    /// the engine opens it.
    fn work_gate(&mut self) -> Result<Gate>;
}

/// A closed gate at the head of every rank's work stream (made by
/// `OverlapBench::work_gate`): what is issued behind it waits until
/// [`Gate::open`], so a whole step reaches the GPUs before any of it runs,
/// as when the host runs far ahead of the GPU in training. Dropping the
/// gate opens it, and so does anything that drains the engine
/// (synchronize, read, write, a buffer allocation).
#[derive(Default)]
pub struct Gate {
    /// Each closed rank's gate word and the value that opens it.
    #[cfg(feature = "cuda")]
    words: Vec<(Arc<HostMapped>, u32)>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        #[cfg(feature = "cuda")]
        let closed = self.words.len();
        #[cfg(not(feature = "cuda"))]
        let closed = 0;
        write!(f, "Gate({closed} ranks closed)")
    }
}

impl Gate {
    #[cfg(feature = "cuda")]
    pub(crate) fn new(words: Vec<(Arc<HostMapped>, u32)>) -> Gate {
        Gate { words }
    }

    /// Let the work behind the gate run, on every rank.
    pub fn open(mut self) {
        self.release();
    }

    fn release(&mut self) {
        #[cfg(feature = "cuda")]
        for (m, v) in self.words.drain(..) {
            m.store_u32(0, v);
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.release();
    }
}

/// Host semantics: no NCCL, and nothing to hold back (a call runs when it
/// is issued).
impl<T: Transport<Mem = Storage>> OverlapBench for CpuBackend<T> {
    fn launch_nccl_after(
        &mut self,
        _call: &NcclCall,
        _after: &After,
        _tag: Option<SpanTag>,
    ) -> Result<Vec<Completion>> {
        Err(Error::Unsupported("NCCL".into(), "cpu"))
    }

    fn work_gate(&mut self) -> Result<Gate> {
        Ok(Gate::default())
    }
}
