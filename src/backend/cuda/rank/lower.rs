//! The lowering of a rank's plan ops to driver work: pure, no driver
//! handle in or out. A call's plan, this rank, the call's buffer bindings
//! and the element size go in; per op, the waits its lane issues first, one
//! work item (a peer copy, a reduce launch, an exchange launch, or nothing),
//! the signal it records after, and the bytes it moves between ranks come
//! out. Buffers are named, not resolved: an [`Addr`] is a rank, a buffer id
//! and a byte offset; the executor (`issue.rs`) looks them up in the rank's
//! buffer table and submits the work. Unit-tested without a GPU over every
//! registered algorithm (tests below).

use crate::backend::{Binding, BufId};
use crate::error::{Error, Result};
use crate::plan::{KernelKind, Lane, Op, OpKind, Plan, ReduceStep, Region, SignalId};

/// Where an operand lives: a rank's buffer and a byte offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Addr {
    pub rank: usize,
    pub buf: BufId,
    pub offset: usize,
}

/// A wait a lane issues before an op's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wait {
    /// On the event of one of this rank's own signals (recorded on its
    /// other lane).
    Local(SignalId),
    /// On a signal of rank `owner`: on the host until the owner's thread
    /// has recorded it, then on the GPU for its event.
    Peer { signal: SignalId, owner: usize },
    /// On a signal of rank `owner` on another node: on the host only, until
    /// this node's board has it (raised by the network receiver, or by the
    /// rank of this node that landed the put carrying it). Whatever it
    /// stands for is complete on its GPU by then: a forwarded signal leaves
    /// only once its work is done, a put lands synchronously.
    Remote { signal: SignalId, owner: usize },
    /// On the signal of rank `from`'s copy into this rank (`from` on
    /// another node): on the host until the put arrived, then land its
    /// data in this rank's buffer (host to device, complete on return)
    /// before any later work of the lane.
    Land { signal: SignalId, from: usize },
    /// On a signal of rank `owner`, a process that takes turns with this
    /// one on its GPU (the driver time-slices their contexts): on the host
    /// only, until the board has it. Its owner publishes it only once the
    /// work it stands for is complete ([`Lowered::complete_first`]), so
    /// nothing of this rank waits on the GPU for another process's work:
    /// such a wait would hold this context's turn until the owner's
    /// context had one (about a millisecond).
    Host { signal: SignalId, owner: usize },
}

impl Wait {
    pub fn signal(self) -> SignalId {
        match self {
            Wait::Local(s)
            | Wait::Peer { signal: s, .. }
            | Wait::Remote { signal: s, .. }
            | Wait::Land { signal: s, .. }
            | Wait::Host { signal: s, .. } => s,
        }
    }
}

/// The driver work of one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DriverOp {
    /// Nothing (`Begin`, `End`).
    Mark,
    /// A copy-engine copy of `bytes` from `src` to `dst`: a push when
    /// `src` is this rank's (a local copy included), else a pull.
    Copy { src: Addr, dst: Addr, bytes: usize },
    /// A copy of `bytes` of this rank's `src` into `dst` of a rank on
    /// another node: once the lane reached it, the bytes are read to the
    /// host and sent as one message (a put, carrying the op's signal);
    /// the receiving rank lands them (see [`Wait::Land`]).
    Send {
        src: Addr,
        dst: Addr,
        bytes: usize,
        signal: Option<SignalId>,
    },
    /// The reduce kernel: `dst = a (op) b` over `bytes`; `dst` and `a` are
    /// this rank's, `b` may be another rank's (read through peer access).
    Reduce {
        dst: Addr,
        a: Addr,
        b: Addr,
        bytes: usize,
        flags: u64,
    },
    /// The two-rank exchange kernel with `peer` (its flags are the peer's).
    Exchange {
        peer: usize,
        dst: Addr,
        a: Addr,
        peer_slot: Addr,
        my_slot: Addr,
        bytes: usize,
        flags: u64,
    },
    /// The LL ring kernel: this rank's whole ring all-reduce of `count`
    /// elements from `a` into `dst`, its puts into the `right` rank's LL
    /// lines, on LL half `half` (0 or 1) of both; `steps` plan steps.
    /// `one_shot`: the one-shot of 2 ranks on the same kernel (one chunk,
    /// one step). `simple`: the Simple ring kernel instead, on the
    /// scratch slots of half `half` and the ranks' tile flags.
    RingLl {
        right: usize,
        dst: Addr,
        a: Addr,
        count: usize,
        ranks: usize,
        half: usize,
        steps: usize,
        flags: u64,
        one_shot: bool,
        simple: bool,
    },
}

