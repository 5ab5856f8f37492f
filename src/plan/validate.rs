//! The static checks of a plan (see [`Plan::validate`]).
//!
//! * **Structure**: every region inside its buffer, copy and reduce operands
//!   of equal length, no partial aliasing, nothing writes a send buffer, an
//!   in-place plan never touches one, exchange kernels come in mirrored
//!   pairs, every signal recorded exactly once by its declared owner and
//!   lane, flags used only by exchanges.
//! * **No deadlock**: issuing every rank's ops in list order, each waiting
//!   for its signals (the CPU backend's behaviour, the strictest of all
//!   backends), always makes progress.
//! * **No race**: two accesses of one element, one a write, are ordered by
//!   happens-before (in-lane order plus signals, vector clocks).
//! * **Bracketed**: everything touching rank q's memory happens after q's
//!   Begin (fenced plans) and before q's End.
//! * **Data flow**: symbolic execution ([`SymMem`]) ends with every output
//!   element holding exactly the right input elements, each once,
//!   pre-multiplied once and post-divided once where the annotations say so.
//!
//! Race and bracket checks need a vector clock per op part, so they run for
//! plans of at most `RACE_CHECK_MAX_RANKS` ranks; larger plans get every
//! other check.

use super::interp::{self, parts, Access, Effect, SymMem, Val};
use super::ir::{
    Buf, Collective, Kernel, KernelKind, Lane, Op, OpKind, Plan, Region, SignalId, SignalKind,
    LANES,
};

/// Plans with more ranks skip the race and bracket checks (memory grows
/// with ranks squared).
pub(crate) const RACE_CHECK_MAX_RANKS: usize = 64;

/// A part of an op, located: (rank, op index, part index).
type PartId = (usize, usize, usize);

impl Plan {
    /// Every check of the module doc; the first failure as text.
    pub fn validate(&self) -> Result<(), String> {
        self.check_structure()?;
        let order = self.issue_order()?;
        if self.ranks() <= RACE_CHECK_MAX_RANKS {
            let hb = HappensBefore::new(self, &order);
            let acc = check_races(self, &hb)?;
            self.check_bracketed(&hb, &acc)?;
        }
        if !self.probe {
            self.check_dataflow(&order)?;
        }
        // Last: a dropped wait is better reported as the race it causes.
        self.check_signal_marks()
    }

    /// Structural checks (first bullet of the module doc).
    pub(crate) fn check_structure(&self) -> Result<(), String> {
        let name = &self.name;
        let n = self.ranks();
        if self.ops.len() != n {
            return Err(format!("{name}: {} op lists for {n} ranks", self.ops.len()));
        }
        if let Some(root) = self.shape.collective.root().filter(|&r| r >= n) {
            return Err(format!("{name}: broadcast from rank {root} of {n}"));
        }
        // The kernel step that raises each flag: (its rank, the step).
        let mut raisers: Vec<Option<(usize, &Op)>> = vec![None; self.signals.len()];
        for (q, ops) in self.ops.iter().enumerate() {
            for o in ops {
                if let OpKind::Kernel(k) = &o.kind {
                    for st in &k.steps {
                        if let Some(slot) = st.signal.and_then(|s| raisers.get_mut(s.0)) {
                            *slot = Some((q, st));
                        }
                    }
                }
            }
        }
        let mut recorded = vec![0u32; self.signals.len()];
        let mut record = |s: SignalId,
                          r: usize,
                          lane: Lane,
                          kind: SignalKind|
         -> Result<(), String> {
            let sig = self
                .signals
                .get(s.0)
                .ok_or_else(|| format!("{name}: rank {r} records unknown signal {}", s.0))?;
            if sig.owner != r || sig.lane != lane || sig.kind != kind {
                return Err(format!(
                    "{name}: signal {} recorded by rank {r} lane {} as {kind:?}, declared rank {} lane {} {:?}",
                    s.0,
                    lane.name(),
                    sig.owner,
                    sig.lane.name(),
                    sig.kind
                ));
            }
            recorded[s.0] += 1;
            Ok(())
        };
        for (r, ops) in self.ops.iter().enumerate() {
            for (i, op) in ops.iter().enumerate() {
                let at = || format!("{name}: rank {r} op {i} ({})", op.kind.name());
                for w in &op.waits {
                    match self.signals.get(w.0) {
                        None => return Err(format!("{}: waits on unknown signal {}", at(), w.0)),
                        Some(s) if s.kind != SignalKind::Event => {
                            return Err(format!("{}: waits on flag {} outside a kernel", at(), w.0))
                        }
                        _ => {}
                    }
                }
                if let Some(s) = op.signal {
                    record(s, r, op.lane, SignalKind::Event)?;
                }
                self.check_effects(r, &op.kind, &at)?;
                match &op.kind {
                    OpKind::Copy { from, to, .. } if r != *from && r != *to => {
                        return Err(format!("{}: copies between two other ranks", at()))
                    }
                    OpKind::Kernel(k) => {
                        for (j, step) in k.steps.iter().enumerate() {
                            if let Some(s) = step.signal {
                                record(s, r, op.lane, SignalKind::Flag)
                                    .map_err(|m| format!("{} step {j}: {m}", at()))?;
                            }
                        }
                        self.check_kernel(r, op.lane, k, &raisers, &at)?;
                    }
                    _ => {}
                }
            }
        }
        if let Some(s) = recorded.iter().position(|&k| k != 1) {
            return Err(format!("{name}: signal {s} recorded {} times", recorded[s]));
        }
        Ok(())
    }

