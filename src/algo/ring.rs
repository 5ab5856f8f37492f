//! Ring all-reduce: Reduce-Scatter then All-Gather, as a [`Plan`].
//!
//! Chunk and step indices come from [`crate::schedule`]. Each chunk may be cut
//! into `slices` pieces so that on the GPU the copy of slice k+1 overlaps the
//! reduce of slice k, and the All-Gather copy of a slice starts as soon as that
//! slice is complete. The receive scratch has `slots` chunk-sized slots used by
//! step parity (double buffering when `slots == 2`), so the copy of step s+1
//! never waits for the reduce of step s. With `lanes == 2`, odd slices are
//! copied on a second copy stream, so two copy engines can work at once.
//!
//! Per rank r, per Reduce-Scatter step s, per slice k:
//! * copy lane: copy slice k of chunk `send_chunk(RS, r, s)` into the right
//!   neighbour's scratch slot `s % slots`. It waits for r's own reduce of that
//!   slice at step s-1 (it forwards what it just reduced), and, when the slot is
//!   reused, for the neighbour's reduce that last read it.
//! * compute lane: once the left neighbour's copy has landed, reduce
//!   `recv[slice] = input[slice] + scratch[slot][slice]` (the PTX kernel).
//!
//! Per All-Gather step s, per slice k: the copy lane copies the complete slice
//! from `recv` into the right neighbour's `recv`. At s = 0 it waits for r's last
//! reduce of that slice; afterwards, for the left neighbour's copy of step s-1
//! that brought the slice in.

use super::{local_copy_only, Algo};
use crate::plan::{Buf, Label, Lane, OpKind, Plan, PlanBuilder, Region, SignalId};
use crate::schedule::{self, ChunkLayout, Phase};

