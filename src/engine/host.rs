//! Collectives on the caller's host slices: what a call is ([`HostCall`]),
//! the one set of rules that turns its buffers' lengths into NCCL's count
//! ([`HostCall::count`], for every way ranks are run), and its run on the
//! engine ([`Engine::host`]).
//!
//! A host-slice call takes one buffer per rank this process runs
//! ([`Engine::local_ranks`](super::Engine::local_ranks)): every rank in one
//! process; in a job of processes, this process's rank alone. Buffer i
//! belongs to rank `local_ranks().start + i`.

use super::buffers::{as_bytes, as_bytes_mut};
use super::{CallInfo, Engine, TypedShape};
use crate::backend::{Binding, HostRead};
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result};
use crate::plan::{Collective, Shape};

/// A host-slice collective: which, where, with what op.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostCall {
    pub(crate) collective: Collective,
    pub(crate) in_place: bool,
    pub(crate) op: ReduceOp,
}

impl HostCall {
    pub(crate) fn new(collective: Collective, in_place: bool, op: ReduceOp) -> HostCall {
        HostCall {
            collective,
            in_place,
            op,
        }
    }

    /// NCCL's count of a call on `ranks` ranks with these lengths of rank
    /// `rank`'s buffers (in place: `recv` is the buffer), and whether that
    /// rank's own arguments fit the call.
    pub(crate) fn count(
        &self,
        ranks: usize,
        rank: usize,
        send: usize,
        recv: usize,
    ) -> (usize, Result<()>) {
        let size = |what, expected, found| {
            if expected == found {
                Ok(())
            } else {
                Err(Error::BufferSize {
                    rank,
                    what,
                    expected,
                    found,
                })
            }
        };
        let split = |what: &str| {
            if recv % ranks == 0 {
                Ok(())
            } else {
                Err(Error::BadArgument(format!(
                    "rank {rank}: an in-place {what} buffer of {recv} elements does not split into {ranks} equal slices"
                )))
            }
        };
        let root = |root: usize| {
            if root < ranks {
                Ok(())
            } else {
                Err(Error::RankOutOfRange { rank: root, ranks })
            }
        };
        match (self.collective, self.in_place) {
            (Collective::AllReduce, false) => (send, size("output", send, recv)),
            (Collective::AllReduce, true) => (recv, Ok(())),
            (Collective::ReduceScatter, false) => {
                (recv, size("input", recv.saturating_mul(ranks), send))
            }
            (Collective::ReduceScatter, true) => (recv / ranks, split("reduce-scatter")),
            (Collective::AllGather, false) => {
                (send, size("output", send.saturating_mul(ranks), recv))
            }
            (Collective::AllGather, true) => (recv / ranks, split("all-gather")),
            // Only the root's input is read: another rank's may be empty.
            (Collective::Broadcast { root: q }, false) => (
                recv,
                root(q).and_then(|()| match rank == q || send != 0 {
                    true => size("input", recv, send),
                    false => Ok(()),
                }),
            ),
            (Collective::Broadcast { root: q }, true) => (recv, root(q)),
        }
    }

    /// The buffer NCCL's count is read from, by name, and its length.
    fn lead(&self, send: usize, recv: usize) -> (&'static str, usize) {
        match (self.collective, self.in_place) {
            (_, true) => ("in-place buffer", recv),
            (Collective::AllReduce | Collective::AllGather, false) => ("input", send),
            (Collective::ReduceScatter | Collective::Broadcast { .. }, false) => ("output", recv),
        }
    }

    /// The count of a call on the buffers of consecutive ranks from
    /// `first` (`sends` empty in place), checked: every rank's own
    /// arguments ([`HostCall::count`]), and every rank at the first one's
    /// count.
    pub(crate) fn count_all(
        &self,
        ranks: usize,
        first: usize,
        sends: &[usize],
        recvs: &[usize],
    ) -> Result<usize> {
        let send = |i: usize| sends.get(i).copied().unwrap_or(0);
        let mut count = None;
        for (i, &recv) in recvs.iter().enumerate() {
            let (c, own) = self.count(ranks, first + i, send(i), recv);
            own?;
            match count {
                None => count = Some(c),
                Some(c0) if c0 != c => {
                    let (what, expected) = self.lead(send(0), recvs[0]);
                    return Err(Error::BufferSize {
                        rank: first + i,
                        what,
                        expected,
                        found: self.lead(send(i), recv).1,
                    });
                }
                Some(_) => {}
            }
        }
        Ok(count.unwrap_or(0))
    }
}

impl Engine {
    /// Error unless `buffers` buffers are one per local rank.
    fn check_buffers(&self, buffers: usize) -> Result<()> {
        let local = self.local_ranks();
        let n = self.ranks();
        if local.len() == n {
            if buffers != n {
                return Err(Error::WrongBufferCount { ranks: n, buffers });
            }
            return Ok(());
        }
        if buffers != local.len() {
            return Err(Error::BadArgument(format!(
                "this process runs rank {} of a job of {n} ranks: a host-slice call takes that rank's buffer alone \
                 (1 buffer, got {buffers}); the other ranks' buffers live in their own processes",
                local.start
            )));
        }
        Ok(())
    }

