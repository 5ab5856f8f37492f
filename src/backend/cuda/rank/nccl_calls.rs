//! NCCL on a rank: init, calls, timed calls, graph capture and replay.

use super::activity::TimingSource;
#[cfg(feature = "profiling")]
use super::activity::{CuptiCall, OpRef};
use super::*;
use crate::backend::NcclBuffers;
#[cfg(feature = "profiling")]
use crate::cuda::cupti::CuptiTie;
use crate::plan::Collective;

impl<'id> Rank<'id> {
    // -- NCCL ----------------------------------------------------------------

    pub fn nccl_init(&mut self, lib: nccl::Nccl, id: nccl::UniqueId, n: usize) -> Result<()> {
        if !self.nccl_regs.is_empty() {
            // The old communicator's registrations go with it, once its
            // calls are done.
            self.sync()?;
            self.nccl_deregister(None)?;
        }
        self.nccl = None;
        self.graphs.nccl = None;
        let comm = lib
            .comm_init_rank(n, &id, self.rank)
            .map_err(|err| Error::NcclRank {
                rank: self.rank,
                message: err.to_string(),
            })?;
        self.nccl = Some((lib, comm));
        Ok(())
    }

    /// One NCCL call on the compute stream, in a group.
    pub fn nccl_call(&self, c: &NcclCall) -> Result<()> {
        let rank = self.rank;
        let (lib, comm) = self.nccl.as_ref().ok_or_else(|| Error::NcclRank {
            rank,
            message: "NCCL not initialised".into(),
        })?;
        let ne = |err: nccl::NcclError| Error::NcclRank {
            rank,
            message: err.to_string(),
        };
        let bind = c
            .bind
            .get(rank)
            .copied()
            .ok_or_else(|| Error::internal(format!("no binding for rank {rank}")))?;
        let size = c.dtype.size();
        let n = comm.nranks();
        let (send_elems, recv_elems) = match c.collective {
            Collective::AllReduce => (c.count, c.count),
            Collective::ReduceScatter => (c.count * n, c.count),
            Collective::AllGather => (c.count, c.count * n),
            Collective::Broadcast { .. } => (c.count, c.count),
        };
        // NCCL's in-place conventions: reduce-scatter writes the rank's
        // slice of the input, all-gather reads the rank's slice of the
        // output.
        let recv_buf = self.buf(bind.recv)?;
        let slice = rank * c.count * size;
        let operands = if c.in_place {
            let (s_off, r_off) = match c.collective {
                Collective::AllReduce | Collective::Broadcast { .. } => (0, 0),
                Collective::ReduceScatter => (0, slice),
                Collective::AllGather => (slice, 0),
            };
            crate::cuda::stream::NcclOperands {
                send: (recv_buf, s_off),
                recv: (recv_buf, r_off),
                send_bytes: send_elems * size,
                recv_bytes: recv_elems * size,
            }
        } else {
            crate::cuda::stream::NcclOperands {
                send: (self.buf(bind.send)?, 0),
                recv: (recv_buf, 0),
                send_bytes: send_elems * size,
                recv_bytes: recv_elems * size,
            }
        };
        lib.group_start().map_err(ne)?;
        let r = self.lanes[0].nccl_collective(
            lib,
            comm,
            c.collective,
            c.count,
            c.dtype.nccl(),
            c.op.nccl(),
            &operands,
        );
        let g = lib.group_end();
        r.map_err(|e| Error::NcclRank {
            rank,
            message: e.to_string(),
        })?;
        g.map_err(ne)
    }

    /// Registers the call's buffers with the communicator as
    /// [`NcclCall::buffers`] asks, each once: kept until the buffer moves
    /// or goes ([`Rank::nccl_deregister`]).
    fn nccl_register(&mut self, c: &NcclCall) -> Result<()> {
        let kind = match c.buffers {
            NcclBuffers::Plain => return Ok(()),
            NcclBuffers::Registered => nccl::Registration::Buffer,
            NcclBuffers::Symmetric => nccl::Registration::Symmetric,
        };
        let rank = self.rank;
        let bind = c
            .bind
            .get(rank)
            .copied()
            .ok_or_else(|| Error::internal(format!("no binding for rank {rank}")))?;
        // In place, the one buffer is the receive buffer.
        let both = [bind.recv, bind.send];
        let ids = if c.in_place { &both[..1] } else { &both[..] };
        for &id in ids {
            if self
                .nccl_regs
                .iter()
                .any(|(i, r)| *i == id && r.kind() == kind)
            {
                continue;
            }
            let (_, comm) = self.nccl.as_ref().ok_or_else(|| Error::NcclRank {
                rank,
                message: "NCCL not initialised".into(),
            })?;
            // Collective for a window: every rank makes it here alike (the
            // backend sends every rank the same call, and every reserve of
            // a buffer drops its registrations on every rank), outside
            // NCCL's group.
            let reg = self
                .buf(id)?
                .nccl_register(comm, kind)
                .map_err(|err| Error::NcclRank {
                    rank,
                    message: err.to_string(),
                })?;
            self.nccl_regs.push((id, reg));
        }
        Ok(())
    }

