//! The ring in one kernel per rank (`ring:ll`), all-reduce: the same
//! Reduce-Scatter and All-Gather steps as `ring`, with no copy engine and no
//! event between them. Each step's chunk is stored into the right
//! neighbour's slot by the kernel itself, its words carrying the call's flag
//! (NCCL's LL protocol: data and flag in one store), and the right
//! neighbour's kernel polls those words, reduces, and forwards; so a step
//! costs a store across the link and a poll, not a kernel launch and a
//! hand-off between GPUs.
//!
//! Per rank r, one [`KernelKind::LlRing`] op whose steps are, for each ring
//! step s of Reduce-Scatter (chunk c = the chunk r sends, c' = the one it
//! receives):
//! 1. *put*: `right.slot[s] = (s == 0 ? input : output)[c]`, raising flag
//!    `f[r][s]`;
//! 2. *receive*: wait for `f[left][s]`, then `output[c'] = input[c'] (op)
//!    slot[s]`;
//!
//! and for each step t of All-Gather: *put* `right.slot[N-1+t] =
//! output[c]`, then *receive* `output[c'] = slot[N-1+t]`. Every step has a
//! slot of its own (2(N-1) per call) in the rank's LL slots
//! ([`Buf::Lines`], whole lines: [`crate::schedule::ll_slot_len`]), on half
//! `parity`: consecutive calls alternate halves like the
//! one-shots (`oneshot::ChainPath`), so a put of call k+2 cannot overwrite a slot
//! the right neighbour has yet to read in call k (it completed call k+1, so
//! it finished call k). A chain's first call waits (events) for both
//! neighbours' Begin.
//!
//! It refuses to run where rank processes share one GPU
//! ([`super::Placement::time_sliced`]): their kernels take turns there, and
//! a kernel spinning on a neighbour's flag would wait a turn per step.
//!
//! On the CPU backend the slots hold the elements as they are, the flags are
//! the signal board's slots, and each step
//! is a part of the op, so the interpreter, the validator and the trace read
//! the steps like any other ops.

use super::oneshot::Chained;
use super::Algorithm;
use crate::plan::{
    local_only, Buf, Kernel, KernelKind, Label, Lane, Op, OpKind, Plan, PlanBuilder, ReduceStep,
    Region, Shape,
};
use crate::schedule::{ChunkLayout, Phase, Ring as RingSchedule};
use std::sync::Arc;

/// The LL ring.
pub(crate) const RING_LL: Chained = Chained {
    name: "ring:ll",
    takes: None,
    spins: true,
    build: plan,
    load: super::Load::Ring,
    cost: super::cost::Cost::Ring { slices: 1 },
};

pub fn parse(s: &str) -> Option<Result<Arc<dyn Algorithm>, String>> {
    RING_LL.parse(s)
}

/// The plan on LL half `parity`; `fenced` makes each rank's kernel wait
/// for its own and both neighbours' Begin.
pub fn plan(shape: &Shape, parity: usize, fenced: bool) -> Plan {
    kernel_plan("ring:ll", KernelKind::LlRing, shape, parity, fenced, steps)
}

