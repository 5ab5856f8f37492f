//! The NVTX layer: a range per call and one per ring step of the rank,
//! only while an NVTX tool listens (else nothing is formatted).

use crate::cuda::nvtx;
use crate::plan::Plan;
use crate::schedule::Phase;

/// The open ranges of one call's issue: the call's, and the ring step's
/// (phase, step, chunk).
pub(super) struct Ranges {
    nvtx: &'static nvtx::Nvtx,
    /// The open step range and its step; dropped before `call`.
    step: Option<((Phase, usize, usize), nvtx::Range)>,
    call: Option<nvtx::Range>,
}

impl Ranges {
    /// The call's range, or `None` while no NVTX tool listens.
    pub(super) fn begin(plan: &Plan, r: usize) -> Option<Self> {
        let n = nvtx::active()?;
        Some(Ranges {
            nvtx: n,
            step: None,
            call: Some(n.range(&format!("{} rank {r}", plan.name))),
        })
    }

    /// Before op `i`: close the step range if the op starts another step,
    /// open the op's own.
    pub(super) fn at(&mut self, plan: &Plan, r: usize, i: usize) {
        let n = self.nvtx;
        let l = &plan.ops[r][i].label;
        let key = l.phase.map(|p| (p, l.step, l.chunk));
        if self.step.as_ref().map(|s| s.0) == key {
            return;
        }
        self.step = None;
        if let Some((p, step, chunk)) = key {
            let name = format!(
                "{} {} step {step} chunk {chunk} rank {r}",
                plan.name,
                p.label()
            );
            self.step = Some(((p, step, chunk), n.range(&name)));
        }
    }

    pub(super) fn end(mut self) {
        self.step = None;
        self.call = None;
    }
}
