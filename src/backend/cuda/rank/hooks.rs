//! The layers around each op of an issue. `issue.rs` walks the lowered ops
//! and submits them; these add what is on for the call, each in its own
//! file; a layer that is off is not entered:
//!
//! * `faults.rs`: the fault plan's injection before an op (the tests of the
//!   error paths);
//! * `capture.rs`: the checks of a per-GPU graph capture (compute-lane work
//!   without events only);
//! * `timers.rs`: a timed call's timing, CUDA events between the ops or
//!   (`cupti.rs`, the `profiling` feature) CUPTI's records tied to them,
//!   and the LL kernels' step stamps;
//! * `nvtx.rs`: a range per call and per ring step, while an NVTX tool
//!   listens (the `profiling` feature, as is `cupti.rs`);
//! * `traffic.rs`: the bytes each op moved between ranks.
//!
//! The network hop between nodes is not a layer: it is how a wait, a copy
//! or a record reaches another node (`network.rs`).

use super::issue::StepAt;
use super::lower::{DriverOp, Lowered, Wait};
use super::timing::StepTimes;
use super::{Capturing, Rank};
use crate::backend::Call;
use crate::cuda::HostMapped;
use crate::error::Result;
use crate::plan::Op;

mod capture;
#[cfg(feature = "profiling")]
mod cupti;
mod faults;
#[cfg(feature = "profiling")]
mod nvtx;
mod timers;
mod traffic;

#[cfg(feature = "profiling")]
pub(super) use cupti::cupti_here;
use timers::Timer;

/// The layers of one call's issue on one rank.
pub(super) struct Hooks<'id> {
    /// The call's number in the backend (1-based), for the fault plan;
    /// `None`: the engine injects no fault.
    faults: Option<u64>,
    /// Whether a per-GPU capture is in progress (its checks are on).
    capture: bool,
    /// The NVTX ranges, while an NVTX tool listens.
    #[cfg(feature = "profiling")]
    ranges: Option<nvtx::Ranges>,
    /// The timing layer: on for a timed call issued directly.
    timer: Option<Timer<'id>>,
    /// The current op's start marks (event timing).
    span: Option<(usize, usize)>,
    /// The current op's lane's issued count before its work (CUPTI's order
    /// tie).
    #[cfg(feature = "profiling")]
    issued_from: u64,
    /// The step-time buffer of the current op (an LL kernel of a timed
    /// call), and those of the call so far.
    stamps: Option<StepTimes>,
    stamped: Vec<StepTimes>,
    /// Whether traffic is counted: calls issued directly only (a capture
    /// issues what its replays run; replays do not pass here).
    count: bool,
}

impl<'id> Hooks<'id> {
    /// The layers that are on for `call` on `rank`.
    pub(super) fn begin(rank: &mut Rank<'id>, call: &Call, call_no: u64) -> Result<Self> {
        let plan = &*call.plan;
        let direct = rank.graphs.capturing == Capturing::No;
        traffic::cover(rank, plan.ranks());
        let timer = match call.timing && direct {
            true => Some(Timer::begin(rank, plan)?),
            false => None,
        };
        Ok(Hooks {
            faults: (!rank.faults.is_empty()).then_some(call_no),
            capture: rank.graphs.capturing == Capturing::PerGpu,
            #[cfg(feature = "profiling")]
            ranges: nvtx::Ranges::begin(plan, rank.rank),
            timer,
            span: None,
            #[cfg(feature = "profiling")]
            issued_from: 0,
            stamps: None,
            stamped: Vec::new(),
            count: direct,
        })
    }

    /// Before the op's waits: its NVTX range, an injected fault, the
    /// capture's checks, and the timer's marks of its start.
    pub(super) fn before(
        &mut self,
        rank: &Rank<'id>,
        low: &Lowered,
        waits: impl Iterator<Item = Wait> + Clone,
        at: &StepAt,
    ) -> Result<()> {
        #[cfg(feature = "profiling")]
        if let Some(r) = &mut self.ranges {
            r.at(at.plan, at.rank, at.i);
        }
        if let Some(call_no) = self.faults {
            faults::inject(rank, call_no, at)?;
        }
        if self.capture {
            capture::check(low, waits.clone(), at)?;
        }
        if let Some(t) = &mut self.timer {
            t.before(at.plan, at.rank, low.lane as usize, waits);
        }
        Ok(())
    }

    /// After the waits, before the work: an LL kernel's step-time buffer,
    /// the op's start event, or its CUPTI id pushed.
    pub(super) fn start(&mut self, rank: &mut Rank<'id>, low: &Lowered, at: &StepAt) -> Result<()> {
        let Some(timer) = &mut self.timer else {
            return Ok(());
        };
        // An LL kernel of a timed call writes its step times (the buffer
        // taken before the op's start is marked).
        if let DriverOp::RingLl { steps, .. } = low.work {
            self.stamps = Some(rank.step_times(at.i, steps).map_err(|e| at.in_step(e))?);
        }
        let lane = low.lane as usize;
        match timer {
            Timer::Events(t, _) => self.span = Some(t.start(rank, lane, at)?),
            #[cfg(feature = "profiling")]
            Timer::Cupti(t) => {
                t.push(low, at)?;
                self.issued_from = rank.lanes[lane].issued();
            }
        }
        Ok(())
    }

    /// Where the current op's LL kernel writes its step times, if it does.
    pub(super) fn stamps(&self) -> Option<&HostMapped> {
        self.stamps.as_ref().map(|s| &s.buf)
    }

    /// After the work was submitted (`work`: whether it was): the CUPTI id
    /// popped, the traffic counted, the op's end placed in the timing.
    pub(super) fn end(
        &mut self,
        rank: &mut Rank<'id>,
        (low, op): (&Lowered, &Op),
        at: &StepAt,
        work: Result<()>,
    ) -> Result<()> {
        // CUPTI's id is popped whether or not the work was submitted.
        #[cfg(feature = "profiling")]
        if let Some(Timer::Cupti(t)) = &mut self.timer {
            t.pop(low, at)?;
        }
        work?;
        #[cfg(feature = "profiling")]
        if let Some(Timer::Cupti(t)) = &mut self.timer {
            let lane = low.lane as usize;
            t.issued(
                low,
                lane,
                (self.issued_from, rank.lanes[lane].issued()),
                at.i,
            );
        }
        self.stamped.extend(self.stamps.take());
        if self.count {
            traffic::count(rank, low);
        }
        match (&mut self.timer, self.span.take()) {
            (Some(Timer::Events(t, _)), Some(a)) => t.end(rank, (low, a), op.signal, at)?,
            #[cfg(feature = "profiling")]
            (Some(Timer::Cupti(t)), _) => t.end(low, op.signal, at.i),
            _ => {}
        }
        Ok(())
    }

    /// After the last op: the ranges closed, the timed call kept for the
    /// next take.
    pub(super) fn finish(self, rank: &mut Rank<'id>) {
        #[cfg(feature = "profiling")]
        if let Some(r) = self.ranges {
            r.end();
        }
        if let Some(t) = self.timer {
            #[cfg(feature = "profiling")]
            if let Timer::Cupti(c) = &t {
                rank.instr.cupti_mark = c.mark;
            }
            rank.instr.timing.push((t.into_timed(), self.stamped));
        }
    }
}
