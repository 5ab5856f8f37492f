//! The CUPTI timing layer of an issue (the `profiling` feature): each op's
//! work issued under its external correlation id, and the marks that place
//! its records (see `timers.rs` for the events it falls back to).

use super::super::activity::{CuptiCall, OpRef};
use super::super::issue::StepAt;
use super::super::lower::{DriverOp, Lowered, Wait};
use super::super::{Rank, Timed};
use super::timers::predecessors;
use crate::cuda::cupti::{self as cupti, Class, Cupti, CuptiTie, Issued};
use crate::error::{Error, Result};
use crate::plan::{Plan, SignalId};
use std::time::Instant;

/// The CUPTI layer of one timed call: each op's work issued under its
/// external correlation id, and what places its marks.
pub(super) struct CuptiTimer {
    call: CuptiCall,
    cupti: &'static Cupti,
    /// The order tie: CUPTI's ids of the rank's lane streams (`None`: the
    /// callback tie).
    lanes: Option<[u32; 2]>,
    /// The order tie: each lane's issued count (`Stream::issued`) up to
    /// which its calls are filed in `call.issued`.
    pub(super) mark: [u64; 2],
    issued: Instant,
    /// The index in `call.ops` of each lane's last op.
    lane_last: [Option<usize>; 2],
    /// The index of the op that records each of this rank's signals.
    signal_op: Vec<Option<usize>>,
    /// The current op's predecessors (see [`OpRef::after`]).
    after: Vec<usize>,
    /// Not yet handed over as a [`Timed`] call: a call whose issue failed
    /// is never taken, so dropping it ends its collection.
    live: bool,
}

impl Drop for CuptiTimer {
    fn drop(&mut self) {
        if self.live {
            // Nobody to tell: the call's issue already failed.
            let _ = self.cupti.end(1);
        }
    }
}

impl CuptiTimer {
    /// Start a timed call through CUPTI: where it loads and starts, the
    /// call's CUPTI layer, else why not (the call is then timed with
    /// events).
    pub(super) fn start(rank: &mut Rank<'_>, plan: &Plan) -> std::result::Result<Self, String> {
        let cupti = (|| {
            let c = cupti_here()?;
            let lanes = match c.tie {
                CuptiTie::Callback => None,
                CuptiTie::Order => Some(rank.cupti_lanes(c)?),
            };
            c.begin()?;
            Ok::<_, String>((c, lanes))
        })();
        // The order tie: with timed calls of this rank pending (kinds on
        // since the first), its lanes' calls since the last are unowned
        // records to pass over; else the count starts now.
        let now = [rank.lanes[0].issued(), rank.lanes[1].issued()];
        let pending = rank
            .instr
            .timing
            .iter()
            .any(|(t, _)| matches!(t, Timed::Cupti(..)));
        let from = if pending { rank.instr.cupti_mark } else { now };
        let (c, lanes) = cupti?;
        let mut t = CuptiTimer::begin(c, (lanes, from), plan, rank.rank);
        for (l, &n) in now.iter().enumerate() {
            t.unowned(l, n, 0);
        }
        Ok(t)
    }

    pub(super) fn begin(
        cupti: &'static Cupti,
        (lanes, mark): (Option<[u32; 2]>, [u64; 2]),
        plan: &Plan,
        r: usize,
    ) -> Self {
        CuptiTimer {
            call: CuptiCall::new(plan.ops[r].len(), 0.0),
            cupti,
            lanes,
            mark,
            issued: Instant::now(),
            lane_last: [None, None],
            signal_op: vec![None; plan.signals.len()],
            after: Vec::new(),
            live: true,
        }
    }

    /// Before an op's waits: the ops of this rank whose ends start it.
    pub(super) fn before(
        &mut self,
        plan: &Plan,
        r: usize,
        lane: usize,
        waits: impl Iterator<Item = Wait>,
    ) {
        self.after.clear();
        let last = self.lane_last[lane];
        predecessors(plan, r, last, &self.signal_op, waits, &mut self.after);
    }

    /// Around the op's work: its external id pushed (no work, or the
    /// order tie: nothing).
    pub(super) fn push(&self, low: &Lowered, at: &StepAt) -> Result<()> {
        if low.work == DriverOp::Mark || self.lanes.is_some() {
            return Ok(());
        }
        let i = self.call.ops.len();
        self.cupti.push(self.call.id(i)).map_err(|m| at.cupti(m))
    }

