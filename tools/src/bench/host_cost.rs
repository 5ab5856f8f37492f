//! The host-side cost of one small call ([`host_cost`]): where the time
//! goes between the caller and the rank threads, per phase.

use super::median;
use crate::verify::{self, Inputs};
use ringreduce::element::{Element, ReduceOp};
use ringreduce::engine::Engine;
use ringreduce::error::Result;
use ringreduce::plan::Collective;
use std::time::Instant;

/// Host-side cost of one small call, in microseconds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HostCost {
    pub size: u64,
    pub path: String,
    /// Caller -> every rank thread -> caller, doing nothing.
    pub handoff_us: f64,
    /// Issuing one collective on every rank, without waiting for the GPU.
    pub issue_us: f64,
    /// One full call: issue plus completion on every rank's streams.
    pub call_us: f64,
    /// Where a rank thread's issue time goes, per call, mean over ranks.
    pub breakdown: Option<IssueBreakdown>,
    /// One read of the host clock (`Instant::now`), nanoseconds: the
    /// profiles read it several times per call and rank.
    pub clock_ns: f64,
    /// NCCL's call through the same rank threads, when NCCL is initialised.
    pub nccl: Option<NcclHostCost>,
}

/// NCCL's plain call issued through the engine's rank threads (as `bench`
/// times it): medians of single calls, microseconds, and the hand-off's
/// phases per launch.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct NcclHostCost {
    /// Launch on every rank, without waiting for the GPU.
    pub issue_us: f64,
    /// Launch and wait.
    pub call_us: f64,
    /// A rank thread's work (the NCCL call in a group), mean over ranks.
    pub handler_us: f64,
    /// Posting to every answer in hand.
    pub round_us: f64,
}

/// Nanoseconds per `Instant::now`, the mean of 10 000.
fn clock_read_ns() -> f64 {
    let n = 10_000u32;
    let t = Instant::now();
    let mut last = t;
    for _ in 0..n {
        last = std::hint::black_box(Instant::now());
    }
    (last - t).as_secs_f64() * 1e9 / f64::from(n)
}

/// Means per call and rank, microseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct IssueBreakdown {
    pub copy_us: f64,
    pub kernel_us: f64,
    pub record_us: f64,
    pub wait_us: f64,
    pub peer_us: f64,
    pub total_us: f64,
    /// The calling thread per call, inside the backend's launch.
    pub backend_us: f64,
    /// The hand-off's phases per launch (`PoolPhases`):
    /// posting, a rank thread noticing the post (mean over ranks), its work
    /// (its whole job; mean over ranks), the last answer after posting
    /// began, every answer in hand after posting began.
    pub post_us: f64,
    pub pickup_us: f64,
    pub handler_us: f64,
    pub last_done_us: f64,
    pub round_us: f64,
}

/// Microseconds per launch (and per rank, for `per` ranks) of one of the
/// hand-off's phase sums, which every rank's profile carries alike.
fn phase(
    prof: &[ringreduce::backend::IssueProfile],
    f: fn(&ringreduce::backend::PoolPhases) -> u64,
    per: usize,
) -> f64 {
    phase_of(prof, |p| p.pool, f, per)
}

/// [`phase`] of the phases `which` picks (the collectives' or NCCL's).
fn phase_of(
    prof: &[ringreduce::backend::IssueProfile],
    which: fn(&ringreduce::backend::IssueProfile) -> ringreduce::backend::PoolPhases,
    f: fn(&ringreduce::backend::PoolPhases) -> u64,
    per: usize,
) -> f64 {
    prof.first().map_or(0.0, |p| {
        let ph = which(p);
        f(&ph) as f64 / ph.calls.max(1) as f64 / per.max(1) as f64 / 1e3
    })
}

/// One launch alone and one launch waited for, each after a full
/// synchronize: (issue, whole call) in microseconds.
fn issue_and_call(
    e: &mut Engine,
    mut launch: impl FnMut(&mut Engine) -> Result<()>,
) -> Result<(f64, f64)> {
    e.synchronize()?;
    let t = Instant::now();
    launch(e)?;
    let issue = t.elapsed().as_secs_f64() * 1e6;
    e.synchronize()?;
    let t = Instant::now();
    launch(e)?;
    e.synchronize()?;
    Ok((issue, t.elapsed().as_secs_f64() * 1e6))
}

/// Measure [`HostCost`] for the default path at `count` elements.
pub fn host_cost<T: Element>(e: &mut Engine, count: usize, iters: usize) -> Result<HostCost> {
    let iters = iters.max(1);
    let inputs = verify::make_inputs::<T>(Inputs::Random, ReduceOp::Sum, e.ranks(), count, 1)?;
    let shape = e.load(Collective::AllReduce, &inputs, false)?;
    let path = e.path_name(None, &shape)?;
    let profiling = e.take_issue_profile().is_ok();
    let (mut ping, mut issue, mut call) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..iters {
        let t = Instant::now();
        e.ping()?;
        ping.push(t.elapsed().as_secs_f64() * 1e6);
        let (i, c) = issue_and_call(e, |e| e.launch(None, &shape, ReduceOp::Sum).map(|_| ()))?;
        issue.push(i);
        call.push(c);
    }
    let breakdown = if profiling {
        let prof = e.take_issue_profile()?;
        let calls: u64 = prof.iter().map(|p| p.calls).sum::<u64>().max(1);
        let us = |f: fn(&ringreduce::backend::IssueProfile) -> u64| {
            prof.iter().map(f).sum::<u64>() as f64 / calls as f64 / 1e3
        };
        Some(IssueBreakdown {
            copy_us: us(|p| p.copy_ns),
            kernel_us: us(|p| p.kernel_ns),
            record_us: us(|p| p.record_ns),
            wait_us: us(|p| p.wait_ns),
            peer_us: us(|p| p.peer_ns),
            total_us: us(|p| p.total_ns),
            // The same on every rank: per launch, not per rank.
            backend_us: prof
                .first()
                .map_or(0.0, |p| p.backend_ns as f64 / p.calls.max(1) as f64 / 1e3),
            post_us: phase(&prof, |p| p.post_ns, 1),
            pickup_us: phase(&prof, |p| p.pickup_ns, prof.len()),
            handler_us: phase(&prof, |p| p.handler_ns, prof.len()),
            last_done_us: phase(&prof, |p| p.last_done_ns, 1),
            round_us: phase(&prof, |p| p.round_ns, 1),
        })
    } else {
        None
    };
    // NCCL the same way, when it is there.
    let mut nccl = None;
    if e.nccl_ready() {
        let nc = e.nccl_call(&shape, ReduceOp::Sum);
        let (mut ni, mut nt) = (Vec::new(), Vec::new());
        let _ = e.take_issue_profile();
        for _ in 0..iters {
            let (i, c) = issue_and_call(e, |e| e.launch_nccl(&nc))?;
            ni.push(i);
            nt.push(c);
        }
        if let Ok(prof) = e.take_issue_profile() {
            let ranks = prof.len();
            nccl = Some(NcclHostCost {
                issue_us: median(ni),
                call_us: median(nt),
                handler_us: phase_of(&prof, |p| p.nccl_pool, |p| p.handler_ns, ranks),
                round_us: phase_of(&prof, |p| p.nccl_pool, |p| p.round_ns, 1),
            });
        }
    }
    Ok(HostCost {
        size: shape.bytes(),
        path,
        handoff_us: median(ping),
        issue_us: median(issue),
        call_us: median(call),
        breakdown,
        clock_ns: clock_read_ns(),
        nccl,
    })
}
