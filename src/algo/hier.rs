//! The hierarchical all-reduce (`hier:G`), as a [`Plan`].
//!
//! The ranks are grouped into nodes of `G` consecutive ranks (`K = N/G`
//! nodes; rank `r` is on node `r / G` with local index `r % G`). Rank `l`
//! of every node forms rail `l` (`K` ranks, one per node). Three phases:
//!
//! 1. **Reduce-scatter inside each node**: a ring over the node's `G` ranks
//!    on `G` chunks of the buffer ([`ChunkLayout::new`]); local index `l`
//!    ends with the node's sum of chunk `owned(l) = l + 1 mod G` in its
//!    output. `hier:G:mpi` reads instead (in place, and out of place from
//!    `READS_OUT_OF_PLACE_FROM` bytes): each rank reduces its chunk of
//!    its node peers' inputs where they lie, one reduce per peer (its
//!    rails run on host memory, where a node's ranks share it), which
//!    saves the ring's copy of each chunk into a neighbour's slot.
//! 2. **All-reduce between the nodes on each rail**: a ring over the rail's
//!    `K` ranks on that node chunk, cut into `K` sub-chunks (reduce-scatter
//!    then all-gather). Only this phase crosses the node boundary: each rank
//!    sends `2(K-1)` sub-chunks of `D/(GK)`, `2(K-1)/K·D/G` bytes
//!    ([`Plan::node_traffic`]).
//! 3. **All-gather inside each node** of the `G` complete chunks.
//!
//! Every op is a copy between ranks or a reduce, as in [`super::ring`];
//! nodes are only a grouping of the ranks here (all of them share the
//! machine), so the validator, the trace, and the CPU and CUDA backends run
//! the plan unchanged. `G = N` is the ring inside one node; `G = 1` the ring
//! over the rails alone.
//!
//! [`Plan::node_traffic`]: crate::plan::Plan::node_traffic

use super::{oneshot::all_reduce_only, Algorithm, Path, StaticPath};
use crate::plan::{
    local_only, Buf, Group, Kernel, KernelKind, Label, Lane, Op, OpKind, Plan, PlanBuilder,
    ReduceStep, Region, Shape, SignalId,
};
use crate::schedule::{ChunkLayout, Phase, Ring as RingSchedule};
use std::ops::Range;
use std::sync::Arc;

/// The hierarchical all-reduce with `per_node` ranks per node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hier {
    /// `G`: ranks per node (at least 1).
    pub per_node: usize,
    /// How each rail's phase runs.
    pub rail: Rail,
}

/// How `hier:G` runs each rail's all-reduce (phase 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rail {
    /// `hier:G`: a ring of copies and reduces over the rail, like any
    /// other step of the plan (over nodes, MPI point-to-point carries the
    /// copies).
    #[default]
    Ring,
    /// `hier:G:mpi`: one op per member ([`KernelKind::Rail`](crate::plan::KernelKind::Rail)).
    /// Between nodes the CPU backend hands it to MPI's own
    /// `MPI_Allreduce` on the rail's communicator; on one machine its
    /// steps (a ring of puts into scratch slots) run. The node's
    /// reduce-scatter reads the node peers' inputs directly.
    Mpi,
}

impl Algorithm for Hier {
    fn name(&self) -> String {
        match self.rail {
            Rail::Ring => format!("hier:{}", self.per_node),
            Rail::Mpi => format!("hier:{}:mpi", self.per_node),
        }
    }

    fn supports(&self, shape: &Shape) -> Result<(), String> {
        all_reduce_only(&self.name(), shape)?;
        let (n, g) = (shape.ranks, self.per_node);
        if g == 0 || n % g != 0 {
            return Err(format!(
                "nodes of {g} ranks do not divide {n} ranks (hier:G needs G to divide N)"
            ));
        }
        Ok(())
    }

    fn supports_at(&self, at: &super::Placement) -> Result<(), String> {
        if self.rail != Rail::Mpi {
            return Ok(());
        }
        if !at.host {
            return Err(format!(
                "{}: its rail's all-reduce runs on host memory (the CPU backend), as MPI's all-reduce between nodes",
                self.name()
            ));
        }
        match at.per_node {
            Some(p) if p != self.per_node => Err(format!(
                "{}: its rails are the ranks with the same index on nodes of {} ranks, but {}",
                self.name(),
                self.per_node,
                if p == 0 {
                    "the job's nodes are not blocks of consecutive ranks of one size".to_string()
                } else {
                    format!("the job's nodes have {p} ranks")
                }
            )),
            _ => Ok(()),
        }
    }