    pub(super) fn pop(&mut self, low: &Lowered, at: &StepAt) -> Result<()> {
        if low.work == DriverOp::Mark || self.lanes.is_some() {
            return Ok(());
        }
        self.cupti.pop(&mut self.call.ties).map_err(|m| at.cupti(m))
    }

    /// The order tie: lane `lane`'s calls up to its issued count `upto`
    /// that no op of a timed call issued (e.g. a reset between calls),
    /// filed as no op's (op `i` names the place; the callback tie:
    /// nothing). With one class of records only, their class is unknown,
    /// and they are not filed (a record of one is then an extra record,
    /// an error).
    pub(super) fn unowned(&mut self, lane: usize, upto: u64, i: usize) {
        let (Some(lanes), Some(m)) = (self.lanes, self.mark.get_mut(lane)) else {
            return;
        };
        let n = upto.saturating_sub(*m);
        *m = upto;
        if self.cupti.kinds != cupti::CuptiKinds::All {
            return;
        }
        let stream = lanes.get(lane).copied().unwrap_or(u32::MAX);
        for _ in 0..n {
            self.call.issued.push(Issued {
                external: 0,
                op: i,
                lane,
                stream,
                class: None,
            });
        }
    }

    /// The order tie: the op (index `i` in the rank's list) issued the
    /// calls of lane `lane` from its issued count `from` to `to` (the
    /// callback tie: nothing).
    pub(super) fn issued(&mut self, low: &Lowered, lane: usize, (from, to): (u64, u64), i: usize) {
        self.unowned(lane, from, i);
        if let Some(m) = self.mark.get_mut(lane) {
            *m = to;
        }
        let (Some(lanes), Some(class)) = (self.lanes, class_of(&low.work)) else {
            return;
        };
        if !cupti::collects(self.cupti.kinds, class) {
            return;
        }
        let external = self.call.id(self.call.ops.len());
        let stream = lanes.get(lane).copied().unwrap_or(u32::MAX);
        for _ in 0..to.saturating_sub(from) {
            self.call.issued.push(Issued {
                external,
                op: i,
                lane,
                stream,
                class: Some(class),
            });
        }
    }

    /// Hand the call over for the next take (which ends its collection).
    pub(super) fn into_timed<'id>(mut self) -> Timed<'id> {
        self.live = false;
        Timed::Cupti(std::mem::take(&mut self.call), self.cupti, self.issued)
    }

    /// After the op: its place in the call.
    pub(super) fn end(&mut self, low: &Lowered, signal: Option<SignalId>, i: usize) {
        let k = self.call.ops.len();
        // An op whose records are not collected (RINGREDUCE_CUPTI_KINDS) is
        // placed as a mark is.
        let timed = class_of(&low.work).is_some_and(|c| cupti::collects(self.cupti.kinds, c));
        self.call.ops.push(OpRef {
            op: i,
            parts: low.work.parts(),
            mark: !timed,
            after: std::mem::take(&mut self.after),
        });
        self.lane_last[low.lane as usize] = Some(k);
        if let Some(x) = signal.and_then(|s| self.signal_op.get_mut(s.0)) {
            *x = Some(k);
        }
    }
}

/// What CUPTI records of an op's work (`None`: no work).
fn class_of(w: &DriverOp) -> Option<Class> {
    match w {
        DriverOp::Mark => None,
        DriverOp::Copy { .. } | DriverOp::Send { .. } => Some(Class::Copy),
        DriverOp::Reduce { .. } | DriverOp::Exchange { .. } | DriverOp::RingLl { .. } => {
            Some(Class::Kernel)
        }
    }
}

/// The process's CUPTI with the settings of the environment
/// (`RINGREDUCE_CUPTI`, `_TIE`, `_KINDS`, `_KEEP`), or why there is none.
pub(in crate::backend::cuda::rank) fn cupti_here() -> std::result::Result<&'static Cupti, String> {
    let setting = crate::param::CUPTI.get().map_err(|e| e.to_string())?;
    let e = |e: Error| e.to_string();
    let d = cupti::Settings::default();
    let how = cupti::Settings {
        tie: crate::param::CUPTI_TIE.get().map_err(e)?.unwrap_or(d.tie),
        kinds: crate::param::CUPTI_KINDS
            .get()
            .map_err(e)?
            .unwrap_or(d.kinds),
        keep: crate::param::CUPTI_KEEP.get().map_err(e)?.unwrap_or(d.keep),
    };
    cupti::get(setting.as_deref(), how)
}
