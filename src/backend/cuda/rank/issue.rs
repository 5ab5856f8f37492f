//! Issuing a call on a rank: the pure lowering (`lower.rs`) gives each op's
//! waits, work and record; the executor here submits them to the driver,
//! and small layers around it add what is on for the call: injected faults,
//! the checks of a per-GPU graph capture, timing events, traffic counting
//! and the host-side profile. A layer that is off does nothing per op.
//! (an `impl` block of [`Rank`] split out of `rank.rs` to keep files short;
//! it sees the rank's private fields as a child module).

use super::activity::{CuptiCall, OpRef, TimingSource};
use super::lower::{Addr, Lowered, Lowering, Wait, Work};
use super::*;
use crate::cuda::cupti::{self as cupti, Class, Cupti, CuptiTie, Issued};
use crate::cuda::nvtx;
use crate::plan::SignalId;
use crate::schedule::Phase;

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

/// The timing layer of one timed call: one event per op end, and one at
/// its start only where the start is not already marked by the previous
/// end on the same lane (the op waits on another lane or rank, or is the
/// lane's first).
struct CallTimer<'id> {
    tc: TimedCall<'id>,
    /// The end event of each lane's last op.
    lane_last: [Option<usize>; 2],
    /// The end event of the op that records each of this rank's signals.
    signal_end: Vec<Option<usize>>,
    /// The current op's first start mark, and whether its start is marked.
    t0: usize,
    marked: bool,
}

impl<'id> CallTimer<'id> {
    /// Start a timed call: its base event, recorded first on lane 0.
    fn begin(rank: &mut Rank<'id>, signals: usize) -> Result<Self> {
        let ev = rank.timing_event()?;
        rank.lanes[0].record_timing(&ev).map_err(rank.err())?;
        Ok(CallTimer {
            tc: TimedCall {
                events: vec![ev],
                starts: Vec::new(),
                spans: Vec::new(),
            },
            lane_last: [Some(0), None],
            signal_end: vec![None; signals],
            t0: 0,
            marked: false,
        })
    }

    /// Before an op's waits: the marks its start already has (no driver
    /// call).
    fn before(&mut self, plan: &Plan, r: usize, lane: usize, waits: impl Iterator<Item = Wait>) {
        self.t0 = self.tc.starts.len();
        self.marked = match self.lane_last[lane] {
            Some(prev) => {
                self.tc.starts.push(prev);
                true
            }
            None => false,
        };
        for w in waits {
            if !self.marked {
                break;
            }
            let s = w.signal();
            match self.signal_end.get(s.0).copied().flatten() {
                Some(end) if plan.signals[s.0].owner == r => self.tc.starts.push(end),
                _ => self.marked = false,
            }
        }
    }

    /// After the waits: the op's start, as (first, last + 1) into the start
    /// marks; records a start event where none marks it.
    fn start(&mut self, rank: &mut Rank<'id>, lane: usize, at: &StepAt) -> Result<(usize, usize)> {
        if self.marked {
            return Ok((self.t0, self.tc.starts.len()));
        }
        let a = rank.timing_event().map_err(|e| at.in_step(e))?;
        rank.lanes[lane].record_timing(&a).map_err(|e| at.cuda(e))?;
        self.tc.events.push(a);
        self.tc.starts.truncate(self.t0);
        self.tc.starts.push(self.tc.events.len() - 1);
        Ok((self.t0, self.t0 + 1))
    }

    /// After the work: the op's end. `Begin` and `End` do no work: they end
    /// where they start (when one event marks the start; a start marked by
    /// several ends gets an end event of its own).
    fn end(
        &mut self,
        rank: &mut Rank<'id>,
        (low, a): (&Lowered, (usize, usize)),
        signal: Option<SignalId>,
        at: &StepAt,
    ) -> Result<()> {
        let lane = low.lane as usize;
        let b = if low.work == Work::Mark && a.1 == a.0 + 1 {
            self.tc.starts[a.0]
        } else {
            let b = rank.timing_event().map_err(|e| at.in_step(e))?;
            rank.lanes[lane].record_timing(&b).map_err(|e| at.cuda(e))?;
            self.tc.events.push(b);
            self.tc.events.len() - 1
        };
        self.lane_last[lane] = Some(b);
        if let Some(s) = signal {
            if let Some(x) = self.signal_end.get_mut(s.0) {
                *x = Some(b);
            }
        }
        self.tc.spans.push((at.i, low.work.parts(), a, b));
        Ok(())
    }
}

