//! The plan: what each rank does in one collective, as a list of operations.
//!
//! An algorithm (ring, parameter server, one-shot) is a pure function that
//! builds a [`Plan`] from the [`schedule`](crate::schedule). A backend executes
//! any plan with the same three primitives the GPU has:
//!
//! * [`OpKind::Copy`]: a rank copies a region of its own memory into a region of
//!   another rank's memory (on the GPU: `cuMemcpyPeerAsync`, issued by the sender);
//! * [`OpKind::Reduce`]: `dst = a + b` on one rank's memory (the PTX kernel);
//! * [`OpKind::Begin`] / [`OpKind::End`]: markers that order the collective with
//!   what came before and after it on that rank.
//!
//! Each rank has two *lanes* (a copy lane and a compute lane; on the GPU two
//! streams). Operations in one lane of one rank run in order. Anything else is
//! ordered only by *signals*: an op may signal one [`SignalId`] when it
//! completes and may wait for any number of signals before it starts (on the
//! GPU: `cuEventRecord` / `cuStreamWaitEvent`). Each signal is recorded exactly
//! once per execution, by its owner rank.
//!
//! [`Plan::validate`] checks a plan without running it: that issuing every
//! rank's ops in list order cannot deadlock, that no two ops touching the same
//! memory (one of them writing) are unordered (a data race on the GPU), that
//! everything touching a rank's memory lies between its `Begin` and `End`, and,
//! by symbolic execution, that every rank ends with every input summed exactly
//! once.

use crate::schedule::Phase;
use std::ops::Range;

/// The per-rank buffers a plan refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Buf {
    /// The input of an out-of-place collective (never written).
    Send,
    /// The output (and, in place, also the input).
    Recv,
    /// Receive scratch for incoming partial data.
    Scratch,
}

impl Buf {
    pub const ALL: [Buf; 3] = [Buf::Send, Buf::Recv, Buf::Scratch];
    pub fn index(self) -> usize {
        self as usize
    }
    pub fn name(self) -> &'static str {
        match self {
            Buf::Send => "send",
            Buf::Recv => "recv",
            Buf::Scratch => "scratch",
        }
    }
}

/// A range of elements in one of a rank's buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    pub buf: Buf,
    pub range: Range<usize>,
}

impl Region {
    pub fn new(buf: Buf, range: Range<usize>) -> Self {
        Region { buf, range }
    }
    pub fn len(&self) -> usize {
        self.range.len()
    }
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
}

/// The in-order queues of a rank: compute, and one or two copy queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    Compute = 0,
    Copy = 1,
    /// A second copy queue (a second stream, so a second copy engine can run).
    Copy2 = 2,
}

pub const LANES: usize = 3;

/// A one-shot completion flag recorded by one rank and waited on by others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SignalId(pub usize);

/// What an op does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpKind {
    /// Start of the collective on this rank (compute lane).
    Begin,
    /// Copy `src` on rank `from` into `dst` on rank `to`. The issuing rank is
    /// one of the two: `from` for a push (the ring), `to` for a pull (reads
    /// only another rank's send buffer, which no collective writes). A local
    /// copy has `from == to`.
    Copy {
        from: usize,
        to: usize,
        src: Region,
        dst: Region,
    },
    /// `dst = a + b`, all on this rank; `dst` may equal `a` exactly.
    Reduce { dst: Region, a: Region, b: Region },
    /// `dst = a + b` where `a` and `dst` are on this rank and `b` is rank
    /// `from`'s send buffer, read by the reduce kernel itself through peer
    /// access (a pull fused with the reduce: no copy call, no event).
    ReducePeer {
        dst: Region,
        a: Region,
        from: usize,
        b: Region,
    },
    /// End of the collective on this rank (compute lane).
    End,
}

/// Where an op sits in the algorithm, for traces and error messages.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Label {
    pub phase: Option<Phase>,
    pub step: usize,
    pub chunk: usize,
    pub slice: usize,
    pub note: &'static str,
}

/// One operation of one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub lane: Lane,
    pub kind: OpKind,
    pub waits: Vec<SignalId>,
    pub signal: Option<SignalId>,
    pub label: Label,
}