    /// One host-slice collective on the local ranks' buffers (`send` is
    /// empty and not read in place), checked first.
    ///
    /// On a backend whose ranks can address the caller's slices (the CPU
    /// backend in one process) the call runs on them, lent for the call: no
    /// copy in or out. Otherwise the inputs are loaded into the engine's
    /// buffers and each local rank's output is copied straight into its
    /// slice, with no intermediate vector.
    pub(crate) fn host<T: Element>(
        &mut self,
        c: HostCall,
        send: &[&[T]],
        recv: &mut [&mut [T]],
    ) -> Result<CallInfo> {
        self.check_buffers(recv.len())?;
        if !c.in_place {
            self.check_buffers(send.len())?;
        }
        let first = self.local_ranks().start;
        let sends: Vec<usize> = send.iter().map(|s| s.len()).collect();
        let recvs: Vec<usize> = recv.iter().map(|r| r.len()).collect();
        let count = c.count_all(self.ranks(), first, &sends, &recvs)?;
        let shape = self.shape::<T>(c.collective, count, c.in_place);
        if c.in_place {
            return self.in_place(shape, c.op, recv);
        }
        if recv.len() == self.ranks() && self.lends() {
            let ins: Vec<&[u8]> = send.iter().map(|s| as_bytes(s)).collect();
            let mut outs: Vec<&mut [u8]> = recv.iter_mut().map(|d| as_bytes_mut(d)).collect();
            if let Some(plan) = self.run_lent(None, *shape, T::DTYPE, c.op, &ins, &mut outs)? {
                return Ok(CallInfo::of(&plan));
            }
        }
        self.load_local(&shape, send)?;
        let info = self.run::<T>(None, &shape, c.op)?;
        self.read_output_into(&shape, recv)?;
        Ok(info)
    }

    /// Write the local ranks' `inputs` (one per local rank) for a call of
    /// `shape` into the engine's buffers.
    fn load_local<T: Element>(&mut self, shape: &Shape, inputs: &[&[T]]) -> Result<()> {
        let local = self.local_ranks();
        let all: Vec<&[T]> = (0..self.ranks())
            .map(|r| match r.checked_sub(local.start) {
                Some(i) if i < inputs.len() => inputs[i],
                _ => &[],
            })
            .collect();
        self.load_shaped(shape, &all)
    }

    /// An in-place call on the caller's buffers: each rank's input is read
    /// from its buffer (an all-gather's from its own slice), and its output
    /// written back over it, with no copy of the buffers in between.
    fn in_place<T: Element>(
        &mut self,
        shape: TypedShape<T>,
        op: ReduceOp,
        all: &mut [&mut [T]],
    ) -> Result<CallInfo> {
        let (n, first) = (self.ranks(), self.local_ranks().start);
        // On a backend whose ranks can address the caller's buffers, the
        // call runs on them (each rank's `Recv` is its whole buffer).
        if all.len() == n && self.lends() {
            let mut outs: Vec<&mut [u8]> = all.iter_mut().map(|b| as_bytes_mut(b)).collect();
            if let Some(plan) = self.run_lent(None, *shape, T::DTYPE, op, &[], &mut outs)? {
                return Ok(CallInfo::of(&plan));
            }
        }
        let c = shape.count;
        let inputs: Vec<&[T]> = match shape.collective {
            Collective::AllGather => all
                .iter()
                .enumerate()
                .map(|(i, b)| b.get((first + i) * c..(first + i + 1) * c).unwrap_or(&[]))
                .collect(),
            _ => all.iter().map(|b| &**b).collect(),
        };
        self.load_local(&shape, &inputs)?;
        let info = self.run::<T>(None, &shape, op)?;
        // Each rank's output over its buffer: a reduce-scatter's at its
        // chunk, the others' over the whole buffer.
        let mut outs: Vec<&mut [T]> = Vec::with_capacity(all.len());
        for (r, b) in self.local_ranks().zip(all.iter_mut()) {
            let o = shape.output(r);
            let base = if shape.collective == Collective::ReduceScatter {
                o.range.start
            } else {
                0
            };
            let end = (base + o.len()).min(b.len());
            outs.push(&mut b[base.min(end)..end]);
        }
        self.read_output_into(&shape, &mut outs)?;
        Ok(info)
    }

    /// Copy the output of `shape`'s call of every local rank into
    /// `outputs`, in local-rank order; each destination must hold exactly
    /// that rank's output.
    fn read_output_into<T: Element>(
        &mut self,
        shape: &Shape,
        outputs: &mut [&mut [T]],
    ) -> Result<()> {
        let size = T::DTYPE.size();
        let mut reads = Vec::with_capacity(outputs.len());
        for (r, dst) in self.local_ranks().zip(outputs.iter_mut()) {
            let region = shape.output(r);
            if dst.len() != region.len() {
                return Err(Error::BufferSize {
                    rank: r,
                    what: "output",
                    expected: region.len(),
                    found: dst.len(),
                });
            }
            reads.push(HostRead {
                rank: r,
                id: Binding::DEFAULT.id(region.buf),
                offset: region.range.start * size,
                out: as_bytes_mut(dst),
            });
        }
        self.read_all(&mut reads)
    }
}

#[cfg(test)]
mod tests;
