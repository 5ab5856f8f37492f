//! NCCL on the CUDA backend's buffers (the `nccl` feature): one
//! communicator per rank, made with the id the peer exchange hands out
//! (`PeerExchange::nccl_id`); the calls run on each rank's compute stream
//! (`rank/nccl_calls.rs`), kept and posted like the collectives. Nothing
//! here is `unsafe`.

use super::rank::activity::RankTiming;
use super::*;
use crate::backend::NcclBackend;
use crate::cuda::nccl::Nccl;

impl NcclBackend for CudaBackend {
    fn nccl_init(&mut self, lib: &Nccl) -> Result<()> {
        let n = self.front.info.ranks;
        if self.front.info.devices() != n {
            return Err(Error::Unsupported(
                format!(
                    "NCCL with {n} ranks on {} GPUs (NCCL needs one GPU per rank)",
                    self.front.info.devices()
                ),
                "cuda",
            ));
        }
        let id = self.link.nccl_id(&self.front, lib)?;
        let r = self.front.each_all(|_| {
            let lib = lib.clone();
            Box::new(move |rk: &mut Rank<'_>| rk.nccl_init(lib, id, n))
        });
        r.map(|_| ()).map_err(|e| self.front.failed(e))
    }

    fn nccl_memory(&mut self, lib: &Nccl) -> Result<()> {
        let r = self.front.each_all(|_| {
            let lib = lib.clone();
            Box::new(move |rk: &mut Rank<'_>| {
                rk.nccl_memory = Some(lib);
                Ok(())
            })
        });
        r.map(|_| ()).map_err(|e| self.front.failed(e))
    }

    fn launch_nccl(&mut self, call: &NcclCall) -> Result<()> {
        let timed = self.front.log.nccl(call);
        let (key, sent) = self.front.held_nccl.key(call);
        let cmds = self
            .front
            .local
            .clone()
            .map(|_| {
                Cmd::Nccl(NcclCmd {
                    key,
                    call: sent.clone(),
                    timed,
                })
            })
            .collect();
        self.front.post(cmds, super::Deferred::Nccl)
    }

    fn nccl_graph_capture(&mut self, call: &NcclCall, calls: usize) -> Result<()> {
        let call = Arc::new(call.clone());
        self.front
            .each_all(|_| {
                let c = call.clone();
                Box::new(move |rk: &mut Rank<'_>| rk.nccl_capture(&c, calls))
            })
            .map(|_| ())
    }

    fn launch_nccl_graph(&mut self) -> Result<()> {
        self.front
            .each_all(|_| Box::new(|rk: &mut Rank<'_>| rk.nccl_replay()))
            .map(|_| ())
    }

    fn set_nccl_timing(&mut self, on: bool) {
        self.front.log.set_nccl_timing(on);
    }

    fn take_nccl_timeline(&mut self) -> Result<Vec<CallTimeline>> {
        self.drain()?;
        let epoch = self.front.log.epoch();
        // One op per NCCL call: CUPTI's records of its kernels and copies,
        // else an event pair around it (nothing between its steps).
        let per_rank: Vec<RankTiming> = self
            .front
            .each(move |_| Box::new(move |rk: &mut Rank<'_>| rk.take_nccl_timing(epoch)))?;
        let calls = self.front.log.take_nccl();
        Ok(self.link.timelines(calls, per_rank, true))
    }
}
