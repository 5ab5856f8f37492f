//! Stream-ordered calls through the engine: a collective queued after the
//! caller's work on a stream, returning at once with one completion per
//! rank (the semantics are in [`crate::backend::ordered`]).
//!
//! ```
//! use ringreduce::backend::ordered::After;
//! use ringreduce::{Engine, EngineConfig, ReduceOp};
//! let mut e = Engine::<f32>::new(EngineConfig::cpu(2)).unwrap();
//! let g = e.alloc(8).unwrap();
//! for r in 0..2 {
//!     e.write_buffer(&g, r, &[r as f32 + 1.0; 8]).unwrap();
//! }
//! // On CUDA this returns once the rank threads issued the call; the
//! // caller's later work waits on `done` (Core::work_wait, or
//! // Completion::order_before for another library's stream).
//! let call = e.all_reduce_after(&g, &g, 8, ReduceOp::Sum, &After::Work).unwrap();
//! for d in &call.done {
//!     d.wait(std::time::Duration::from_secs(10)).unwrap();
//! }
//! assert_eq!(e.read_buffer(&g, 1).unwrap(), vec![3.0; 8]);
//! ```
//!
//! The caller's thread never waits for the GPU, with one exception: the
//! first call of a new shape may allocate the path's scratch, which drains
//! every stream first. [`Core::prepare`] does that ahead of time.

use super::typed::{CallInfo, DeviceBuffers, Engine};
use super::Core;
use crate::algo::AlgoChoice;
use crate::backend::ordered::{
    After, Completion, Gate, SpanTag, StreamOrdered, WorkLaunch, WorkSpan,
};
use crate::backend::{Binding, NcclCall};
use crate::element::{DataType, Element, ReduceOp};
use crate::error::{Error, Result};
use crate::plan::{Collective, Plan, Shape};
use std::sync::Arc;

/// A stream-ordered call: what ran, and each rank's completion.
#[derive(Debug, Clone)]
pub struct OrderedCall {
    pub info: CallInfo,
    /// Rank r's completion at index r.
    pub done: Vec<Completion>,
}

impl Core {
    fn ordered_backend(&mut self) -> Result<&mut dyn StreamOrdered> {
        let kind = self.backend_kind().name();
        self.backend
            .ordered()
            .ok_or_else(|| Error::Unsupported("stream-ordered calls".into(), kind))
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

    /// Launch one collective of `shape` like [`Core::launch`], ordered after
    /// `after` on every rank; returns the plan and each rank's completion
    /// as soon as every rank thread issued its part. `tag` times the call
    /// (see [`Core::take_work_spans`]).
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
        let r = self.ordered_backend()?.launch_nccl_after(call, after, tag);
        self.track(r)
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

    /// Close a gate at the head of every rank's work stream; what is
    /// issued behind it runs once the returned [`Gate`] is opened or
    /// dropped, or anything drains the engine (synchronize, read, write).
    pub fn work_gate(&mut self) -> Result<Gate> {
        let r = self.ordered_backend()?.work_gate();
        self.track(r)
    }

    /// Start a timing window on every rank's work stream (the origin of
    /// [`Core::take_work_spans`]).
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
    /// rank first).
    pub fn set_comm_priority(&mut self, high: bool) -> Result<()> {
        let r = self.ordered_backend()?.set_comm_priority(high);
        self.track(r)
    }
}

impl<T: Element> Engine<T> {
    /// A collective on device buffers (`send` and `recv` the same buffer
    /// for an in-place call; `count` is NCCL's count), ordered after
    /// `after` on every rank; returns at once with each rank's completion.
    pub fn collective_after(
        &mut self,
        collective: Collective,
        send: &DeviceBuffers<T>,
        recv: &DeviceBuffers<T>,
        count: usize,
        op: ReduceOp,
        after: &After,
    ) -> Result<OrderedCall> {
        let (shape, bind) = self.device_call(collective, send, recv, count)?;
        let (plan, done) =
            self.core_mut()
                .launch_after(None, shape, T::DTYPE, op, bind, after, None)?;
        Ok(OrderedCall {
            info: CallInfo::of(&plan),
            done,
        })
    }

    /// All-reduce of `count` elements on device buffers, ordered after
    /// `after`.
    pub fn all_reduce_after(
        &mut self,
        send: &DeviceBuffers<T>,
        recv: &DeviceBuffers<T>,
        count: usize,
        op: ReduceOp,
        after: &After,
    ) -> Result<OrderedCall> {
        self.collective_after(Collective::AllReduce, send, recv, count, op, after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EngineConfig;

    /// Every collective and path, in and out of place, through the ordered
    /// call on the CPU backend, against the plain call's result.
    #[test]
    fn every_collective_in_and_out_of_place_matches_the_plain_call() {
        for ranks in [2usize, 3] {
            for algo in [
                "auto",
                "ring",
                "ring:pipe2",
                "oneshot",
                "oneshot:flag",
                "ps",
            ] {
                let choice: AlgoChoice = algo.parse().unwrap();
                for collective in Collective::ALL {
                    for in_place in [false, true] {
                        let shape = Shape {
                            collective,
                            ranks,
                            count: 37,
                            elem_size: 4,
                            in_place,
                        };
                        if choice.resolve(&shape).is_err() {
                            continue;
                        }
                        let mut e = Engine::<i32>::new(EngineConfig::cpu(ranks)).unwrap();
                        let inputs: Vec<Vec<i32>> = (0..ranks)
                            .map(|r| {
                                (0..shape.input(r).len())
                                    .map(|i| (i * 7 + r * 3) as i32 % 50)
                                    .collect()
                            })
                            .collect();
                        let sh = e.load(collective, &inputs, in_place).unwrap();
                        e.run(Some(&choice), &sh, ReduceOp::Sum).unwrap();
                        let want = e.read_output(&sh).unwrap();
                        let sh = e.load(collective, &inputs, in_place).unwrap();
                        e.poison(&sh).unwrap();
                        let bind = Arc::new(vec![Binding::DEFAULT; ranks]);
                        let (_, done) = e
                            .core_mut()
                            .launch_after(
                                Some(&choice),
                                sh,
                                DataType::Int32,
                                ReduceOp::Sum,
                                bind,
                                &After::Work,
                                None,
                            )
                            .unwrap();
                        assert_eq!(done.len(), ranks);
                        assert!(done.iter().all(|d| d.is_complete().unwrap()));
                        assert_eq!(
                            e.read_output(&sh).unwrap(),
                            want,
                            "{algo} {collective} in place {in_place}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn typed_ordered_all_reduce_on_device_buffers() {
        let mut e = Engine::<f32>::new(EngineConfig::cpu(3)).unwrap();
        let send = e.alloc(10).unwrap();
        let recv = e.alloc(10).unwrap();
        for r in 0..3 {
            e.write_buffer(&send, r, &[r as f32; 10]).unwrap();
        }
        let shape = e.shape(Collective::AllReduce, 10, false);
        e.core_mut().prepare(None, shape).unwrap();
        let c = e
            .all_reduce_after(&send, &recv, 10, ReduceOp::Sum, &After::Nothing)
            .unwrap();
        assert_eq!(c.done.len(), 3);
        for r in 0..3 {
            assert_eq!(e.read_buffer(&recv, r).unwrap(), vec![3.0; 10]);
            assert_eq!(e.read_buffer(&send, r).unwrap(), vec![r as f32; 10]);
        }
    }
}