    /// [`Plan::check_structure`] of what op `kind` of rank `r` touches:
    /// ranks, buffers and ranges that exist, never a send buffer written
    /// (nor touched in place), and each effect well formed. `at` names the op.
    fn check_effects(
        &self,
        r: usize,
        kind: &OpKind,
        at: &dyn Fn() -> String,
    ) -> Result<(), String> {
        let n = self.ranks();
        let cap = |b: Buf| match b {
            Buf::Send => self.shape.send_len(),
            Buf::Recv => self.shape.recv_len(),
            Buf::Scratch => self.scratch_len,
            Buf::Lines => self.lines_len,
        };
        // LL slots carry flags in their words on a device: only an LL
        // kernel's steps may touch them.
        let in_ll = matches!(kind, OpKind::Kernel(k) if k.kind.uses_lines());
        for e in interp::effects(r, kind) {
            for a in e.accesses() {
                if a.rank >= n {
                    return Err(format!("{}: touches rank {} of {n}", at(), a.rank));
                }
                let c = cap(a.region.buf);
                if a.region.range.start > a.region.range.end || a.region.range.end > c {
                    return Err(format!(
                        "{}: {}[{:?}] on rank {} outside its {c} elements",
                        at(),
                        a.region.buf.name(),
                        a.region.range,
                        a.rank
                    ));
                }
                if a.region.buf == Buf::Lines && !in_ll {
                    return Err(format!(
                        "{}: touches rank {}'s LL slots outside an LL kernel",
                        at(),
                        a.rank
                    ));
                }
                if a.write && a.region.buf == Buf::Send {
                    return Err(format!("{}: writes rank {}'s send buffer", at(), a.rank));
                }
                if self.shape.in_place && a.region.buf == Buf::Send {
                    return Err(format!("{}: in-place plan touches a send buffer", at()));
                }
            }
            check_effect(&e).map_err(|m| format!("{}: {m}", at()))?;
        }
        Ok(())
    }