/// A whole collective: per-rank op lists plus buffer requirements.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Algorithm name and path, e.g. `ring`, `ring:pipe4`, `ps`, `oneshot`.
    pub name: String,
    pub ranks: usize,
    pub count: usize,
    pub in_place: bool,
    /// `ops[r]` is rank r's op list, in issue order.
    pub ops: Vec<Vec<Op>>,
    /// Owner (recording rank) of each signal.
    pub signal_owner: Vec<usize>,
    /// Scratch elements each rank needs.
    pub scratch_len: usize,
    /// Lane of the op that records each signal.
    pub signal_lane: Vec<Lane>,
    /// Whether anyone outside the producer's own (rank, lane) waits on the
    /// signal. Backends need not record the others: in-lane order covers them.
    pub signal_needed: Vec<bool>,
    /// Fenced plans order everything that touches a rank's memory after that
    /// rank's Begin and before its End, so any sequence of them is safe. An
    /// unfenced plan is only safe after specific predecessors (see
    /// [`Plan::validate_sequence`]).
    pub fenced: bool,
    /// The algorithm that built the plan, if any.
    pub algo: Option<crate::algo::Algo>,
}

impl Plan {
    /// True when signal `s` is recorded on rank `r`'s `lane`, so a wait on it
    /// from that lane is already implied by in-lane order.
    pub fn same_lane(&self, s: usize, r: usize, lane: Lane) -> bool {
        self.signal_owner.get(s) == Some(&r) && self.signal_lane.get(s) == Some(&lane)
    }

    /// Error unless the plan was built for `ranks` ranks.
    pub fn check_ranks(&self, ranks: usize) -> crate::error::Result<()> {
        if self.ranks != ranks {
            return Err(crate::error::Error::Plan(format!(
                "{}: plan for {} ranks on a backend of {ranks}",
                self.name, self.ranks
            )));
        }
        Ok(())
    }

    /// Number of signals.
    pub fn signals(&self) -> usize {
        self.signal_owner.len()
    }

    /// Bytes each rank sends to *other* ranks, and receives from them.
    pub fn traffic(&self, elem_size: usize) -> Vec<Traffic> {
        let mut t = vec![Traffic::default(); self.ranks];
        for (rank, ops) in self.ops.iter().enumerate() {
            for op in ops {
                let moved = match &op.kind {
                    OpKind::Copy { from, to, src, .. } => Some((*from, *to, src.len())),
                    // The reducing rank (whose list holds the op) receives.
                    OpKind::ReducePeer { from, b, .. } => Some((*from, rank, b.len())),
                    _ => None,
                };
                if let Some((from, to, len)) = moved {
                    if from != to {
                        let b = (len * elem_size) as u64;
                        t[from].sent += b;
                        t[to].received += b;
                    }
                }
            }
        }
        t
    }
}

/// One rank's push and reduce that a backend may run as a single kernel
/// (the flag one-shot, [`crate::algo::Algo::OneShotFlag`]): see
/// [`Plan::flag_exchange`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagExchange {
    /// Index of the push (a `Copy` into the peer's scratch) in the rank's ops.
    pub push: usize,
    /// Index of the reduce (`dst = input + own scratch slot`), right after it.
    pub reduce: usize,
    /// The other rank.
    pub peer: usize,
    /// The peer's push signal, which the reduce waits for: the kernel's flag.
    pub peer_signal: SignalId,
    /// This rank's input (read by both the push and the reduce).
    pub input: Region,
    /// Where the push lands in the peer's scratch.
    pub peer_slot: Region,
    /// Where the peer's push lands in this rank's scratch (the reduce's `b`).
    pub my_slot: Region,
    /// The reduce's output.
    pub dst: Region,
}

/// Bytes moved by one rank in one collective.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Traffic {
    pub sent: u64,
    pub received: u64,
}

/// Helper to build plans: allocates signals and appends ops.
#[derive(Debug)]
pub struct PlanBuilder {
    plan: Plan,
}

impl PlanBuilder {
    pub fn new(name: impl Into<String>, ranks: usize, count: usize, in_place: bool) -> Self {
        PlanBuilder {
            plan: Plan {
                name: name.into(),
                ranks,
                count,
                in_place,
                ops: vec![Vec::new(); ranks],
                signal_owner: Vec::new(),
                scratch_len: 0,
                signal_lane: Vec::new(),
                signal_needed: Vec::new(),
                fenced: true,
                algo: None,
            },
        }
    }

