//! A rank's resident exchange (`oneshot:resident`): start the kernel when a
//! resident call needs it, post each call as a descriptor, and stop it
//! before anything else uses the rank's streams.

use super::super::cuda_err;
use super::Rank;
use crate::backend::Call;
use crate::cuda::exchange_blocks;
use crate::element::DevOp;
use crate::error::{Error, Result};
use crate::plan::Exchange;

impl<'id> Rank<'id> {
    /// Stop the resident kernel if one runs, and wait (bounded) until it
    /// has returned: nothing else this thread does on the GPU may overlap
    /// it (a driver call that waits for the device would wait for a kernel
    /// that waits for this thread). Both lanes also wait for its exit on
    /// the GPU.
    pub fn park_resident(&mut self) -> Result<()> {
        let e = cuda_err(self.rank, self.device);
        let limit = self.timeout + std::time::Duration::from_secs(5);
        let Some(res) = self.resident.as_mut() else {
            return Ok(());
        };
        if res.running().is_none() {
            return Ok(());
        }
        res.stop().map_err(&e)?;
        for lane in &self.lanes {
            lane.wait_local(res.exit_event()).map_err(&e)?;
        }
        if let Some(res) = self.resident.as_ref() {
            self.wait_stream(res.stream(), limit, |err| {
                e(crate::cuda::CudaError {
                    call: err.call,
                    message: format!(
                        "the resident exchange kernel did not return: {}",
                        err.message
                    ),
                })
            })?;
        }
        // The kernel has returned: what its calls held may be freed now.
        match self.resident.as_mut() {
            Some(res) => res.reap().map_err(&e),
            None => Ok(()),
        }
    }

    /// Post the resident exchange `x` of `call`. The kernel is (re)started
    /// when none runs, when the running one serves another data type, op
    /// or grid, or when the op waits on signals (a fenced call: its waits
    /// were issued on the compute lane, which the new kernel then follows).
    pub(super) fn post_resident(
        &mut self,
        call: &Call,
        x: &Exchange,
        waits: bool,
        op: DevOp,
        scalar: u64,
    ) -> Result<()> {
        let e = cuda_err(self.rank, self.device);
        let elem = call.dtype.size();
        let bytes = x.dst.len() * elem;
        let blocks = exchange_blocks(bytes);
        let tag = ((call.dtype as u64) << 8) | op as u64;
        let want = Some((tag, blocks));
        let running = self.resident.as_ref().and_then(|r| r.running());
        if running != want || waits {
            self.park_resident()?;
            // The new kernel follows everything issued on both lanes.
            for (lane, ev) in self.lanes.iter().zip(&self.lane_ev) {
                lane.record(ev).map_err(&e)?;
            }
            let peer_flags = self
                .peers
                .flags
                .get(x.peer)
                .ok_or_else(|| Error::internal(format!("no flags of rank {}", x.peer)))?;
            let k = &self
                .kernels
                .get(&(call.dtype, op))
                .ok_or_else(|| Error::internal("kernel cache"))?
                .2;
            let res = self
                .resident
                .as_mut()
                .ok_or_else(|| Error::internal("resident handle"))?;
            res.start(
                k,
                tag,
                blocks,
                &[&self.lane_ev[0], &self.lane_ev[1]],
                &self.flags,
                &self.calls,
                peer_flags,
                &self.ctrl,
            )
            .map_err(&e)?;
        }
        // Out of `self` while the call borrows the rank's buffers.
        let mut res = self
            .resident
            .take()
            .ok_or_else(|| Error::internal("resident handle"))?;
        let r = self
            .exchange_operands(call, x, scalar)
            .and_then(|ops| res.post(&ops).map_err(&e));
        self.resident = Some(res);
        r
    }
}
