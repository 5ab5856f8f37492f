//! The fault layer: what the engine's fault plan ([`crate::fault`], the
//! same plan the CPU backend reads) injects before an op.

use super::super::issue::StepAt;
use super::super::Rank;
use crate::cuda::CudaError;
use crate::error::Result;
use crate::fault::Injected;

/// The fault injected before op `at` of call `call_no` on `rank`, if any:
/// a stall ends the call as a rank whose step never comes, a failure as
/// the op's driver call failing.
pub(super) fn inject(rank: &Rank, call_no: u64, at: &StepAt) -> Result<()> {
    match rank.faults.inject(at.rank, at.i, call_no, &|| at.desc()) {
        None => Ok(()),
        Some(Injected::Stall(why)) => Err(at.board.stall(at.gen, at.rank, &why)),
        Some(Injected::Fail(_)) => Err(at.cuda(CudaError {
            call: "injected",
            message: "injected failure of the driver call".into(),
        })),
        // A rank's process kills itself once its call is issued, with its
        // peers inside the call (`exchange::ipc`), not at an op.
        Some(Injected::Kill) => Ok(()),
    }
}
