//! What both CUDA front ends (rank threads in one process, one rank per
//! process) keep and check on the caller's side the same way: the launch
//! log of timed calls, a call's admission, and a device's memory.
//! The two differ only in how a rank reaches its peers (tokens handed
//! between threads, or CUDA IPC handles exchanged through the job).

use super::{Call, DeviceMemory, NcclCall};
use crate::backend::check_call;
use crate::cuda;
use crate::error::{Error, Result};
use crate::sync::AbortHandle;
use std::time::Instant;

/// The caller's side of the timelines: the host clock's zero and, for each
/// timed collective and NCCL call since the last take, its name and launch
/// time (host ns since the zero). The GPU side (events per op) is the rank's.
#[derive(Debug)]
pub(super) struct LaunchLog {
    epoch: Instant,
    timed: Vec<(String, f64)>,
    nccl_timing: bool,
    nccl_timed: Vec<(String, f64)>,
}

impl LaunchLog {
    pub fn new() -> Self {
        LaunchLog {
            epoch: Instant::now(),
            timed: Vec::new(),
            nccl_timing: false,
            nccl_timed: Vec::new(),
        }
    }

    /// The host clock's zero the ranks place their GPU times against.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    fn now_ns(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64() * 1e9
    }

    /// Note a collective call at its launch, if it is timed.
    pub fn collective(&mut self, call: &Call) {
        if call.timing {
            let t = self.now_ns();
            self.timed.push((call.plan.name.clone(), t));
        }
    }

    /// Time NCCL calls from now on (or stop).
    pub fn set_nccl_timing(&mut self, on: bool) {
        self.nccl_timing = on;
    }

    /// Note an NCCL call at its launch; whether it is timed.
    pub fn nccl(&mut self, call: &NcclCall) -> bool {
        if self.nccl_timing {
            let t = self.now_ns();
            self.nccl_timed
                .push((format!("nccl {}", call.collective.name()), t));
        }
        self.nccl_timing
    }

    /// The timed collective calls since the last take.
    pub fn take(&mut self) -> Vec<(String, f64)> {
        std::mem::take(&mut self.timed)
    }

    /// The timed NCCL calls since the last take.
    pub fn take_nccl(&mut self) -> Vec<(String, f64)> {
        std::mem::take(&mut self.nccl_timed)
    }
}

/// Whether `call` may be launched on `ranks` ranks of an engine whose abort
/// handle is `abort`: its shape, and that the engine was not aborted.
pub(super) fn admit(call: &Call, ranks: usize, abort: &AbortHandle) -> Result<()> {
    check_call(call, ranks)?;
    if abort.is_aborted() {
        return Err(Error::Poisoned {
            reason: "the engine was aborted".into(),
        });
    }
    Ok(())
}

/// The most signals any of `calls`' plans uses (what a capture's board
/// must hold).
pub(super) fn most_signals(calls: &[Call]) -> usize {
    calls
        .iter()
        .map(|c| c.plan.signal_count())
        .max()
        .unwrap_or(0)
}

/// GPU `device`'s free and total memory, in bytes.
pub(super) fn device_memory(device: usize) -> Result<DeviceMemory> {
    let (free, total) = cuda::with_device(device, |ctx| ctx.mem_info())
        .and_then(|r| r)
        .map_err(|e| Error::CudaSetup {
            call: e.call,
            message: e.message,
        })?;
    Ok(DeviceMemory {
        device,
        free: free as u64,
        total: total as u64,
    })
}
