//! The ring in one kernel per rank with NCCL's Simple protocol
//! (`ring:simple`), all-reduce: the steps of `ring:ll` ([`super::ringll`]),
//! each put storing its chunk plainly into the right neighbour's scratch
//! slot and then raising a flag per tile of it (a fence between the data
//! and the flag), each receive waiting for those flags. LL words carry 8
//! data bytes in 16; here every byte stored is data, at the price of one
//! flag round trip per tile and step, so it is the ring's kernel for large
//! chunks as LL is for small ones.
//!
//! Per rank r, one [`KernelKind::SimpleRing`] op with the steps of
//! [`super::ringll::steps`], its slots in [`Buf::Scratch`] (2(N-1) per
//! call, the largest chunk rounded up to 16 bytes each:
//! [`crate::schedule::simple_slot_len`]) on half `parity`; consecutive
//! calls alternate halves as `ring:ll`'s do, and a chain's first call
//! waits for both neighbours' Begin. Where it may run is where `ring:ll`
//! may: never where rank processes share one GPU.

use super::oneshot::Chained;
use super::Algorithm;
use crate::plan::{Buf, KernelKind, Label, OpKind, Plan, Shape};
use std::sync::Arc;

/// The Simple ring.
pub(crate) const RING_SIMPLE: Chained = Chained {
    name: "ring:simple",
    takes: None,
    spins: true,
    build: plan,
    load: super::Load::Ring,
    cost: super::cost::Cost::Ring { slices: 1 },
};

pub fn parse(s: &str) -> Option<Result<Arc<dyn Algorithm>, String>> {
    RING_SIMPLE.parse(s)
}

/// The plan on scratch half `parity`; `fenced` makes each rank's kernel
/// wait for its own and both neighbours' Begin.
pub fn plan(shape: &Shape, parity: usize, fenced: bool) -> Plan {
    super::ringll::kernel_plan(
        "ring:simple",
        KernelKind::SimpleRing,
        shape,
        parity,
        fenced,
        steps,
    )
}

/// Rank `r`'s kernel steps on scratch half `parity`, without their flags
/// (as [`super::ringll::steps`], in scratch slots). The CUDA lowering checks
/// a plan's steps against these.
pub(crate) fn steps(shape: &Shape, r: usize, parity: usize) -> Vec<(Label, OpKind)> {
    let len = crate::schedule::simple_slot_len(shape.count, shape.ranks, shape.elem_size);
    super::ringll::ring_steps(shape, r, parity, Buf::Scratch, len)
}
