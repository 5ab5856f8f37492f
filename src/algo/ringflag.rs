//! The flag-synchronized ring (`ring:flag`), 2 ranks, all-reduce: the
//! ring's one Reduce-Scatter step and one All-Gather step, with the same
//! copy-engine copies (`cuMemcpyPeerAsync`) and the same PTX reduce as
//! `ring`, but every op of a rank on one stream and the two dependencies
//! across GPUs carried by empty exchange kernels (flags in GPU memory)
//! instead of events.
//!
//! Per rank r (peer p), in stream order:
//! 1. copy r's input chunk that p reduces into p's scratch (half `parity`);
//! 2. hand-shake 1: an exchange kernel of zero elements. It raises p's flag
//!    and spins on r's own, which p raises after its copy 1; so when it
//!    returns, p's chunk is in r's scratch;
//! 3. reduce r's chunk: `out = in (op) scratch`;
//! 4. copy that reduced chunk into p's output;
//! 5. hand-shake 2: when it returns, p's reduced chunk is in r's output.
//!
//! Why: on 2 x H200 a wait on another GPU's event costs 7-8 us on the GPU
//! clock, two of them are on a 2-rank ring call's critical path, and memory
//! words awaited by the stream (`cuStreamWaitValue64`) measured slower
//! still (docs/lab/perf-notes.md, session 6). A spinning kernel sees the peer's flag
//! across NVLink in about a microsecond.
//!
//! Consecutive calls alternate scratch halves like the one-shots
//! (`oneshot::ChainPath`): a copy into the peer's half of call k+2
//! follows the peer's hand-shake 1 of call k+1, which the peer raises after
//! its reduce of call k read that half. A call that starts a chain first
//! waits (events) for both ranks' Begin. No op waits on an event inside a
//! chain, so per-GPU CUDA graphs can replay it.

use super::oneshot::Chained;
use super::Algorithm;
use crate::plan::{
    local_only, Buf, Label, Lane, Plan, PlanBuilder, ReduceStep, Region, Shape, SignalId,
};
use crate::schedule::{ChunkLayout, Phase, Ring as RingSchedule};
use std::sync::Arc;

/// The flag-synchronized ring.
pub(crate) const RING_FLAG: Chained = Chained {
    name: "ring:flag",
    takes: Some(two_ranks),
    spins: true,
    build: plan,
    load: super::Load::Ring,
    cost: super::cost::Cost::Ring { slices: 1 },
};

/// Its hand-shakes are two-rank exchanges.
fn two_ranks(shape: &Shape) -> Result<(), String> {
    if shape.ranks > 2 {
        return Err(
            "its hand-shakes are two-rank exchanges; for more ranks use ring or ring:pipeK".into(),
        );
    }
    Ok(())
}

pub fn parse(s: &str) -> Option<Result<Arc<dyn Algorithm>, String>> {
    RING_FLAG.parse(s)
}

/// The plan on scratch half `parity`; `fenced` makes each rank's first copy
/// wait for both ranks' Begin.
pub fn plan(shape: &Shape, parity: usize, fenced: bool) -> Plan {
    let mut b = PlanBuilder::new("ring:flag", *shape);
    if !fenced {
        b.unfenced();
    }
    let begin = b.begin_all();
    let n = shape.ranks;
    if n != 2 || shape.count == 0 {
        return local_only(b, &begin);
    }
    let layout = ChunkLayout::new(shape.count, n, shape.elem_size);
    let ring = RingSchedule::all_reduce(n);
    let half = layout.max_len();
    b.scratch(2 * half);
    let at = (parity % 2) * half;
    let chunk = |base: Region, c: usize| base.sub(layout.range(c));
    let slot = |c: usize| Region::new(Buf::Scratch, at..at + layout.len(c));
    let label = |phase: Option<Phase>, chunk: usize, note: &'static str| Label {
        phase,
        step: 0,
        chunk,
        slice: 0,
        note,
    };
    let shake = |b: &mut PlanBuilder, note: &'static str| {
        // A hand-shake moves no data: empty regions.
        let part = |r: usize| {
            let none = 0..0;
            (
                shape.input(r).sub(none.clone()),
                slot(0).sub(none.clone()),
                shape.output(r).sub(none),
                vec![],
            )
        };
        b.exchange_pair(
            [0, 1],
            [part(0), part(1)],
            ReduceStep::default(),
            label(None, 0, note),
        );
    };
    // 1. Reduce-Scatter copies.
    for r in 0..n {
        let to = ring.right(r);
        let c = ring.send_chunk(Phase::ReduceScatter, r, 0);
        let waits: Vec<SignalId> = if fenced {
            vec![begin[r], begin[to]]
        } else {
            vec![]
        };
        b.copy(
            r,
            Lane::Compute,
            (r, chunk(shape.input(r), c)),
            (to, slot(c)),
            waits,
            label(Some(Phase::ReduceScatter), c, ""),
        );
    }
    // 2. The peer's chunk has landed.
    shake(&mut b, "hand-shake: chunks in scratch");
    // 3. Reduce; 4. All-Gather copies.
    for r in 0..n {
        let c = ring.recv_chunk(Phase::ReduceScatter, r, 0);
        let out = chunk(shape.output(r), c);
        b.reduce(
            r,
            out.clone(),
            chunk(shape.input(r), c),
            (r, slot(c)),
            ReduceStep {
                pre_a: true,
                pre_b: true,
                post: true,
            },
            vec![],
            false,
            label(Some(Phase::ReduceScatter), c, ""),
        );
        let to = ring.right(r);
        b.copy(
            r,
            Lane::Compute,
            (r, out),
            (to, chunk(shape.output(to), c)),
            vec![],
            label(Some(Phase::AllGather), c, ""),
        );
    }
    // 5. The peer's reduced chunk has landed.
    shake(&mut b, "hand-shake: chunks in output");
    for r in 0..n {
        b.end(r, vec![]);
    }
    b.finish()
}
