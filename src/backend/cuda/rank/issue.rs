//! Issuing a call on a rank: the pure lowering (`lower.rs`) gives each op's
//! waits, work and record; the executor here submits them to the driver.
//! What is on for the call besides (injected faults, a per-GPU capture's
//! checks, timing, NVTX, traffic counting) runs around each op as the
//! layers of `hooks.rs`; a layer that is off does nothing per op. Waits,
//! copies and records that reach another node go through `network.rs`.

use super::hooks::Hooks;
use super::lower::{Addr, DriverOp, Lowered, Lowering, Wait};
use super::*;
use crate::plan::SignalId;

/// The profiling layer: nanoseconds since `t`, added to one kind of
/// driver call's total of the issue's [`IssueProfile`] (always on: two
/// clock reads per driver call).
pub(super) fn ns(t: Instant) -> u64 {
    t.elapsed().as_nanos() as u64
}

/// Add one issue's profile to the rank's.
fn add_profile(q: &mut IssueProfile, p: &IssueProfile) {
    q.calls += p.calls;
    q.copy_ns += p.copy_ns;
    q.kernel_ns += p.kernel_ns;
    q.record_ns += p.record_ns;
    q.wait_ns += p.wait_ns;
    q.peer_ns += p.peer_ns;
    q.total_ns += p.total_ns;
}

/// The kernels' reduce op and scalar of a call
/// ([`crate::element::DataType::lower`]).
type DevLowered = crate::element::Lowered;

/// Where an op is, for its errors (the step's description is built only
/// when there is one), and the call's signal board and generation.
pub(super) struct StepAt<'p> {
    pub(super) plan: &'p Plan,
    pub(super) rank: usize,
    pub(super) device: usize,
    pub(super) i: usize,
    pub(super) board: &'p SignalBoard,
    pub(super) gen: u64,
}

impl StepAt<'_> {
    pub(super) fn desc(&self) -> String {
        op_desc(self.plan, self.rank, self.i)
    }

    pub(super) fn in_step(&self, e: Error) -> Error {
        e.in_step(&self.desc())
    }

    /// A failed CUPTI call at this op.
    #[cfg(feature = "profiling")]
    pub(super) fn cupti(&self, message: String) -> Error {
        Error::Worker {
            rank: self.rank,
            message: format!("CUPTI at {}: {message}", self.desc()),
        }
    }

    pub(super) fn cuda(&self, e: CudaError) -> Error {
        Error::Cuda {
            rank: self.rank,
            device: self.device,
            call: e.call,
            message: e.message,
            step: Some(self.desc()),
        }
    }
}

impl<'id> Rank<'id> {
    /// Issue this rank's ops of `call`. No host synchronization with the GPU
    /// (except where a wait or a send reaches another process's turn on
    /// this GPU or another node).
    pub fn issue(
        &mut self,
        call: &Call,
        board: &SignalBoard,
        gen: u64,
        call_no: u64,
    ) -> Result<()> {
        let (r, plan) = (self.rank, &*call.plan);
        let t_all = Instant::now();
        let mut p = IssueProfile {
            calls: 1,
            ..IssueProfile::default()
        };
        let dev = call.dtype.lower(call.op, plan.ranks());
        self.kernels_for(call.dtype, dev.op)?;
        let mut hooks = Hooks::begin(self, call, call_no)?;
        let (net, turns) = (self.net.clone(), self.turns.clone());
        let mut lowering =
            Lowering::new(plan, r, &call.bind, call.dtype.size())?.taking_turns(&turns);
        if let Some(n) = &net {
            lowering = lowering.over_nodes(&n.node_of)?;
            n.forget_before(gen);
        }
        for (i, op) in plan.ops[r].iter().enumerate() {
            let at = StepAt {
                plan,
                rank: r,
                device: self.device,
                i,
                board,
                gen,
            };
            let low = lowering.op(i)?;
            let waits = lowering.waits(op);
            hooks.before(self, &low, waits.clone(), &at)?;
            for w in waits {
                self.submit_wait(w, low.lane as usize, &at, &mut p)?;
            }
            hooks.start(self, &low, &at)?;
            let work = self.submit_work(call, &dev, &low, &at, hooks.stamps(), &mut p);
            hooks.end(self, (&low, op), &at, work)?;
            if let Some(s) = low.record {
                self.submit_record(s, &low, &at, &mut p)?;
            }
        }
        hooks.finish(self);
        p.total_ns = ns(t_all);
        add_profile(&mut self.profile, &p);
        Ok(())
    }
    /// Submit one wait on `lane`: on this rank's own event; on the host for
    /// the owner's record, then on its event; on the host alone where the
    /// owner publishes once complete (a rank taking turns on this GPU); or
    /// for a rank of another node, through the network (`network.rs`).
    fn submit_wait(
        &mut self,
        w: Wait,
        lane: usize,
        at: &StepAt,
        p: &mut IssueProfile,
    ) -> Result<()> {
        let ev = match w {
            Wait::Local(s) => {
                let ev = self
                    .event_of(at.plan, s.0)
                    .ok_or_else(|| Error::internal("event pool too small"))?;
                let t = Instant::now();
                self.lanes[lane].wait_local(ev).map_err(|e| at.cuda(e))?;
                p.wait_ns += ns(t);
                return Ok(());
            }
            Wait::Land { signal, .. } | Wait::Remote { signal, .. } => {
                return self.land(signal, at, p);
            }
            Wait::Host { signal, .. } => return wait_board(signal, at, p),
            Wait::Peer { signal, owner } => {
                wait_board(signal, at, p)?;
                self.remote
                    .get(owner)
                    .and_then(|v| v.get(signal.0))
                    .ok_or_else(|| Error::internal("remote event missing"))?
            }
        };
        let t = Instant::now();
        self.lanes[lane].wait(ev).map_err(|e| at.cuda(e))?;
        p.wait_ns += ns(t);
        Ok(())
    }

