//! A rank's CUPTI timeline (the `profiling` feature): the lanes' stream
//! ids, the collection held while timing is on, the records of the timed
//! calls taken and tied to their ops, and the collection's end.

use super::super::activity;
use super::super::*;
use crate::cuda::cupti::{tie_by_order, Activity, Cupti, CuptiTie};

/// A rank's CUPTI records of its timed calls, the map from CUPTI's clock
/// to host ns since the epoch, and the map's half-width (ns).
pub(super) struct Taken {
    pub(super) recs: Vec<Activity>,
    pub(super) kinds: crate::cuda::cupti::CuptiKinds,
    pub(super) to_host: Box<dyn Fn(u64) -> f64>,
    pub(super) half: f64,
}

/// The CUPTI library of the CUPTI-timed calls among `timing`, and how
/// many there are; `None` without such calls.
pub(super) fn pending<'a, 'id: 'a>(
    timing: impl Iterator<Item = &'a Timed<'id>>,
) -> Option<(&'static Cupti, usize)> {
    let mut first = None;
    let mut n = 0;
    for t in timing {
        if let Timed::Cupti(_, c, _) = t {
            first.get_or_insert(*c);
            n += 1;
        }
    }
    first.map(|c| (c, n))
}

impl<'id> Rank<'id> {
    /// CUPTI's ids of the lane streams (the order tie), looked up on the
    /// first timed call.
    pub(in crate::backend::cuda::rank) fn cupti_lanes(
        &mut self,
        c: &Cupti,
    ) -> std::result::Result<[u32; 2], String> {
        if let Some(l) = self.instr.cupti_lanes {
            return Ok(l);
        }
        let l = [
            c.stream_id(self.ctx.ctx, self.lanes[0].raw())?,
            c.stream_id(self.ctx.ctx, self.lanes[1].raw())?,
        ];
        self.instr.cupti_lanes = Some(l);
        Ok(l)
    }

    /// Timing switched on (`on`) or off for the calls that follow. With
    /// CUPTI's callback tie, on: this rank holds CUPTI's activity
    /// collection on ([`Cupti::hold`]) until timing is switched off (or the
    /// rank is torn down), and primes it with a memset on each lane and a
    /// one-element launch of each reduce kernel loaded, waited for: CUPTI's
    /// set-up after its kinds are enabled (a few hundred us at the first
    /// activity, and again at each kernel's first launch) is paid here, not
    /// by the first timed call, and the kinds stay on between takes while
    /// timing is on. Off: the hold ends (the collection stops once no timed
    /// call is pending either). With events or the order tie (whose records
    /// on the lanes must all be the timed calls'): nothing.
    pub fn prepare_timing(&mut self, on: bool) -> Result<()> {
        let Ok(k) = super::super::hooks::cupti_here() else {
            return Ok(());
        };
        if k.tie != CuptiTie::Callback {
            return Ok(());
        }
        if !on {
            if std::mem::take(&mut self.instr.held) {
                k.release().map_err(|m| self.cupti_err(m))?;
            }
            return Ok(());
        }
        if self.instr.held {
            return Ok(());
        }
        k.hold().map_err(|m| self.cupti_err(m))?;
        self.instr.held = true;
        const PRIMER: usize = 64;
        let e = self.err();
        if self.instr.primer.is_none() {
            self.instr.primer = Some(self.ctx.alloc(PRIMER).map_err(&e)?);
        }
        if let Some(p) = &self.instr.primer {
            // A memset on each lane, each into its own half.
            let half = PRIMER / 2;
            for (i, lane) in self.lanes.iter().enumerate() {
                lane.memset(p, i * half, half, 0).map_err(&e)?;
            }
            // CUPTI sets a kernel up at its first launch with the kinds on
            // (a memset does not do it for the kernels): one element
            // through each reduce kernel loaded so far, on lane 0 after
            // its memset and inside its half, zeros onto zeros (dst = a
            // at 0, b at 16; an element is at most 8 bytes).
            for ((dtype, _), Kernels { reduce, .. }) in &self.kernels {
                let elem = dtype.size();
                let launch = RLaunch {
                    dst: (p, 0),
                    a: (p, 0),
                    b: Operand::Local(p, half / 2),
                    bytes: elem,
                    elem,
                    flags: 0,
                    scalar: 0,
                };
                self.lanes[0].reduce(reduce, &launch).map_err(&e)?;
            }
        }
        self.sync()
    }

