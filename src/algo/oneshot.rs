//! One-shot all-reduce with the copy engine: every rank pushes its whole
//! input into every other rank's scratch, then reduces all slots into its
//! own output.
//!
//! Each rank sends (N-1)·D, which for N = 2 equals the ring's 2(N-1)/N·D, in
//! one copy and one kernel per peer instead of a copy and a kernel per ring
//! step. Everything runs on the compute lane: a rank's own push and its
//! reduce are ordered by the stream itself.
//!
//! # Chained calls
//! A fenced push waits for the receiver's Begin: the receiver's previous
//! reads of its scratch are then done. Back-to-back calls of the same size
//! can drop that cross-GPU wait by alternating scratch halves: the push of
//! call k+1 into half h is issued on the sender's stream after the sender's
//! reduce of call k, which waited for the receiver's push of call k, which
//! the receiver issued after its own reduce of call k-1, the last reader of
//! half h. `ChainPath` keeps that parity (shared with [`super::flag`]); the
//! engine tells it whether a call continues a chain, and the tests check
//! sequences of calls for races with [`Plan::validate_sequence`].

use super::{checked, probe, Algorithm, Path};
use crate::error::{Error, Result};
use crate::plan::{
    local_only, Buf, Collective, Label, Lane, Plan, PlanBuilder, ReduceStep, Region, Shape,
    SignalId,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Why a chained path cannot run a shape it would take as an all-reduce.
pub(crate) type Takes = fn(&Shape) -> std::result::Result<(), String>;

/// A path whose consecutive calls chain ([`ChainPath`]): the copy-engine
/// one-shot and the kernel paths. Each is an all-reduce; each file states
/// its own as a constant of this type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chained {
    pub name: &'static str,
    /// What it takes beyond an all-reduce, if anything.
    pub takes: Option<Takes>,
    /// Its kernels spin on flags that other ranks' kernels raise (refused
    /// where rank processes share a GPU: [`super::spins_across_ranks`]).
    pub spins: bool,
    pub build: ChainBuild,
    pub load: super::Load,
    pub cost: super::cost::Cost,
}

impl Algorithm for Chained {
    fn name(&self) -> String {
        self.name.into()
    }

    fn supports(&self, shape: &Shape) -> std::result::Result<(), String> {
        all_reduce_only(self.name, shape)?;
        self.takes.map_or(Ok(()), |takes| takes(shape))
    }

    fn supports_at(&self, at: &super::Placement) -> std::result::Result<(), String> {
        if self.spins {
            return super::spins_across_ranks(at);
        }
        Ok(())
    }

    fn path(&self, shape: &Shape) -> Box<dyn Path> {
        Box::new(ChainPath::new(*shape, self.build))
    }

    fn load(&self) -> Option<super::Load> {
        Some(self.load)
    }

    fn cost(&self) -> Option<super::cost::Cost> {
        Some(self.cost)
    }
}

impl Chained {
    /// `Some` when `s` is this path's name (each file's `parse`).
    pub fn parse(self, s: &str) -> Option<std::result::Result<Arc<dyn Algorithm>, String>> {
        (s == self.name).then(|| Ok(Arc::new(self) as Arc<dyn Algorithm>))
    }
}

/// The chained copy-engine one-shot.
pub(crate) const ONESHOT: Chained = Chained {
    name: "oneshot",
    takes: None,
    spins: false,
    build: plan,
    load: super::Load::Everyone,
    cost: super::cost::Cost::OneShot,
};

pub fn parse(s: &str) -> Option<std::result::Result<Arc<dyn Algorithm>, String>> {
    ONESHOT.parse(s)
}

/// Error unless `shape` is an all-reduce.
pub(crate) fn all_reduce_only(name: &str, shape: &Shape) -> std::result::Result<(), String> {
    match shape.collective {
        Collective::AllReduce => {}
        Collective::Broadcast { .. } => {
            return Err(format!(
                "{name} implements all-reduce only; a broadcast runs bcast (auto picks it)"
            ))
        }
        c => {
            return Err(format!(
                "{name} implements all-reduce only; the ring implements {c}"
            ))
        }
    }
    Ok(())
}

/// A plan builder of a chained path: (shape, scratch half, fenced).
pub(crate) type ChainBuild = fn(&Shape, usize, bool) -> Plan;

