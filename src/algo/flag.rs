//! The flag one-shot (`oneshot:flag`), 2 ranks: one exchange kernel per rank
//! and call ([`crate::plan::KernelKind::Exchange`]; `ptx/reduce_<type>.ptx`). Each
//! kernel pushes its rank's input into the peer's scratch with plain stores
//! over NVLink, raises a flag in the peer's memory, spins until the peer's
//! flag is raised, and reduces. No copy call, no event, one launch: the
//! cheapest small all-reduce on 2 GPUs, in place as well as out of place
//! (each kernel reads only its own rank's buffers).
//!
//! Consecutive calls alternate scratch halves exactly as the copy-engine
//! one-shot does (`oneshot::ChainPath`); a fenced call's kernels
//! first wait (events) for both ranks' Begin. Slots start on 16-byte
//! boundaries so the kernel's vector path applies at any count. The kernel
//! numbers its calls on the GPU, so CUDA graphs can replay it.

use super::oneshot::Chained;
use super::Algorithm;
use crate::plan::{local_only, Buf, Label, Plan, PlanBuilder, ReduceStep, Region, Shape};
use std::sync::Arc;

/// The flag one-shot.
pub(crate) const FLAG: Chained = Chained {
    name: "oneshot:flag",
    takes: Some(two_ranks),
    spins: true,
    build: plan,
    load: super::Load::Everyone,
    cost: super::cost::Cost::OneShot,
};

/// What the two-rank exchanges take beyond an all-reduce: two ranks.
pub(crate) fn two_ranks(shape: &Shape) -> Result<(), String> {
    if shape.ranks > 2 {
        return Err(
            "it is a two-rank exchange; for more ranks use oneshot, the ring or auto".into(),
        );
    }
    Ok(())
}

pub fn parse(s: &str) -> Option<Result<Arc<dyn Algorithm>, String>> {
    FLAG.parse(s)
}

/// The flag plan on scratch half `parity`; `fenced` makes each kernel wait
/// for both ranks' Begin.
pub fn plan(shape: &Shape, parity: usize, fenced: bool) -> Plan {
    let mut b = PlanBuilder::new("oneshot:flag", *shape);
    if !fenced {
        b.unfenced();
    }
    let begin = b.begin_all();
    let count = shape.count;
    if shape.ranks != 2 || count == 0 {
        return local_only(b, &begin);
    }
    // Slots on 16-byte boundaries.
    let unit = (16 / shape.elem_size.clamp(1, 16)).max(1);
    let stride = count.div_ceil(unit) * unit;
    b.scratch(2 * stride);
    let at = (parity % 2) * stride;
    let slot = Region::new(Buf::Scratch, at..at + count);
    let part = |r: usize| {
        let waits = if fenced {
            vec![begin[1 - r], begin[r]]
        } else {
            vec![]
        };
        (shape.input(r), slot.clone(), shape.output(r), waits)
    };
    b.exchange_pair(
        [0, 1],
        [part(0), part(1)],
        ReduceStep {
            pre_a: true,
            pre_b: true,
            post: true,
        },
        Label {
            note: "exchange",
            ..Label::default()
        },
    );
    for r in 0..2 {
        b.end(r, vec![]);
    }
    b.finish()
}