    /// The buffer that holds a rank's input: `Recv` in place, `Send` otherwise.
    pub fn input(&self) -> Buf {
        if self.plan.in_place {
            Buf::Recv
        } else {
            Buf::Send
        }
    }

    /// Mark the plan as unfenced (see [`Plan::fenced`]).
    pub fn unfenced(&mut self) {
        self.plan.fenced = false;
    }

    /// Record which algorithm built the plan.
    pub fn set_algo(&mut self, a: crate::algo::Algo) {
        self.plan.algo = Some(a);
    }

    pub fn scratch(&mut self, len: usize) {
        self.plan.scratch_len = self.plan.scratch_len.max(len);
    }

    /// Append an op to rank `r`; if `signal` is true it records a new signal, returned.
    pub fn push(
        &mut self,
        r: usize,
        lane: Lane,
        kind: OpKind,
        waits: Vec<SignalId>,
        signal: bool,
        label: Label,
    ) -> Option<SignalId> {
        let signal = signal.then(|| {
            self.plan.signal_owner.push(r);
            SignalId(self.plan.signal_owner.len() - 1)
        });
        self.plan.ops[r].push(Op {
            lane,
            kind,
            waits,
            signal,
            label,
        });
        signal
    }

    /// Append a signalled copy of `src` (rank `r`) into `dst` on rank `to`.
    #[allow(clippy::too_many_arguments)]
    pub fn copy(
        &mut self,
        r: usize,
        lane: Lane,
        to: usize,
        src: Region,
        dst: Region,
        waits: Vec<SignalId>,
        label: Label,
    ) -> Option<SignalId> {
        self.push(
            r,
            lane,
            OpKind::Copy {
                from: r,
                to,
                src,
                dst,
            },
            waits,
            true,
            label,
        )
    }

    /// Append a signalled pull: rank `r` copies `src` on rank `from` (its send
    /// buffer) into its own `dst`.
    #[allow(clippy::too_many_arguments)]
    pub fn pull(
        &mut self,
        r: usize,
        lane: Lane,
        from: usize,
        src: Region,
        dst: Region,
        waits: Vec<SignalId>,
        label: Label,
    ) -> Option<SignalId> {
        self.push(
            r,
            lane,
            OpKind::Copy {
                from,
                to: r,
                src,
                dst,
            },
            waits,
            true,
            label,
        )
    }

    /// Add `Begin` to every rank; returns their signals.
    pub fn begin_all(&mut self) -> Vec<SignalId> {
        (0..self.plan.ranks)
            .filter_map(|r| {
                self.push(
                    r,
                    Lane::Compute,
                    OpKind::Begin,
                    vec![],
                    true,
                    Label::default(),
                )
            })
            .collect()
    }

    /// Add `End` to rank `r`, waiting for `waits`.
    pub fn end(&mut self, r: usize, waits: Vec<SignalId>) {
        let mut w = waits;
        w.sort();
        w.dedup();
        self.push(r, Lane::Compute, OpKind::End, w, false, Label::default());
    }

    /// The plan built so far.
    pub fn finish_ref(&self) -> &Plan {
        &self.plan
    }

    pub fn finish(mut self) -> Plan {
        let p = &mut self.plan;
        p.signal_lane = vec![Lane::Compute; p.signal_owner.len()];
        p.signal_needed = vec![false; p.signal_owner.len()];
        for ops in &p.ops {
            for op in ops {
                if let Some(s) = op.signal {
                    p.signal_lane[s.0] = op.lane;
                }
            }
        }
        for (r, ops) in p.ops.iter().enumerate() {
            for op in ops {
                for w in &op.waits {
                    if !p.same_lane(w.0, r, op.lane) {
                        p.signal_needed[w.0] = true;
                    }
                }
            }
        }
        self.plan
    }
}

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

/// A memory access of an op: (rank, buffer, range, is_write).
fn accesses(r: usize, kind: &OpKind) -> Vec<(usize, Buf, Range<usize>, bool)> {
    match kind {
        OpKind::Copy { from, to, src, dst } => vec![
            (*from, src.buf, src.range.clone(), false),
            (*to, dst.buf, dst.range.clone(), true),
        ],
        OpKind::Reduce { dst, a, b } => vec![
            (r, a.buf, a.range.clone(), false),
            (r, b.buf, b.range.clone(), false),
            (r, dst.buf, dst.range.clone(), true),
        ],
        OpKind::ReducePeer { dst, a, from, b } => vec![
            (r, a.buf, a.range.clone(), false),
            (*from, b.buf, b.range.clone(), false),
            (r, dst.buf, dst.range.clone(), true),
        ],
        OpKind::Begin | OpKind::End => vec![],
    }
}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

