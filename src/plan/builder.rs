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
mod tests;
