//! A host-slice collective's description ([`HostCall`]) and its run on
//! the engine.

use super::*;

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

    pub(crate) fn desc<T: Element>(&self, count: usize) -> CallDesc {
        CallDesc::host(self.collective, T::DTYPE, self.op, self.in_place, count)
    }
}

/// Run a host-slice collective on `e` with one buffer per local rank
/// (`send` is not read in place).
pub(crate) fn run_host<T: Element>(
    e: &mut Engine<T>,
    c: HostCall,
    send: &[impl AsRef<[T]>],
    recv: &mut [impl AsMut<[T]>],
) -> Result<CallInfo> {
    match (c.collective, c.in_place) {
        (Collective::AllReduce, false) => e.all_reduce(send, recv, c.op),
        (Collective::AllReduce, true) => e.all_reduce_in_place(recv, c.op),
        (Collective::ReduceScatter, false) => e.reduce_scatter(send, recv, c.op),
        (Collective::ReduceScatter, true) => e.reduce_scatter_in_place(recv, c.op),
        (Collective::AllGather, false) => e.all_gather(send, recv),
        (Collective::AllGather, true) => e.all_gather_in_place(recv),
        (Collective::Broadcast { root }, false) => e.broadcast(send, recv, root),
        (Collective::Broadcast { root }, true) => e.broadcast_in_place(recv, root),
    }
}
