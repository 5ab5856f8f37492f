//! Parameter Server all-reduce (the seed article's baseline).
//!
//! Every rank copies its whole buffer into a slot of the root's scratch; the
//! root adds the slots into its own buffer with the reduce kernel, one slot
//! after another; then the root copies the result back into every rank. The
//! root receives (N-1)·D and sends (N-1)·D, so its load grows with N, while
//! a ring rank moves 2(N-1)/N·D each way.

use super::{local_copy_only, Algo};
use crate::plan::{Buf, Label, Lane, OpKind, Plan, PlanBuilder, Region, SignalId};

/// The root rank.
pub const ROOT: usize = 0;

pub fn plan(ranks: usize, count: usize, in_place: bool) -> Plan {
    let mut b = PlanBuilder::new(Algo::ParameterServer.label(), ranks, count, in_place);
    let begin = b.begin_all();
    if ranks == 1 || count == 0 {
        return local_copy_only(b, &begin);
    }
    let input = b.input();
    b.scratch((ranks - 1) * count);
    let slot = |r: usize| (r - 1) * count..r * count;
    let label = |note| Label {
        note,
        ..Label::default()
    };
    // Gather: every non-root rank pushes its input to the root.
    let mut gathered: Vec<Option<SignalId>> = vec![None; ranks];
    for r in (0..ranks).filter(|&r| r != ROOT) {
        gathered[r] = b.copy(
            r,
            Lane::Copy,
            ROOT,
            Region::new(input, 0..count),
            Region::new(Buf::Scratch, slot(r)),
            vec![begin[r], begin[ROOT]],
            label("gather"),
        );
    }
    // Reduce on the root: recv = input + slot(1), then recv += slot(r).
    let mut last = None;
    for r in (0..ranks).filter(|&r| r != ROOT) {
        let a = if last.is_none() { input } else { Buf::Recv };
        last = b.push(
            ROOT,
            Lane::Compute,
            OpKind::Reduce {
                dst: Region::new(Buf::Recv, 0..count),
                a: Region::new(a, 0..count),
                b: Region::new(Buf::Scratch, slot(r)),
            },
            gathered[r].into_iter().collect(),
            true,
            label("reduce"),
        );
    }
    // Broadcast: the root pushes the result into every rank's recv.
    let mut sent: Vec<Option<SignalId>> = vec![None; ranks];
    for r in (0..ranks).filter(|&r| r != ROOT) {
        sent[r] = b.copy(
            ROOT,
            Lane::Copy,
            r,
            Region::new(Buf::Recv, 0..count),
            Region::new(Buf::Recv, 0..count),
            last.into_iter().collect(),
            label("broadcast"),
        );
    }
    b.end(ROOT, sent[ranks - 1].into_iter().collect());
    for r in (0..ranks).filter(|&r| r != ROOT) {
        b.end(r, [gathered[r], sent[r]].into_iter().flatten().collect());
    }
    b.finish()
}