    /// Wait (bounded, watching the job) until `lane` finished everything
    /// issued on it.
    pub(super) fn lane_done(&self, lane: usize, at: &StepAt) -> Result<()> {
        self.wait_stream(
            &self.lanes[lane],
            self.timeout + Duration::from_secs(5),
            |e| at.cuda(e),
        )
    }

    /// Record signal `s` on the op's lane and tell the other ranks' threads:
    /// at once, or (`complete_first`, a rank taking turns on this GPU waits
    /// on it on the host) once the lane's work is complete; and the ranks
    /// of other nodes that wait on it, through the network.
    fn submit_record(
        &self,
        s: SignalId,
        low: &Lowered,
        at: &StepAt,
        p: &mut IssueProfile,
    ) -> Result<()> {
        let lane = low.lane as usize;
        let ev = self
            .event_of(at.plan, s.0)
            .ok_or_else(|| Error::internal("event pool too small"))?;
        let t = Instant::now();
        self.lanes[lane].record(ev).map_err(|e| at.cuda(e))?;
        p.record_ns += ns(t);
        if low.complete_first {
            let t = Instant::now();
            self.lane_done(lane, at)?;
            p.peer_ns += ns(t);
        }
        at.board.publish(s.0, at.gen);
        if !low.forward.is_empty() {
            self.forward(s, &low.forward, lane, at, p)?;
        }
        Ok(())
    }

