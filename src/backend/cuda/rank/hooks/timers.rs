//! The timing layer of an issue: CUDA events between ops ([`CallTimer`])
//! or, with the `profiling` feature, CUPTI activity records tied to their
//! ops (`CuptiTimer`, in `cupti.rs`).

use super::super::activity::TimingSource;
use super::super::issue::StepAt;
use super::super::lower::{DriverOp, Lowered, Wait};
use super::super::{Rank, Timed, TimedCall};
#[cfg(feature = "profiling")]
use super::cupti::CuptiTimer;
use crate::error::Result;
use crate::plan::{Plan, SignalId};

/// The timing layer of one timed call: one event per op end, and one at
/// its start only where the start is not already marked by the previous
/// end on the same lane (the op waits on another lane or rank, or is the
/// lane's first).
pub(super) struct CallTimer<'id> {
    tc: TimedCall<'id>,
    /// The end event of each lane's last op.
    lane_last: [Option<usize>; 2],
    /// The end event of the op that records each of this rank's signals.
    signal_end: Vec<Option<usize>>,
    /// The current op's first start mark, and whether its start is marked.
    t0: usize,
    marked: bool,
}

impl<'id> CallTimer<'id> {
    /// Start a timed call: its base event, recorded first on lane 0.
    pub(super) fn begin(rank: &mut Rank<'id>, signals: usize) -> Result<Self> {
        let ev = rank.timing_event()?;
        rank.lanes[0].record_timing(&ev).map_err(rank.err())?;
        Ok(CallTimer {
            tc: TimedCall {
                events: vec![ev],
                starts: Vec::new(),
                spans: Vec::new(),
            },
            lane_last: [Some(0), None],
            signal_end: vec![None; signals],
            t0: 0,
            marked: false,
        })
    }

    /// Before an op's waits: the marks its start already has (no driver
    /// call).
    pub(super) fn before(
        &mut self,
        plan: &Plan,
        r: usize,
        lane: usize,
        waits: impl Iterator<Item = Wait>,
    ) {
        self.t0 = self.tc.starts.len();
        let last = self.lane_last[lane];
        self.marked = predecessors(plan, r, last, &self.signal_end, waits, &mut self.tc.starts);
    }

    /// After the waits: the op's start, as (first, last + 1) into the start
    /// marks; records a start event where none marks it.
    pub(super) fn start(
        &mut self,
        rank: &mut Rank<'id>,
        lane: usize,
        at: &StepAt,
    ) -> Result<(usize, usize)> {
        if self.marked {
            return Ok((self.t0, self.tc.starts.len()));
        }
        let a = rank.timing_event().map_err(|e| at.in_step(e))?;
        rank.lanes[lane].record_timing(&a).map_err(|e| at.cuda(e))?;
        self.tc.events.push(a);
        self.tc.starts.truncate(self.t0);
        self.tc.starts.push(self.tc.events.len() - 1);
        Ok((self.t0, self.t0 + 1))
    }

    /// After the work: the op's end. `Begin` and `End` do no work: they end
    /// where they start (when one event marks the start; a start marked by
    /// several ends gets an end event of its own).
    pub(super) fn end(
        &mut self,
        rank: &mut Rank<'id>,
        (low, a): (&Lowered, (usize, usize)),
        signal: Option<SignalId>,
        at: &StepAt,
    ) -> Result<()> {
        let lane = low.lane as usize;
        let b = if low.work == DriverOp::Mark && a.1 == a.0 + 1 {
            self.tc.starts[a.0]
        } else {
            let b = rank.timing_event().map_err(|e| at.in_step(e))?;
            rank.lanes[lane].record_timing(&b).map_err(|e| at.cuda(e))?;
            self.tc.events.push(b);
            self.tc.events.len() - 1
        };
        self.lane_last[lane] = Some(b);
        if let Some(s) = signal {
            if let Some(x) = self.signal_end.get_mut(s.0) {
                *x = Some(b);
            }
        }
        self.tc.spans.push((at.i, low.work.parts(), a, b));
        Ok(())
    }
}

/// The ops (indices into `ends`'s values) whose ends start an op of rank
/// `r` after `waits`, appended to `out`: its lane's last op (`last`) and,
/// for each wait on one of `r`'s own signals, the op that recorded it
/// (`ends`, by signal). Whether they are all that starts it: not where the
/// op is its lane's first or waits on another rank's signal or on one no
/// op recorded yet (an event timer then marks its start itself).
pub(super) fn predecessors(
    plan: &Plan,
    r: usize,
    last: Option<usize>,
    ends: &[Option<usize>],
    waits: impl Iterator<Item = Wait>,
    out: &mut Vec<usize>,
) -> bool {
    let mut all = last.is_some();
    out.extend(last);
    for w in waits {
        let s = w.signal();
        match ends.get(s.0).copied().flatten() {
            Some(end) if plan.signals[s.0].owner == r => out.push(end),
            _ => all = false,
        }
    }
    all
}

/// The timing layer of a timed call, by its source.
pub(super) enum Timer<'id> {
    Events(CallTimer<'id>, TimingSource),
    #[cfg(feature = "profiling")]
    Cupti(CuptiTimer),
}

impl<'id> Timer<'id> {
    /// Start a timed call: through CUPTI where it loads and starts (the
    /// `profiling` feature), else with events (and the reason).
    pub(super) fn begin(rank: &mut Rank<'id>, plan: &Plan) -> Result<Self> {
        #[cfg(feature = "profiling")]
        let why = match CuptiTimer::start(rank, plan) {
            Ok(t) => return Ok(Timer::Cupti(t)),
            Err(why) => why,
        };
        #[cfg(not(feature = "profiling"))]
        let why = String::from("built without the profiling feature");
        Ok(Timer::Events(
            CallTimer::begin(rank, plan.signals.len())?,
            TimingSource::choose(Err(why)),
        ))
    }

    pub(super) fn before(
        &mut self,
        plan: &Plan,
        r: usize,
        lane: usize,
        waits: impl Iterator<Item = Wait>,
    ) {
        match self {
            Timer::Events(t, _) => t.before(plan, r, lane, waits),
            #[cfg(feature = "profiling")]
            Timer::Cupti(t) => t.before(plan, r, lane, waits),
        }
    }

    pub(super) fn into_timed(self) -> Timed<'id> {
        match self {
            Timer::Events(t, why) => Timed::Events(t.tc, why),
            #[cfg(feature = "profiling")]
            Timer::Cupti(t) => t.into_timed(),
        }
    }
}

#[cfg(test)]
mod tests;