    /// [`Plan::check_structure`] of kernel `k` of rank `r` on `lane`: on
    /// the compute lane, and its steps keep the contract of its
    /// [`KernelKind`]. Both kinds are made of *puts* (a copy from this rank
    /// into another rank's slots, scratch for an exchange and LL slots for
    /// an LL ring, that raises a flag and waits for none)
    /// and *receives* (a reduce or copy on this rank that waits for exactly
    /// the flag of the put that filled the slot it reads, made by the rank
    /// this kind receives from). An exchange is one put to its peer and one
    /// receive from it that reduces the put's input; an LL ring's puts go to
    /// the right neighbour and its receives come from the left one. `at`
    /// names the op.
    fn check_kernel(
        &self,
        r: usize,
        lane: Lane,
        k: &Kernel,
        raisers: &[Option<(usize, &Op)>],
        at: &dyn Fn() -> String,
    ) -> Result<(), String> {
        if lane != Lane::Compute {
            return Err(format!("{}: a kernel runs on the compute lane", at()));
        }
        let n = self.ranks();
        // (the rank puts go to, the rank receives come from, the buffer its
        // slots are in), by kind.
        let (right, left, slots) = match k.kind {
            KernelKind::LlRing => ((r + 1) % n, (r + n - 1) % n, Buf::Lines),
            KernelKind::SimpleRing => ((r + 1) % n, (r + n - 1) % n, Buf::Scratch),
            KernelKind::LlOneShot => {
                if n != 2 || k.steps.len() != 2 {
                    return Err(format!(
                        "{}: an LL one-shot is one put and one receive on 2 ranks",
                        at()
                    ));
                }
                (1 - r, 1 - r, Buf::Lines)
            }
            KernelKind::Rail => {
                let (right, left) = self
                    .check_rail(r, k)
                    .map_err(|m| format!("{}: {m}", at()))?;
                (right, left, Buf::Scratch)
            }
            KernelKind::Exchange => {
                let peer = match k.steps.first().map(|s| &s.kind) {
                    Some(OpKind::Copy { to, .. }) => *to,
                    _ => r,
                };
                let shape_ok = k.steps.len() == 2
                    && peer != r
                    && peer < n
                    && match (&k.steps[0].kind, &k.steps[1].kind) {
                        (OpKind::Copy { src, .. }, OpKind::Reduce { a, .. }) => src == a,
                        _ => false,
                    };
                if !shape_ok {
                    return Err(format!(
                        "{}: an exchange is a put of its input to another rank, then a reduce of that input with what the peer put",
                        at()
                    ));
                }
                (peer, peer, Buf::Scratch)
            }
        };
        if k.kind != KernelKind::Rail && k.group.is_some() {
            return Err(format!("{}: only a rail's all-reduce has a group", at()));
        }
        let put_of = |s: SignalId| raisers.get(s.0).copied().flatten();
        // A rail's put into its right member may wait for that member's
        // Begin (found once per kernel, not per wait).
        let right_begin = match k.kind {
            KernelKind::Rail => self.ops.get(right).and_then(|ops| {
                ops.iter()
                    .find(|o| o.kind == OpKind::Begin)
                    .and_then(|o| o.signal)
            }),
            _ => None,
        };
        let may_wait = |w: &SignalId| right_begin.is_some() && Some(*w) == right_begin;
        for (j, step) in k.steps.iter().enumerate() {
            let at = || format!("{} step {j} ({})", at(), step.kind.name());
            let is_put = matches!(&step.kind, OpKind::Copy { to, .. } if *to != r);
            for w in &step.waits {
                match self.signals.get(w.0) {
                    Some(_) if is_put && may_wait(w) => {}
                    Some(s) if s.kind == SignalKind::Flag && s.owner != r => {}
                    Some(_) => {
                        return Err(format!(
                            "{}: waits on signal {}, not a flag of another rank",
                            at(),
                            w.0
                        ))
                    }
                    None => return Err(format!("{}: waits on unknown signal {}", at(), w.0)),
                }
            }
            match &step.kind {
                OpKind::Copy { from, to, dst, .. } if *to != r => {
                    if *from != r || *to != right || dst.buf != slots {
                        return Err(format!(
                            "{}: a put goes from this rank into rank {right}'s {}",
                            at(),
                            slots.name()
                        ));
                    }
                    let waits_ok = step.waits.iter().all(may_wait);
                    if step.signal.is_none() || !waits_ok {
                        return Err(format!(
                            "{}: a put raises a flag and waits for none (a rail's, at most for its member's Begin)",
                            at()
                        ));
                    }
                }
                OpKind::Copy { src: slot, .. } | OpKind::Reduce { b: slot, .. } => {
                    let local = match &step.kind {
                        OpKind::Copy { from, to, .. } => *from == r && *to == r,
                        OpKind::Reduce { b_rank, .. } => *b_rank == r,
                        _ => false,
                    };
                    let [w] = step.waits[..] else {
                        return Err(format!("{}: a receive waits for one flag", at()));
                    };
                    let filled = put_of(w)
                        .filter(|(q, _)| *q == left)
                        .and_then(|(_, p)| match &p.kind {
                            OpKind::Copy { dst, .. } => Some(dst),
                            _ => None,
                        });
                    if !local || filled != Some(slot) {
                        return Err(format!(
                            "{}: a receive reads, on this rank, the slot rank {left}'s put filled",
                            at()
                        ));
                    }
                    // Its output against the slot: check_effect; its input
                    // here (a reduce's first operand is not checked there).
                    if matches!(&step.kind, OpKind::Reduce { a, .. } if a.overlaps(slot)) {
                        return Err(format!(
                            "{}: a receive's slot overlaps its input or output",
                            at()
                        ));
                    }
                }
                other => {
                    return Err(format!(
                        "{}: a kernel's steps are copies and reduces, not {}",
                        at(),
                        other.name()
                    ))
                }
            }
        }
        Ok(())
    }