    fn path(&self, shape: &Shape) -> Box<dyn Path> {
        StaticPath::boxed(plan(shape, self.per_node, self.rail))
    }

    fn load(&self) -> Option<super::Load> {
        Some(super::Load::Hier {
            per_node: self.per_node,
        })
    }

    fn cost(&self) -> Option<super::cost::Cost> {
        Some(super::cost::Cost::Hier {
            per_node: self.per_node,
        })
    }
}

/// `hier:G` and `hier:G:mpi` with `G` in 1..=1024 ranks per node.
pub fn parse(s: &str) -> Option<Result<Arc<dyn Algorithm>, String>> {
    let g = s.strip_prefix("hier")?;
    let (g, rail) = match g.strip_suffix(":mpi") {
        Some(g) => (g, Rail::Mpi),
        None => (g, Rail::Ring),
    };
    Some(
        g.strip_prefix(':')
            .and_then(|g| g.parse::<usize>().ok())
            .filter(|g| (1..=1024).contains(g))
            .map(|per_node| Arc::new(Hier { per_node, rail }) as Arc<dyn Algorithm>)
            .ok_or_else(|| {
                format!(
                    "bad node size in {s:?} (hier:G or hier:G:mpi with G in 1..=1024 ranks per node)"
                )
            }),
    )
}

/// Per ring member, per step: the signal of its op, if the step had one
/// (an empty chunk has none).
type Steps = Vec<Vec<Option<SignalId>>>;