impl DriverOp {
    /// How many op parts the work is in a timeline (an exchange is a push
    /// and a reduce; an LL ring kernel one part per step).
    pub fn parts(&self) -> usize {
        match self {
            DriverOp::Exchange { .. } => 2,
            DriverOp::RingLl { steps, .. } => *steps,
            _ => 1,
        }
    }
}

/// One op lowered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Lowered {
    pub lane: Lane,
    pub work: DriverOp,
    /// The signal to record after the work (only the needed ones).
    pub record: Option<SignalId>,
    /// Bytes moved between ranks, as (from, to, bytes) (traffic counting).
    pub moved: Option<(usize, usize, usize)>,
    /// Ranks on other nodes to send the recorded signal to once its work
    /// is complete: every rank of another node that waits on it, but not
    /// the one a put of this op carries it to.
    pub forward: Vec<usize>,
    /// Publish the recorded signal only once its work is complete: a rank
    /// taking turns with this one on its GPU waits on it ([`Wait::Host`]).
    pub complete_first: bool,
}

/// Where every rank runs, when the ranks span several nodes: the node of
/// each rank, and the ops (rank, index) that wait on each signal.
pub(super) struct Nodes<'p> {
    node_of: &'p [usize],
    waiting: nodes::Waiting,
}

/// The lowering of one call on one rank.
pub(super) struct Lowering<'p> {
    plan: &'p Plan,
    rank: usize,
    bind: &'p [Binding],
    elem: usize,
    nodes: Option<Nodes<'p>>,
    /// The ranks that take turns with this rank on its GPU (processes
    /// sharing it), by rank, and the signals of this rank one of them
    /// waits on, by signal; empty when none does.
    turns: &'p [bool],
    turns_wait: Vec<bool>,
}

impl<'p> Lowering<'p> {
    /// Rank `rank`'s lowering of `plan` with the buffers of `bind` (one per
    /// rank) and elements of `elem` bytes.
    pub fn new(plan: &'p Plan, rank: usize, bind: &'p [Binding], elem: usize) -> Result<Self> {
        if bind.get(rank).is_none() {
            return Err(Error::internal(format!("no binding for rank {rank}")));
        }
        Ok(Lowering {
            plan,
            rank,
            bind,
            elem,
            nodes: None,
            turns: &[],
            turns_wait: Vec::new(),
        })
    }

    /// The lowering when other processes share this rank's GPU
    /// (`turns[x]`: rank x is one of them). Their contexts take turns on
    /// it, so a wait on one's GPU work costs a turn of the scheduler:
    /// every wait on their signals is made on the host ([`Wait::Host`]),
    /// and this rank publishes a signal one of them waits on only once its
    /// work is complete. A kernel that spins on flags such a rank's kernel
    /// raises is refused (`Algorithm::supports_at` refuses those paths
    /// there first).
    pub fn taking_turns(mut self, turns: &'p [bool]) -> Self {
        if !turns.iter().any(|&t| t) {
            return self;
        }
        let (plan, me) = (self.plan, self.rank);
        let mut wait = vec![false; plan.signals.len()];
        for (x, ops) in plan.ops.iter().enumerate() {
            if !turns.get(x).copied().unwrap_or(false) {
                continue;
            }
            for w in ops.iter().flat_map(|op| &op.waits) {
                if plan.signals.get(w.0).is_some_and(|s| s.owner == me) {
                    wait[w.0] = true;
                }
            }
        }
        self.turns = turns;
        self.turns_wait = wait;
        self
    }

    /// Whether rank `x` takes turns with this rank on its GPU.
    fn turns(&self, x: usize) -> bool {
        self.turns.get(x).copied().unwrap_or(false)
    }