    /// The rail of rank `r`'s [`KernelKind::Rail`] op `k`: its group is
    /// this rank's rail of the plan's nodes (`per_node`), in node order,
    /// and its regions are this rank's, of one length. Returns the right
    /// and left members.
    fn check_rail(&self, r: usize, k: &Kernel) -> Result<(usize, usize), String> {
        let n = self.ranks();
        let Some(g) = self.per_node.filter(|&g| g > 0 && n % g == 0) else {
            return Err("a rail's all-reduce in a plan without nodes".into());
        };
        let Some(group) = &k.group else {
            return Err("a rail's all-reduce without its group".into());
        };
        let rail: Vec<usize> = (0..n / g).map(|m| m * g + r % g).collect();
        if group.members != rail {
            return Err(format!(
                "a rail's members {:?}, not rank {r}'s rail {rail:?}",
                group.members
            ));
        }
        if group.src.len() != group.dst.len()
            || [&group.src, &group.dst].iter().any(|x| x.buf == Buf::Lines)
        {
            return Err("a rail's group is two regions of one length, not LL slots".into());
        }
        // The steps read this rank's contribution (or its partial sums, in
        // the destination) and write only the destination.
        let within = |a: &Region, b: &Region| {
            a.buf == b.buf && b.range.start <= a.range.start && a.range.end <= b.range.end
        };
        let mut written: Vec<std::ops::Range<usize>> = Vec::new();
        let (mut pre, mut post) = (false, false);
        for st in &k.steps {
            let ok = match &st.kind {
                OpKind::Copy { to, src, .. } if *to != r => {
                    within(src, &group.src) || within(src, &group.dst)
                }
                OpKind::Copy { dst, .. } | OpKind::Reduce { dst, .. } => {
                    written.push(dst.range.clone());
                    within(dst, &group.dst)
                }
                _ => true,
            };
            if !ok {
                return Err(format!(
                    "a rail's step ({}) outside its group's regions",
                    st.kind.name()
                ));
            }
            if let OpKind::Reduce { step, .. } = &st.kind {
                pre |= step.pre_a;
                post |= step.post;
            }
        }
        // What a network library computes in its place is what the steps
        // compute: the whole destination, with the same pre- and post-ops.
        written.sort_by_key(|x| (x.start, x.end));
        written.dedup();
        let mut end = group.dst.range.start;
        for w in written.iter().filter(|w| !w.is_empty()) {
            if w.start > end {
                break;
            }
            end = end.max(w.end);
        }
        if !group.dst.is_empty() && end < group.dst.range.end {
            return Err(format!(
                "a rail's steps write {}[{}..{end}] of its group's {}[{:?}]",
                group.dst.buf.name(),
                group.dst.range.start,
                group.dst.buf.name(),
                group.dst.range
            ));
        }
        if k.steps
            .iter()
            .any(|s| matches!(s.kind, OpKind::Reduce { .. }))
            && (pre != group.step.pre_a || post != group.step.post)
        {
            return Err(format!(
                "a rail's group takes the pre-op {} and the post-op {}, its steps {pre} and {post}",
                group.step.pre_a, group.step.post
            ));
        }
        let (node, k) = (r / g, n / g);
        Ok((
            ((node + 1) % k) * g + r % g,
            ((node + k - 1) % k) * g + r % g,
        ))
    }

