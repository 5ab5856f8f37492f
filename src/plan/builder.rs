//! Building plans: allocates signals and appends ops. Algorithms use it;
//! nothing else does.

use super::ir::{
    Buf, Kernel, KernelKind, Label, Lane, Op, OpKind, Plan, ReduceStep, Region, Shape, Signal,
    SignalId, SignalKind,
};

/// Builds one [`Plan`].
#[derive(Debug)]
pub(crate) struct PlanBuilder {
    plan: Plan,
}

impl PlanBuilder {
    /// A builder of the plan `name` for `shape`, with no op yet.
    pub fn new(name: impl Into<String>, shape: Shape) -> Self {
        PlanBuilder {
            plan: Plan {
                name: name.into(),
                shape,
                ops: vec![Vec::new(); shape.ranks],
                signals: Vec::new(),
                scratch_len: 0,
                lines_len: 0,
                fenced: true,
                probe: false,
                per_node: None,
                memo: Default::default(),
            },
        }
    }

    /// Say that the plan is built for nodes of `g` consecutive ranks
    /// ([`Plan::per_node`]).
    pub fn nodes(&mut self, g: usize) {
        self.plan.per_node = Some(g);
    }

    /// The shape the plan is for.
    pub fn shape(&self) -> &Shape {
        &self.plan.shape
    }

    /// Mark the plan as unfenced (see [`Plan::fenced`]).
    pub(crate) fn unfenced(&mut self) {
        self.plan.fenced = false;
    }

    /// Make every rank's scratch at least `len` elements.
    pub fn scratch(&mut self, len: usize) {
        self.plan.scratch_len = self.plan.scratch_len.max(len);
    }

    /// Make every rank's LL slots ([`Buf::Lines`]) at least `len` elements.
    pub fn lines(&mut self, len: usize) {
        self.plan.lines_len = self.plan.lines_len.max(len);
    }

    fn new_signal(&mut self, owner: usize, lane: Lane, kind: SignalKind) -> SignalId {
        self.plan.signals.push(Signal {
            owner,
            lane,
            kind,
            needed: false,
            remote: false,
        });
        SignalId(self.plan.signals.len() - 1)
    }

    /// Append an op to rank `r`; if `signal` it records a new event signal,
    /// which is returned.
    pub fn push(
        &mut self,
        r: usize,
        lane: Lane,
        kind: OpKind,
        waits: Vec<SignalId>,
        signal: bool,
        label: Label,
    ) -> Option<SignalId> {
        let signal = signal.then(|| self.new_signal(r, lane, SignalKind::Event));
        self.plan.ops[r].push(Op {
            lane,
            kind,
            waits,
            signal,
            label,
        });
        signal
    }

    /// Append an op to rank `r` that records a new event signal, and
    /// return that signal.
    pub(crate) fn push_signalled(
        &mut self,
        r: usize,
        lane: Lane,
        kind: OpKind,
        waits: Vec<SignalId>,
        label: Label,
    ) -> SignalId {
        let signal = self.new_signal(r, lane, SignalKind::Event);
        self.plan.ops[r].push(Op {
            lane,
            kind,
            waits,
            signal: Some(signal),
            label,
        });
        signal
    }

    /// A new flag raised by a step of rank `r`'s kernel ([`OpKind::Kernel`]).
    pub fn flag(&mut self, r: usize) -> SignalId {
        self.new_signal(r, Lane::Compute, SignalKind::Flag)
    }

    /// Append a signalled copy-engine copy of `src` on rank `from` into `dst`
    /// on rank `to`, issued by rank `issuer` (`from`: a push, `to`: a pull);
    /// returns its signal (every copy has one).
    #[allow(clippy::too_many_arguments)]
    pub fn copy(
        &mut self,
        issuer: usize,
        lane: Lane,
        (from, src): (usize, Region),
        (to, dst): (usize, Region),
        waits: Vec<SignalId>,
        label: Label,
    ) -> SignalId {
        self.push_signalled(
            issuer,
            lane,
            OpKind::Copy { from, to, src, dst },
            waits,
            label,
        )
    }

    /// Append a reduce `dst = a (op) b` on rank `r`, compute lane; `b` lives
    /// on `b_rank`. Returns its signal when `signal` is set.
    #[allow(clippy::too_many_arguments)]
    pub fn reduce(
        &mut self,
        r: usize,
        dst: Region,
        a: Region,
        (b_rank, b): (usize, Region),
        step: ReduceStep,
        waits: Vec<SignalId>,
        signal: bool,
        label: Label,
    ) -> Option<SignalId> {
        self.push(
            r,
            Lane::Compute,
            OpKind::Reduce {
                dst,
                a,
                b_rank,
                b,
                step,
            },
            waits,
            signal,
            label,
        )
    }