    /// The lowering when the ranks span several nodes (`node_of[r]`: rank
    /// r's node). A rank reaches another node's rank only by pushing its
    /// own data (a put, [`DriverOp::Send`]) and by signals; the put's
    /// destination lands the puts it received at its waits on other nodes'
    /// signals; what a plan must satisfy for that is in `lower/nodes.rs`
    /// (checked here). A plan that needs anything else is refused, naming
    /// the op.
    pub fn over_nodes(mut self, node_of: &'p [usize]) -> Result<Self> {
        let plan = self.plan;
        if node_of.len() < plan.ranks() {
            return Err(Error::internal(format!(
                "the nodes of {} ranks for a plan of {}",
                node_of.len(),
                plan.ranks()
            )));
        }
        let waiting = nodes::check(plan, node_of, self.rank)?;
        self.nodes = Some(Nodes { node_of, waiting });
        Ok(self)
    }

    /// Whether rank `x` is on this rank's node (always, on one node).
    fn near(&self, x: usize) -> bool {
        self.nodes
            .as_ref()
            .is_none_or(|n| n.node_of.get(x) == n.node_of.get(self.rank))
    }

    /// The op that records signal `s`, if it is a copy: (from, to).
    fn copy_of(&self, s: SignalId) -> Option<(usize, usize)> {
        let owner = self.plan.signals.get(s.0)?.owner;
        self.plan
            .ops
            .get(owner)?
            .iter()
            .find_map(|op| match op.kind {
                OpKind::Copy { from, to, .. } if op.signal == Some(s) => Some((from, to)),
                _ => None,
            })
    }

    /// The ranks to send signal `s` to once recorded: every waiter on
    /// another node (each must receive it itself: see `net.rs`), but not
    /// the rank a put of this op carries it to.
    fn forward(&self, s: SignalId, carried: Option<usize>) -> Vec<usize> {
        let Some(n) = &self.nodes else {
            return Vec::new();
        };
        let mine = n.node_of[self.rank];
        let mut to = Vec::new();
        for &(w, _) in n.waiting.get(&s.0).into_iter().flatten() {
            if n.node_of[w] != mine && Some(w) != carried && !to.contains(&w) {
                to.push(w);
            }
        }
        to
    }

    /// Refuse op `i` touching rank `x`'s memory on another node.
    fn reach(&self, i: usize, x: usize, what: &str) -> Result<()> {
        if self.near(x) {
            return Ok(());
        }
        Err(Error::Unsupported(
            format!(
                "{} over nodes: {} {what} rank {x}'s memory on another node (over the network a rank only pushes its own data)",
                self.plan.name,
                crate::backend::op_desc(self.plan, self.rank, i)
            ),
            "cuda",
        ))
    }

    /// The waits of `op` its lane issues, in the plan's order: every one
    /// but those on a signal of the same rank and lane (in-lane order
    /// already implies them).
    pub fn waits<'a>(&'a self, op: &'p Op) -> impl Iterator<Item = Wait> + Clone + 'a {
        let (plan, r, lane) = (self.plan, self.rank, op.lane);
        op.waits
            .iter()
            .filter(move |w| !plan.same_lane(**w, r, lane))
            .map(move |&w| match plan.signals.get(w.0).map(|s| s.owner) {
                Some(owner) if owner != r && !self.near(owner) => match self.copy_of(w) {
                    Some((from, to)) if to == r => Wait::Land { signal: w, from },
                    _ => Wait::Remote { signal: w, owner },
                },
                Some(owner) if owner != r && self.turns(owner) => Wait::Host { signal: w, owner },
                Some(owner) if owner != r => Wait::Peer { signal: w, owner },
                _ => Wait::Local(w),
            })
    }

