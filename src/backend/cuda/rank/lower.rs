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
use crate::plan::{Lane, Op, OpKind, Plan, ReduceStep, Region, SignalId};

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
}

impl Wait {
    pub fn signal(self) -> SignalId {
        match self {
            Wait::Local(s) | Wait::Peer { signal: s, .. } => s,
        }
    }
}

/// The driver work of one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Work {
    /// Nothing (`Begin`, `End`).
    Mark,
    /// A copy-engine copy of `bytes` from `src` to `dst`: a push when
    /// `src` is this rank's (a local copy included), else a pull.
    Copy { src: Addr, dst: Addr, bytes: usize },
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
}

impl Work {
    /// How many op parts the work is in a timeline (an exchange is a push
    /// and a reduce).
    pub fn parts(&self) -> usize {
        match self {
            Work::Exchange { .. } => 2,
            _ => 1,
        }
    }
}

/// One op lowered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Lowered {
    pub lane: Lane,
    pub work: Work,
    /// The signal to record after the work (only the needed ones).
    pub record: Option<SignalId>,
    /// Bytes moved between ranks, as (from, to, bytes) (traffic counting).
    pub moved: Option<(usize, usize, usize)>,
}

/// The lowering of one call on one rank.
pub(super) struct Lowering<'p> {
    plan: &'p Plan,
    rank: usize,
    bind: &'p [Binding],
    elem: usize,
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
        })
    }

    /// The waits of `op` its lane issues, in the plan's order: every one
    /// but those on a signal of the same rank and lane (in-lane order
    /// already implies them).
    pub fn waits(&self, op: &'p Op) -> impl Iterator<Item = Wait> + Clone + 'p {
        let (plan, r, lane) = (self.plan, self.rank, op.lane);
        op.waits
            .iter()
            .filter(move |w| !plan.same_lane(**w, r, lane))
            .map(move |&w| match plan.signals.get(w.0).map(|s| s.owner) {
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
        let (work, moved) = match &op.kind {
            OpKind::Begin | OpKind::End => (Work::Mark, None),
            OpKind::Copy { from, to, src, dst } => {
                let bytes = src.len() * elem;
                let work = Work::Copy {
                    src: self.addr(*from, src)?,
                    dst: self.addr(*to, dst)?,
                    bytes,
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
                let work = Work::Reduce {
                    dst: self.addr(r, dst)?,
                    a: self.addr(r, a)?,
                    b: self.addr(*b_rank, b)?,
                    bytes: dst.len() * elem,
                    flags: step_flags(step),
                };
                (work, Some((*b_rank, r, b.len() * elem)))
            }
            OpKind::Exchange(x) => {
                let work = Work::Exchange {
                    peer: x.peer,
                    dst: self.addr(r, &x.dst)?,
                    a: self.addr(r, &x.input)?,
                    peer_slot: self.addr(x.peer, &x.peer_slot)?,
                    my_slot: self.addr(r, &x.my_slot)?,
                    bytes: x.dst.len() * elem,
                    flags: step_flags(&x.step),
                };
                (work, Some((r, x.peer, x.input.len() * elem)))
            }
        };
        let record = op
            .signal
            .filter(|s| self.plan.signals.get(s.0).is_some_and(|x| x.needed));
        Ok(Lowered {
            lane: op.lane,
            work,
            record,
            moved: moved.filter(|(from, to, _)| from != to),
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

#[cfg(test)]
mod tests;