/// The state of a chained path: which scratch half the last call used.
pub(crate) struct ChainPath {
    shape: Shape,
    build: ChainBuild,
    parity: usize,
    plans: HashMap<(usize, bool), Arc<Plan>>,
}

impl ChainPath {
    pub fn new(shape: Shape, build: ChainBuild) -> ChainPath {
        ChainPath {
            shape,
            build,
            parity: 0,
            plans: HashMap::new(),
        }
    }

    fn get(&mut self, parity: usize, fenced: bool) -> Result<Arc<Plan>> {
        let (shape, build) = (self.shape, self.build);
        let p = self
            .plans
            .entry((parity, fenced))
            .or_insert_with(|| Arc::new(build(&shape, parity, fenced)))
            .clone();
        checked(&p)?;
        Ok(p)
    }
}

impl Path for ChainPath {
    /// A call that continues a chain uses the other half, unfenced; any
    /// other call starts a chain on half 0, fenced.
    fn next(&mut self, continues: bool) -> Result<Arc<Plan>> {
        let (parity, fenced) = if continues {
            (1 - self.parity, false)
        } else {
            (0, true)
        };
        let p = self.get(parity, fenced)?;
        self.parity = parity;
        Ok(p)
    }

    /// Halves 1, 0, 1, 0, ... unfenced: a graph ends on half 0, so replays
    /// chain into each other.
    fn graph_plans(&mut self, calls: usize) -> Result<Vec<Arc<Plan>>> {
        if calls == 0 || calls % 2 != 0 {
            return Err(Error::BadArgument(format!(
                "a graph of a chained path holds an even number of calls (got {calls})"
            )));
        }
        (0..calls).map(|i| self.get(1 - i % 2, false)).collect()
    }

    /// A replay that does not follow a call on half 0 of this path first
    /// issues a fence (every rank waits for every other rank's previous
    /// work), so the graph's first, unfenced push cannot meet a pending read.
    fn before_replay(&mut self, continues: bool) -> Result<Option<Arc<Plan>>> {
        let fence = if continues && self.parity == 0 {
            None
        } else {
            let p = Arc::new(probe::fence(self.shape.ranks));
            checked(&p)?;
            Some(p)
        };
        self.parity = 0;
        Ok(fence)
    }
}

/// The chained one-shot plan: scratch half `parity`; `fenced` makes every
/// push wait for the receiver's Begin.
pub fn plan(shape: &Shape, parity: usize, fenced: bool) -> Plan {
    let mut b = PlanBuilder::new("oneshot", *shape);
    if !fenced {
        b.unfenced();
    }
    let begin = b.begin_all();
    let n = shape.ranks;
    let count = shape.count;
    if n == 1 || count == 0 {
        return local_only(b, &begin);
    }
    let parity = parity % 2;
    b.scratch(2 * (n - 1) * count);
    // Rank `src`'s data lands in slot (src - dst - 1) mod n of rank `dst`,
    // in scratch half `parity`.
    let slot = |src: usize, dst: usize| {
        let at = (parity * (n - 1) + (src + n - dst - 1) % n) * count;
        Region::new(Buf::Scratch, at..at + count)
    };
    let note = |note| Label {
        note,
        ..Label::default()
    };
    let mut arrived: Vec<Vec<Option<SignalId>>> = vec![vec![None; n]; n];
    let mut last_out: Vec<Option<SignalId>> = vec![None; n];
    for r in 0..n {
        for d in 1..n {
            let to = (r + d) % n;
            let mut waits = vec![];
            if fenced {
                waits.push(begin[to]);
                if d == 1 {
                    waits.push(begin[r]);
                }
            }
            let sig = b.copy(
                r,
                Lane::Compute,
                (r, shape.input(r)),
                (to, slot(r, to)),
                waits,
                note("push"),
            );
            arrived[r][to] = Some(sig);
            last_out[r] = Some(sig);
        }
    }
    for r in 0..n {
        let out = shape.output(r);
        for d in 1..n {
            let from = (r + n - d) % n;
            let a = if d == 1 { shape.input(r) } else { out.clone() };
            let step = ReduceStep {
                pre_a: d == 1,
                pre_b: true,
                post: d == n - 1,
            };
            b.reduce(
                r,
                out.clone(),
                a,
                (r, slot(from, r)),
                step,
                arrived[from][r].into_iter().collect(),
                false,
                note("reduce"),
            );
        }
        b.end(r, last_out[r].into_iter().collect());
    }
    b.finish()
}