/// The CUPTI layer of one timed call: each op's work issued under its
/// external correlation id, and what places its marks.
struct CuptiTimer {
    call: CuptiCall,
    cupti: &'static Cupti,
    /// The order tie: CUPTI's ids of the rank's lane streams (`None`: the
    /// callback tie).
    lanes: Option<[u32; 2]>,
    /// The order tie: each lane's issued count (`Stream::issued`) up to
    /// which its calls are filed in `call.issued`.
    mark: [u64; 2],
    issued: Instant,
    /// The index in `call.ops` of each lane's last op.
    lane_last: [Option<usize>; 2],
    /// The index of the op that records each of this rank's signals.
    signal_op: Vec<Option<usize>>,
    /// The current op's predecessors (see [`OpRef::after`]).
    after: Vec<usize>,
    /// Not yet handed over as a [`Timed`] call: a call whose issue failed
    /// is never taken, so dropping it ends its collection.
    live: bool,
}

impl Drop for CuptiTimer {
    fn drop(&mut self) {
        if self.live {
            // Nobody to tell: the call's issue already failed.
            let _ = self.cupti.end(1);
        }
    }
}

impl CuptiTimer {
    fn begin(
        cupti: &'static Cupti,
        (lanes, mark): (Option<[u32; 2]>, [u64; 2]),
        plan: &Plan,
        r: usize,
    ) -> Self {
        CuptiTimer {
            call: CuptiCall::new(plan.ops[r].len(), 0.0),
            cupti,
            lanes,
            mark,
            issued: Instant::now(),
            lane_last: [None, None],
            signal_op: vec![None; plan.signals.len()],
            after: Vec::new(),
            live: true,
        }
    }

    /// Before an op's waits: the ops of this rank whose ends start it.
    fn before(&mut self, plan: &Plan, r: usize, lane: usize, waits: impl Iterator<Item = Wait>) {
        self.after.clear();
        self.after.extend(self.lane_last[lane]);
        for w in waits {
            let s = w.signal();
            if plan.signals[s.0].owner == r {
                self.after
                    .extend(self.signal_op.get(s.0).copied().flatten());
            }
        }
    }

    /// Around the op's work: its external id pushed (no work, or the
    /// order tie: nothing).
    fn push(&self, low: &Lowered, at: &StepAt) -> Result<()> {
        if low.work == Work::Mark || self.lanes.is_some() {
            return Ok(());
        }
        let i = self.call.ops.len();
        self.cupti.push(self.call.id(i)).map_err(|m| at.cupti(m))
    }

    fn pop(&mut self, low: &Lowered, at: &StepAt) -> Result<()> {
        if low.work == Work::Mark || self.lanes.is_some() {
            return Ok(());
        }
        self.cupti.pop(&mut self.call.ties).map_err(|m| at.cupti(m))
    }

    /// The order tie: lane `lane`'s calls up to its issued count `upto`
    /// that no op of a timed call issued (e.g. a reset between calls),
    /// filed as no op's (op `i` names the place; the callback tie:
    /// nothing). With one class of records only, their class is unknown,
    /// and they are not filed (a record of one is then an extra record,
    /// an error).
    fn unowned(&mut self, lane: usize, upto: u64, i: usize) {
        let (Some(lanes), Some(m)) = (self.lanes, self.mark.get_mut(lane)) else {
            return;
        };
        let n = upto.saturating_sub(*m);
        *m = upto;
        if self.cupti.kinds != cupti::CuptiKinds::All {
            return;
        }
        let stream = lanes.get(lane).copied().unwrap_or(u32::MAX);
        for _ in 0..n {
            self.call.issued.push(Issued {
                external: 0,
                op: i,
                lane,
                stream,
                class: None,
            });
        }
    }

    /// The order tie: the op (index `i` in the rank's list) issued the
    /// calls of lane `lane` from its issued count `from` to `to` (the
    /// callback tie: nothing).
    fn issued(&mut self, low: &Lowered, lane: usize, (from, to): (u64, u64), i: usize) {
        self.unowned(lane, from, i);
        if let Some(m) = self.mark.get_mut(lane) {
            *m = to;
        }
        let (Some(lanes), Some(class)) = (self.lanes, class_of(&low.work)) else {
            return;
        };
        if !cupti::collects(self.cupti.kinds, class) {
            return;
        }
        let external = self.call.id(self.call.ops.len());
        let stream = lanes.get(lane).copied().unwrap_or(u32::MAX);
        for _ in 0..to.saturating_sub(from) {
            self.call.issued.push(Issued {
                external,
                op: i,
                lane,
                stream,
                class: Some(class),
            });
        }
    }