    /// Undoes the registrations of buffer `id` (`None`: of every buffer).
    /// The caller drained this rank: no NCCL call runs on them.
    pub(in crate::backend::cuda) fn nccl_deregister(&mut self, id: Option<BufId>) -> Result<()> {
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.nccl_regs)
            .into_iter()
            .partition(|(i, _)| id.is_none_or(|id| *i == id));
        self.nccl_regs = kept;
        let Some((_, comm)) = self.nccl.as_ref() else {
            return Ok(());
        };
        let mut first = Ok(());
        for (_, reg) in gone {
            let r = reg.deregister(comm);
            if let (Err(err), Ok(())) = (r, &first) {
                first = Err(Error::NcclRank {
                    rank: self.rank,
                    message: err.to_string(),
                });
            }
        }
        first
    }

    /// An NCCL call the backend sent (or sent before, by key).
    pub fn nccl_held(&mut self, c: super::super::NcclCmd) -> Result<()> {
        let call = take_held(&mut self.held_nccl, c.key, c.call, self.rank)?;
        let r = self
            .nccl_register(&call)
            .and_then(|()| self.nccl_call_timed(&call, c.timed));
        self.held_nccl[c.key] = Some(call);
        r
    }

    /// [`Rank::nccl_call`], timed when `timed` (kept for
    /// [`Rank::take_nccl_timing`]) as one op: from CUPTI's records of the
    /// kernels and copies NCCL issued inside it (tied to it by the
    /// callback on their launching driver and runtime calls: NCCL's own
    /// labels on the same clock as the plans' ops), else from an event pair
    /// around it on the compute stream, with the reason.
    pub fn nccl_call_timed(&mut self, c: &NcclCall, timed: bool) -> Result<()> {
        if !timed {
            return self.nccl_call(c);
        }
        let e = self.err();
        #[cfg(feature = "profiling")]
        let why = match self.nccl_call_cupti(c)? {
            Ok(()) => return Ok(()),
            Err(why) => why,
        };
        #[cfg(not(feature = "profiling"))]
        let why = String::from("built without the profiling feature");
        let a = self.timing_event()?;
        let b = self.timing_event()?;
        self.lanes[0].record_timing(&a).map_err(&e)?;
        self.nccl_call(c)?;
        self.lanes[0].record_timing(&b).map_err(&e)?;
        self.instr.nccl_timing.push(Timed::Events(
            TimedCall {
                events: vec![a, b],
                starts: vec![0],
                spans: vec![(0, 1, (0, 1), 1)],
            },
            TimingSource::choose(Err(why)),
        ));
        Ok(())
    }

    /// [`Rank::nccl_call_timed`] through CUPTI, where it loads and starts
    /// with the callback tie: `Ok(Err(why))` where it does not (the call
    /// is then timed with events).
    #[cfg(feature = "profiling")]
    fn nccl_call_cupti(&mut self, c: &NcclCall) -> Result<std::result::Result<(), String>> {
        let cupti = super::hooks::cupti_here().and_then(|k| match k.tie {
            CuptiTie::Callback => k.begin().map(|()| k),
            CuptiTie::Order => Err(
                "the order tie (RINGREDUCE_CUPTI_TIE=order) does not time NCCL's calls: NCCL's launches are not counted on the lanes"
                    .into(),
            ),
        });
        match cupti {
            Ok(k) => {
                let mut call = CuptiCall::new(1, 0.0);
                let issued = Instant::now();
                let r = k
                    .push(call.id(0))
                    .map_err(|m| self.cupti_err(m))
                    .and_then(|()| {
                        let r = self.nccl_call(c);
                        k.pop(&mut call.ties).map_err(|m| self.cupti_err(m))?;
                        r
                    });
                if let Err(err) = r {
                    // Nothing to take: the call's collection ends here.
                    let _ = k.end(1);
                    return Err(err);
                }
                // A call that issued no kernel or copy (one rank, in place)
                // is placed as a mark: an instant where it was issued.
                call.ops.push(OpRef {
                    op: 0,
                    parts: 1,
                    mark: true,
                    after: Vec::new(),
                });
                self.instr.nccl_timing.push(Timed::Cupti(call, k, issued));
                Ok(Ok(()))
            }
            Err(why) => Ok(Err(why)),
        }
    }

    pub fn nccl_capture(&mut self, c: &NcclCall, calls: usize) -> Result<()> {
        self.graphs.nccl = None;
        // Registered before the capture: NCCL registers nothing in one.
        self.nccl_register(c)?;
        let g = self.capture_with(|me| (0..calls).try_for_each(|_| me.nccl_call(c)))?;
        self.graphs.nccl = Some(g);
        Ok(())
    }

    pub fn nccl_replay(&self) -> Result<()> {
        let g = self.graphs.nccl.as_ref().ok_or_else(|| Error::NcclRank {
            rank: self.rank,
            message: "no NCCL graph captured".into(),
        })?;
        self.lanes[0].launch_graph(g).map_err(self.err())
    }
}
