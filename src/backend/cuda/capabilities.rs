//! The CUDA backend's optional capabilities, over either peer exchange:
//! CUDA graphs (per GPU and, where the exchange allows it, joint across
//! every GPU) and profiling (NCCL is `nccl.rs`). What differs between the
//! exchanges is asked of the backend's [`super::exchange::PeerExchange`]
//! (whether joint graphs work, what the timelines' clocks are). Nothing here is `unsafe`.

use super::rank::activity::{self, RankTiming, TimingSource};
use super::*;

impl GraphBackend for CudaBackend {
    /// Device-ordered plans (every cross-rank order inside kernels): one
    /// graph per GPU, replayed by each rank thread. Any other plan, where
    /// the exchange allows it ([`super::exchange::PeerExchange::joint_graphs`]): one joint
    /// graph across every GPU (see `Rank::capture_joint`), whose cross-rank
    /// events become graph edges, replayed by rank 0.
    fn capture(&mut self, calls: &[Call]) -> Result<()> {
        for c in calls {
            check_call(c, self.front.info.ranks)?;
            if !c.plan.device_ordered() {
                self.link.joint_graphs(&c.plan.name)?;
            }
        }
        self.front.drop_graphs()?;
        let calls = Arc::new(calls.to_vec());
        let signals = super::front::most_signals(&calls);
        let (abort, timeout) = (self.front.abort.clone(), self.front.timeout);
        if calls.iter().all(|c| c.plan.device_ordered()) {
            self.front.joint = false;
            return self
                .front
                .each_all(|_| {
                    let calls = calls.clone();
                    let abort = abort.clone();
                    Box::new(move |rk: &mut Rank<'_>| {
                        // No other rank waits on anything issued here (the
                        // plans are device-ordered), so a private board is
                        // enough.
                        let board = SignalBoard::new(signals, abort, timeout);
                        rk.capture(&calls, &board)
                    })
                })
                .map(|_| ());
        }
        self.ensure_events(signals)?;
        let gens: Vec<u64> = calls
            .iter()
            .map(|_| {
                self.front.gen += 1;
                self.front.gen
            })
            .collect();
        let gens = Arc::new(gens);
        self.front.joint_gen += 1;
        let (board, jb, jgen) = (
            self.front.board.clone(),
            self.front.joint_board.clone(),
            self.front.joint_gen,
        );
        let r = self.front.each_all(|_| {
            let (calls, gens, board, jb) = (calls.clone(), gens.clone(), board.clone(), jb.clone());
            Box::new(move |rk: &mut Rank<'_>| {
                let rank = rk.rank;
                let r = rk.capture_joint(&calls, &board, &gens, &jb, jgen);
                if let Err(e) = &r {
                    for &g in gens.iter() {
                        board.fail_with(g, rank, e);
                    }
                }
                r
            })
        });
        self.front.joint = r.is_ok();
        r.map(|_| ())
    }

    fn replay(&mut self) -> Result<()> {
        if !self.front.joint {
            return self
                .front
                .each_all(|_| Box::new(|rk: &mut Rank<'_>| rk.replay()))
                .map(|_| ());
        }
        self.front.joint_gen += 1;
        let (jb, jgen) = (self.front.joint_board.clone(), self.front.joint_gen);
        self.front
            .each_all(|_| {
                let jb = jb.clone();
                Box::new(move |rk: &mut Rank<'_>| rk.replay_joint(&jb, jgen))
            })
            .map(|_| ())
    }
}

impl Profiling for CudaBackend {
    /// Every local rank's profile (the other ranks' are empty); with
    /// deferred posting (rank threads of one process) each also carries the
    /// caller's time in `launch` and the pool's phases.
    fn take_issue_profile(&mut self) -> Result<Vec<IssueProfile>> {
        let backend_ns = std::mem::take(&mut self.front.caller_ns);
        let pool = std::mem::take(&mut self.front.launch_phases);
        let nccl_pool = std::mem::take(&mut self.front.nccl_phases);
        let mine = self
            .front
            .each(|_| Box::new(|rk: &mut Rank<'_>| Ok(std::mem::take(&mut rk.profile))))?;
        let mut v = vec![IssueProfile::default(); self.front.info.ranks];
        for (r, mut p) in self.front.local.clone().zip(mine) {
            if self.front.deferred {
                p.backend_ns = backend_ns;
                p.pool = pool;
                p.nccl_pool = nccl_pool;
            }
            if let Some(slot) = v.get_mut(r) {
                *slot = p;
            }
        }
        Ok(v)
    }

    fn take_timeline(&mut self) -> Result<Vec<CallTimeline>> {
        self.drain()?;
        let epoch = self.front.log.epoch();
        let per_rank: Vec<RankTiming> = self
            .front
            .each(move |_| Box::new(move |rk: &mut Rank<'_>| rk.take_timing(epoch)))?;
        let calls = self.front.log.take();
        Ok(self.link.timelines(calls, per_rank, false))
    }

    /// Every local rank sets up (or ends) its timing's collection
    /// (`Rank::prepare_timing`; CUPTI's, the `profiling` feature: without
    /// it, events need nothing set up).
    #[cfg(feature = "profiling")]
    fn prepare_timing(&mut self, on: bool) -> Result<()> {
        self.front
            .each(move |_| Box::new(move |rk: &mut Rank<'_>| rk.prepare_timing(on)))
            .map(|_| ())
    }

    /// What the local ranks issued (their own copies and kernels), by rank.
    fn take_traffic(&mut self) -> Result<Vec<crate::plan::Traffic>> {
        let per_rank: Vec<Vec<crate::plan::Traffic>> = self
            .front
            .each(|_| Box::new(|rk: &mut Rank<'_>| Ok(rk.take_traffic())))?;
        let mut t = vec![crate::plan::Traffic::default(); self.front.info.ranks];
        for v in per_rank {
            for (r, x) in v.into_iter().enumerate() {
                if let Some(y) = t.get_mut(r) {
                    y.sent += x.sent;
                    y.received += x.received;
                    y.network += x.network;
                }
            }
        }
        Ok(t)
    }
}

/// One [`CallTimeline`] per timed call from every rank's timings (call k is
/// entry k of every rank's list), their sources and clock alignments.
pub(super) fn assemble(calls: Vec<(String, f64)>, per_rank: Vec<RankTiming>) -> Vec<CallTimeline> {
    // Each rank's alignment is within its half-width of the host clock, so
    // two ranks are within the sum of the two largest half-widths of each
    // other.
    let mut halves: Vec<f64> = per_rank.iter().map(|p| p.1).collect();
    halves.sort_by(|a, b| b.total_cmp(a));
    let skew = halves.iter().take(2).sum::<f64>();
    let widest = halves.first().copied().unwrap_or(0.0);
    calls
        .into_iter()
        .enumerate()
        .map(|(k, (plan, launch_ns))| {
            let sources: Vec<TimingSource> = per_rank
                .iter()
                .filter_map(|v| v.0.get(k).map(|c| c.1.clone()))
                .collect();
            CallTimeline {
                plan,
                clock: activity::clock_line(&sources, widest, skew),
                launch_ns,
                skew_ns: skew,
                ops: per_rank
                    .iter()
                    .filter_map(|v| v.0.get(k))
                    .flat_map(|c| c.0.iter().cloned())
                    .collect(),
            }
        })
        .collect()
}