impl Plan {
    /// Global op ids in an order in which issuing can proceed, or an error if
    /// some rank would block forever (a deadlock on the host).
    pub fn issue_order(&self) -> Result<Vec<(usize, usize)>, String> {
        let mut done = vec![false; self.signals()];
        let mut pos = vec![0usize; self.ranks];
        let total: usize = self.ops.iter().map(Vec::len).sum();
        let mut order = Vec::with_capacity(total);
        while order.len() < total {
            let mut progressed = false;
            for r in 0..self.ranks {
                while let Some(op) = self.ops[r].get(pos[r]) {
                    if op.waits.iter().all(|s| done[s.0]) {
                        if let Some(s) = op.signal {
                            done[s.0] = true;
                        }
                        order.push((r, pos[r]));
                        pos[r] += 1;
                        progressed = true;
                    } else {
                        break;
                    }
                }
            }
            if !progressed {
                let stuck: Vec<String> = (0..self.ranks)
                    .filter(|&r| pos[r] < self.ops[r].len())
                    .map(|r| format!("rank {r} at op {}", pos[r]))
                    .collect();
                return Err(format!(
                    "{}: issue deadlock: {}",
                    self.name,
                    stuck.join(", ")
                ));
            }
        }
        Ok(order)
    }

    /// For a flag one-shot plan, rank `r`'s push/reduce pair; `None` for any
    /// other plan (and for the trivial flag plans: one rank, or no elements).
    ///
    /// The pair is fused into one kernel only if the plan has exactly the
    /// shape whose event order the kernel reproduces: on the compute lane, a
    /// push of this rank's input into the peer's scratch, then the reduce of
    /// the input with the slot the peer's push fills, waiting for that push;
    /// the push signals are waited on by nobody else across lanes. Anything
    /// else with the flag algorithm is an error, never a silent fallback.
    pub fn flag_exchange(&self, r: usize) -> Result<Option<FlagExchange>, String> {
        if self.algo != Some(crate::algo::Algo::OneShotFlag) || self.ranks < 2 || self.count == 0 {
            return Ok(None);
        }
        let bad = |why: &str| format!("{}: rank {r}: not a flag exchange: {why}", self.name);
        if self.ranks != 2 || r >= 2 {
            return Err(bad("the kernel exchanges between exactly 2 ranks"));
        }
        let peer = 1 - r;
        // (index, src, dst, signal) of a rank's only push.
        let push_of = |q: usize| -> Result<(usize, Region, Region, SignalId), String> {
            let mut found = None;
            for (i, op) in self.ops[q].iter().enumerate() {
                if let OpKind::Copy { from, to, src, dst } = &op.kind {
                    let ok = found.is_none()
                        && *from == q
                        && *to != q
                        && dst.buf == Buf::Scratch
                        && op.lane == Lane::Compute;
                    match (ok, op.signal) {
                        (true, Some(sig)) => found = Some((i, src.clone(), dst.clone(), sig)),
                        _ => return Err(bad("expected one signalled compute-lane push")),
                    }
                }
            }
            found.ok_or_else(|| bad("no push"))
        };
        let (push, input, peer_slot, my_sig) = push_of(r)?;
        let (peer_push, _, peer_push_dst, peer_signal) = push_of(peer)?;
        let reduce = push + 1;
        let (dst, my_slot) = match self.ops[r].get(reduce) {
            Some(Op {
                lane: Lane::Compute,
                kind: OpKind::Reduce { dst, a, b },
                waits,
                ..
            }) if *a == input && *b == peer_push_dst && waits.contains(&peer_signal) => {
                (dst.clone(), b.clone())
            }
            _ => return Err(bad("the push is not followed by its reduce")),
        };
        let reduces = self.ops[r]
            .iter()
            .filter(|op| matches!(op.kind, OpKind::Reduce { .. } | OpKind::ReducePeer { .. }))
            .count();
        if reduces != 1 {
            return Err(bad("more than one reduce"));
        }
        // A push signal may be waited on only by the pusher's own compute
        // lane and by the partner's reduce: the kernel implies both.
        let allowed = |sig: SignalId, q: usize, i: usize, lane: Lane| {
            let (owner, partner, partner_reduce) = if sig == my_sig {
                (r, peer, peer_push + 1)
            } else {
                (peer, r, reduce)
            };
            (q == owner && lane == Lane::Compute) || (q == partner && i == partner_reduce)
        };
        for (q, ops) in self.ops.iter().enumerate() {
            for (i, op) in ops.iter().enumerate() {
                for &w in &op.waits {
                    if (w == my_sig || w == peer_signal) && !allowed(w, q, i, op.lane) {
                        return Err(bad("another op waits on a push"));
                    }
                }
            }
        }
        Ok(Some(FlagExchange {
            push,
            reduce,
            peer,
            peer_signal,
            input,
            peer_slot,
            my_slot,
            dst,
        }))
    }

