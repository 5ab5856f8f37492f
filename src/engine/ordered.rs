//! Stream-ordered calls through the engine: a collective queued after
//! work on the engine's work streams ([`Engine::launch_after`]), returning
//! at once with one completion per rank (the semantics are in
//! [`crate::backend::ordered`]), and the overlap benchmark's work-stream
//! hooks. A program orders calls on its own CUDA streams through
//! [`Communicator::collective_on_device`](crate::Communicator::collective_on_device).
//!
//! The caller's thread never waits for the GPU, with one exception: the
//! first call of a new shape may allocate the path's scratch, which drains
//! every stream first. [`Engine::prepare`] does that ahead of time.

use super::Engine;
use crate::algo::AlgoChoice;
use crate::backend::ordered::{After, Completion, SpanTag, StreamOrdered, WorkLaunch, WorkSpan};
use crate::backend::overlap::{Gate, OverlapBench};
use crate::backend::Binding;
use crate::backend::NcclCall;
use crate::element::{DataType, ReduceOp};
use crate::error::{Error, Result};
use crate::plan::{Plan, Shape};
use std::sync::Arc;

impl Engine {
    fn ordered_backend(&mut self) -> Result<&mut dyn StreamOrdered> {
        self.backend.ordered()
    }

    /// The overlap benchmark's hooks (see [`crate::backend::overlap`]).
    fn overlap_bench(&mut self) -> Result<&mut dyn OverlapBench> {
        let kind = self.backend_kind().name();
        self.ordered_backend()?
            .overlap_bench()
            .ok_or_else(|| Error::Unsupported("the overlap benchmark's hooks".into(), kind))
    }

    /// Get `choice`'s path for `shape` ready without launching anything:
    /// build its plan and allocate its scratch (which drains every stream),
    /// so that the calls that follow never wait on the host. Returns the
    /// path's name.
    pub fn prepare(&mut self, choice: Option<&AlgoChoice>, shape: Shape) -> Result<String> {
        self.usable()?;
        // A call that does not continue a chain: the state it leaves is
        // what a first call expects (`last` is cleared).
        let (key, _) = self.select(choice, &shape, false)?;
        Ok(self.paths[key].0.clone())
    }

    /// Launch one collective of `shape` like [`Engine::launch`], ordered after
    /// `after` on every rank; returns the plan and each rank's completion
    /// as soon as every rank thread issued its part. `tag` times the call
    /// (see [`Engine::take_work_spans`]).
    #[allow(clippy::too_many_arguments)]
    pub fn launch_after(
        &mut self,
        choice: Option<&AlgoChoice>,
        shape: Shape,
        dtype: DataType,
        op: ReduceOp,
        bind: Arc<Vec<Binding>>,
        after: &After,
        tag: Option<SpanTag>,
    ) -> Result<(Arc<Plan>, Vec<Completion>)> {
        self.usable()?;
        let (key, plan) = self.select(choice, &shape, true)?;
        let call = self.call(&plan, dtype, op, bind);
        let r = self.ordered_backend()?.launch_after(&call, after, tag);
        let done = self.track(r)?;
        // Work-stream kernels never touch the engine's scratch, so the next
        // call of this path may continue the chain.
        self.last = Some(key);
        Ok((plan, done))
    }

    /// Launch a kernel on every rank's work stream (the CPU backend runs the
    /// built-in kernels on the host).
    pub fn work_launch(&mut self, w: &WorkLaunch) -> Result<()> {
        self.usable()?;
        let r = self.ordered_backend()?.work_launch(w);
        self.track(r)
    }

    /// Make rank r's work stream wait (on the GPU) for `done[r]`.
    pub fn work_wait(&mut self, done: &[Completion]) -> Result<()> {
        let r = self.ordered_backend()?.work_wait(done);
        self.track(r)
    }

    /// Start a timing window on every rank's work stream (the origin of
    /// [`Engine::take_work_spans`]).
    pub fn work_mark(&mut self) -> Result<()> {
        let r = self.ordered_backend()?.work_mark();
        self.track(r)
    }

    /// The timed kernels and calls since the last mark (drains every rank).
    pub fn take_work_spans(&mut self) -> Result<Vec<WorkSpan>> {
        let r = self.ordered_backend()?.take_spans();
        self.track(r)
    }

    /// Give the collectives' streams (ringreduce's lanes, where NCCL runs
    /// too) the device's highest priority or the default one (drains every
    /// rank first), so that a collective overlapping the caller's compute
    /// is not queued behind it (see
    /// `StreamOrdered::set_comm_priority`).
    pub fn set_comm_priority(&mut self, high: bool) -> Result<()> {
        let r = self.ordered_backend()?.set_comm_priority(high);
        self.track(r)
    }
}

/// The overlap benchmark's hooks ([`crate::backend::overlap`]): measuring
/// instruments, not part of the stream-ordered API.
impl Engine {
    /// NCCL's collective on the same buffers, ordered after `after` (each
    /// rank after its own caller stream, as DDP orders `ncclAllReduce`).
    pub fn launch_nccl_after(
        &mut self,
        call: &NcclCall,
        after: &After,
        tag: Option<SpanTag>,
    ) -> Result<Vec<Completion>> {
        self.usable()?;
        self.last = None;
        let r = self.overlap_bench()?.launch_nccl_after(call, after, tag);
        self.track(r)
    }

    /// Close a gate at the head of every rank's work stream; what is
    /// issued behind it runs once the returned [`Gate`] is opened or
    /// dropped, or anything drains the engine (synchronize, read, write).
    pub fn work_gate(&mut self) -> Result<Gate> {
        let r = self.overlap_bench()?.work_gate();
        self.track(r)
    }
}

#[cfg(test)]
mod tests;