/// Build the plan for `shape` with nodes of `per_node` ranks, each rail's
/// phase run as `rail` says. A node size
/// that does not divide the rank count is refused by [`Hier::supports`];
/// here it is taken as one node of all ranks (the ring), never a panic.
pub fn plan(shape: &Shape, per_node: usize, rail: Rail) -> Plan {
    let n = shape.ranks;
    let g = if per_node == 0 || n % per_node != 0 {
        n.max(1)
    } else {
        per_node
    };
    let mut b = PlanBuilder::new(Hier { per_node: g, rail }.name(), *shape);
    b.nodes(g);
    let begin = b.begin_all();
    if n == 1 || shape.count == 0 {
        return local_only(b, &begin);
    }
    let k = n / g;
    let nodes = ChunkLayout::new(shape.count, g, shape.elem_size);
    let intra = RingSchedule::all_reduce(g);
    // The node chunk rail l works on, and its K sub-chunks.
    let rails: Vec<ChunkLayout> = (0..g)
        .map(|l| ChunkLayout::new(nodes.len(intra.owned_chunk(l)), k, shape.elem_size))
        .collect();
    let rail_max = rails.iter().map(ChunkLayout::max_len).max().unwrap_or(0);
    // The ring over a rail reuses two receive slots; a rail's op writes
    // each of its 2(K-1) slots once per call.
    let rail_slots = match rail {
        Rail::Ring => 2,
        Rail::Mpi => 2 * (k - 1),
    };
    // `hier:G:mpi`'s node reduce-scatter reads the node peers' inputs
    // (see `reads_inputs`); otherwise the node ring's two receive slots
    // come first in scratch, then the rail's.
    let direct = rail == Rail::Mpi && reads_inputs(shape);
    let base = if direct { 0 } else { 2 * nodes.max_len() };
    b.scratch(base + rail_slots.max(2) * rail_max);
    let mut ctx = Ctx {
        b: &mut b,
        shape: *shape,
        begin: &begin,
        fenced: vec![vec![false; n]; n],
        last_copy: vec![None; n],
    };
    let node_ring = |m: usize| -> Vec<usize> { (0..g).map(|l| m * g + l).collect() };
    let rail_ring = |l: usize| -> Vec<usize> { (0..k).map(|m| m * g + l).collect() };
    let whole = |c: usize| nodes.range(c);
    // Phase 1: reduce-scatter inside each node, from the inputs.
    let mut ready: Vec<Vec<SignalId>> = vec![Vec::new(); n];
    for m in 0..k {
        let members = node_ring(m);
        let ring = Sub {
            members: &members,
            chunk: &whole,
            slots: 0..nodes.max_len(),
            note: "node",
        };
        if direct {
            let red = ctx.reduce_scatter_direct(&ring, k == 1);
            for (i, &r) in members.iter().enumerate() {
                ready[r].extend(red[i]);
            }
            continue;
        }
        let red = ctx.reduce_scatter(&ring, Operand::Input, k == 1, &[]);
        for (i, &r) in members.iter().enumerate() {
            ready[r].extend(red[i].iter().rev().find_map(|x| *x));
        }
    }
    // Phase 2: all-reduce between the nodes on each rail's node chunk.
    let mut rail_ops: Vec<Option<SignalId>> = vec![None; n];
    for (l, layout) in rails.iter().enumerate() {
        if rail == Rail::Mpi {
            let members = rail_ring(l);
            let node_chunk = nodes.range(intra.owned_chunk(l));
            if k == 1 || node_chunk.is_empty() {
                continue;
            }
            let slots = base..base + rail_max;
            let op = RailOp {
                members: &members,
                node_chunk,
                layout,
                slots,
                own: if g == 1 {
                    Operand::Input
                } else {
                    Operand::Output
                },
            };
            for (i, s) in op.build(&mut ctx, &ready).into_iter().enumerate() {
                let r = members[i];
                rail_ops[r] = Some(s);
                ready[r] = vec![s];
            }
            continue;
        }
        let members = rail_ring(l);
        let start = nodes.range(intra.owned_chunk(l)).start;
        let sub = |c: usize| {
            let r = layout.range(c);
            start + r.start..start + r.end
        };
        let ring = Sub {
            members: &members,
            chunk: &sub,
            slots: base..base + rail_max,
            note: "rail",
        };
        let own = if g == 1 {
            Operand::Input
        } else {
            Operand::Output
        };
        let ready_in: Vec<Vec<SignalId>> = members.iter().map(|&r| ready[r].clone()).collect();
        let red = ctx.reduce_scatter(&ring, own, true, &ready_in);
        let red_ready: Vec<Vec<SignalId>> = red
            .iter()
            .map(|v| v.iter().rev().find_map(|x| *x).into_iter().collect())
            .collect();
        let copied = ctx.all_gather(&ring, &red_ready);
        for (i, &r) in members.iter().enumerate() {
            ready[r].extend(red_ready[i].iter().copied());
            // The sub-chunks that came in from the rail's left neighbour.
            let from = (i + k - 1) % k;
            ready[r].extend(copied[from].iter().flatten().copied());
        }
    }
    // Phase 3: all-gather inside each node of the complete node chunks.
    for m in 0..k {
        let members = node_ring(m);
        let ring = Sub {
            members: &members,
            chunk: &whole,
            slots: 0..0,
            note: "node",
        };
        let ready_in: Vec<Vec<SignalId>> = members.iter().map(|&r| ready[r].clone()).collect();
        ctx.all_gather(&ring, &ready_in);
    }
    let last_copy = ctx.last_copy;
    for r in 0..n {
        // End: this rank's own copies done (they read its memory), and the
        // copies into it (the last of each sender's in-order copy lane).
        let (node, l) = (r / g, r % g);
        let intra_left = node * g + (l + g - 1) % g;
        let rail_left = ((node + k - 1) % k) * g + l;
        // A rail's op is complete once its puts (reading this rank) and
        // the puts into this rank (its receives waited for them) are; the
        // rail's left member copies into this rank nowhere else, so over
        // nodes (`hier:G:mpi`) no End waits for another node.
        let rail_copy = match rail {
            Rail::Ring => last_copy[rail_left],
            Rail::Mpi => None,
        };
        let waits = [last_copy[r], last_copy[intra_left], rail_copy, rail_ops[r]]
            .into_iter()
            .flatten()
            .collect();
        b.end(r, waits);
    }
    b.finish()
}

/// From this many bytes a rank, `hier:G:mpi`'s node reduce-scatter reads
/// the node peers' inputs out of place too (in place at every size).
pub(crate) const READS_OUT_OF_PLACE_FROM: usize = 256 << 10;

/// Whether `hier:G:mpi`'s node reduce-scatter reads the node peers' inputs
/// (else it is the node ring, copies into slots). Always in place, where
/// each read waits for its peer's Begin in the plan. Out of place the
/// inputs are send buffers, and a rank process whose send buffer a peer
/// reads first waits (on the host) until that peer started the call
/// (`process::reads`): about 10 us a call with 4 rank processes on 2
/// cores, more than the copy it saves below a few hundred KiB (0.2 us at
/// 4 KiB, about 50 us at 1 MiB).
fn reads_inputs(shape: &Shape) -> bool {
    shape.in_place || shape.count.saturating_mul(shape.elem_size) >= READS_OUT_OF_PLACE_FROM
}

