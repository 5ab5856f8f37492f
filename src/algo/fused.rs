//! The fused one-shot (`oneshot:fused`): out of place, each rank's reduce
//! kernel reads the other ranks' send buffers itself, through peer access.
//!
//! One kernel launch per peer and nothing else: no copy call, no scratch,
//! no event. A send buffer is never written by a collective, so these reads
//! need no cross-rank ordering (the engine drains every rank before anyone
//! overwrites a send buffer). In place the owners overwrite the very
//! buffers such a kernel would read, so this algorithm refuses in-place calls
//! (`auto` uses [`super::flag`] there).

use super::{oneshot::all_reduce_only, Algorithm, Path, StaticPath};
use crate::plan::{local_only, Buf, Label, Plan, PlanBuilder, ReduceStep, Region, Shape};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fused;

impl Algorithm for Fused {
    fn name(&self) -> String {
        "oneshot:fused".into()
    }

    fn supports(&self, shape: &Shape) -> Result<(), String> {
        all_reduce_only("oneshot:fused", shape)?;
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

    fn cost(&self) -> Option<crate::theory::Cost> {
        Some(crate::theory::Cost::OneShot)
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
        let out = shape.output(r);
        for d in 1..n {
            let from = (r + n - d) % n;
            let a = if d == 1 { shape.input(r) } else { out.clone() };
            b.reduce(
                r,
                out.clone(),
                a,
                (from, Region::new(Buf::Send, 0..count)),
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
        b.end(r, vec![]);
    }
    b.finish()
}