    /// Full static check; see the module doc.
    pub fn validate(&self) -> Result<(), String> {
        let name = &self.name;
        // Signals: each recorded exactly once, by its owner.
        let mut recorded = vec![0u32; self.signals()];
        for (r, ops) in self.ops.iter().enumerate() {
            for op in ops {
                if let Some(s) = op.signal {
                    recorded[s.0] += 1;
                    if self.signal_owner[s.0] != r {
                        return Err(format!("{name}: signal {} recorded by the wrong rank", s.0));
                    }
                }
                for w in &op.waits {
                    if w.0 >= self.signals() {
                        return Err(format!("{name}: wait on unknown signal {}", w.0));
                    }
                }
                for (rank, buf, range, _) in accesses(r, &op.kind) {
                    let cap = match buf {
                        Buf::Scratch => self.scratch_len,
                        _ => self.count,
                    };
                    if rank >= self.ranks || range.end > cap || range.start > range.end {
                        return Err(format!(
                            "{name}: rank {r} op {op:?} touches {buf:?}[{range:?}] on rank {rank}, capacity {cap}"
                        ));
                    }
                }
                if let OpKind::Reduce { dst, a, b } = &op.kind {
                    if dst.len() != a.len() || dst.len() != b.len() {
                        return Err(format!("{name}: reduce with unequal lengths"));
                    }
                    let alias_a = dst.buf == a.buf && overlaps(&dst.range, &a.range);
                    if (alias_a && dst != a) || (dst.buf == b.buf && overlaps(&dst.range, &b.range))
                    {
                        return Err(format!(
                            "{name}: reduce with partially overlapping operands"
                        ));
                    }
                }
                if let OpKind::Copy { from, to, src, dst } = &op.kind {
                    if src.len() != dst.len() {
                        return Err(format!("{name}: copy with unequal lengths"));
                    }
                    if r != *from && r != *to {
                        return Err(format!(
                            "{name}: rank {r} issues a copy between two other ranks"
                        ));
                    }
                    if r != *from && src.buf != Buf::Send {
                        return Err(format!(
                            "{name}: rank {r} pulls from rank {from}'s {:?}, not its send buffer",
                            src.buf
                        ));
                    }
                    if from == to && src.buf == dst.buf && overlaps(&src.range, &dst.range) {
                        return Err(format!("{name}: overlapping local copy"));
                    }
                }
                if self.in_place && op_touches_send(r, &op.kind) {
                    return Err(format!("{name}: in-place plan touches the send buffer"));
                }
                if let OpKind::Copy { to, dst, .. } = &op.kind {
                    if dst.buf == Buf::Send {
                        return Err(format!("{name}: rank {r} writes rank {to}'s send buffer"));
                    }
                }
                if let OpKind::Reduce { dst, .. } = &op.kind {
                    if dst.buf == Buf::Send {
                        return Err(format!("{name}: rank {r} writes its send buffer"));
                    }
                }
                if let OpKind::ReducePeer { dst, a, from, b } = &op.kind {
                    if dst.buf == Buf::Send || b.buf != Buf::Send || *from == r {
                        return Err(format!(
                            "{name}: rank {r}: a peer reduce reads another rank's send buffer and writes a local non-send buffer"
                        ));
                    }
                    if dst.len() != a.len() || dst.len() != b.len() {
                        return Err(format!("{name}: peer reduce with unequal lengths"));
                    }
                    if dst.buf == a.buf && overlaps(&dst.range, &a.range) && dst != a {
                        return Err(format!(
                            "{name}: peer reduce with partially overlapping operands"
                        ));
                    }
                }
            }
        }
        if let Some(s) = recorded.iter().position(|&k| k != 1) {
            return Err(format!("{name}: signal {s} recorded {} times", recorded[s]));
        }

        let order = self.issue_order()?;
        let happens = self.happens_before(&order);
        let ids = self.op_ids();
        let acc = self.check_races(&happens)?;

        // Everything touching rank q's memory lies between Begin(q) and End(q)
        // (for an unfenced plan: before End(q)).
        for q in 0..self.ranks {
            let begin = self.ops[q].iter().position(|o| o.kind == OpKind::Begin);
            let end = self.ops[q].iter().position(|o| o.kind == OpKind::End);
            let (Some(b), Some(e)) = (begin, end) else {
                return Err(format!("{name}: rank {q} lacks Begin or End"));
            };
            let (b, e) = (ids[q][b], ids[q][e]);
            // Reads of a send buffer are exempt: no collective writes one
            // (checked above), so they cannot conflict with anything.
            for a in acc.iter().filter(|a| a.1 == q && (a.4 || a.2 != Buf::Send)) {
                if (self.fenced && !happens(b, a.0)) || !happens(a.0, e) {
                    return Err(format!(
                        "{name}: op {} touches rank {q} outside its Begin..End",
                        a.0
                    ));
                }
            }
        }

        self.check_dataflow(&order)
    }