    /// Append the two exchange kernels of ranks `r0` and `r1`
    /// ([`KernelKind::Exchange`]). `parts[i]` = (input, slot the peer
    /// pushes into on rank i, dst, waits) for rank `[r0, r1][i]`.
    pub(crate) fn exchange_pair(
        &mut self,
        ranks: [usize; 2],
        parts: [(Region, Region, Region, Vec<SignalId>); 2],
        step: ReduceStep,
        label: Label,
    ) {
        let pushed = [self.flag(ranks[0]), self.flag(ranks[1])];
        let [p0, p1] = parts;
        let slots = [p0.1.clone(), p1.1.clone()];
        for (i, (input, my_slot, dst, waits)) in [p0, p1].into_iter().enumerate() {
            let (me, peer) = (ranks[i], ranks[1 - i]);
            let step_op = |kind, waits, signal| Op {
                lane: Lane::Compute,
                kind,
                waits,
                signal,
                label: label.clone(),
            };
            let push = OpKind::Copy {
                from: me,
                to: peer,
                src: input.clone(),
                dst: slots[1 - i].clone(),
            };
            let reduce = OpKind::Reduce {
                dst,
                a: input,
                b_rank: me,
                b: my_slot,
                step,
            };
            self.plan.ops[me].push(Op {
                lane: Lane::Compute,
                kind: OpKind::Kernel(Kernel {
                    kind: KernelKind::Exchange,
                    steps: vec![
                        step_op(push, vec![], Some(pushed[i])),
                        step_op(reduce, vec![pushed[1 - i]], None),
                    ],
                    group: None,
                }),
                waits,
                signal: None,
                label: label.clone(),
            });
        }
    }

    /// Add `Begin` to every rank (compute lane); returns their signals.
    pub(crate) fn begin_all(&mut self) -> Vec<SignalId> {
        (0..self.plan.shape.ranks)
            .map(|r| self.push_signalled(r, Lane::Compute, OpKind::Begin, vec![], Label::default()))
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
    pub(crate) fn peek(&self) -> &Plan {
        &self.plan
    }

    /// Finish: mark which signals someone outside the producer's own lane
    /// waits for. What was computed from a [`peek`](Self::peek) of the
    /// unfinished plan is forgotten.
    pub fn finish(mut self) -> Plan {
        let marks = self.plan.signal_marks();
        for (s, (needed, remote)) in self.plan.signals.iter_mut().zip(marks) {
            s.needed = needed;
            s.remote = remote;
        }
        self.plan.memo = Default::default();
        self.plan
    }
}

/// Plans for one rank or zero elements: out of place, each rank copies its
/// input to its output (a local copy-engine copy); nothing else.
pub(crate) fn local_only(mut b: PlanBuilder, begin: &[SignalId]) -> Plan {
    let shape = *b.shape();
    for (r, &bg) in begin.iter().enumerate() {
        let mut end = vec![];
        let (input, output) = (shape.input(r), shape.output(r));
        if !shape.in_place && !input.is_empty() && shape.ranks == 1 {
            end.push(b.copy(
                r,
                Lane::Copy,
                (r, input),
                (r, output),
                vec![bg],
                Label {
                    note: "local copy",
                    ..Label::default()
                },
            ));
        }
        b.end(r, end);
    }
    b.finish()
}

/// Convenience: a region of `buf`.
pub fn region(buf: Buf, range: std::ops::Range<usize>) -> Region {
    Region::new(buf, range)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 26): a copy always records a signal, and the
    /// builder returns that signal, not an `Option` that a caller had to
    /// turn into a sentinel id (`SignalId(usize::MAX)`).
    #[test]
    fn a_copy_returns_its_own_signal() {
        let shape = Shape::all_reduce(2, 8, 4, false);
        let mut b = PlanBuilder::new("t", shape);
        let begin = b.begin_all();
        assert_eq!(begin, vec![SignalId(0), SignalId(1)]);
        let s = b.copy(
            0,
            Lane::Copy,
            (0, shape.input(0)),
            (1, shape.output(1)),
            vec![begin[0], begin[1]],
            Label::default(),
        );
        assert_eq!(s, SignalId(2));
        let plan = b.peek();
        assert_eq!(plan.ops[0].last().and_then(|op| op.signal), Some(s));
        assert_eq!(plan.signals[s.0].owner, 0);
        assert_eq!(plan.signals[s.0].lane, Lane::Copy);
        b.end(0, vec![s]);
        b.end(1, vec![s]);
        let plan = b.finish();
        assert!(plan
            .ops
            .iter()
            .flatten()
            .all(|op| op.waits.iter().all(|w| w.0 < plan.signals.len())));
    }

    /// The traffic is counted once per plan object: asked of the plan half
    /// built (one copy) and again of the finished plan (two copies), the
    /// finished plan reports both copies, and a clone counts afresh.
    #[test]
    fn a_peek_before_finish_does_not_fix_the_traffic() {
        let shape = Shape::all_reduce(2, 8, 4, false);
        let mut b = PlanBuilder::new("t", shape);
        let begin = b.begin_all();
        let s0 = b.copy(
            0,
            Lane::Copy,
            (0, shape.input(0)),
            (1, shape.output(1)),
            begin.clone(),
            Label::default(),
        );
        assert_eq!(b.peek().traffic()[0].sent, 32);
        let s1 = b.copy(
            1,
            Lane::Copy,
            (1, shape.input(1)),
            (0, shape.output(0)),
            begin,
            Label::default(),
        );
        b.end(0, vec![s0, s1]);
        b.end(1, vec![s0, s1]);
        let plan = b.finish();
        let t = plan.traffic();
        assert_eq!((t[0].sent, t[0].received), (32, 32));
        assert_eq!((t[1].sent, t[1].received), (32, 32));
        assert_eq!(plan.traffic(), t, "asked again");
        assert_eq!(plan.clone().traffic(), t, "a clone");
    }
}