    /// Op `i` of this rank lowered.
    pub fn op(&self, i: usize) -> Result<Lowered> {
        let r = self.rank;
        let op = self
            .plan
            .ops
            .get(r)
            .and_then(|ops| ops.get(i))
            .ok_or_else(|| Error::internal(format!("rank {r} has no op {i}")))?;
        let elem = self.elem;
        if let OpKind::Kernel(k) = &op.kind {
            self.no_turns(i, k)?;
        }
        let (work, moved) = match &op.kind {
            OpKind::Begin | OpKind::End => (DriverOp::Mark, None),
            OpKind::Copy { from, to, src, dst } => {
                let bytes = src.len() * elem;
                let (src, dst) = (self.addr(*from, src)?, self.addr(*to, dst)?);
                let work = if *from == r && !self.near(*to) {
                    DriverOp::Send {
                        src,
                        dst,
                        bytes,
                        signal: op.signal,
                    }
                } else {
                    self.reach(i, *from, "copies")?;
                    self.reach(i, *to, "copies into")?;
                    DriverOp::Copy { src, dst, bytes }
                };
                (work, Some((*from, *to, bytes)))
            }
            OpKind::Reduce {
                dst,
                a,
                b_rank,
                b,
                step,
            } => {
                self.reach(i, *b_rank, "reduces")?;
                let work = DriverOp::Reduce {
                    dst: self.addr(r, dst)?,
                    a: self.addr(r, a)?,
                    b: self.addr(*b_rank, b)?,
                    bytes: dst.len() * elem,
                    flags: step_flags(step),
                };
                (work, Some((*b_rank, r, b.len() * elem)))
            }
            OpKind::Kernel(k) => match (k.kind, &k.steps[..]) {
                // The exchange kernel: the validator's contract, read back
                // (a put of the input to the peer, then the reduce).
                (
                    KernelKind::Exchange,
                    [Op {
                        kind:
                            OpKind::Copy {
                                to: peer,
                                src: input,
                                dst: peer_slot,
                                ..
                            },
                        ..
                    }, Op {
                        kind:
                            OpKind::Reduce {
                                dst,
                                b: my_slot,
                                step,
                                ..
                            },
                        ..
                    }],
                ) => {
                    self.reach(i, *peer, "exchanges with")?;
                    let work = DriverOp::Exchange {
                        peer: *peer,
                        dst: self.addr(r, dst)?,
                        a: self.addr(r, input)?,
                        peer_slot: self.addr(*peer, peer_slot)?,
                        my_slot: self.addr(r, my_slot)?,
                        bytes: dst.len() * elem,
                        flags: step_flags(step),
                    };
                    (work, Some((r, *peer, input.len() * elem)))
                }
                (KernelKind::Exchange, _) => {
                    return Err(Error::internal(format!(
                    "{}: rank {r} op {i} is not an exchange the kernel runs (a put, then a reduce)",
                    self.plan.name
                )))
                }
                (KernelKind::Rail, _) => {
                    return Err(Error::Unsupported(
                        format!(
                            "{}: rank {r} op {i}, a rail's all-reduce (run as its steps on host memory, or as MPI's all-reduce between nodes: the CPU backend)",
                            self.plan.name
                        ),
                        "cuda",
                    ))
                }
                (
                    kind @ (KernelKind::LlRing | KernelKind::LlOneShot | KernelKind::SimpleRing),
                    steps,
                ) => {
                    let work = self.ring_ll(i, kind, steps)?;
                    let right = crate::schedule::right(r, self.plan.shape.ranks);
                    // Its puts: 2(N-1) chunks, about 2(N-1)/N of the buffer
                    // (the plan's bytes; the LL lines on the wire are twice that).
                    let sent = steps
                        .iter()
                        .map(|s| match &s.kind {
                            OpKind::Copy { to, src, .. } if *to != r => src.len() * elem,
                            _ => 0,
                        })
                        .sum::<usize>();
                    (work, Some((r, right, sent)))
                }
            },
        };
        let record = op
            .signal
            .filter(|s| self.plan.signals.get(s.0).is_some_and(|x| x.needed));
        let carried = match work {
            DriverOp::Send { dst, .. } => Some(dst.rank),
            _ => None,
        };
        Ok(Lowered {
            lane: op.lane,
            work,
            record,
            moved: moved.filter(|(from, to, _)| from != to),
            forward: record.map_or_else(Vec::new, |s| self.forward(s, carried)),
            complete_first: record.is_some_and(|s| self.turns_wait.get(s.0) == Some(&true)),
        })
    }