    /// All non-empty memory accesses as (op id, rank, buffer, range, write),
    /// after checking that conflicting ones are ordered.
    #[allow(clippy::type_complexity)]
    fn check_races(
        &self,
        happens: &impl Fn(usize, usize) -> bool,
    ) -> Result<Vec<(usize, usize, Buf, Range<usize>, bool)>, String> {
        let name = &self.name;
        let ids = self.op_ids();
        let mut acc: Vec<(usize, usize, Buf, Range<usize>, bool)> = Vec::new();
        for (r, ops) in self.ops.iter().enumerate() {
            for (i, op) in ops.iter().enumerate() {
                for (rank, buf, range, w) in accesses(r, &op.kind) {
                    if !range.is_empty() {
                        acc.push((ids[r][i], rank, buf, range, w));
                    }
                }
            }
        }
        for (i, a) in acc.iter().enumerate() {
            for b in &acc[i + 1..] {
                if a.0 != b.0
                    && a.1 == b.1
                    && a.2 == b.2
                    && (a.4 || b.4)
                    && overlaps(&a.3, &b.3)
                    && !happens(a.0, b.0)
                    && !happens(b.0, a.0)
                {
                    return Err(format!(
                        "{name}: race on rank {} {:?}[{:?}] between ops {} and {}",
                        a.1, a.2, a.3, a.0, b.0
                    ));
                }
            }
        }
        Ok(acc)
    }

    /// Check a sequence of calls, issued one after another on the same ranks
    /// and lanes, for deadlocks and for races *between* calls (each plan's own
    /// checks are [`Plan::validate`]). This is what makes an unfenced plan
    /// safe after the predecessors it was designed for.
    pub fn validate_sequence(plans: &[&Plan]) -> Result<(), String> {
        let Some(first) = plans.first() else {
            return Ok(());
        };
        let n = first.ranks;
        let mut all = Plan {
            name: plans
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(" ; "),
            ranks: n,
            count: plans.iter().map(|p| p.count).max().unwrap_or(0),
            in_place: false,
            ops: vec![Vec::new(); n],
            signal_owner: Vec::new(),
            scratch_len: plans.iter().map(|p| p.scratch_len).max().unwrap_or(0),
            signal_lane: Vec::new(),
            signal_needed: Vec::new(),
            fenced: false,
            algo: None,
        };
        for p in plans {
            if p.ranks != n {
                return Err("sequence mixes rank counts".into());
            }
            let base = all.signal_owner.len();
            all.signal_owner.extend(&p.signal_owner);
            all.signal_lane.extend(&p.signal_lane);
            all.signal_needed.extend(&p.signal_needed);
            for (r, ops) in p.ops.iter().enumerate() {
                all.ops[r].extend(ops.iter().map(|o| Op {
                    waits: o.waits.iter().map(|w| SignalId(w.0 + base)).collect(),
                    signal: o.signal.map(|s| SignalId(s.0 + base)),
                    ..o.clone()
                }));
            }
        }
        let order = all.issue_order()?;
        let happens = all.happens_before(&order);
        all.check_races(&happens).map(|_| ())
    }