/// Build the ring plan. `slices >= 1`, `slots` is 1 or 2.
pub fn plan(
    ranks: usize,
    count: usize,
    elem_size: usize,
    in_place: bool,
    slices: usize,
    slots: usize,
    lanes: usize,
) -> Plan {
    let slices = slices.max(1);
    let slots = slots.clamp(1, 2);
    let lanes = lanes.clamp(1, 2);
    let name = Algo::Ring {
        slices,
        slots,
        lanes,
    }
    .label();
    // With two copy lanes, odd slices go to the second copy stream so that two
    // copy engines can move data at once.
    let lane_of = |k: usize| {
        if lanes == 2 && k % 2 == 1 {
            Lane::Copy2
        } else {
            Lane::Copy
        }
    };
    let li = |l: Lane| usize::from(l == Lane::Copy2);
    let mut b = PlanBuilder::new(name, ranks, count, in_place);
    let n = ranks;
    let input = b.input();
    let begin = b.begin_all();
    if n == 1 {
        return local_copy_only(b, &begin);
    }
    let layout = ChunkLayout::new(count, n, elem_size);
    let chunk_max = layout.max_len();
    b.scratch(chunk_max * slots);
    let steps = schedule::steps(n);
    // The slices of chunk c, as absolute element ranges.
    let slice_of = |c: usize| schedule::slices(layout.range(c), slices, elem_size);

    // Signals, filled as the ops are created: reduce[r][s][k], rs_copy[r][s][k], ag_copy[r][s][k].
    let mut reduce: Vec<Vec<Vec<SignalId>>> = vec![vec![Vec::new(); steps]; n];
    let mut rs_copy: Vec<Vec<Vec<SignalId>>> = vec![vec![Vec::new(); steps]; n];
    let mut ag_copy: Vec<Vec<Vec<SignalId>>> = vec![vec![Vec::new(); steps]; n];
    let mut first_copy = vec![[true; 2]; n];
    let mut last_copy: Vec<[Option<SignalId>; 2]> = vec![[None; 2]; n];

    // Issue order: step by step, slice by slice, all ranks; per rank copy then
    // reduce. Every wait refers to an op issued earlier in this order, so no
    // rank thread can block the host forever.
    for s in 0..steps {
        let slot = s % slots;
        for r in 0..n {
            let c = schedule::send_chunk(Phase::ReduceScatter, r, s, n);
            let to = schedule::right(r, n);
            for (k, sl) in slice_of(c).into_iter().enumerate() {
                let lane = lane_of(k);
                let mut waits = Vec::new();
                if std::mem::take(&mut first_copy[r][li(lane)]) {
                    waits.extend([begin[r], begin[to]]);
                }
                let src_buf = if s == 0 { input } else { Buf::Recv };
                if s > 0 {
                    waits.push(reduce[r][s - 1][k]);
                }
                if s >= slots {
                    // Slot reuse: the neighbour's last reduce that read any slot
                    // (the latest non-empty step <= s - slots) is done; earlier
                    // ones precede it on the neighbour's compute lane.
                    waits.extend(
                        reduce[to][..=s - slots]
                            .iter()
                            .rev()
                            .find_map(|v| v.last().copied()),
                    );
                }
                let off = slot * chunk_max + (sl.start - layout.range(c).start);
                let sig = b.copy(
                    r,
                    lane,
                    to,
                    Region::new(src_buf, sl.clone()),
                    Region::new(Buf::Scratch, off..off + sl.len()),
                    waits,
                    Label {
                        phase: Some(Phase::ReduceScatter),
                        step: s,
                        chunk: c,
                        slice: k,
                        note: "",
                    },
                );
                rs_copy[r][s].extend(sig);
                last_copy[r][li(lane)] = sig;
            }
        }
        for r in 0..n {
            let c = schedule::recv_chunk(Phase::ReduceScatter, r, s, n);
            let from = schedule::left(r, n);
            for (k, sl) in slice_of(c).into_iter().enumerate() {
                let off = slot * chunk_max + (sl.start - layout.range(c).start);
                let sig = b.push(
                    r,
                    Lane::Compute,
                    OpKind::Reduce {
                        dst: Region::new(Buf::Recv, sl.clone()),
                        a: Region::new(input, sl.clone()),
                        b: Region::new(Buf::Scratch, off..off + sl.len()),
                    },
                    vec![rs_copy[from][s][k]],
                    true,
                    Label {
                        phase: Some(Phase::ReduceScatter),
                        step: s,
                        chunk: c,
                        slice: k,
                        note: "",
                    },
                );
                reduce[r][s].extend(sig);
            }
        }
    }
    for s in 0..steps {
        for r in 0..n {
            let c = schedule::send_chunk(Phase::AllGather, r, s, n);
            let to = schedule::right(r, n);
            let from = schedule::left(r, n);
            for (k, sl) in slice_of(c).into_iter().enumerate() {
                let w = if s == 0 {
                    reduce[r][steps - 1][k]
                } else {
                    ag_copy[from][s - 1][k]
                };
                let lane = lane_of(k);
                let mut waits = vec![w];
                if std::mem::take(&mut first_copy[r][li(lane)]) {
                    waits.extend([begin[r], begin[to]]);
                }
                let sig = b.copy(
                    r,
                    lane,
                    to,
                    Region::new(Buf::Recv, sl.clone()),
                    Region::new(Buf::Recv, sl.clone()),
                    waits,
                    Label {
                        phase: Some(Phase::AllGather),
                        step: s,
                        chunk: c,
                        slice: k,
                        note: "",
                    },
                );
                ag_copy[r][s].extend(sig);
                last_copy[r][li(lane)] = sig;
            }
        }
    }
    for r in 0..n {
        // End: own copies done (they read recv) and the left neighbour's copies
        // into this rank done. Reduces precede End on the compute lane.
        let from = schedule::left(r, n);
        let waits: Vec<SignalId> = last_copy[r]
            .into_iter()
            .chain(last_copy[from])
            .flatten()
            .collect();
        b.end(r, waits);
    }
    b.finish()
}
