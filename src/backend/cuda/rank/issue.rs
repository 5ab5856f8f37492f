//! Issuing a call on a rank: the pure lowering (`lower.rs`) gives each op's
//! waits, work and record; the executor here submits them to the driver,
//! and small layers around it add what is on for the call: injected faults,
//! the checks of a per-GPU graph capture, timing events, traffic counting
//! and the host-side profile. A layer that is off does nothing per op.

use super::activity::{CuptiCall, OpRef, TimingSource};
use super::lower::{Addr, DriverOp, Lowered, Lowering, Wait};
use super::*;
use crate::cuda::cupti::{self as cupti, Class, Cupti, CuptiTie, Issued};
use crate::cuda::nvtx;
use crate::plan::SignalId;
use crate::schedule::Phase;

mod timers;
pub(super) use timers::cupti_here;
use timers::{Ranges, Timer};

/// The profiling layer: nanoseconds since `t`, added to one kind of
/// driver call's total of the issue's [`IssueProfile`] (always on: two
/// clock reads per driver call, as before the layers).
fn ns(t: Instant) -> u64 {
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
struct StepAt<'p> {
    plan: &'p Plan,
    rank: usize,
    device: usize,
    i: usize,
    board: &'p SignalBoard,
    gen: u64,
}

impl StepAt<'_> {
    fn desc(&self) -> String {
        op_desc(self.plan, self.rank, self.i)
    }

    fn in_step(&self, e: Error) -> Error {
        e.in_step(&self.desc())
    }

    /// A failed CUPTI call at this op.
    fn cupti(&self, message: String) -> Error {
        Error::Worker {
            rank: self.rank,
            message: format!("CUPTI at {}: {message}", self.desc()),
        }
    }

    fn cuda(&self, e: CudaError) -> Error {
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
    /// Issue this rank's ops of `call`. No host synchronization with the GPU.
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
        // Graph replays do not pass here: only calls issued directly count.
        let count = self.graphs.capturing == Capturing::No;
        if self.instr.traffic.len() < plan.ranks() {
            self.instr.traffic.resize(plan.ranks(), Traffic::default());
        }
        // The timing layer: on for a timed call issued directly.
        let mut timer = if call.timing && self.graphs.capturing == Capturing::No {
            Some(Timer::begin(self, plan)?)
        } else {
            None
        };
        let net = self.net.clone();
        let turns = self.turns.clone();
        let mut lowering =
            Lowering::new(plan, r, &call.bind, call.dtype.size())?.taking_turns(&turns);
        if let Some(n) = &net {
            lowering = lowering.over_nodes(&n.node_of)?;
            n.forget_before(gen);
        }
        let mut ranges = Ranges::begin(plan, r);
        let mut stamped = Vec::new();
        for (i, op) in plan.ops[r].iter().enumerate() {
            ranges.at(plan, r, i);
            let at = StepAt {
                plan,
                rank: r,
                device: self.device,
                i,
                board,
                gen,
            };
            self.inject(call_no, &at)?;
            let low = lowering.op(i)?;
            let waits = lowering.waits(op);
            self.check_capture(&low, waits.clone(), &at)?;
            let lane = low.lane as usize;
            if let Some(t) = &mut timer {
                t.before(plan, r, lane, waits.clone());
            }
            for w in waits {
                if let Wait::Land {
                    signal,
                    from: owner,
                }
                | Wait::Remote { signal, owner } = w
                {
                    self.land(signal, owner, &at, &mut p)?;
                    continue;
                }
                self.submit_wait(w, lane, &at, &mut p)?;
            }
            // An LL kernel of a timed call writes its step times (the
            // buffer taken before the op's start is marked).
            let stamps = match (&timer, low.work) {
                (Some(_), DriverOp::RingLl { steps, .. }) => {
                    Some(self.step_times(at.i, steps).map_err(|e| at.in_step(e))?)
                }
                _ => None,
            };
            let span = match &mut timer {
                Some(Timer::Events(t, _)) => Some(t.start(self, lane, &at)?),
                _ => None,
            };
            let buf = stamps.as_ref().map(|s| &s.buf);
            if let Some(Timer::Cupti(t)) = &mut timer {
                t.push(&low, &at)?;
                let n0 = self.lanes[lane].issued();
                let r = self.submit_work(call, &dev, &low, &at, buf, &mut p);
                t.pop(&low, &at)?;
                r?;
                t.issued(&low, lane, (n0, self.lanes[lane].issued()), i);
            } else {
                self.submit_work(call, &dev, &low, &at, buf, &mut p)?;
            }
            stamped.extend(stamps);
            if let (true, Some((from, to, bytes))) = (count, low.moved) {
                moved(&mut self.instr.traffic, from, to, bytes);
                if let (DriverOp::Send { .. }, Some(t)) =
                    (low.work, self.instr.traffic.get_mut(from))
                {
                    t.network += bytes as u64;
                }
            }
            match (&mut timer, span) {
                (Some(Timer::Events(t, _)), Some(a)) => t.end(self, (&low, a), op.signal, &at)?,
                (Some(Timer::Cupti(t)), _) => t.end(&low, op.signal, i),
                _ => {}
            }
            if let Some(s) = low.record {
                self.submit_record(s, lane, low.complete_first, &at, &mut p)?;
                if !low.forward.is_empty() {
                    self.forward(s, &low.forward, lane, &at, &mut p)?;
                }
            }
        }
        ranges.end();
        if let Some(t) = timer {
            if let Timer::Cupti(c) = &t {
                self.instr.cupti_mark = c.mark;
            }
            self.instr.timing.push((t.into_timed(), stamped));
        }
        p.total_ns = ns(t_all);
        add_profile(&mut self.profile, &p);
        Ok(())
    }

    /// The fault layer: what the fault plan injects at this op, if anything.
    fn inject(&self, call_no: u64, at: &StepAt) -> Result<()> {
        match self.faults.inject(at.rank, at.i, call_no, &|| at.desc()) {
            None => Ok(()),
            Some(Injected::Stall(why)) => Err(at.board.stall(at.gen, at.rank, &why)),
            Some(Injected::Fail(_)) => Err(at.cuda(CudaError {
                call: "injected",
                message: "injected failure of the driver call".into(),
            })),
            // A rank's process kills itself once its call is issued, with
            // its peers inside the call (`exchange::ipc`), not at an op.
            Some(Injected::Kill) => Ok(()),
        }
    }

    /// The capture layer: a per-GPU graph takes only compute-lane work
    /// without events.
    fn check_capture(
        &self,
        low: &Lowered,
        mut waits: impl Iterator<Item = Wait>,
        at: &StepAt,
    ) -> Result<()> {
        if self.graphs.capturing != Capturing::PerGpu {
            return Ok(());
        }
        let why = if low.lane != Lane::Compute {
            "runs on a second stream"
        } else if waits.next().is_some() {
            "waits on an event"
        } else if low.record.is_some() {
            "records an event"
        } else if matches!(low.work, DriverOp::Send { .. }) {
            "sends to another node"
        } else {
            return Ok(());
        };
        Err(Error::Unsupported(
            format!(
                "CUDA graph capture of {} ({} {why})",
                at.plan.name,
                at.desc()
            ),
            "cuda",
        ))
    }

    /// Submit one wait on `lane`: on this rank's own event, or on the host
    /// for the owner's record and then on its event.
    fn submit_wait(&self, w: Wait, lane: usize, at: &StepAt, p: &mut IssueProfile) -> Result<()> {
        let stream = &self.lanes[lane];
        let ev = match w {
            Wait::Local(s) => {
                let ev = self
                    .event_of(at.plan, s.0)
                    .ok_or_else(|| Error::internal("event pool too small"))?;
                let t = Instant::now();
                stream.wait_local(ev).map_err(|e| at.cuda(e))?;
                p.wait_ns += ns(t);
                return Ok(());
            }
            Wait::Remote { signal, .. } | Wait::Land { signal, .. } | Wait::Host { signal, .. } => {
                // Raised on this node's board only once complete on its
                // GPU, or once the put it follows is filed (`land`).
                let t = Instant::now();
                at.board
                    .wait(signal.0, at.gen, at.rank, &|| signal_desc(at.plan, signal))
                    .map_err(|e| at.in_step(e))?;
                p.peer_ns += ns(t);
                return Ok(());
            }
            Wait::Peer { signal, owner } => {
                let t = Instant::now();
                at.board
                    .wait(signal.0, at.gen, at.rank, &|| signal_desc(at.plan, signal))
                    .map_err(|e| at.in_step(e))?;
                p.peer_ns += ns(t);
                self.remote
                    .get(owner)
                    .and_then(|v| v.get(signal.0))
                    .ok_or_else(|| Error::internal("remote event missing"))?
            }
        };
        let t = Instant::now();
        stream.wait(ev).map_err(|e| at.cuda(e))?;
        p.wait_ns += ns(t);
        Ok(())
    }

    /// The network layer, receiving side: wait (on the host) until this
    /// node's board has `signal` (of rank `owner` on another node), then
    /// land every put of the call received so far in this rank's buffers
    /// (host to device, complete on return), before any later work. A put
    /// is filed before its signal is raised, and a sender's messages are
    /// filed in order, so whatever the signal follows has landed.
    fn land(
        &mut self,
        signal: SignalId,
        owner: usize,
        at: &StepAt,
        p: &mut IssueProfile,
    ) -> Result<()> {
        self.submit_wait(Wait::Remote { signal, owner }, 0, at, p)?;
        let net = self
            .net
            .clone()
            .ok_or_else(|| Error::internal("no network port"))?;
        let t = Instant::now();
        let what = || signal_desc(at.plan, signal);
        net.wait_delivered(at.gen, signal.0, at.rank, self.timeout, &|| {
            at.board.check(at.rank, &what)
        })
        .map_err(|e| at.in_step(e))?;
        for put in net.take_all(at.gen) {
            self.write(put.buf, put.offset, put.data())
                .map_err(|e| at.in_step(e.in_step(&format!("landing rank {}'s put", put.from))))?;
            net.recycle(put.msg);
        }
        p.copy_ns += ns(t);
        Ok(())
    }

    /// The network layer, sending side of a signal: once the work before
    /// it on `lane` is complete, send signal `s` to every rank of another
    /// node that waits on it (each must receive it itself: see `net.rs`).
    fn forward(
        &self,
        s: SignalId,
        to: &[usize],
        lane: usize,
        at: &StepAt,
        p: &mut IssueProfile,
    ) -> Result<()> {
        let net = self
            .net
            .as_ref()
            .ok_or_else(|| Error::internal("no network port"))?;
        let t = Instant::now();
        self.lane_done(lane, at)?;
        for &x in to {
            net.wire
                .signal(at.rank, x, s.0, at.gen)
                .map_err(|e| at.in_step(e))?;
        }
        p.peer_ns += ns(t);
        Ok(())
    }

    /// Wait (bounded, watching the job) until `lane` finished everything
    /// issued on it.
    fn lane_done(&self, lane: usize, at: &StepAt) -> Result<()> {
        self.wait_stream(
            &self.lanes[lane],
            self.timeout + Duration::from_secs(5),
            |e| at.cuda(e),
        )
    }

    /// Record signal `s` on `lane` and tell the other ranks' threads: at
    /// once, or (`complete_first`, a rank taking turns on this GPU waits
    /// on it on the host) once the lane's work is complete.
    fn submit_record(
        &self,
        s: SignalId,
        lane: usize,
        complete_first: bool,
        at: &StepAt,
        p: &mut IssueProfile,
    ) -> Result<()> {
        let ev = self
            .event_of(at.plan, s.0)
            .ok_or_else(|| Error::internal("event pool too small"))?;
        let t = Instant::now();
        self.lanes[lane].record(ev).map_err(|e| at.cuda(e))?;
        p.record_ns += ns(t);
        if complete_first {
            let t = Instant::now();
            self.lane_done(lane, at)?;
            p.peer_ns += ns(t);
        }
        at.board.publish(s.0, at.gen);
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
                // The lane reached the copy: its producers are done. Read
                // the source to the host and send it as one put.
                let net = self
                    .net
                    .as_ref()
                    .ok_or_else(|| Error::internal("no network port"))?;
                self.lane_done(low.lane as usize, at)?;
                // Staged in the port's buffers, reused from step to step.
                let mut stage = net.stage();
                let (data, msg) = &mut *stage;
                data.resize(bytes, 0);
                self.read_into(src.buf, src.offset, data)
                    .map_err(|e| at.in_step(e))?;
                net.wire.put_message(
                    self.rank,
                    dst.rank,
                    dst.buf,
                    dst.offset,
                    signal.map(|s| s.0),
                    at.gen,
                    data,
                    msg,
                );
                *msg = net
                    .wire
                    .send_put(self.rank, dst.rank, std::mem::take(msg))
                    .map_err(|e| at.in_step(e))?;
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
                one_shot,
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

/// The traffic layer: count `bytes` moved from rank `from` to rank `to`.
fn moved(t: &mut [Traffic], from: usize, to: usize, bytes: usize) {
    if let Some(x) = t.get_mut(from) {
        x.sent += bytes as u64;
    }
    if let Some(x) = t.get_mut(to) {
        x.received += bytes as u64;
    }
}
