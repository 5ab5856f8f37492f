//! The ring: Reduce-Scatter then All-Gather, as a [`Plan`].
//!
//! Chunk and step indices come from [`crate::schedule`]. Each chunk may be cut
//! into `slices` pieces so that on the GPU the copy of slice k+1 overlaps the
//! reduce of slice k, and the All-Gather copy of a slice starts as soon as that
//! slice is complete. The receive scratch has `slots` chunk-sized slots used by
//! step parity (double buffering when `slots == 2`), so the copy of step s+1
//! never waits for the reduce of step s.
//!
//! Per rank r, per Reduce-Scatter step s, per slice k:
//! * copy lane: copy slice k of chunk `send_chunk(RS, r, s)` into the right
//!   neighbour's scratch slot `s % slots`. It waits for r's own reduce of that
//!   slice at step s-1 (it forwards what it just reduced), and, when the slot is
//!   reused, for the neighbour's reduce that last read it.
//! * compute lane: once the left neighbour's copy has landed, reduce
//!   `partial[slice] = input[slice] (op) scratch[slot][slice]` (the PTX kernel).
//!
//! Per All-Gather step s, per slice k: the copy lane copies the complete slice
//! into the right neighbour's output. At s = 0 it waits for r's last reduce of
//! that slice (all-reduce) or for nothing (all-gather: the rank's own input);
//! afterwards for the left neighbour's copy of step s-1 that brought the slice
//! in.
//!
//! The three collectives are the two phases alone or together:
//! * all-reduce: both phases over [`ChunkLayout::new`] (16-byte aligned
//!   chunks); partial sums live in the receive buffer at their final place.
//! * reduce-scatter: the Reduce-Scatter phase over `ranks` chunks of `count`
//!   elements, rotated so rank r ends with chunk r; out of place the partial
//!   sums of the earlier steps live in scratch (one slot per step), the last
//!   step writes the output; in place they overwrite the input buffer.
//! * all-gather: the All-Gather phase over `ranks` chunks of `count`
//!   elements, rotated so rank r first sends its own chunk (out of place
//!   straight from its send buffer, while a local copy puts it in its own
//!   output).

use super::{Algorithm, Path, StaticPath};
use crate::plan::{
    local_only, Buf, Collective, Label, Lane, Plan, PlanBuilder, ReduceStep, Region, Shape,
    SignalId,
};
use crate::schedule::{self, ChunkLayout, Phase, Ring as RingSchedule};
use std::sync::Arc;

/// The ring with `slices` pipeline slices per chunk and `slots` receive slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    pub slices: usize,
    pub slots: usize,
}

impl Ring {
    /// The plain ring of the mission: one copy and one reduce per step.
    pub const PLAIN: Ring = Ring {
        slices: 1,
        slots: 2,
    };
}

impl Algorithm for Ring {
    fn name(&self) -> String {
        match (self.slices, self.slots) {
            (1, 1) => "ring:naive".into(),
            (1, _) => "ring".into(),
            (k, _) => format!("ring:pipe{k}"),
        }
    }

    fn supports(&self, shape: &Shape) -> Result<(), String> {
        match shape.collective {
            Collective::Broadcast { .. } => Err(
                "the ring implements all-reduce, reduce-scatter and all-gather; a broadcast runs bcast (auto picks it)".into(),
            ),
            _ => Ok(()),
        }
    }

    fn path(&self, shape: &Shape) -> Box<dyn Path> {
        StaticPath::boxed(plan(shape, self.slices, self.slots))
    }

    fn load(&self) -> Option<super::Load> {
        Some(super::Load::Ring)
    }

    fn cost(&self) -> Option<super::cost::Cost> {
        Some(super::cost::Cost::Ring {
            slices: self.slices,
        })
    }
}

/// `ring`, `ring:naive`, `ring:pipeK`.
pub fn parse(s: &str) -> Option<Result<Arc<dyn Algorithm>, String>> {
    let ring = |slices, slots| -> Arc<dyn Algorithm> { Arc::new(Ring { slices, slots }) };
    match s {
        "ring" => Some(Ok(ring(1, 2))),
        "ring:naive" => Some(Ok(ring(1, 1))),
        _ => s.strip_prefix("ring:pipe").map(|k| {
            k.parse::<usize>()
                .ok()
                .filter(|k| (1..=64).contains(k))
                .map(|k| ring(k, 2))
                .ok_or_else(|| format!("bad slice count in {s:?} (ring:pipeK with K in 1..=64)"))
        }),
    }
}

/// Per rank, per step, per slice: signals.
type Sigs = Vec<Vec<Vec<SignalId>>>;

