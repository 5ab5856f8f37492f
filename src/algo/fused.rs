//! The fused one-shot (`oneshot:fused`): out of place, each rank reads the
//! other ranks' send buffers itself, through peer access, in one step.
//!
//! One op per peer and nothing else: no scratch and no signal between
//! ranks. An all-reduce and a reduce-scatter are reduce kernels that read
//! the peers' inputs (the whole buffer, or this rank's chunk of each); an
//! all-gather and a broadcast are copies this rank pulls from the peers'
//! send buffers (every peer's input into its chunk; the root's input). A
//! send buffer is never written by a collective, so these reads need no
//! cross-rank ordering inside the call: the engine orders them on the host
//! (a peer's input has landed when it says it began the call, and nobody
//! overwrites a send buffer while a peer may still read it). That makes it
//! the path for ranks that cannot afford a wait on another rank's GPU work:
//! processes that share one GPU, whose kernels take turns on it
//! ([`super::Placement::time_sliced`]). In place the owners overwrite the
//! very buffers these ops would read, so this algorithm refuses in-place
//! calls (`auto` uses [`super::flag`] there for an all-reduce).

use super::{Algorithm, Path, StaticPath};
use crate::plan::{
    local_only, Buf, Collective, Label, Lane, Plan, PlanBuilder, ReduceStep, Region, Shape,
};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fused;

impl Algorithm for Fused {
    fn name(&self) -> String {
        "oneshot:fused".into()
    }

    fn supports(&self, shape: &Shape) -> Result<(), String> {
        if let Collective::Broadcast { root } = shape.collective {
            if root >= shape.ranks {
                return Err(format!(
                    "the root {root} is not one of the {} ranks",
                    shape.ranks
                ));
            }
        }
        if shape.in_place && shape.ranks > 1 {
            return Err("it reads the other ranks' input buffers, which in place their owners overwrite; use oneshot:flag (2 ranks), oneshot, the ring or auto".into());
        }
        Ok(())
    }

    fn path(&self, shape: &Shape) -> Box<dyn Path> {
        StaticPath::boxed(plan(shape))
    }

    fn load(&self) -> Option<super::Load> {
        Some(super::Load::Everyone)
    }

    fn cost(&self) -> Option<super::cost::Cost> {
        Some(super::cost::Cost::OneShot)
    }
}

pub fn parse(s: &str) -> Option<Result<Arc<dyn Algorithm>, String>> {
    (s == "oneshot:fused").then(|| Ok(Arc::new(Fused) as Arc<dyn Algorithm>))
}

/// The fused one-shot plan (out of place).
pub fn plan(shape: &Shape) -> Plan {
    let mut b = PlanBuilder::new("oneshot:fused", *shape);
    let begin = b.begin_all();
    let (n, count) = (shape.ranks, shape.count);
    if n == 1 || count == 0 || shape.in_place {
        return local_only(b, &begin);
    }
    for r in 0..n {
        match shape.collective {
            Collective::AllReduce => reduce_from_peers(&mut b, r, 0..count),
            Collective::ReduceScatter => reduce_from_peers(&mut b, r, r * count..(r + 1) * count),
            Collective::AllGather => {
                // Every rank's input (this rank's own too) into its chunk.
                for d in 0..n {
                    let from = (r + n - d) % n;
                    pull(
                        &mut b,
                        r,
                        from,
                        from * count..(from + 1) * count,
                        "gather over peer access",
                    );
                }
            }
            Collective::Broadcast { root } => {
                pull(&mut b, r, root, 0..count, "copy of the root's input");
            }
        }
        b.end(r, vec![]);
    }
    b.finish()
}

/// Rank `r`'s output = the op over every rank's `chunk` of its send buffer:
/// its own chunk with the nearest peer's first, then one more peer per
/// reduce, accumulating in the output.
fn reduce_from_peers(b: &mut PlanBuilder, r: usize, chunk: std::ops::Range<usize>) {
    let shape = b.peek().shape;
    let n = shape.ranks;
    let out = shape.output(r);
    let own = Region::new(Buf::Send, chunk.clone());
    for d in 1..n {
        let from = (r + n - d) % n;
        let a = if d == 1 { own.clone() } else { out.clone() };
        b.reduce(
            r,
            out.clone(),
            a,
            (from, Region::new(Buf::Send, chunk.clone())),
            ReduceStep {
                pre_a: d == 1,
                pre_b: true,
                post: d == n - 1,
            },
            vec![],
            false,
            Label {
                note: "reduce over peer access",
                ..Label::default()
            },
        );
    }
}

/// Rank `r` copies rank `from`'s whole input into `dst` of its output.
fn pull(
    b: &mut PlanBuilder,
    r: usize,
    from: usize,
    dst: std::ops::Range<usize>,
    note: &'static str,
) {
    let count = b.peek().shape.count;
    b.copy(
        r,
        Lane::Compute,
        (from, Region::new(Buf::Send, 0..count)),
        (r, Region::new(Buf::Recv, dst)),
        vec![],
        Label {
            note,
            ..Label::default()
        },
    );
}