    /// Each signal's `remote` mark says whether a rank other than its
    /// owner waits on it, and a signal anyone outside the owner's lane waits
    /// on is `needed`: backends trust both marks (one process per GPU
    /// records only remote signals as interprocess events; no backend
    /// records an unneeded one).
    pub(crate) fn check_signal_marks(&self) -> Result<(), String> {
        for (i, (s, (needed, remote))) in self.signals.iter().zip(self.signal_marks()).enumerate() {
            if s.remote != remote {
                return Err(format!(
                    "{}: signal {i} of rank {} is marked {}remote, but {} other rank waits on it",
                    self.name,
                    s.owner,
                    if s.remote { "" } else { "not " },
                    if remote { "an" } else { "no" }
                ));
            }
            if needed && !s.needed {
                return Err(format!(
                    "{}: signal {i} of rank {} is waited on outside its lane but not marked needed",
                    self.name, s.owner
                ));
            }
        }
        Ok(())
    }

    /// The parts of every op in an order in which every rank issues its ops
    /// in list order, each waiting for its signals (the CPU backend's rank
    /// threads do exactly that), or an error naming where that deadlocks.
    pub fn issue_order(&self) -> Result<Vec<PartId>, String> {
        let n = self.ranks();
        let rank_parts: Vec<Vec<(usize, usize)>> = self
            .ops
            .iter()
            .enumerate()
            .map(|(r, ops)| {
                ops.iter()
                    .enumerate()
                    .flat_map(|(i, op)| (0..parts(r, op).len()).map(move |k| (i, k)))
                    .collect()
            })
            .collect();
        let total: usize = rank_parts.iter().map(Vec::len).sum();
        let mut done = vec![false; self.signals.len()];
        let mut pos = vec![0usize; n];
        let mut order = Vec::with_capacity(total);
        while order.len() < total {
            let mut progressed = false;
            for r in 0..n {
                while let Some(&(i, k)) = rank_parts[r].get(pos[r]) {
                    let part = parts(r, &self.ops[r][i])[k];
                    if !part
                        .waits
                        .iter()
                        .all(|s| done.get(s.0).copied().unwrap_or(false))
                    {
                        break;
                    }
                    if let Some(s) = part.signal {
                        if let Some(d) = done.get_mut(s.0) {
                            *d = true;
                        }
                    }
                    order.push((r, i, k));
                    pos[r] += 1;
                    progressed = true;
                }
            }
            if !progressed {
                let stuck: Vec<String> = (0..n)
                    .filter_map(|r| {
                        rank_parts[r].get(pos[r]).map(|&(i, k)| {
                            let part = parts(r, &self.ops[r][i])[k];
                            format!(
                                "rank {r} op {i} ({}) waits for {:?}",
                                self.ops[r][i].kind.name(),
                                part.waits
                                    .iter()
                                    .filter(|s| !done[s.0])
                                    .map(|s| s.0)
                                    .collect::<Vec<_>>()
                            )
                        })
                    })
                    .collect();
                return Err(format!("{}: deadlock: {}", self.name, stuck.join("; ")));
            }
        }
        Ok(order)
    }