/// A rail's all-reduce as one op per member (`hier:G:mpi`): the ring over
/// the rail's members on the node chunk, cut into `K` sub-chunks, as
/// kernel steps (a put into the right member's slot of the step, a receive
/// from the left member's), and the op as a whole ([`Group`]).
struct RailOp<'a> {
    /// The members in rail order (one per node).
    members: &'a [usize],
    /// The node chunk the rail all-reduces (elements of the buffer).
    node_chunk: Range<usize>,
    /// Its `K` sub-chunks, relative to the node chunk.
    layout: &'a ChunkLayout,
    /// The scratch range of the first slot; slot `j` follows `j` lengths
    /// later.
    slots: Range<usize>,
    /// Where each member's contribution lies.
    own: Operand,
}

impl RailOp<'_> {
    /// Each member's op, after `ready[member]`; returns their signals.
    fn build(&self, ctx: &mut Ctx<'_>, ready: &[Vec<SignalId>]) -> Vec<SignalId> {
        let k = self.members.len();
        let ring = RingSchedule::all_reduce(k);
        let steps = ring.steps();
        let shape = ctx.shape;
        let pre = self.own == Operand::Input;
        let start = self.node_chunk.start;
        let sub = |c: usize| {
            let r = self.layout.range(c);
            start + r.start..start + r.end
        };
        let whole = |r: usize, op: Operand| match op {
            Operand::Input => shape.input(r),
            Operand::Output => shape.output(r),
        };
        let slot = |j: usize, c: usize| {
            let at = self.slots.start + j * self.slots.len();
            Region::new(Buf::Scratch, at..at + self.layout.len(c))
        };
        // Every put's flag first: a receive names its left member's.
        let flags: Vec<Vec<SignalId>> = self
            .members
            .iter()
            .map(|&r| (0..2 * steps).map(|_| ctx.b.flag(r)).collect())
            .collect();
        let mut out = Vec::with_capacity(k);
        for (i, &r) in self.members.iter().enumerate() {
            let (left, right) = (ring.left(i), ring.right(i));
            let mut st = Vec::with_capacity(4 * steps);
            for (j, phase, s) in (0..steps)
                .map(|s| (s, Phase::ReduceScatter, s))
                .chain((0..steps).map(|t| (steps + t, Phase::AllGather, t)))
            {
                let c = ring.send_chunk(phase, i, s);
                let src = whole(r, if j == 0 { self.own } else { Operand::Output }).sub(sub(c));
                st.push(Op {
                    lane: Lane::Compute,
                    kind: OpKind::Copy {
                        from: r,
                        to: self.members[right],
                        src,
                        dst: slot(j, c),
                    },
                    // The first put into the right member waits for its
                    // Begin (the later ones follow it in the kernel).
                    waits: if j == 0 {
                        vec![ctx.begin[self.members[right]]]
                    } else {
                        vec![]
                    },
                    signal: Some(flags[i][j]),
                    label: label(phase, s, c, "rail"),
                });
                let c = ring.recv_chunk(phase, i, s);
                let dst = shape.output(r).sub(sub(c));
                let kind = match phase {
                    Phase::ReduceScatter => OpKind::Reduce {
                        dst,
                        a: whole(r, self.own).sub(sub(c)),
                        b_rank: r,
                        b: slot(j, c),
                        step: ReduceStep {
                            pre_a: pre,
                            pre_b: pre && s == 0,
                            post: s + 1 == steps,
                        },
                    },
                    Phase::AllGather => OpKind::Copy {
                        from: r,
                        to: r,
                        src: slot(j, c),
                        dst,
                    },
                };
                st.push(Op {
                    lane: Lane::Compute,
                    kind,
                    waits: vec![flags[left][j]],
                    signal: None,
                    label: label(phase, s, c, "rail"),
                });
            }
            let group = Group {
                members: self.members.to_vec(),
                src: whole(r, self.own).sub(self.node_chunk.clone()),
                dst: shape.output(r).sub(self.node_chunk.clone()),
                step: ReduceStep {
                    pre_a: pre,
                    pre_b: false,
                    post: true,
                },
            };
            let mut waits = ready.get(r).cloned().unwrap_or_default();
            waits.push(ctx.begin[r]);
            let sig = ctx.b.push_signalled(
                r,
                Lane::Compute,
                OpKind::Kernel(Kernel {
                    kind: KernelKind::Rail,
                    steps: st,
                    group: Some(group),
                }),
                waits,
                Label {
                    note: "rail all-reduce (between nodes)",
                    ..Label::default()
                },
            );
            out.push(sig);
        }
        out
    }
}

