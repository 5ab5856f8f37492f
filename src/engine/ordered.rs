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
mod tests {
    use super::*;
    use crate::plan::Collective;
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
                        let mut e = Engine::new(EngineConfig::cpu(ranks)).unwrap();
                        let inputs: Vec<Vec<i32>> = (0..ranks)
                            .map(|r| {
                                (0..shape.input(r).len())
                                    .map(|i| (i * 7 + r * 3) as i32 % 50)
                                    .collect()
                            })
                            .collect();
                        let sh = e.load(collective, &inputs, in_place).unwrap();
                        e.run::<i32>(Some(&choice), &sh, ReduceOp::Sum).unwrap();
                        let want = e.read_output::<i32>(&sh).unwrap();
                        let sh = e.load(collective, &inputs, in_place).unwrap();
                        e.poison(&sh).unwrap();
                        let bind = Arc::new(vec![Binding::DEFAULT; ranks]);
                        let (_, done) = e
                            .launch_after(
                                Some(&choice),
                                *sh,
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

    /// A CPU backend that refuses stream-ordered calls the way the CUDA
    /// backend over its IPC peer exchange does (which cannot run here).
    struct OneRankPerProcess(crate::backend::cpu::CpuBackend);

    impl crate::backend::Backend for OneRankPerProcess {
        fn info(&self) -> &crate::backend::BackendInfo {
            self.0.info()
        }
        fn reserve(&mut self, id: crate::backend::BufId, bytes: &[usize]) -> Result<()> {
            self.0.reserve(id, bytes)
        }
        fn release(&mut self, id: crate::backend::BufId) -> Result<()> {
            self.0.release(id)
        }
        fn write(
            &mut self,
            rank: usize,
            id: crate::backend::BufId,
            offset: usize,
            data: &[u8],
        ) -> Result<()> {
            self.0.write(rank, id, offset, data)
        }
        fn read(
            &mut self,
            rank: usize,
            id: crate::backend::BufId,
            offset: usize,
            out: &mut [u8],
        ) -> Result<()> {
            self.0.read(rank, id, offset, out)
        }
        fn launch(&mut self, call: &crate::backend::Call) -> Result<()> {
            self.0.launch(call)
        }
        fn synchronize(&mut self) -> Result<()> {
            self.0.synchronize()
        }
        fn abort_handle(&self) -> crate::sync::AbortHandle {
            self.0.abort_handle()
        }
        fn memory(&self) -> Result<Vec<Option<crate::backend::DeviceMemory>>> {
            self.0.memory()
        }
        fn ping(&mut self) -> Result<()> {
            self.0.ping()
        }
        fn ordered(&mut self) -> Result<&mut dyn StreamOrdered> {
            Err(crate::backend::ordered::refused_with_one_rank_per_process(
                "cpu",
            ))
        }
    }

    /// A backend that has stream-ordered calls but not where it runs says
    /// why through the engine, typed, and the engine stays usable.
    #[test]
    fn a_refused_ordered_call_says_why_and_leaves_the_engine_usable() {
        let cfg = EngineConfig::cpu(2);
        let cpu = crate::backend::cpu::CpuBackend::new(2, cfg.timeout, cfg.faults.clone()).unwrap();
        let mut core = Engine::with_backend(Box::new(OneRankPerProcess(cpu)), &cfg, None, None);
        let shape = Shape {
            collective: Collective::AllReduce,
            ranks: 2,
            count: 8,
            elem_size: 4,
            in_place: true,
        };
        let bind = Arc::new(vec![Binding::DEFAULT; 2]);
        let e = core
            .launch_after(
                None,
                shape,
                DataType::Float,
                ReduceOp::Sum,
                bind,
                &After::Work,
                None,
            )
            .unwrap_err();
        match &e {
            Error::Refused { what, over, .. } => {
                assert_eq!(*what, "stream-ordered calls");
                assert_eq!(*over, "with one rank per process");
            }
            other => panic!("expected Error::Refused, got {other:?}"),
        }
        assert!(e.to_string().contains("other processes"), "{e}");
        assert!(matches!(core.work_mark(), Err(Error::Refused { .. })));
        assert!(matches!(core.work_gate(), Err(Error::Refused { .. })));
        // Refused before anything was issued: plain calls still run.
        let mut e = core;
        let mut out = vec![vec![0.0f32; 8]; 2];
        let c = crate::engine::HostCall::new(Collective::AllReduce, false, ReduceOp::Sum);
        let (a, b) = (vec![1.0f32; 8], vec![2.0; 8]);
        let mut outs: Vec<&mut [f32]> = out.iter_mut().map(|o| &mut o[..]).collect();
        e.host(c, &[&a, &b], &mut outs).unwrap();
        assert_eq!(out, vec![vec![3.0; 8]; 2]);
    }

    #[test]
    fn typed_ordered_all_reduce_on_device_buffers() {
        let mut e = Engine::new(EngineConfig::cpu(3)).unwrap();
        let send = e.alloc(10).unwrap();
        let recv = e.alloc(10).unwrap();
        for r in 0..3 {
            e.write_buffer(&send, r, &[r as f32; 10]).unwrap();
        }
        let (shape, bind) = e
            .device_call(Collective::AllReduce, &send, &recv, 10)
            .unwrap();
        e.prepare(None, shape).unwrap();
        let (_, done) = e
            .launch_after(
                None,
                shape,
                DataType::Float,
                ReduceOp::Sum,
                bind,
                &After::Nothing,
                None,
            )
            .unwrap();
        assert_eq!(done.len(), 3);
        for r in 0..3 {
            assert_eq!(e.read_buffer(&recv, r).unwrap(), vec![3.0; 10]);
            assert_eq!(e.read_buffer(&send, r).unwrap(), vec![r as f32; 10]);
        }
    }
}