/// Build the ring plan for `shape`. `slices >= 1`, `slots` is 1 or 2.
pub fn plan(shape: &Shape, slices: usize, slots: usize) -> Plan {
    let slices = slices.max(1);
    let slots = slots.clamp(1, 2);
    let name = Ring { slices, slots }.name();
    let mut b = PlanBuilder::new(name, *shape);
    let n = shape.ranks;
    let begin = b.begin_all();
    if n == 1 || shape.count == 0 {
        return local_only(b, &begin);
    }
    let (layout, ring) = match shape.collective {
        Collective::AllReduce => (
            ChunkLayout::new(shape.count, n, shape.elem_size),
            RingSchedule::all_reduce(n),
        ),
        _ => (
            ChunkLayout::uniform(shape.count, n),
            RingSchedule::own_chunk(n),
        ),
    };
    let mut ctx = Ctx {
        b: &mut b,
        shape: *shape,
        layout,
        ring,
        slices,
        slots,
        begin: &begin,
        first_copy: vec![true; n],
        last_copy: vec![None; n],
        extra_end: vec![Vec::new(); n],
    };
    let reduced = match shape.collective {
        Collective::AllGather => None,
        _ => Some(ctx.reduce_scatter()),
    };
    if shape.collective != Collective::ReduceScatter {
        ctx.all_gather(reduced.as_ref());
    }
    let (last_copy, extra_end) = (ctx.last_copy, ctx.extra_end);
    for r in 0..n {
        // End: this rank's own copies done (they read its memory), the left
        // neighbour's copies into it done; reduces precede End in-lane.
        let from = ring.left(r);
        let mut waits: Vec<SignalId> = [last_copy[r], last_copy[from]]
            .into_iter()
            .flatten()
            .collect();
        waits.extend(extra_end[r].iter().copied());
        b.end(r, waits);
    }
    b.finish()
}

struct Ctx<'a> {
    b: &'a mut PlanBuilder,
    shape: Shape,
    layout: ChunkLayout,
    ring: RingSchedule,
    slices: usize,
    slots: usize,
    begin: &'a [SignalId],
    first_copy: Vec<bool>,
    last_copy: Vec<Option<SignalId>>,
    extra_end: Vec<Vec<SignalId>>,
}

