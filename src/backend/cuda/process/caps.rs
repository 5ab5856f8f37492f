//! NCCL, CUDA graphs and profiling of the CUDA backend's process front end
//! (one rank per process): the same calls as [`super::super`]'s rank
//! threads, on this process's one rank.

use super::super::Rank;
use super::super::{Cmd, NcclCmd};
use super::CudaProcessBackend;
use crate::backend::{
    check_call, Call, CallTimeline, GraphBackend, IssueProfile, NcclBackend, NcclCall, Profiling,
};
use crate::cuda::nccl;
use crate::error::{Error, Result};
use crate::sync::SignalBoard;
use std::sync::Arc;

impl NcclBackend for CudaProcessBackend {
    /// `ncclGetUniqueId` on rank 0, its 128 bytes through the store, then
    /// `ncclCommInitRank` in every process.
    fn nccl_init(&mut self, lib: &nccl::Nccl) -> Result<()> {
        let n = self.info.ranks;
        let mut devs = self.info.rank_to_device.clone();
        devs.sort_unstable();
        devs.dedup();
        if devs.len() != n {
            return Err(Error::Unsupported(
                format!(
                    "NCCL with {n} ranks on {} GPUs (NCCL needs one GPU per rank)",
                    devs.len()
                ),
                "cuda",
            ));
        }
        self.nccl_inits += 1;
        let key = format!("nccl-id-{}", self.nccl_inits);
        let store = self.job.store();
        let id = if self.me == 0 {
            let id = lib.unique_id().map_err(|e| self.failed(e.into()))?;
            store.put(&key, id.as_bytes())?;
            id
        } else {
            let b = store.get(&key, 0, "the NCCL unique id (ncclGetUniqueId on rank 0)")?;
            nccl::UniqueId::from_bytes(&b)?
        };
        let lib = lib.clone();
        self.on(Box::new(move |rk: &mut Rank<'_>| rk.nccl_init(lib, id, n)))
            .map_err(|e| self.failed(e))
    }

    fn launch_nccl(&mut self, call: &NcclCall) -> Result<()> {
        let timed = self.log.nccl(call);
        let (key, sent) = self.held_nccl.key(call);
        self.threads
            .run(vec![Cmd::Nccl(NcclCmd {
                key,
                call: sent,
                timed,
            })])
            .map(|_| ())
    }

    fn nccl_graph_capture(&mut self, call: &NcclCall, calls: usize) -> Result<()> {
        let c = Arc::new(call.clone());
        self.on(Box::new(move |rk: &mut Rank<'_>| {
            rk.nccl_capture(&c, calls)
        }))
    }

    fn launch_nccl_graph(&mut self) -> Result<()> {
        self.on(Box::new(|rk: &mut Rank<'_>| rk.nccl_replay()))
    }

    fn set_nccl_timing(&mut self, on: bool) {
        self.log.set_nccl_timing(on);
    }

    fn take_nccl_timeline(&mut self) -> Result<Vec<CallTimeline>> {
        self.drain()?;
        let epoch = self.log.epoch();
        let (v, _half) = self.on(Box::new(move |rk: &mut Rank<'_>| {
            rk.take_nccl_timing(epoch)
        }))?;
        let names = self.log.take_nccl();
        Ok(names
            .into_iter()
            .zip(v)
            .map(|((plan, launch_ns), op)| CallTimeline {
                plan,
                clock: "GPU event timestamps of this rank's process, placed on its host clock through an anchor event".into(),
                launch_ns,
                skew_ns: 0.0,
                ops: vec![op],
            })
            .collect())
    }
}

impl GraphBackend for CudaProcessBackend {
    fn capture(&mut self, calls: &[Call]) -> Result<()> {
        for c in calls {
            check_call(c, self.info.ranks)?;
            if !c.plan.device_ordered() {
                return Err(Error::Unsupported(
                    format!(
                        "CUDA graph capture of {} (orders steps with events)",
                        c.plan.name
                    ),
                    "cuda",
                ));
            }
        }
        let calls = Arc::new(calls.to_vec());
        let signals = super::super::front::most_signals(&calls);
        let (abort, timeout) = (self.abort.clone(), self.timeout);
        self.on(Box::new(move |rk: &mut Rank<'_>| {
            // Device-ordered plans: nobody waits on the host board.
            let board = SignalBoard::new(signals, abort, timeout);
            rk.capture(&calls, &board)
        }))
    }

    fn replay(&mut self) -> Result<()> {
        self.on(Box::new(|rk: &mut Rank<'_>| rk.replay()))
    }

    fn drop_graphs(&mut self) -> Result<()> {
        self.on(Box::new(|rk: &mut Rank<'_>| {
            rk.drop_graphs();
            Ok(())
        }))
    }
}

impl Profiling for CudaProcessBackend {
    fn take_issue_profile(&mut self) -> Result<Vec<IssueProfile>> {
        let p = self.on(Box::new(|rk: &mut Rank<'_>| {
            Ok(std::mem::take(&mut rk.profile))
        }))?;
        let mut v = vec![IssueProfile::default(); self.info.ranks];
        v[self.me] = p;
        Ok(v)
    }

    fn take_timeline(&mut self) -> Result<Vec<CallTimeline>> {
        self.drain()?;
        let epoch = self.log.epoch();
        let (per_call, _half) =
            self.on(Box::new(move |rk: &mut Rank<'_>| rk.take_timing(epoch)))?;
        let names = self.log.take();
        Ok(names
            .into_iter()
            .zip(per_call)
            .map(|((plan, launch_ns), (ops, source))| CallTimeline {
                plan,
                clock: format!("{}; device timestamps of this rank's process, placed on its host clock (other processes' clocks are not aligned with it)", source.line()),
                launch_ns,
                skew_ns: 0.0,
                ops,
            })
            .collect())
    }

    /// What this process's rank issued (its own copies and kernels).
    fn take_traffic(&mut self) -> Result<Vec<crate::plan::Traffic>> {
        let mut t = self.on(Box::new(|rk: &mut Rank<'_>| Ok(rk.take_traffic())))?;
        t.resize(self.info.ranks, crate::plan::Traffic::default());
        Ok(t)
    }
}