    /// The executor: submit one op's work on its lane.
    fn submit_work(
        &self,
        call: &Call,
        dev: &DevLowered,
        low: &Lowered,
        at: &StepAt,
        stamps: Option<&crate::cuda::HostMapped>,
        p: &mut IssueProfile,
    ) -> Result<()> {
        let stream = &self.lanes[low.lane as usize];
        let (elem, scalar) = (call.dtype.size(), dev.scalar);
        // Loaded for the call in `issue` (`kernels_for`).
        let kernels = || {
            self.kernels
                .get(&(call.dtype, dev.op))
                .ok_or_else(|| Error::internal("kernel cache"))
        };
        let t = Instant::now();
        match low.work {
            DriverOp::Mark => return Ok(()),
            DriverOp::Copy { src, dst, bytes } => {
                // cuMemcpyPeerAsync is refused in a stream capture.
                let how = match self.graphs.capturing {
                    Capturing::No => PeerCopy::Peer,
                    _ => PeerCopy::Unified,
                };
                let r = if src.rank == self.rank {
                    let (s, d) = (self.buf(src.buf)?, self.peer(dst.rank, dst.buf)?);
                    stream.copy_to_peer(d, dst.offset, s, src.offset, bytes, how)
                } else {
                    let (s, d) = (self.peer(src.rank, src.buf)?, self.buf(dst.buf)?);
                    stream.copy_from_peer(d, dst.offset, s, src.offset, bytes, how)
                };
                r.map_err(|e| at.cuda(e))?;
                p.copy_ns += ns(t);
                return Ok(());
            }
            DriverOp::Send {
                src,
                dst,
                bytes,
                signal,
            } => {
                self.send(low.lane as usize, (src, dst, bytes, signal), at)?;
                p.copy_ns += ns(t);
                return Ok(());
            }
            DriverOp::Reduce {
                dst,
                a,
                b,
                bytes,
                flags,
            } => {
                let b = if b.rank == self.rank {
                    Operand::Local(self.buf(b.buf)?, b.offset)
                } else {
                    Operand::Peer(self.peer(b.rank, b.buf)?, b.offset)
                };
                let k = &kernels()?.reduce;
                let launch = RLaunch {
                    dst: (self.buf(dst.buf)?, dst.offset),
                    a: (self.buf(a.buf)?, a.offset),
                    b,
                    bytes,
                    elem,
                    flags,
                    scalar,
                };
                stream.reduce(k, &launch).map_err(|e| at.cuda(e))?;
            }
            DriverOp::Exchange { peer, .. } => {
                let k = &kernels()?.exchange;
                let peer_flags = self
                    .peers
                    .flags
                    .get(peer)
                    .ok_or_else(|| Error::internal(format!("no flags of rank {peer}")))?;
                let x = XLaunch {
                    ops: self.exchange_operands(&low.work, elem, scalar)?,
                    peer_flags,
                    my_flags: &self.flags,
                    calls: &self.calls,
                    ctrl: &self.ctrl,
                };
                stream.exchange(k, &x).map_err(|e| at.cuda(e))?;
                *self.waited_for.borrow_mut() = Some((call.plan.clone(), at.i, peer));
            }
            DriverOp::RingLl {
                right,
                dst,
                a,
                count,
                ranks,
                half,
                flags,
                simple: true,
                ..
            } => {
                let k = &kernels()?.ring_simple;
                // Both ranks' scratch holds two halves of the kernel's slots.
                let half_bytes = crate::schedule::simple_slot_len(count, ranks, elem)
                    * elem
                    * 2
                    * ranks.saturating_sub(1);
                let peer_flags = self
                    .peers
                    .flags
                    .get(right)
                    .ok_or_else(|| Error::internal(format!("no flags of rank {right}")))?;
                let x = kernels::RingSimple {
                    dst: (self.buf(dst.buf)?, dst.offset),
                    a: (self.buf(a.buf)?, a.offset),
                    count,
                    elem,
                    ranks,
                    rank: self.rank,
                    my_slots: (self.buf(BufId::SCRATCH)?, half * half_bytes),
                    peer_slots: (self.peer(right, BufId::SCRATCH)?, half * half_bytes),
                    my_flags: (&self.flags, super::SIMPLE_FLAGS),
                    peer_flags: (peer_flags, super::SIMPLE_FLAGS),
                    calls: (&self.calls, super::LL_CALLS),
                    ctrl: &self.ctrl,
                    flags,
                    scalar,
                    stamps,
                };
                stream.ring_simple(k, &x).map_err(|e| at.cuda(e))?;
                let left = crate::schedule::left(self.rank, ranks);
                *self.waited_for.borrow_mut() = Some((call.plan.clone(), at.i, left));
            }
            DriverOp::RingLl {
                right,
                dst,
                a,
                count,
                ranks,
                half,
                flags,
                one_shot,
                simple: false,
                ..
            } => {
                let k = &kernels()?.ring_ll;
                // Both ranks' LL buffers hold two halves of the kernel's slots.
                let (chunks, slots) = crate::schedule::ll_cut(ranks, one_shot);
                let half_bytes = crate::schedule::ll_slot_bytes(count, chunks, elem) * slots;
                let x = kernels::RingLl {
                    dst: (self.buf(dst.buf)?, dst.offset),
                    a: (self.buf(a.buf)?, a.offset),
                    count,
                    elem,
                    ranks,
                    rank: self.rank,
                    my_ll: (self.buf(BufId::LL)?, half * half_bytes),
                    peer_ll: (self.peer(right, BufId::LL)?, half * half_bytes),
                    calls: (&self.calls, super::LL_CALLS),
                    ctrl: &self.ctrl,
                    flags,
                    one_shot,
                    scalar,
                    stamps,
                };
                stream.ring_ll(k, &x).map_err(|e| at.cuda(e))?;
                let left = crate::schedule::left(self.rank, ranks);
                *self.waited_for.borrow_mut() = Some((call.plan.clone(), at.i, left));
            }
        }
        p.kernel_ns += ns(t);
        Ok(())
    }

    /// The operands of a lowered exchange, in this rank's buffer table.
    fn exchange_operands(
        &self,
        work: &DriverOp,
        elem: usize,
        scalar: u64,
    ) -> Result<kernels::ExchangeOperands<'_, 'id>> {
        let DriverOp::Exchange {
            dst,
            a,
            peer_slot,
            my_slot,
            bytes,
            flags,
            ..
        } = *work
        else {
            return Err(Error::internal("exchange operands of another op"));
        };
        let own = |x: Addr| self.buf(x.buf).map(|b| (b, x.offset));
        Ok(kernels::ExchangeOperands {
            dst: own(dst)?,
            a: own(a)?,
            peer_slot: (self.peer(peer_slot.rank, peer_slot.buf)?, peer_slot.offset),
            my_slot: own(my_slot)?,
            bytes,
            elem,
            flags,
            scalar,
        })
    }
}

/// Wait (on the host, bounded) until this node's board has `signal`:
/// raised once the owner's record is issued, or once complete on its GPU,
/// or once the put it follows is filed (`network.rs`).
pub(super) fn wait_board(signal: SignalId, at: &StepAt, p: &mut IssueProfile) -> Result<()> {
    let t = Instant::now();
    at.board
        .wait(signal.0, at.gen, at.rank, &|| signal_desc(at.plan, signal))
        .map_err(|e| at.in_step(e))?;
    p.peer_ns += ns(t);
    Ok(())
}