    /// After the op: its place in the call.
    fn end(&mut self, low: &Lowered, signal: Option<SignalId>, i: usize) {
        let k = self.call.ops.len();
        // An op whose records are not collected (RINGREDUCE_CUPTI_KINDS) is
        // placed as a mark is.
        let timed = class_of(&low.work).is_some_and(|c| cupti::collects(self.cupti.kinds, c));
        self.call.ops.push(OpRef {
            op: i,
            parts: low.work.parts(),
            mark: !timed,
            after: std::mem::take(&mut self.after),
        });
        self.lane_last[low.lane as usize] = Some(k);
        if let Some(x) = signal.and_then(|s| self.signal_op.get_mut(s.0)) {
            *x = Some(k);
        }
    }
}

/// What CUPTI records of an op's work (`None`: no work).
fn class_of(w: &Work) -> Option<Class> {
    match w {
        Work::Mark => None,
        Work::Copy { .. } => Some(Class::Copy),
        Work::Reduce { .. } | Work::Exchange { .. } => Some(Class::Kernel),
    }
}

/// The timing layer of a timed call, by its source.
enum Timer<'id> {
    Events(CallTimer<'id>, TimingSource),
    Cupti(CuptiTimer),
}

impl<'id> Timer<'id> {
    /// Start a timed call: through CUPTI where it loads and starts, else
    /// with events (and the reason).
    fn begin(rank: &mut Rank<'id>, plan: &Plan) -> Result<Self> {
        let cupti = (|| {
            let setting = crate::param::CUPTI.get().map_err(|e| e.to_string())?;
            let e = |e: Error| e.to_string();
            let d = cupti::Settings::default();
            let how = cupti::Settings {
                tie: crate::param::CUPTI_TIE.get().map_err(e)?.unwrap_or(d.tie),
                kinds: crate::param::CUPTI_KINDS
                    .get()
                    .map_err(e)?
                    .unwrap_or(d.kinds),
                keep: crate::param::CUPTI_KEEP.get().map_err(e)?.unwrap_or(d.keep),
            };
            let c = cupti::get(setting.as_deref(), how)?;
            let lanes = match c.tie {
                CuptiTie::Callback => None,
                CuptiTie::Order => Some(rank.cupti_lanes(c)?),
            };
            c.begin()?;
            Ok::<_, String>((c, lanes))
        })();
        // The order tie: with timed calls of this rank pending (kinds on
        // since the first), its lanes' calls since the last are unowned
        // records to pass over; else the count starts now.
        let now = [rank.lanes[0].issued(), rank.lanes[1].issued()];
        let pending = rank
            .instr
            .timing
            .iter()
            .any(|t| matches!(t, Timed::Cupti(..)));
        let from = if pending { rank.instr.cupti_mark } else { now };
        match cupti {
            Ok((c, lanes)) => {
                let mut t = CuptiTimer::begin(c, (lanes, from), plan, rank.rank);
                for (l, &n) in now.iter().enumerate() {
                    t.unowned(l, n, 0);
                }
                Ok(Timer::Cupti(t))
            }
            Err(why) => Ok(Timer::Events(
                CallTimer::begin(rank, plan.signals.len())?,
                TimingSource::choose(Err(why)),
            )),
        }
    }

    fn before(&mut self, plan: &Plan, r: usize, lane: usize, waits: impl Iterator<Item = Wait>) {
        match self {
            Timer::Events(t, _) => t.before(plan, r, lane, waits),
            Timer::Cupti(t) => t.before(plan, r, lane, waits),
        }
    }

    fn into_timed(self) -> Timed<'id> {
        match self {
            Timer::Events(t, why) => Timed::Events(t.tc, why),
            Timer::Cupti(mut t) => {
                t.live = false;
                Timed::Cupti(std::mem::take(&mut t.call), t.cupti, t.issued)
            }
        }
    }
}

/// The NVTX layer: a range per call and one per ring step (phase, step,
/// chunk) of the rank, only while an NVTX tool listens (else nothing is
/// formatted).
struct Ranges {
    nvtx: Option<&'static nvtx::Nvtx>,
    /// The open step range and its step; dropped before `call`.
    step: Option<((Phase, usize, usize), nvtx::Range)>,
    call: Option<nvtx::Range>,
}