impl Ctx<'_> {
    /// Chunk `c` of rank `r`'s input.
    fn input(&self, r: usize, c: usize) -> Region {
        self.shape.input(r).sub(self.layout.range(c))
    }

    /// Chunk `c` of the (all-reduce / all-gather) output of rank `r`.
    fn output_chunk(&self, r: usize, c: usize) -> Region {
        self.shape.output(r).sub(self.layout.range(c))
    }

    /// The slices of `region` (chunk-relative slicing is the same for the
    /// same chunk on every rank).
    fn slices_of(&self, region: &Region) -> Vec<Region> {
        schedule::slices(region.range.clone(), self.slices, self.shape.elem_size)
            .into_iter()
            .map(|r| Region::new(region.buf, r))
            .collect()
    }

    /// Where rank r keeps the partial sum it computes at step s (chunk c).
    fn partial(&self, r: usize, s: usize, c: usize) -> Region {
        match self.shape.collective {
            Collective::AllReduce => self.output_chunk(r, c),
            _ if s + 1 == self.ring.steps() => self.shape.output(r),
            _ if self.shape.in_place => self.input(r, c),
            _ => {
                // Out-of-place reduce-scatter: one scratch slot per step,
                // after the receive slots.
                let len = self.layout.len(c);
                let at = self.slots * self.layout.max_len() + s * self.layout.max_len();
                Region::new(Buf::Scratch, at..at + len)
            }
        }
    }

    /// A copy on r's copy lane; the first of the call fences with both
    /// ranks' Begin.
    fn copy(
        &mut self,
        r: usize,
        to: usize,
        src: Region,
        dst: Region,
        mut waits: Vec<SignalId>,
        label: Label,
    ) -> SignalId {
        if std::mem::take(&mut self.first_copy[r]) {
            waits.extend([self.begin[r], self.begin[to]]);
        }
        let sig = self
            .b
            .copy(r, Lane::Copy, (r, src), (to, dst), waits, label);
        self.last_copy[r] = Some(sig);
        sig
    }

    /// The Reduce-Scatter phase; returns each rank's reduce signals per step
    /// and slice.
    fn reduce_scatter(&mut self) -> Sigs {
        let n = self.shape.ranks;
        let steps = self.ring.steps();
        if self.shape.collective == Collective::ReduceScatter && !self.shape.in_place {
            self.b
                .scratch((self.slots + steps.saturating_sub(1)) * self.layout.max_len());
        } else {
            self.b.scratch(self.slots * self.layout.max_len());
        }
        let mut reduce: Sigs = vec![vec![Vec::new(); steps]; n];
        let mut copied: Sigs = vec![vec![Vec::new(); steps]; n];
        for s in 0..steps {
            for r in 0..n {
                let c = self.ring.send_chunk(Phase::ReduceScatter, r, s);
                let to = self.ring.right(r);
                let src = if s == 0 {
                    self.input(r, c)
                } else {
                    self.partial(r, s - 1, c)
                };
                for (k, sl) in self.slices_of(&src).into_iter().enumerate() {
                    let mut waits = Vec::new();
                    if s > 0 {
                        waits.push(reduce[r][s - 1][k]);
                    }
                    if s >= self.slots {
                        // Slot reuse: the neighbour's last reduce that read
                        // any slot (the latest non-empty step <= s - slots);
                        // earlier ones precede it on its compute lane.
                        waits.extend(
                            reduce[to][..=s - self.slots]
                                .iter()
                                .rev()
                                .find_map(|v| v.last().copied()),
                        );
                    }
                    let rel = sl.range.start - src.range.start..sl.range.end - src.range.start;
                    let dst = self.recv_slot(s, rel);
                    let label = label(Phase::ReduceScatter, s, c, k);
                    let sig = self.copy(r, to, sl, dst, waits, label);
                    copied[r][s].push(sig);
                }
            }
            for r in 0..n {
                let c = self.ring.recv_chunk(Phase::ReduceScatter, r, s);
                let from = self.ring.left(r);
                let input = self.input(r, c);
                let out = self.partial(r, s, c);
                let in_slices = self.slices_of(&input);
                let out_slices = self.slices_of(&out);
                for (k, (a, dst)) in in_slices.into_iter().zip(out_slices).enumerate() {
                    let rel = a.range.start - input.range.start..a.range.end - input.range.start;
                    let slot = self.recv_slot(s, rel);
                    let step = ReduceStep {
                        pre_a: true,
                        pre_b: s == 0,
                        post: s + 1 == steps,
                    };
                    let sig = self.b.reduce(
                        r,
                        dst,
                        a,
                        (r, slot),
                        step,
                        vec![copied[from][s][k]],
                        true,
                        label(Phase::ReduceScatter, s, c, k),
                    );
                    reduce[r][s].extend(sig);
                }
            }
        }
        reduce
    }

    /// The receive slot of step s for the chunk-relative range `rel`.
    fn recv_slot(&self, s: usize, rel: std::ops::Range<usize>) -> Region {
        let off = (s % self.slots) * self.layout.max_len();
        Region::new(Buf::Scratch, off + rel.start..off + rel.end)
    }

    /// The All-Gather phase. `reduced`: the Reduce-Scatter's reduce signals
    /// (all-reduce), or None (all-gather).
    fn all_gather(&mut self, reduced: Option<&Sigs>) {
        let n = self.shape.ranks;
        let steps = self.ring.steps();
        let gather_only = reduced.is_none();
        if gather_only && !self.shape.in_place {
            // Rank r's own chunk into its own output (compute lane, in
            // parallel with the copy lane's pushes from the send buffer).
            for r in 0..n {
                let src = self.shape.input(r);
                let dst = self.output_chunk(r, r);
                let sig = self.b.copy(
                    r,
                    Lane::Compute,
                    (r, src),
                    (r, dst),
                    vec![self.begin[r]],
                    Label {
                        note: "own chunk",
                        ..Label::default()
                    },
                );
                self.extra_end[r].push(sig);
            }
        }
        let mut copied: Sigs = vec![vec![Vec::new(); steps]; n];
        for s in 0..steps {
            for r in 0..n {
                let c = self.ring.send_chunk(Phase::AllGather, r, s);
                let to = self.ring.right(r);
                let from = self.ring.left(r);
                let src = if gather_only && s == 0 {
                    self.shape.input(r)
                } else {
                    self.output_chunk(r, c)
                };
                let dsts = self.slices_of(&self.output_chunk(to, c));
                for (k, (sl, dst)) in self.slices_of(&src).into_iter().zip(dsts).enumerate() {
                    let waits = match (s, reduced) {
                        (0, Some(red)) => vec![red[r][steps - 1][k]],
                        (0, None) => vec![],
                        _ => vec![copied[from][s - 1][k]],
                    };
                    let sig = self.copy(r, to, sl, dst, waits, label(Phase::AllGather, s, c, k));
                    copied[r][s].push(sig);
                }
            }
        }
    }
}

fn label(phase: Phase, step: usize, chunk: usize, slice: usize) -> Label {
    Label {
        phase: Some(phase),
        step,
        chunk,
        slice,
        note: "",
    }
}