/// One sub-ring: its members in ring order, the element range of each of
/// its chunks (one per member), and its two receive slots in scratch.
struct Sub<'a> {
    members: &'a [usize],
    chunk: &'a dyn Fn(usize) -> Range<usize>,
    /// The scratch range of one slot (the second follows it).
    slots: Range<usize>,
    /// The ops' label note: `node` (inside a node) or `rail` (between).
    note: &'static str,
}

/// Where a reduce-scatter's own contribution lies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Operand {
    /// The rank's untouched input (pre-multiplied by its first reduce).
    Input,
    /// A partial sum already in the rank's output (the node's sum).
    Output,
}

struct Ctx<'a> {
    b: &'a mut PlanBuilder,
    shape: Shape,
    begin: &'a [SignalId],
    /// `fenced[from][to]`: `from` already copied into `to` in this call
    /// (the first copy waits for both ranks' Begin).
    fenced: Vec<Vec<bool>>,
    last_copy: Vec<Option<SignalId>>,
}

impl Ctx<'_> {
    /// A copy on `r`'s copy lane of `src` (r's) into `dst` on `to`.
    fn copy(
        &mut self,
        (r, src): (usize, Region),
        (to, dst): (usize, Region),
        mut waits: Vec<SignalId>,
        label: Label,
    ) -> SignalId {
        if !std::mem::replace(&mut self.fenced[r][to], true) {
            waits.extend([self.begin[r], self.begin[to]]);
        }
        let sig = self
            .b
            .copy(r, Lane::Copy, (r, src), (to, dst), waits, label);
        self.last_copy[r] = Some(sig);
        sig
    }

    /// The receive slot of step `s` for a chunk of `len` elements.
    fn slot(ring: &Sub<'_>, s: usize, len: usize) -> Region {
        let at = ring.slots.start + (s % 2) * ring.slots.len();
        Region::new(Buf::Scratch, at..at + len)
    }

    /// Reduce-scatter around `ring`: member i ends with the sum of chunk
    /// `owned(i)` over the ring in its output. `own`: where each member's
    /// contribution lies; `post`: the last step completes the reduction;
    /// `ready[i]`: what member i's first send waits for. Returns each
    /// member's reduce signal per step.
    fn reduce_scatter(
        &mut self,
        ring: &Sub<'_>,
        own: Operand,
        post: bool,
        ready: &[Vec<SignalId>],
    ) -> Steps {
        let n = ring.members.len();
        let sched = RingSchedule::all_reduce(n);
        let steps = sched.steps();
        let shape = self.shape;
        let region = |r: usize, op: Operand, c: usize| {
            let whole = match op {
                Operand::Input => shape.input(r),
                Operand::Output => shape.output(r),
            };
            whole.sub((ring.chunk)(c))
        };
        let mut reduce: Steps = vec![vec![None; steps]; n];
        let mut copied: Steps = vec![vec![None; steps]; n];
        for s in 0..steps {
            for i in 0..n {
                let (r, j) = (ring.members[i], sched.right(i));
                let to = ring.members[j];
                let c = sched.send_chunk(Phase::ReduceScatter, i, s);
                let src = region(r, if s == 0 { own } else { Operand::Output }, c);
                if src.is_empty() {
                    continue;
                }
                let mut waits = match s {
                    0 => ready.get(i).cloned().unwrap_or_default(),
                    _ => reduce[i][s - 1].into_iter().collect(),
                };
                if s >= 2 {
                    // Slot reuse: the neighbour's last reduce that read it.
                    waits.extend(reduce[j][..=s - 2].iter().rev().find_map(|x| *x));
                }
                let dst = Self::slot(ring, s, src.len());
                let label = label(Phase::ReduceScatter, s, c, ring.note);
                copied[i][s] = Some(self.copy((r, src), (to, dst), waits, label));
            }
            for i in 0..n {
                let r = ring.members[i];
                let from = sched.left(i);
                let c = sched.recv_chunk(Phase::ReduceScatter, i, s);
                let Some(arrived) = copied[from][s] else {
                    continue;
                };
                // The member's own contribution to chunk c (untouched so
                // far: c arrives here once).
                let a = region(r, own, c);
                let slot = Self::slot(ring, s, a.len());
                let dst = region(r, Operand::Output, c);
                let pre = own == Operand::Input;
                let step = ReduceStep {
                    pre_a: pre,
                    pre_b: pre && s == 0,
                    post: post && s + 1 == steps,
                };
                reduce[i][s] = self.b.reduce(
                    r,
                    dst,
                    a,
                    (r, slot),
                    step,
                    vec![arrived],
                    true,
                    label(Phase::ReduceScatter, s, c, ring.note),
                );
            }
        }
        reduce
    }

    /// Reduce-scatter by direct reads (the node phase of `hier:G:mpi`):
    /// member i sums chunk `owned(i)` of every member's input into its
    /// output, reading each peer's input where it lies, one reduce per peer
    /// (the nearest on its left first). The ring's copy of each chunk into
    /// a neighbour's slot is one more pass over `(G-1)/G·D` per rank that
    /// this saves. In place each read waits for the peer's Begin; nothing
    /// writes the chunk a peer reads before that peer's reduces are done
    /// (the rail and the all-gather of that chunk follow them). `post`:
    /// the last reduce completes the reduction. Returns each member's last
    /// reduce.
    fn reduce_scatter_direct(&mut self, ring: &Sub<'_>, post: bool) -> Vec<Option<SignalId>> {
        let n = ring.members.len();
        let sched = RingSchedule::all_reduce(n);
        let shape = self.shape;
        let mut last = vec![None; n];
        for (i, done) in last.iter_mut().enumerate() {
            let r = ring.members[i];
            let c = sched.owned_chunk(i);
            let range = (ring.chunk)(c);
            if range.is_empty() {
                continue;
            }
            let dst = shape.output(r).sub(range.clone());
            for d in 1..n {
                let from = ring.members[(i + n - d) % n];
                let a = if d == 1 {
                    shape.input(r).sub(range.clone())
                } else {
                    dst.clone()
                };
                let waits = if shape.in_place {
                    vec![self.begin[from]]
                } else {
                    vec![]
                };
                *done = self.b.reduce(
                    r,
                    dst.clone(),
                    a,
                    (from, shape.input(from).sub(range.clone())),
                    ReduceStep {
                        pre_a: d == 1,
                        pre_b: true,
                        post: post && d + 1 == n,
                    },
                    waits,
                    d + 1 == n,
                    label(Phase::ReduceScatter, d - 1, c, ring.note),
                );
            }
        }
        last
    }

    /// All-gather around `ring` of the complete chunks in the outputs
    /// (member i starts from chunk `owned(i)`, after `ready[i]`). Returns
    /// each member's copy signal per step.
    fn all_gather(&mut self, ring: &Sub<'_>, ready: &[Vec<SignalId>]) -> Steps {
        let n = ring.members.len();
        let sched = RingSchedule::all_reduce(n);
        let steps = sched.steps();
        let mut copied: Steps = vec![vec![None; steps]; n];
        for s in 0..steps {
            for i in 0..n {
                let (r, to) = (ring.members[i], ring.members[sched.right(i)]);
                let c = sched.send_chunk(Phase::AllGather, i, s);
                let range = (ring.chunk)(c);
                if range.is_empty() {
                    continue;
                }
                let src = self.shape.output(r).sub(range.clone());
                let dst = self.shape.output(to).sub(range);
                let waits = match s {
                    0 => ready.get(i).cloned().unwrap_or_default(),
                    _ => copied[sched.left(i)][s - 1].into_iter().collect(),
                };
                let label = label(Phase::AllGather, s, c, ring.note);
                copied[i][s] = Some(self.copy((r, src), (to, dst), waits, label));
            }
        }
        copied
    }
}

/// The label of a hierarchical op. It names its phase and ring in the
/// note (`rail reduce-scatter`) and leaves `phase` unset: the trace's
/// step-by-step picture is that of one ring over all ranks, which this plan
/// is not, so the trace lists its ops instead.
fn label(phase: Phase, step: usize, chunk: usize, ring: &'static str) -> Label {
    let note = match (ring, phase) {
        ("rail", Phase::ReduceScatter) => "rail reduce-scatter (between nodes)",
        ("rail", Phase::AllGather) => "rail all-gather (between nodes)",
        (_, Phase::ReduceScatter) => "node reduce-scatter",
        (_, Phase::AllGather) => "node all-gather",
    };
    Label {
        phase: None,
        step,
        chunk,
        slice: 0,
        note,
    }
}