impl Ranges {
    fn begin(plan: &Plan, r: usize) -> Self {
        let nvtx = nvtx::active();
        Ranges {
            nvtx,
            step: None,
            call: nvtx.map(|n| n.range(&format!("{} rank {r}", plan.name))),
        }
    }

    /// Before op `i`: close the step range if the op starts another step,
    /// open the op's own.
    fn at(&mut self, plan: &Plan, r: usize, i: usize) {
        let Some(n) = self.nvtx else {
            return;
        };
        let l = &plan.ops[r][i].label;
        let key = l.phase.map(|p| (p, l.step, l.chunk));
        if self.step.as_ref().map(|s| s.0) == key {
            return;
        }
        self.step = None;
        if let Some((p, step, chunk)) = key {
            let name = format!(
                "{} {} step {step} chunk {chunk} rank {r}",
                plan.name,
                p.label()
            );
            self.step = Some(((p, step, chunk), n.range(&name)));
        }
    }

    fn end(mut self) {
        self.step = None;
        self.call = None;
    }
}

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
        let lowering = Lowering::new(plan, r, &call.bind, call.dtype.size())?;
        let mut ranges = Ranges::begin(plan, r);
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
                self.submit_wait(w, lane, &at, &mut p)?;
            }
            let span = match &mut timer {
                Some(Timer::Events(t, _)) => Some(t.start(self, lane, &at)?),
                _ => None,
            };
            if let Some(Timer::Cupti(t)) = &mut timer {
                t.push(&low, &at)?;
                let n0 = self.lanes[lane].issued();
                let r = self.submit_work(call, &dev, &low, &at, &mut p);
                t.pop(&low, &at)?;
                r?;
                t.issued(&low, lane, (n0, self.lanes[lane].issued()), i);
            } else {
                self.submit_work(call, &dev, &low, &at, &mut p)?;
            }
            if let (true, Some((from, to, bytes))) = (count, low.moved) {
                moved(&mut self.instr.traffic, from, to, bytes);
            }
            match (&mut timer, span) {
                (Some(Timer::Events(t, _)), Some(a)) => t.end(self, (&low, a), op.signal, &at)?,
                (Some(Timer::Cupti(t)), _) => t.end(&low, op.signal, i),
                _ => {}
            }
            if let Some(s) = low.record {
                self.submit_record(s, lane, &at, &mut p)?;
            }
        }
        ranges.end();
        if let Some(t) = timer {
            if let Timer::Cupti(c) = &t {
                self.instr.cupti_mark = c.mark;
            }
            self.instr.timing.push(t.into_timed());
        }
        p.total_ns = ns(t_all);
        add_profile(&mut self.profile, &p);
        Ok(())
    }

    /// The fault layer: what the fault plan injects at this op, if anything.
    fn inject(&self, call_no: u64, at: &StepAt) -> Result<()> {
        match self.faults.at(at.rank, at.i, call_no) {
            Some(Fault::Panic) => panic!("injected panic at {}", at.desc()),
            Some(Fault::Stall) => {
                Err(at
                    .board
                    .stall(at.gen, at.rank, &format!("injected stall at {}", at.desc())))
            }
            Some(Fault::Fail) => Err(at.cuda(CudaError {
                call: "injected",
                message: "injected failure of the driver call".into(),
            })),
            Some(Fault::Delay { ms }) => {
                std::thread::sleep(Duration::from_millis(u64::from(ms)));
                Ok(())
            }
            _ => Ok(()),
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

    /// Record signal `s` on `lane` and tell the other ranks' threads.
    fn submit_record(
        &self,
        s: SignalId,
        lane: usize,
        at: &StepAt,
        p: &mut IssueProfile,
    ) -> Result<()> {
        let ev = self
            .event_of(at.plan, s.0)
            .ok_or_else(|| Error::internal("event pool too small"))?;
        let t = Instant::now();
        self.lanes[lane].record(ev).map_err(|e| at.cuda(e))?;
        p.record_ns += ns(t);
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
            Work::Mark => return Ok(()),
            Work::Copy { src, dst, bytes } => {
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
            Work::Reduce {
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
                let k = &kernels()?.0;
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
            Work::Exchange { peer, .. } => {
                let k = &kernels()?.1;
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
            }
        }
        p.kernel_ns += ns(t);
        Ok(())
    }

    /// The operands of a lowered exchange, in this rank's buffer table.
    fn exchange_operands(
        &self,
        work: &Work,
        elem: usize,
        scalar: u64,
    ) -> Result<kernels::ExchangeOperands<'_, 'id>> {
        let Work::Exchange {
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