    pub(in crate::backend::cuda::rank) fn cupti_err(&self, message: String) -> Error {
        Error::Worker {
            rank: self.rank,
            message: format!("CUPTI timeline: {message}"),
        }
    }

    /// The CUPTI records of the CUPTI-timed calls among `timing` (flushed
    /// first), the map from CUPTI's clock to host ns since `epoch`, and
    /// that map's half-width; `None` without such calls.
    pub(super) fn cupti_records<'a>(
        &self,
        timing: impl Iterator<Item = &'a Timed<'id>>,
        epoch: Instant,
    ) -> Result<Option<Taken>>
    where
        'id: 'a,
    {
        let calls: Vec<(&activity::CuptiCall, &'static Cupti)> = timing
            .filter_map(|t| match t {
                Timed::Cupti(cc, c, _) => Some((cc, *c)),
                Timed::Events(..) => None,
            })
            .collect();
        let Some(&(_, c)) = calls.first() else {
            return Ok(None);
        };
        let (recs, dropped) = match c.tie {
            CuptiTie::Callback => {
                let ties: Vec<(u32, u64)> = calls
                    .iter()
                    .flat_map(|(cc, _)| cc.ties.iter().copied())
                    .collect();
                c.take(&ties).map_err(|m| self.cupti_err(m))?
            }
            CuptiTie::Order => {
                let lanes = self.instr.cupti_lanes.unwrap_or([u32::MAX; 2]);
                c.take_streams(&|s| lanes.contains(&s))
                    .map_err(|m| self.cupti_err(m))?
            }
        };
        if dropped > 0 {
            return Err(self.cupti_err(format!(
                "CUPTI dropped {dropped} activity records (its buffers were full)"
            )));
        }
        let mut recs = recs;
        if c.tie == CuptiTie::Order {
            let issued: Vec<_> = calls
                .iter()
                .flat_map(|(cc, _)| cc.issued.iter().cloned())
                .collect();
            let ties = tie_by_order(self.rank, &issued, &recs).map_err(|m| {
                self.cupti_err(format!(
                    "{m} (RINGREDUCE_CUPTI_TIE=callback ties through a callback instead)"
                ))
            })?;
            recs.extend(ties);
        }
        let (t0, at, half) = c.clock().map_err(|m| self.cupti_err(m))?;
        let host0 = at.duration_since(epoch).as_secs_f64() * 1e9;
        let to_host = move |t: u64| host0 + (t as f64 - t0 as f64);
        Ok(Some(Taken {
            recs,
            kinds: c.kinds,
            to_host: Box::new(to_host),
            half,
        }))
    }

    /// The op times of one CUPTI-timed call from the records taken.
    pub(super) fn cupti_spans(
        &self,
        mut cc: activity::CuptiCall,
        issued: Instant,
        c: &Taken,
        epoch: Instant,
    ) -> Result<Vec<OpTime>> {
        cc.issued_ns = issued.duration_since(epoch).as_secs_f64() * 1e9;
        activity::spans(self.rank, &cc, &c.recs, &c.to_host).map_err(|m| {
            self.cupti_err(format!(
                "{m}; {} (RINGREDUCE_CUPTI=0 times with CUDA events instead)",
                crate::cuda::cupti::delivered()
            ))
        })
    }

    /// CUPTI's collection for this rank ends (teardown): its hold, and its
    /// timed calls never taken, so that the process's other engines do not
    /// keep paying for it. Errors are dropped: nothing is left to tell.
    pub(in crate::backend::cuda::rank) fn end_cupti(&mut self) {
        let cupti = |t: &Timed<'_>| matches!(t, Timed::Cupti(..));
        #[cfg_attr(not(feature = "nccl"), allow(unused_mut))]
        let mut untaken = self
            .instr
            .timing
            .drain(..)
            .filter(|(t, _)| cupti(t))
            .count();
        #[cfg(feature = "nccl")]
        {
            untaken += self.instr.nccl_timing.drain(..).filter(cupti).count();
        }
        let held = std::mem::take(&mut self.instr.held);
        if untaken == 0 && !held {
            return;
        }
        if let Ok(k) = super::super::hooks::cupti_here() {
            if untaken > 0 {
                let _ = k.end(untaken);
            }
            if held {
                let _ = k.release();
            }
        }
    }
}