    /// Refuse kernel op `i` (`k`) when a rank whose flags it spins on
    /// takes turns with this one on its GPU: it would wait for that
    /// context's turn at every flag. Each kind waits on the ranks its puts
    /// go to (the exchange's peer, the LL ring's right neighbour, the same
    /// rank as the left on two ranks) and on the left neighbour, whose
    /// puts it receives.
    fn no_turns(&self, i: usize, k: &crate::plan::Kernel) -> Result<()> {
        if self.turns.is_empty() {
            return Ok(());
        }
        let (r, n) = (self.rank, self.plan.shape.ranks);
        let mut peers = k.steps.iter().filter_map(|s| match s.kind {
            OpKind::Copy { to, .. } if to != r => Some(to),
            _ => None,
        });
        let left = (k.kind != KernelKind::Exchange).then(|| crate::schedule::left(r, n));
        let Some(x) = peers
            .find(|&x| self.turns(x))
            .or(left.filter(|&x| self.turns(x)))
        else {
            return Ok(());
        };
        Err(Error::Unsupported(
            format!(
                "{}: {} spins on flags that other ranks' kernels raise, and rank {x} is another process on this GPU (their kernels take turns on it)",
                self.plan.name,
                crate::backend::op_desc(self.plan, self.rank, i)
            ),
            "cuda",
        ))
    }

    /// Op `i`, an LL or Simple ring kernel of `kind` with `steps`, as the
    /// kernel runs it: the kernel computes its steps itself (the ring of
    /// [`crate::algo::ringll::steps`] or [`crate::algo::ringsimple::steps`],
    /// or the one-shot of [`crate::algo::oneshotll::steps`], on one half of
    /// its slots), so the plan's steps must be exactly those; anything else
    /// is refused rather than run differently.
    fn ring_ll(&self, i: usize, kind: KernelKind, steps: &[Op]) -> Result<DriverOp> {
        use crate::schedule::{ll_cut, ll_slot_len, right, simple_slot_len};
        let (r, shape) = (self.rank, &self.plan.shape);
        let n = shape.ranks;
        let differs = |what: String| {
            Error::internal(format!(
                "{}: rank {r} op {i} ({}) is not the ring the LL kernel runs: {what}",
                self.plan.name,
                crate::backend::op_desc(self.plan, r, i)
            ))
        };
        let one_shot = kind == KernelKind::LlOneShot;
        let simple = kind == KernelKind::SimpleRing;
        if n < 2
            || (one_shot && n != 2)
            || shape.count == 0
            || shape.collective != crate::plan::Collective::AllReduce
        {
            return Err(differs(format!(
                "an all-reduce of {} ranks and 1 or more elements",
                if one_shot { "2" } else { "2 or more" }
            )));
        }
        // The slot of step 0's receive fixes the half.
        let (chunks, slots) = ll_cut(n, one_shot);
        let per_half = slots
            * if simple {
                simple_slot_len(shape.count, chunks, shape.elem_size)
            } else {
                ll_slot_len(shape.count, chunks, shape.elem_size)
            };
        let half = match steps.get(1).map(|s| &s.kind) {
            Some(OpKind::Reduce { b, .. }) if per_half > 0 => b.range.start / per_half,
            _ => 0,
        };
        let want = if one_shot {
            crate::algo::oneshotll::steps(shape, r, half)
        } else if simple {
            crate::algo::ringsimple::steps(shape, r, half)
        } else {
            crate::algo::ringll::steps(shape, r, half)
        };
        if steps.len() != want.len() {
            return Err(differs(format!(
                "{} steps, not {}",
                steps.len(),
                want.len()
            )));
        }
        if let Some(j) = (0..steps.len()).find(|&j| steps[j].kind != want[j].1) {
            return Err(differs(format!("step {}", j / 2)));
        }
        let rt = right(r, n);
        let (input, output) = (shape.input(r), shape.output(r));
        self.reach(i, rt, "puts into")?;
        Ok(DriverOp::RingLl {
            right: rt,
            dst: self.addr(r, &output)?,
            a: self.addr(r, &input)?,
            count: shape.count,
            ranks: n,
            half,
            steps: steps.len(),
            flags: 0b111,
            one_shot,
            simple,
        })
    }

    /// Region `reg` of rank `rank`'s buffers, as an address.
    fn addr(&self, rank: usize, reg: &Region) -> Result<Addr> {
        let bind = self
            .bind
            .get(rank)
            .ok_or_else(|| Error::internal(format!("no binding for rank {rank}")))?;
        Ok(Addr {
            rank,
            buf: bind.id(reg.buf),
            offset: reg.range.start * self.elem,
        })
    }
}

/// The reduce kernels' flag bits of a step.
pub(super) fn step_flags(s: &ReduceStep) -> u64 {
    u64::from(s.pre_a) | (u64::from(s.pre_b) << 1) | (u64::from(s.post) << 2)
}

mod nodes;
#[cfg(test)]
mod tests;
