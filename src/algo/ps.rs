//! Parameter Server all-reduce (the seed article's baseline).
//!
//! Every rank copies its whole buffer into a slot of the root's scratch; the
//! root adds the slots into its own buffer with the reduce kernel, one slot
//! after another; then the root copies the result back into every rank. The
//! root receives (N-1)·D and sends (N-1)·D, so its load grows with N, while
//! a ring rank moves 2(N-1)/N·D each way.

use super::{oneshot::all_reduce_only, Algorithm, Path, StaticPath};
use crate::plan::{
    local_only, Buf, Label, Lane, Plan, PlanBuilder, ReduceStep, Region, Shape, SignalId,
};
use std::sync::Arc;

/// The root rank.
pub(crate) const ROOT: usize = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParameterServer;

impl Algorithm for ParameterServer {
    fn name(&self) -> String {
        "ps".into()
    }

    fn supports(&self, shape: &Shape) -> Result<(), String> {
        all_reduce_only("ps", shape)
    }

    fn path(&self, shape: &Shape) -> Box<dyn Path> {
        StaticPath::boxed(plan(shape))
    }

    fn load(&self) -> Option<super::Load> {
        Some(super::Load::Root)
    }

    fn cost(&self) -> Option<super::cost::Cost> {
        Some(super::cost::Cost::ParameterServer)
    }
}

pub fn parse(s: &str) -> Option<Result<Arc<dyn Algorithm>, String>> {
    matches!(s, "ps" | "parameter-server")
        .then(|| Ok(Arc::new(ParameterServer) as Arc<dyn Algorithm>))
}

pub fn plan(shape: &Shape) -> Plan {
    let mut b = PlanBuilder::new("ps", *shape);
    let begin = b.begin_all();
    let (ranks, count) = (shape.ranks, shape.count);
    if ranks == 1 || count == 0 {
        return local_only(b, &begin);
    }
    b.scratch((ranks - 1) * count);
    let slot = |r: usize| Region::new(Buf::Scratch, (r - 1) * count..r * count);
    let label = |note| Label {
        note,
        ..Label::default()
    };
    let out = |r: usize| shape.output(r);
    // Gather: every non-root rank pushes its input to the root.
    let mut gathered: Vec<Option<SignalId>> = vec![None; ranks];
    for r in (0..ranks).filter(|&r| r != ROOT) {
        gathered[r] = Some(b.copy(
            r,
            Lane::Copy,
            (r, shape.input(r)),
            (ROOT, slot(r)),
            vec![begin[r], begin[ROOT]],
            label("gather"),
        ));
    }
    // Reduce on the root: out = input (op) slot(1), then out = out (op) slot(r).
    let mut last = None;
    for r in (0..ranks).filter(|&r| r != ROOT) {
        let first = last.is_none();
        let a = if first { shape.input(ROOT) } else { out(ROOT) };
        last = b.reduce(
            ROOT,
            out(ROOT),
            a,
            (ROOT, slot(r)),
            ReduceStep {
                pre_a: first,
                pre_b: true,
                post: r == ranks - 1,
            },
            gathered[r].into_iter().collect(),
            true,
            label("reduce"),
        );
    }
    // Broadcast: the root pushes the result into every rank's output.
    let mut sent: Vec<Option<SignalId>> = vec![None; ranks];
    for r in (0..ranks).filter(|&r| r != ROOT) {
        sent[r] = Some(b.copy(
            ROOT,
            Lane::Copy,
            (ROOT, out(ROOT)),
            (r, out(r)),
            last.into_iter().collect(),
            label("broadcast"),
        ));
    }
    b.end(ROOT, sent[ranks - 1].into_iter().collect());
    for r in (0..ranks).filter(|&r| r != ROOT) {
        b.end(r, [gathered[r], sent[r]].into_iter().flatten().collect());
    }
    b.finish()
}