    fn op_ids(&self) -> Vec<Vec<usize>> {
        let mut next = 0;
        self.ops
            .iter()
            .map(|ops| {
                ops.iter()
                    .map(|_| {
                        next += 1;
                        next - 1
                    })
                    .collect()
            })
            .collect()
    }

    /// Transitive happens-before as a closure over op ids.
    fn happens_before(&self, order: &[(usize, usize)]) -> impl Fn(usize, usize) -> bool {
        let ids = self.op_ids();
        let total = order.len();
        let words = total.div_ceil(64);
        // pred[x] = bitset of ops that happen before x (inclusive of x).
        let mut pred = vec![vec![0u64; words]; total];
        let mut producer = vec![usize::MAX; self.signals()];
        let mut last_in_lane = vec![[usize::MAX; LANES]; self.ranks];
        for &(r, i) in order {
            let op = &self.ops[r][i];
            let id = ids[r][i];
            let mut set = vec![0u64; words];
            set[id / 64] |= 1 << (id % 64);
            let mut deps: Vec<usize> = op.waits.iter().map(|s| producer[s.0]).collect();
            let prev = last_in_lane[r][op.lane as usize];
            if prev != usize::MAX {
                deps.push(prev);
            }
            for d in deps {
                for (w, p) in set.iter_mut().zip(&pred[d]) {
                    *w |= p;
                }
            }
            pred[id] = set;
            last_in_lane[r][op.lane as usize] = id;
            if let Some(s) = op.signal {
                producer[s.0] = id;
            }
        }
        move |a: usize, b: usize| pred[b][a / 64] & (1 << (a % 64)) != 0
    }

    /// Symbolic execution: each element holds a count of every rank's input.
    fn check_dataflow(&self, order: &[(usize, usize)]) -> Result<(), String> {
        let n = self.ranks;
        type Val = Vec<u16>;
        let unit = |src: usize| -> Val { (0..n).map(|s| u16::from(s == src)).collect() };
        let zero: Val = vec![0; n];
        let mut mem: Vec<[Vec<Val>; 3]> = (0..n)
            .map(|r| {
                let input = vec![unit(r); self.count];
                let poison = vec![vec![u16::MAX; n]; self.count];
                if self.in_place {
                    [poison.clone(), input, vec![zero.clone(); self.scratch_len]]
                } else {
                    [input, poison, vec![zero.clone(); self.scratch_len]]
                }
            })
            .collect();
        for &(r, i) in order {
            match &self.ops[r][i].kind {
                OpKind::Copy { from, to, src, dst } => {
                    let data: Vec<Val> = mem[*from][src.buf.index()][src.range.clone()].to_vec();
                    mem[*to][dst.buf.index()][dst.range.clone()].clone_from_slice(&data);
                }
                OpKind::Reduce { dst, a, b } | OpKind::ReducePeer { dst, a, b, .. } => {
                    let b_rank = match &self.ops[r][i].kind {
                        OpKind::ReducePeer { from, .. } => *from,
                        _ => r,
                    };
                    for k in 0..dst.len() {
                        let x = &mem[r][a.buf.index()][a.range.start + k];
                        let y = &mem[b_rank][b.buf.index()][b.range.start + k];
                        let v: Val = x.iter().zip(y).map(|(p, q)| p.saturating_add(*q)).collect();
                        mem[r][dst.buf.index()][dst.range.start + k] = v;
                    }
                }
                OpKind::Begin | OpKind::End => {}
            }
        }
        for (r, m) in mem.iter().enumerate() {
            for (e, v) in m[Buf::Recv.index()].iter().enumerate() {
                if v.iter().any(|&k| k != 1) {
                    return Err(format!(
                        "{}: rank {r} element {e} holds input counts {v:?}, expected each input once",
                        self.name
                    ));
                }
            }
            if !self.in_place
                && m[Buf::Send.index()]
                    .iter()
                    .any(|v| v.iter().enumerate().any(|(s, &k)| k != u16::from(s == r)))
            {
                return Err(format!("{}: rank {r} send buffer modified", self.name));
            }
        }
        Ok(())
    }
}

fn op_touches_send(r: usize, kind: &OpKind) -> bool {
    accesses(r, kind).iter().any(|a| a.1 == Buf::Send)
}
