//! The LL one-shot (`oneshot:ll`), 2 ranks, all-reduce: one kernel per rank
//! and call stores the rank's whole input into the peer's LL slot, each
//! word carrying the call's flag, and reduces what the peer stored into its
//! own slot: `output = input (op) slot`. No flag round trip and no fence
//! between data and flag (NCCL's LL protocol), one launch, in place as well
//! as out of place (each kernel reads only its own rank's buffers).
//!
//! It runs on the LL ring's kernel ([`super::ringll`]) as the ring of one
//! chunk and one step ([`KernelKind::LlOneShot`]): per rank r, with peer
//! p = 1 - r,
//! 1. *put*: `p.slot = input`, raising flag `f[r]`;
//! 2. *receive*: wait for `f[p]`, then `output = input (op) slot`.
//!
//! Each rank sends D (the ring sends D/2 twice, one step after the other).
//! Consecutive calls alternate LL halves as the ring does, and where the
//! ranks may run it is where the ring may ([`super::ringll`]).

use super::flag::two_ranks;
use super::oneshot::Chained;
use super::Algorithm;
use crate::plan::{Buf, KernelKind, Label, OpKind, Plan, ReduceStep, Region, Shape};
use std::sync::Arc;

/// The LL one-shot.
pub(crate) const ONESHOT_LL: Chained = Chained {
    name: "oneshot:ll",
    takes: Some(two_ranks),
    spins: true,
    build: plan,
    load: super::Load::Everyone,
    cost: super::cost::Cost::OneShot,
};

pub fn parse(s: &str) -> Option<Result<Arc<dyn Algorithm>, String>> {
    ONESHOT_LL.parse(s)
}

/// The plan on LL half `parity`; `fenced` makes each rank's kernel wait
/// for both ranks' Begin.
pub fn plan(shape: &Shape, parity: usize, fenced: bool) -> Plan {
    super::ringll::kernel_plan(
        "oneshot:ll",
        KernelKind::LlOneShot,
        shape,
        parity,
        fenced,
        steps,
    )
}

/// Rank `r`'s kernel steps on LL half `parity` (2 ranks, 1 element or
/// more), without their flags: the put of its whole input into the peer's
/// slot, then the receive that reduces the slot with its input. The CUDA
/// lowering checks a plan's steps against these.
pub(crate) fn steps(shape: &Shape, r: usize, parity: usize) -> Vec<(Label, OpKind)> {
    let len = crate::schedule::ll_slot_len(shape.count, 1, shape.elem_size);
    let at = (parity % 2) * len;
    let slot = Region::new(Buf::Lines, at..at + shape.count);
    let label = Label {
        note: "one-shot",
        ..Label::default()
    };
    let put = OpKind::Copy {
        from: r,
        to: 1 - r,
        src: shape.input(r),
        dst: slot.clone(),
    };
    let receive = OpKind::Reduce {
        dst: shape.output(r),
        a: shape.input(r),
        b_rank: r,
        b: slot,
        step: ReduceStep {
            pre_a: true,
            pre_b: true,
            post: true,
        },
    };
    vec![(label.clone(), put), (label, receive)]
}