    fn check_bracketed(&self, hb: &HappensBefore, acc: &[Acc]) -> Result<(), String> {
        for q in 0..self.ranks() {
            let find = |k: &OpKind| {
                self.ops[q]
                    .iter()
                    .position(|o| &o.kind == k)
                    .and_then(|i| hb.id((q, i, 0)))
            };
            let (Some(b), Some(e)) = (find(&OpKind::Begin), find(&OpKind::End)) else {
                return Err(format!("{}: rank {q} lacks Begin or End", self.name));
            };
            // Reads of a send buffer are exempt: no collective writes one.
            for a in acc
                .iter()
                .filter(|a| a.rank == q && (a.write || a.buf != Buf::Send))
            {
                if (self.fenced && !hb.before(b, a.node)) || !hb.before(a.node, e) {
                    let (r, i, _) = hb.parts[a.node];
                    return Err(format!(
                        "{}: rank {r} op {i} ({}) touches rank {q}'s {} outside rank {q}'s Begin..End",
                        self.name,
                        self.ops[r][i].kind.name(),
                        a.buf.name()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Symbolic execution in `order`; then every output element must hold
    /// what the collective promises.
    fn check_dataflow(&self, order: &[PartId]) -> Result<(), String> {
        let name = &self.name;
        let s = self.shape;
        let n = s.ranks;
        let mut mem = SymMem::new(self);
        for &(r, i, k) in order {
            if let Some(e) = parts(r, &self.ops[r][i])[k].effect {
                interp::apply(&mut mem, &e).map_err(|m| {
                    format!(
                        "{name}: rank {r} op {i} ({}): {m}",
                        self.ops[r][i].kind.name()
                    )
                })?;
            }
        }
        let reduces = s.collective.reduces() && n > 1;
        for r in 0..n {
            let out = s.output(r);
            for (range, v) in mem.read(r, &out) {
                let expect = |p: usize| -> Vec<(u32, i64)> {
                    // (rank, input index - position) of each expected term.
                    let local = p - out.range.start;
                    match s.collective {
                        Collective::AllReduce => (0..n as u32).map(|q| (q, 0)).collect(),
                        Collective::ReduceScatter => (0..n)
                            .map(|q| {
                                let idx = (r * s.count + local) as i64;
                                (q as u32, idx - p as i64)
                            })
                            .collect(),
                        Collective::AllGather => {
                            let j = p / s.count.max(1);
                            let idx = (p - j * s.count) as i64;
                            vec![(j as u32, idx - p as i64)]
                        }
                        Collective::Broadcast { root } => vec![(root as u32, 0)],
                    }
                };
                let bad = |why: &str| {
                    Err(format!(
                        "{name}: rank {r} {}[{:?}] {why}: holds {}",
                        out.buf.name(),
                        range,
                        describe_full(&v)
                    ))
                };
                let Some(terms) = &v.terms else {
                    return bad("was never written");
                };
                // Every element of a segment has the same terms relative to
                // its position, and the expected terms change only at chunk
                // boundaries: checking both ends covers the segment.
                let mut got: Vec<(u32, i64)> = terms.iter().map(|t| (t.rank, t.delta)).collect();
                got.sort_unstable();
                for p in [range.start, range.end - 1] {
                    let mut want = expect(p);
                    want.sort_unstable();
                    if got != want {
                        return bad("holds the wrong input elements");
                    }
                }
                if terms.iter().any(|t| t.count != 1) {
                    return bad("counts an input more than once");
                }
                let scaled = u16::from(reduces);
                if terms.iter().any(|t| t.scaled != scaled) {
                    return bad(if reduces {
                        "has an input never marked as pre-multiplied (or marked twice)"
                    } else {
                        "has a scaled input without a reduction"
                    });
                }
                if v.post != scaled {
                    return bad("was not marked complete exactly once (post-divide)");
                }
            }
        }
        Ok(())
    }

    /// Check a sequence of calls issued one after another on the same ranks
    /// and lanes for deadlocks and for races *between* calls (each plan's
    /// own checks are [`Plan::validate`]). This is what makes an unfenced
    /// plan safe after the predecessors it was designed for.
    pub fn validate_sequence(plans: &[&Plan]) -> Result<(), String> {
        let Some(first) = plans.first() else {
            return Ok(());
        };
        let n = first.ranks();
        let mut all = Plan {
            name: plans
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(" ; "),
            shape: first.shape,
            ops: vec![Vec::new(); n],
            signals: Vec::new(),
            scratch_len: plans.iter().map(|p| p.scratch_len).max().unwrap_or(0),
            lines_len: plans.iter().map(|p| p.lines_len).max().unwrap_or(0),
            fenced: false,
            probe: true,
            per_node: first.per_node,
            memo: Default::default(),
        };
        // The union of the buffers of all shapes.
        for p in plans {
            if p.ranks() != n {
                return Err("sequence mixes rank counts".into());
            }
            if p.shape.recv_len() > all.shape.recv_len()
                || p.shape.send_len() > all.shape.send_len()
            {
                all.shape = p.shape;
            }
            let base = all.signals.len();
            let map = |s: SignalId| SignalId(s.0 + base);
            all.signals.extend(p.signals.iter().copied());
            for (r, ops) in p.ops.iter().enumerate() {
                all.ops[r].extend(ops.iter().map(|o| {
                    let mut o = o.clone();
                    o.waits = o.waits.iter().map(|&w| map(w)).collect();
                    o.signal = o.signal.map(map);
                    if let OpKind::Kernel(k) = &mut o.kind {
                        for st in &mut k.steps {
                            st.waits = st.waits.iter().map(|&w| map(w)).collect();
                            st.signal = st.signal.map(map);
                        }
                    }
                    o
                }));
            }
        }
        let order = all.issue_order()?;
        let hb = HappensBefore::new(&all, &order);
        check_races(&all, &hb).map(|_| ())
    }
}

fn describe_full(v: &Val) -> String {
    match &v.terms {
        None => "nothing".into(),
        Some(t) => {
            let terms: Vec<String> = t
                .iter()
                .map(|x| {
                    format!(
                        "{}x rank {} input[p{:+}]{}",
                        x.count,
                        x.rank,
                        x.delta,
                        if x.scaled > 0 { " (scaled)" } else { "" }
                    )
                })
                .collect();
            format!("{} (post-divided {}x)", terms.join(" + "), v.post)
        }
    }
}

/// Operand rules of one effect: equal lengths, no partial aliasing.
fn check_effect(e: &Effect<'_>) -> Result<(), String> {
    match *e {
        Effect::Copy { from, src, to, dst } => {
            if src.len() != dst.len() {
                return Err("copy with unequal lengths".into());
            }
            if from == to && src.overlaps(dst) {
                return Err("overlapping local copy".into());
            }
        }
        Effect::Reduce {
            rank,
            dst,
            a,
            b_rank,
            b,
            ..
        } => {
            if dst.len() != a.len() || dst.len() != b.len() {
                return Err("reduce with unequal lengths".into());
            }
            if dst.overlaps(a) && dst != a {
                return Err("reduce output partially overlaps its first operand".into());
            }
            if b_rank == rank && dst.overlaps(b) {
                return Err("reduce output overlaps its second operand".into());
            }
        }
    }
    Ok(())
}

/// Happens-before between op parts, as vector clocks over the (rank, lane)
/// chains.
struct HappensBefore {
    parts: Vec<PartId>,
    /// Index of each part in `parts`, per rank and op: first part's index
    /// (`None` for an op not in the order).
    first: Vec<Vec<Option<usize>>>,
    /// (chain, sequence number in the chain) per part.
    seat: Vec<(usize, u32)>,
    clocks: Vec<Vec<u32>>,
}

impl HappensBefore {
    fn new(plan: &Plan, order: &[PartId]) -> HappensBefore {
        let n = plan.ranks();
        let chains = n * LANES;
        let mut first: Vec<Vec<Option<usize>>> =
            plan.ops.iter().map(|ops| vec![None; ops.len()]).collect();
        // The part that records each signal, and each chain's last part, so
        // far in the order.
        let mut producer: Vec<Option<usize>> = vec![None; plan.signals.len()];
        let mut last: Vec<Option<usize>> = vec![None; chains];
        let mut next_seq = vec![0u32; chains];
        let mut seat = Vec::with_capacity(order.len());
        let mut clocks: Vec<Vec<u32>> = Vec::with_capacity(order.len());
        for (id, &(r, i, k)) in order.iter().enumerate() {
            let op = &plan.ops[r][i];
            let part = parts(r, op)[k];
            let chain = r * LANES + op.lane as usize;
            next_seq[chain] += 1;
            let seq = next_seq[chain];
            let mut vc = match last[chain] {
                None => vec![0u32; chains],
                Some(l) => clocks[l].clone(),
            };
            for w in part.waits {
                if let Some(&Some(p)) = producer.get(w.0) {
                    for (x, y) in vc.iter_mut().zip(&clocks[p]) {
                        *x = (*x).max(*y);
                    }
                }
            }
            vc[chain] = seq;
            clocks.push(vc);
            seat.push((chain, seq));
            last[chain] = Some(id);
            if k == 0 {
                first[r][i] = Some(id);
            }
            if let Some(s) = part.signal {
                if let Some(p) = producer.get_mut(s.0) {
                    *p = Some(id);
                }
            }
        }
        HappensBefore {
            parts: order.to_vec(),
            first,
            seat,
            clocks,
        }
    }

    /// Node id of a part (`None` for an op not in the order).
    fn id(&self, (r, i, k): PartId) -> Option<usize> {
        self.first[r][i].map(|f| f + k)
    }

    /// Whether node `a` happens before (or is) node `b`.
    fn before(&self, a: usize, b: usize) -> bool {
        let (chain, seq) = self.seat[a];
        self.clocks[b][chain] >= seq
    }
}

/// A non-empty memory access of a part.
struct Acc {
    node: usize,
    rank: usize,
    buf: Buf,
    range: std::ops::Range<usize>,
    write: bool,
}

/// All accesses, after checking that conflicting ones are ordered.
fn check_races(plan: &Plan, hb: &HappensBefore) -> Result<Vec<Acc>, String> {
    let mut acc: Vec<Acc> = Vec::new();
    for (node, &(r, i, k)) in hb.parts.iter().enumerate() {
        if let Some(e) = parts(r, &plan.ops[r][i])[k].effect {
            for Access {
                rank,
                region,
                write,
            } in e.accesses()
            {
                if !region.is_empty() {
                    acc.push(Acc {
                        node,
                        rank,
                        buf: region.buf,
                        range: region.range.clone(),
                        write,
                    });
                }
            }
        }
    }
    // Sweep each (rank, buffer) by range start.
    let mut idx: Vec<usize> = (0..acc.len()).collect();
    idx.sort_by_key(|&i| (acc[i].rank, acc[i].buf, acc[i].range.start));
    let mut active: Vec<usize> = Vec::new();
    let mut key = None;
    for &i in &idx {
        let a = &acc[i];
        if key != Some((a.rank, a.buf)) {
            active.clear();
            key = Some((a.rank, a.buf));
        }
        active.retain(|&j| acc[j].range.end > a.range.start);
        for &j in &active {
            let b = &acc[j];
            if (a.write || b.write)
                && a.node != b.node
                && !hb.before(a.node, b.node)
                && !hb.before(b.node, a.node)
            {
                let (ra, ia, _) = hb.parts[a.node];
                let (rb, ib, _) = hb.parts[b.node];
                return Err(format!(
                    "{}: race on rank {} {}[{:?}] between rank {ra} op {ia} ({}) and rank {rb} op {ib} ({})",
                    plan.name,
                    a.rank,
                    a.buf.name(),
                    a.range.start.max(b.range.start)..a.range.end.min(b.range.end),
                    plan.ops[ra][ia].kind.name(),
                    plan.ops[rb][ib].kind.name()
                ));
            }
        }
        active.push(i);
    }
    Ok(acc)
}

#[cfg(test)]
mod tests;