/// The plan of an LL kernel of `kind` (its steps from `steps`, the put and
/// receive of each step in turn, as [`steps`] gives them): one kernel op
/// per rank, each put raising a flag of its own and each receive waiting
/// for the left neighbour's put of the same step. Its LL slots: two halves
/// of [`crate::schedule::ll_cut`]'s slots.
pub(crate) fn kernel_plan(
    name: &str,
    kind: KernelKind,
    shape: &Shape,
    parity: usize,
    fenced: bool,
    steps: fn(&Shape, usize, usize) -> Vec<(Label, OpKind)>,
) -> Plan {
    let mut b = PlanBuilder::new(name, *shape);
    if !fenced {
        b.unfenced();
    }
    let begin = b.begin_all();
    let n = shape.ranks;
    if n < 2 || shape.count == 0 {
        return local_only(b, &begin);
    }
    let (chunks, slots) = crate::schedule::ll_cut(n, kind == KernelKind::LlOneShot);
    if kind == KernelKind::SimpleRing {
        b.scratch(2 * slots * crate::schedule::simple_slot_len(shape.count, n, shape.elem_size));
    } else {
        b.lines(2 * slots * crate::schedule::ll_slot_len(shape.count, chunks, shape.elem_size));
    }
    // Every put's flag first: a receive names its left neighbour's.
    let flags: Vec<Vec<_>> = (0..n)
        .map(|r| (0..slots).map(|_| b.flag(r)).collect())
        .collect();
    for r in 0..n {
        let (left, right) = (crate::schedule::left(r, n), crate::schedule::right(r, n));
        let st = steps(shape, r, parity)
            .into_iter()
            .enumerate()
            .map(|(j, (label, kind))| {
                let k = j / 2;
                let (waits, signal) = if j % 2 == 0 {
                    (vec![], Some(flags[r][k]))
                } else {
                    (vec![flags[left][k]], None)
                };
                Op {
                    lane: Lane::Compute,
                    kind,
                    waits,
                    signal,
                    label,
                }
            })
            .collect();
        let waits = if fenced {
            let mut w = vec![begin[left], begin[r], begin[right]];
            w.sort();
            w.dedup();
            w
        } else {
            vec![]
        };
        b.push(
            r,
            Lane::Compute,
            OpKind::Kernel(Kernel {
                kind,
                steps: st,
                group: None,
            }),
            waits,
            false,
            Label {
                note: match kind {
                    KernelKind::LlOneShot => "LL one-shot kernel",
                    KernelKind::SimpleRing => "Simple ring kernel",
                    _ => "LL ring kernel",
                },
                ..Label::default()
            },
        );
        b.end(r, vec![]);
    }
    b.finish()
}

/// Rank `r`'s kernel steps on LL half `parity` (2 ranks or more, 1 element
/// or more), without their flags: for each of the 2(N-1) ring steps its
/// put, then its receive. [`plan`] raises and waits for the flags; the CUDA
/// lowering checks a plan's steps against these, since its kernel computes
/// the same ring itself.
pub(crate) fn steps(shape: &Shape, r: usize, parity: usize) -> Vec<(Label, OpKind)> {
    let len = crate::schedule::ll_slot_len(shape.count, shape.ranks, shape.elem_size);
    ring_steps(shape, r, parity, Buf::Lines, len)
}

/// The steps of [`steps`] with slots of `len` elements in `buf`: for the
/// LL kernel its lines, for the Simple kernel
/// ([`crate::algo::ringsimple`]) its scratch.
pub(crate) fn ring_steps(
    shape: &Shape,
    r: usize,
    parity: usize,
    buf: Buf,
    len: usize,
) -> Vec<(Label, OpKind)> {
    let n = shape.ranks;
    let layout = ChunkLayout::new(shape.count, n, shape.elem_size);
    let ring = RingSchedule::all_reduce(n);
    let steps = ring.steps();
    let base = (parity % 2) * 2 * steps * len;
    // Slot `k` (0..2(N-1)) of the half, `c`'s length.
    let slot = |k: usize, c: usize| {
        let at = base + k * len;
        Region::new(buf, at..at + layout.len(c))
    };
    let chunk = |base: Region, c: usize| base.sub(layout.range(c));
    let label = |phase: Phase, step: usize, chunk: usize| Label {
        phase: Some(phase),
        step,
        chunk,
        slice: 0,
        note: "",
    };
    let mut out = Vec::with_capacity(4 * steps);
    for (k, phase, s) in (0..steps)
        .map(|s| (s, Phase::ReduceScatter, s))
        .chain((0..steps).map(|t| (steps + t, Phase::AllGather, t)))
    {
        let c = ring.send_chunk(phase, r, s);
        let from = if k == 0 {
            chunk(shape.input(r), c)
        } else {
            chunk(shape.output(r), c)
        };
        let put = OpKind::Copy {
            from: r,
            to: ring.right(r),
            src: from,
            dst: slot(k, c),
        };
        out.push((label(phase, s, c), put));
        let c = ring.recv_chunk(phase, r, s);
        let out_c = chunk(shape.output(r), c);
        let receive = match phase {
            Phase::ReduceScatter => OpKind::Reduce {
                dst: out_c,
                a: chunk(shape.input(r), c),
                b_rank: r,
                b: slot(k, c),
                step: ReduceStep {
                    pre_a: true,
                    pre_b: s == 0,
                    post: s + 1 == steps,
                },
            },
            Phase::AllGather => OpKind::Copy {
                from: r,
                to: r,
                src: slot(k, c),
                dst: out_c,
            },
        };
        out.push((label(phase, s, c), receive));
    }
    out
}
